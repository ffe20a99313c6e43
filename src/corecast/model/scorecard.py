"""How well each method predicts a corpus of real scaling curves, source by source.

Every series is fitted on its first part (`corecast.model.corpus.train_max`) and predicted
beyond. Per source: the median over its series of each series' median absolute % error, and
the share of held-out points inside the method's band (coverage at the stated level); overall,
the median of the sources' medians -- every source weighs the same, however many series it has.

Methods: `auto` with the priors shipped in corecast (`priors.toml`), or, with
`leave_one_source_out`, with priors learned from the *other* sources only (the honest score of
anything learned from the corpus); the single methods as `predict --method` fits them (bands
calibrated on their own rolling-origin errors); `extrap`, Extra-P's model, where the package is
installed. With `target` the series' machine and placement (its `source.toml`) are given, as
`predict --target-machine` with `--measured-machine` would: every method is fitted on effective
cores and asked about the held-out threads' (`corecast.model.topo`); Extra-P never is.

Leave-one-source-out is nested for the band: each source's priors are learned without it
(`learn_loso`), every held-out point of every source is then scored with its own source's
priors, and a source's band is learned from the *other* sources' scores (`learn.band_table`):
neither its priors nor its band saw it. `learn_shipped` learns the shipped priors the same way
from every source.

Speed: what does not change from one source left out to the next is fitted once (`fit_corpus`:
auto's trials, frozen and replayed under any priors, `corecast.model.trials`; the single
methods from auto's own fits; a series' fit shared between its trials wherever the effective
cores are the threads themselves), in `jobs` worker processes; only the learning is redone per
source. `bench/loso_speed.py` times it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import UserError
from . import extrap, learn, methods, predictors, trials
from .corpus import Series, train_max
from .priors import Priors
from .priors import load as load_priors
from .series import convert
from .topo import Layout, fit_for_target

#: progress(what, done, total): what the scorecard is doing, and how far it is.
ProgressFn = Callable[[str, int, int], None]

#: Methods scored besides auto by default: those offered as --method that run on any data, by rank.
BASELINES = tuple(n for n in methods.RANKED if methods.REGISTRY[n].role == "method")
#: Single methods that auto fits and validates as members (scored from its trials).
AUTO_MEMBERS = methods.RANKED


@dataclass
class SourceScore:
    source: str
    series: int
    median_error: dict[str, float] = field(default_factory=dict)      # method -> % (median of series medians)
    coverage: dict[str, float] = field(default_factory=dict)          # method -> share of held-out points in band
    failed: dict[str, int] = field(default_factory=dict)              # method -> series it could not predict
    points: dict[str, int] = field(default_factory=dict)              # method -> held-out points with a band
    priors: Priors | None = None                                     # auto's priors for this source


#: Percentage points within which two sources' median errors are a tie: half the last decimal
#: the scorecard prints, so that a count of wins agrees with the table a reader sees.
TIE_MARGIN = 0.05


@dataclass
class CorpusEvaluation:
    methods: list[str]
    train_frac: float
    level: float
    sources: list[SourceScore]
    target: bool = False
    leave_one_source_out: bool = False
    notes: list[str] = field(default_factory=list)
    per_series: list[tuple[Series, dict[str, tuple[float, float | None]]]] = field(default_factory=list, repr=False)
    fitting: Any = field(default=None, repr=False, compare=False)     # the `Fitting` scored (in memory only)

    def overall(self) -> dict[str, float]:
        """Median over the sources of each method's median error."""
        out = {}
        for m in self.methods:
            v = [s.median_error[m] for s in self.sources if m in s.median_error]
            out[m] = float(np.median(v)) if v else math.nan
        return out

    def common_sources(self) -> list[SourceScore]:
        """The sources where every method predicted."""
        return [s for s in self.sources if all(m in s.median_error for m in self.methods)]

    def overall_common(self) -> dict[str, float]:
        """Median over the sources where every method predicted (the same sources for all)."""
        common = self.common_sources()
        return {m: float(np.median([s.median_error[m] for s in common])) if common else math.nan
                for m in self.methods}

    def geomean_common(self) -> dict[str, float]:
        """Geometric mean over the sources where every method predicted. A median over a few
        dozen sources can sit between two neighbouring order statistics far apart; the
        geometric mean says how the errors compare as a whole (each error floored at 0.1%)."""
        common = self.common_sources()
        return {m: float(np.exp(np.mean([np.log(max(s.median_error[m], 0.1)) for s in common])))
                if common else math.nan for m in self.methods}

    def _differences(self, method: str, against: str) -> list[float]:
        """`method`'s median error less `against`'s, in each source where both predicted."""
        return [s.median_error[method] - s.median_error[against] for s in self.sources
                if method in s.median_error and against in s.median_error]

    def wins(self, method: str, against: str, margin: float = TIE_MARGIN) -> tuple[int, int]:
        """(sources where `method`'s median error is below `against`'s by more than `margin`
        percentage points, sources with both). Two methods that give the same curve differ by
        rounding (1e-8 points): that is a tie, not a win."""
        d = self._differences(method, against)
        return sum(1 for x in d if x < -margin), len(d)

    def head_to_head(self, method: str, against: str) -> dict[str, float]:
        """In how many sources `method` is below `against` by more than TIE_MARGIN (a win),
        within it of it (equal to the decimal), above."""
        d = self._differences(method, against)
        below, equal = sum(1 for x in d if x < -TIE_MARGIN), sum(1 for x in d if abs(x) <= TIE_MARGIN)
        return {"below": below, "equal": equal, "above": len(d) - below - equal, "sources": len(d),
                "margin_points": TIE_MARGIN}

    def coverage_summary(self, method: str = "auto") -> dict[str, float | int]:
        """The coverage of `method`'s band: over all held-out points, the mean over the sources,
        and in how many sources it lies within 65-95% and within 75-85%."""
        cs = [(s.coverage[method], s.points.get(method, 0)) for s in self.sources if method in s.coverage]
        if not cs:
            return {}
        c = np.array([x for x, _ in cs])
        n = np.array([x for _, x in cs], dtype=float)
        return {"points": float(np.sum(c * n) / np.sum(n)) if n.sum() else math.nan,
                "mean_over_sources": float(c.mean()), "sources": len(cs),
                "within_65_95": int(np.sum((c >= 0.65) & (c <= 0.95))),
                "within_75_85": int(np.sum((c >= 0.75) & (c <= 0.85)))}

    def to_dict(self) -> dict[str, Any]:
        def num(v: float | None) -> float | None:
            return None if v is None or not math.isfinite(v) else round(float(v), 3)
        return {"train_frac": self.train_frac, "level": self.level, "methods": self.methods,
                "target_machine": self.target, "leave_one_source_out": self.leave_one_source_out,
                "notes": self.notes,
                "sources": [{"source": s.source, "series": s.series,
                             "median_abs_pct_error": {m: num(v) for m, v in s.median_error.items()},
                             "coverage": {m: num(v) for m, v in s.coverage.items()},
                             "failed": s.failed,
                             "priors": None if s.priors is None else {
                                 "default": s.priors.default, "partner": s.priors.partner,
                                 "default_weight": s.priors.default_weight, "switch_ratio": s.priors.switch_ratio,
                                 "coherency_share": s.priors.coherency_share,
                                 "coherency_share_low": s.priors.coherency_share_low, "smt_yield": s.priors.smt_yield,
                                 "cross_domain": s.priors.cross_domain, "band_growth": s.priors.band_growth,
                                 "origin": s.priors.origin}}
                            for s in self.sources],
                "overall_median_abs_pct_error": {m: num(v) for m, v in self.overall().items()},
                "overall_on_common_sources": {m: num(v) for m, v in self.overall_common().items()},
                "geometric_mean_on_common_sources": {m: num(v) for m, v in self.geomean_common().items()},
                "coverage": {m: self.coverage_summary(m) for m in self.methods if self.coverage_summary(m)},
                "auto_against": {m: self.head_to_head("auto", m) for m in self.methods
                                 if m != "auto" and "auto" in self.methods}}


