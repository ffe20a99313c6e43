"""The stall-based method: ESTIMA (Chatzopoulos, Dragojević, Guerraoui, PPoPP 2016).

Input: per core count n, the execution time (or throughput) and stall categories: cycles the
program spent waiting rather than working (fine-grained back-end stall events, lock-wait,
barrier-wait, aborted-transaction cycles, run-queue delay, ...), summed over its threads.

1. Every stall category is extrapolated separately with the kernels and ESTIMA's checkpoint
   selection (`corecast.model.select`), realistic fits only (≥ 0 from 1 core to the target).
2. Stalled cycles per core, s(n) = Σ_k stall_k(n) / n. The scaling factor f(n) = time(n) / s(n)
   on the measured points is extrapolated with the same kernels; among the realistic near-best
   candidates, the one whose predicted time f(n)·s(n) correlates best (Pearson) with the
   extrapolated s(n) over the target range is kept. Predicted time = f(n)·s(n).
3. Other problem sizes and machines: `size_ratio` (target / measured problem size) scales the
   stalls, `freq_ratio` (measured / target clock frequency) scales the time.
4. Bottlenecks: each category's stalls per core at the targets, ranked by how much they grow
   from the largest measured core count, with their share of all stalls.

corecast charges each category to time first (`corecast.model.losttime`): with the CPU time
known, a wait counts only up to the core-time the run lost (the part of it during which cores
stood idle, where the sync shim measured it); a wait that overlapped other threads' running is
not a stall. A category the analysis does not find on the critical path keeps its verdict
("waiting while other threads work: not a bottleneck", ...), whatever its extrapolation.

With throughput and no time column, time is 1/throughput (time per unit of work); the
scaling factor absorbs the units.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from .base import Fitted, Prediction
from . import losttime
from .kernels import DEFAULT_KERNELS, Kernel, KernelFit, LinearKernel
from .select import Candidate, Selection, SelectionError, select
from .series import TimeSeries, check_categories, prepare, time_series, to_prediction

#: Candidates for the scaling factor: the best realistic fit of every kernel whose checkpoint
#: error is within this factor of the best compete on correlation.
F_NEAR_FACTOR = 5.0
#: Plausible scaling factors over the target range: at most F_RISE × the largest measured one,
#: at least the smallest measured one / F_FALL.
F_RISE = 2.0
F_FALL = 4.0


@dataclass
class Category:
    name: str
    cores: np.ndarray
    value: np.ndarray        # median per core count, in cycles (or the column's unit)
    unit: str | None


@dataclass
class Bottleneck:
    category: str
    rank: int
    model: str
    growth: float                    # stalls per core at the largest target / at the largest measured count
    share_measured: float            # share of all stalls per core at the largest measured count
    share_target: float              # ... at the largest target
    per_core_measured: float
    per_core: dict[float, float]     # target cores -> extrapolated stalls per core
    share: dict[float, float]        # target cores -> share of all stalls per core
    time_s: dict[float, float]       # target cores -> time attributed to it, f(n)·stalls/core
    verdict: str
    charged_share: float | None = None   # share of its wait charged to time (losttime; None: not judged)
    critical: bool | None = None         # on the critical path and growing with the lost core-time

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.category, "rank": self.rank, "model": self.model,
                "charged_share": _num(self.charged_share) if self.charged_share is not None else None,
                "critical": self.critical,
                "growth": _num(self.growth), "share_measured": _num(self.share_measured),
                "share_at_largest_target": _num(self.share_target),
                "stalls_per_core_measured": _num(self.per_core_measured),
                "per_target": [{"cores": _intish(c), "stalls_per_core": _num(v),
                                "share": _num(self.share[c]), "time_s": _num(self.time_s[c])}
                               for c, v in self.per_core.items()],
                "verdict": self.verdict}


@dataclass
class _Solved:
    horizon: float
    stalls: dict[str, Selection]
    f: Selection
    f_choice: Candidate
    f_corr: float
    f_points: tuple[np.ndarray, np.ndarray]     # measured (n, f)
    corr_range: np.ndarray
    chosen_by: str = "correlation"


@dataclass
class EstimaFit(Fitted):
    series: TimeSeries
    categories: list[Category]
    analysis: losttime.LossAnalysis | None = None
    kernels: Sequence[Kernel] | None = None
    checkpoints: int | None = None
    use: str = "prefix"
    size_ratio: float = 1.0
    freq_ratio: float = 1.0
    work_stall: bool = True
    clock_hz: float | None = None        # anchors WorkStall's b at 1/clock (see `anchor`)
    method: str = "estima"
    warnings: list[str] = field(default_factory=list)
    _cache: dict[float, _Solved] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ solving
    def solve(self, horizon: float) -> _Solved:
        h = float(max(horizon, self.series.cores.max()))
        if h in self._cache:
            return self._cache[h]
        label = self.series.dataset.label
        stalls: dict[str, Selection] = {}
        for cat in self.categories:
            try:
                stalls[cat.name] = select(cat.cores, cat.value, h, kernels=self.kernels,
                                          checkpoints=self.checkpoints, nonneg=True, use=self.use,
                                          name=cat.name)
            except SelectionError as err:
                raise UserError(f"{label}: estima: {err}") from None
        # Stalls per core at the measured points (measured where available, else extrapolated).
        n = self.series.cores
        total = np.zeros_like(n)
        for cat in self.categories:
            v = stalls[cat.name](n)
            idx = np.searchsorted(cat.cores, n)
            idx = np.clip(idx, 0, len(cat.cores) - 1)
            have = cat.cores[idx] == n
            v = np.where(have, cat.value[idx], v)
            total += v
        spc = total / n
        ok = spc > 0
        if ok.sum() < 3:
            raise UserError(f"{label}: estima: stalled cycles are zero at most core counts; "
                            "nothing to extrapolate (use --method timex)")
        fn, fv = n[ok], self.series.time[ok] / spc[ok]
        fkernels = tuple(self.kernels) if self.kernels else DEFAULT_KERNELS
        anchor = self.anchor()
        if self.work_stall:
            fkernels = fkernels + (_work_stall_kernel(stalls, fn, spc[ok]),)
            if anchor is not None:
                fkernels = fkernels + (_work_stall_kernel(stalls, fn, spc[ok], anchor),)
        try:
            fsel = select(fn, fv, h, kernels=fkernels, checkpoints=self.checkpoints, positive=True,
                          use=self.use, name="scaling factor", exhaustive=True)
        except SelectionError as err:
            raise UserError(f"{label}: estima: {err}") from None
        # The target range: from the largest measured count to the horizon.
        top = float(n.max())
        rng = np.unique(np.concatenate([np.geomspace(top, h, 24) if h > top else [top], [h]]))
        s_rng = self._spc(stalls, rng)
        s0 = fsel.best.score
        cands = [c for c in fsel.per_kernel() if c.score <= F_NEAR_FACTOR * max(s0, 1e-12 * float(np.max(fv)))]
        cands = cands or [fsel.best]
        # corecast's plausibility check of the scaling factor (beyond the paper's realism):
        # time per stalled cycle per core does not grow far above, nor fall far below, what
        # was measured. Candidates that leave [min/F_FALL, max·F_RISE] over the range are set
        # aside unless none remains.
        fmin, fmax = float(np.min(fv)), float(np.max(fv))
        plausible = [c for c in cands
                     if np.all(c.fit(rng) <= F_RISE * fmax) and np.all(c.fit(rng) >= fmin / F_FALL)]
        cands = plausible or cands
        best, best_r = cands[0], -math.inf
        anchored = [c for c in cands if c.name == ANCHORED]
        chosen_by = "correlation"
        if anchored:
            # The physical form with its slope known: preferred whenever it fits the measured
            # scaling factor about as well as the best kernel (it is among the near-best). The
            # correlation criterion cannot choose it: a flat f makes the predicted time exactly
            # proportional to the stalls per core (correlation 1) whatever the stalls do.
            best = anchored[0]
            chosen_by = "anchor"
            t = best.fit(rng) * s_rng
            best_r = _pearson(t, s_rng) if len(rng) >= 3 else math.nan
        elif len(rng) >= 3 and np.std(s_rng) > 1e-12 * max(float(np.mean(np.abs(s_rng))), 1e-300):
            for c in cands:
                t = c.fit(rng) * s_rng
                r = _pearson(t, s_rng)
                if r > best_r + 1e-12:
                    best, best_r = c, r
        else:
            best_r = math.nan
        if best is not fsel.best:
            final = best.fit
            if self.use == "all" and best.points < len(fn):
                refit = fsel.final if fsel.final.kernel is best.fit.kernel and fsel.final is not fsel.best.fit else None
                final = refit or best.fit
            fsel = Selection(n=fsel.n, y=fsel.y, checkpoints=fsel.checkpoints, n_hi=fsel.n_hi, best=best,
                             final=final, candidates=[best] + [c for c in fsel.candidates if c is not best],
                             rejected=fsel.rejected, positive=True, name=fsel.name, warnings=fsel.warnings)
        solved = _Solved(h, stalls, fsel, best, best_r, (fn, fv), rng, chosen_by)
        self._cache[h] = solved
        return solved

    def anchor(self) -> float | None:
        """WorkStall's b = 1/clock (seconds per stalled cycle per core) when it is known: time in
        seconds, every stall category in cycles, and the machine's clock frequency given. Time =
        (work + stalls) / (n · clock) is then time = a/n + s(n)/clock, a the only unknown."""
        if not (self.work_stall and self.clock_hz and self.clock_hz > 0):
            return None
        if self.series.metric != "time_s":
            return None
        if not self.categories or any(c.unit != "cycles" for c in self.categories):
            return None
        return 1.0 / self.clock_hz

    @staticmethod
    def _spc(stalls: dict[str, Selection], n: np.ndarray) -> np.ndarray:
        total = np.zeros_like(n, dtype=float)
        for sel in stalls.values():
            total += sel(n)
        return total / n

    # ------------------------------------------------------------------ the face
    def stalls(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Extrapolated stall cycles of every category (scaled by size_ratio): value, low, high."""
        cores = np.asarray(cores, dtype=float)
        sv = self.solve(float(cores.max()))
        return {k: tuple(a * self.size_ratio for a in sel.band(cores, level)) for k, sel in sv.stalls.items()}

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        sv = self.solve(float(cores.max()) if cores.size else 0.0)
        vals = {k: sel.band(cores, level) for k, sel in sv.stalls.items()}
        spc = sum(v[0] for v in vals.values()) / cores
        spc_lo = sum(v[1] for v in vals.values()) / cores
        spc_hi = sum(v[2] for v in vals.values()) / cores
        f, f_lo, f_hi = sv.f.band(cores, level)
        R = self.size_ratio
        t = f * spc * R * self.freq_ratio
        with np.errstate(divide="ignore", invalid="ignore"):
            h_lo = np.sqrt(np.log(np.maximum(spc / spc_lo, 1.0)) ** 2 + np.log(np.maximum(f / f_lo, 1.0)) ** 2)
            h_hi = np.sqrt(np.log(np.maximum(spc_hi / spc, 1.0)) ** 2 + np.log(np.maximum(f_hi / f, 1.0)) ** 2)
        lo, hi = t * np.exp(-np.nan_to_num(h_lo, nan=0.0)), t * np.exp(np.nan_to_num(h_hi, nan=0.0))
        warns = list(self.series.warnings) + list(self.warnings) + list(sv.f.warnings)
        for sel in sv.stalls.values():
            warns.extend(sel.warnings)
        return to_prediction(cores, t, lo, hi, self.series.metric, level=level, method=self.method,
                             model=f"stalls × scaling factor ({sv.f.kernel})",
                             params={"models": self.models(float(cores.max())),
                                     "size_ratio": self.size_ratio, "freq_ratio": self.freq_ratio},
                             warnings=warns)

    def models(self, horizon: float) -> dict[str, Any]:
        sv = self.solve(horizon)
        out: dict[str, Any] = {k: sel.to_dict() for k, sel in sv.stalls.items()}
        f = sv.f.to_dict()
        if sv.chosen_by == "anchor":
            f["chosen_by"] = ("WorkStall with b = 1/clock (a stalled cycle per core costs a cycle of time), "
                              "fitting the measured scaling factor among the near-best")
        else:
            f["chosen_by"] = ("highest correlation of predicted time with extrapolated stalls per core "
                              f"over {sv.corr_range[0]:g}..{sv.corr_range[-1]:g} cores")
        f["correlation"] = _num(sv.f_corr)
        out["scaling_factor"] = f
        return out

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Bottleneck]:
        """Stall categories ranked by the growth of their stalls per core up to the targets, with
        the lost-core-time analysis' verdict where it finds a category off the critical path."""
        return apply_analysis(self._bottlenecks(cores), self.analysis)

    def _bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Bottleneck]:
        cores = np.sort(np.asarray(cores, dtype=float))
        sv = self.solve(float(cores.max()))
        top = float(self.series.cores.max())
        R = self.size_ratio
        f_t = sv.f(cores) * self.freq_ratio
        per_core = {k: sel(cores) * R / cores for k, sel in sv.stalls.items()}
        per_top = {}
        for cat in self.categories:
            if top in cat.cores:
                per_top[cat.name] = float(cat.value[cat.cores == top][0]) / top
            else:
                per_top[cat.name] = float(sv.stalls[cat.name](np.array([top]))[0]) / top
        tot_t = sum(per_core.values())
        tot_top = sum(per_top.values())
        last = len(cores) - 1
        rows = []
        for cat in self.categories:
            k = cat.name
            pc = per_core[k]
            growth = pc[last] / per_top[k] if per_top[k] > 0 else (math.inf if pc[last] > 0 else 1.0)
            delta = pc[last] - per_top[k] * R
            share_t = pc / np.where(tot_t > 0, tot_t, 1.0)
            if growth > 1.05:
                verdict = "stops scaling: grows per core"
            elif growth < 0.95:
                verdict = "scales: falls per core"
            else:
                verdict = "flat per core"
            rows.append((delta, growth, Bottleneck(
                category=k, rank=0, model=sv.stalls[k].kernel, growth=float(growth),
                share_measured=per_top[k] / tot_top if tot_top > 0 else math.nan,
                share_target=float(share_t[last]), per_core_measured=per_top[k],
                per_core={float(c): float(v) for c, v in zip(cores, pc)},
                share={float(c): float(v) for c, v in zip(cores, share_t)},
                time_s={float(c): float(v) for c, v in zip(cores, f_t * pc)},
                verdict=verdict)))
        rows.sort(key=lambda r: (-r[0], -r[1]))
        out = []
        for i, (_, _, b) in enumerate(rows, 1):
            b.rank = i
            out.append(b)
        return out


