"""The predicting methods by name: `fit` any of them, with or without a calibrated band.

Every method fits a Dataset and returns a `Fitted` whose `predict(cores, level)` gives a
`Prediction` of the dataset's *input metric* (`time_s` when the data have times, else
`throughput`), so methods compare point by point.

`REGISTRY` is every name `fit` accepts: `auto` (which validates and combines the others) and
the single methods of `corecast.model.methods`. `METHODS` (offered as --method) and `MEMBERS`
(the laws only `auto` uses) are read from it.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from . import auto, calibration, methods
from .base import Fitted
from .methods import Method
from .series import check_categories

#: Every method `fit` knows, `auto` first. auto's options are those of the methods it combines.
REGISTRY: Mapping[str, Method] = {
    "auto": Method("auto", auto.fit_dataset, "method", combines=True),
    **methods.REGISTRY,
}
#: The methods offered as --method (predict, evaluate), `auto` first.
METHODS = tuple(n for n, m in REGISTRY.items() if m.role == "method")
#: The scaling laws `auto` combines with the methods; fitted, validated and shown by `auto`.
MEMBERS = tuple(n for n, m in REGISTRY.items() if m.role == "member")


def fit(method: str, ds: Dataset, calibrate: bool = False, **kw: Any) -> Fitted:
    """Fit `method` ("auto", "estima", "timex", "usl", or a member law "amdahl", "power",
    "pmnf") to a Dataset. calibrate: replace the method's own band by one calibrated on its
    rolling-origin errors (`calibration.CalibratedFit`; `auto` always calibrates its band).
    `kw`: options of the methods (`methods.OPTIONS`), each given to the methods that declare it."""
    if method not in REGISTRY:
        raise UserError(f"unknown method '{method}' (choose from {', '.join(METHODS)})")
    methods.check_options(kw)
    check_categories(ds, kw.get("categories"))
    entry = REGISTRY[method]
    if entry.combines:                  # auto: its band is calibrated already
        return entry.fit(ds, **kw)
    if calibrate:
        return calibration.calibrated(method, ds, **kw)
    return methods.fit(method, ds, **kw)


def fit_many(names: Sequence[str], ds: Dataset, calibrate: bool = False,
             **kw: Any) -> dict[str, Fitted | Exception]:
    """`fit` each of `names` on the same Dataset, without fitting anything twice: with `auto`
    among them and `calibrate`, a method `auto` fitted is taken from it, calibrated on the
    validation it made (`AutoFit.calibrated_member`), rather than fitted and validated again.
    A method that cannot be fitted maps to the error it raised (UserError, ValueError,
    LinAlgError)."""
    out: dict[str, Fitted | Exception] = {}
    a: Fitted | None = None
    if "auto" in names:
        try:
            a = out["auto"] = fit("auto", ds, calibrate=calibrate, **kw)
        except (UserError, ValueError, np.linalg.LinAlgError) as err:
            out["auto"] = err
    for m in names:
        if m == "auto":
            continue
        reused = a.calibrated_member(m) if calibrate and isinstance(a, auto.AutoFit) else None
        if reused is not None:
            out[m] = reused
            continue
        try:
            out[m] = fit(m, ds, calibrate=calibrate, **kw)
        except (UserError, ValueError, np.linalg.LinAlgError) as err:
            out[m] = err
    return {m: out[m] for m in names}


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
