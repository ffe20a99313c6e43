"""Study (issue 23, item 3 "wins, not ties"): two more ways past the USL, judged on data/corpus
with the scorecard's frozen trials (no machines; the series auto fits its members to, not the
two-point ones). Not shipped: a study whose figures are in docs/predict.md ("What was tried").

1. **Parameter-free ensembles**: the geometric mean, or the median, of the members' predictions
   (the USL with any of Amdahl's law, timex, the power law and PMNF), floored at the
   measurements as auto is. Nothing is learned, so nothing can leak from the source scored.
2. **A bias learned by distance**: where the first quarter fits no coherency term (β = 0, the
   USL is Amdahl's law), the held-out points fall below the prediction in most sources; where
   it fits one, they lie above. Per source left out, from the other sources only: the slope c
   of log(truth / auto's prediction) on ln(count / largest fitted count), median over each
   source's series then over the sources, for the β = 0 series (and, second variant, for the
   others too); the left-out source's predictions are multiplied by (count / largest)^(k c),
   k = 1 or 0.5, and floored again. (The slope never saw the source; the prediction it
   corrects is the shipped auto's, whose priors did: the comparison is with that row.)
3. **The USL's posterior mean** instead of its best fit: a fit with β = 0 sits on the edge of
   what the data allow, and the first quarter rarely rules out some coherency. Over a grid of
   the contention and coherency overheads at the largest fitted count k (A = α(k - 1) and
   B = βk(k - 1), each uniform on [0, c], c = 4, 2 or A 4 and B 1), γ fitted for each, the
   points weighed by exp(-RSS / 2s²) in log throughput (s² the best fit's RSS over its points
   less 3): the mean of the log predictions; alone, blended with Amdahl's law as auto blends
   the USL, or only where the best fit has β = 0. Nothing learned from the corpus.

Against `predict --method usl` on the same series: median over the sources of each source's
median error, geometric mean, sources below the USL (any margin), more than a point below,
more than a point above.

    .venv/bin/python bench/ensemble_study.py [--jobs N]
"""
from __future__ import annotations

import argparse
import itertools
import sys
from pathlib import Path
from typing import Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.model import corpus, scorecard  # noqa: E402
from corecast.model.priors import Priors, load  # noqa: E402
from corecast.model.trials import default_jobs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MEMBERS = ("usl", "amdahl", "timex", "power", "pmnf")


def rows_of(jobs: int) -> list[dict]:
    """Per series auto fitted its members to: the members' log predictions, the floor, the
    truth, the distances, and the shipped auto's prediction (priors learned from every source:
    only a yardstick here, never the result of a study)."""
    series = corpus.load_corpus(ROOT / "data" / "corpus")
    f = scorecard.fit_corpus(series, ["auto"], 0.25, 0.8, False, True, Priors(), jobs, lambda *a: None)
    shipped = load()
    out = []
    for t in f.raw_trials():
        r = t.replay
        if r is None or r.kind != "auto" or "usl" not in r.logx:
            continue
        out.append({"src": t.series.source, "logx": dict(r.logx), "truth": t.truth, "lr": np.log(t.cores / t.train_max),
                    "cores": t.cores, "train": (t.series.cores[t.series.cores <= t.train_max],
                                                t.series.throughput[t.series.cores <= t.train_max]),
                    "floor": None if r.retro else r.floor, "shipped": t.values(shipped),
                    "beta0": bool(np.allclose(r.logx["usl"], r.logx.get("amdahl", np.nan), atol=1e-6))})
    return out


def floored(x: np.ndarray, r: dict) -> np.ndarray:
    return x if r["floor"] is None else np.maximum(x, r["floor"])


def err(x: np.ndarray, r: dict) -> float:
    return float(np.median(np.abs(x / r["truth"] - 1.0))) * 100.0


def per_source(rows: list[dict], predict: Callable[[dict], np.ndarray]) -> dict[str, float]:
    srcs = sorted({r["src"] for r in rows})
    return {s: float(np.median([err(predict(r), r) for r in rows if r["src"] == s])) for s in srcs}


def line(name: str, got: dict[str, float], usl: dict[str, float]) -> str:
    v = np.array([got[s] for s in usl])
    b = np.array(list(usl.values()))
    return (f"{name:42s} {np.median(v):6.1f} {np.exp(np.mean(np.log(v))):6.1f} {int((v < b - 1e-9).sum()):5d} "
            f"{int((v < b - 1).sum()):5d} {int((v > b + 1).sum()):5d}")


def slope(rows: list[dict]) -> float:
    """Median over the sources of the median over their series of the least-squares slope of
    log(truth / auto) on ln(distance), through the origin (0 without rows)."""
    by: dict[str, list[float]] = {}
    for r in rows:
        e = np.log(r["truth"] / r["shipped"])
        by.setdefault(r["src"], []).append(float(np.sum(e * r["lr"]) / np.sum(r["lr"] ** 2)))
    return float(np.median([np.median(v) for v in by.values()])) if by else 0.0