def apply_analysis(rows: list[Bottleneck], la: losttime.LossAnalysis | None) -> list[Bottleneck]:
    """A stall method's bottleneck rows with the lost-core-time analysis: for a category off the
    critical path its verdict replaces the method's where the method would name it (or the wait
    mostly overlapped other threads' running); the categories the method left out (no charged
    wait) are added, and the critical ones come first."""
    if la is None:
        return rows
    seen = set()
    for b in rows:
        ch = la.charges.get(b.category)
        if ch is None:
            continue
        seen.add(b.category)
        b.charged_share, b.critical = ch.charged_share, ch.critical
        names_it = "stops scaling" in b.verdict or "bottleneck" in b.verdict
        if not ch.critical and (names_it or ch.verdict.startswith(losttime.OVERLAP_VERDICT)):
            b.verdict = ch.verdict      # a method's "scales" or "flat" stays: it names nothing
    extra = [b for b in analysis_rows(la) if b.category not in seen]
    out = [b for b in rows if b.critical is not False] + [b for b in rows if b.critical is False] + extra
    for i, b in enumerate(out, 1):
        b.rank = i
    return out


def analysis_rows(la: losttime.LossAnalysis) -> list[Bottleneck]:
    """Bottleneck rows from the lost-core-time analysis alone (no extrapolation): each category's
    charged wait per core at the largest measured count, its growth from the smallest, its share
    of the charged waits, and the analysis' verdict."""
    clock = la.clock_hz or 1.0
    n1, nk = float(la.counts[0].cores), float(la.counts[-1].cores)
    tot = sum(float(ch.charged_s[-1]) for ch in la.charges.values())
    rows = []
    for ch in la.charges.values():
        k1, kk = float(ch.charged_s[0]) / n1, float(ch.charged_s[-1]) / nk
        g = kk / k1 if k1 > 0 else (math.inf if kk > 0 else 1.0)
        verdict = ch.verdict if not ch.critical else (
            f"grows with the lost core-time: a scaling bottleneck ({ch.verdict}; not extrapolated, the stall "
            f"model is not used: {la.reason or 'the data do not allow it'})")
        rows.append(Bottleneck(category=ch.name, rank=0, model="not extrapolated", growth=g,
                               share_measured=float(ch.charged_s[-1]) / tot if tot > 0 else 0.0,
                               share_target=float(ch.charged_s[-1]) / tot if tot > 0 else 0.0,
                               per_core_measured=kk * clock, per_core={}, share={}, time_s={}, verdict=verdict,
                               charged_share=ch.charged_share, critical=ch.critical))
    rows.sort(key=lambda b: (not b.critical, -b.share_measured))
    for i, b in enumerate(rows, 1):
        b.rank = i
    return rows


