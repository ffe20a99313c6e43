"""Queueing models: turn a service time into throughput, response time and queue length.

A library the other parts use (`corecast throughput`, predictions that need a response-time
target, the scheduling simulator). Pure functions over floats; no I/O.

Open systems (requests arrive at a rate, whoever sends them):

- `mm1(arrival_rate, service_rate)` and `mmc(arrival_rate, service_rate, servers)` give an
  `OpenQueue`: utilisation, probability of waiting (Erlang C), mean waiting and response
  time, mean queue length and number in the system, and the waiting/response-time
  distributions (survival functions and percentiles).
- `erlang_c(servers, offered_load)` (and `erlang_b`) computed in log space, so thousands of
  servers at 99.9% utilisation neither overflow nor lose precision.
- `max_arrival_rate(service_rate, servers, target, percentile)`: the largest arrival rate
  whose mean (or percentile) response time meets a target -- throughput at a service level.

Closed systems (a fixed population of clients, each waiting for its answer before it sends
again, as closed-loop load generators do):

- `machine_repairman(customers, think_time, service_time, servers)`: the finite-source
  M/M/c//N model solved exactly from its birth-death probabilities.
- `mva(stations, customers, think_time)`: exact Mean Value Analysis of a closed product-form
  network with delay, single-server and multi-server (load-dependent) stations, for every
  population 1..N.

Times are in seconds and rates per second by convention, but any consistent unit works.
Invalid inputs raise `QueueingError`, which is both a `ValueError` (for library callers) and
a `corecast.errors.UserError` (so the command line reports it in one line).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np
from scipy import optimize, special

from ..errors import UserError

__all__ = [
    "QueueingError", "TargetUnreachable", "OpenQueue", "ClosedQueue", "TargetCapacity",
    "Station", "MVAResult", "erlang_b", "erlang_c", "log_erlang_c", "mm1", "mmc",
    "max_arrival_rate", "machine_repairman", "mva",
]


class QueueingError(UserError, ValueError):
    """An input a queueing model cannot take (negative rate, unstable load, bad percentile)."""


class TargetUnreachable(QueueingError):
    """No arrival rate meets the response-time target: the service time alone exceeds it."""


# ============================================================================ validation
def _positive(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise QueueingError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise QueueingError(f"{name} must be a positive finite number, got {value!r}")
    return v


def _nonnegative(name: str, value: float) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise QueueingError(f"{name} must be a number, got {value!r}") from None
    if not math.isfinite(v) or v < 0:
        raise QueueingError(f"{name} must be a finite number >= 0, got {value!r}")
    return v


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise QueueingError(f"{name} must be a whole number >= 1, got {value!r}")
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise QueueingError(f"{name} must be a whole number >= 1, got {value!r}") from None
    if not math.isfinite(f) or f < 1 or f != int(f):
        raise QueueingError(f"{name} must be a whole number >= 1, got {value!r}")
    return int(f)


def _percentile(p: float) -> float:
    try:
        v = float(p)
    except (TypeError, ValueError):
        raise QueueingError(f"percentile must be a number between 0 and 1, got {p!r}") from None
    if not (0.0 < v < 1.0):
        raise QueueingError(f"percentile must be strictly between 0 and 1 (e.g. 0.99), got {p!r}")
    return v


# ============================================================================ Erlang formulas
_DIRECT_SUM_LIMIT = 200_000


def _log_head(servers: int, a: float) -> float:
    """log of sum_{k=0}^{c-1} a^k / k!  (the first c terms of e^a's series)."""
    if servers <= _DIRECT_SUM_LIMIT:
        k = np.arange(servers, dtype=float)
        return float(special.logsumexp(k * math.log(a) - special.gammaln(k + 1.0)))
    # sum_{k<c} a^k/k! = e^a * Q(c, a), Q the regularised upper incomplete gamma function.
    # For a < c, Q(c, a) = P(Poisson(a) < c) > 1/2, so its logarithm is well conditioned.
    return a + math.log(float(special.gammaincc(servers, a)))


def log_erlang_c(servers: int, offered_load: float) -> float:
    """Natural log of the Erlang C probability that an arrival waits.

    `offered_load` a = arrival rate / service rate (in Erlangs); it must be below `servers`.
    Every term is kept as a logarithm, so c in the thousands and a within a hair of c give
    full precision where the textbook formula overflows (a^c / c!) or cancels.
    """
    c = _count("servers", servers)
    a = _nonnegative("offered load", offered_load)
    if a >= c:
        raise QueueingError(f"offered load {a:g} Erlangs is not below the {c} servers: "
                            "the queue is unstable (utilisation >= 1)")
    if a == 0.0:
        return -math.inf
    log_tail = c * math.log(a) - special.gammaln(c + 1.0) + math.log(c) - math.log(c - a)
    return float(log_tail - np.logaddexp(_log_head(c, a), log_tail))


def erlang_c(servers: int, offered_load: float) -> float:
    """Erlang C: probability that an arrival to an M/M/c queue has to wait."""
    return math.exp(log_erlang_c(servers, offered_load))


def erlang_b(servers: int, offered_load: float) -> float:
    """Erlang B: blocking probability of an M/M/c/c loss system (any offered load >= 0)."""
    c = _count("servers", servers)
    a = _nonnegative("offered load", offered_load)
    if a == 0.0:
        return 0.0
    log_top = c * math.log(a) - special.gammaln(c + 1.0)
    k = np.arange(c + 1, dtype=float)
    return math.exp(log_top - float(special.logsumexp(k * math.log(a) - special.gammaln(k + 1.0))))


# ============================================================================ open queues
def _hypoexp_survival(theta: float, mu: float, t: float) -> float:
    """P(X + S > t) for independent X ~ Exp(theta), S ~ Exp(mu), stable when theta ~ mu."""
    # = e^{-theta t} + theta (e^{-mu t} - e^{-theta t}) / (theta - mu), written around the
    # smaller rate a so that nothing overflows: (e^{-a t} - e^{-b t}) / (b - a).
    a, b = min(theta, mu), max(theta, mu)
    d = b - a
    frac = t if d == 0.0 else -math.expm1(-d * t) / d
    return math.exp(-theta * t) + theta * math.exp(-a * t) * frac


@dataclass(frozen=True)
class OpenQueue:
    """Steady state of an M/M/c queue (M/M/1 when servers == 1), FCFS, infinite buffer."""

    arrival_rate: float
    service_rate: float
    servers: int
    utilization: float            # per-server busy fraction, lambda / (c mu)
    prob_wait: float              # Erlang C: P(an arrival waits)
    mean_waiting_time: float      # Wq, time in queue before service
    mean_response_time: float     # R = Wq + 1/mu
    mean_queue_length: float      # Lq, requests waiting (not in service)
    mean_in_system: float         # L, waiting + in service

    @property
    def model(self) -> str:
        return "M/M/1" if self.servers == 1 else f"M/M/{self.servers}"

    @property
    def throughput(self) -> float:
        """Completions per unit time: in steady state, the arrival rate."""
        return self.arrival_rate

    @property
    def offered_load(self) -> float:
        return self.arrival_rate / self.service_rate

    @property
    def _theta(self) -> float:
        return self.servers * self.service_rate - self.arrival_rate

    def waiting_time_survival(self, t: float) -> float:
        """P(Wq > t)."""
        t = _nonnegative("time", t)
        return self.prob_wait * math.exp(-self._theta * t)

    def response_time_survival(self, t: float) -> float:
        """P(R > t), R = waiting + service time."""
        t = _nonnegative("time", t)
        mu = self.service_rate
        return ((1.0 - self.prob_wait) * math.exp(-mu * t)
                + self.prob_wait * _hypoexp_survival(self._theta, mu, t))

    def waiting_time_percentile(self, p: float) -> float:
        """Smallest t with P(Wq <= t) >= p (0 when at least p of arrivals do not wait)."""
        p = _percentile(p)
        if self.prob_wait <= 1.0 - p:
            return 0.0
        return math.log(self.prob_wait / (1.0 - p)) / self._theta

    def response_time_percentile(self, p: float) -> float:
        """The p-quantile of the response time (p = 0.99 gives the 99th percentile)."""
        p = _percentile(p)
        mu = self.service_rate
        if self.servers == 1:
            return -math.log1p(-p) / (mu - self.arrival_rate)
        tail = 1.0 - p
        hi = -math.log(tail) / min(mu, self._theta)   # survival is below `tail` by then...
        while self.response_time_survival(hi) > tail:  # ...but keep it robust
            hi *= 2.0
        return float(optimize.brentq(lambda t: self.response_time_survival(t) - tail, 0.0, hi,
                                     xtol=1e-15, rtol=1e-13, maxiter=500))

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "arrival_rate": self.arrival_rate,
                "service_rate": self.service_rate, "servers": self.servers,
                "utilization": self.utilization, "prob_wait": self.prob_wait,
                "mean_waiting_time": self.mean_waiting_time,
                "mean_response_time": self.mean_response_time,
                "mean_queue_length": self.mean_queue_length, "mean_in_system": self.mean_in_system}


