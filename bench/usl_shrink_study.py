"""Study (issue 23, item 3 "wins, not ties"): shrink the USL's α and β toward centres learned
from the corpus -- a penalised (MAP) fit of auto's USL member -- judged by leave-one-source-out on
data/corpus, without or with each source's machine, on the scorecard's frozen trials. Not
shipped: a study whose figures are in docs/predict.md ("What was tried").

The band's coverage is estimated, not measured as `evaluate` would: the scale σ of each held-out
point is auto's own (from the plain member set), the score log(truth / shrunk prediction) / σ,
and each source's conformal table is learned from the other sources' scores (nested, as
`scorecard.learn_loso`). With λ = 0 it gives the scorecard's 77.0% without the machines; with
them 79.7% against its 81.0% (one table for every source here, where the scorecard keeps the
plain table for sources without a known topology).

Per source left out, from the other sources only: the centre (the median over the sources of
each source's median of (u, v) fitted on the series' first quarter, `--centre quarter`, or on
the whole series, `--centre full`), auto's priors re-learned (`learn.learn`) on the trials with
the USL member replaced by the penalised fit at each strength λ, and λ chosen among LAMBDAS by the
bagged score (`learn.choose_bagged`). The left-out source is then predicted with its fold's
centre, λ and priors and compared with the plain USL (`predict --method usl`).

Parameterisation (dimensionless, at the largest fitted count k): a = α·k, b = β·k², the
contention and coherency overheads at k; u = log(a + EPS), v = log(b + EPS). Objective on the
unit scale (throughput / its largest fitted value):
Σ (f − X)² / S² + λ [(u − μu)² + (v − μv)²]; γ profiled (least squares), (u, v) by a grid then
L-BFGS-B (with λ = 0 it reaches the solver's optimum of `usl.fit`).

Limits: auto's rolling-origin validation (the partner's no-weight rule) and the retrograde test
still read the plain USL fit; on a machine the penalised fit is on the effective cores
(`OnTarget.effective`) with the thread-count centre.

    .venv/bin/python bench/usl_shrink_study.py [--centre quarter|full] [--penalise ab|a|b] [--machine]
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.errors import UserError
from corecast.model import bands, learn, scorecard, trials
from corecast.model.corpus import load_corpus, train_max
from corecast.model.priors import Priors

EPS = 0.01
S = 0.05
LAMBDAS = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3)
WA = WB = 1.0            # which of (u, v) are penalised (--penalise)
UG = np.linspace(np.log(EPS), np.log(10.0), 61)
VG = np.linspace(np.log(EPS), np.log(100.0), 61)


def _obj(N, x, k, lam, mu, U, V):
    a = np.clip((np.exp(U) - EPS) / k, 0.0, 1.0)
    b = np.maximum(np.exp(V) - EPS, 0.0) / k ** 2
    base = N / (1 + a[..., None] * (N - 1) + b[..., None] * N * (N - 1))
    g = (base * x).sum(-1) / (base * base).sum(-1)
    r = g[..., None] * base - x
    return (r * r).sum(-1) / S ** 2 + lam * (WA * (U - mu[0]) ** 2 + WB * (V - mu[1]) ** 2), g


def grid_fit(N, X, k, lam=0.0, mu=(0.0, 0.0)):
    """(u, v, γ) of the penalised fit: a grid, then a bounded quasi-Newton polish."""
    sc = X.max()
    x = X / sc
    ub, vb = (np.log(EPS), np.log(k + EPS)), (np.log(EPS), np.log(1e6))
    U, V = np.meshgrid(np.linspace(*ub, 81), np.linspace(*vb, 81), indexing="ij")
    obj, g = _obj(N, x, k, lam, mu, U, V)
    i, j = np.unravel_index(np.argmin(obj), obj.shape)
    res = minimize(lambda p: float(_obj(N, x, k, lam, mu, np.array(p[0]), np.array(p[1]))[0]),
                   [U[i, j], V[i, j]], method="L-BFGS-B", bounds=[ub, vb])
    u, v = (res.x if res.fun <= obj[i, j] else (U[i, j], V[i, j]))
    _, gg = _obj(N, x, k, lam, mu, np.array(u), np.array(v))
    return float(u), float(v), float(gg) * sc


def predict(fit, k, cores):
    u, v, g = fit
    a = min(max((np.exp(u) - EPS) / k, 0.0), 1.0)
    b = max(np.exp(v) - EPS, 0.0) / k ** 2
    return g * cores / (1 + a * (cores - 1) + b * cores * (cores - 1))


def main() -> None:
    global WA, WB
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--centre", choices=("quarter", "full"), default="quarter")
    ap.add_argument("--penalise", choices=("ab", "a", "b"), default="ab")
    ap.add_argument("--machine", action="store_true", help="each source's machine given")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    WA, WB = float("a" in args.penalise), float("b" in args.penalise)
    centre_kind, target = args.centre, args.machine
    _machine.header(f"USL shrinkage study: centre {centre_kind}, penalised {args.penalise}, "
                    f"{'with' if target else 'without'} the machines")
    series = load_corpus("data/corpus")
    t0 = time.time()
    f = scorecard.fit_corpus(series, ["auto", "usl"], 0.25, trials.LEVEL, target, True, Priors(), args.jobs,
                             lambda w, d, n: None)
    print(f"fitted in {time.time() - t0:.0f}s", flush=True)
    raw = f.raw_trials()
    sources = sorted({s.source for s in series})
    # per series: the full-series fit and the first-quarter fit, as (u, v) at the fitted k
    uv_full, uv_q = {}, {}
    for s in series:
        k = train_max(s.cores, 0.25)
        if (s.cores > k).sum() == 0 or (s.cores <= k).sum() < 3:
            continue
        uv_full[id(s)] = grid_fit(s.cores, s.throughput, k)[:2]
        m = s.cores <= k
        uv_q[id(s)] = grid_fit(s.cores[m], s.throughput[m], k)[:2]
    uvs = uv_full if centre_kind == "full" else uv_q

    def centre(without: str) -> tuple[float, float]:
        by: dict[str, list] = {}
        for s in series:
            if s.source != without and id(s) in uvs:
                by.setdefault(s.source, []).append(uvs[id(s)])
        mu = np.median([np.median(np.array(v), axis=0) for v in by.values()], axis=0)
        return round(float(mu[0]), 1), round(float(mu[1]), 1)       # quantised: shared fits

    cache: dict = {}

    def modified(t, lam, mu):
        r = t.replay
        if r is None or r.kind != "auto" or "usl" not in r.logx or lam == 0.0:
            return t
        key = (id(t), lam, mu)
        if key not in cache:
            s = t.series
            m = s.cores <= t.train_max
            if m.sum() < 3:
                cache[key] = t
            else:
                # on a machine: fitted on the effective cores, asked at the held-out ones'
                eff = t.fitted.effective if hasattr(t.fitted, "target") else (lambda c: c)
                n_fit, n_ask = eff(s.cores[m]), eff(t.cores)
                kk = float(np.max(n_fit))
                fit = grid_fit(n_fit, s.throughput[m], kk, lam, mu)
                lx = np.log(np.maximum(predict(fit, kk, n_ask), 1e-300))
                cache[key] = dataclasses.replace(t, replay=dataclasses.replace(r, logx={**r.logx, "usl": lx}))
        return cache[key]

    rows = {}
    # (source, distance, score, σ) of every held-out point, for λ = 0 and the learned λ's
    band_in: dict[float, list] = {lam: [] for lam in LAMBDAS}
    for src in sources:
        mu = centre(src)
        train = [t for t in raw if t.series.source != src]
        others = [s for s in series if s.source != src]
        res = {}
        for lam in LAMBDAS:
            mt = [modified(t, lam, mu) for t in train]
            y = f.y_of[src]
            cross = [t for s in others if (t := f.on_machine(s, y)) is not None and t.crosses]
            pri = learn.learn(mt, cross, others, 0.25)
            res[lam] = (learn.score(mt, lambda t, p=pri: t.values(p)), pri, mt)
        # the strength: bagged over the training sources, each λ under its own learned priors
        idx = {lam: {id(t.series): mt_i for mt_i, t in zip(res[lam][2], train)} for lam in LAMBDAS}
        ch = learn.choose_bagged(train, LAMBDAS,
                                 lambda lam: (lambda t: idx[lam][id(t.series)].values(res[lam][1])))
        held = [t for s in series if s.source == src and (t := f.scored(s)) is not None]
        for lam in dict.fromkeys((0.0, ch.value)):
            band_in[lam].extend(x for t in held if (x := held_scores(t, modified(t, lam, mu), res[lam][1]))
                                is not None)
        out = {}
        for lam in (0.0, ch.value) + LAMBDAS:
            pri = res[lam][1]
            errs = [learn.series_error(t, modified(t, lam, mu).values(pri)) for t in held]
            out[lam] = float(np.median(errs)) if errs else np.nan
        usl = [learn.series_error(t, b[0]) for t in held if (b := t.baselines.get("usl")) is not None
               and np.all(np.isfinite(b[0])) and np.all(b[0] > 0)]
        rows[src] = (mu, ch.value, out, float(np.median(usl)) if usl else np.nan)
        print(f"{src:28s} mu={mu} lam*={ch.value:g} auto0={out[0.0]:6.1f} shrunk={out[ch.value]:6.1f} "
              f"usl={rows[src][3]:6.1f} " + " ".join(f"{lam:g}:{out[lam]:.1f}" for lam in LAMBDAS),
              flush=True)
    learned = [x for lam, xs in band_in.items() for x in xs if rows[x[0]][1] == lam]
    for name, got in (("plain (λ = 0)", band_in[0.0]), ("shrunk, λ learned per fold", learned)):
        print(f"{name}: 80% band coverage (nested, approximate) {coverage(got):.1%}")
    summary("plain (λ = 0)", rows, lambda r: r[2][0.0])
    summary("shrunk, λ learned per fold", rows, lambda r: r[2][r[1]])
    for lam in LAMBDAS[1:]:
        summary(f"λ = {lam:g} in every fold", rows, lambda r, lam=lam: r[2][lam])
    print(f"the USL: median {np.median([r[3] for r in rows.values() if np.isfinite(r[3])]):.1f}; "
          f"{time.time() - t0:.0f}s")


def held_scores(t, mt, pri):
    """(source, r, score, σ) of a held-out trial's points: σ the band's own scale from
    the plain member set's prediction (`Trial.band_scores`), the score from `mt`'s point
    prediction. None where auto gives no such band."""
    try:
        got = t.band_scale(pri)
        if got is None:
            return None
        r, sigma, _ = got
        return t.series.source, r, np.log(t.truth / mt.values(pri)) / sigma, sigma
    except (ValueError, np.linalg.LinAlgError, ZeroDivisionError, UserError):
        return None


def coverage(got: list) -> float:
    """Share of all held-out points inside the 80% band, a source's conformal table learned from
    the other sources' scores (`learn.band_table`, nested as `scorecard.learn_loso`)."""
    inside = total = 0
    for src in sorted({x[0] for x in got}):
        tab = learn.band_table([(s, r, z) for s, r, z, _ in got if s != src])
        if tab is None:
            continue
        c = bands.Conformal.from_dict(tab)
        for s, r, z, sig in got:
            if s != src:
                continue
            q_lo, q_hi = c.quantiles(r, trials.LEVEL)
            lo = np.minimum(np.minimum(q_lo * sig, 0.0), -bands.MIN_HALF_WIDTH)
            hi = np.maximum(np.maximum(q_hi * sig, 0.0), bands.MIN_HALF_WIDTH)
            inside += int(((z * sig >= lo) & (z * sig <= hi)).sum())
            total += len(z)
    return inside / total if total else float("nan")


def summary(name: str, rows: dict, get) -> None:
    """Median over all sources; over those the USL predicts: below it by any margin, by more
    than 0.1 point, within 0.1 either way, above by more; the geometric mean."""
    a = np.array([get(r) for r in rows.values()])
    u = np.array([r[3] for r in rows.values()])
    ok = np.isfinite(u)
    print(f"{name:28s} median {np.median(a):5.1f}  below the USL {int((a < u)[ok].sum())} of {int(ok.sum())}"
          f" (by > 0.1: {int((a < u - 0.1)[ok].sum())}, ties {int((abs(a - u) <= 0.1)[ok].sum())}, "
          f"above {int((a > u + 0.1)[ok].sum())})  geometric mean {np.exp(np.mean(np.log(a[ok]))):.1f}")

if __name__ == "__main__":
    main()