ANCHORED = "WorkStall@clock"


class _AnchoredWorkStall(Kernel):
    """f(n) = a / (n·s(n)) + b0 with b0 fixed (1/clock) and a ≥ 0: one free parameter."""

    name = ANCHORED
    param_names = ("a",)

    def __init__(self, spc: Callable[[np.ndarray], np.ndarray], b0: float):
        self._spc = spc
        self.b0 = b0
        self.expr = f"a / (n·s(n)) + {b0:.4g}  (time = a/n + s(n)/clock; s: stalls per core)"

    def _phi(self, n: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return 1.0 / (n * self._spc(n))

    def evaluate(self, theta: np.ndarray, n: np.ndarray, extra: dict | None = None) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        return theta[0] * self._phi(np.atleast_1d(n)).reshape(n.shape) + self.b0

    def fit(self, n: np.ndarray, y: np.ndarray) -> KernelFit | None:
        return self.fit_raw(n, y)

    def fit_raw(self, n: np.ndarray, y: np.ndarray) -> KernelFit | None:
        phi = self._phi(n)
        if not np.all(np.isfinite(phi)):
            return None
        den = float(phi @ phi)
        if den <= 0:
            return None
        a = max(0.0, float(phi @ (y - self.b0)) / den)
        r = a * phi + self.b0 - y
        return KernelFit(self, np.array([a]), n, y, float(r @ r))

    def describe(self, theta: np.ndarray, extra: dict | None = None) -> str:
        return f"{theta[0]:.4g}/(n·s(n)) + {self.b0:.4g}"


def _work_stall_kernel(stalls: dict[str, Selection], n_meas: np.ndarray, spc_meas: np.ndarray,
                       anchor: float | None = None) -> Kernel:
    """f(n) = a / (n·s(n)) + b, a, b ≥ 0, with s the stalls per core: the scaling factor of
    time = (work + stalls) / (n · clock), i.e. time = a/n + b·s(n). Measured stalls per core at
    the measured counts, extrapolated ones elsewhere. With `anchor`, b is fixed to it (1/clock)."""
    def spc(n: np.ndarray) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        total = np.zeros_like(n)
        for sel in stalls.values():
            total += sel(n)
        out = total / n
        idx = np.clip(np.searchsorted(n_meas, n), 0, len(n_meas) - 1)
        return np.where(n_meas[idx] == n, spc_meas[idx], out)

    if anchor is not None:
        return _AnchoredWorkStall(spc, anchor)

    def basis(n: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore"):
            return np.stack([1.0 / (n * spc(n)), np.ones_like(n)], axis=-1)

    return LinearKernel("WorkStall", "a / (n·s(n)) + b  (time = a/n + b·s(n), a, b ≥ 0; s: stalls per core)",
                        ("a", "b"), basis, nonneg=True, terms=("1/(n·s(n))", ""))


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    den = math.sqrt(float(a @ a) * float(b @ b))
    if not math.isfinite(den) or den == 0:
        return -math.inf
    return float(a @ b) / den


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _intish(v: float) -> float | int:
    return int(v) if float(v).is_integer() else float(v)


# ============================================================================ data
def stall_categories(ds: Dataset, names: Sequence[str] | None = None) -> tuple[list[Category], list[str]]:
    """Median stall cycles per core count for every stall category (or those named)."""
    warnings: list[str] = []
    if names:
        check_categories(ds, names)
        use = list(names)
    else:
        use = ds.stall_names
    cats = []
    units = {ds.columns[n].unit for n in use}
    freq = ds.machine.nominal_freq_hz
    for nm in use:
        ag = ds.aggregate(nm)
        v = ag.value
        unit = ds.columns[nm].unit
        if np.any(v < 0):
            raise UserError(f"{ds.label}: stall category '{nm}' has negative values (median "
                            f"{v.min():g} at {ag.cores[np.argmin(v)]:g} cores)")
        if len(units) > 1 and unit == "s":
            if freq:
                v = v * freq
                unit = "cycles"
            else:
                warnings.append(f"stall category '{nm}' is in seconds and others are not; summed as is "
                                "(the machine's clock frequency is unknown)")
        if len(ag.cores) < 3:
            warnings.append(f"stall category '{nm}' measured at {len(ag.cores)} core counts: left out")
            continue
        cats.append(Category(nm, ag.cores, v, unit))
    return cats, warnings


def _with_warnings(new: TimeSeries, old: TimeSeries) -> TimeSeries:
    new.warnings.extend(old.warnings)
    return new


def size_ratio_for(ds: Dataset, target_size: float) -> float:
    """Target / measured problem size: from the `size` column, else from the measured memory
    footprint (`rss_bytes`, target given in bytes)."""
    if not (math.isfinite(target_size) and target_size > 0):
        raise UserError(f"--target-size must be a number > 0 (got {target_size:g})")
    if ds.size is not None and np.isfinite(ds.size).any():
        return float(target_size / np.median(ds.size[np.isfinite(ds.size)]))
    if "rss_bytes" in ds.metrics and np.isfinite(ds.metrics["rss_bytes"]).any():
        return float(target_size / np.median(ds.metrics["rss_bytes"][np.isfinite(ds.metrics["rss_bytes"])]))
    raise UserError(f"{ds.label}: no 'size' or 'rss_bytes' column to compare --target-size with "
                    "(give --size-ratio instead)")


def fit_dataset(ds: Dataset, kernels: Sequence[Kernel] | None = None, checkpoints: int | None = None,
                use: str = "prefix", size: float | None = None, size_ratio: float = 1.0,
                freq_ratio: float = 1.0, categories: Sequence[str] | None = None,
                work_stall: bool = True) -> EstimaFit:
    """The stall method on a Dataset: fit, then `.predict(cores, level)`, `.bottlenecks(cores)`."""
    prep = prepare(ds, "estima", size, freq_ratio, size_ratio)
    ds1, ts = prep.data, prep.series
    ds1, la = losttime.prepare(ds1, categories)
    if la is not None and la.free_time is not None:
        ts = _with_warnings(time_series(ds1), ts)       # the interference-free times
    cats, cw = stall_categories(ds1, categories)
    if la is not None:
        cw.extend(la.notes)
    if not cats:
        raise UserError(f"{ds.label}: estima needs stall categories (columns other than cores, repetition, "
                        "size, time_s, throughput and known counters); this file has none "
                        "(use --method timex or usl)")
    clock = ds1.machine.nominal_freq_hz
    if work_stall and ts.metric == "time_s" and not clock and all(c.unit == "cycles" for c in cats):
        cw.append("the machine's clock frequency is unknown: what a stalled cycle costs in time is fitted "
                  "to the measured points instead of fixed at 1/clock, and can extrapolate far off; give "
                  "the clock (--clock GHZ)")
    return EstimaFit(ts, cats, analysis=la, kernels=kernels, checkpoints=checkpoints, use=use,
                     size_ratio=size_ratio, freq_ratio=freq_ratio, work_stall=work_stall, clock_hz=clock,
                     warnings=cw)