def mmc(arrival_rate: float, service_rate: float, servers: int = 1) -> OpenQueue:
    """M/M/c: Poisson arrivals at `arrival_rate`, c servers each serving exponentially at
    `service_rate`, one shared FCFS queue."""
    lam = _nonnegative("arrival rate", arrival_rate)
    mu = _positive("service rate", service_rate)
    c = _count("servers", servers)
    a = lam / mu
    if a >= c:
        raise QueueingError(f"arrival rate {lam:g}/s reaches the capacity {c * mu:g}/s of {c} "
                            f"server(s) at {mu:g}/s each: utilisation {a / c:.3g} >= 1, no steady state")
    pw = 0.0 if lam == 0.0 else (a if c == 1 else erlang_c(c, a))
    wq = pw / (c * mu - lam)
    r = wq + 1.0 / mu
    return OpenQueue(arrival_rate=lam, service_rate=mu, servers=c, utilization=a / c, prob_wait=pw,
                     mean_waiting_time=wq, mean_response_time=r, mean_queue_length=lam * wq,
                     mean_in_system=lam * r)


def mm1(arrival_rate: float, service_rate: float) -> OpenQueue:
    """M/M/1, in closed form: rho = lambda/mu, R = 1/(mu - lambda), L = rho/(1 - rho)."""
    lam = _nonnegative("arrival rate", arrival_rate)
    mu = _positive("service rate", service_rate)
    if lam >= mu:
        raise QueueingError(f"arrival rate {lam:g}/s reaches the service rate {mu:g}/s: "
                            f"utilisation {lam / mu:.3g} >= 1, no steady state")
    rho = lam / mu
    r = 1.0 / (mu - lam)
    return OpenQueue(arrival_rate=lam, service_rate=mu, servers=1, utilization=rho, prob_wait=rho,
                     mean_waiting_time=rho / (mu - lam), mean_response_time=r,
                     mean_queue_length=rho * rho / (1.0 - rho), mean_in_system=rho / (1.0 - rho))


