"""Scaling laws of the throughput as methods: the USL (`--method usl`) and the small laws that
`auto` combines with it and with time extrapolation.

Each fits a Dataset and predicts in the dataset's input metric, so it shows the same face as
the other methods:

- `usl`: the Universal Scalability Law (`corecast.model.usl`) fitted to every measured
  throughput (1/time), X(n) = γ n / (1 + α (n − 1) + β n (n − 1)).
- `amdahl`: Amdahl's law, the USL with β = 0, X(n) = γ n / (1 + α (n − 1)). Throughput only
  saturates, it never falls: the USL's β is often fitted on noise and predicts a decline that
  never comes.

The members, fitted on the one-value-per-core-count series (median time, or 1/throughput):

- `power`: the local scaling exponent, X(n) = c · n^p with p ≤ 1, fitted by least squares on
  log X against log n over the upper half of the measured core counts (at least 3). It says
  "the scaling seen lately goes on", which is often the best short-range guess on real data.
- `pmnf`: Extra-P's performance model normal form with one term, fitted to the *throughput*
  (X(n) = c0 + c1 n^i log2^j n, exponents from a fixed set): a growing or saturating function;
  a fit whose throughput is not positive between 1 core and the target is unrealistic.

Bands: `amdahl` has the USL's t-based prediction band; `power` and `pmnf` the t-based
prediction band of their linear least-squares fit (in log space for `power`). `auto` does not
use these bands: it calibrates its own on rolling-origin errors.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ..dataset import Dataset
from ..errors import UserError
from . import usl
from .base import Fitted, Prediction
from .kernels import PMNF, KernelFit, fit_kernel
from .series import Prepared, TimeSeries, convert, input_metric, prepare, speed, to_prediction

#: The local power law is fitted on the upper half of the measured core counts, at least this many.
POWER_MIN_POINTS = 3
#: Largest exponent of the local power law: throughput grows at most linearly with the cores.
POWER_MAX_EXPONENT = 1.0


def _t(level: float, dof: int) -> float:
    return float(stats.t.ppf((1 + level) / 2, max(dof, 1)))


@dataclass
class PowerFit(Fitted):
    """X(n) = c · n^p on the upper half of the measured core counts."""

    series: TimeSeries
    c: float
    p: float
    n_fit: np.ndarray
    resid_sd: float              # residual standard deviation of log X
    sxx: float
    xbar: float
    freq_ratio: float = 1.0
    size_ratio: float = 1.0
    method: str = "power"
    warnings: list[str] = field(default_factory=list)

    def throughput(self, n: np.ndarray) -> np.ndarray:
        return self.c * np.power(n, self.p)

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        t = 1.0 / self.throughput(cores)
        k = len(self.n_fit)
        lo = hi = None
        if k > 2 and self.sxx > 0:
            x = np.log(cores)
            se = self.resid_sd * np.sqrt(1.0 + 1.0 / k + (x - self.xbar) ** 2 / self.sxx)
            h = _t(level, k - 2) * se
            lo, hi = t * np.exp(-h), t * np.exp(h)
        s = self.freq_ratio * self.size_ratio
        return to_prediction(cores, t * s, None if lo is None else lo * s, None if hi is None else hi * s,
                             self.series.metric, level=level, method=self.method, model="power law",
                             params={"c": self.c, "p": self.p, "fitted_on_cores": [float(v) for v in self.n_fit]},
                             warnings=list(self.warnings))

    def models(self, horizon: float = 0.0) -> dict[str, Any]:
        return {"throughput": {"kernel": "PowerLaw", "formula": f"{self.c:.4g}·n^{self.p:.4g}",
                               "params": {"c": self.c, "p": self.p}, "points": len(self.n_fit),
                               "fitted_from_cores": float(self.n_fit[0])}}


def fit_power(ds: Dataset, size: float | None = None, freq_ratio: float = 1.0,
              size_ratio: float = 1.0) -> PowerFit:
    """The local power law of a Dataset's throughput (1/time)."""
    prep = prepare(ds, "the power law", size, freq_ratio, size_ratio)
    ts, warns = prep.series, prep.warnings
    m = len(ts.cores)
    k = min(m, max(POWER_MIN_POINTS, m // 2))
    n = ts.cores[-k:]
    x = np.log(n)
    y = -np.log(ts.time[-k:])                # log throughput
    xbar = float(x.mean())
    sxx = float(np.sum((x - xbar) ** 2))
    if sxx <= 0:
        raise UserError(f"{ds.label}: the power law needs distinct core counts")
    p = float(np.sum((x - xbar) * (y - y.mean())) / sxx)
    if p > POWER_MAX_EXPONENT:
        p = POWER_MAX_EXPONENT
    logc = float(np.mean(y - p * x))
    r = y - (logc + p * x)
    sd = float(math.sqrt(np.sum(r * r) / (k - 2))) if k > 2 else 0.0
    return PowerFit(ts, math.exp(logc), p, n, sd, sxx, xbar, freq_ratio, size_ratio, warnings=warns)


@dataclass
class PMNFThroughputFit(Fitted):
    """Extra-P's one-term normal form fitted to the throughput."""

    series: TimeSeries
    fit: KernelFit
    resid_sd: float
    xtx_inv: np.ndarray
    freq_ratio: float = 1.0
    size_ratio: float = 1.0
    method: str = "pmnf"
    warnings: list[str] = field(default_factory=list)

    def _term(self, n: np.ndarray) -> np.ndarray:
        i, j = self.fit.extra["i"], self.fit.extra["j"]
        return PMNF._term(n, np.float64(i), np.float64(j))

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        hi_n = float(max(cores.max() if cores.size else 1.0, self.series.cores.max()))
        grid = np.geomspace(1.0, hi_n, 64) if hi_n > 1 else np.array([1.0])
        if np.any(~np.isfinite(self.fit(grid))) or np.any(self.fit(grid) <= 0):
            raise UserError(f"{self.series.dataset.label}: pmnf: the fitted throughput "
                            f"({self.fit.formula()}) is not positive up to {hi_n:g} cores")
        X = self.fit(cores)
        t = 1.0 / X
        lo = hi = None
        k = len(self.fit.n)
        if k > 2:
            B = np.stack([np.ones_like(cores), self._term(cores)], axis=-1)
            se = self.resid_sd * np.sqrt(1.0 + np.einsum("pi,ij,pj->p", B, self.xtx_inv, B))
            h = _t(level, k - 2) * se
            with np.errstate(divide="ignore"):
                hi = np.where(X - h > 0, 1.0 / np.maximum(X - h, 1e-300), np.inf)
            lo = 1.0 / (X + h)
        s = self.freq_ratio * self.size_ratio
        return to_prediction(cores, t * s, None if lo is None else lo * s, None if hi is None else hi * s,
                             self.series.metric, level=level, method=self.method, model="PMNF of the throughput",
                             params={"formula": self.fit.formula()}, warnings=list(self.warnings))

    def models(self, horizon: float = 0.0) -> dict[str, Any]:
        d = self.fit.to_dict()
        return {"throughput": d}


def fit_pmnf(ds: Dataset, size: float | None = None, freq_ratio: float = 1.0,
             size_ratio: float = 1.0) -> PMNFThroughputFit:
    """Extra-P's normal form (one term) fitted to a Dataset's throughput (1/time)."""
    prep = prepare(ds, "pmnf", size, freq_ratio, size_ratio)
    ts, warns = prep.series, prep.warnings
    X = 1.0 / ts.time
    f = fit_kernel(PMNF, ts.cores, X)
    if f is None:
        raise UserError(f"{ds.label}: pmnf: no fit")
    k = len(ts.cores)
    B = np.stack([np.ones_like(ts.cores), PMNF._term(ts.cores, np.float64(f.extra["i"]), np.float64(f.extra["j"]))],
                 axis=-1)
    try:
        inv = np.linalg.inv(B.T @ B)
    except np.linalg.LinAlgError:
        inv = np.linalg.pinv(B.T @ B)
    sd = math.sqrt(f.rss / (k - 2)) if k > 2 else 0.0
    return PMNFThroughputFit(ts, f, sd, inv, freq_ratio, size_ratio, warnings=warns)


# ============================================================================ the USL and Amdahl's law
@dataclass
class USLMethod(Fitted):
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


def _usl_family(ds: Dataset, size: float | None, freq_ratio: float, size_ratio: float,
                amdahl: bool) -> USLMethod:
    what = "Amdahl's law" if amdahl else "the USL"

    def check(prep: Prepared, what: str) -> None:
        input_metric(prep.data)
        N, X, _ = speed(prep.data)
        if len(np.unique(N)) < 3:
            raise UserError(f"{ds.label}: {what} needs measurements at 3 or more distinct core counts "
                            f"(got {len(np.unique(N))})")
        if np.any(X <= 0):
            raise UserError(f"{ds.label}: throughput must be > 0 at every point to fit {what}")

    prep = prepare(ds, what, size, freq_ratio, size_ratio, check=check)
    N, X, source = speed(prep.data)
    return USLMethod(usl.fit(N, X, amdahl=amdahl), input_metric(prep.data), source, freq_ratio, size_ratio,
                     method="amdahl" if amdahl else "usl", warnings=prep.warnings)


def fit_usl(ds: Dataset, size: float | None = None, freq_ratio: float = 1.0,
            size_ratio: float = 1.0) -> USLMethod:
    """The USL of a Dataset's throughput."""
    return _usl_family(ds, size, freq_ratio, size_ratio, amdahl=False)


def fit_amdahl(ds: Dataset, size: float | None = None, freq_ratio: float = 1.0,
               size_ratio: float = 1.0) -> USLMethod:
    """Amdahl's law (the USL with β = 0) of a Dataset's throughput."""
    return _usl_family(ds, size, freq_ratio, size_ratio, amdahl=True)
