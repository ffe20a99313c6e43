"""Predictions from measurements at only two core counts (a laptop, a 2-vCPU VM).

Two core counts fix two parameters, nothing more: no method can be validated, no kernel with
three coefficients fitted, and a law that bends (a peak, a retrograde fall) cannot be seen. What
two points can honestly give is the range of the two-parameter laws that pass through both, and
that is what this predictor returns: a central prediction and a band that *brackets the laws*
(it is not a statistical interval at a stated level; every prediction says so).

Time (or 1/throughput) alone:
    Amdahl   T(n) = a + b/n            serial part a ≥ 0, parallel part b ≥ 0: saturates
    power    T(n) = c · n^p            keeps scaling at the measured rate
    USL      1/T(n) = γn / (1 + α(n−1) + βn(n−1)) through both points, with the share of its
             overhead that is coherency (β) taken from a prior (`coherency_share`, learned from
             the corpus by `corecast.model.learn`): given one, it is the central
             prediction (the law that, on real many-core curves, extrapolates two points best)
Without a prior the central prediction is the geometric mean of the first two; the band spans
all of them.

Stall categories in cycles, the machine's clock known, and time in seconds (a campaign from
`corecast measure`): the stall method's anchored step 2,

    T(n) = W/n + Σ_c S_c(n) / (n · clock)

(work W divided over the cores; a stalled cycle on a core costs a cycle of time), with W from
the two measured points and each category's total S_c extrapolated between two laws:
    zero at the smaller count:  k (n − 1)  (each extra core adds a fixed wait: saturates, as
                                Amdahl) and  k n (n − 1)  (pairwise contention: retrograde, as
                                the USL's coherency term), through the larger count; for
                                barrier waits (waiting for the slowest of a phase, each
                                thread's share of the work W/n) k (1 − n₁/n)  (a fixed
                                imbalance: saturates) and  k (n − 1)  (an imbalance growing
                                with the threads) -- never pairwise;
    non-zero at both:           c n^p  and the straight line through both (kept ≥ 0).
Bottlenecks are ranked by the growth of each category's stalls per core, as the stall method
does.

Only waits that cost time are stalls here: each category is first charged to time up to the
core-time the run lost (`corecast.model.losttime`; a coordinator's or an idle pool's waits that
overlap other threads' running are not), and `auto` uses the stall model only when the charged
stalls explain the loss against perfect scaling (`use_stalls`); otherwise the USL through both
points, and the categories keep the lost-core-time analysis' verdicts.

The band (`auto.PriorBand`, with `prior_half_width` and `guard_band` here) is never of zero
width: the corpus' error growth for the distance of extrapolation, or the repetitions' noise (at
least `NOISE_FLOOR`) where that is larger, and for the stall model the union with the law bracket.
A band that lies wholly slower than the largest measured count, or wholly faster than linear
scaling from it, is widened to reach it unless a named bottleneck says why.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ..dataset import Dataset
from ..errors import UserError
from .base import Fitted, Prediction
from . import losttime, usl
from .estima import Bottleneck, analysis_rows, apply_analysis
from .series import Prepared, TimeSeries, prepare, time_series, to_prediction

BAND_NOTE = ("two core counts fix only two-parameter laws: the band spans the laws that pass through both "
             "points, it is not a statistical interval at the stated level; measure at 3 or more core "
             "counts for a validated prediction")
RETRO_NOTE = ("two core counts cannot show coherency costs (throughput that peaks and then falls); "
              "the band does not exclude them")
#: The least run-to-run noise (relative) a two-point band assumes (losttime's).
NOISE_FLOOR = losttime.NOISE_FLOOR
#: Categories of waits in which a thread sleeps until another's progress -- the slowest at a
#: barrier, a producer or a signal at a condition variable -- with their own laws
#: (`StallLaw.laws`): never pairwise.
IDLE_PREFIXES = ("barrier_wait", "cond_wait")


@dataclass
class StallLaw:
    """One stall category: total stalled cycles (over all threads) at the two measured counts
    and the two laws through them."""

    name: str
    n: np.ndarray            # the two core counts
    s: np.ndarray            # median total stalled cycles there
    #: Where an idle wait appears (`IDLE_PREFIXES`, none at the smaller count): the weight of the
    #: law that grows with every core, k(n−n₁), in the central prediction (geometric; the law
    #: that saturates, k(1−n₁/n), has the rest). 0.5, the geometric mean, unless the added cores'
    #: idle share says more (`fit_dataset`, `idle_weight`).
    linear_weight: float = 0.5

    @property
    def kind(self) -> str:
        if self.s[0] <= 0 and self.s[1] <= 0:
            return "none"
        if self.s[0] <= 0:
            return "appears"
        return "grows"

    #: Largest growth exponent of a category's total stalls believed from two points: pairwise
    #: contention (every core waiting on every other) grows as n²; a steeper rise between two
    #: counts is noise or interference (another process competing for the cores).
    MAX_EXPONENT = 2.0

    @property
    def raw_exponent(self) -> float:
        (n1, n2), (s1, s2) = self.n, self.s
        return math.log(s2 / s1) / math.log(n2 / n1) if s1 > 0 and s2 > 0 else 0.0

    @property
    def exponent(self) -> float:
        # waits in which threads sleep until another's progress grow at most linearly (`laws`)
        cap = 1.0 if self.name.startswith(IDLE_PREFIXES) else self.MAX_EXPONENT
        return min(max(self.raw_exponent, 0.0), cap)

    def laws(self, n: np.ndarray) -> dict[str, np.ndarray]:
        n = np.asarray(n, dtype=float)
        n1, n2 = self.n
        s1, s2 = self.s
        if self.kind == "none":
            return {"zero": np.zeros_like(n)}
        if self.kind == "appears":
            # Through (n1, 0) and (n2, s2): linear and pairwise growth in the extra cores.
            lin = s2 * (n - n1) / (n2 - n1)
            if self.name.startswith(IDLE_PREFIXES):
                # waits for the slowest at a barrier: each thread waits (slowest - its own) a
                # phase, its own share of the work W/n; summed over the threads that is
                # W·δ·(1 − 1/n) for a fixed imbalance δ (saturating) and grows at most linearly
                # for one that grows with the threads -- never pairwise. The same for a thread
                # asleep on a condition until a producer or a signal comes: the added threads
                # wait for that one's progress (cores left idle, as in Amdahl's law) and do not
                # make each other's work slower, as threads handing a lock round do; contention
                # on the mutex behind a condition shows in the lock waits
                sat = s2 * (1.0 - n1 / n) / (1.0 - n1 / n2)
                return {"k(1−n₁/n)": np.maximum(sat, 0.0), "k(n−n₁)": np.maximum(lin, 0.0)}
            pair = s2 * (n * (n - n1)) / (n2 * (n2 - n1))
            return {"k(n−n₁)": np.maximum(lin, 0.0), "k·n(n−n₁)": np.maximum(pair, 0.0)}
        p = self.exponent
        # Anchored at the larger count, so a capped exponent still meets the latest measurement.
        power = s2 * (n / n2) ** p if s2 > 0 else np.full_like(n, s1)
        line = s1 + (s2 - s1) * (n - n1) / (n2 - n1)
        return {f"c·n^{p:.2f}": power, "a+b·n": np.maximum(line, 0.0)}

    def bracket(self, n: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Central (geometric mean of the laws, arithmetic where one is 0; for an idle wait that
        appears, weighted by `linear_weight`), low, high."""
        laws = self.laws(n)
        L = list(laws.values())
        lo = np.minimum.reduce(L)
        hi = np.maximum.reduce(L)
        with np.errstate(invalid="ignore", divide="ignore"):
            if "k(1−n₁/n)" in laws:
                sat, lin, w = laws["k(1−n₁/n)"], laws["k(n−n₁)"], self.linear_weight
                both = (sat > 0) & (lin > 0)
                mid = np.where(both, np.exp((1.0 - w) * np.log(np.where(both, sat, 1.0))
                                            + w * np.log(np.where(both, lin, 1.0))),
                               (1.0 - w) * sat + w * lin)
            else:
                mid = np.where((lo > 0) & (hi > 0), np.sqrt(lo * hi), 0.5 * (lo + hi))
        return mid, lo, hi

    def model(self) -> str:
        return " … ".join(self.laws(np.array([1.0])).keys())