def posterior_mean(r: dict, a_max: float, b_max: float) -> np.ndarray:
    """The USL's prediction at the held-out counts averaged over its overheads' posterior (3.)."""
    n, x = (np.asarray(v, dtype=float) for v in r["train"])
    ok = np.isfinite(x) & (x > 0)
    n, x = n[ok], x[ok]
    k = n.max()
    al = np.linspace(0.0, a_max, 81)[:, None] / (k - 1)
    be = np.linspace(0.0, b_max, 121)[None, :] / (k * (k - 1))

    def shape(c: np.ndarray) -> np.ndarray:          # log(n / (1 + α(n - 1) + βn(n - 1))) on the grid
        return np.log(c) - np.log(1 + al[..., None] * (c - 1) + be[..., None] * c * (c - 1))

    lf = shape(n)
    lg = (np.log(x) - lf).mean(axis=-1)
    rss = ((np.log(x) - lf - lg[..., None]) ** 2).sum(axis=-1)
    s2 = max(rss.min() / max(len(n) - 3, 1), 1e-6)
    w = np.exp(-(rss - rss.min()) / (2 * s2))
    w /= w.sum()
    return np.exp((w[..., None] * (lg[..., None] + shape(np.asarray(r["cores"], dtype=float)))).sum(axis=(0, 1)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=default_jobs())
    a = ap.parse_args()
    print("# auto against parameter-free ensembles and a bias learned by distance (data/corpus, no machines)")
    print(f"# machine: {_machine.describe()}")
    rows = rows_of(a.jobs)
    usl = per_source(rows, lambda r: np.exp(r["logx"]["usl"]))
    print(f"{len(rows)} series of {len(usl)} sources; against predict --method usl")
    print(f"{'prediction':42s} {'median':>6s} {'geo':>6s} {'below':>5s} {'>1pt':>5s} {'worse':>5s}")
    print(line("auto (shipped priors)", per_source(rows, lambda r: r["shipped"]), usl))
    print(line("the USL floored at the measurements", per_source(rows, lambda r: floored(np.exp(r["logx"]["usl"]), r)), usl))
    found = []
    for n in range(2, len(MEMBERS) + 1):
        for ks in itertools.combinations(MEMBERS[1:], n - 1):
            ks = ("usl", *ks)

            def gm(r: dict, ks: tuple[str, ...] = ks) -> np.ndarray:
                return floored(np.exp(np.mean([r["logx"][k] for k in ks if k in r["logx"]], axis=0)), r)

            def md(r: dict, ks: tuple[str, ...] = ks) -> np.ndarray:
                return floored(np.exp(np.median([r["logx"][k] for k in ks if k in r["logx"]], axis=0)), r)
            found.append((f"geometric mean of {'+'.join(ks)}", per_source(rows, gm)))
            if n >= 3:
                found.append((f"median of {'+'.join(ks)}", per_source(rows, md)))
    found.sort(key=lambda x: float(np.median(list(x[1].values()))))
    for name, got in found:
        print(line(name, got, usl))
    srcs = list(usl)
    for both in (False, True):
        for k in (1.0, 0.5):
            got = {}
            for s in srcs:
                train = [r for r in rows if r["src"] != s]
                c0 = k * slope([r for r in train if r["beta0"]])
                c1 = k * slope([r for r in train if not r["beta0"]]) if both else 0.0
                got[s] = float(np.median([err(floored(r["shipped"] * np.exp((c0 if r["beta0"] else c1) * r["lr"]), r), r)
                                          for r in rows if r["src"] == s]))
            print(line(f"bias by distance, {'both groups' if both else 'beta = 0 only'}, k = {k:g}", got, usl))
    for a_max, b_max in ((4.0, 4.0), (2.0, 2.0), (4.0, 1.0)):
        post = {id(r): posterior_mean(r, a_max, b_max) for r in rows}
        tag = f"A, B on [0, {a_max:g}], [0, {b_max:g}]"
        print(line(f"USL posterior mean, {tag}", per_source(rows, lambda r: floored(post[id(r)], r)), usl))
        print(line("  ... blended 0.75 : 0.25 with Amdahl", per_source(
            rows, lambda r: floored(np.exp(0.75 * np.log(post[id(r)]) + 0.25 * r["logx"]["amdahl"]), r)), usl))
        print(line("  ... only where beta = 0, else auto", per_source(
            rows, lambda r: floored(post[id(r)], r) if r["beta0"] else r["shipped"]), usl))
    return 0


if __name__ == "__main__":
    sys.exit(main())