# ============================================================================ capacity at a target
@dataclass(frozen=True)
class TargetCapacity:
    """The largest arrival rate that meets a response-time target, and the queue there."""

    arrival_rate: float
    target: float
    statistic: str                # "mean" or "p99", "p99.9", ...
    queues: int                   # independent queues the load is split over (1 when shared)
    queue: OpenQueue              # the state of one queue at that load

    @property
    def utilization(self) -> float:
        return self.queue.utilization

    def to_dict(self) -> dict[str, Any]:
        return {"arrival_rate": self.arrival_rate, "target": self.target, "statistic": self.statistic,
                "queues": self.queues, "utilization": self.utilization,
                "mean_response_time": self.queue.mean_response_time,
                "queue": self.queue.to_dict()}


def statistic_name(percentile: float | None) -> str:
    if percentile is None:
        return "mean"
    return f"p{100.0 * percentile:.6g}"


def _response_statistic(q: OpenQueue, percentile: float | None) -> float:
    return q.mean_response_time if percentile is None else q.response_time_percentile(percentile)


def max_arrival_rate(service_rate: float, servers: int = 1, target: float = 1.0,
                     percentile: float | None = None, queues: int = 1) -> TargetCapacity:
    """Largest total arrival rate whose response time meets `target`.

    `percentile` None bounds the mean response time; 0.99 bounds the 99th percentile.
    The load is split evenly over `queues` independent M/M/c queues of `servers` servers each
    (queues = c, servers = 1 models per-core queues such as memcached's connection-per-thread
    dispatch; queues = 1, servers = c a single shared queue). Raises `TargetUnreachable` when
    even an idle system misses the target (the service time alone exceeds it).
    """
    mu = _positive("service rate", service_rate)
    c = _count("servers", servers)
    k = _count("queues", queues)
    r = _positive("response-time target", target)
    p = None if percentile is None else _percentile(percentile)
    name = statistic_name(p)
    floor = 1.0 / mu if p is None else -math.log1p(-p) / mu   # response time at zero load
    if floor >= r * (1.0 - 1e-12):
        raise TargetUnreachable(
            f"a {name} response time of {_fmt_time(r)} cannot be met: the service time alone gives "
            f"{_fmt_time(floor)} at zero load")
    if c == 1:
        # M/M/1 in closed form: R ~ Exp(mu - lambda).
        lam = mu - 1.0 / r if p is None else mu + math.log1p(-p) / r
    else:
        cap = c * mu

        def excess(lam: float) -> float:
            return _response_statistic(mmc(lam, mu, c), p) - r

        hi = cap * (1.0 - 1e-12)
        if excess(hi) <= 0.0:
            lam = hi
        else:
            lam = float(optimize.brentq(excess, 0.0, hi, xtol=cap * 1e-14, rtol=1e-13, maxiter=500))
    q = mmc(lam, mu, c)
    return TargetCapacity(arrival_rate=lam * k, target=r, statistic=name, queues=k, queue=q)


