"""`auto`: validate every applicable method on the measured points, then predict with the stall
method or a weighted combination, with a band calibrated on the validation errors.

Validation is rolling-origin: for each of the last few core counts c_j taken as an origin, every
method is fitted on the points at cores ≤ c_j and predicts the larger measured counts; its
error is the log ratio of predicted to measured time (≈ relative error). A method's score is the
root mean square of its errors.

Members: the methods that apply (`estima` with stall categories, `timex`, `usl`) and the scaling
laws of `corecast.model.laws` (`amdahl`, `power`, `pmnf`).

Choice:
- with stall categories, the stall method is used, unless it validates clearly worse than the
  best other member (score above three times theirs and above 10%): stalls reveal a slowdown
  before the time shows it, which validation inside the measured range cannot see;
- otherwise a combination of all members: the weighted geometric mean of their predicted times,
  with weights from the validation scores (inverse mean squared error) shrunk halfway toward
  equal weights. Selecting one method on a handful of validation errors is noisy; combining
  with shrunk weights is the standard remedy (Bates and Granger; the "forecast combination
  puzzle": estimated optimal weights rarely beat equal ones).

Band, calibrated on the validation errors of the prediction itself (the combination's errors at
the rolling origins, each at its log distance of extrapolation d = ln(target / origin)):

    h(n) = t(k−1) · sqrt(s² + g² d(n)² + spread(n)²),   low, high = prediction · e^(∓h)

s: the noise of the data (relative residual of the USL fitted to all points); g: how fast the
error grows with the distance, g² = mean((e_i² − s²)⁺ / d_i²) over the k validation errors; d(n)
= ln(n / largest measured count); spread(n): the weighted standard deviation of the members' log
predictions at n (they disagree where the data do not decide). Coverage is measured
(`corecast.model.evaluate`, bench/predict_vs_extrap.py, tests/test_auto_calibration.py).
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
from . import usl
from .predictors import MEMBERS, applicable, convert, fit as fit_method, input_metric, models_of
from .timex import single_size, time_series

#: How many origins rolling-origin validation uses at most.
MAX_ORIGINS = 4
#: Stall method kept unless its validation score exceeds this factor of the best other's ...
ESTIMA_TOLERANCE = 3.0
#: ... and this absolute error (RMS of log errors).
ESTIMA_FLOOR = 0.10
#: Combination weights: this share from the validation scores (inverse mean squared error), the
#: rest equal. 0.5 is the textbook halfway shrinkage; tests/test_auto_calibration.py and
#: bench/predict_vs_extrap.py report what it gives (and a leave-one-dataset-out check of it).
SHRINK = 0.5


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
class Calibration:
    """What the band is made of (see the module's docstring)."""

    noise: float            # s: relative noise of the data
    growth: float           # g: error growth per unit of log distance
    points: int             # k: validation errors it is estimated from
    dof: int

    def half_width(self, d: np.ndarray, spread: np.ndarray, level: float) -> np.ndarray:
        z = float(stats.t.ppf((1 + level) / 2, max(self.dof, 1)))
        return z * np.sqrt(self.noise ** 2 + (self.growth * d) ** 2 + spread ** 2)


def calibrate(points: Sequence[tuple[float, float]], noise: float) -> Calibration | None:
    """Band parameters from rolling-origin (log distance, log error) pairs and the data's noise:
    g² = mean((e² − s²)⁺ / d²)."""
    pts = [(d, e) for d, e in points if d > 0 and math.isfinite(e)]
    if not pts:
        return None
    d = np.array([p[0] for p in pts])
    e = np.array([p[1] for p in pts])
    g = float(np.sqrt(np.mean(np.maximum(e * e - noise * noise, 0.0) / (d * d))))
    return Calibration(noise=noise, growth=g, points=len(pts), dof=len(pts) - 1)


@dataclass
class CalibratedFit:
    """One method with its band replaced by the calibrated one: the method's own rolling-origin
    errors, h(n) = t(k−1) · sqrt(s² + g² d(n)²). Everything else is the method's (attributes
    are passed through). With nothing to calibrate on, the method's own band is kept."""

    fitted: Any
    validation: list[ValidationPoint]
    top: float
    noise: float

    def __getattr__(self, name: str) -> Any:
        if name in ("fitted", "validation", "top", "noise"):
            raise AttributeError(name)
        return getattr(self.fitted, name)

    def calibration(self) -> Calibration | None:
        return calibrate([(v.distance, v.log_error) for v in self.validation], self.noise)

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        p = self.fitted.predict(cores, level)
        cal = self.calibration()
        if cal is None:
            return p
        t = convert(p, "time_s")
        d = np.log(np.maximum(cores, self.top) / self.top)
        h = cal.half_width(d, np.zeros_like(d), level)
        with np.errstate(over="ignore", invalid="ignore"):
            lo, hi = t.value * np.exp(-h), t.value * np.exp(h)
        q = Prediction(cores=t.cores, value=t.value, metric="time_s", low=lo, high=hi, level=level,
                       method=p.method, model=p.model, params=dict(p.params), warnings=list(p.warnings))
        q.params["band"] = {"calibrated": True, "noise": cal.noise, "error_growth_per_log_distance": cal.growth,
                            "calibration_points": cal.points}
        return convert(q, p.metric)


def calibrated(method: str, ds: Dataset, **kw: Any) -> CalibratedFit:
    """Fit `method` and calibrate its band on its own rolling-origin errors."""
    ds1, _ = single_size(ds, kw.get("size"))
    f = fit_method(method, ds, **kw)
    kw2 = {k: v for k, v in kw.items() if k != "size"}
    ts = time_series(ds1)
    val = validate(ds1, [method], **kw2) if len(ts.cores) > 3 else []
    return CalibratedFit(f, val, float(ts.cores.max()), noise_of(ds1))


@dataclass
class AutoFit:
    metric: str
    fits: dict[str, Any]
    scores: dict[str, float]
    weights: dict[str, float]
    validation: list[ValidationPoint]
    top: float
    reason: str
    noise: float = 0.0
    method: str = "auto"
    warnings: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> str:
        return "+".join(k for k in self.weights)

    def combined_validation(self) -> list[tuple[float, float]]:
        """(log distance, log error) of the combined prediction at every rolling-origin pair,
        the weights renormalised over the members that predicted it."""
        by_key: dict[tuple[float, float], dict[str, ValidationPoint]] = {}
        for v in self.validation:
            by_key.setdefault((v.origin, v.cores), {})[v.method] = v
        out = []
        for (origin, cores), vs in by_key.items():
            ws = {k: w for k, w in self.weights.items() if k in vs and w > 0}
            tot = sum(ws.values())
            if tot <= 0 or sum(self.weights.values()) - tot > 0.5:
                continue        # most of the weight missing: not this prediction
            lt = sum(w * math.log(vs[k].predicted) for k, w in ws.items()) / tot
            e = lt - math.log(next(iter(vs.values())).measured)
            d = math.log(cores / origin)
            if d > 0:
                out.append((d, e))
        return out

    def calibration(self) -> Calibration | None:
        """The band's parameters, from the combined prediction's validation errors."""
        return calibrate(self.combined_validation(), self.noise)

    def _member_predictions(self, cores: np.ndarray, level: float) -> tuple[dict[str, Prediction], list[str]]:
        preds: dict[str, Prediction] = {}
        dropped: list[str] = []
        for k in self.weights:
            try:
                p = convert(self.fits[k].predict(cores, level), "time_s")
            except (UserError, ValueError, np.linalg.LinAlgError) as err:
                dropped.append(f"{k} left out of the combination: {err}")
                continue
            if np.all(np.isfinite(p.value)) and np.all(p.value > 0):
                preds[k] = p
            else:
                dropped.append(f"{k} left out of the combination: non-positive prediction")
        return preds, dropped

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        preds, dropped = self._member_predictions(cores, level)
        if not preds:
            raise UserError("auto: no method could predict these core counts: " + "; ".join(dropped))
        w = {k: self.weights[k] for k in preds}
        tot = sum(w.values())
        w = {k: v / tot for k, v in w.items()}
        L = {k: np.log(p.value) for k, p in preds.items()}
        logt = sum(wk * L[k] for k, wk in w.items())
        t = np.exp(logt)
        spread = np.sqrt(sum(wk * (L[k] - logt) ** 2 for k, wk in w.items()))
        cal = self.calibration()
        warns = list(self.warnings) + dropped
        if cal is not None:
            d = np.log(np.maximum(cores, self.top) / self.top)
            h = cal.half_width(d, spread, level)
            lo, hi = t * np.exp(-h), t * np.exp(h)
        else:
            # Nothing to calibrate on (3 core counts): the members' own bands, if any.
            lows = [p.low for p in preds.values() if p.low is not None and p.high is not None]
            highs = [p.high for p in preds.values() if p.low is not None and p.high is not None]
            if lows:
                lo = np.minimum(np.min(lows, axis=0), t)
                hi = np.maximum(np.max(highs, axis=0), t)
                warns.append("too few points to validate: the band is the method's own, not calibrated")
            else:
                lo = hi = None
                warns.append("too few points to validate or to give a band")
        if "estima" in w and "timex" in self.fits:
            try:
                tx = convert(self.fits["timex"].predict(cores, level), "time_s")
                if tx.low is not None and tx.high is not None:
                    far = (t > tx.high) | (t < tx.low)
                    if np.any(far):
                        i = int(np.argmax(far))
                        trend = "slower" if t[i] > tx.value[i] else "faster"
                        warns.append(f"the stall method predicts {trend} runs than time extrapolation from "
                                     f"{cores[i]:g} cores on (outside the timex band): the stalls show what the "
                                     "time does not yet")
            except UserError:
                pass
        for p in preds.values():
            warns.extend(x for x in p.warnings if x not in warns)
        model = " + ".join(f"{k} ({wk:.2f})" if len(w) > 1 else k for k, wk in w.items())
        pr = Prediction(cores=cores, value=t, metric="time_s", low=lo, high=hi, level=level, method="auto",
                        model=model, params={"chosen": list(w), "weights": dict(w),
                                             "validation_scores": dict(self.scores), "reason": self.reason},
                        warnings=warns)
        return convert(pr, self.metric)

    def models(self, horizon: float) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k in self.weights:
            for col, m in models_of(self.fits[k], horizon).items():
                out[col if len(self.weights) == 1 else f"{k}:{col}"] = m
        cal = self.calibration()
        out["auto"] = {"chosen": list(self.weights), "weights": dict(self.weights),
                       "validation_rms_log_error": {k: (None if not math.isfinite(v) else v)
                                                    for k, v in self.scores.items()},
                       "validation_predictions": len(self.validation),
                       "band": None if cal is None else {
                           "noise": cal.noise, "error_growth_per_log_distance": cal.growth,
                           "calibration_points": cal.points,
                           "formula": "t(k-1) * sqrt(noise^2 + (growth * ln(n / n_max))^2 + spread^2)"},
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


def noise_of(ds: Dataset) -> float:
    """Relative noise of the data: RMS log residual of the USL fitted to every point (degrees of
    freedom counted), 0 when nothing is left to estimate it."""
    N, X, _ = ds.throughput()
    ok = np.isfinite(X) & (X > 0)
    N, X = N[ok], X[ok]
    if len(N) <= 3:
        return 0.0
    try:
        f = usl.fit(N, X)
    except (ValueError, np.linalg.LinAlgError):
        return 0.0
    fx = f.fitted(N)
    if np.any(fx <= 0) or not np.all(np.isfinite(fx)):
        return 0.0
    r = np.log(X / fx)
    return float(math.sqrt(np.sum(r * r) / (len(N) - 3)))


def fit_dataset(ds: Dataset, methods: Sequence[str] | None = None, **kw: Any) -> AutoFit:
    """Validate the applicable methods and member laws, choose or combine, and return the fitted
    `auto` predictor."""
    ds1, warns = single_size(ds, kw.pop("size", None))
    metric = input_metric(ds1)
    ts = time_series(ds1)
    if len(ts.cores) == 2:
        # Nothing to validate or combine: the bracket of the two-parameter laws.
        from . import twopoint
        return twopoint.fit_dataset(ds, size=kw.pop("size", None) if "size" in kw else None, **kw)
    if len(ts.cores) < 3:
        raise UserError(f"{ds.label}: prediction needs measurements at 2 or more distinct core counts "
                        f"(got {len(ts.cores)})")
    cand = list(methods) if methods else applicable(ds1, kw.get("categories")) + list(MEMBERS)
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
        e = [v.log_error for v in val if v.method == meth]
        scores[meth] = float(np.sqrt(np.mean(np.square(e)))) if e else math.inf
    finite = {k: v for k, v in scores.items() if math.isfinite(v)}
    if not finite:
        # Too few points to validate: prefer the stall method, else the USL.
        pick = "estima" if "estima" in fits else ("usl" if "usl" in fits else next(iter(fits)))
        weights = {pick: 1.0}
        reason = f"too few points to validate; used {pick}"
    elif "estima" in fits and math.isfinite(scores.get("estima", math.inf)):
        others = {k: v for k, v in finite.items() if k != "estima"}
        best_other = min(others.values()) if others else math.inf
        if others and scores["estima"] > ESTIMA_TOLERANCE * best_other and scores["estima"] > ESTIMA_FLOOR:
            weights, reason = _combine(others)
            reason = (f"the stall method validated clearly worse ({100 * scores['estima']:.1f}% against "
                      f"{100 * best_other:.1f}%); " + reason)
        else:
            weights = {"estima": 1.0}
            reason = (f"stall categories present; the stall method validated at {100 * scores['estima']:.1f}% "
                      "RMS error" + (f" (best other {100 * best_other:.1f}%)" if others else ""))
    else:
        weights, reason = _combine(finite)
    warns = warns + [f"{k} not used: {v}" for k, v in errors.items()]
    return AutoFit(metric=metric, fits=fits, scores=scores, weights=weights, validation=val,
                   top=float(ts.cores.max()), reason=reason, noise=noise_of(ds1), warnings=warns)


def _combine(scores: dict[str, float], shrink: float | None = None) -> tuple[dict[str, float], str]:
    """Weights = shrink · (1/score², normalised) + (1 − shrink) · equal (shrink: SHRINK)."""
    lam = SHRINK if shrink is None else shrink
    inv = {k: 1.0 / max(v, 1e-3) ** 2 for k, v in scores.items()}
    tot = sum(inv.values())
    eq = 1.0 / len(scores)
    w = {k: lam * inv[k] / tot + (1.0 - lam) * eq for k in scores}
    w = dict(sorted(w.items(), key=lambda kv: -kv[1]))
    if len(w) == 1:
        k = next(iter(w))
        return w, f"{k} validated at {100 * scores[k]:.1f}% RMS error (the only method that could)"
    return w, ("combined " + ", ".join(f"{k} ({100 * scores[k]:.1f}%)" for k in w) +
               " (RMS validation errors); weights from the errors, shrunk halfway to equal")