@dataclass
class TwoPointFit(Fitted):
    series: TimeSeries
    stalls: list[StallLaw]
    clock_hz: float | None
    work: float | None                     # W in core-seconds (stall path) or None
    freq_ratio: float = 1.0
    size_ratio: float = 1.0
    coherency_share: float | None = None   # the prior for the USL through both points
    method: str = "auto"
    warnings: list[str] = field(default_factory=list)
    analysis: losttime.LossAnalysis | None = None   # the lost core-time and what the waits account for
    stall_note: str = ""                   # why the stall categories are not used ("" when they are)
    noise: float = NOISE_FLOOR             # relative run-to-run noise of the two points

    @property
    def uses_stalls(self) -> bool:
        return self.work is not None

    # ---------------------------------------------------------------- time laws
    def _time_laws(self, n: np.ndarray) -> dict[str, np.ndarray]:
        (n1, n2), (t1, t2) = self.series.cores, self.series.time
        b = (t1 - t2) / (1.0 / n1 - 1.0 / n2)
        a = t1 - b / n1
        out = {}
        if b >= 0 and a >= 0:
            out["Amdahl a + b/n"] = a + b / n
        elif b >= 0:            # faster than linear between the points: the linear law
            out["linear b/n"] = t1 * n1 / n
        p = math.log(t2 / t1) / math.log(n2 / n1)
        out[f"power c·n^{p:.2f}"] = t1 * (n / n1) ** p
        u = self._usl()
        if u is not None:
            a, b, g, q = u
            out[f"USL α={a:.3g} β={b:.3g} (coherency share {q:.2f})"] = (1.0 + a * (n - 1.0) + b * n * (n - 1.0)) / (g * n)
        return out

    def _usl(self) -> tuple[float, float, float, float] | None:
        if self.coherency_share is None:
            return None
        (n1, n2), (t1, t2) = self.series.cores, self.series.time
        return usl.through_two(float(n1), 1.0 / float(t1), float(n2), 1.0 / float(t2), self.coherency_share)

    def _stalls_reason(self) -> str:
        """Why the stall model is used: the charged waits explain the loss, or -- where no
        core-time was lost beyond the noise -- there is no loss for them to explain (said so: a
        campaign with no waits at all was told that they 'explain the loss')."""
        la = self.analysis
        if la is not None and la.counts and la.counts[-1].lost_core_s is not None:
            c = la.counts[-1]
            if c.scaling_loss_core_s <= losttime.SIGNIFICANT * la.loss_se_core_s:
                return (f"no core-time lost to imperfect scaling beyond the noise at {c.cores:g} cores "
                        f"({c.scaling_loss_core_s:.3g} core-s, ± {la.loss_se_core_s:.2g}): nothing contradicts "
                        "the stall categories, charged to time; their laws turned into time")
        return ("the stall categories, charged to time up to the lost core-time, explain the loss: their "
                "laws turned into time")

    def peak_note(self, n: np.ndarray) -> str:
        """Where the central USL (the corpus' coherency share) peaks within the counts asked: said,
        with where it comes from ("" where it does not, or with the stall model)."""
        u = self._usl()
        if self.uses_stalls or u is None or u[1] <= 0:
            return ""
        a, b, _, q = u
        peak = math.sqrt(max(1.0 - a, 0.0) / b)
        if not np.any(n > 1.25 * peak) or peak <= float(self.series.cores[-1]):
            return ""
        return (f"the central prediction peaks near {peak:.0f} cores and is slower beyond: the USL through both "
                f"points takes {100 * q:.0f}% of the overhead they show as coherency (the corpus' prior); the "
                "two points cannot show whether this program has such a peak (Amdahl's law through them keeps "
                "gaining): measure at more core counts to see")

    def _stall_time(self, n: np.ndarray, pick: int) -> np.ndarray:
        """Predicted time from the stall laws; pick 0: central, 1: low, 2: high."""
        total = np.zeros_like(n)
        for st in self.stalls:
            total = total + st.bracket(n)[pick] * self.size_ratio
        return (self.work / n + total / (n * self.clock_hz)) * self.freq_ratio

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        n = np.asarray(cores, dtype=float)
        warns = list(self.warnings)
        if self.uses_stalls:
            t = self._stall_time(n, 0)
            lo = self._stall_time(n, 1)
            hi = self._stall_time(n, 2)
            model = "two-point stall model: W/n + Σ stalls/(n·clock)"
        else:
            laws = self._time_laws(n)
            L = np.log(np.stack(list(laws.values())))
            mid = L[-1] if self._usl() is not None else L[:2].mean(axis=0)
            t = np.exp(mid) * self.freq_ratio * self.size_ratio
            lo = np.exp(L.min(axis=0)) * self.freq_ratio * self.size_ratio
            hi = np.exp(L.max(axis=0)) * self.freq_ratio * self.size_ratio
            model = "two-point laws: " + " | ".join(laws)
        warns += [BAND_NOTE, self.peak_note(n) or RETRO_NOTE]
        params: dict[str, Any] = {"core_counts": [float(c) for c in self.series.cores], "band": "law bracket",
                                  "chosen": ["two-point"],
                                  "reason": ("only two core counts measured: nothing to validate; "
                                             + (self._stalls_reason()
                                                if self.uses_stalls else
                                                (f"stall categories not used: {self.stall_note}; " if self.stall_note
                                                 else "") +
                                                ("the USL through both points with the corpus prior for "
                                                 "its coherency share, bracketed by Amdahl's law and the "
                                                 "power law" if self._usl() is not None else
                                                 "Amdahl's law and the power law")))}
        if self.uses_stalls:
            params.update(work_core_s=self.work, clock_hz=self.clock_hz)
        if self.freq_ratio != 1.0:
            params["freq_ratio"] = self.freq_ratio
        if self.size_ratio != 1.0:
            params["size_ratio"] = self.size_ratio
        return to_prediction(n, t, lo, hi, self.series.metric, level=level, method=self.method, model=model,
                             params=params, warnings=warns)

    def models(self, horizon: float = 0.0) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.uses_stalls:
            out[self.series.source] = {"kernel": "two-point stall model",
                                       "formula": "T(n) = W/n + Σ_c S_c(n) / (n·clock)",
                                       "params": {"W_core_s": self.work, "clock_hz": self.clock_hz},
                                       "points": 2}
            for st in self.stalls:
                out[st.name] = {"kernel": st.model(), "formula": "bracket of the laws through both points",
                                "points": 2}
        else:
            laws = self._time_laws(np.array([1.0]))
            central = "the USL law" if self._usl() is not None else "geometric mean of the first two"
            out[self.series.source] = {"kernel": " | ".join(laws), "formula": f"{central}, band = bracket",
                                       "points": 2}
        return out

    def stall_extrapolations(self, grid: np.ndarray) -> list[tuple[str, str, np.ndarray, np.ndarray, np.ndarray]]:
        """(name, model, central, low, high) total stalled cycles over `grid`, for plots."""
        return [(st.name, st.model(), *st.bracket(grid)) for st in self.stalls if st.kind != "none"]

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Bottleneck]:
        if not self.uses_stalls:
            return analysis_rows(self.analysis) if self.analysis is not None else []
        return apply_analysis(self._stall_bottlenecks(cores), self.analysis)

    def _stall_bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Bottleneck]:
        cores = np.asarray(cores, dtype=float)
        top = float(self.series.cores[-1])
        tgt = float(cores.max())
        spc_top = {st.name: float(st.s[1]) / top for st in self.stalls}
        spc = {st.name: {float(c): float(st.bracket(np.array([c]))[0][0] * self.size_ratio) / c for c in cores}
               for st in self.stalls}
        tot_top = sum(spc_top.values())
        tot = {float(c): sum(spc[k][float(c)] for k in spc) for c in cores}
        rows = []
        for st in self.stalls:
            if st.kind == "none":
                continue
            g = spc[st.name][tgt] / spc_top[st.name] if spc_top[st.name] > 0 else math.inf
            share_t = spc[st.name][tgt] / tot[tgt] if tot[tgt] > 0 else 0.0
            verdict = ("grows with cores: a scaling bottleneck" if g > 1.5 else
                       "roughly flat per core" if g > 0.67 else "shrinks per core")
            rows.append(Bottleneck(
                category=st.name, rank=0, model=st.model(), growth=g,
                share_measured=spc_top[st.name] / tot_top if tot_top > 0 else 0.0, share_target=share_t,
                per_core_measured=spc_top[st.name], per_core=spc[st.name],
                share={c: (spc[st.name][c] / tot[c] if tot[c] > 0 else 0.0) for c in spc[st.name]},
                time_s={c: spc[st.name][c] / self.clock_hz * self.freq_ratio for c in spc[st.name]},
                verdict=verdict))
        rows.sort(key=lambda b: (-b.share_target, -b.growth))
        for i, b in enumerate(rows, 1):
            b.rank = i
        return rows