def _fmt_time(t: float) -> str:
    if t >= 1.0:
        return f"{t:.4g} s"
    if t >= 1e-3:
        return f"{t * 1e3:.4g} ms"
    if t >= 1e-6:
        return f"{t * 1e6:.4g} µs"
    return f"{t * 1e9:.4g} ns"


# ============================================================================ closed systems
@dataclass(frozen=True)
class ClosedQueue:
    """Steady state of the machine-repairman (finite-source M/M/c//N) model."""

    customers: int
    think_time: float
    service_time: float
    servers: int
    throughput: float             # X, completions per unit time
    response_time: float          # R = N/X - Z (waiting + service at the servers)
    waiting_time: float           # R - S
    mean_in_system: float         # L at the servers (waiting + in service)
    mean_queue_length: float      # Lq, waiting only
    utilization: float            # per-server busy fraction, X S / c
    probabilities: np.ndarray = field(repr=False, compare=False, default_factory=lambda: np.zeros(0))

    def to_dict(self) -> dict[str, Any]:
        return {"model": "machine-repairman", "customers": self.customers,
                "think_time": self.think_time, "service_time": self.service_time,
                "servers": self.servers, "throughput": self.throughput,
                "response_time": self.response_time, "waiting_time": self.waiting_time,
                "mean_in_system": self.mean_in_system, "mean_queue_length": self.mean_queue_length,
                "utilization": self.utilization}


def machine_repairman(customers: int, think_time: float, service_time: float,
                      servers: int = 1) -> ClosedQueue:
    """The machine-repairman model: N customers alternate an exponential think time (mean Z)
    and a request served by one of c exponential servers (mean S) behind a shared FCFS queue.

    Solved exactly from the birth-death chain on k = requests at the servers:
    p_k ∝ N!/(N-k)! (S/Z)^k / prod_{j<=k} min(j, c), in log space.
    """
    n = _count("customers", customers)
    z = _nonnegative("think time", think_time)
    s = _positive("service time", service_time)
    c = _count("servers", servers)
    k = np.arange(n + 1, dtype=float)
    busy = np.minimum(k, c)
    if z == 0.0:
        probs = np.zeros(n + 1)
        probs[n] = 1.0
    else:
        # log p_k = sum_{i<k} log(N - i) + k log(S/Z) - sum_{j=1..k} log min(j, c)
        log_fall = special.gammaln(n + 1.0) - special.gammaln(n - k + 1.0)
        log_div = np.concatenate(([0.0], np.cumsum(np.log(busy[1:]))))
        logp = log_fall + k * math.log(s / z) - log_div
        probs = np.exp(logp - special.logsumexp(logp))
    x = float(np.dot(probs, busy)) / s
    l_sys = float(np.dot(probs, k))
    lq = float(np.dot(probs, np.maximum(k - c, 0.0)))
    r = l_sys / x
    return ClosedQueue(customers=n, think_time=z, service_time=s, servers=c, throughput=x,
                       response_time=r, waiting_time=max(r - s, 0.0), mean_in_system=l_sys,
                       mean_queue_length=lq, utilization=x * s / c, probabilities=probs)


@dataclass(frozen=True)
class Station:
    """One service centre of a closed network.

    `demand` is the total service demand per job (visits × service time per visit).
    kind "queue": FCFS/PS with `servers` identical servers (1 for a plain queue; more makes it
    load-dependent and is solved exactly through its marginal queue-length probabilities);
    kind "delay": an infinite-server centre (no queueing, e.g. a network hop or think time).
    """

    name: str
    demand: float
    kind: str = "queue"
    servers: int = 1

    def __post_init__(self) -> None:
        _positive(f"demand of station '{self.name}'", self.demand)
        if self.kind not in ("queue", "delay"):
            raise QueueingError(f"station '{self.name}': kind must be 'queue' or 'delay', got {self.kind!r}")
        _count(f"servers of station '{self.name}'", self.servers)


