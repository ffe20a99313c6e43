"""`timex`: direct time extrapolation, ESTIMA's baseline.

The same kernels and the same checkpoint selection as the stall method, applied to the time
series itself (the median time per core count, or 1/throughput when the dataset has only a
throughput column). Also home of the small helpers that turn a Dataset into the one series per
core count every extrapolating method works on.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from .base import Prediction
from .kernels import Kernel
from .select import Selection, SelectionError, select


# ============================================================================ data preparation
@dataclass
class TimeSeries:
    """One time value per core count, from a Dataset."""

    cores: np.ndarray
    time: np.ndarray          # median time (s), or 1/median throughput (s per unit of work)
    metric: str               # the input metric: "time_s" or "throughput"
    source: str               # e.g. "time_s" or "1/throughput"
    spread: np.ndarray        # relative spread of the repetitions (std / median), 0 with one
    dataset: Dataset
    warnings: list[str] = field(default_factory=list)

    def to_metric(self, time: np.ndarray) -> np.ndarray:
        return time if self.metric == "time_s" else 1.0 / time


def single_size(ds: Dataset, size: float | None = None) -> tuple[Dataset, list[str]]:
    """The rows of one problem size: `size`, or the size measured at the most core counts."""
    if ds.size is None:
        if size is not None:
            raise UserError(f"{ds.label}: has no 'size' column (cannot select size {size:g})")
        return ds, []
    sizes = np.unique(ds.size[np.isfinite(ds.size)])
    if size is not None:
        if size not in sizes:
            raise UserError(f"{ds.label}: no rows of size {size:g} (sizes: {', '.join(f'{s:g}' for s in sizes)})")
        return ds.select(ds.size == size), []
    if len(sizes) <= 1:
        return ds, []
    counts = [(len(np.unique(ds.cores[ds.size == s])), s) for s in sizes]
    _, best = max(counts)
    return ds.select(ds.size == best), [
        f"{len(sizes)} problem sizes in the data; using size {best:g} (measured at the most core counts)"]


def time_series(ds: Dataset) -> TimeSeries:
    """Median time per core count, or 1/(median throughput) when there is no time column."""
    warnings: list[str] = []
    if "time_s" in ds.metrics and np.isfinite(ds.metrics["time_s"]).any():
        ag = ds.aggregate("time_s")
        if np.any(ag.value <= 0):
            bad = ag.cores[np.argmax(ag.value <= 0)]
            raise UserError(f"{ds.label}: time_s must be > 0 (median at {bad:g} cores is {ag.value[ag.cores == bad][0]:g})")
        metric, source, t = "time_s", "time_s", ag.value
    elif "throughput" in ds.metrics and np.isfinite(ds.metrics["throughput"]).any():
        ag = ds.aggregate("throughput")
        if np.any(ag.value <= 0):
            bad = ag.cores[np.argmax(ag.value <= 0)]
            raise UserError(f"{ds.label}: throughput must be > 0 (median at {bad:g} cores is "
                            f"{ag.value[ag.cores == bad][0]:g})")
        metric, source, t = "throughput", "1/throughput", 1.0 / ag.value
    else:
        avail = ", ".join(ds.metrics) or "none"
        raise UserError(f"{ds.label}: needs a 'time_s' or 'throughput' column to predict (metrics: {avail})")
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(ag.value != 0, ag.std / np.abs(ag.value), 0.0)
    return TimeSeries(ag.cores, t, metric, source, spread, ds, warnings)


def need_points(ts: TimeSeries, what: str = "prediction") -> None:
    if len(ts.cores) < 3:
        hint = "; with two, `--method auto` gives a two-point estimate" if len(ts.cores) == 2 else ""
        raise UserError(f"{ts.dataset.label}: {what} needs measurements at 3 or more distinct core counts "
                        f"(got {len(ts.cores)}){hint}")


def to_prediction(cores: np.ndarray, t: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
                  metric: str, **kw: Any) -> Prediction:
    """A Prediction of `metric` from predicted times and their band."""
    if metric == "time_s":
        return Prediction(cores=cores, value=t, metric="time_s", low=lo, high=hi, **kw)
    with np.errstate(divide="ignore"):
        return Prediction(cores=cores, value=1.0 / t, metric="throughput",
                          low=None if hi is None else 1.0 / hi,
                          high=None if lo is None else 1.0 / lo, **kw)


# ============================================================================ the method
@dataclass
class TimexFit:
    """Kernels fitted to the time series directly."""

    series: TimeSeries
    kernels: Sequence[Kernel] | None = None
    checkpoints: int | None = None
    use: str = "prefix"
    freq_ratio: float = 1.0
    size_ratio: float = 1.0
    method: str = "timex"
    warnings: list[str] = field(default_factory=list)
    _cache: dict[float, Selection] = field(default_factory=dict, repr=False)

    def selection(self, horizon: float) -> Selection:
        h = float(max(horizon, self.series.cores.max()))
        if h not in self._cache:
            try:
                self._cache[h] = select(self.series.cores, self.series.time, h, kernels=self.kernels,
                                        checkpoints=self.checkpoints, positive=True, use=self.use,
                                        name=self.series.source)
            except SelectionError as err:
                raise UserError(f"{self.series.dataset.label}: timex: {err}") from None
        return self._cache[h]

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        sel = self.selection(float(cores.max()) if cores.size else 0.0)
        t, lo, hi = sel.band(cores, level)
        scale = self.freq_ratio * self.size_ratio
        warns = list(self.series.warnings) + list(self.warnings) + list(sel.warnings)
        return to_prediction(cores, t * scale, lo * scale, hi * scale, self.series.metric, level=level,
                             method=self.method, model=sel.kernel,
                             params={"time_s": sel.to_dict(), "source": self.series.source},
                             warnings=warns)

    def models(self, horizon: float) -> dict[str, Any]:
        sel = self.selection(horizon)
        return {"time_s" if self.series.metric == "time_s" else "1/throughput": sel.to_dict()}


def fit_dataset(ds: Dataset, kernels: Sequence[Kernel] | None = None, checkpoints: int | None = None,
                use: str = "prefix", size: float | None = None, freq_ratio: float = 1.0,
                size_ratio: float = 1.0) -> TimexFit:
    """Direct time extrapolation of a Dataset: fit, then `.predict(cores, level)`."""
    ds1, warns = single_size(ds, size)
    ts = time_series(ds1)
    ts.warnings.extend(warns)
    need_points(ts, "timex")
    _check_ratio(freq_ratio, "--freq-ratio")
    _check_ratio(size_ratio, "--size-ratio")
    warn = []
    if size_ratio != 1.0:
        warn.append(f"timex scales time linearly with the problem size (×{size_ratio:g}); only the "
                    "stall method extrapolates where the time goes")
    return TimexFit(ts, kernels=kernels, checkpoints=checkpoints, use=use, freq_ratio=freq_ratio,
                    size_ratio=size_ratio, warnings=warn)


def _check_ratio(r: float, option: str) -> None:
    if not (np.isfinite(r) and r > 0):
        raise UserError(f"{option} must be a number > 0 (got {r:g})")