def _two_points(prep: Prepared, what: str) -> None:
    if len(prep.series.cores) != 2:
        raise UserError(f"{prep.data.label}: {what} needs exactly 2 distinct core counts "
                        f"(got {len(prep.series.cores)})")


def fit_dataset(ds: Dataset, size: float | None = None, freq_ratio: float = 1.0, size_ratio: float = 1.0,
                categories: Sequence[str] | None = None, coherency_share: float | None = None,
                use_stalls: bool | None = None) -> TwoPointFit:
    """The two-point predictor (see the module's docstring). `use_stalls`: None, the stall model
    when the lost-core-time analysis finds that the charged stalls explain the loss (where it
    cannot judge, whenever the categories can be turned into time); False, the time laws; True,
    the stall model wherever the categories can be turned into time."""
    prep = prepare(ds, "the two-point predictor", size, freq_ratio, size_ratio, check=_two_points)
    ds1, ts = prep.data, prep.series
    warns = list(ts.warnings)        # the size selection's
    ds1, la = losttime.prepare(ds1, categories)
    if la is not None:
        warns.extend(la.notes)
        if la.free_time is not None:
            ts = time_series(ds1)           # the interference-free times (warnings already taken)
    noise = la.noise if la is not None else repetition_noise(ds1)
    names = list(categories) if categories else ds1.stall_names
    clock = ds1.machine.nominal_freq_hz
    stalls: list[StallLaw] = []
    for nm in names:
        ag = ds1.aggregate(nm)
        if len(ag.cores) != 2 or ds1.columns[nm].unit not in ("cycles", "s"):
            if len(ag.cores) == 2:
                warns.append(f"stall category '{nm}' left out: its unit ({ds1.columns[nm].unit or 'none'}) "
                             "is neither cycles nor seconds")
            continue
        v = ag.value * (clock if ds1.columns[nm].unit == "s" and clock else 1.0)
        if np.any(v < 0):
            raise UserError(f"{ds.label}: stall category '{nm}' has negative values")
        st = StallLaw(nm, ag.cores, v)
        if st.raw_exponent > StallLaw.MAX_EXPONENT:
            # after the lost-core-time analysis a category is its part charged to time, which can
            # grow steeply where the waits themselves are flat: say which was measured
            what = (f"the part of stall category '{nm}' charged to time (the core-time the runs lost)"
                    if losttime.was_prepared(ds1, nm) else f"stall category '{nm}'")
            warns.append(f"{what} grows as n^{st.raw_exponent:.1f} between {ag.cores[0]:g} and "
                         f"{ag.cores[1]:g} cores; extrapolated as n^{StallLaw.MAX_EXPONENT:g} at most (steeper "
                         "growth from two points is noise or other processes competing for the cores)")
        stalls.append(st)
    work = None
    if stalls and ts.metric == "time_s" and clock and clock > 0:
        S = sum(st.s for st in stalls)
        w = ts.cores * ts.time - S / clock
        if np.all(w > 0):
            work = float(np.mean(w))
        else:
            warns.append("the stall categories exceed the measured time (stalled cycles counted on idle "
                         "cores?): stalls left out, time laws used")
    elif stalls:
        why = ("the machine's clock frequency is unknown (--clock GHZ)" if not clock else
               "the data give throughput, not the time of a fixed amount of work")
        warns.append(f"stall categories not turned into time: {why}; time laws used")
    if work is not None:
        for st in stalls:
            st.linear_weight, note = idle_weight(st, ts, clock)
            if note:
                warns.append(note)
    note = ""
    if use_stalls is None:
        use_stalls = la.explains if la is not None else True
    if not use_stalls and work is not None:
        note = (la.reason if la is not None and la.reason else
                "the waits charged to time do not explain the core-time lost to imperfect scaling")
        work = None
    return TwoPointFit(ts, stalls if work is not None else [], clock, work, freq_ratio, size_ratio,
                       coherency_share=coherency_share, warnings=warns, analysis=la, stall_note=note,
                       noise=noise)