@dataclass(frozen=True)
class MVAResult:
    """Exact MVA for populations 1..N. Arrays are indexed [n - 1] (and [n - 1, station])."""

    stations: tuple[Station, ...]
    think_time: float
    population: np.ndarray         # 1..N
    throughput: np.ndarray         # X(n)
    response_time: np.ndarray      # sum of residence times, excluding think time
    residence_time: np.ndarray     # R_k(n)
    queue_length: np.ndarray       # Q_k(n), mean jobs at station k (waiting + in service)
    utilization: np.ndarray        # U_k(n) = X(n) D_k / m_k

    def at(self, customers: int) -> dict[str, Any]:
        n = _count("customers", customers)
        if n > len(self.population):
            raise QueueingError(f"MVA was solved up to {len(self.population)} customers, not {n}")
        i = n - 1
        return {
            "customers": n, "think_time": self.think_time,
            "throughput": float(self.throughput[i]), "response_time": float(self.response_time[i]),
            "stations": [{"name": st.name, "kind": st.kind, "servers": st.servers, "demand": st.demand,
                          "residence_time": float(self.residence_time[i, j]),
                          "queue_length": float(self.queue_length[i, j]),
                          "utilization": float(self.utilization[i, j])}
                         for j, st in enumerate(self.stations)],
        }


def mva(stations: Sequence[Station] | Iterable[Station], customers: int,
        think_time: float = 0.0) -> MVAResult:
    """Exact Mean Value Analysis of a single-class closed network with `customers` jobs,
    each thinking `think_time` between requests (0 for a saturating closed-loop generator).

    Single-server queues use Reiser and Lavenberg's recursion R_k(n) = D_k (1 + Q_k(n-1));
    delay centres R_k(n) = D_k; m-server queues the load-dependent form
    R_k(n) = sum_j j D_k / min(j, m) p_k(j-1 | n-1) with the marginal probabilities
    p_k(j | n) = X(n) D_k / min(j, m) p_k(j-1 | n-1).
    """
    sts = tuple(stations)
    if not sts:
        raise QueueingError("MVA needs at least one station")
    for st in sts:
        if not isinstance(st, Station):
            raise QueueingError(f"MVA stations must be Station objects, got {type(st).__name__}")
    n_max = _count("customers", customers)
    z = _nonnegative("think time", think_time)
    K = len(sts)
    D = np.array([st.demand for st in sts])
    X = np.zeros(n_max)
    Rtot = np.zeros(n_max)
    R = np.zeros((n_max, K))
    Q = np.zeros((n_max, K))
    U = np.zeros((n_max, K))
    q_prev = np.zeros(K)
    # marginal probabilities p_k(j | n) for multi-server stations, j = 0..n
    marg: dict[int, np.ndarray] = {j: np.array([1.0]) for j, st in enumerate(sts)
                                   if st.kind == "queue" and st.servers > 1}
    for n in range(1, n_max + 1):
        r = np.empty(K)
        for j, st in enumerate(sts):
            if st.kind == "delay":
                r[j] = D[j]
            elif st.servers == 1:
                r[j] = D[j] * (1.0 + q_prev[j])
            else:
                jj = np.arange(1, n + 1, dtype=float)
                r[j] = float(np.sum(jj * D[j] / np.minimum(jj, st.servers) * marg[j][:n]))
        x = n / (z + r.sum())
        X[n - 1] = x
        R[n - 1] = r
        Rtot[n - 1] = r.sum()
        q_prev = x * r
        Q[n - 1] = q_prev
        for j, st in enumerate(sts):
            m = 1 if st.kind == "queue" and st.servers == 1 else st.servers
            U[n - 1, j] = x * D[j] / m if st.kind == "queue" else x * D[j]
            if j in marg:
                jj = np.arange(1, n + 1, dtype=float)
                p = np.empty(n + 1)
                p[1:] = x * D[j] / np.minimum(jj, st.servers) * marg[j][:n]
                p[0] = max(1.0 - float(p[1:].sum()), 0.0)
                marg[j] = p / p.sum()
    return MVAResult(stations=sts, think_time=z, population=np.arange(1, n_max + 1),
                     throughput=X, response_time=Rtot, residence_time=R, queue_length=Q, utilization=U)
