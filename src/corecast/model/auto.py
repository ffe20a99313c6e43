"""`auto`: validate every applicable method on the measured points, then predict with the stall
method or a weighted combination, with a band calibrated on the validation errors.

Validation is rolling-origin (`corecast.model.calibration`): a method's score is the root mean
square of its log errors at the last few origins.

Members: the methods that apply (`estima` with stall categories, `timex`, `usl`) and the scaling
laws `amdahl`, `power`, `pmnf`: the registry of `corecast.model.methods`, in its order.

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

With two core counts there is nothing to validate: `fit_dataset` returns the two-point
predictor (`corecast.model.twopoint`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from . import methods, twopoint
from .base import Fitted, Prediction
from .calibration import CalibratedFit, Calibration, ValidationPoint, calibrate, noise_of, validate
from .series import convert, input_metric, single_size, time_series

#: Stall method kept unless its validation score exceeds this factor of the best other's ...
ESTIMA_TOLERANCE = 3.0
#: ... and this absolute error (RMS of log errors).
ESTIMA_FLOOR = 0.10
#: Combination weights: this share from the validation scores (inverse mean squared error), the
#: rest equal. 0.5 is the textbook halfway shrinkage; tests/test_auto_calibration.py and
#: bench/predict_vs_extrap.py report what it gives (and a leave-one-dataset-out check of it).
SHRINK = 0.5


@dataclass
class AutoFit(Fitted):
    metric: str
    fits: dict[str, Fitted]
    scores: dict[str, float]
    weights: dict[str, float]
    validation: list[ValidationPoint]
    top: float
    reason: str
    noise: float = 0.0
    method: str = "auto"
    warnings: list[str] = field(default_factory=list)

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
            for col, m in self.fits[k].models(horizon).items():
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

    def calibrated_member(self, name: str) -> CalibratedFit | None:
        """The member `name` with its band calibrated on its own validation errors: what
        `calibration.calibrated(name, ...)` gives on the same data, from the fit and the
        validation `auto` already made (None when the member could not be fitted). Its
        warnings do not repeat the choice of a problem size (auto's own do)."""
        if name not in self.fits:
            return None
        return CalibratedFit(self.fits[name], [v for v in self.validation if v.method == name], self.top,
                             self.noise)


def fit_dataset(ds: Dataset, size: float | None = None, **kw: Any) -> Fitted:
    """Validate the applicable methods and member laws, choose or combine, and return the fitted
    `auto` predictor (the two-point predictor with two core counts). `kw`: the options of the
    single methods (`methods.OPTIONS`), each passed to the methods that declare it."""
    methods.check_options(kw)
    ds1, warns = single_size(ds, size)
    metric = input_metric(ds1)
    ts = time_series(ds1)
    if len(ts.cores) == 2:
        # Nothing to validate or combine: the bracket of the two-parameter laws.
        return twopoint.fit_dataset(ds, size=size, **methods.options_for(twopoint.fit_dataset, kw))
    if len(ts.cores) < 3:
        raise UserError(f"{ds.label}: prediction needs measurements at 2 or more distinct core counts "
                        f"(got {len(ts.cores)})")
    cand = methods.applicable(ds1, kw.get("categories")) + list(methods.MEMBERS)
    fits: dict[str, Fitted] = {}
    errors: dict[str, str] = {}
    for meth in cand:
        try:
            fits[meth] = methods.fit(meth, ds1, **kw)
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
