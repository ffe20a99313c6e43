"""Gunther's Universal Scalability Law, Amdahl's law as its nested model, and the checks the
USL methodology asks of the data.

    X(N) = γ N / (1 + α (N − 1) + β N (N − 1))

α (contention, serialisation) in [0, 1], β (coherency, crosstalk) ≥ 0, γ (throughput of one
unit of load without overhead) > 0. The fit is bounded nonlinear least squares on the raw
throughput values, with a Levenberg–Marquardt solver written for this model: it is vectorised
over many datasets at once (`fit_batch`), which is what makes bootstraps and benchmark-sized
workloads fast, and a single fit is a batch of one. It reaches the same least-squares optimum
as R's `usl` package (nls with the port algorithm).

Standard errors come from the Jacobian at the optimum (σ² (JᵀJ)⁻¹ with σ² = RSS/(n − 3)), as
nls reports them; intervals use Student's t with n − 3 degrees of freedom. The fit and every
statistic (RSS, σ, the covariance, R², the F test, bands) are computed on the throughput divided
by its largest value and scaled back, so data near 1e308 or 1e-308 neither overflow (an
efficiency X/(γN) of 0.5 printed as 0) nor underflow (a zero RSS read as "β is not needed", a γ
interval whose low end was the solver's bound 1e-300, above γ).

Size: about 700 lines, one subject: Gunther's methodology is the law, its bounded fit and the
checks of the data against the fitted law (`analyze`), and the checks read the fit's
statistics throughout. The USL as a predicting method (`--method usl`) is `laws.USLMethod`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..errors import UserError
from .base import Prediction
from .dist import f_sf, t_ppf

LOWER = np.array([0.0, 0.0, 1e-300])
UPPER = np.array([1.0, np.inf, np.inf])


def usl(n: np.ndarray | float, alpha: float, beta: float, gamma: float) -> np.ndarray:
    """Throughput the USL predicts at load `n`."""
    n = np.asarray(n, dtype=float)
    return gamma * (n / (1.0 + alpha * (n - 1.0) + beta * n * (n - 1.0)))   # no overflow of gamma * n


def _model_and_jac(p: np.ndarray, N: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p: (B, 3); N: (B, P). Returns f (B, P) and J (B, P, 3)."""
    a, b, g = p[:, 0:1], p[:, 1:2], p[:, 2:3]
    nm1 = N - 1.0
    D = 1.0 + a * nm1 + b * N * nm1
    base = N / D
    f = g * base
    dD = -g * (base / D)
    J = np.stack([dD * nm1, dD * N * nm1, base], axis=-1)
    return f, J


def _starts(N: np.ndarray, X: np.ndarray, W: np.ndarray) -> list[np.ndarray]:
    """Starting points (B, 3) for the solver: a linearised estimate and a few spread ones."""
    B = N.shape[0]
    big = np.where(W > 0, N, np.inf)
    i0 = np.argmin(big, axis=1)
    rows = np.arange(B)
    n0 = N[rows, i0]
    x0 = X[rows, i0]
    g0 = np.maximum(x0 / n0, 1e-12)
    # Linearised form: N / C(N) - 1 = α (N-1) + β N (N-1), with C = X / γ0.
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(W > 0, N * g0[:, None] / np.where(X > 0, X, np.nan) - 1.0, 0.0)
    y = np.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0)
    u = (N - 1.0) * W
    v = N * (N - 1.0) * W
    suu = (u * u).sum(1)
    suv = (u * v).sum(1)
    svv = (v * v).sum(1)
    suy = (u * y * W).sum(1)
    svy = (v * y * W).sum(1)
    det = suu * svv - suv * suv
    with np.errstate(divide="ignore", invalid="ignore"):
        a_lin = np.where(det > 0, (svv * suy - suv * svy) / det, 0.0)
        b_lin = np.where(det > 0, (suu * svy - suv * suy) / det, 0.0)
    a_lin = np.clip(np.nan_to_num(a_lin), 0.0, 1.0)
    b_lin = np.clip(np.nan_to_num(b_lin), 0.0, None)
    starts = [np.column_stack([a_lin, b_lin, g0])]
    nmax = np.where(W > 0, N, 0).max(1)
    for a, bscale in ((0.05, 0.0), (0.01, 1.0), (0.3, 0.05)):
        b = bscale / np.maximum(nmax * nmax, 1.0)
        starts.append(np.column_stack([np.full(B, a), b, g0]))
    out = []
    for s in starts:
        out.append(_project_gamma(s, N, X, W))
    return out