def idle_weight(st: StallLaw, ts: TimeSeries, clock: float) -> tuple[float, str]:
    """The weight of the growing law k(n−n₁) in the central prediction of an idle wait that
    appears between the two counts (`StallLaw.linear_weight`), and a note where it is not the
    geometric mean's 0.5.

    The wait's share of the added cores' time at the larger count, f = S(n₂) / ((n₂ − n₁) · T(n₂)),
    tells the laws apart where it is large: an added core that slept through most of the run
    (xz -T on one block: the second thread waited 86-99% of it, and the 2-core run was no
    faster) found no work, and the law that saturates -- its total wait bounded, the cores
    added later all working -- would predict from it the speed-up it did not show (xz measured
    at 12.2 s and 12.7 s was predicted 2.1 s at 64 cores). A small share is what both laws
    allow (a fixed imbalance at a barrier, or one growing with the threads): the geometric mean
    is kept. So the weight is f, at least 0.5."""
    if st.kind != "appears" or not st.name.startswith(IDLE_PREFIXES) or not clock:
        return 0.5, ""
    (n1, n2), t2 = st.n, float(ts.time[-1])
    if t2 <= 0 or n2 <= n1:
        return 0.5, ""
    f = float(st.s[1]) / clock / ((n2 - n1) * t2)
    w = min(max(f, 0.5), 1.0)
    if w < 0.6:
        return w, ""
    return w, (f"{st.name}: the added core{'s' if n2 - n1 > 1 else ''} waited {100 * min(f, 1.0):.0f}% of the run at "
               f"{n2:g} cores (no work found): extrapolated mostly as a wait that grows with every core "
               f"(k(n−n₁), weight {w:.2f}), not one that saturates")


