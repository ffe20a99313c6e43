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
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..errors import UserError
from . import extrap, learn, methods, predictors
from .corpus import Series, train_max
from .priors import Priors
from .priors import load as load_priors
from .series import convert
from .topo import fit_for_target

#: Methods scored besides auto by default: those offered as --method that run on any data, by rank.
BASELINES = tuple(n for n in methods.RANKED if methods.REGISTRY[n].role == "method")


@dataclass
class SourceScore:
    source: str
    series: int
    median_error: dict[str, float] = field(default_factory=dict)      # method -> % (median of series medians)
    coverage: dict[str, float] = field(default_factory=dict)          # method -> share of held-out points in band
    failed: dict[str, int] = field(default_factory=dict)              # method -> series it could not predict
    priors: Priors | None = None                                     # auto's priors for this source


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

    def wins(self, method: str, against: str) -> tuple[int, int]:
        """(sources where `method`'s median error is below `against`'s, sources with both)."""
        both = [s for s in self.sources if method in s.median_error and against in s.median_error]
        return sum(1 for s in both if s.median_error[method] < s.median_error[against]), len(both)

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
                                 "coherency_share": s.priors.coherency_share, "smt_yield": s.priors.smt_yield,
                                 "cross_domain": s.priors.cross_domain, "band_growth": s.priors.band_growth,
                                 "origin": s.priors.origin}}
                            for s in self.sources],
                "overall_median_abs_pct_error": {m: num(v) for m, v in self.overall().items()},
                "overall_on_common_sources": {m: num(v) for m, v in self.overall_common().items()},
                "geometric_mean_on_common_sources": {m: num(v) for m, v in self.geomean_common().items()}}


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


def evaluate_corpus(series: Sequence[Series], methods: Sequence[str] | None = None, train_frac: float = 0.25,
                    level: float = 0.8, target: bool = False, leave_one_source_out: bool = False,
                    priors: Priors | None = None,
                    progress: Callable[[str], None] | None = None) -> CorpusEvaluation:
    """Score `methods` (default: auto, the baselines, and Extra-P where installed) on every
    series (see the module doc)."""
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
    say = progress or (lambda _msg: None)
    sources = sorted({s.source for s in series})

    # auto: its priors per source (shipped, or learned without the source), trials fitted once.
    pri_of: dict[str, Priors] = {src: shipped for src in sources}
    trials_by_yield: dict[float, dict[int, learn.Trial]] = {}

    def trials(y: float, tgt: bool) -> dict[int, learn.Trial]:
        key = (y if tgt else -1.0)
        if key not in trials_by_yield:
            say(f"fitting auto on {len(series)} series" + (f" (target machines, SMT yield {y:.2f})" if tgt else ""))
            made = learn.make_trials(series, train_frac, target=tgt, smt_yield=y)
            trials_by_yield[key] = {id(t.series): t for t in made}
        return trials_by_yield[key]

    if "auto" in methods and leave_one_source_out:
        raw = list(trials(0.0, False).values())
        for src in sources:
            others = [s for s in series if s.source != src]
            y = learn.smt_yield(others)[0]
            tgt_trials = [t for t in trials(y, True).values() if t.series.source != src]
            say(f"learning priors without {src}")
            pri_of[src] = learn.learn([t for t in raw if t.series.source != src], tgt_trials, others, train_frac,
                                      origin=f"learned without {src}")

    rows: list[tuple[Series, dict[str, tuple[float, float | None]]]] = []
    for s in series:
        k = train_max(s.cores, train_frac)
        test = s.cores > k
        res: dict[str, tuple[float, float | None]] = {}
        if not test.any():
            continue
        truth = s.throughput[test]
        for m in methods:
            try:
                if m == "auto":
                    pri = pri_of[s.source]
                    t = trials(pri.smt_yield, target and s.machine is not None).get(id(s))
                    if t is None:
                        raise UserError("auto could not be fitted")
                    v, lo, hi = t.predict(pri)
                else:
                    f = _fit_method(m, s, k, target, pri_of[s.source].smt_yield)
                    p = convert(f.predict(s.cores[test], level), "throughput")
                    v, lo, hi = p.value, p.low, p.high
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
        scores.append(sc)
    return CorpusEvaluation(methods, train_frac, level, scores, target=target,
                            leave_one_source_out=leave_one_source_out, notes=notes, per_series=rows)