def _fit_method(m: str, s: Series, k: float, target: bool, smt_yield: float) -> Any:
    ds = s.dataset()
    tr = ds.select(ds.cores <= k)
    if m == "extrap":
        return extrap.fit_dataset(tr)
    fit: Callable[[Any], Any] = lambda d: predictors.fit(m, d, calibrate=True)     # noqa: E731
    if target and s.machine is not None:
        return fit_for_target(fit, tr, s.machine, s.order, measured=s.machine, measured_order=s.order,
                              priors=Priors(smt_yield=smt_yield))
    return fit(tr)


def yield_free(s: Series) -> bool:
    """Whether the series' trial on its machine is the same whatever the SMT yield: no count,
    measured or held out, puts threads on SMT siblings."""
    if s.machine is None:
        return True
    return all(q.runnable == q.cores_used for q in Layout(s.machine, s.order, 0.0).positions(s.cores))


def _crosses(s: Series, train_frac: float) -> bool:
    """Whether the series' held-out threads cross more NUMA nodes than its fitted ones."""
    if s.machine is None:
        return False
    k = train_max(s.cores, train_frac)
    lay = Layout(s.machine, s.order, 0.0)
    test = s.cores[s.cores > k]
    return bool(len(test)) and bool(np.max(lay.crossing(test)) > lay.crossing([k])[0] + 1e-9)