def repetition_noise(ds: Dataset) -> float:
    """Relative run-to-run noise of the time (or throughput) over the repetitions
    (`losttime.repetition_noise`), at least NOISE_FLOOR."""
    metric = "time_s" if "time_s" in ds.metrics and np.isfinite(ds.metrics["time_s"]).any() else "throughput"
    if metric not in ds.metrics:
        return NOISE_FLOOR
    return losttime.repetition_noise(ds.metrics[metric], ds.cores)


def prior_half_width(cores: np.ndarray, top: float, growth: float, level: float, noise: float) -> np.ndarray:
    """The band's half-width in log space: z · max(noise, g₀ · ln(n / largest count)): the
    corpus' error growth where it is the larger (as learned: `scripts/learn_priors.py` scored
    that band), the run-to-run noise inside and near the measured range, so that it is never of
    zero width."""
    d = np.log(np.maximum(cores, top) / top)
    return float(stats.norm.ppf((1 + level) / 2)) * np.maximum(noise, growth * d)


def guard_band(fit: Any, cores: np.ndarray, t: np.ndarray, lo: np.ndarray, hi: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Widen a two-point band that lies wholly on one side of the largest measured count -- every
    value slower than its time, or every value faster than linear scaling from it -- to reach it,
    unless a named bottleneck of the stall model says why (then the warning says so). And where
    the stall model (which is not floored) predicts slower than the faster of the two measured
    times, a warning says the curve turns down and names the categories that make it."""
    series = getattr(fit, "series", None)
    if series is None:
        return lo, hi, []
    top, t_top = float(series.cores[-1]), float(series.time[-1])
    if series.metric != "time_s":
        return lo, hi, []
    beyond = cores > top
    slow = beyond & (lo > t_top)
    fast = beyond & (hi < t_top * top / np.maximum(cores, top))
    notes: list[str] = []
    stalls = bool(getattr(fit, "uses_stalls", False))
    best = int(np.argmin(series.time))
    down = beyond & (t > float(series.time[best]) * (1 + 1e-12)) if stalls else np.zeros(len(cores), dtype=bool)
    named = ([b.category for b in fit.bottlenecks(cores[beyond]) if "scaling bottleneck" in b.verdict]
             if stalls and np.any(slow | down) else [])
    if np.any(down):
        notes.append(f"the curve turns down: from {cores[down][0]:g} cores the prediction is slower than measured "
                     f"at {float(series.cores[best]):g}, because the stall model's "
                     f"{', '.join(named) if named else 'stall categories'} grow faster than the cores "
                     "(two points cannot show where a peak is)")
    if np.any(slow):
        if named:
            notes.append(f"the band lies wholly above the {top:g}-core time from {cores[slow][0]:g} cores on: the "
                         f"stall model's {', '.join(named)} grows faster than the cores (see the bottlenecks)")
        else:
            lo = np.where(slow, t_top, lo)
            notes.append(f"the band was widened down to the {top:g}-core time from {cores[slow][0]:g} cores on: two "
                         "core counts cannot show that adding cores must slow the program down")
    if np.any(fast):
        lin = t_top * top / cores
        hi = np.where(fast, np.maximum(hi, lin), hi)
        notes.append(f"the band was widened up to linear scaling from {top:g} cores: two core counts cannot show "
                     "that the program must scale faster than linearly")
    return lo, hi, notes
