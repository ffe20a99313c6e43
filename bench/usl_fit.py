"""USL fitting speed: 10,000 datasets of 7 to 32 points, on one core.

Target (issue 2): at least 2,000 fits per second. Prints the batch rate (all datasets in one
vectorised call: what the bootstrap and `evaluate` use), the one-at-a-time rate (what the CLI
does), and scipy.optimize.least_squares one at a time on the same data as the reference
point, with the ratio and whether both reach the same optimum.
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.optimize import least_squares  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from _machine import header  # noqa: E402

from corecast.model import usl  # noqa: E402


def make(B: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    N = np.zeros((B, 32))
    X = np.zeros((B, 32))
    W = np.zeros((B, 32))
    for b in range(B):
        m = int(rng.integers(7, 33))
        top = int(rng.integers(max(m, 16), 257))
        n = np.sort(rng.choice(np.arange(1, top + 1), m, replace=False)).astype(float)
        k = m
        a = rng.uniform(0, 0.2)
        be = 10 ** rng.uniform(-6, -2) * (rng.random() < 0.8)
        g = rng.uniform(1, 1000)
        N[b, :k] = n
        X[b, :k] = usl.usl(n, a, be, g) * (1 + 0.03 * rng.standard_normal(k))
        W[b, :k] = 1
    return N, X, W


def main() -> None:
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        pinned = "pinned to one core"
    except (AttributeError, OSError):
        pinned = "not pinned"
    header(f"USL fit speed ({pinned})")
    B = 10_000
    N, X, W = make(B)
    pts = W.sum(1)
    print(f"datasets: {B}, points per dataset {int(pts.min())}..{int(pts.max())} (mean {pts.mean():.1f})")

    t = time.perf_counter()
    p, rss = usl.fit_batch(N, X, W)
    dt_batch = time.perf_counter() - t
    print(f"batch fit_batch():     {B / dt_batch:10.0f} fits/s  ({dt_batch:.2f} s for {B})  target >= 2000")

    S = 1000
    t = time.perf_counter()
    single_rss = []
    for b in range(S):
        m = W[b] > 0
        single_rss.append(usl.fit(N[b, m], X[b, m]).rss)
    dt_single = time.perf_counter() - t
    print(f"one at a time fit():   {S / dt_single:10.0f} fits/s  ({S} datasets)")

    t = time.perf_counter()
    scipy_rss = []
    for b in range(S):
        m = W[b] > 0
        n, x = N[b, m], X[b, m]
        r = least_squares(lambda q: q[2] * n / (1 + q[0] * (n - 1) + q[1] * n * (n - 1)) - x,
                          [0.05, 1e-4, x[0] / n[0]], bounds=([0, 0, 1e-12], [1, np.inf, np.inf]),
                          x_scale="jac")
        scipy_rss.append(float((r.fun ** 2).sum()))
    dt_scipy = time.perf_counter() - t
    print(f"scipy least_squares:   {S / dt_scipy:10.0f} fits/s  ({S} datasets, one start)")
    print(f"ratio batch / scipy:   {dt_scipy / S / (dt_batch / B):10.1f}x")
    print(f"ratio single / scipy:  {dt_scipy / dt_single:10.2f}x")
    single_rss = np.array(single_rss)
    scipy_rss = np.array(scipy_rss)
    worse = int(np.sum(rss[:S] > scipy_rss * (1 + 1e-6) + 1e-12))
    better = int(np.sum(rss[:S] < scipy_rss * (1 - 1e-6)))
    agree = int(np.sum(np.abs(single_rss - rss[:S]) <= 1e-8 * np.maximum(rss[:S], 1e-12)))
    print(f"optimum vs scipy on {S}: corecast lower RSS on {better}, higher on {worse}; "
          f"batch and one-at-a-time agree on {agree}/{S}")


if __name__ == "__main__":
    main()
