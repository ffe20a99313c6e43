"""`auto`: validate every applicable method on the measured points, then predict with the stall
method, the method the corpus trusts, or a combination of the members that validated well, with
a band calibrated on the validation errors and the corpus.

Validation is rolling-origin (`corecast.model.calibration`): a method's score is the root mean
square of its log errors at the last few origins.

Members: the methods that apply (`estima` with stall categories, `mva` with measured demands,
`timex`, `usl`) and the scaling laws `amdahl`, `power`, `pmnf`: the registry of
`corecast.model.methods`, in its order. The demand model is fitted beside the default and used
alone where it validates better than what the rules below chose (`prefer_demands`).

Choice (the numbers are priors learned from a corpus of real many-core curves by
`corecast.model.learn`, `corecast.model.priors`):
- with stall categories, the stall method is used when its categories *explain the measured
  time* (`stalls_explain`: the growth of the stalls accounts for a material share of the
  core-time lost to imperfect scaling, and moves with it across the measured counts) and it does
  not validate clearly worse than the best other member (score above three times theirs and
  above 10%); otherwise it is shown, with the reason it was not used;
- otherwise the corpus' **default** (the method, or the blend of two members, that extrapolated
  best on held-out real curves) unless another member validates more than `switch_ratio` times
  better than the default method; the blend's partner gets no weight when it validated more
  than `NO_WEIGHT_RATIO` times worse than the default (Amdahl's law beside a curve that already
  falls: leave-one-source-out on the 34-source corpus, the shared queues on the Ryzen 5950X
  went from 73.7% to 27.1% and folly's locks from 62.6% to 58.6%, while the SPARC T4-4's search
  structures went from 44.8% to 48.7%; docs/predict.md);
  then a combination of the members within `NO_WEIGHT_RATIO` of the best validation error,
  weighted by inverse mean squared error (a member that validated several times worse than the
  best gets no weight).

Never below the measurements: a prediction is kept at least at the highest throughput
measured at or below its count unless the fitted USL says the curve turns down with evidence
(`corecast.model.bands.retrograde`); the output says which.

Band: the corpus' conformal quantiles (learned out of sample, `corecast.model.bands`) times the
prediction's own scale

    σ(n)² = s² + g² ln(r)² + spread(n)²,   r = n / largest measured count

s: the noise of the data (relative residual of the USL fitted to all points); g² = (k g_own² +
w g₀²) / (k + w): the series' own error growth (g_own² = mean((e_i² − s²)⁺ / d_i²) over its k
validation errors at log distances d_i) pooled with the corpus' g₀ as w pseudo-errors;
spread(n): the standard deviation of the log predictions of the predicting members and the
scaling laws LAWS -- beyond the measured range; inside it (between the smallest and the largest
count measured) how far the prediction misses the measured medians, interpolated in log count
between them (laws that misfit the measured points are no uncertainty about those points), and
the band there always holds the measured medians (interpolated between the counts). Never
narrower than the repetitions' spread. Without a table in the priors,
the t-based t(k − 1 + w) · σ. Coverage is measured (`corecast evaluate`, `--corpus`,
tests/test_auto_calibration.py).

With two core counts there is nothing to validate: the two-point predictor
(`corecast.model.twopoint`) with the corpus' prior for the USL's coherency share -- its stall
model only where the waits charged to time explain the lost core-time
(`corecast.model.losttime`) -- and the corpus' error growth for its band.

Size: a little over 600 lines, one subject: the choice among the members, its band and the
two-point case share the validation; the band's tables and the floor are in `bands.py`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ..dataset import Dataset
from ..errors import UserError
from . import bands, losttime, methods, twopoint
from .base import Fitted, Prediction
from .calibration import CalibratedFit, Calibration, ValidationPoint, calibrate, noise_of, validate
from .estima import analysis_rows
from .priors import Priors
from .priors import load as load_priors
from .series import check_ratio, convert, input_metric, single_size, time_series

#: Stall method kept unless its validation score exceeds this factor of the best other's ...
ESTIMA_TOLERANCE = 3.0
#: ... and this absolute error (RMS of log errors).
ESTIMA_FLOOR = 0.10
#: A member whose validation error is more than this factor of the best member's gets no weight.
NO_WEIGHT_RATIO = 2.0
#: The scaling laws whose disagreement at a count widens the band (the laws that fit the
#: measured points and that the data cannot tell apart: where they part, the data do not
#: decide). Cheap to fit; fitted whatever the priors weigh. (Among the spreads tried for the
#: band's scale -- the weighted members', these laws', these with timex -- this one narrowed the
#: band most at the same held-out coverage; docs/predict.md.)
LAWS = ("usl", "amdahl", "power", "pmnf")
#: A switch ratio this large means never: the default is not displaced by validation.
NEVER_SWITCH = 1e6
#: The stall categories explain the time when their growth accounts for at least this share of
#: the core-time lost to imperfect scaling at the largest count ...
STALL_SHARE_MIN = 0.25
#: ... and moves with it across the measured counts (correlation at least this) -- judged once the
#: loss is material: more than this share of the core-time at the largest count.
STALL_CORRELATION_MIN = 0.5
STALL_LOSS_MATERIAL = 0.10


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
    prior_growth: float | None = None     # the corpus' error growth g₀ (None: the series' own only)
    prior_weight: float = 0.0             # ... counted as this many validation errors
    method: str = "auto"
    warnings: list[str] = field(default_factory=list)
    #: the measured series (core counts, throughput of the input's units: 1/time): the floor
    #: of every prediction unless `retro` says the curve turns down (`bands`); None: no floor
    #: (a prediction for another clock or problem size)
    measured: tuple[np.ndarray, np.ndarray] | None = None
    retro: tuple[bool, str] = (False, "")
    reps: np.ndarray | None = None        # the repetitions' spread (`bands.rep_percentiles`)
    table: dict[str, Any] | None = None   # the corpus' conformal band (`bands.Conformal`), None: t-based
    analysis: losttime.LossAnalysis | None = None   # the lost core-time and what the waits account for

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
        """The band's parameters, from the combined prediction's validation errors pooled with
        the corpus' error growth."""
        return calibrate(self.combined_validation(), self.noise, self.prior_growth, self.prior_weight)

    def _member_predictions(self, cores: np.ndarray, level: float,
                            names: Sequence[str] | None = None) -> tuple[dict[str, Prediction], list[str]]:
        preds: dict[str, Prediction] = {}
        dropped: list[str] = []
        for k in (self.weights if names is None else names):
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
        weights = self.weights
        if not preds:
            # none of the chosen members predicts these counts: the first of the laws, then of the
            # other fitted methods, that does, said so
            for k in [*(m for m in LAWS if m in self.fits), *self.fits]:
                if k in self.weights:
                    continue
                one, _ = self._member_predictions(cores, level, [k])
                if one:
                    preds, weights = one, {k: 1.0}
                    dropped.append(f"{k} predicts instead")
                    break
        if not preds:
            raise UserError("auto: no method could predict these core counts: " + "; ".join(dropped))
        w = {k: weights[k] for k in preds}
        tot = sum(w.values())
        w = {k: v / tot for k, v in w.items()}
        L = {k: np.log(p.value) for k, p in preds.items()}
        logt = sum(wk * L[k] for k, wk in w.items())
        spread = self.disagreement(cores, L, level)
        miss = self.measured_miss(cores, w, level)
        inside = np.zeros(len(cores), dtype=bool)
        if miss is not None:
            # inside the measured range the band is no extrapolation's: how far the prediction
            # misses the measurements there, not how far laws that misfit them disagree
            inside = ~np.isnan(miss)
            spread = np.where(inside, np.nan_to_num(miss), spread)
        warns = list(self.warnings) + dropped
        x, note, floor_info = self.floored(cores, np.exp(-logt))
        if note:
            warns.append(note)
        t = 1.0 / x
        cal = self.calibration()
        parts: dict[str, Any] | None = None
        if cal is not None:
            r = cores / self.top
            parts = {"kind": "validated", "noise": cal.noise, "growth": cal.growth,
                     "spread": [float(v) for v in spread], "top": self.top, "dof": cal.dof}
            x_lo, x_hi = self.band(x, r, parts, level)
            if inside.any():
                # and it holds the measurements themselves (interpolated between the counts)
                x_lo, x_hi = bands.hold(cores, x_lo, x_hi, *self.measured)
            lo, hi = 1.0 / x_hi, 1.0 / x_lo
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
        params = {"chosen": list(w), "weights": dict(w), "validation_scores": dict(self.scores),
                  "reason": self.reason}
        if parts is not None:
            params["band_parts"] = parts
        if self.measured is not None:
            params["retrograde"] = {"confirmed": self.retro[0], "why": self.retro[1]}
        if floor_info is not None:
            params["floor"] = floor_info
        pr = Prediction(cores=cores, value=t, metric="time_s", low=lo, high=hi, level=level, method="auto",
                        model=model, params=params, warnings=warns)
        return convert(pr, self.metric)

    def disagreement(self, cores: np.ndarray, L: dict[str, np.ndarray], level: float) -> np.ndarray:
        """How much the predicting members and the scaling laws (LAWS) disagree at `cores`: the
        standard deviation of their log predictions (0 with one)."""
        logs = dict(L)
        for k in LAWS:
            if k in logs or k not in self.fits:
                continue
            try:
                v = convert(self.fits[k].predict(cores, level), "time_s").value
            except (UserError, ValueError, np.linalg.LinAlgError):
                continue
            if np.all(np.isfinite(v)) and np.all(v > 0):
                logs[k] = np.log(v)
        if len(logs) < 2:
            return np.zeros(len(cores))
        return np.std(np.array(list(logs.values())), axis=0)

    def measured_miss(self, cores: np.ndarray, w: dict[str, float], level: float) -> np.ndarray | None:
        """At the asked counts inside the measured range (between the smallest and the largest
        count measured; NaN outside it): |log(measured / predicted)|, the prediction with weights
        `w`, floored as shown, against the measured medians, interpolated in log count between the
        measured counts. None without a measured series (a prediction for another clock or size)
        or where a member cannot predict the measured counts."""
        if self.measured is None:
            return None
        mc, mx = (np.asarray(v, dtype=float) for v in self.measured)
        order = np.argsort(mc)
        mc, mx = mc[order], mx[order]
        preds, _ = self._member_predictions(mc, level, list(w))
        if set(preds) != set(w):
            return None
        x_m, _, _ = self.floored(mc, np.exp(-sum(wk * np.log(preds[k].value) for k, wk in w.items())))
        return bands.between(cores, mc, np.abs(np.log(mx / x_m)), log=False)

    def floored(self, cores: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, str, dict[str, Any] | None]:
        """The throughput `x` at `cores` kept at least at the highest measured at or below each
        count, unless the fitted model says the curve turns down (`bands`); what was done, and
        the same as data (`bands.floor_note`'s: a caller that asked about effective cores
        says it in threads)."""
        if self.measured is None:
            return x, "", None
        mc, mx = self.measured
        fl = bands.floor(cores, mc, mx)
        below = x < fl * (1 - 1e-12)
        if not np.any(below):
            return x, "", None
        i = int(np.argmax(below))
        ok = mc <= cores[i]
        at = float(mc[ok][int(np.argmax(mx[ok]))])
        info = {"kind": "fit", "from": float(cores[i]), "at": at, "turns_down": self.retro[0], "why": self.retro[1]}
        return (x if self.retro[0] else np.where(below, fl, x)), bands.floor_note(info), info

    def band(self, x: np.ndarray, r: np.ndarray, parts: dict[str, Any], level: float,
             machine: np.ndarray | float = 0.0, table: dict[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) throughput around `x` at distances r (count / largest measured count), from
        the scale `parts` of the band and the uncertainty of any machine effect applied."""
        sigma = bands.scale(parts["noise"], parts["growth"], r, np.asarray(parts["spread"]), machine)
        tab = table if table is not None else self.table
        if tab is None:
            z = float(stats.t.ppf((1 + level) / 2, max(int(parts.get("dof", 1)), 1)))
            return bands.band(x, sigma, r, None, level, self.reps, fallback=z)
        return bands.band(x, sigma, r, bands.Conformal.from_dict(tab), level, self.reps)

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
                           "formula": ("q(level, n / n_max) * sigma" if self.table is not None else "t * sigma")
                           + ", sigma = sqrt(noise^2 + (growth * ln(n / n_max))^2 + spread^2)",
                           "quantiles": ("the corpus' held-out scores (conformal, learned out of sample)"
                                         if self.table is not None else "Student's t"),
                           "prior_growth": self.prior_growth, "prior_weight": self.prior_weight},
                       "reason": self.reason}
        return out

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Any]:
        est = self.fits.get("estima")
        if est is not None:
            return est.bottlenecks(cores)
        return analysis_rows(self.analysis) if self.analysis is not None else []

    def calibrated_member(self, name: str) -> CalibratedFit | None:
        """The member `name` with its band calibrated on its own validation errors: what
        `calibration.calibrated(name, ...)` gives on the same data, from the fit and the
        validation `auto` already made (None when the member could not be fitted). Its
        warnings do not repeat the choice of a problem size (auto's own do)."""
        if name not in self.fits:
            return None
        return CalibratedFit(self.fits[name], [v for v in self.validation if v.method == name], self.top,
                             self.noise)


def fit_dataset(ds: Dataset, size: float | None = None, priors: Priors | None = None, **kw: Any) -> Fitted:
    """Validate the applicable methods and member laws, choose or combine, and return the fitted
    `auto` predictor (the two-point predictor with two core counts). `kw`: the options of the
    single methods (`methods.OPTIONS`), each passed to the methods that declare it. `priors`:
    what the corpus taught (default: the shipped `priors.toml`)."""
    methods.check_options(kw)
    # A ratio is refused here, not by the methods that take it: a member that declares none
    # would otherwise be fitted alone and the mistake pass unseen (docs/extending.md).
    for opt in ("freq_ratio", "size_ratio"):
        if kw.get(opt) is not None:
            check_ratio(kw[opt], "--" + opt.replace("_", "-"))
    pri = priors or load_priors()
    ds1, warns = single_size(ds, size)
    metric = input_metric(ds1)
    ts = time_series(ds1)
    if len(ts.cores) == 2:
        # Nothing to validate or combine: the two-point predictor, with the corpus' coherency share.
        # Its stall model only where the waits charged to time explain the lost core-time.
        tp = twopoint.fit_dataset(ds, size=size, coherency_share=pri.share_for(float(ts.cores.max())),
                                  **methods.options_for(twopoint.fit_dataset, kw))
        # The floor and the retrograde check: not for the stall model, whose named bottleneck may
        # say why adding cores slows the program down (`twopoint.guard_band`).
        measured, retro = ((None, (False, "")) if tp.uses_stalls else
                           bands.measured_floor(ds1, {}, kw, ts=tp.series))
        return PriorBand(tp, float(ts.cores.max()), pri.band_growth_two, measured=measured, retro=retro,
                         reps=bands.rep_percentiles(ds1), table=pri.band_table)
    if len(ts.cores) < 3:
        raise UserError(f"{ds.label}: prediction needs measurements at 2 or more distinct core counts "
                        f"(got {len(ts.cores)})")
    # The interference-free times and the waits charged to time (corecast.model.losttime).
    ds1, la = losttime.prepare(ds1, kw.get("categories"))
    if la is not None:
        warns.extend(la.notes)
        ts = time_series(ds1)
    cand = methods.applicable(ds1, kw.get("categories")) + list(methods.MEMBERS)
    fits: dict[str, Fitted] = {}
    errors: dict[str, str] = {}
    # When the priors never let another member displace the default (switch_ratio infinite),
    # only the default, its partner and the stall method can carry weight: the others are not
    # fitted or validated (unless the default cannot be fitted).
    never = pri.switch_ratio >= NEVER_SWITCH
    first = [m for m in cand if m in ("estima", "mva", pri.default, pri.partner) + LAWS] if never else cand
    for group in (first, [m for m in cand if m not in first]):
        for meth in group:
            try:
                fits[meth] = methods.fit(meth, ds1, **kw)
            except UserError as err:
                errors[meth] = str(err)
        # a method that fits but cannot predict even the largest measured count (the stall method
        # over stall columns that are zero at most counts) is not a candidate: chosen, it would
        # predict nothing
        for meth in [m for m in group if m in fits]:
            try:
                fits[meth].predict(np.array([float(ts.cores.max())]), 0.8)
            except (UserError, ValueError, np.linalg.LinAlgError) as err:
                errors[meth] = str(err)
                del fits[meth]
        if pri.default in fits:
            break
    # members left unfitted because no validation could give them weight: said in the reason
    # (the choice's explanation), not as a warning: nothing is wrong and nothing is to be done
    unfitted = [m for m in cand if m not in fits and m not in errors] if never and pri.default in fits else []
    if not fits:
        raise UserError(f"{ds.label}: no method could fit the data: " + "; ".join(errors.values()))
    val = validate(ds1, list(fits), **kw)
    scores: dict[str, float] = {}
    for meth in fits:
        e = [v.log_error for v in val if v.method == meth]
        scores[meth] = float(np.sqrt(np.mean(np.square(e)))) if e else math.inf
    finite = {k: v for k, v in scores.items() if math.isfinite(v)}
    estima_note = ""
    if "estima" in fits:
        fits["estima"].analysis = la if la is not None else getattr(fits["estima"], "analysis", None)
        explains, why = (la.explains, la.reason) if la is not None else stalls_explain(ds1, kw.get("categories"))
        if not explains:
            estima_note = f"the stall method is shown but not used: {why}"
            warns.append(estima_note)
    if not finite:
        # Too few points to validate: the stall method if its stalls explain the time, else the
        # corpus' default.
        weights = {"estima": 1.0} if "estima" in fits and not estima_note else default_weights(fits, pri)
        reason = (f"too few points to validate; used {' + '.join(weights)}" +
                  (f" ({estima_note})" if estima_note else ""))
    elif "estima" in finite and not estima_note:
        others = {k: v for k, v in finite.items() if k != "estima"}
        best_other = min(others.values()) if others else math.inf
        if others and scores["estima"] > ESTIMA_TOLERANCE * best_other and scores["estima"] > ESTIMA_FLOOR:
            weights, reason = choose(others, pri)
            reason = (f"the stall method validated clearly worse ({100 * scores['estima']:.1f}% against "
                      f"{100 * best_other:.1f}%); " + reason)
        else:
            weights = {"estima": 1.0}
            reason = (f"stall categories explain the time; the stall method validated at "
                      f"{100 * scores['estima']:.1f}% RMS error" +
                      (f" (best other {100 * best_other:.1f}%)" if others else ""))
    else:
        weights, reason = choose({k: v for k, v in finite.items() if k != "estima" or not estima_note}, pri)
        if estima_note:
            reason = estima_note + "; " + reason
    weights, reason = prefer_demands(weights, reason, scores)
    if unfitted:
        reason += f"; {', '.join(unfitted)} not fitted (no validation could give {'them' if len(unfitted) > 1 else 'it'} weight)"
    warns = warns + [f"{k} not used: {v}" for k, v in errors.items()]
    measured, retro = bands.measured_floor(ds1, fits, kw)
    return AutoFit(metric=metric, fits=fits, scores=scores, weights=weights, validation=val,
                   top=float(ts.cores.max()), reason=reason, noise=noise_of(ds1),
                   prior_growth=pri.band_growth, prior_weight=pri.band_weight, warnings=warns,
                   measured=measured, retro=retro, reps=bands.rep_percentiles(ds1), table=pri.band_table,
                   analysis=la if la is not None and la.charges else None)


def prefer_demands(weights: dict[str, float], reason: str, scores: dict[str, float]) -> tuple[dict[str, float], str]:
    """auto's one rule for the demand model (`mva`, fitted where the data have measured demands):
    it is used alone when it validated better than every member the other rules gave weight to
    (a model built from the program's measured demands, not from the curve, that also predicts
    the held-out points best); otherwise the choice stands and mva is shown."""
    s = scores.get("mva", math.inf)
    used = {k: scores.get(k, math.inf) for k in weights if k != "mva"}
    if not math.isfinite(s) or "mva" in weights or not used or s >= min(used.values()):
        return weights, reason
    best = min(used, key=lambda k: used[k])
    return {"mva": 1.0}, (f"the demand model (mva) validated at {100 * s:.1f}% RMS error, better than "
                          f"{best} at {100 * used[best]:.1f}% (the choice otherwise: {reason})")


def default_weights(fits: dict[str, Any], pri: Priors) -> dict[str, float]:
    """The corpus' default blend among the fitted members (the default alone without its
    partner; the USL, else any member, without the default)."""
    if pri.default in fits:
        if pri.partner and pri.partner in fits and pri.default_weight < 1.0:
            return {pri.default: pri.default_weight, pri.partner: 1.0 - pri.default_weight}
        return {pri.default: 1.0}
    return {"usl" if "usl" in fits else next(iter(fits)): 1.0}


def choose(scores: dict[str, float], pri: Priors) -> tuple[dict[str, float], str]:
    """Weights from validation scores (finite RMS log errors): the corpus' default method (blended
    with its partner, unless the partner validated more than NO_WEIGHT_RATIO times worse) unless
    another validates more than `switch_ratio` times better; then the members within
    NO_WEIGHT_RATIO of the best, weighted by inverse mean squared error."""
    best_k = min(scores, key=lambda k: scores[k])
    best = max(scores[best_k], 1e-3)
    d = pri.default
    if d in scores and scores[d] <= pri.switch_ratio * best:
        what = f"{d}, the method that extrapolated best on held-out real curves"
        w = {d: 1.0}
        p = pri.partner
        if p and p in scores and pri.default_weight < 1.0:
            if scores[p] > NO_WEIGHT_RATIO * max(scores[d], 1e-3):
                # The partner is a combined member like any other: one that validated several
                # times worse than the default gets no weight (Amdahl's law beside a curve that
                # already falls inside the measured range).
                what += (f"; alone, not blended with {p}: {p} validated at {100 * scores[p]:.1f}%, more "
                         f"than {NO_WEIGHT_RATIO:g}x worse")
            else:
                w = {d: pri.default_weight, p: 1.0 - pri.default_weight}
                what = (f"{d} blended with {p} ({pri.default_weight:g} : {1 - pri.default_weight:g} in log "
                        "space), the blend that extrapolated best on held-out real curves")
        rule = ("on the corpus no validation made another member worth displacing it"
                if pri.switch_ratio >= NEVER_SWITCH else
                f"another must validate {pri.switch_ratio:g}x better to displace it")
        return w, (f"{what} ({pri.origin}); {d} validated at {100 * scores[d]:.1f}% RMS error (best {best_k} "
                   f"{100 * scores[best_k]:.1f}%; {rule})")
    keep = {k: v for k, v in scores.items() if v <= NO_WEIGHT_RATIO * best}
    inv = {k: 1.0 / max(v, 1e-3) ** 2 for k, v in keep.items()}
    tot = sum(inv.values())
    w = dict(sorted(((k, v / tot) for k, v in inv.items()), key=lambda kv: -kv[1]))
    dropped = sorted(set(scores) - set(keep))
    why = (f"{d} validated at {100 * scores[d]:.1f}%, more than {pri.switch_ratio:g}x the best; " if d in scores
           else f"{d} could not be validated; ")
    if len(w) == 1:
        k = next(iter(w))
        return w, why + f"{k} validated at {100 * scores[k]:.1f}% RMS error" + (
            f" (no weight for {', '.join(dropped)}: more than {NO_WEIGHT_RATIO:g}x worse)" if dropped else "")
    return w, (why + "combined " + ", ".join(f"{k} ({100 * scores[k]:.1f}%)" for k in w) +
               " (RMS validation errors), weights by inverse squared error" +
               (f"; no weight for {', '.join(dropped)} (more than {NO_WEIGHT_RATIO:g}x worse)" if dropped else ""))


def stalls_explain(ds: Dataset, categories: Sequence[str] | None = None) -> tuple[bool, str]:
    """Do the stall categories explain the measured time? (explains, why not).

    What the stall method extrapolates is the core-time lost to imperfect scaling: n·T(n) −
    n₁·T(n₁) over the smallest count n₁ (0 for a perfect speed-up). The stalls explain it when
    their growth, S(n) − S(n₁) (total stalled cycles over the categories, over the clock), moves
    with it across the measured counts (Pearson correlation at least STALL_CORRELATION_MIN) and,
    where the clock is known, accounts for at least STALL_SHARE_MIN of it at the largest count.
    Without the clock the share cannot be judged and only the correlation is checked. While the
    loss is not material (STALL_LOSS_MATERIAL of the core-time) nothing contradicts the stalls.

    Where the time and the categories allow it, the lost-core-time analysis decides
    (`corecast.model.losttime`: the stalls charged to time up to the core-time the run lost,
    the same rule for two core counts as for many); this is the rule without it."""
    la = losttime.analyze(ds, categories)
    if la is not None:
        return la.explains, la.reason
    names = list(categories) if categories else ds.stall_names
    ts = time_series(ds)
    if ts.metric != "time_s":
        return False, ("the data give throughput, not the time of a fixed amount of work, so stalled "
                       "time cannot be compared with it")
    clock = ds.machine.nominal_freq_hz
    total = np.zeros(len(ts.cores))
    used = 0
    for nm in names:
        ag = ds.aggregate(nm)
        vals = dict(zip(ag.cores.tolist(), ag.value.tolist()))
        if not all(c in vals for c in ts.cores.tolist()):
            continue
        unit = ds.columns[nm].unit
        v = np.array([vals[c] for c in ts.cores.tolist()])
        if unit == "s":
            v = v * (clock or 1.0)
        elif unit != "cycles":
            continue
        total += v
        used += 1
    if not used:
        return False, "no stall category in cycles or seconds measured at every core count"
    lost = ts.cores * ts.time - ts.cores[0] * ts.time[0]          # core-seconds lost to imperfect scaling
    grown = total - total[0]                                     # stalled cycles grown since n₁
    if lost[-1] <= STALL_LOSS_MATERIAL * ts.cores[-1] * ts.time[-1]:
        # Scaling still (nearly) perfect: nothing the stalls could fail to explain -- the stall
        # method's use is to see a slowdown before the time shows it.
        return True, ""
    if clock:
        share = float(grown[-1] / clock / lost[-1])
        if share < STALL_SHARE_MIN:
            return False, (f"the growth of the stalls accounts for {100 * share:.1f}% of the core-time lost to "
                           f"imperfect scaling at {ts.cores[-1]:g} cores (under {100 * STALL_SHARE_MIN:g}%): "
                           "something the stall columns do not show limits the scaling")
    if np.ptp(grown) <= 0:
        return False, "the stalls do not grow with the cores while the time lost to imperfect scaling does"
    r = float(np.corrcoef(lost, grown)[0, 1])
    if not math.isfinite(r) or r < STALL_CORRELATION_MIN:
        return False, (f"the core-time lost to imperfect scaling does not move with the stalls across the "
                       f"measured counts (correlation {r:.2f} < {STALL_CORRELATION_MIN:g}): something the "
                       "stall columns do not show limits the scaling")
    return True, ""


@dataclass
class PriorBand(Fitted):
    """A prediction from two core counts with the band the corpus' error growth gives:
    h(n) = the corpus' conformal quantiles times g₀ · ln(n / largest measured count) (`bands`;
    ±z g₀ ln(n / top) without a table), never narrower than z · s, s the repetitions' noise (at
    least `twopoint.NOISE_FLOOR`); for the stall model, united with its laws' bracket; widened
    to reach the largest count's measurement where it would lie wholly beyond it without a cause
    (`twopoint.guard_band`). Never below a measured throughput at a lower count (two points cannot
    show a peak), except for the stall model, whose named bottleneck may say why -- and where its
    prediction does fall below, a warning says so and names the categories (`twopoint.guard_band`)."""

    fitted: Fitted
    top: float
    growth: float
    method: str = "auto"
    measured: tuple[np.ndarray, np.ndarray] | None = None
    retro: tuple[bool, str] = (False, "")
    reps: np.ndarray | None = None
    table: dict[str, Any] | None = None

    @property
    def warnings(self) -> list[str]:       # type: ignore[override]
        return self.fitted.warnings

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        p = self.fitted.predict(cores, level)
        t = convert(p, "time_s")
        warns = [w for w in p.warnings if w != twopoint.BAND_NOTE]
        x = 1.0 / t.value
        floor_info = None
        if self.measured is not None:
            mc, mx = self.measured
            fl = bands.floor(cores, mc, mx)
            below = x < fl * (1 - 1e-12)
            if np.any(below):
                i = int(np.argmax(below))
                floor_info = {"kind": "two", "from": float(cores[i]), "at": float(mc[int(np.argmax(mx))]),
                              "turns_down": self.retro[0], "why": self.retro[1]}
                warns.append(bands.floor_note(floor_info))
                if not self.retro[0]:
                    x = np.where(below, fl, x)
        parts = {"kind": "two", "noise": 0.0, "growth": self.growth, "spread": [0.0] * len(cores), "top": self.top}
        x_lo, x_hi = self.band(x, cores / self.top, parts, level)
        t_value, lo, hi = 1.0 / x, 1.0 / x_hi, 1.0 / x_lo
        noise = self.noise_floor
        stalls = bool(getattr(self.fitted, "uses_stalls", False)) and t.low is not None and t.high is not None
        if stalls:
            lo, hi = np.minimum(lo, t.low), np.maximum(hi, t.high)
        lo, hi, guard = twopoint.guard_band(self.fitted, cores, t_value, lo, hi)
        warns.append("two core counts: the band is the corpus' error growth for extrapolation this far "
                     f"(g0 = {self.growth:.3f} per unit of log distance) and the run-to-run noise ({100 * noise:.1f}%)"
                     + (", united with the bracket of the stall laws" if stalls else "")
                     + ", not estimated from these points")
        warns.extend(guard)
        params = dict(p.params)
        params["band"] = {"calibrated": "corpus prior", "error_growth_per_log_distance": self.growth,
                          "noise": noise, "with_stall_laws": stalls}
        params["band_parts"] = parts
        if self.measured is not None:
            params["retrograde"] = {"confirmed": self.retro[0], "why": self.retro[1]}
        if floor_info is not None:
            params["floor"] = floor_info
        q = Prediction(cores=cores, value=t_value, metric="time_s", low=lo, high=hi, level=level,
                       method=p.method, model=p.model, params=params, warnings=warns)
        return convert(q, p.metric)

    def band(self, x: np.ndarray, r: np.ndarray, parts: dict[str, Any], level: float,
             machine: np.ndarray | float = 0.0, table: dict[str, Any] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) throughput around `x` at distances r (see `AutoFit.band`)."""
        sigma = bands.scale(0.0, parts["growth"], r, 0.0, machine)
        tab = table if table is not None else self.table
        lo, hi = bands.band(x, sigma, r, None if tab is None else bands.Conformal.from_dict(tab), level, self.reps)
        h = twopoint.prior_half_width(np.ones(1), 1.0, 0.0, level, self.noise_floor)   # z · s
        return np.minimum(lo, x * np.exp(-h)), np.maximum(hi, x * np.exp(h))

    @property
    def noise_floor(self) -> float:
        """The repetitions' noise of the two-point fit (at least `twopoint.NOISE_FLOOR`)."""
        return float(getattr(self.fitted, "noise", twopoint.NOISE_FLOOR))

    def models(self, horizon: float = 0.0) -> dict[str, Any]:
        return self.fitted.models(horizon)

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Any]:
        return self.fitted.bottlenecks(cores)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("fitted", "top", "growth", "measured", "retro", "reps", "table", "noise_floor"):
            raise AttributeError(name)
        return getattr(self.fitted, name)
