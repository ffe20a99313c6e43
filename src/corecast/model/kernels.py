"""Function kernels for extrapolating a series over core counts, their fitting and their
realism checks.

The six kernels of ESTIMA's Table 1 (Chatzopoulos, Dragojević, Guerraoui, PPoPP 2016):

    Rat22    (a0 + a1 n + a2 n²) / (1 + b1 n + b2 n²)
    Rat23    (a0 + a1 n + a2 n²) / (1 + b1 n + b2 n² + b3 n³)
    Rat33    (a0 + a1 n + a2 n² + a3 n³) / (1 + b1 n + b2 n² + b3 n³)
    CubicLn  a + b ln n + c ln² n + d ln³ n
    ExpRat   (a + b n) / e^(c + d n)
    Poly25   a + b n + c n² + d n^2.5

and more that serve scaling data: straight line and quadratic, a power law a + b n^p,
Amdahl's law and the USL in their time forms (a + b/n and a/n + b + c n, coefficients ≥ 0),
the low-order rationals Rat11 and Rat12 (Rat12 is the USL's throughput form), and a PMNF
kernel (Extra-P's performance model normal form with one term, c0 + c1 n^i log2^j n, the
exponents (i, j) chosen from a fixed set by least squares).

Fitting is robust and cheap, because ESTIMA fits hundreds of (kernel, prefix) pairs per
prediction:

- linear kernels: least squares on an equilibrated design matrix; non-negative least squares
  where the kernel's coefficients are bounded (Amdahl, USL); Tikhonov regularisation when a
  kernel has more parameters than points (the minimum-norm member of the family that passes
  through them);
- rationals: the Levy linearisation y·D(n) = N(n), refined by Sanathanan–Koerner iterations
  (each reweights the linear problem by 1/D of the previous one, converging to the ordinary
  least-squares fit), regularised the same way when under-determined;
- kernels with one nonlinear parameter (ExpRat's rate d, the power law's exponent p): variable
  projection, a multi-start grid over the nonlinear parameter solved in one batch, then
  parabolic refinement of the best grid point within its bounds.

A fit is *realistic* when, everywhere between 1 core and the largest target, its values are
finite, not negative (or positive, for times), and a rational's denominator has neither a root
(a pole) nor a sign change. ESTIMA rejects the fits that are not.

Size: a little over 600 lines, kept as one module on purpose: the kernel families, their
fitting methods and the realism check are one subject (a kernel is defined by how it is
fitted and checked), and `select` and every extrapolating method use them as one unit.
"""
from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
from scipy.optimize import nnls

#: Tikhonov weight (on the equilibrated problem) for kernels with more parameters than points.
RIDGE_UNDERDETERMINED = 1e-6
#: A tiny weight always present: keeps nearly collinear columns from blowing up.
RIDGE_ALWAYS = 1e-12


# ============================================================================ the fitted object
@dataclass
class KernelFit:
    """One kernel fitted to some points."""

    kernel: "Kernel"
    theta: np.ndarray                   # parameters, in the kernel's own order
    n: np.ndarray                       # core counts it was fitted on
    y: np.ndarray                       # values it was fitted on
    rss: float
    regularised: bool = False
    extra: dict = field(default_factory=dict)   # e.g. the PMNF exponents

    def __call__(self, n: Sequence[float] | np.ndarray | float) -> np.ndarray:
        return self.kernel.evaluate(self.theta, np.asarray(n, dtype=float), self.extra)

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def n_points(self) -> int:
        return len(self.n)

    @property
    def params(self) -> dict[str, float]:
        out = {k: float(v) for k, v in zip(self.kernel.param_names, self.theta)}
        out.update({k: float(v) for k, v in self.extra.items()})
        return out

    def formula(self) -> str:
        return self.kernel.describe(self.theta, self.extra)

    def denominator(self, n: np.ndarray) -> np.ndarray | None:
        return self.kernel.denominator(self.theta, np.asarray(n, dtype=float))

    def to_dict(self) -> dict:
        return {"kernel": self.name, "formula": self.formula(), "params": self.params,
                "points": self.n_points, "fitted_up_to_cores": float(np.max(self.n)),
                "regularised": self.regularised}


