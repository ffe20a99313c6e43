"""A single-class closed queueing network with load-dependent stations, solved exactly.

Stations (`Centre`): a single-server queue (a lock: one holder at a time), a delay centre (time
off the CPU that no one queues for: I/O, sleep) and a load-dependent centre whose service rate
with j jobs present is `capacity(j)` times that of one job (a CPU station of c cores:
min(j, c); c may be fractional -- SMT siblings that add a share of a core -- and the last
server then works at that share). A queue may have a `handoff` h: when a job leaves it with
another waiting, the server stands idle for h times the job's service before the next one is
served (a lock handed to a sleeping waiter, who must be woken and scheduled; a spin lock's
cache line moving to the next spinner): capacity(1) = 1, capacity(j >= 2) = 1 / (1 + h).

Solved exactly for the population N by the convolution algorithm in log space (Buzen's
normalisation constants; for load-dependent centres, Reiser and Kobayashi's generalisation),
which gives the same numbers as exact load-dependent MVA without its known instability: the
marginal probability of an empty multi-server centre, 1 - sum of the others, loses all its
digits at high utilisation, while sums of logarithms lose none. For a centre k of demand D_k:

    f_k(j) = D_k^j / prod_{i<=j} capacity_k(i)         (1 for a queue, i for a delay centre)
    G(n)   = (f_1 * f_2 * ... * f_K)(n)                 (* : convolution over the populations)
    X(N)   = G(N-1) / G(N)
    Q_k(N) = sum_j j f_k(j) G_{-k}(N-j) / G(N)          (G_{-k}: every centre but k)

with R_k = Q_k / X (Little's law) and the centres' residence times adding up to the cycle time
N / X. G_{-k} comes from prefix and suffix convolutions (3K convolutions, each O(N^2)), and
identical centres (the instances of a lock) are solved once. Pure numpy; no I/O.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..errors import UserError

#: The largest population and number of centres solved (bounds what a target can ask for).
MAX_CUSTOMERS = 2048
MAX_CENTRES = 64


@dataclass(frozen=True)
class Centre:
    """One centre: `kind` "queue" (one server), "delay" (infinite servers) or "cpu" (`servers`
    servers, fractional allowed); `demand` is the total service demand of one job there."""

    name: str
    demand: float
    kind: str = "queue"
    servers: float = 1.0
    handoff: float = 0.0         # a queue's idle time between two jobs, per unit of service, when one waits

    def __post_init__(self) -> None:
        if not (math.isfinite(self.demand) and self.demand > 0):
            raise UserError(f"closed network: centre '{self.name}' needs a positive demand (got {self.demand!r})")
        if self.kind not in ("queue", "delay", "cpu"):
            raise UserError(f"closed network: centre '{self.name}': kind {self.kind!r}")
        if self.kind == "cpu" and not (math.isfinite(self.servers) and self.servers > 0):
            raise UserError(f"closed network: centre '{self.name}' needs servers > 0 (got {self.servers!r})")
        if not (math.isfinite(self.handoff) and self.handoff >= 0) or (self.handoff and self.kind != "queue"):
            raise UserError(f"closed network: centre '{self.name}': a handoff (>= 0) is for a queue "
                            f"(got {self.handoff!r} on a {self.kind})")

    def log_f(self, n: int) -> np.ndarray:
        """log f(j) for j = 0..n."""
        j = np.arange(n + 1, dtype=float)
        if self.kind == "queue":
            cap = np.ones(n)
            cap[1:] = 1.0 / (1.0 + self.handoff)
        elif self.kind == "delay":
            cap = j[1:]
        else:
            cap = np.minimum(j[1:], self.servers)
        return j * math.log(self.demand) - np.concatenate(([0.0], np.cumsum(np.log(cap))))


@dataclass
class Solution:
    """The network at population N: throughput, and each centre's queue length (waiting and in
    service), residence time and utilisation (busy servers / servers; a queue's handoffs, when
    its server stands idle between jobs, are not counted as busy)."""

    customers: int
    throughput: float
    queue_length: np.ndarray
    residence_time: np.ndarray
    utilization: np.ndarray
    centres: tuple[Centre, ...]

    @property
    def cycle_time(self) -> float:
        return self.customers / self.throughput

    def share(self, k: int) -> float:
        """The share of a job's time spent at centre k (waiting and in service): Q_k / N."""
        return float(self.queue_length[k] / self.customers)


def _conv(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a * b)(n) = log sum_j exp(a(j) + b(n - j)), n = 0..len-1, in log space."""
    n = len(a)
    idx = np.arange(n)
    diff = idx[:, None] - idx[None, :]                  # n - j
    m = np.where(diff >= 0, a[None, :] + b[np.clip(diff, 0, n - 1)], -np.inf)
    top = m.max(axis=1)
    top = np.where(np.isfinite(top), top, 0.0)        # a row of -inf (impossible populations) stays -inf
    with np.errstate(divide="ignore"):
        return top + np.log(np.exp(m - top[:, None]).sum(axis=1))


def solve(centres: Sequence[Centre], customers: int) -> Solution:
    """The network `centres` with `customers` jobs, solved exactly (see the module doc)."""
    cs = tuple(centres)
    if not cs:
        raise UserError("closed network: no centre")
    if len(cs) > MAX_CENTRES:
        raise UserError(f"closed network: {len(cs)} centres, at most {MAX_CENTRES}")
    n = int(customers)
    if n < 1 or n > MAX_CUSTOMERS:
        raise UserError(f"closed network: {customers} customers (1 to {MAX_CUSTOMERS:,})")
    # identical centres share their f and their G_{-k}
    keys = [(c.kind, c.demand, c.servers, c.handoff) for c in cs]
    logs = [cs[i].log_f(n) for i in range(len(cs))]
    K = len(cs)
    unit = np.full(n + 1, -np.inf)
    unit[0] = 0.0
    prefix = [unit]
    for k in range(K):
        prefix.append(_conv(prefix[-1], logs[k]))
    suffix = [unit]
    for k in range(K - 1, -1, -1):
        suffix.append(_conv(suffix[-1], logs[k]))
    suffix = suffix[::-1]                               # suffix[k]: centres k..K-1
    g = prefix[K]
    x = math.exp(g[n - 1] - g[n])
    q = np.zeros(K)
    done: dict[tuple, float] = {}
    j = np.arange(n + 1, dtype=float)
    for k in range(K):
        if keys[k] in done:
            q[k] = done[keys[k]]
            continue
        g_other = _conv(prefix[k], suffix[k + 1])
        terms = logs[k] + g_other[::-1] - g[n]            # f_k(j) G_{-k}(n - j) / G(n)
        q[k] = done[keys[k]] = float(np.sum(j * np.exp(terms)))
    r = q / x
    util = np.array([x * c.demand / (c.servers if c.kind == "cpu" else 1.0) if c.kind != "delay" else x * c.demand
                     for c in cs])
    return Solution(customers=n, throughput=x, queue_length=q, residence_time=r, utilization=util, centres=cs)
