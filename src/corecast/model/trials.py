"""Trials: the corpus' series split as a user with a small machine meets them, `auto` fitted once
on each, kept in a form that replays any set of priors without fitting again.

A `Trial` is one series fitted on the cores up to `train_frac` of its largest count (at least its
two smallest counts, `corpus.train_max`) with its held-out counts and their truth. `make_trials`
fits `auto` on each (every member, so that the priors can choose among them), optionally on the
series' machine (`topo.fit_for_target`), and then *freezes* the fit: every member's prediction
at the points the held-out counts ask for is computed once and kept (`Frozen`), so that the
fitted object is small, can cross a process boundary, and predicts under other priors without a
fit (`Trial.predict`: the very code `predict` runs, `with_priors`). `Trial.values` gives the
point prediction under priors faster still, from the members' log predictions (`Replay`): it
is what learning scores thousands of times; tests/test_trials.py checks it equals
`Trial.predict`.

`parallel_map` runs the fitting in worker processes (`--jobs`); nothing of it depends on the
order, so the result is the same with any number of workers.
"""
from __future__ import annotations

import dataclasses
import math
import multiprocessing
import os
import signal
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence, TypeVar

import numpy as np

from ..errors import UserError
from ..native import ending_with_parent
from . import auto, bands, twopoint
from .base import Fitted, Prediction
from .corpus import Series, train_max
from .priors import FALLBACK_SMT_YIELD, LOW_PAIR_MAX, Priors
from .series import convert
from .topo import Layout, OnTarget, cross_factor, fit_for_target

LEVEL = 0.8
#: The two-point USL's coherency shares learning chooses among (`learn`).
COHERENCY_SHARES = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Frozen(Fitted):
    """A member's predictions at a few sets of core counts, computed once: asked about one of
    them it answers as the member did (or raises what the member raised); asked about others,
    it cannot answer."""

    name: str
    answers: list[tuple[np.ndarray, Prediction | None, Exception | None]]
    level: float = LEVEL
    method: str = ""
    warnings: list[str] = field(default_factory=list)

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        c = np.asarray(cores, dtype=float)
        for at, p, err in self.answers:
            if level == self.level and c.shape == at.shape and np.array_equal(c, at):
                if err is not None:
                    raise err
                assert p is not None
                return dataclasses.replace(p, warnings=list(p.warnings), params=dict(p.params))
        raise ValueError(f"{self.name}: frozen at other core counts")

    def models(self, horizon: float) -> dict[str, Any]:
        return {}


def freeze(a: auto.AutoFit, asked: Sequence[np.ndarray]) -> tuple[auto.AutoFit, dict[str, np.ndarray]]:
    """`a` with each member frozen at the core counts `asked`, and the members' log throughput
    at the first of them (those that predicted finite positive values). At the others (what the
    machine's uncertain effects ask: `OnTarget.alternatives`) only the members a prediction
    under the shipped kind of priors reads there: those weighed, the stall method and the laws
    whose disagreement is the band's (timex's selection is costly and never read there)."""
    fits: dict[str, Fitted] = {}
    logx: dict[str, np.ndarray] = {}
    wanted = set(a.weights) | set(auto.LAWS) | {"estima"}
    for k, f in a.fits.items():
        answers: list[tuple[np.ndarray, Prediction | None, Exception | None]] = []
        for i, cores in enumerate(asked):
            if i > 0 and k not in wanted:
                continue
            try:
                p = f.predict(cores, LEVEL)
                answers.append((cores.copy(), p, None))
                x = convert(p, "throughput").value
                if i == 0 and np.all(np.isfinite(x)) and np.all(x > 0):
                    logx[k] = np.log(x)
            except (UserError, ValueError, np.linalg.LinAlgError) as err:
                answers.append((cores.copy(), None, err))
        fits[k] = Frozen(k, answers, method=f.method)
    return dataclasses.replace(a, fits=fits), logx


@dataclass
class Replay:
    """What the point prediction under any priors is made of (see `Trial.values`)."""

    kind: str                                   # "auto", "estima" or "two"
    scores: dict[str, float] = field(default_factory=dict)     # finite validation scores, not estima
    fitted: tuple[str, ...] = ()                # the members fitted
    logx: dict[str, np.ndarray] = field(default_factory=dict)  # member -> log throughput at the asked points
    two: dict[float, np.ndarray] = field(default_factory=dict)  # coherency share -> log throughput (kind two)
    floor: np.ndarray | None = None             # the measurements' floor at the asked points (`bands`)
    retro: bool = False                         # ... not applied: the fitted model turns down
    cross: tuple[np.ndarray, np.ndarray, float, tuple[float, float]] | None = None   # on a target: what
    #                                           the cross-node factor needs (`topo.cross_factor`)
    ceiling: np.ndarray | None = None
    floor_threads: np.ndarray | None = None     # on the machine measured: its measurements' floor