# ============================================================================ kernels
class Kernel(ABC):
    """A family of functions of the core count n. Each family says how to evaluate it and how
    to fit it (`evaluate`, `fit`)."""

    name: str = ""
    expr: str = ""
    param_names: tuple[str, ...] = ()
    nonneg: bool = False        # coefficients bounded below by 0

    @property
    def n_params(self) -> int:
        """Free parameters (what a fit needs points for)."""
        return len(self.param_names)

    @abstractmethod
    def evaluate(self, theta: np.ndarray, n: np.ndarray, extra: dict | None = None) -> np.ndarray:
        """The function with parameters `theta` at core counts `n`."""

    def denominator(self, theta: np.ndarray, n: np.ndarray) -> np.ndarray | None:
        return None

    @abstractmethod
    def fit(self, n: np.ndarray, y: np.ndarray) -> KernelFit | None:
        """The least-squares fit to (n, y), or None when it cannot be made."""

    def describe(self, theta: np.ndarray, extra: dict | None = None) -> str:
        vals = ", ".join(f"{k}={v:.4g}" for k, v in zip(self.param_names, theta))
        return f"{self.expr} with {vals}"

    def __repr__(self) -> str:
        return f"<kernel {self.name}: {self.expr}>"


def _solve_linear(A: np.ndarray, b: np.ndarray, ridge: float, nonneg: bool = False) -> np.ndarray | None:
    """Least squares A x ≈ b on equilibrated columns, with Tikhonov weight `ridge`."""
    norms = np.sqrt(np.einsum("ij,ij->j", A, A))
    norms[norms == 0] = 1.0
    As = A / norms
    k = As.shape[1]
    if ridge > RIDGE_ALWAYS:
        As = np.vstack([As, math.sqrt(ridge) * np.eye(k)])
        b = np.concatenate([b, np.zeros(k)])
    if not (np.isfinite(As).all() and np.isfinite(b).all()):
        return None
    if nonneg:
        try:
            xs, _ = nnls(As, b, maxiter=50 * k)
        except RuntimeError:
            return None
    else:
        try:
            xs = np.linalg.lstsq(As, b, rcond=1e-13)[0]
        except np.linalg.LinAlgError:
            return None
    return xs / norms


def _ridge_for(k: int, m: int) -> tuple[float, bool]:
    if k > m:
        return RIDGE_UNDERDETERMINED, True
    return RIDGE_ALWAYS, False


class LinearKernel(Kernel):
    """y = Σ θ_k φ_k(n): linear in its parameters."""

    def __init__(self, name: str, expr: str, param_names: Sequence[str],
                 basis: Callable[[np.ndarray], np.ndarray], nonneg: bool = False,
                 terms: Sequence[str] | None = None):
        self.name, self.expr, self.param_names = name, expr, tuple(param_names)
        self._basis = basis
        self.nonneg = nonneg
        self._terms = tuple(terms) if terms else None

    def basis(self, n: np.ndarray) -> np.ndarray:
        return self._basis(n)

    def evaluate(self, theta: np.ndarray, n: np.ndarray, extra: dict | None = None) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        with np.errstate(all="ignore"):
            v = self._basis(np.atleast_1d(n)) @ theta
        return v if n.ndim else v[0]

    def fit(self, n: np.ndarray, y: np.ndarray) -> KernelFit | None:
        ridge, reg = _ridge_for(self.n_params, len(n))
        A = self._basis(n)
        theta = _solve_linear(A, y, ridge, self.nonneg)
        if theta is None:
            return None
        r = A @ theta - y
        return KernelFit(self, theta, n, y, float(r @ r), regularised=reg)

    def describe(self, theta: np.ndarray, extra: dict | None = None) -> str:
        if not self._terms:
            return super().describe(theta, extra)
        parts = []
        for c, t in zip(theta, self._terms):
            parts.append(f"{c:.4g}" if t == "" else f"{c:.4g}·{t}")
        return " + ".join(parts).replace("+ -", "− ")


