"""What an `auto` prediction may not contradict, and how wide its band is.

**The measurements are a floor.** A throughput measured at n threads was reached; a prediction
at more threads below it says the curve turns down, and only the fitted model may say that, when
it has the evidence (`retrograde`): the USL's coherency β clearly above zero (its 90% interval
excludes 0) and the measured points already flatten (the last step gained less than FLAT_SHARE
of a linear rise), or the USL turns down (β > 0) and the measured points already fall after
their peak (by more than DROP_SHARE; with two core counts, that fall is the only evidence).
Otherwise a prediction is kept at least at the highest throughput measured at or below its
count (`floor`), and the output says so. (Chosen by leave-one-source-out among five tests,
docs/predict.md: the interval alone let the floor lift curves that had visibly collapsed, the
Wald interval of a USL that misfits a cliff being wide.)

**The band is calibrated out of sample** (split-conformal, `Conformal`): on the corpus, every
series is fitted on its first quarter and predicted beyond with priors learned without its
source; each held-out point's log error, log(truth / prediction), divided by the prediction's
own scale σ (below), is a *score*. The band at level L is [q_lo, q_hi] × σ around the
prediction, q_lo and q_hi the (1 − L)/2 and (1 + L)/2 quantiles of the scores of the held-out
points at a like extrapolation distance r = count / largest measured count, a source weighing
the square root of its points (`_source_weights`). The scale is

    σ(n)² = s² + g² ln(r)² + spread(n)² + machine(n)²

s the data's noise, g the series' own error growth pooled with the corpus' (`auto`), spread the
members' disagreement (inside the measured range, the prediction's miss of the measurements:
`auto`), machine the uncertainty of the machine effects applied (`topo`). A
band is never narrower than the spread of the measured repetitions (carried forward at the same
relative width) nor than MIN_HALF_WIDTH.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ..dataset import Dataset
from ..errors import UserError
from . import usl
from .series import TimeSeries, speed, time_series

#: A band is at least this wide on each side (log units: 1%).
MIN_HALF_WIDTH = 0.01
#: The measurements flatten when the last measured step gained less than this share of a linear
#: rise (X(n_k) / X(n_{k-1}) - 1 < FLAT_SHARE (n_k / n_{k-1} - 1)).
FLAT_SHARE = 0.25
#: The measurements fall after their peak when the largest count's throughput is below the
#: highest measured by more than this share.
DROP_SHARE = 0.05
#: β is clearly above zero when its interval at this level excludes 0.
RETRO_LEVEL = 0.9
#: Percentiles of the repetitions' log deviations kept (the band's floor at any level).
REP_PERCENTILES = np.arange(0, 101, 1.0)


def floor_note(info: dict[str, Any], at_count: str | None = None, measured_at: str | None = None) -> str:
    """What the floor did (`info`: `params["floor"]` of a prediction), in words; `at_count` and
    `measured_at` name the counts otherwise (a caller that asked about effective cores says
    threads)."""
    frm = at_count if at_count is not None else f"{info['from']:g}"
    at = measured_at if measured_at is not None else f"{info['at']:g}"
    if info["kind"] == "two":
        if info["turns_down"]:
            return f"the curve turns down: {info['why']}"
        return (f"from {frm} the two-point law fell below the highest throughput measured; kept at that "
                "measurement (two points that still rise cannot show a peak)")
    if info["turns_down"]:
        return (f"the curve turns down: from {frm} the prediction falls below the throughput measured at {at}, "
                f"because {info['why']}")
    return (f"from {frm} the fitted curve fell below the throughput measured at {at}; kept at that measurement, "
            f"since {info['why']}")


def floor(cores: np.ndarray, meas_cores: np.ndarray, meas_x: np.ndarray) -> np.ndarray:
    """The highest throughput measured at or below each of `cores` (0 where none)."""
    order = np.argsort(meas_cores)
    c, x = np.asarray(meas_cores, dtype=float)[order], np.maximum.accumulate(np.asarray(meas_x, dtype=float)[order])
    i = np.searchsorted(c, np.asarray(cores, dtype=float), side="right") - 1
    return np.where(i >= 0, x[np.maximum(i, 0)], 0.0)


def between(cores: np.ndarray, meas_cores: np.ndarray, values: np.ndarray, log: bool = True) -> np.ndarray:
    """`values` at the measured counts, interpolated in log count to `cores` inside the measured
    range (between the smallest and the largest count measured; in log value too with `log`),
    NaN outside it."""
    order = np.argsort(meas_cores)
    mc, v = np.asarray(meas_cores, dtype=float)[order], np.asarray(values, dtype=float)[order]
    cores = np.asarray(cores, dtype=float)
    inside = (cores >= mc[0]) & (cores <= mc[-1])
    lc = np.log(np.maximum(cores, 1e-300))
    got = np.interp(lc, np.log(mc), np.log(v) if log else v)
    return np.where(inside, np.exp(got) if log else got, np.nan)


def hold(cores: np.ndarray, low: np.ndarray, high: np.ndarray, meas_cores: np.ndarray,
         meas_x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The throughput band (low, high) widened, inside the measured range, to hold the measured
    throughput (interpolated between the counts, `between`): a band at a measured count never
    excludes what was measured there."""
    m = between(cores, meas_cores, meas_x)
    inside = ~np.isnan(m)
    return np.where(inside, np.fmin(low, m), low), np.where(inside, np.fmax(high, m), high)