@dataclass
class Trial:
    """One series split at train_frac, with `auto` fitted (and frozen) on its first part."""

    series: Series
    train_max: float
    cores: np.ndarray            # held-out thread counts
    truth: np.ndarray            # held-out throughput
    fitted: Fitted | None        # the frozen auto: AutoFit, PriorBand(TwoPointFit), or OnTarget around one
    crosses: bool = False        # target mode: held-out threads cross more NUMA nodes than fitted ones
    replay: Replay | None = None
    pair: dict[float, np.ndarray] | None = None    # the two-point USL through the last two fitted points
    #: the two-point USL through the series' two smallest counts when the larger is at most
    #: LOW_PAIR_MAX cores and they are not already `pair` (what `coherency_share_low` is learned from)
    first: FirstPair | None = None
    #: other methods' (throughput, low, high) at the held-out counts, as `predict --method m`
    #: gives them (None: m could not predict), from the members auto fitted and validated
    baselines: dict[str, tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None] = field(
        default_factory=dict)

    @property
    def pair_top(self) -> float:
        """The larger of the two counts `pair` goes through: the largest fitted count."""
        return float(np.max(self.series.cores[self.series.cores <= self.train_max]))

    def prediction(self, pri: Priors, level: float = LEVEL) -> Prediction:
        """The prediction (throughput) at the held-out counts under the priors `pri`."""
        assert self.fitted is not None
        return convert(with_priors(self.fitted, pri).predict(self.cores, level), "throughput")

    def predict(self, pri: Priors) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
        """Throughput and band at the held-out counts under the priors `pri`."""
        p = self.prediction(pri)
        return p.value, p.low, p.high

    def band_scale(self, pri: Priors) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """(distance, σ, prediction) at the held-out points under `pri`: the distance r =
        count / largest fitted count, σ the prediction's own scale (`bands`); None when the
        prediction has no such band (not auto's)."""
        p = self.prediction(pri)
        parts = p.params.get("band_parts")
        if parts is None:
            return None
        machine = np.asarray((p.params.get("target") or {}).get("machine_uncertainty") or 0.0)
        r = self.cores / self.train_max
        return r, bands.scale(parts["noise"], parts["growth"], r, np.asarray(parts["spread"]), machine), p.value

    def band_scores(self, pri: Priors) -> tuple[np.ndarray, np.ndarray] | None:
        """(distance, score) of each held-out point under `pri`: the score log(truth /
        prediction) / σ (`band_scale`); None when the prediction has no such band."""
        got = self.band_scale(pri)
        if got is None:
            return None
        r, sigma, value = got
        return r, np.log(self.truth / value) / sigma

    def values(self, pri: Priors) -> np.ndarray:
        """The point prediction (throughput) under `pri`: the same as `predict`'s, from the
        members' frozen log predictions."""
        r = self.replay
        if r is None or r.kind == "other":
            return self.predict(pri)[0]
        if r.kind == "two":
            q = pri.share_for(self.pair_top)
            if q not in r.two:
                return self.predict(pri)[0]
            lx = r.two[q]
        elif r.kind == "estima" or not r.logx:
            lx = next(iter(r.logx.values())) if r.logx else None
            if lx is None:
                raise UserError("no member could predict")
        else:
            w = auto.choose(r.scores, pri)[0] if r.scores else auto.default_weights(dict.fromkeys(r.fitted), pri)
            w = {k: v for k, v in w.items() if k in r.logx}
            if not w:
                raise UserError("no member could predict")
            tot = sum(w.values())
            lx = sum((v / tot) * r.logx[k] for k, v in w.items())
        x = np.exp(lx)
        if r.floor is not None and not r.retro:
            x = np.maximum(x, r.floor)
        if r.cross is not None:
            x = x * cross_factor(*r.cross, pri.cross_domain)
        if r.ceiling is not None:
            x = np.minimum(x, r.ceiling)
        if r.floor_threads is not None and not r.retro:
            x = np.maximum(x, r.floor_threads)
        return x