class RationalKernel(Kernel):
    """(a0 + a1 n + ... + ap n^p) / (1 + b1 n + ... + bq n^q)."""

    def __init__(self, p: int, q: int, name: str | None = None):
        self.p, self.q = p, q
        self.name = name or f"Rat{p}{q}"
        num = " + ".join(["a0"] + [f"a{k} n{_sup(k)}" for k in range(1, p + 1)])
        den = " + ".join(["1"] + [f"b{k} n{_sup(k)}" for k in range(1, q + 1)])
        self.expr = f"({num}) / ({den})"
        self.param_names = tuple([f"a{k}" for k in range(p + 1)] + [f"b{k}" for k in range(1, q + 1)])

    def _split(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        a = theta[: self.p + 1]
        b = np.concatenate([[1.0], theta[self.p + 1:]])
        return a, b

    def denominator(self, theta: np.ndarray, n: np.ndarray) -> np.ndarray:
        _, b = self._split(theta)
        return np.polynomial.polynomial.polyval(n, b)

    def evaluate(self, theta: np.ndarray, n: np.ndarray, extra: dict | None = None) -> np.ndarray:
        a, b = self._split(theta)
        with np.errstate(all="ignore"):
            return np.polynomial.polynomial.polyval(n, a) / np.polynomial.polynomial.polyval(n, b)

    def poles(self, theta: np.ndarray) -> np.ndarray:
        """Real roots of the denominator."""
        _, b = self._split(theta)
        b = np.trim_zeros(b, "b")
        if len(b) <= 1:
            return np.empty(0)
        r = np.polynomial.polynomial.polyroots(b)
        return np.real(r[np.abs(np.imag(r)) <= 1e-9 * np.maximum(1.0, np.abs(r))])

    def fit(self, n: np.ndarray, y: np.ndarray, iterations: int = 4) -> KernelFit | None:
        k = self.n_params
        ridge, reg = _ridge_for(k, len(n))
        P = np.vander(n, self.p + 1, increasing=True)
        Q = np.vander(n, self.q + 1, increasing=True)[:, 1:]
        w = np.ones_like(y)
        theta = None
        best = None
        for _ in range(iterations):
            A = np.hstack([P, -(y[:, None] * Q)]) * w[:, None]
            t = _solve_linear(A, y * w, ridge)
            if t is None:
                break
            D = 1.0 + Q @ t[self.p + 1:]
            if not (np.abs(D) > 1e-300).all():
                break
            f = (P @ t[: self.p + 1]) / D
            if not np.isfinite(f).all():
                break
            r = f - y
            rss = float(r @ r)
            if best is None or rss < best[1]:
                best = (t, rss)
            theta = t
            # Sanathanan–Koerner: divide out the denominator of the previous iterate.
            absD = np.abs(D)
            if np.any(absD < 1e-12):
                break
            w_new = 1.0 / absD
            w_new = w_new / w_new.max()
            if float(np.max(np.abs(w_new - w))) < 1e-6:
                break
            w = w_new
        if best is None or theta is None:
            return None
        return KernelFit(self, best[0], n, y, best[1], regularised=reg)


class VarProKernel(Kernel):
    """Linear in all parameters but one (θ), which is searched on a bounded grid."""

    def __init__(self, name: str, expr: str, param_names: Sequence[str],
                 basis: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 grid: Callable[[np.ndarray], np.ndarray],
                 assemble: Callable[[np.ndarray, float], np.ndarray],
                 evaluate: Callable[[np.ndarray, np.ndarray], np.ndarray],
                 free_params: int):
        self.name, self.expr, self.param_names = name, expr, tuple(param_names)
        self._basis = basis            # (n (P,), thetas (G,)) -> (G, P, L)
        self._grid = grid              # n -> thetas (G,), sorted, within bounds
        self._assemble = assemble      # (linear coefs (L,), θ) -> full parameter vector
        self._evaluate = evaluate      # (full params, n) -> values
        self._free = free_params

    @property
    def n_params(self) -> int:
        return self._free

    def evaluate(self, theta: np.ndarray, n: np.ndarray, extra: dict | None = None) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self._evaluate(theta, np.asarray(n, dtype=float))

    def _batch(self, n: np.ndarray, y: np.ndarray, thetas: np.ndarray, ridge: float) -> tuple[np.ndarray, np.ndarray]:
        """Linear coefficients (G, L) and RSS (G,) for every θ of a grid, in one batch."""
        B = self._basis(n, thetas)                      # (G, P, L)
        if B.shape[2] == 2:
            return _batch2(B, y, ridge)
        with np.errstate(all="ignore"):
            norms = np.sqrt((B * B).sum(1))             # (G, L)
            norms = np.where((norms > 0) & np.isfinite(norms), norms, 1.0)
            Bs = B / norms[:, None, :]
            A = np.einsum("gpi,gpj->gij", Bs, Bs) + ridge * np.eye(B.shape[2])
            rhs = np.einsum("gpi,p->gi", Bs, y)
        ok = np.all(np.isfinite(A), axis=(1, 2)) & np.all(np.isfinite(rhs), axis=1)
        coef = np.full(rhs.shape, np.nan)
        if ok.any():
            try:
                coef[ok] = np.linalg.solve(A[ok], rhs[ok][..., None])[..., 0]
            except np.linalg.LinAlgError:
                for g in np.flatnonzero(ok):
                    coef[g] = np.linalg.lstsq(A[g], rhs[g], rcond=None)[0]
        coef = coef / norms
        with np.errstate(all="ignore"):
            r = np.einsum("gpl,gl->gp", B, coef) - y
            rss = np.where(np.all(np.isfinite(r), axis=1), (r * r).sum(1), np.inf)
        return coef, rss

    def fit(self, n: np.ndarray, y: np.ndarray) -> KernelFit | None:
        ridge, reg = _ridge_for(self._free, len(n))
        ridge = max(ridge, 1e-10)
        grid = self._grid(n)
        coef, rss = self._batch(n, y, grid, ridge)
        if not np.isfinite(rss).any():
            return None
        g = int(np.argmin(rss))
        theta_best, rss_best, c_best = grid[g], rss[g], coef[g]
        # Refine: a few rounds of parabolic steps between the grid neighbours (multi-start
        # grid, local refinement, staying within the grid's bounds).
        lo = grid[max(g - 1, 0)]
        hi = grid[min(g + 1, len(grid) - 1)]
        for _ in range(3):
            if hi <= lo:
                break
            cand = np.linspace(lo, hi, 9)
            c2, r2 = self._batch(n, y, cand, ridge)
            j = int(np.argmin(r2))
            if r2[j] < rss_best:
                theta_best, rss_best, c_best = cand[j], r2[j], c2[j]
            step = (hi - lo) / 8
            lo, hi = max(cand[j] - step, grid[0]), min(cand[j] + step, grid[-1])
        # Parabolic steps on the RSS around the best point.
        h = (hi - lo) / 2
        for _ in range(3):
            if not h > 0:
                break
            t0 = float(theta_best)
            cand = np.array([t0 - h, t0 + h])
            cand = np.clip(cand, grid[0], grid[-1])
            _, r2 = self._batch(n, y, cand, ridge)
            den = r2[1] - 2 * rss_best + r2[0]
            if np.isfinite(den) and den > 0:
                v = np.clip(t0 - 0.5 * h * (r2[1] - r2[0]) / den, grid[0], grid[-1])
                c3, r3 = self._batch(n, y, np.array([v]), ridge)
                if r3[0] < rss_best:
                    theta_best, rss_best, c_best = v, r3[0], c3[0]
            h /= 4
        full = self._assemble(c_best, float(theta_best))
        return KernelFit(self, full, n, y, float(rss_best), regularised=reg)


def _batch2(B: np.ndarray, y: np.ndarray, ridge: float) -> tuple[np.ndarray, np.ndarray]:
    """`VarProKernel._batch` for two linear coefficients, in closed form."""
    with np.errstate(all="ignore"):
        b1, b2 = B[:, :, 0], B[:, :, 1]
        n1 = np.sqrt((b1 * b1).sum(1))
        n2 = np.sqrt((b2 * b2).sum(1))
        n1 = np.where((n1 > 0) & np.isfinite(n1), n1, 1.0)
        n2 = np.where((n2 > 0) & np.isfinite(n2), n2, 1.0)
        u1, u2 = b1 / n1[:, None], b2 / n2[:, None]
        c = (u1 * u2).sum(1)
        d = 1.0 + ridge
        r1, r2 = u1 @ y, u2 @ y
        det = d * d - c * c
        x1 = (d * r1 - c * r2) / det
        x2 = (d * r2 - c * r1) / det
        coef = np.stack([x1 / n1, x2 / n2], axis=1)
        r = b1 * coef[:, 0:1] + b2 * coef[:, 1:2] - y
        rss = (r * r).sum(1)
        rss = np.where(np.isfinite(rss) & (det > 0), rss, np.inf)
    return coef, rss


class PMNFKernel(Kernel):
    """Extra-P's performance model normal form with one term: c0 + c1 n^i log2(n)^j.

    (i, j) is chosen among a fixed set by least squares; both coefficients are linear.
    """

    name = "PMNF"
    expr = "c0 + c1 n^i log2(n)^j"
    param_names = ("c0", "c1")

    EXPONENTS_I = (-2.0, -1.0, -0.5, 0.0, 0.25, 1 / 3, 0.5, 2 / 3, 0.75, 1.0, 1.25, 4 / 3, 1.5,
                   5 / 3, 1.75, 2.0, 2.25, 7 / 3, 2.5, 8 / 3, 2.75, 3.0)
    EXPONENTS_J = (0, 1, 2)

    def __init__(self) -> None:
        pairs = [(i, j) for i in self.EXPONENTS_I for j in self.EXPONENTS_J if not (i == 0 and j == 0)]
        self._pairs = np.array(pairs, dtype=float)

    @staticmethod
    def _term(n: np.ndarray, i: np.ndarray, j: np.ndarray) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        with np.errstate(all="ignore"):
            lg = np.log2(np.maximum(n, 1e-300))
            return np.power(n, i) * np.power(lg, j)

    def evaluate(self, theta: np.ndarray, n: np.ndarray, extra: dict | None = None) -> np.ndarray:
        extra = extra or {}
        i, j = extra.get("i", 1.0), extra.get("j", 0.0)
        return theta[0] + theta[1] * self._term(n, np.float64(i), np.float64(j))

    def fit(self, n: np.ndarray, y: np.ndarray) -> KernelFit | None:
        T = self._term(n[None, :], self._pairs[:, 0:1], self._pairs[:, 1:2])   # (H, P)
        ok = np.all(np.isfinite(T), axis=1)
        m = len(n)
        # Two-parameter closed-form least squares for every hypothesis at once.
        tm = T.mean(1)
        ym = y.mean()
        dt = T - tm[:, None]
        sxx = (dt * dt).sum(1)
        sxy = (dt * (y - ym)).sum(1)
        good = ok & (sxx > 1e-300 * max(1.0, float(np.max(np.abs(T[ok])) if ok.any() else 1.0)))
        if not good.any() or m < 2:
            return None
        c1 = np.where(good, sxy / np.where(good, sxx, 1.0), 0.0)
        c0 = ym - c1 * tm
        with np.errstate(all="ignore"):
            r = c0[:, None] + c1[:, None] * T - y
            rss = np.where(good, (r * r).sum(1), np.inf)
        h = int(np.argmin(rss))
        i, j = float(self._pairs[h, 0]), float(self._pairs[h, 1])
        return KernelFit(self, np.array([c0[h], c1[h]]), n, y, float(rss[h]), extra={"i": i, "j": j})

    def describe(self, theta: np.ndarray, extra: dict | None = None) -> str:
        extra = extra or {}
        i, j = extra.get("i", 1.0), extra.get("j", 0.0)
        t = []
        if i != 0:
            t.append(f"n^{_frac(i)}")
        if j:
            t.append("log2(n)" + (f"^{int(j)}" if j != 1 else ""))
        return f"{theta[0]:.4g} + {theta[1]:.4g}·{'·'.join(t)}".replace("+ -", "− ")


def _sup(k: int) -> str:
    return {1: "", 2: "²", 3: "³"}.get(k, f"^{k}")


def _frac(x: float) -> str:
    for d in (1, 2, 3, 4):
        if abs(x * d - round(x * d)) < 1e-9:
            return f"{int(round(x * d))}" if d == 1 else f"{int(round(x * d))}/{d}"
    return f"{x:g}"


# ---------------------------------------------------------------- the kernel instances
def _log(n: np.ndarray) -> np.ndarray:
    return np.log(np.maximum(n, 1e-300))


RAT22 = RationalKernel(2, 2)
RAT23 = RationalKernel(2, 3)
RAT33 = RationalKernel(3, 3)
RAT11 = RationalKernel(1, 1)
RAT12 = RationalKernel(1, 2)

CUBICLN = LinearKernel(
    "CubicLn", "a + b ln n + c ln² n + d ln³ n", ("a", "b", "c", "d"),
    lambda n: np.stack([np.ones_like(n), _log(n), _log(n) ** 2, _log(n) ** 3], axis=-1),
    terms=("", "ln n", "ln² n", "ln³ n"))

POLY25 = LinearKernel(
    "Poly25", "a + b n + c n² + d n^2.5", ("a", "b", "c", "d"),
    lambda n: np.stack([np.ones_like(n), n, n * n, n * n * np.sqrt(np.maximum(n, 0.0))], axis=-1),
    terms=("", "n", "n²", "n^2.5"))

LINEAR = LinearKernel(
    "Linear", "a + b n", ("a", "b"),
    lambda n: np.stack([np.ones_like(n), n], axis=-1), terms=("", "n"))

QUADRATIC = LinearKernel(
    "Quadratic", "a + b n + c n²", ("a", "b", "c"),
    lambda n: np.stack([np.ones_like(n), n, n * n], axis=-1), terms=("", "n", "n²"))

AMDAHL = LinearKernel(
    "Amdahl", "a + b / n  (a, b ≥ 0: serial part and parallel part of a time)", ("a", "b"),
    lambda n: np.stack([np.ones_like(n), 1.0 / n], axis=-1), nonneg=True, terms=("", "1/n"))

USL_TIME = LinearKernel(
    "USL", "a / n + b + c n  (a, b, c ≥ 0: the USL's time, 1/X(n))", ("a", "b", "c"),
    lambda n: np.stack([1.0 / n, np.ones_like(n), n], axis=-1), nonneg=True, terms=("1/n", "", "n"))


def _exprat_basis(n: np.ndarray, d: np.ndarray) -> np.ndarray:
    e = np.exp(-d[:, None] * n[None, :])               # (G, P)
    return np.stack([e, e * n[None, :]], axis=-1)      # (G, P, 2)


def _exprat_grid(n: np.ndarray) -> np.ndarray:
    top = float(np.max(n))
    # d·n_top within [-3, 12]: from growth by e³ to decay by e¹² over the measured range.
    return np.linspace(-3.0, 12.0, 31) / top


def _exprat_eval(theta: np.ndarray, n: np.ndarray) -> np.ndarray:
    a, b, c, d = theta
    return (a + b * n) / np.exp(c + d * n)


EXPRAT = VarProKernel(
    "ExpRat", "(a + b n) / e^(c + d n)", ("a", "b", "c", "d"),
    _exprat_basis, _exprat_grid, lambda coef, d: np.array([coef[0], coef[1], 0.0, d]),
    _exprat_eval, free_params=3)


def _power_basis(n: np.ndarray, p: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):
        t = np.power(n[None, :], p[:, None])
    return np.stack([np.ones_like(t), t], axis=-1)


POWERLAW = VarProKernel(
    "PowerLaw", "a + b n^p  (−3 ≤ p ≤ 3)", ("a", "b", "p"),
    _power_basis, lambda n: np.linspace(-3.0, 3.0, 25),
    lambda coef, p: np.array([coef[0], coef[1], p]),
    lambda th, n: th[0] + th[1] * np.power(n, th[2]), free_params=3)

PMNF = PMNFKernel()

#: ESTIMA's Table 1, in the paper's order.
PAPER_KERNELS: tuple[Kernel, ...] = (RAT22, RAT23, RAT33, CUBICLN, EXPRAT, POLY25)
#: Every kernel corecast knows.
ALL_KERNELS: tuple[Kernel, ...] = PAPER_KERNELS + (LINEAR, QUADRATIC, POWERLAW, AMDAHL, USL_TIME,
                                                   RAT11, RAT12, PMNF)
#: The default set: the paper's kernels and the ones that serve scaling data.
DEFAULT_KERNELS: tuple[Kernel, ...] = ALL_KERNELS

_BY_NAME = {k.name.lower(): k for k in ALL_KERNELS}


def kernel(name: str) -> Kernel:
    try:
        return _BY_NAME[name.lower()]
    except KeyError:
        raise KeyError(f"unknown kernel {name!r} (known: {', '.join(k.name for k in ALL_KERNELS)})") from None


def kernels(names: Sequence[str] | None) -> tuple[Kernel, ...]:
    if not names:
        return DEFAULT_KERNELS
    return tuple(kernel(n) for n in names)


# ============================================================================ realism
def check_grid(n_lo: float, n_hi: float, extra: Sequence[float] | np.ndarray = ()) -> np.ndarray:
    """Points between n_lo and n_hi where a fit's realism is checked: a geometric grid dense
    enough to catch a pole between two core counts, plus the points given."""
    n_lo = max(float(n_lo), 1e-9)
    n_hi = max(float(n_hi), n_lo)
    g = np.geomspace(n_lo, n_hi, 96) if n_hi > n_lo else np.array([n_lo])
    lin = np.linspace(n_lo, n_hi, 64)
    return np.unique(np.concatenate([g, lin, np.asarray(extra, dtype=float)]))


def realism(fit: KernelFit, grid: np.ndarray, positive: bool = False, nonneg: bool = True) -> str | None:
    """Why a fit is unrealistic on the grid, or None when it is realistic.

    Rejects a pole (a real root of a rational's denominator in the range) or a sign change of
    the denominator, non-finite values, negative values (`nonneg`), or values ≤ 0 (`positive`).
    """
    lo, hi = float(grid[0]), float(grid[-1])
    if isinstance(fit.kernel, RationalKernel):
        D = fit.denominator(grid)
        if not np.all(np.isfinite(D)):
            return "denominator not finite"
        if np.any(D <= 0) and np.any(D > 0):
            return "denominator changes sign"
        roots = fit.kernel.poles(fit.theta)
        inside = roots[(roots >= lo) & (roots <= hi)]
        if inside.size:
            return f"pole at n ≈ {inside[0]:.3g}"
        if np.all(D <= 0):
            # Cannot happen with D(0) = 1 unless a root lies in (0, lo): still a sign change.
            return "denominator changes sign"
    v = fit(grid)
    if not np.all(np.isfinite(v)):
        return "not finite"
    if positive and np.any(v <= 0):
        return f"not positive at n ≈ {grid[np.argmax(v <= 0)]:.3g}"
    if nonneg and np.any(v < 0):
        # Allow round-off around a true zero.
        scale = max(float(np.max(np.abs(fit.y))), 1e-300)
        if np.any(v < -1e-9 * scale):
            return f"negative at n ≈ {grid[np.argmax(v < -1e-9 * scale)]:.3g}"
    return None


def fit_kernel(k: Kernel, n: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> KernelFit | None:
    """Fit one kernel to points (n, y), or None when the fit fails numerically."""
    n = np.asarray(n, dtype=float)
    y = np.asarray(y, dtype=float)
    if n.shape != y.shape or n.ndim != 1 or len(n) < 2:
        raise ValueError("n and y must be 1-D arrays of the same length (at least 2)")
    if not (np.all(np.isfinite(n)) and np.all(np.isfinite(y))):
        raise ValueError("n and y must be finite")
    raw = getattr(k, "fit_raw", None)
    if raw is not None:
        # A kernel with a fixed offset is not linear in its output scale: fitted as is.
        with np.errstate(all="ignore"):
            return raw(n, y)
    scale = float(np.max(np.abs(y)))
    if scale == 0:
        scale = 1.0
    with np.errstate(all="ignore"):
        f = k.fit(n, y / scale)
    if f is None:
        return None
    theta = _rescale(k, f.theta, scale)
    return KernelFit(k, theta, n, y, f.rss * scale * scale, regularised=f.regularised, extra=f.extra)


def _rescale(k: Kernel, theta: np.ndarray, s: float) -> np.ndarray:
    """Parameters for y·s from those for y (every kernel is linear in its output scale)."""
    theta = np.array(theta, dtype=float)
    if isinstance(k, RationalKernel):
        theta[: k.p + 1] *= s
    elif k is EXPRAT:
        theta[:2] *= s
    elif k is POWERLAW:
        theta[:2] *= s
    else:
        theta *= s
    return theta