@dataclass
class _Work:
    """What one series needs fitted: auto's trials (plain, and on its machine at some SMT
    yields) and the other methods' predictions."""

    series: Series
    raw: bool
    yields: tuple[float, ...]
    baselines: tuple[str, ...]
    target: bool
    base_yield: float


@dataclass
class _Done:
    raw: learn.Trial | None
    on_machine: dict[float, learn.Trial | None]
    baselines: dict[str, tuple[np.ndarray, np.ndarray | None, np.ndarray | None] | None]


def _run(w: _Work, train_frac: float, level: float) -> _Done:
    s = w.series
    # The single methods come from the trial scored in this mode where there is one (auto fitted
    # and validated them), else they are fitted here.
    on_m = w.target and s.machine is not None
    from_trial = tuple(m for m in w.baselines if m in AUTO_MEMBERS) if level == trials.LEVEL else ()
    cache: dict[bytes, Any] = {}
    raw = (trials.make_trial(s, train_frac, baselines=() if on_m else from_trial, cache=cache)
           if w.raw or (from_trial and not on_m) else None)
    own = w.base_yield if on_m and not yield_free(s) else -1.0
    on = {y: trials.make_trial(s, train_frac, target=True, smt_yield=w.base_yield if y < 0 else y,
                               baselines=from_trial if on_m and y == own else (), cache=cache)
          for y in sorted(set(w.yields) | ({own} if on_m and from_trial else set()))}
    scored = on.get(own) if on_m else raw
    k = train_max(s.cores, train_frac)
    test = s.cores > k
    base: dict[str, Any] = {}
    for m in w.baselines:
        if m in from_trial and scored is not None:
            base[m] = scored.baselines.get(m)
            continue
        try:
            f = _fit_method(m, s, k, w.target, w.base_yield)
            p = convert(f.predict(s.cores[test], level), "throughput")
            base[m] = (p.value, p.low, p.high)
        except (UserError, ValueError, np.linalg.LinAlgError, ZeroDivisionError):
            base[m] = None
    return _Done(raw, on, base)


@dataclass
class Fitting:
    """Everything the corpus' series need fitted for a leave-one-source-out run (or a run with
    the shipped priors), and what was learned from it: `evaluate_corpus` scores it, and
    scripts/learn_priors.py learns the shipped priors from it."""

    series: list[Series]
    train_frac: float
    target: bool
    y_of: dict[str, float]                     # SMT yield each source's trials were fitted at
    done: dict[int, _Done]                     # by id(series)
    pri_of: dict[str, Priors] = field(default_factory=dict)

    free: dict[int, bool] = field(default_factory=dict)   # yield_free by id(series), computed once

    def key(self, s: Series, y: float) -> float:
        if id(s) not in self.free:
            self.free[id(s)] = yield_free(s)
        return -1.0 if self.free[id(s)] else y

    def on_machine(self, s: Series, y: float) -> learn.Trial | None:
        return self.done[id(s)].on_machine.get(self.key(s, y))

    def scored(self, s: Series) -> learn.Trial | None:
        """The trial auto is scored on: on the series' machine in target mode, else plain."""
        if self.target and s.machine is not None:
            return self.on_machine(s, self.y_of[s.source])
        return self.done[id(s)].raw

    def raw_trials(self) -> list[learn.Trial]:
        return [d.raw for d in self.done.values() if d.raw is not None]