def retrograde(fit: usl.USLFit | None, meas_cores: np.ndarray, meas_x: np.ndarray) -> tuple[bool, str]:
    """Does the fitted model itself say the curve turns down? (yes, why) -- see the module doc."""
    order = np.argsort(meas_cores)
    c, x = np.asarray(meas_cores, dtype=float)[order], np.asarray(meas_x, dtype=float)[order]
    fell = len(c) >= 2 and int(np.argmax(x)) < len(c) - 1 and x[-1] < (1.0 - DROP_SHARE) * x.max()
    peak = f"the measurements peak at {c[int(np.argmax(x))]:g} and fall {100 * (1 - x[-1] / x.max()):.0f}% by {c[-1]:g}"
    if fit is None:
        # two points: the fall itself, measured, is the only evidence there can be
        return (True, peak) if fell else (False, "two core counts cannot show a peak")
    if fit.amdahl or fit.beta <= 0:
        return False, "the fitted USL has no coherency term (β = 0)"
    if fell:
        return True, f"the USL's β = {fit.beta:.3g} turns the curve down and {peak}"
    ci = fit.confint(RETRO_LEVEL)
    why_b = f"the USL's β = {fit.beta:.3g}"
    if not np.all(np.isfinite(ci[1])) or ci[1, 0] <= 0:
        return False, f"{why_b} is not clearly above zero (its {100 * RETRO_LEVEL:.0f}% interval reaches 0)"
    why_b += f" ({100 * RETRO_LEVEL:.0f}% interval {ci[1, 0]:.3g}-{ci[1, 1]:.3g})"
    if len(c) >= 2 and x[-1] / x[-2] - 1.0 < FLAT_SHARE * (c[-1] / c[-2] - 1.0):
        return True, (f"{why_b} and the measurements flatten: {c[-2]:g} to {c[-1]:g} gained "
                      f"{100 * (x[-1] / x[-2] - 1):.0f}%")
    return False, f"{why_b}, but the measured points still rise: no peak or flattening measured yet"


def measured_floor(ds: Dataset, fits: dict[str, Any], kw: dict[str, Any], ts: TimeSeries | None = None) -> tuple[
        tuple[np.ndarray, np.ndarray] | None, tuple[bool, str]]:
    """The measured series a prediction may not fall below (None when the prediction is for
    another clock or problem size: then it may), and whether the fitted USL says the curve turns
    down (`retrograde`). `ts`: the times the prediction was made from, where they are not `ds`'s
    own (the two-point predictor's interference-free times): a floor from the raw times of a run
    that other processes slowed would let the prediction fall below what the program did alone."""
    if any(float(kw.get(k) or 1.0) != 1.0 for k in ("freq_ratio", "size_ratio")):
        return None, (False, "")
    ts = ts if ts is not None else time_series(ds)
    x = 1.0 / ts.time
    u = getattr(fits.get("usl"), "fit", None)
    if u is None and len(ts.cores) > 2:
        return (ts.cores.copy(), x), (False, "no USL was fitted to say the curve turns down")
    return (ts.cores.copy(), x), retrograde(u, ts.cores, x)


