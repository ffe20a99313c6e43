"""Where a policy's speedup factors come from (`--sf-source`), apart from the truth:

- IPC sampling (EQP's method, Van Craeynest et al., PACT 2013): a thread's speed is sampled on
  each core type over one quantum of CPU time there; SF = speed sampled on the fastest type over
  speed sampled on the slowest. The two samples are taken at different times, so a phase change
  between them makes the estimate wrong until the next pair (its phase error). The phase rule of
  the PMCTrack case study starts a new sampling round when a sample lies far from the running
  average of the samples of its phase; rounds also start every `round_s` seconds.
- A model (`corecast sched sfmodel fit`): SF estimated from the counter metrics of the phase on
  the core type the thread runs on, with the big-core or the small-core model.
"""
from __future__ import annotations

import math

import numpy as np

_M64 = (1 << 64) - 1


class SplitMix:
    """splitmix64 and Box-Muller normals: the noise of IPC samples, drawn alike by the Python
    loop and the native one (native/sched/sched.c) so that both give the same result."""

    def __init__(self, seed: int):
        self.state = (seed * 0x2545F4914F6CDD1D + 0x9E3779B97F4A7C15) & _M64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & _M64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
        return z ^ (z >> 31)

    def uniform(self) -> float:
        return ((self.next() >> 11) + 0.5) * (1.0 / 9007199254740992.0)

    def normal(self) -> float:
        u1 = self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)


def phase_changes(values: np.ndarray, threshold: float) -> np.ndarray:
    """The phase rule on a series of samples (IPC per window): True where a sample differs from
    the running average of the current phase by more than `threshold` (relative), which starts a
    new phase (and a new sampling round) whose average begins at that sample."""
    v = np.asarray(values, dtype=float)
    out = np.zeros(len(v), dtype=bool)
    avg, n = 0.0, 0
    for i, x in enumerate(v):
        if n and abs(x - avg) > threshold * abs(avg):
            out[i] = True
            avg, n = x, 1
        else:
            avg = (avg * n + x) / (n + 1)
            n += 1
    return out


class IPCSampler:
    """Per-thread IPC sampling state for the simulator (T threads, K core types)."""

    def __init__(self, T: int, K: int, window_s: float, prior_sf: float, noise: float,
                 threshold: float, round_s: float, seed: int):
        self.K = K
        self.window = window_s
        self.noise = noise
        self.threshold = threshold
        self.round_s = round_s
        self.rng = SplitMix(seed)
        self.acc_cpu = np.zeros((T, K))
        self.acc_work = np.zeros((T, K))
        self.last = np.ones((T, K))
        self.valid = np.zeros((T, K), dtype=bool)
        self.avg = np.zeros((T, K))
        self.n = np.zeros((T, K))
        self.sf = np.full(T, float(prior_sf))
        self.next_round = round_s
        self.samples = 0
        self.phase_rounds = 0

    def reset_threads(self, idx: np.ndarray) -> None:
        """New threads (a restarted application): nothing sampled yet."""
        self.acc_cpu[idx] = 0
        self.acc_work[idx] = 0
        self.valid[idx] = False
        self.n[idx] = 0

    def needs(self) -> np.ndarray:
        return ~self.valid

    def advance(self, t_end: float, dt: float, S: np.ndarray, R: np.ndarray) -> bool:
        """Account dt seconds of placement S at true rates R; True when an estimate changed."""
        if self.K < 2:
            return False
        self.acc_cpu += S * dt
        self.acc_work += S * R * dt
        full = self.acc_cpu >= self.window * (1 - 1e-9)
        changed = False
        if full.any():
            ii, kk = np.nonzero(full)
            x = (self.acc_work[ii, kk] / self.acc_cpu[ii, kk]).tolist()
            self.acc_cpu[ii, kk] = 0
            self.acc_work[ii, kk] = 0
            self.samples += len(x)
            for i, k, v in zip(ii.tolist(), kk.tolist(), x):
                if self.noise > 0:
                    v = v * math.exp(self.noise * self.rng.normal())
                a, n = self.avg[i, k], self.n[i, k]
                if n and abs(v - a) > self.threshold * a:
                    # a new phase: the other types' samples belong to the old one
                    self.phase_rounds += 1
                    self.valid[i] = False
                    self.avg[i, k], self.n[i, k] = v, 1
                else:
                    self.avg[i, k] = (a * n + v) / (n + 1)
                    self.n[i, k] = n + 1
                self.last[i, k] = v
                self.valid[i, k] = True
                if self.valid[i, 0] and self.valid[i, -1]:
                    new = self.last[i, 0] / self.last[i, -1]
                    if new != self.sf[i]:
                        self.sf[i] = new
                        changed = True
        if t_end >= self.next_round - 1e-12:
            self.valid[:] = False
            self.n[:] = 0
            self.next_round = t_end + self.round_s
        return changed