def fit_corpus(series: Sequence[Series], methods: Sequence[str], train_frac: float, level: float, target: bool,
               loso: bool, shipped: Priors, jobs: int, say: ProgressFn, extra_yield: float | None = None) -> Fitting:
    """Fit auto's trials (plain, on the machines at the SMT yields needed) and the other
    methods on every series, in `jobs` worker processes. `extra_yield`: a yield the series that
    cross NUMA nodes are fitted at besides (the one learned from every source)."""
    series = list(series)
    sources = sorted({s.source for s in series})
    # The SMT yield each source's trials are fitted with: learned without it, or the shipped one.
    y_of = {src: (learn.smt_yield([s for s in series if s.source != src])[0] if loso else shipped.smt_yield)
            for src in sources}
    fitting = Fitting(series, train_frac, target, y_of, {})
    work = []
    for s in series:
        ys: set[float] = set()
        if "auto" in methods and target and s.machine is not None:
            ys.add(fitting.key(s, y_of[s.source]))
        if loso and s.machine is not None and _crosses(s, train_frac):
            # learning the cross-node cost without another source S uses this series at S's yield
            ys.update(fitting.key(s, y) for src, y in y_of.items() if src != s.source)
            if extra_yield is not None:
                ys.add(fitting.key(s, extra_yield))
        work.append(_Work(s, raw="auto" in methods and (loso or not (target and s.machine is not None)),
                          yields=tuple(sorted(ys)),
                          baselines=tuple(m for m in methods if m != "auto"), target=target,
                          base_yield=y_of[s.source]))
    done = trials.parallel_map(lambda w: _run(w, train_frac, level), work, jobs,
                               lambda d, n: say("fitting the series", d, n))
    fitting.done = {id(w.series): d for w, d in zip(work, done)}
    return fitting


def learn_loso(f: Fitting, jobs: int, say: ProgressFn) -> tuple[list[tuple[str, np.ndarray, np.ndarray]],
                                                                  list[tuple[str, np.ndarray, np.ndarray]]]:
    """Per source, the priors learned without it (`f.pri_of`), then the band: the conformal
    tables learned from the held-out scores of the *other* sources, each scored with the
    priors learned without itself (nested: no source's band saw the source). Returns the
    held-out scores, plain and on the machines."""
    series = f.series
    sources = sorted({s.source for s in series})
    raw = f.raw_trials()

    def learn_without(src: str) -> Priors:
        others = [s for s in series if s.source != src]
        y = f.y_of[src]
        cross = [t for s in others if (t := f.on_machine(s, y)) is not None and t.crosses]
        return learn.learn([t for t in raw if t.series.source != src], cross, others, f.train_frac,
                           origin=f"learned without {src}")

    got = trials.parallel_map(learn_without, sources, jobs, lambda d, n: say("learning without each source", d, n))
    f.pri_of = dict(zip(sources, got))
    plain, machine = band_scores(f, jobs, say)
    for src in sources:
        f.pri_of[src] = dataclasses.replace(
            f.pri_of[src], band_table=learn.band_table([x for x in plain if x[0] != src]),
            band_table_machine=learn.band_table([x for x in machine if x[0] != src]) if f.target else None)
    return plain, machine


def learn_shipped(series: Sequence[Series], train_frac: float = 0.25, jobs: int = 1,
                  progress: ProgressFn | None = None, origin: str = "") -> Priors:
    """The priors corecast ships: everything learned from every source (`learn.learn`), and the
    bands from the held-out scores of every source, each scored with the priors learned without
    it (leave-one-source-out, without and with the sources' machines)."""
    say = progress or (lambda _w, _d, _t: None)
    series = list(series)
    y_all = learn.smt_yield(series)[0]
    f = fit_corpus(series, ["auto"], train_frac, trials.LEVEL, True, True, Priors(), jobs, say, extra_yield=y_all)
    plain, machine = learn_loso(f, jobs, say)
    cross = [t for s in series if (t := f.on_machine(s, y_all)) is not None and t.crosses]
    full = learn.learn(f.raw_trials(), cross, series, train_frac, origin=origin)
    return dataclasses.replace(full, band_table=learn.band_table(plain), band_table_machine=learn.band_table(machine))


def band_scores(f: Fitting, jobs: int, say: ProgressFn) -> tuple[list[tuple[str, np.ndarray, np.ndarray]],
                                                                  list[tuple[str, np.ndarray, np.ndarray]]]:
    """The held-out (source, distances, scores) of every series, plain and (in target mode) on
    its machine, each with its own source's priors (`f.pri_of`)."""
    jobs_in = [(t, False) for t in f.raw_trials()]
    if f.target:
        # a machine known by its CPU count alone is predicted with the plain table
        # (`Priors.table_for`): its scores are the plain trial's, counted once
        jobs_in += [(t, True) for s in f.series if s.machine is not None and s.machine.known != "cpus"
                    and (t := f.scored(s)) is not None]

    def one(tm: tuple[learn.Trial, bool]) -> tuple[str, bool, np.ndarray, np.ndarray] | None:
        t, on = tm
        try:
            got = t.band_scores(f.pri_of[t.series.source])
        except (UserError, ValueError, np.linalg.LinAlgError, ZeroDivisionError):
            return None
        return None if got is None else (t.series.source, on, got[0], got[1])

    res = [x for x in trials.parallel_map(one, jobs_in, jobs, lambda d, n: say("calibrating the bands", d, n))
           if x is not None]
    return ([(src, r, z) for src, on, r, z in res if not on], [(src, r, z) for src, on, r, z in res if on])


