"""Hold-out evaluation of any predictor.

Fit a method on the points at cores ≤ K, predict the larger measured core counts, and compare
with what was measured (the median of the repetitions, in the dataset's input metric): the
absolute percentage error per point, their mean (MAPE) and maximum, the share of measured
points inside the predicted band (coverage, at the band's stated level), and whether the core
count of best performance (highest throughput, lowest time) was found, judging from the
measured points ≤ K and the predicted ones beyond.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from ..target import MachineSpec
from . import predictors
from .base import Fitted, Prediction
from .methods import applicable
from .series import convert, input_metric, single_size
from .topo import fit_for_target


@dataclass
class PointError:
    cores: float
    measured: float
    predicted: float
    low: float | None
    high: float | None

    @property
    def abs_pct_error(self) -> float:
        return 100.0 * abs(self.predicted - self.measured) / abs(self.measured)

    @property
    def inside(self) -> bool | None:
        if self.low is None or self.high is None:
            return None
        return self.low <= self.measured <= self.high


@dataclass
class MethodEvaluation:
    method: str
    points: list[PointError] = field(default_factory=list)
    best_true: float | None = None
    best_predicted: float | None = None
    model: str = ""
    error: str | None = None           # why the method could not run
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.points)

    @property
    def mape(self) -> float:
        return float(np.mean([p.abs_pct_error for p in self.points])) if self.points else math.nan

    @property
    def max_error(self) -> float:
        return float(np.max([p.abs_pct_error for p in self.points])) if self.points else math.nan

    @property
    def coverage(self) -> float:
        ins = [p.inside for p in self.points if p.inside is not None]
        return float(np.mean(ins)) if ins else math.nan

    @property
    def best_found(self) -> bool | None:
        if self.best_true is None or self.best_predicted is None:
            return None
        return self.best_true == self.best_predicted

    def to_dict(self) -> dict[str, Any]:
        if not self.ok:
            return {"method": self.method, "error": self.error}
        return {"method": self.method, "model": self.model, "mape": self.mape, "max_error": self.max_error,
                "coverage": _num(self.coverage), "best_cores_measured": _intish(self.best_true),
                "best_cores_predicted": _intish(self.best_predicted), "best_found": self.best_found,
                "points": [{"cores": _intish(p.cores), "measured": p.measured, "predicted": p.predicted,
                            # a band open on one side (the USL's, where it allows a collapse) is None there
                            "low": _num(p.low), "high": _num(p.high), "abs_pct_error": p.abs_pct_error,
                            "inside": p.inside} for p in self.points],
                "warnings": list(self.warnings)}


@dataclass
class Evaluation:
    label: str
    train_max_cores: float
    metric: str
    level: float
    train_cores: list[float]
    test_cores: list[float]
    methods: list[MethodEvaluation]

    def get(self, method: str) -> MethodEvaluation:
        for m in self.methods:
            if m.method == method:
                return m
        raise KeyError(method)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.label, "train_max_cores": _intish(self.train_max_cores), "metric": self.metric,
                "level": self.level, "train_cores": [_intish(c) for c in self.train_cores],
                "test_cores": [_intish(c) for c in self.test_cores],
                "methods": [m.to_dict() for m in self.methods]}


def _num(v: float) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


def _intish(v: float | None) -> float | int | None:
    if v is None:
        return None
    return int(v) if float(v).is_integer() else float(v)


def evaluate_predictor(ds: Dataset, train_max_cores: float, name: str,
                       fit: Callable[[Dataset], Any], level: float = 0.8) -> MethodEvaluation:
    """Hold-out evaluation of one predictor given as a fit function (Dataset -> fitted)."""
    input_metric(ds)        # data without time or throughput: the caller's error, not the method's
    try:
        fitted = fit(ds.select(ds.cores <= train_max_cores))
    except (UserError, ValueError, np.linalg.LinAlgError) as err:
        return MethodEvaluation(name, error=str(err))
    return evaluate_fitted(ds, train_max_cores, name, fitted, level)


def evaluate_fitted(ds: Dataset, train_max_cores: float, name: str, fitted: Fitted,
                    level: float = 0.8) -> MethodEvaluation:
    """Hold-out evaluation of a predictor fitted on the rows of `ds` with cores ≤ train_max_cores."""
    metric = input_metric(ds)
    ag = ds.aggregate(metric)
    train = ag.cores <= train_max_cores
    test = ~train
    res = MethodEvaluation(name)
    try:
        p: Prediction = convert(fitted.predict(ag.cores[test], level), metric)
    except (UserError, ValueError, np.linalg.LinAlgError) as err:
        res.error = str(err)
        return res
    res.model = p.model
    res.warnings = list(p.warnings)
    lows = [None] * int(test.sum()) if p.low is None else list(map(float, p.low))
    highs = [None] * int(test.sum()) if p.high is None else list(map(float, p.high))
    for c, y, v, lo, hi in zip(ag.cores[test], ag.value[test], p.value, lows, highs):
        res.points.append(PointError(float(c), float(y), float(v), lo, hi))
    better = np.argmax if metric == "throughput" else np.argmin
    res.best_true = float(ag.cores[better(ag.value)])
    combined = np.concatenate([ag.value[train], p.value])
    res.best_predicted = float(np.concatenate([ag.cores[train], ag.cores[test]])[better(combined)])
    return res


def evaluate(ds: Dataset, train_max_cores: float, methods: Sequence[str] | None = None,
             level: float = 0.8, size: float | None = None, machine: tuple[MachineSpec, str] | None = None,
             **kw: Any) -> Evaluation:
    """Fit every method on cores ≤ K (bands calibrated, nothing fitted twice:
    `predictors.fit_many`), predict the rest, and score each. `machine`: (the machine the data
    were measured on, the placement): every method is fitted on effective cores there and asked
    about the held-out threads' (`topo.fit_for_target`)."""
    ds1, _ = single_size(ds, size)
    metric = input_metric(ds1)
    ag = ds1.aggregate(metric)
    train = ag.cores[ag.cores <= train_max_cores]
    test = ag.cores[ag.cores > train_max_cores]
    if len(train) < 2:
        # two are enough for auto's two-point prediction (the case of a 2-core machine); the
        # methods that need three say so in their own row
        raise UserError(f"{ds.label}: --train-max-cores {train_max_cores:g} leaves {len(train)} core count(s) "
                        "to fit on; at least 2 are needed")
    if len(test) == 0:
        raise UserError(f"{ds.label}: --train-max-cores {train_max_cores:g} leaves no measured core count "
                        f"to predict (largest measured: {ag.cores.max():g})")
    train_ds = ds1.select(ds1.cores <= train_max_cores)
    if methods is None:
        methods = ["auto"] + applicable(train_ds, kw.get("categories"))
    for m in methods:
        if m not in predictors.METHODS:
            raise UserError(f"unknown method '{m}' (choose from {', '.join(predictors.METHODS)})")
    if machine is None:
        fitted = predictors.fit_many(methods, train_ds, calibrate=True, **kw)
    else:
        spec, order = machine
        fitted = {}
        for m in methods:
            try:
                fitted[m] = fit_for_target(lambda d, m=m: predictors.fit(m, d, calibrate=True, **kw), train_ds,
                                           spec, order, measured=spec, measured_order=order)
            except (UserError, ValueError, np.linalg.LinAlgError) as err:
                fitted[m] = err
    out = []
    for m in methods:
        f = fitted[m]
        out.append(MethodEvaluation(m, error=str(f)) if isinstance(f, Exception)
                   else evaluate_fitted(ds1, train_max_cores, m, f, level=level))
    return Evaluation(ds.label, float(train_max_cores), metric, level, list(map(float, train)),
                      list(map(float, test)), out)