def rep_percentiles(ds: Dataset) -> np.ndarray | None:
    """Percentiles (REP_PERCENTILES) of the repetitions' log deviations from their core count's
    median throughput (None without repetitions)."""
    try:
        N, X, _ = speed(ds)
    except (UserError, KeyError, ValueError):       # no time or throughput: nothing to carry
        return None
    ok = np.isfinite(X) & (X > 0)
    N, X = N[ok], X[ok]
    dev = []
    for c in np.unique(N):
        v = X[N == c]
        if len(v) >= 2:
            dev.extend(np.log(v / np.median(v)).tolist())
    if len(dev) < 2:
        return None
    return np.percentile(np.array(dev), REP_PERCENTILES)


def rep_bounds(pct: np.ndarray | None, level: float) -> tuple[float, float]:
    """(lower, upper) log deviations the repetitions span at `level` (0, 0 without them)."""
    if pct is None:
        return 0.0, 0.0
    lo = float(np.interp(100 * (1 - level) / 2, REP_PERCENTILES, pct))
    hi = float(np.interp(100 * (1 + level) / 2, REP_PERCENTILES, pct))
    return min(lo, 0.0), max(hi, 0.0)


@dataclass(frozen=True)
class Conformal:
    """Quantiles of the held-out scores (log(truth / prediction) / σ) by extrapolation distance.

    `edges`: upper edges of the distance bins (the last is infinite); `levels`: the band levels
    tabled; `lower[b][i]`, `upper[b][i]`: the (1 - levels[i])/2 and (1 + levels[i])/2 quantiles
    in bin b. Levels between those tabled are interpolated; beyond them the nearest one's quantiles
    are stretched by the ratio of the normal quantiles (z(level) / z(nearest))."""

    edges: tuple[float, ...]
    levels: tuple[float, ...]
    lower: tuple[tuple[float, ...], ...]
    upper: tuple[tuple[float, ...], ...]

    def quantiles(self, r: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
        """(q_lo, q_hi) at distances r for a band at `level`."""
        b = np.minimum(np.searchsorted(np.asarray(self.edges), np.asarray(r, dtype=float), side="left"),
                       len(self.edges) - 1)
        lv = np.asarray(self.levels)
        lo = np.array([np.interp(level, lv, self.lower[i]) for i in range(len(self.edges))])
        hi = np.array([np.interp(level, lv, self.upper[i]) for i in range(len(self.edges))])
        # beyond the tabled levels the nearest one's quantiles, stretched as a normal tail's
        # (a 99% band is not the 95% band relabelled)
        edge = lv[-1] if level > lv[-1] else lv[0] if level < lv[0] else None
        if edge is not None:
            k = _z(level) / _z(float(edge))
            lo, hi = lo * k, hi * k
        return lo[b], hi[b]

    def to_dict(self) -> dict[str, Any]:
        return {"edges": list(self.edges), "levels": list(self.levels),
                "lower": [list(v) for v in self.lower], "upper": [list(v) for v in self.upper]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> "Conformal":
        return Conformal(tuple(float(e) for e in d["edges"]), tuple(float(v) for v in d["levels"]),
                         tuple(tuple(float(x) for x in row) for row in d["lower"]),
                         tuple(tuple(float(x) for x in row) for row in d["upper"]))


def scale(noise: float, growth: float, r: np.ndarray, spread: np.ndarray | float = 0.0,
          machine: np.ndarray | float = 0.0) -> np.ndarray:
    """σ(n) of the module doc (never below MIN_HALF_WIDTH: a score is always finite)."""
    d = np.log(np.maximum(np.asarray(r, dtype=float), 1.0))
    return np.maximum(np.sqrt(noise ** 2 + (growth * d) ** 2 + np.square(spread) + np.square(machine)),
                      MIN_HALF_WIDTH)


def band(value: np.ndarray, sigma: np.ndarray, r: np.ndarray, table: Conformal | None, level: float,
         reps: np.ndarray | None = None, fallback: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) throughput around `value` at `level`: the conformal quantiles times σ, never
    narrower than the repetitions' spread nor MIN_HALF_WIDTH. Without a table, ±z σ with z the
    normal quantile (`fallback`: the z to use)."""
    if table is not None:
        q_lo, q_hi = table.quantiles(r, level)
    else:
        z = fallback if fallback is not None else _z(level)
        q_lo, q_hi = np.full(len(value), -z), np.full(len(value), z)
    lo_dev = np.minimum(q_lo * sigma, 0.0)
    hi_dev = np.maximum(q_hi * sigma, 0.0)
    r_lo, r_hi = rep_bounds(reps, level)
    lo_dev = np.minimum(lo_dev, min(r_lo, -MIN_HALF_WIDTH))
    hi_dev = np.maximum(hi_dev, max(r_hi, MIN_HALF_WIDTH))
    return value * np.exp(lo_dev), value * np.exp(hi_dev)


def _z(level: float) -> float:
    return float(stats.norm.ppf((1 + level) / 2))


def weighted_quantile(values: np.ndarray, weights: np.ndarray, q: float) -> float:
    """The q quantile of `values` with `weights` (a step function: the smallest value whose
    cumulative weight reaches q of the total)."""
    order = np.argsort(values)
    v, w = np.asarray(values, dtype=float)[order], np.asarray(weights, dtype=float)[order]
    cw = np.cumsum(w)
    i = int(np.searchsorted(cw, q * cw[-1], side="left"))
    return float(v[min(i, len(v) - 1)])


def learn_table(scores: Sequence[float], r: Sequence[float], sources: Sequence[str], edges: Sequence[float],
                levels: Sequence[float], min_sources: int = 8) -> Conformal:
    """The conformal table from held-out scores at distances r, a source weighing the square
    root of its points in each bin; a bin with fewer than `min_sources` sources is merged with
    its neighbour below (the first bins with the ones above)."""
    s = np.asarray(scores, dtype=float)
    rr = np.asarray(r, dtype=float)
    src = np.asarray(sources)
    ok = np.isfinite(s) & np.isfinite(rr)
    s, rr, src = s[ok], rr[ok], src[ok]
    e = np.asarray(list(edges), dtype=float)
    b = np.minimum(np.searchsorted(e, rr, side="left"), len(e) - 1)
    groups: list[list[int]] = [[i] for i in range(len(e))]
    # merge bins with too few sources into a neighbour
    changed = True
    while changed and len(groups) > 1:
        changed = False
        for gi, g in enumerate(groups):
            n_src = len(set(src[np.isin(b, g)].tolist()))
            if n_src < min_sources:
                other = gi - 1 if gi > 0 else gi + 1
                groups[other] = sorted(groups[other] + g)
                del groups[gi]
                changed = True
                break
    lower: list[tuple[float, ...]] = [()] * len(e)
    upper: list[tuple[float, ...]] = [()] * len(e)
    for g in groups:
        m = np.isin(b, g)
        if not m.any():
            lo = tuple(-_z(L) for L in levels)
            hi = tuple(_z(L) for L in levels)
        else:
            w = _source_weights(src[m])
            lo = tuple(round(weighted_quantile(s[m], w, (1 - L) / 2), 4) for L in levels)
            hi = tuple(round(weighted_quantile(s[m], w, (1 + L) / 2), 4) for L in levels)
        for i in g:
            lower[i], upper[i] = lo, hi
    return Conformal(tuple(float(x) for x in e), tuple(float(x) for x in levels), tuple(lower), tuple(upper))


def _source_weights(src: np.ndarray) -> np.ndarray:
    """1 / sqrt(points of the source): a source weighs the square root of its points. (Chosen by
    nested leave-one-source-out among three: every source the same held 72.6% of the corpus'
    held-out points without the machines, 79.8% averaged over the sources; every point the
    same 78.2% and 83.1%; the square root 77.3% and 83.7%, and with the machines 80.1% and
    78.5%: the one within 75-85% both ways in both runs. docs/predict.md.)"""
    _, inv, counts = np.unique(src, return_inverse=True, return_counts=True)
    return 1.0 / np.sqrt(counts[inv])


def quantile_levels() -> tuple[float, ...]:
    """The band levels a learned table holds."""
    return (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)

