"""Choosing a kernel for a series: ESTIMA's checkpoint selection, and the band around it.

Of the m measured points (one value per core count, in increasing core order) the c with the
highest core counts are *checkpoints*. Every kernel is fitted on the first i points for every i
from 3 to m − c; each fit is scored by its root-mean-square error at the checkpoints; fits that
are unrealistic anywhere between 1 core and the largest target are rejected (`kernels.realism`);
the best-scoring (kernel, i) is kept. By default, as in ESTIMA, the kept fit is the one on the
first i points (the checkpoints validate it and are not refitted); `use="all"` refits the
chosen kernel on all m points instead.

The default number of checkpoints grows with m (the paper uses 2 or 4): 0 below 4 points,
1 at 4, 2 up to 7, 3 up to 9, 4 from 10.

The band around the kept fit comes from two sources, joined as an envelope:

- the spread of the near-best fits (those whose checkpoint error is within a factor of the
  best), as weighted quantiles of their predictions;
- how the kept fit's error grows with the distance of extrapolation: its relative errors at
  the checkpoints, per unit of log distance from the last point it was fitted on, scaled to
  each target's distance, with Student's t at the stated level.

How often the truth falls in the band is *measured* (`corecast.model.evaluate`), not assumed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from scipy import stats

from .kernels import DEFAULT_KERNELS, Kernel, KernelFit, check_grid, fit_kernel, realism

#: Near-best fits: checkpoint error within this factor of the best (plus a floor of noise).
NEAR_BEST_FACTOR = 2.0
#: At most this many near-best fits make the spread.
NEAR_BEST_MAX = 12
#: A kernel may have at most this many more parameters than the points it is fitted on
#: (it is then regularised); beyond, it is skipped.
MAX_EXCESS_PARAMS = 2


def default_checkpoints(m: int) -> int:
    """How many of m points serve as checkpoints (the paper uses 2 or 4)."""
    if m < 4:
        return 0
    if m == 4:
        return 1
    if m <= 7:
        return 2
    if m <= 9:
        return 3
    return 4


@dataclass
class Candidate:
    fit: KernelFit
    points: int              # fitted on the first `points` measured points
    score: float             # RMSE at the checkpoints (in-sample RMSE when there are none)

    @property
    def name(self) -> str:
        return self.fit.name


@dataclass
class Selection:
    """The kernel chosen for one series, with its rivals."""

    n: np.ndarray
    y: np.ndarray
    checkpoints: int
    n_hi: float
    best: Candidate
    final: KernelFit                          # what predicts: best.fit, or its refit on all points
    candidates: list[Candidate]               # realistic ones checked, best first
    rejected: dict[str, int] = field(default_factory=dict)
    positive: bool = False
    name: str = ""
    warnings: list[str] = field(default_factory=list)

    def __call__(self, n: Sequence[float] | np.ndarray) -> np.ndarray:
        return self.final(np.asarray(n, dtype=float))

    @property
    def kernel(self) -> str:
        return self.final.name

    def near_best(self) -> list[Candidate]:
        s0 = self.best.score
        floor = 1e-9 * max(float(np.max(np.abs(self.y))), 1e-300)
        lim = NEAR_BEST_FACTOR * max(s0, floor)
        return [c for c in self.candidates if c.score <= lim][:NEAR_BEST_MAX]

    def per_kernel(self) -> list[Candidate]:
        """The best realistic candidate of every kernel, best first."""
        seen: dict[str, Candidate] = {}
        for c in self.candidates:
            seen.setdefault(c.name, c)
        return list(seen.values())

    def growth_error(self) -> tuple[float, int]:
        """Relative error per unit of log distance at the checkpoints, and how many errors."""
        if self.checkpoints == 0:
            return 0.0, 0
        f = self.best.fit
        ncp, ycp = self.n[-self.checkpoints:], self.y[-self.checkpoints:]
        pred = f(ncp)
        base = float(np.max(f.n))
        ok = (ycp > 0) & (pred > 0) & (ncp > base)
        if not ok.any():
            return 0.0, 0
        e = np.log(pred[ok] / ycp[ok])
        d = np.log(ncp[ok] / base)
        u = e / d
        return float(np.sqrt(np.mean(u * u))), int(ok.sum())

    def noise(self) -> float:
        """Relative RMS residual of the final fit on the points it was fitted on."""
        f = self.final
        yy = f.y
        ok = yy != 0
        if ok.sum() <= f.kernel.n_params:
            return 0.0
        r = (f(f.n)[ok] - yy[ok]) / np.abs(yy[ok])
        return float(np.sqrt(np.sum(r * r) / max(ok.sum() - f.kernel.n_params, 1)))

    def band(self, n: Sequence[float] | np.ndarray, level: float = 0.8) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Prediction, low and high at core counts n, at `level`."""
        n = np.asarray(n, dtype=float)
        pred = self(n)
        # Spread of the near-best fits.
        near = self.near_best()
        P = np.array([c.fit(n) for c in near]) if near else pred[None, :]
        s = np.array([c.score for c in near]) if near else np.array([0.0])
        fin = s[np.isfinite(s)]
        eps = 1e-6 * max(float(np.max(np.abs(self.y))), 1e-300) + 0.05 * max(float(fin.min()) if len(fin) else 0.0, 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            w = 1.0 / (s + eps) ** 2
        w = np.where(np.isfinite(w), w, 0.0)
        # fits without a finite score (every near fit perfect or none scored): equal weights
        w = w / w.sum() if w.sum() > 0 else np.full(len(w), 1.0 / len(w))
        q_lo, q_hi = (1 - level) / 2, (1 + level) / 2
        lo_s = _wquantile(P, w, q_lo)
        hi_s = _wquantile(P, w, q_hi)
        # Error growing with the distance of extrapolation.
        g, k = self.growth_error()
        top = float(np.max(self.final.n))
        d = np.log(np.maximum(n, top) / top)
        z = float(stats.t.ppf(q_hi, max(k, 1))) if k else float(stats.norm.ppf(q_hi))
        noise = self.noise()
        h = z * np.sqrt((g * d) ** 2 + noise ** 2)
        with np.errstate(over="ignore"):
            lo_g = pred * np.exp(-h)
            hi_g = pred * np.exp(h)
        lo = np.minimum(np.minimum(lo_s, lo_g), pred)
        hi = np.maximum(np.maximum(hi_s, hi_g), pred)
        if self.positive:
            lo = np.maximum(lo, np.finfo(float).tiny)
        else:
            lo = np.maximum(lo, 0.0)
        return pred, lo, hi

    def to_dict(self) -> dict:
        out = self.final.to_dict()
        out.update({"selected_on_points": self.best.points, "checkpoints": self.checkpoints,
                    "checkpoint_rmse": self.best.score,
                    "refitted_on_all_points": self.final is not self.best.fit,
                    "rivals": [{"kernel": c.name, "points": c.points, "checkpoint_rmse": c.score}
                               for c in self.near_best()[1:6]]})
        if self.rejected:
            out["rejected_unrealistic"] = dict(self.rejected)
        return out


def _wquantile(P: np.ndarray, w: np.ndarray, q: float) -> np.ndarray:
    """Weighted quantile along axis 0 of P (K, T) with weights w (K,)."""
    if P.shape[0] == 1:
        return P[0].copy()
    order = np.argsort(P, axis=0)
    Ps = np.take_along_axis(P, order, axis=0)
    ws = w[order]
    cw = np.cumsum(ws, axis=0) - 0.5 * ws
    out = np.empty(P.shape[1])
    for t in range(P.shape[1]):
        out[t] = np.interp(q, cw[:, t], Ps[:, t])
    return out


class SelectionError(ValueError):
    """No kernel gives a realistic fit."""


def select(n: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, n_hi: float,
           kernels: Sequence[Kernel] | None = None, checkpoints: int | None = None,
           positive: bool = False, nonneg: bool = True, use: str = "prefix",
           name: str = "", exhaustive: bool = False) -> Selection:
    """ESTIMA's checkpoint selection on one series (one value per core count).

    n_hi: the largest core count to predict (realism is checked from 1 to it).
    positive / nonneg: what realistic values must be (times: positive; stall cycles: ≥ 0).
    use: "prefix" (the paper: predict with the fit on the selected first i points) or "all"
    (refit the selected kernel on all points).
    exhaustive: check every fit's realism and keep every realistic one in `candidates` (else
    only the near-best are checked and kept).
    """
    n = np.asarray(n, dtype=float)
    y = np.asarray(y, dtype=float)
    order = np.argsort(n)
    n, y = n[order], y[order]
    m = len(n)
    if m < 3:
        raise SelectionError(f"{name or 'series'}: {m} core counts measured; extrapolation needs at least 3")
    if len(np.unique(n)) != m:
        raise ValueError("one value per core count is expected (aggregate repetitions first)")
    if use not in ("prefix", "all"):
        raise ValueError("use must be 'prefix' or 'all'")
    ks = tuple(kernels) if kernels else DEFAULT_KERNELS
    c = default_checkpoints(m) if checkpoints is None else int(checkpoints)
    c = max(0, min(c, m - 3))
    n_hi = max(float(n_hi), float(n[-1]))
    grid = check_grid(min(1.0, float(n[0])), n_hi, n)
    scale = max(float(np.max(np.abs(y))), 1e-300)
    tie = 1e-9 * scale

    scored: list[Candidate] = []
    for i in range(3, m - c + 1):
        ni, yi = n[:i], y[:i]
        for k in ks:
            if k.n_params > i + MAX_EXCESS_PARAMS:
                continue
            if c == 0 and k.n_params >= i:
                continue        # nothing to validate on: only kernels that leave a residual
            f = fit_kernel(k, ni, yi)
            if f is None:
                continue
            if c:
                r = f(n[m - c:]) - y[m - c:]
                score = float(np.sqrt(np.mean(r * r)))
            else:
                score = math.sqrt(f.rss / i)
            if not math.isfinite(score):
                continue
            scored.append(Candidate(f, i, score))
    # Best first; ties (exact fits) go to fewer parameters, then to more points.
    scored.sort(key=lambda cd: (round(cd.score / tie) if cd.score < 1e6 * tie else cd.score / tie,
                                cd.fit.kernel.n_params, -cd.points))
    # Realism is checked lazily, best first, until the near-best set is complete.
    kept: list[Candidate] = []
    rejected: dict[str, int] = {}
    for cd in scored:
        if not exhaustive and kept and (cd.score > NEAR_BEST_FACTOR * max(kept[0].score, tie) and len(kept) >= 3
                                        or len(kept) >= NEAR_BEST_MAX):
            break
        why = realism(cd.fit, grid, positive=positive, nonneg=nonneg)
        if why is None:
            kept.append(cd)
        else:
            key = why.split(" at ")[0]
            rejected[key] = rejected.get(key, 0) + 1
    if not kept:
        raise SelectionError(f"{name or 'series'}: no kernel gives a realistic fit between 1 and "
                             f"{n_hi:g} cores")
    best = kept[0]
    final = best.fit
    warnings: list[str] = []
    if use == "all" and best.points < m:
        f_all = fit_kernel(best.fit.kernel, n, y)
        if f_all is not None and realism(f_all, grid, positive=positive, nonneg=nonneg) is None:
            final = f_all
        else:
            warnings.append(f"{name or 'series'}: {best.name} refitted on all points is unrealistic; "
                            f"kept the fit on the first {best.points}")
    return Selection(n=n, y=y, checkpoints=c, n_hi=n_hi, best=best, final=final, candidates=kept,
                     rejected=rejected, positive=positive, name=name, warnings=warnings)