def _project_gamma(p: np.ndarray, N: np.ndarray, X: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Best γ for the α, β in p (the model is linear in γ)."""
    p = p.copy()
    D = 1.0 + p[:, 0:1] * (N - 1.0) + p[:, 1:2] * N * (N - 1.0)
    gbase = N / D
    num = (W * X * gbase).sum(1)
    den = (W * gbase * gbase).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        gam = np.where(den > 0, num / den, p[:, 2])
    p[:, 2] = np.where(np.isfinite(gam) & (gam > 0), gam, np.maximum(p[:, 2], 1e-12))
    return p


def _lm(N: np.ndarray, X: np.ndarray, W: np.ndarray, p0: np.ndarray, free: np.ndarray,
        max_iter: int = 200, lam0: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bounded Levenberg–Marquardt, vectorised over the batch.

    Damping follows Nielsen's rule driven by the gain ratio (actual over predicted decrease);
    parameters pinned at a bound that the gradient pushes outward are held fixed for the step.
    Stops, per dataset, as MINPACK does: when the actual and predicted relative decreases of
    the cost are both below 1e-13, or the relative step is below 1e-11.

    free: (3,) bool, which parameters move (Amdahl's law fixes β = 0).
    Returns parameters (B, 3), cost 0.5·RSS (B,), and the damping reached (B,).
    """
    B = N.shape[0]
    p = np.clip(p0.astype(float), LOWER, UPPER)
    f, _ = _model_and_jac(p, N)
    r = (f - X) * W
    cost = 0.5 * (r * r).sum(1)
    lam = np.full(B, 1e-3) if lam0 is None else lam0.copy()
    nu = np.full(B, 2.0)
    active = np.arange(B)
    eye = np.eye(3)
    for _ in range(max_iter):
        if active.size == 0:
            break
        pa, Na, Xa, Wa = p[active], N[active], X[active], W[active]
        f, J = _model_and_jac(pa, Na)
        r = (f - Xa) * Wa
        Jw = J * Wa[..., None]
        A = np.einsum("bpi,bpj->bij", Jw, Jw)
        g = np.einsum("bpi,bp->bi", Jw, r)
        hold = ((pa <= LOWER + 1e-15) & (g > 0)) | ((pa >= UPPER - 1e-15) & (g < 0)) | ~free[None, :]
        keep = ~hold
        diag = np.einsum("bii->bi", A)
        scale = np.where(diag > 0, diag, 1.0)
        la = lam[active]
        M = A + (la[:, None] * scale)[:, :, None] * eye
        M = np.where(keep[:, :, None] & keep[:, None, :], M, 0.0) + np.where(keep, 0.0, 1.0)[:, :, None] * eye
        rhs = np.where(keep, -g, 0.0)
        try:
            step = np.linalg.solve(M, rhs[..., None])[..., 0]
        except np.linalg.LinAlgError:
            step = np.stack([np.linalg.lstsq(M[i], rhs[i], rcond=None)[0] for i in range(len(M))])
        pn = np.clip(pa + step, LOWER, UPPER)
        step = pn - pa
        fn, _ = _model_and_jac(pn, Na)
        rn = (fn - Xa) * Wa
        cn = 0.5 * (rn * rn).sum(1)
        c_old = cost[active]
        # Predicted decrease of the linearised model for the (clipped) step.
        Js = np.einsum("bpi,bi->bp", Jw, step)
        pred = -(np.einsum("bi,bi->b", g, step) + 0.5 * (Js * Js).sum(1))
        actual = c_old - cn
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(pred > 0, actual / pred, -1.0)
        good = np.isfinite(cn) & (actual > 0) & (rho > 0)
        ib = active[good]
        p[ib] = pn[good]
        cost[ib] = cn[good]
        lam[ib] = la[good] * np.maximum(1.0 / 3.0, 1.0 - (2.0 * rho[good] - 1.0) ** 3)
        nu[ib] = 2.0
        iw = active[~good]
        lam[iw] = la[~good] * nu[iw]
        nu[iw] = nu[iw] * 2.0
        denom = np.maximum(c_old, 1e-300)
        small_f = (np.abs(actual) / denom < 1e-13) & (np.abs(pred) / denom < 1e-13)
        small_x = (np.abs(step) <= 1e-11 * (np.abs(pa) + 1e-300)).all(1)
        done = small_f | (good & small_x) | (c_old <= 1e-300) | (lam[active] > 1e15)
        active = active[~done]
    return p, cost, lam


def fit_batch(N: np.ndarray, X: np.ndarray, W: np.ndarray | None = None,
              amdahl: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Fit many datasets at once.

    N, X: (B, P) arrays, padded; W: (B, P) weights, 1 for a point and 0 for padding.
    Returns parameters (B, 3) as (α, β, γ) and RSS (B,).

    Several starting points race for a few iterations; the best one per dataset then runs to
    convergence.
    """
    N = np.atleast_2d(np.asarray(N, dtype=float))
    X = np.atleast_2d(np.asarray(X, dtype=float))
    W = np.ones_like(N) if W is None else np.atleast_2d(np.asarray(W, dtype=float))
    N = np.where(W > 0, N, 1.0)
    X = np.where(W > 0, X, 0.0)
    # Fitted on a unit scale (throughput / its largest value) and scaled back: data at 1e-308
    # or 1e308 would otherwise meet the optimiser's absolute tolerances and overflows.
    scale = np.max(np.where(W > 0, np.abs(X), 0.0), axis=1, keepdims=True)
    scale = np.where((scale > 0) & np.isfinite(scale), scale, 1.0)
    X = X / scale
    free = np.array([True, not amdahl, True])
    starts = _starts(N, X, W)
    if amdahl:
        starts = [_project_gamma(s * np.array([1.0, 0.0, 1.0]), N, X, W) for s in starts]
    B = N.shape[0]
    K = len(starts)
    p, cost, lam = _lm(np.tile(N, (K, 1)), np.tile(X, (K, 1)), np.tile(W, (K, 1)),
                       np.concatenate(starts), free, max_iter=6)
    cost = cost.reshape(K, B)
    best = np.argmin(np.where(np.isfinite(cost), cost, np.inf), axis=0)
    sel = best * B + np.arange(B)
    p, cost, _ = _lm(N, X, W, p[sel], free, max_iter=200, lam0=lam[sel])
    p = p.copy()
    p[:, 2] *= scale[:, 0]
    with np.errstate(over="ignore", invalid="ignore"):     # past the floats: inf, shown as unknown
        rss = np.where(cost == 0, 0.0, 2.0 * cost * scale[:, 0] ** 2)
    return p, rss


# ============================================================================ fit object
@dataclass
class USLFit:
    """A fitted USL (or Amdahl, with `amdahl=True`) model and its statistics."""

    alpha: float
    beta: float
    gamma: float
    N: np.ndarray
    X: np.ndarray
    rss: float
    cov: np.ndarray            # 3x3 covariance of (α, β, γ); NaN where it cannot be estimated
    amdahl: bool = False
    method: str = "usl"
    warnings: list[str] = field(default_factory=list)
    # The unit the statistics are computed in: X / scale (see the module doc); rss and cov above
    # are in X's own unit, and may be inf or 0 where that unit is near the floats' limits.
    scale: float = 1.0
    rss_unit: float = math.nan
    cov_unit: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.cov_unit is None:
            self.cov_unit = self.cov
        if math.isnan(self.rss_unit):
            self.rss_unit = self.rss

    @property
    def n(self) -> int:
        return len(self.N)

    @property
    def n_params(self) -> int:
        return 2 if self.amdahl else 3

    @property
    def dof(self) -> int:
        return self.n - self.n_params

    @property
    def sigma_unit(self) -> float:
        """Residual standard error in the fit's unit (X / scale)."""
        return math.sqrt(self.rss_unit / self.dof) if self.dof > 0 else math.nan

    @property
    def sigma(self) -> float:
        """Residual standard error."""
        return self.sigma_unit * self.scale

    @property
    def params(self) -> np.ndarray:
        return np.array([self.alpha, self.beta, self.gamma])

    @property
    def se(self) -> np.ndarray:
        assert self.cov_unit is not None
        with np.errstate(invalid="ignore"):
            return np.sqrt(np.diag(self.cov_unit)) * np.array([1.0, 1.0, self.scale])

    @property
    def r2(self) -> float:
        xu = self.X / self.scale
        tss = float(((xu - xu.mean()) ** 2).sum())
        return 1.0 - self.rss_unit / tss if tss > 0 else math.nan

    def fitted(self, n: np.ndarray | None = None) -> np.ndarray:
        return usl(self.N if n is None else n, self.alpha, self.beta, self.gamma)

    @property
    def residuals(self) -> np.ndarray:
        return self.X - self.fitted()

    def t_quantile(self, level: float) -> float:
        if self.dof <= 0:
            return math.nan
        return t_ppf(0.5 + level / 2.0, self.dof)

    def confint(self, level: float = 0.95) -> np.ndarray:
        """(3, 2) Wald intervals for α, β, γ, clipped to the parameter bounds."""
        t = self.t_quantile(level)
        lo = np.maximum(self.params - t * self.se, 0.0)      # γ's solver bound 1e-300 is no bound of γ
        hi = np.minimum(self.params + t * self.se, UPPER)
        return np.column_stack([lo, hi])

    # ---- derived quantities
    @property
    def n_max(self) -> float:
        """Load at which throughput peaks: √((1 − α)/β); infinite when β = 0."""
        if self.beta <= 0:
            return math.inf
        return math.sqrt(max(1.0 - self.alpha, 0.0) / self.beta)

    @property
    def x_max(self) -> float:
        """Throughput at the peak (γ/α when β = 0: the ceiling, approached but not reached)."""
        if math.isinf(self.n_max):
            return self.x_roof
        return float(self.fitted(np.array([self.n_max]))[0])

    @property
    def n_opt(self) -> float:
        """1/α: the load where the linear rise meets the Amdahl ceiling γ/α."""
        return 1.0 / self.alpha if self.alpha > 0 else math.inf

    @property
    def x_roof(self) -> float:
        """γ/α: the throughput ceiling under contention alone."""
        return self.gamma / self.alpha if self.alpha > 0 else math.inf

    def n_max_se(self) -> float:
        """Delta-method standard error of N_max."""
        assert self.cov_unit is not None
        cov = self.cov_unit[:2, :2]                 # α and β have no unit
        if self.beta <= 0 or self.alpha >= 1 or not np.all(np.isfinite(cov)):
            return math.nan
        nm = self.n_max
        grad = np.array([-1.0 / (2.0 * self.beta * nm), -nm / (2.0 * self.beta)])
        return float(math.sqrt(max(grad @ cov @ grad, 0.0)))

    def efficiency(self, n: np.ndarray | None = None, x: np.ndarray | None = None) -> np.ndarray:
        """X / (γ N): 1 is perfectly linear scaling."""
        n = self.N if n is None else np.asarray(n, dtype=float)
        x = self.X if x is None else np.asarray(x, dtype=float)
        return x / self.gamma / n                   # γ N may overflow where X does not

    def capacity(self, n: np.ndarray | None = None, x: np.ndarray | None = None) -> np.ndarray:
        """Relative capacity C(N) = X(N) / γ: the speed-up over one unit without overhead."""
        x = self.X if x is None else np.asarray(x, dtype=float)
        return x / self.gamma

    # ---- bands
    def _grad(self, n: np.ndarray) -> np.ndarray:
        """The model's gradient in the fit's unit (γ / scale)."""
        p = np.array([[self.alpha, self.beta, self.gamma / self.scale]])
        _, J = _model_and_jac(p, np.atleast_2d(n))
        return J[0]

    def band(self, n: Sequence[float] | np.ndarray, level: float = 0.95,
             kind: str = "prediction") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fitted value and (low, high) band at `n`.

        kind "confidence": where the mean curve lies; "prediction": where a new measurement
        at n is expected to fall (adds the residual variance).
        """
        n = np.asarray(n, dtype=float)
        y = self.fitted(n)
        G = self._grad(n)
        assert self.cov_unit is not None
        cov = np.where(np.isfinite(self.cov_unit), self.cov_unit, 0.0)
        var = np.einsum("pi,ij,pj->p", G, cov, G)
        if kind == "prediction":
            var = var + (self.sigma_unit ** 2 if self.dof > 0 else math.nan)
        t = self.t_quantile(level)
        half = t * np.sqrt(np.maximum(var, 0.0)) * self.scale
        return y, np.maximum(y - half, 0.0), y + half

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        y, lo, hi = self.band(cores, level, kind="prediction")
        warns = list(self.warnings)
        if self.dof <= 0:
            warns.append("no degrees of freedom left: no prediction band")
            lo = hi = None
        return Prediction(cores=cores, value=y, metric="throughput", low=lo, high=hi, level=level,
                          method=self.method, model="Amdahl" if self.amdahl else "USL",
                          params={"alpha": self.alpha, "beta": self.beta, "gamma": self.gamma},
                          warnings=warns)


def fit(N: Sequence[float] | np.ndarray, X: Sequence[float] | np.ndarray, amdahl: bool = False) -> USLFit:
    """Fit the USL (or Amdahl's law) to load N and throughput X."""
    N = np.asarray(N, dtype=float)
    X = np.asarray(X, dtype=float)
    if N.shape != X.shape or N.ndim != 1:
        raise ValueError("N and X must be 1-D arrays of the same length")
    if len(N) < 2:
        raise ValueError("at least 2 points are needed")
    p, rss = fit_batch(N[None, :], X[None, :], amdahl=amdahl)
    a, b, g = (float(v) for v in p[0])
    # the statistics in the unit fit_batch fitted in (X / its largest value): no overflow or
    # underflow of the RSS, the Jacobian or the covariance at the floats' ends
    top = float(np.max(np.abs(X)))
    scale = top if top > 0 and math.isfinite(top) else 1.0
    pu = np.array([[a, b, g / scale]])
    rss_u = float(np.sum((X / scale - usl(N, a, b, g / scale)) ** 2))
    _, J = _model_and_jac(pu, N[None, :])
    J = J[0]
    k = 2 if amdahl else 3
    dof = len(N) - k
    cov = np.full((3, 3), np.nan)
    if dof > 0:
        s2 = rss_u / dof
        cols = [0, 2] if amdahl else [0, 1, 2]
        JtJ = J[:, cols].T @ J[:, cols]
        try:
            inv = np.linalg.inv(JtJ)
        except np.linalg.LinAlgError:
            inv = np.linalg.pinv(JtJ)
        sub = s2 * inv
        for i, ci in enumerate(cols):
            for j, cj in enumerate(cols):
                cov[ci, cj] = sub[i, j]
        if amdahl:
            cov[1, :] = cov[:, 1] = 0.0
    units = np.array([1.0, 1.0, scale])
    with np.errstate(over="ignore", invalid="ignore"):
        cov_x = cov * units[:, None] * units[None, :]
    return USLFit(alpha=a, beta=0.0 if amdahl else b, gamma=g, N=N, X=X, rss=float(rss[0]), cov=cov_x,
                  amdahl=amdahl, method="amdahl" if amdahl else "usl", scale=scale, rss_unit=rss_u,
                  cov_unit=cov)


def through_two(n1: float, x1: float, n2: float, x2: float, share: float) -> tuple[float, float, float, float] | None:
    """The USL through two points (n1 < n2) when a prior fixes the one number they cannot: the
    share `share` of the overhead at n2 that is coherency, β n2 (n2 − 1) / (α (n2 − 1) + β n2 (n2 − 1)).
    Returns (α, β, γ, the share used). Throughput at or above linear between the points gives
    α = β = 0 through the larger point. Where the points fall too fast for that share (a
    decline only coherency can make), the share is raised to 1; where even pure coherency cannot
    fall that fast, None."""
    if not (0 < n1 < n2 and x1 > 0 and x2 > 0 and 0.0 <= share <= 1.0):
        raise ValueError("through_two needs 0 < n1 < n2, positive throughputs and a share in [0, 1]")
    r, s = x2 / x1, n2 / n1
    if r >= s:
        return 0.0, 0.0, x2 / n2, share
    ua = (n1 - 1.0) / (n2 - 1.0)
    ub = n1 * (n1 - 1.0) / (n2 * (n2 - 1.0))
    for q in (share, 1.0):
        den = r - s * ((1.0 - q) * ua + q * ub)
        if den > 0:
            T = (s - r) / den
            a = (1.0 - q) * T / (n2 - 1.0)
            b = q * T / (n2 * (n2 - 1.0))
            g = x2 * (1.0 + a * (n2 - 1.0) + b * n2 * (n2 - 1.0)) / n2
            return a, b, g, q
    return None


# ============================================================================ analysis
@dataclass
class PointCheck:
    cores: float
    throughput: float          # median of the repetitions
    low: float
    high: float
    count: int
    fitted: float
    residual: float
    efficiency: float
    capacity: float
    contention: float = 0.0     # share of the USL denominator due to α at this N
    coherency: float = 0.0      # share due to β
    flags: list[str] = field(default_factory=list)


@dataclass
class NestedTest:
    """Is β needed? USL against Amdahl's law (β = 0) by an F test and by AICc."""

    amdahl: USLFit
    f_stat: float
    p_value: float
    aicc_usl: float
    aicc_amdahl: float
    beta_needed: bool
    summary: str


@dataclass
class Analysis:
    fit: USLFit
    points: list[PointCheck]
    nested: NestedTest
    verdict: str
    verdict_kind: str           # linear | contention | coherency
    warnings: list[str]
    notes: list[str]
    source: str                 # how throughput was obtained, e.g. "throughput" or "1/time_s"
    level: float

    def to_dict(self, predict_at: Sequence[float] | None = None) -> dict[str, Any]:
        f = self.fit
        se = f.se
        ci = f.confint(self.level)

        def num(v: float) -> float | None:
            return None if v is None or not math.isfinite(v) else float(v)

        out: dict[str, Any] = {
            "model": "usl",
            "source": self.source,
            "alpha": f.alpha, "beta": f.beta, "gamma": f.gamma,
            "alpha_se": num(se[0]), "beta_se": num(se[1]), "gamma_se": num(se[2]),
            "level": self.level,
            "alpha_ci": [num(ci[0, 0]), num(ci[0, 1])],
            "beta_ci": [num(ci[1, 0]), num(ci[1, 1])],
            "gamma_ci": [num(ci[2, 0]), num(ci[2, 1])],
            "n_max": num(f.n_max), "n_max_se": num(f.n_max_se()),
            "x_max": num(f.x_max), "n_opt": num(f.n_opt), "x_roof": num(f.x_roof),
            "r2": num(f.r2), "rss": num(f.rss), "sigma": num(f.sigma), "dof": f.dof, "n": f.n,
            "verdict": self.verdict, "verdict_kind": self.verdict_kind,
            "amdahl": {
                "alpha": self.nested.amdahl.alpha, "gamma": self.nested.amdahl.gamma,
                "rss": num(self.nested.amdahl.rss), "x_roof": num(self.nested.amdahl.x_roof),
                "f_stat": num(self.nested.f_stat), "p_value": num(self.nested.p_value),
                "aicc_usl": num(self.nested.aicc_usl), "aicc_amdahl": num(self.nested.aicc_amdahl),
                "beta_needed": self.nested.beta_needed, "summary": self.nested.summary,
            },
            "warnings": list(self.warnings),
            "notes": list(self.notes),
            "points": [
                {"cores": _intish(p.cores), "throughput": p.throughput, "fitted": p.fitted,
                 "residual": p.residual, "efficiency": p.efficiency, "capacity": p.capacity,
                 "contention": p.contention, "coherency": p.coherency,
                 "repetitions": p.count, "low": p.low, "high": p.high, "flags": list(p.flags)}
                for p in self.points
            ],
        }
        if predict_at is not None and len(predict_at):
            n = np.asarray(predict_at, dtype=float)
            y, lo, hi = f.band(n, self.level, "prediction")
            out["predictions"] = [
                {"cores": _intish(c), "throughput": float(v), "low": num(float(l)), "high": num(float(h)),
                 "efficiency": float(v / f.gamma / c)}
                for c, v, l, h in zip(n, y, lo, hi)]
        return out


def _intish(v: float) -> float | int:
    return int(v) if float(v).is_integer() else float(v)


def overheads(f: USLFit, n: float) -> dict[str, float]:
    """How the time per unit of work splits at load n (R usl's `overhead`): the ideal share
    1/D plus the contention share α(n−1)/D and the coherency share βn(n−1)/D, D being the
    USL denominator; the three add up to 1."""
    cont = f.alpha * (n - 1.0)
    coh = f.beta * n * (n - 1.0)
    d = 1.0 + cont + coh
    return {"contention": cont / d, "coherency": coh / d}


def _aicc(rss_unit: float, n: int, k: int, scale: float = 1.0) -> float:
    # Gaussian likelihood with σ estimated: k parameters plus σ; RSS = rss_unit · scale².
    kk = k + 1
    if rss_unit <= 0 or n - kk - 1 <= 0:
        return math.nan
    return n * (math.log(rss_unit / n) + 2 * math.log(scale)) + 2 * kk + 2 * kk * (kk + 1) / (n - kk - 1)


def nested_test(full: USLFit) -> NestedTest:
    am = fit(full.N, full.X, amdahl=True)           # the same data: the same unit (scale)
    n = full.n
    dof = n - 3
    if dof > 0 and full.rss_unit > 0:
        f_stat = max(am.rss_unit - full.rss_unit, 0.0) / (full.rss_unit / dof)
        p = f_sf(f_stat, 1, dof)
    elif dof > 0:
        f_stat, p = (math.inf, 0.0) if am.rss_unit > 0 else (0.0, 1.0)
    else:
        f_stat, p = math.nan, math.nan
    a_u, a_a = _aicc(full.rss_unit, n, 3, full.scale), _aicc(am.rss_unit, n, 2, am.scale)
    if math.isfinite(p):
        needed = p < 0.05
        summary = (f"β is needed: the USL fits significantly better than Amdahl's law "
                   f"(F = {f_stat:.3g}, p = {p:.3g})" if needed else
                   f"β is not needed: Amdahl's law (β = 0) fits as well "
                   f"(F = {f_stat:.3g}, p = {p:.3g})")
    else:
        needed = full.beta > 0
        summary = "too few points to test whether β is needed (an F test needs at least 4)"
    if math.isfinite(p) and math.isfinite(a_u) and math.isfinite(a_a) and needed != (a_u < a_a):
        # The two criteria disagree: say which one the verdict follows, and why.
        if needed:
            summary += (f"; AICc prefers Amdahl's law ({a_a:.4g} against {a_u:.4g}) because, on {n} points, "
                        f"its small-sample penalty for the extra parameter outweighs the better fit: the verdict "
                        f"follows the F test, the methodology's test of the nested model, so β is kept"
                        + (", on modest evidence (p above 0.01)" if p >= 0.01 else ""))
        else:
            summary += (f"; AICc prefers the USL ({a_u:.4g} against {a_a:.4g}), but the F test does not find β "
                        f"significant at 5%: the verdict follows the F test, so β = 0 is not ruled out")
    return NestedTest(am, f_stat, p, a_u, a_a, needed, summary)


def _verdict(f: USLFit, nested: NestedTest, n_top: float) -> tuple[str, str]:
    cont = f.alpha * (n_top - 1.0)
    coh = f.beta * n_top * (n_top - 1.0)
    if cont + coh < 0.05:
        return ("linear", f"near-linear: at N = {n_top:g} the overheads cost under 5% "
                          f"(contention {cont:.3g}, coherency {coh:.3g} in the USL denominator)")
    cross = f.alpha / f.beta if f.beta > 0 else math.inf
    if f.beta > 0 and nested.beta_needed and coh > 0:
        peak = f"throughput peak at N ≈ {f.n_max:.3g} (X ≈ {f.x_max:.4g}) and fall beyond (retrograde)"
        if coh >= cont:
            return ("coherency", f"coherency-limited: at N = {n_top:g} crosstalk (β) outweighs "
                                 f"contention (α), and makes {peak}")
        return ("coherency", f"coherency-limited: contention (α) is the larger overhead up to N ≈ {cross:.3g}, "
                             f"but coherency (β) makes {peak}")
    return ("contention", f"contention-limited: serialisation (α = {f.alpha:.3g}) caps throughput at "
                          f"γ/α ≈ {f.x_roof:.4g}; half of it is reached by N ≈ {f.n_opt:.3g}")


def analyze(cores: Sequence[float] | np.ndarray, throughput: Sequence[float] | np.ndarray,
            level: float = 0.95, source: str = "throughput") -> Analysis:
    """Fit, compare with Amdahl, derive, and validate as the USL methodology asks."""
    N = np.asarray(cores, dtype=float)
    X = np.asarray(throughput, dtype=float)
    if not (0 < level < 1):
        raise ValueError("level must be between 0 and 1")
    distinct = np.unique(N)
    if len(distinct) < 3:
        raise UserError(f"the USL needs measurements at 3 or more distinct core counts (got {len(distinct)})")
    if np.any(X <= 0):
        raise UserError("throughput must be > 0 at every point to fit the USL")
    f = fit(N, X)
    nested = nested_test(f)
    warnings: list[str] = []
    notes: list[str] = []

    # One point per distinct N (median of repetitions) for the checks and the table.
    points: list[PointCheck] = []
    for c in distinct:
        v = X[N == c]
        med = float(np.median(v))
        fv = float(f.fitted(np.array([c]))[0])
        points.append(PointCheck(cores=float(c), throughput=med, low=float(v.min()), high=float(v.max()),
                                 count=len(v), fitted=fv, residual=med - fv,
                                 efficiency=float(med / f.gamma / c), capacity=float(med / f.gamma),
                                 **overheads(f, float(c))))

    if len(distinct) < 6:
        warnings.append(f"only {len(distinct)} distinct core counts: the USL methodology asks for at least 6 "
                        "to trust α and β")
    if 1.0 not in distinct:
        notes.append(f"no measurement at N = 1: γ = {f.gamma:.4g} is extrapolated from the fit")

    # Super-linear points: efficiency above 1 against a measured X(1), else against γ. (Against
    # γ where X(1) was measured, half of all fits flagged N = 1 itself, or a point that is below
    # linear in the measurements, whenever the fitted γ fell a little under the measured X(1).)
    x1 = next((p.throughput for p in points if p.cores == 1.0), None)
    for p in points:
        e = p.throughput / (x1 * p.cores) if x1 else p.efficiency
        if (p.cores > 1 or not x1) and e > 1.0 + 1e-9:
            p.flags.append("super-linear")
            warnings.append(f"super-linear at N = {p.cores:g}: efficiency {e:.3f} > 1 "
                            "(usually a measurement fault: warm-up, caching, or a bad N = 1 run)")

    # Out-of-pattern points: a dip or spike against the trend where the fitted curve is monotone.
    # Material only: off the line between its neighbours by more than 2% and by more than the
    # residual standard error (a plateau's small wiggles are not faults). Of adjacent candidates
    # only the worst is flagged: one bad point makes its neighbours look odd too.
    noise = f.sigma if math.isfinite(f.sigma) else 0.0
    cand: dict[int, float] = {}
    for i in range(1, len(points) - 1):
        a, b, c = points[i - 1], points[i], points[i + 1]
        if (b.throughput - a.throughput) * (c.throughput - b.throughput) >= 0:
            continue
        if a.cores < f.n_max < c.cores:
            continue
        line = a.throughput + (c.throughput - a.throughput) * (b.cores - a.cores) / (c.cores - a.cores)
        off = abs(b.throughput - line)
        if off > 0.02 * b.throughput and off > noise:
            cand[i] = off
    for i, off in cand.items():
        if cand.get(i - 1, -1.0) > off or cand.get(i + 1, -1.0) > off:
            continue
        a, b, c = points[i - 1], points[i], points[i + 1]
        kind = "dip" if b.throughput < a.throughput else "spike"
        b.flags.append("out-of-pattern")
        warnings.append(f"non-monotone at N = {b.cores:g}: a {kind} ({b.throughput:.4g}) between "
                        f"N = {a.cores:g} ({a.throughput:.4g}) and N = {c.cores:g} ({c.throughput:.4g}) "
                        "where the fitted curve is monotone; re-measure it")
    # Large internally studentised residuals (raw rows).
    if f.dof >= 2 and f.rss_unit > 0:
        _, J = _model_and_jac(np.array([[f.alpha, f.beta, f.gamma / f.scale]]), N[None, :])
        J = J[0]
        try:
            # the hat matrix's diagonal only, row by row: J P J^T would be n x n (3.2 GB at 20,000 rows)
            P = np.linalg.pinv(J.T @ J)
            h = np.clip(np.einsum("ij,jk,ik->i", J, P, J), 0.0, 0.9999)
        except np.linalg.LinAlgError:
            h = np.zeros(len(N))
        stud = (X / f.scale - f.fitted() / f.scale) / (f.sigma_unit * np.sqrt(1.0 - h))
        for c in distinct:
            sel = N == c
            worst = float(np.max(np.abs(stud[sel])))
            if worst > 2.5:
                p = next(p for p in points if p.cores == c)
                if "out-of-pattern" not in p.flags:
                    p.flags.append("out-of-pattern")
                    warnings.append(f"out of pattern at N = {c:g}: studentised residual {worst:.2f} "
                                    "(more than 2.5 standard errors off the fitted curve)")
    # Noisy repetitions.
    for p in points:
        if p.count > 1 and p.throughput > 0 and (p.high - p.low) / p.throughput > 0.2:
            warnings.append(f"noisy at N = {p.cores:g}: {p.count} repetitions spread "
                            f"{100 * (p.high - p.low) / p.throughput:.0f}% of their median")
    r2 = f.r2
    if math.isfinite(r2) and r2 < 0.9:
        warnings.append(f"poor fit: R² = {r2:.3f}; the USL may not describe this system, or the data are noisy")
    if f.alpha >= 1.0 - 1e-9:
        warnings.append("α reached its bound 1: throughput does not grow with N at all")
    if f.beta <= 0:
        notes.append("β is at its bound 0: no coherency delay detected; the USL reduces to Amdahl's law")
    if f.dof <= 0:
        warnings.append("as many parameters as points: no standard errors or bands")
    n_top = float(distinct.max())
    if math.isfinite(f.n_max) and f.n_max > 4 * n_top:
        notes.append(f"N_max ≈ {f.n_max:.3g} lies far beyond the largest measured N = {n_top:g}; "
                     "treat it as a rough extrapolation")
    kind, verdict = _verdict(f, nested, n_top)
    return Analysis(fit=f, points=points, nested=nested, verdict=verdict, verdict_kind=kind,
                    warnings=warnings, notes=notes, source=source, level=level)


def analyze_dataset(ds: Any, metric: str | None = None, level: float = 0.95) -> Analysis:
    """`analyze` on a Dataset's throughput (its `throughput` column, or 1/`time_s`)."""
    N, X, source = ds.throughput(metric)
    return analyze(N, X, level=level, source=source)


def fit_dataset(ds: Any, metric: str | None = None) -> USLFit:
    """The raw USL fit of a Dataset's throughput (the predicting method, in the input metric and
    with the ratio options, is `laws.fit_usl`)."""
    N, X, _ = ds.throughput(metric)
    return fit(N, X)