def evaluate_corpus(series: Sequence[Series], methods: Sequence[str] | None = None, train_frac: float = 0.25,
                    level: float = 0.8, target: bool = False, leave_one_source_out: bool = False,
                    priors: Priors | None = None, progress: ProgressFn | None = None,
                    jobs: int = 1, fitting: Fitting | None = None) -> CorpusEvaluation:
    """Score `methods` (default: auto, the baselines, and Extra-P where installed) on every
    series (see the module doc), in `jobs` worker processes. `fitting`: the fits of an earlier
    call with the same series and settings, learned again (what a study of the learning reuses)."""
    if not 0 < train_frac < 1:
        raise UserError(f"--train-frac {train_frac}: between 0 and 1")
    notes: list[str] = []
    if methods is None:
        methods = ["auto", *BASELINES]
        if extrap.available():
            methods.append("extrap")
        else:
            notes.append("Extra-P is not installed here (it needs numpy < 2: `make bench` runs it in an "
                         "environment of its own): its column is left out")
    methods = list(methods)
    for m in methods:
        if m not in predictors.REGISTRY and m != "extrap":
            raise UserError(f"unknown method '{m}' (choose from {', '.join([*predictors.REGISTRY, 'extrap'])})")
    if "extrap" in methods and not extrap.available():
        raise UserError("Extra-P is not installed (pip install extrap, in an environment of its own: it needs numpy < 2)")
    shipped = priors or load_priors()
    say = progress or (lambda _w, _d, _t: None)
    series = list(series)
    sources = sorted({s.source for s in series})
    loso = "auto" in methods and leave_one_source_out
    if fitting is None:
        fitting = fit_corpus(series, methods, train_frac, level, target, loso, shipped, jobs, say)
    if loso:
        learn_loso(fitting, jobs, say)
    pri_of = fitting.pri_of or {src: shipped for src in sources}

    rows: list[tuple[Series, dict[str, tuple[float, float | None]]]] = []
    for s in series:
        k = train_max(s.cores, train_frac)
        test = s.cores > k
        if not test.any():
            continue
        truth = s.throughput[test]
        d = fitting.done[id(s)]
        res: dict[str, tuple[float, float | None]] = {}
        for m in methods:
            try:
                if m == "auto":
                    t = fitting.scored(s)
                    if t is None:
                        raise UserError("auto could not be fitted")
                    p = t.prediction(pri_of[s.source], level)
                    v, lo, hi = p.value, p.low, p.high
                else:
                    got_m = d.baselines.get(m)
                    if got_m is None:
                        continue
                    v, lo, hi = got_m
            except (UserError, ValueError, np.linalg.LinAlgError, ZeroDivisionError):
                continue
            if not (np.all(np.isfinite(v)) and np.all(v > 0)):
                continue
            err = float(np.median(np.abs(v / truth - 1.0))) * 100.0
            cov = None if lo is None or hi is None else float(np.mean((lo <= truth) & (truth <= hi)))
            res[m] = (err, cov)
        rows.append((s, res))
    scores = []
    for src in sources:
        mine = [(s, r) for s, r in rows if s.source == src]
        sc = SourceScore(src, len(mine), priors=pri_of[src] if "auto" in methods else None)
        for m in methods:
            ok = [r[m] for _, r in mine if m in r]
            sc.failed[m] = len(mine) - len(ok)
            if ok:
                sc.median_error[m] = float(np.median([e for e, _ in ok]))
                covs = [c for _, c in ok if c is not None]
                if covs:
                    # share of all held-out points of the source inside the band
                    pts = [(c, int((s.cores > train_max(s.cores, train_frac)).sum())) for s, r in mine
                           if m in r and r[m][1] is not None for c in [r[m][1]]]
                    sc.coverage[m] = float(sum(c * n for c, n in pts) / sum(n for _, n in pts))
                    sc.points[m] = int(sum(n for _, n in pts))
        scores.append(sc)
    return CorpusEvaluation(methods, train_frac, level, scores, target=target,
                            leave_one_source_out=leave_one_source_out, notes=notes, per_series=rows,
                            fitting=fitting)
