"""`auto`: validate every applicable method on the measured points, then predict with the best
or a weighted combination, with a band calibrated on the validation errors.

Validation is rolling-origin: for each of the last few core counts c_j taken as an origin, every
method is fitted on the points at cores ≤ c_j and predicts the larger measured counts; its
error is the absolute log ratio of predicted to measured time (≈ relative error). A method's
score is the mean of its errors.

Choice:
- with stall categories, the stall method is used, unless it validates clearly worse than the
  best other method (score above three times theirs and above 10%): stalls reveal a slowdown before
  the time shows it, which validation inside the measured range cannot see;
- otherwise the best method, combined (weighted geometric mean of times, weights ∝ 1/score²)
  with every method whose score is within 25% of it.

Band: the envelope of the used methods' own bands and of a band calibrated on the validation
errors: the errors per unit of log distance of extrapolation (|log error| / log(target /
origin)), their root mean square scaled by Student's t at the stated level, applied at each
target's distance from the largest measured count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ..dataset import Dataset
from ..errors import UserError
from .base import Prediction
from .predictors import applicable, convert, fit as fit_method, input_metric, models_of
from .timex import single_size, time_series

#: How many origins rolling-origin validation uses at most.
MAX_ORIGINS = 4
#: Stall method kept unless its validation score exceeds this factor of the best other's ...
ESTIMA_TOLERANCE = 3.0
#: ... and this absolute mean error.
ESTIMA_FLOOR = 0.10
#: Methods combined with the best when their score is within this factor of it.
COMBINE_WITHIN = 1.25


@dataclass
class ValidationPoint:
    method: str
    origin: float           # largest core count fitted on
    cores: float            # core count predicted
    measured: float         # time
    predicted: float        # time
    low: float | None
    high: float | None

    @property
    def log_error(self) -> float:
        return math.log(self.predicted / self.measured)

    @property
    def distance(self) -> float:
        return math.log(self.cores / self.origin)


@dataclass
class AutoFit:
    metric: str
    fits: dict[str, Any]
    scores: dict[str, float]
    weights: dict[str, float]
    validation: list[ValidationPoint]
    top: float
    reason: str
    method: str = "auto"
    warnings: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> str:
        return "+".join(k for k in self.weights)

    def calibration(self) -> tuple[float, int]:
        """RMS of |log error| per unit of log distance of the combined prediction, and count."""
        by_key: dict[tuple[float, float], dict[str, ValidationPoint]] = {}
        for v in self.validation:
            by_key.setdefault((v.origin, v.cores), {})[v.method] = v
        us = []
        for (origin, cores), vs in by_key.items():
            if not all(k in vs for k in self.weights):
                continue
            lt = sum(w * math.log(vs[k].predicted) for k, w in self.weights.items())
            e = lt - math.log(next(iter(vs.values())).measured)
            d = math.log(cores / origin)
            if d > 0:
                us.append(e / d)
        if not us:
            return 0.0, 0
        u = np.array(us)
        return float(np.sqrt(np.mean(u * u))), len(us)

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        preds = {k: convert(self.fits[k].predict(cores, level), "time_s") for k in self.weights}
        logt = sum(w * np.log(preds[k].value) for k, w in self.weights.items())
        t = np.exp(logt)
        lo = t.copy()
        hi = t.copy()
        for p in preds.values():
            lo = np.minimum(lo, p.value if p.low is None else p.low)
            hi = np.maximum(hi, p.value if p.high is None else p.high)
        g, k = self.calibration()
        has_band = k > 0 or any(p.low is not None and p.high is not None for p in preds.values())
        if k:
            z = float(stats.t.ppf((1 + level) / 2, max(k - 1, 1)))
            d = np.log(np.maximum(cores, self.top) / self.top)
            lo = np.minimum(lo, t * np.exp(-z * g * d))
            hi = np.maximum(hi, t * np.exp(z * g * d))
        warns = list(self.warnings)
        if "estima" in self.weights and "timex" in self.fits:
            try:
                tx = convert(self.fits["timex"].predict(cores, level), "time_s")
                far = (tx.high is not None) & ((t > tx.high * 1.0) | (t < tx.low * 1.0)) if tx.low is not None else None
                if far is not None and np.any(far):
                    c = cores[np.argmax(far)]
                    trend = "slower" if t[np.argmax(far)] > tx.value[np.argmax(far)] else "faster"
                    warns.append(f"the stall method predicts {trend} runs than time extrapolation from "
                                 f"{c:g} cores on (outside the timex band): the stalls show what the time "
                                 "does not yet")
            except UserError:
                pass
        for name, p in preds.items():
            warns.extend(w for w in p.warnings if w not in warns)
        model = " + ".join(f"{k} ({w:.2f})" if len(self.weights) > 1 else k for k, w in self.weights.items())
        if not has_band:
            warns.append("too few points to validate or to give a band")
        pr = Prediction(cores=cores, value=t, metric="time_s", low=lo if has_band else None,
                        high=hi if has_band else None, level=level, method="auto",
                        model=model, params={"chosen": list(self.weights), "weights": dict(self.weights),
                                             "validation_scores": dict(self.scores), "reason": self.reason},
                        warnings=warns)
        return convert(pr, self.metric)

    def models(self, horizon: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self.weights:
            for col, m in models_of(self.fits[k], horizon).items():
                out[col if len(self.weights) == 1 else f"{k}:{col}"] = m
        g, n = self.calibration()
        out["auto"] = {"chosen": list(self.weights), "weights": dict(self.weights),
                       "validation_mean_abs_log_error": {k: (None if not math.isfinite(v) else v)
                                                         for k, v in self.scores.items()},
                       "validation_predictions": len(self.validation),
                       "band_error_per_log_distance": g, "band_calibration_points": n,
                       "reason": self.reason}
        return out

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Any]:
        est = self.fits.get("estima")
        return est.bottlenecks(cores) if est is not None else []


def validate(ds: Dataset, methods: Sequence[str], max_origins: int = MAX_ORIGINS,
             level: float = 0.8, **kw: Any) -> list[ValidationPoint]:
    """Rolling-origin validation of `methods` on the measured points of `ds`."""
    ts = time_series(ds)
    cores = ts.cores
    m = len(cores)
    out: list[ValidationPoint] = []
    first = max(3, m - max_origins)
    for j in range(first, m):
        origin = float(cores[j - 1])
        sub = ds.select(ds.cores <= origin)
        tgt = cores[j:]
        truth = ts.time[j:]
        for meth in methods:
            try:
                f = fit_method(meth, sub, **kw)
                p = convert(f.predict(tgt, level), "time_s")
            except (UserError, ValueError, np.linalg.LinAlgError):
                continue
            for c, y, v, lo, hi in zip(tgt, truth, p.value, _or_none(p.low, len(tgt)), _or_none(p.high, len(tgt))):
                if np.isfinite(v) and v > 0:
                    out.append(ValidationPoint(meth, origin, float(c), float(y), float(v), lo, hi))
    return out


def _or_none(a: np.ndarray | None, n: int) -> list[float | None]:
    return [None] * n if a is None else [float(x) for x in a]


def fit_dataset(ds: Dataset, methods: Sequence[str] | None = None, **kw: Any) -> AutoFit:
    """Validate the applicable methods, choose, and return the fitted `auto` predictor."""
    ds1, warns = single_size(ds, kw.pop("size", None))
    metric = input_metric(ds1)
    ts = time_series(ds1)
    if len(ts.cores) < 3:
        raise UserError(f"{ds.label}: prediction needs measurements at 3 or more distinct core counts "
                        f"(got {len(ts.cores)})")
    cand = list(methods) if methods else applicable(ds1, kw.get("categories"))
    fits: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for meth in cand:
        try:
            fits[meth] = fit_method(meth, ds1, **kw)
        except UserError as err:
            errors[meth] = str(err)
    if not fits:
        raise UserError(f"{ds.label}: no method could fit the data: " + "; ".join(errors.values()))
    val = validate(ds1, list(fits), **kw)
    scores: dict[str, float] = {}
    for meth in fits:
        e = [abs(v.log_error) for v in val if v.method == meth]
        scores[meth] = float(np.mean(e)) if e else math.inf
    finite = {k: v for k, v in scores.items() if math.isfinite(v)}
    if not finite:
        # Too few points to validate: prefer the stall method, else the USL (fewest parameters).
        pick = "estima" if "estima" in fits else ("usl" if "usl" in fits else next(iter(fits)))
        weights = {pick: 1.0}
        reason = f"too few points to validate; used {pick}"
    elif "estima" in fits and math.isfinite(scores.get("estima", math.inf)):
        others = [v for k, v in finite.items() if k != "estima"]
        best_other = min(others) if others else math.inf
        if scores["estima"] > ESTIMA_TOLERANCE * best_other and scores["estima"] > ESTIMA_FLOOR:
            weights, reason = _combine({k: v for k, v in finite.items() if k != "estima"})
            reason = (f"the stall method validated clearly worse ({100 * scores['estima']:.1f}% against "
                      f"{100 * best_other:.1f}%); " + reason)
        else:
            weights = {"estima": 1.0}
            reason = (f"stall categories present; the stall method validated at {100 * scores['estima']:.1f}% "
                      "mean error" + (f" (best other {100 * best_other:.1f}%)" if others else ""))
    else:
        weights, reason = _combine(finite)
    warns = warns + [f"{k} not used: {v}" for k, v in errors.items()]
    return AutoFit(metric=metric, fits=fits, scores=scores, weights=weights, validation=val,
                   top=float(ts.cores.max()), reason=reason, warnings=warns)


def _combine(scores: dict[str, float]) -> tuple[dict[str, float], str]:
    best = min(scores, key=scores.get)
    s0 = scores[best]
    members = {k: v for k, v in scores.items() if v <= COMBINE_WITHIN * s0 + 1e-12}
    if len(members) == 1:
        return {best: 1.0}, f"{best} validated best ({100 * s0:.1f}% mean error)"
    w = {k: 1.0 / max(v, 1e-3) ** 2 for k, v in members.items()}
    tot = sum(w.values())
    w = {k: v / tot for k, v in sorted(w.items(), key=lambda kv: -kv[1])}
    return w, ("combined " + ", ".join(f"{k} ({100 * scores[k]:.1f}%)" for k in w) +
               f": within {int(round(100 * (COMBINE_WITHIN - 1)))}% of the best validation error")