def with_priors(f: Fitted, pri: Priors) -> Fitted:
    """The fitted `auto` as it would have been fitted under `pri` (nothing refitted)."""
    if isinstance(f, OnTarget):
        return dataclasses.replace(f, base=with_priors(f.base, pri), cross_cost=pri.cross_domain,
                                   table=pri.table_for(f.target.spec.known != "cpus"))
    if isinstance(f, auto.PriorBand):
        tp = f.fitted
        if isinstance(tp, twopoint.TwoPointFit):
            tp = dataclasses.replace(tp, coherency_share=pri.share_for(float(np.max(tp.series.cores))))
        return dataclasses.replace(f, fitted=tp, growth=pri.band_growth_two, table=pri.band_table)
    if isinstance(f, auto.AutoFit):
        if list(f.weights) == ["estima"]:          # the stall method: the priors do not choose it
            return dataclasses.replace(f, prior_growth=pri.band_growth, prior_weight=pri.band_weight,
                                       table=pri.band_table)
        finite = {k: v for k, v in f.scores.items() if math.isfinite(v) and k != "estima"}
        weights = auto.choose(finite, pri)[0] if finite else auto.default_weights(f.fits, pri)
        return dataclasses.replace(f, weights=weights, prior_growth=pri.band_growth,
                                   prior_weight=pri.band_weight, table=pri.band_table)
    return f


# ------------------------------------------------------------------------------ making trials
def _two_values(tp: twopoint.TwoPointFit, cores: np.ndarray) -> dict[float, np.ndarray]:
    out = {}
    for q in COHERENCY_SHARES:
        p = convert(dataclasses.replace(tp, coherency_share=q).predict(cores, LEVEL), "throughput")
        out[q] = np.log(np.maximum(p.value, 1e-300))
    return out


def _replay(f: Fitted, cores: np.ndarray, more: Sequence[np.ndarray] = ()) -> tuple[Fitted, Replay]:
    """The fitted auto frozen at what `cores` (and `more`) ask of it, and its replay at `cores`."""
    if isinstance(f, OnTarget):
        eff = f.target.effective(cores)
        base, r = _replay(f.base, eff, f.alternatives(cores, eff))
        pos = f.target.positions(cores)
        cross = np.array([q.cross_fraction for q in pos])
        ft = dataclasses.replace(f, base=base)
        r.cross = (eff, cross, ft.measured_crossing, ft.usl_overheads)
        r.ceiling = ft.ceiling(pos)
        if f.measured_series is not None and r.kind in ("auto", "two"):
            r.floor_threads = bands.floor(cores, *f.measured_series)
        return ft, r
    if isinstance(f, auto.PriorBand) and isinstance(f.fitted, twopoint.TwoPointFit) and not f.fitted.uses_stalls:
        fl = bands.floor(cores, *f.measured) if f.measured is not None else None
        return f, Replay("two", two=_two_values(f.fitted, cores), floor=fl, retro=f.retro[0])
    if isinstance(f, auto.AutoFit):
        a, logx = freeze(f, [cores, *more])
        fl = bands.floor(cores, *f.measured) if f.measured is not None else None
        if list(f.weights) == ["estima"]:
            return a, Replay("estima", logx={k: v for k, v in logx.items() if k == "estima"}, floor=fl,
                             retro=f.retro[0])
        finite = {k: v for k, v in f.scores.items() if math.isfinite(v) and k != "estima"}
        return a, Replay("auto", scores=finite, fitted=tuple(f.fits), logx=logx, floor=fl, retro=f.retro[0])
    return f, Replay("other")


def make_trial(s: Series, train_frac: float = 0.25, target: bool = False,
               smt_yield: float = FALLBACK_SMT_YIELD, baselines: Sequence[str] = (),
               cache: dict[bytes, Fitted] | None = None) -> Trial | None:
    """The trial of one series (None when it cannot be fitted). target: fit and predict on the
    series' machine and placement (effective cores, crossing). baselines: members to predict
    with as single methods, their bands calibrated on their own validation (`predict --method`),
    from auto's fits (nothing fitted twice). cache: auto's fits of this series by the cores
    they were fitted on, shared between its trials (plain, and on its machine at any yield: where
    the fitted points' effective cores are the threads themselves, the fit is the same)."""
    k = train_max(s.cores, train_frac)
    train = s.cores <= k
    if train.all():
        return None
    ds = s.dataset()
    tr = ds.select(ds.cores <= k)
    cores = s.cores[~train]
    memo = cache if cache is not None else {}

    def fit(d: Any) -> Fitted:
        key = np.asarray(d.cores, dtype=float).tobytes()
        if key not in memo:
            memo[key] = auto.fit_dataset(d, priors=Priors())
        return memo[key]

    try:
        if target and s.machine is not None:
            fitted: Fitted = fit_for_target(fit, tr, s.machine, s.order, measured=s.machine, measured_order=s.order,
                                            priors=Priors(smt_yield=smt_yield))
        else:
            fitted = fit(tr)
        base = {m: _single(fitted, m, cores) for m in baselines}
        fitted, rep = _replay(fitted, cores)
    except (UserError, ValueError, np.linalg.LinAlgError):
        return None
    crosses = False
    if isinstance(fitted, OnTarget):
        lay = Layout(s.machine, s.order, smt_yield)
        crosses = bool(np.max(lay.crossing(cores)) > fitted.measured_crossing + 1e-9)
    return Trial(s, k, cores, s.throughput[~train], fitted, crosses, rep, _pair(s, k, cores),
                 first=_first_pair(s, k), baselines=base)


