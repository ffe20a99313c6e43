"""The series every method fits: a Dataset reduced to one value per core count.

- `single_size`: the rows of one problem size;
- `input_metric`: the metric a prediction is given in (`time_s` when the data have times, else
  `throughput`), and `convert`/`to_prediction` between the two;
- `time_series`: the median time per core count (or 1/median throughput);
- `check_ratio`, `need_points`: the checks of options and data every fit makes;
- `prepare`: the opening of every fit function (the size, the checks, the series) in one call.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from .base import Prediction


@dataclass
class TimeSeries:
    """One time value per core count, from a Dataset."""

    cores: np.ndarray
    time: np.ndarray          # median time (s), or 1/median throughput (s per unit of work)
    metric: str               # the input metric: "time_s" or "throughput"
    source: str               # e.g. "time_s" or "1/throughput"
    dataset: Dataset
    warnings: list[str] = field(default_factory=list)


# ============================================================================ metrics
def input_metric(ds: Dataset) -> str:
    """`time_s` when the dataset has times, else `throughput`; a UserError with neither."""
    if "time_s" in ds.metrics and np.isfinite(ds.metrics["time_s"]).any():
        return "time_s"
    if "throughput" in ds.metrics and np.isfinite(ds.metrics["throughput"]).any():
        return "throughput"
    empty = [m for m in ("time_s", "throughput") if m in ds.metrics]
    if empty:
        # the column is there and every value is missing: runs that failed (a campaign records
        # them with their exit status and no time); "needs a 'time_s' column (metrics: time_s)"
        # contradicted itself
        raise UserError(f"{ds.label}: no run has a value of {' or '.join(repr(m) for m in empty)} to predict from "
                        "(runs that failed are recorded without one: `corecast info` shows their status)")
    avail = ", ".join(ds.metrics) or "none"
    raise UserError(f"{ds.label}: needs a 'time_s' or 'throughput' column to predict (metrics: {avail})")


def speed(ds: Dataset) -> tuple[np.ndarray, np.ndarray, str]:
    """The rows as a throughput of the input metric (`input_metric`): 1/time_s where the data
    have times, even beside a `throughput` column. A program's own throughput need not be its
    work over its time (operations of a fixed-time run, or per thread): a law fitted to it and
    turned into time would predict a time in other units."""
    return ds.throughput(input_metric(ds))


def convert(p: Prediction, metric: str) -> Prediction:
    """The same prediction expressed in `metric` (time_s ↔ throughput, bounds swapped)."""
    if p.metric == metric:
        return p
    with np.errstate(divide="ignore"):
        return Prediction(cores=p.cores, value=1.0 / p.value, metric=metric,
                          low=None if p.high is None else 1.0 / p.high,
                          high=None if p.low is None else 1.0 / p.low,
                          level=p.level, method=p.method, model=p.model, params=dict(p.params),
                          warnings=list(p.warnings))


def to_prediction(cores: np.ndarray, t: np.ndarray, lo: np.ndarray | None, hi: np.ndarray | None,
                  metric: str, **kw: Any) -> Prediction:
    """A Prediction of `metric` from predicted times and their band."""
    if metric == "time_s":
        return Prediction(cores=cores, value=t, metric="time_s", low=lo, high=hi, **kw)
    with np.errstate(divide="ignore"):
        return Prediction(cores=cores, value=1.0 / t, metric="throughput",
                          low=None if hi is None else 1.0 / hi,
                          high=None if lo is None else 1.0 / lo, **kw)


# ============================================================================ rows and series
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
    metric = input_metric(ds)
    ag = ds.aggregate(metric)
    if np.any(ag.value <= 0):
        bad = ag.cores[np.argmax(ag.value <= 0)]
        raise UserError(f"{ds.label}: {metric} must be > 0 (median at {bad:g} cores is "
                        f"{ag.value[ag.cores == bad][0]:g})")
    if metric == "time_s":
        source, t = "time_s", ag.value
    else:
        source, t = "1/throughput", 1.0 / ag.value
    return TimeSeries(ag.cores, t, metric, source, ds)


# ============================================================================ checks
def check_ratio(r: float, option: str) -> None:
    """A ratio option (--freq-ratio, --size-ratio) is a finite number > 0."""
    if not (np.isfinite(r) and r > 0):
        raise UserError(f"{option} must be a number > 0 (got {r:g})")


def check_categories(ds: Dataset, categories: Sequence[str] | None) -> None:
    """Every stall category asked for is a column of the dataset."""
    for nm in categories or ():
        if nm not in ds.metrics:
            avail = ", ".join(ds.stall_names) or "none"
            raise UserError(f"{ds.label}: unknown stall category '{nm}' (stall columns: {avail})")


def need_points(ts: TimeSeries, what: str = "prediction") -> None:
    """At least 3 distinct core counts (with 2, says that `auto` gives a two-point estimate)."""
    if len(ts.cores) < 3:
        hint = "; with two, `--method auto` gives a two-point estimate" if len(ts.cores) == 2 else ""
        raise UserError(f"{ts.dataset.label}: {what} needs measurements at 3 or more distinct core counts "
                        f"(got {len(ts.cores)}){hint}")


# ============================================================================ prepare
@dataclass
class Prepared:
    """A Dataset made ready for a fit: the rows of one problem size and what choosing them said."""

    data: Dataset
    warnings: list[str]

    @cached_property
    def series(self) -> TimeSeries:
        """The time series of `data`, carrying the warnings of the size selection."""
        ts = time_series(self.data)
        ts.warnings.extend(self.warnings)
        return ts


def prepare(ds: Dataset, what: str, size: float | None = None, freq_ratio: float = 1.0,
            size_ratio: float = 1.0, check: Callable[[Prepared, str], None] | None = None) -> Prepared:
    """The opening of every fit function: the rows of one size (`single_size`), the data check
    (`check`, by default 3 or more core counts in the time series), then the ratio options."""
    ds1, warns = single_size(ds, size)
    prep = Prepared(ds1, list(warns))
    (check or _three_points)(prep, what)
    check_ratio(freq_ratio, "--freq-ratio")
    check_ratio(size_ratio, "--size-ratio")
    return prep


def _three_points(prep: Prepared, what: str) -> None:
    need_points(prep.series, what)
