"""Validation of the methods on the measured points, and bands calibrated on it.

Validation is rolling-origin: for each of the last few core counts c_j taken as an origin, every
method is fitted on the points at cores ≤ c_j and predicts the larger measured counts; its
error is the log ratio of predicted to measured time (≈ relative error).

A calibrated band, from k such errors e_i, each at its log distance of extrapolation
d_i = ln(target / origin):

    h(n) = t(k−1) · sqrt(s² + g² d(n)² + spread(n)²),   low, high = prediction · e^(∓h)

s: the noise of the data (relative residual of the USL fitted to all points, `noise_of`); g:
how fast the error grows with the distance, g² = mean((e_i² − s²)⁺ / d_i²); d(n) = ln(n / largest
measured count); spread(n): for a combination (`auto`), how much its members disagree at n, 0
for a single method. `calibrated` fits one method and gives it this band (`CalibratedFit`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ..dataset import Dataset
from ..errors import UserError
from . import methods, usl
from .base import Fitted, Prediction
from .series import convert, single_size, speed, time_series

#: How many origins rolling-origin validation uses at most.
MAX_ORIGINS = 4
#: A validation point nearer its origin than this (log distance: 5% more cores, effective cores
#: with a machine given) tells the noise, not how the error grows with distance: it is left out
#: of the growth. (Threads beyond the CPUs that add nothing are all but one effective count: an
#: error at a distance of 1e-7 made a growth of 10^6 and a band of zero to infinity.)
MIN_GROWTH_DISTANCE = math.log(1.05)


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


def calibrate(points: Sequence[tuple[float, float]], noise: float, prior_growth: float | None = None,
              prior_weight: float = 0.0) -> Calibration | None:
    """Band parameters from rolling-origin (log distance, log error) pairs and the data's noise:
    g² = mean((e² − s²)⁺ / d²); with a prior growth g₀ counted as `prior_weight` pseudo-errors,
    g² = (k g² + w g₀²) / (k + w) and the t quantile's degrees of freedom k − 1 + w."""
    pts = [(d, e) for d, e in points if d >= MIN_GROWTH_DISTANCE and math.isfinite(e)]
    w = prior_weight if prior_growth is not None else 0.0
    if not pts and w <= 0:
        return None
    k = len(pts)
    g2 = 0.0
    if pts:
        d = np.array([p[0] for p in pts])
        e = np.array([p[1] for p in pts])
        g2 = float(np.mean(np.maximum(e * e - noise * noise, 0.0) / (d * d)))
    if w > 0:
        g2 = (k * g2 + w * float(prior_growth) ** 2) / (k + w)
    return Calibration(noise=noise, growth=math.sqrt(g2), points=k, dof=max(int(round(k - 1 + w)), 1))


@dataclass
class CalibratedFit(Fitted):
    """One method with its band replaced by the calibrated one: the method's own rolling-origin
    errors, h(n) = t(k−1) · sqrt(s² + g² d(n)²). Everything else is the method's: the face
    (`method`, `warnings`, `models`, `bottlenecks`) is delegated, and the method's own
    attributes (an EstimaFit's `solve`, ...) are passed through. With nothing to calibrate on,
    the method's own band is kept."""

    fitted: Fitted
    validation: list[ValidationPoint]
    top: float
    noise: float

    def __getattr__(self, name: str) -> Any:
        if name in ("fitted", "validation", "top", "noise"):
            raise AttributeError(name)
        return getattr(self.fitted, name)

    @property
    def method(self) -> str:           # type: ignore[override]
        return self.fitted.method

    @property
    def warnings(self) -> list[str]:   # type: ignore[override]
        return self.fitted.warnings

    def models(self, horizon: float) -> dict[str, Any]:
        return self.fitted.models(horizon)

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Any]:
        return self.fitted.bottlenecks(cores)

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
    f = methods.fit(method, ds, **kw)
    kw2 = {k: v for k, v in kw.items() if k != "size"}
    ts = time_series(ds1)
    val = validate(ds1, [method], **kw2) if len(ts.cores) > 3 else []
    return CalibratedFit(f, val, float(ts.cores.max()), noise_of(ds1))


def validate(ds: Dataset, names: Sequence[str], max_origins: int = MAX_ORIGINS,
             level: float = 0.8, **kw: Any) -> list[ValidationPoint]:
    """Rolling-origin validation of the methods `names` on the measured points of `ds`."""
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
        for meth in names:
            try:
                f = methods.fit(meth, sub, **kw)
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
    N, X, _ = speed(ds)
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