def _single(f: Fitted, m: str, cores: np.ndarray) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None:
    """Member `m` of the fitted auto as a single method (`calibration.calibrated`), on the
    target when auto is: its prediction at `cores` (None where it cannot predict)."""
    inner = f.base if isinstance(f, OnTarget) else f
    if not isinstance(inner, auto.AutoFit):
        return None
    one = inner.calibrated_member(m)
    if one is None:
        return None
    g: Fitted = dataclasses.replace(f, base=one, method=m) if isinstance(f, OnTarget) else one
    try:
        p = convert(g.predict(cores, LEVEL), "throughput")
    except (UserError, ValueError, np.linalg.LinAlgError, ZeroDivisionError):
        return None
    return p.value, p.low, p.high


def _pair(s: Series, k: float, cores: np.ndarray) -> dict[float, np.ndarray] | None:
    """The two-point USL through the last two fitted points, at every coherency share (what the
    share is learned from)."""
    fit_cores = np.sort(s.cores[s.cores <= k])
    if len(fit_cores) < 2:
        return None
    keep = (s.cores >= fit_cores[-2]) & (s.cores <= k)
    ds = s.dataset()
    sub = ds.select(np.isin(ds.cores, s.cores[keep]))
    try:
        tp = twopoint.fit_dataset(sub, coherency_share=0.1)
        return {q: np.exp(v) for q, v in _two_values(tp, cores).items()}
    except (UserError, ValueError):
        return None


@dataclass
class FirstPair:
    """A series through its two smallest counts (the larger at most LOW_PAIR_MAX cores), as a
    program measured on a small machine: the two-point USL at every coherency share and the
    throughput at every larger count (what `coherency_share_low` is learned from)."""

    series: Series
    cores: np.ndarray
    truth: np.ndarray
    pair: dict[float, np.ndarray]


def _first_pair(s: Series, k: float) -> FirstPair | None:
    counts = np.unique(s.cores)
    if len(counts) < 3 or counts[1] > LOW_PAIR_MAX:
        return None
    if len(counts[counts <= k]) == 2:        # the trial's own pair is this one
        return None
    held = s.cores > counts[1]
    got = _pair(s, float(counts[1]), s.cores[held])
    return FirstPair(s, s.cores[held], s.throughput[held], got) if got is not None else None


def make_trials(series: Sequence[Series], train_frac: float = 0.25, target: bool = False,
                smt_yield: float = FALLBACK_SMT_YIELD, jobs: int = 1,
                progress: Callable[[int, int], None] | None = None) -> list[Trial]:
    """A trial per series (those that cannot be fitted are left out), in the series' order."""
    got = parallel_map(_make_one, [(s, train_frac, target, smt_yield) for s in series], jobs, progress)
    return [t for t in got if t is not None]


def _make_one(args: tuple[Series, float, bool, float]) -> Trial | None:
    return make_trial(*args)


# ------------------------------------------------------------------------------ processes
def default_jobs() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parallel_map(fn: Callable[[T], R], items: Iterable[T], jobs: int = 1,
                 progress: Callable[[int, int], None] | None = None) -> list[R]:
    """[fn(x) for x in items], in `jobs` worker processes (forked: `fn` and the items need not be
    importable by name, the results must be picklable), in the items' order. `progress(done,
    total)` after each item."""
    items = list(items)
    n = len(items)
    if jobs <= 1 or n <= 1:
        out = []
        for i, x in enumerate(items):
            out.append(fn(x))
            if progress:
                progress(i + 1, n)
        return out
    global _FN
    _FN = fn
    ctx = multiprocessing.get_context("fork")
    res: list[Any] = [None] * n
    # a worker ends when this process does, however it ends (SIGKILL included)
    with ctx.Pool(min(jobs, n), initializer=ending_with_parent(signal.SIGKILL)) as pool:
        for done, (i, r) in enumerate(pool.imap_unordered(_call, list(enumerate(items)),
                                                          chunksize=max(1, min(8, n // (4 * jobs)))), 1):
            res[i] = r
            if progress:
                progress(done, n)
    _FN = None
    return res


_FN: Callable[[Any], Any] | None = None


def _call(ix: tuple[int, Any]) -> tuple[int, Any]:
    assert _FN is not None
    return ix[0], _FN(ix[1])
