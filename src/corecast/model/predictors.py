"""The predicting methods by name, and the conversions between their metrics.

Every method fits a Dataset and returns an object whose `predict(cores, level)` gives a
`Prediction` of the dataset's *input metric* (`time_s` when the data have times, else
`throughput`), so methods compare point by point.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from . import estima, timex, usl
from .base import Prediction

#: Every method `predict` and `evaluate` know, `auto` first.
METHODS = ("auto", "estima", "timex", "usl")
#: The scaling laws `auto` combines with the methods above (`corecast.model.laws`); not
#: offered as --method, but fitted, validated and shown by `auto`.
MEMBERS = ("amdahl", "power", "pmnf")


def input_metric(ds: Dataset) -> str:
    if "time_s" in ds.metrics and np.isfinite(ds.metrics["time_s"]).any():
        return "time_s"
    if "throughput" in ds.metrics and np.isfinite(ds.metrics["throughput"]).any():
        return "throughput"
    avail = ", ".join(ds.metrics) or "none"
    raise UserError(f"{ds.label}: needs a 'time_s' or 'throughput' column to predict (metrics: {avail})")


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


WORK_SPREAD = 1.10     # work_per_run: the most the per-core-count medians of throughput x time may differ


def work_per_run(ds: Dataset) -> float | None:
    """The work one run does in the units of its `throughput` column: the median of
    throughput x time_s over the rows that have both, so that a prediction of the time gives
    the throughput as work / time. None when the dataset lacks either column, or when that
    product changes with the core count by more than WORK_SPREAD (a program run for a fixed
    time, or whose work grows with its threads: its throughput is not work / time)."""
    if not ("time_s" in ds.metrics and "throughput" in ds.metrics):
        return None
    t = np.asarray(ds.metrics["time_s"], dtype=float)
    x = np.asarray(ds.metrics["throughput"], dtype=float)
    ok = np.isfinite(t) & np.isfinite(x) & (t > 0) & (x > 0)
    if not ok.any():
        return None
    w = x[ok] * t[ok]
    cores = np.asarray(ds.cores, dtype=float)[ok]
    per_n = [float(np.median(w[cores == c])) for c in np.unique(cores)]
    if max(per_n) > WORK_SPREAD * min(per_n):
        return None
    return float(np.median(w))


@dataclass
class USLMethod:
    """The USL fit of the throughput, shown in the input metric."""

    fit: usl.USLFit
    metric: str
    source: str
    freq_ratio: float = 1.0
    size_ratio: float = 1.0
    method: str = "usl"
    warnings: list[str] = field(default_factory=list)

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        p = self.fit.predict(np.asarray(cores, dtype=float), level)
        s = self.freq_ratio * self.size_ratio
        if s != 1.0:
            p = Prediction(cores=p.cores, value=p.value / s, metric="throughput",
                           low=None if p.low is None else p.low / s,
                           high=None if p.high is None else p.high / s, level=p.level,
                           method=p.method, model=p.model, params=p.params, warnings=p.warnings)
        p.warnings = list(self.warnings) + list(p.warnings)
        return convert(p, self.metric)

    def models(self, horizon: float = 0.0) -> dict[str, Any]:
        f = self.fit
        return {"throughput" if self.source == "throughput" else self.source: {
            "kernel": "Amdahl" if f.amdahl else "USL",
            "formula": "γ n / (1 + α (n − 1))" if f.amdahl else "γ n / (1 + α (n − 1) + β n (n − 1))",
            "params": {"alpha": f.alpha, "beta": f.beta, "gamma": f.gamma},
            "points": int(f.n)}}


def fit_usl(ds: Dataset, size: float | None = None, freq_ratio: float = 1.0, size_ratio: float = 1.0,
            amdahl: bool = False, **_: Any) -> USLMethod:
    """The USL (or, with amdahl, Amdahl's law: the USL with β = 0) of a Dataset's throughput."""
    what = "Amdahl's law" if amdahl else "the USL"
    ds1, warns = timex.single_size(ds, size)
    metric = input_metric(ds1)
    N, X, source = ds1.throughput()
    if len(np.unique(N)) < 3:
        raise UserError(f"{ds.label}: {what} needs measurements at 3 or more distinct core counts "
                        f"(got {len(np.unique(N))})")
    if np.any(X <= 0):
        raise UserError(f"{ds.label}: throughput must be > 0 at every point to fit {what}")
    timex._check_ratio(freq_ratio, "--freq-ratio")
    timex._check_ratio(size_ratio, "--size-ratio")
    return USLMethod(usl.fit(N, X, amdahl=amdahl), metric, source, freq_ratio, size_ratio,
                     method="amdahl" if amdahl else "usl", warnings=warns)


def _fit_timex(ds: Dataset, **kw: Any) -> timex.TimexFit:
    kw.pop("categories", None)
    kw.pop("work_stall", None)
    return timex.fit_dataset(ds, **kw)


def _fit_estima(ds: Dataset, **kw: Any) -> estima.EstimaFit:
    return estima.fit_dataset(ds, **kw)


def _fit_auto(ds: Dataset, **kw: Any) -> Any:
    from . import auto
    return auto.fit_dataset(ds, **kw)


def _fit_member(name: str) -> Callable[..., Any]:
    def f(ds: Dataset, **kw: Any) -> Any:
        from . import laws
        return {"amdahl": laws.fit_amdahl, "power": laws.fit_power, "pmnf": laws.fit_pmnf}[name](ds, **kw)
    return f


FITTERS: dict[str, Callable[..., Any]] = {
    "auto": _fit_auto,
    "estima": _fit_estima,
    "timex": _fit_timex,
    "usl": fit_usl,
    **{m: _fit_member(m) for m in MEMBERS},
}


def fit(method: str, ds: Dataset, calibrate: bool = False, **kw: Any) -> Any:
    """Fit `method` ("auto", "estima", "timex", "usl", or a member law "amdahl", "power",
    "pmnf") to a Dataset. calibrate: replace the method's own band by one calibrated on its
    rolling-origin errors (`auto.CalibratedFit`; `auto` always calibrates its band)."""
    if method not in FITTERS:
        raise UserError(f"unknown method '{method}' (choose from {', '.join(METHODS)})")
    for nm in kw.get("categories") or ():
        if nm not in ds.metrics:
            avail = ", ".join(ds.stall_names) or "none"
            raise UserError(f"{ds.label}: unknown stall category '{nm}' (stall columns: {avail})")
    if calibrate and method != "auto":
        from . import auto
        return auto.calibrated(method, ds, **kw)
    return FITTERS[method](ds, **kw)


def has_stalls(ds: Dataset, categories: Sequence[str] | None = None) -> bool:
    if categories:
        return True
    return any(len(np.unique(ds.cores[np.isfinite(ds.metrics[n])])) >= 3 for n in ds.stall_names)


def applicable(ds: Dataset, categories: Sequence[str] | None = None) -> list[str]:
    """The base methods that can run on this dataset (estima only with stall categories)."""
    out = ["estima"] if has_stalls(ds, categories) else []
    return out + ["timex", "usl"]


def models_of(fitted: Any, horizon: float) -> dict[str, Any]:
    m = getattr(fitted, "models", None)
    return m(horizon) if m else {}
