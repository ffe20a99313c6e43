"""The interface every scheduling policy shows the simulator (and the enforcing mode), and the
placement helpers the built-in policies share.

A policy is a small class:

    from corecast.sched import Policy, ranked

    class MyPolicy(Policy):
        name = "mine"
        period = 1             # decide every quantum; None: only when threads start or stop

        def decide(self, view):
            order = view.runnable[np.argsort(-view.sf[view.runnable])]   # high SF first
            return ranked(view, order)

`decide(view)` is called at time 0, whenever a thread becomes runnable or stops being runnable
(a phase, barrier, run or application ends), and every `period` quanta. It returns a placement:
a float array of shape (threads, core types) whose entry [i, k] is the share of time thread i
runs on cores of type k until the next decision (0..1 per thread; a column sums to at most the
type's core count). Threads that share cores of a type take turns on them (the local
scheduler's round-robin over quanta, taken as its average). Returning None keeps the previous
placement (its rows for threads that stopped are dropped).

The view (`View`) holds what a kernel scheduler could know: the machine, the time, which
threads are runnable, each thread's application, weight (from its nice value), the speedup
factor as the chosen `--sf-source` estimates it, CPU time per core type, runnable time and
progress in the application's current run. Its arrays belong to the simulator: read them, do
not write them; keep your own state on the policy object (`setup` is called once before the run).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from ..errors import UserError
from .machine import Machine


class View:
    """What a policy sees. Arrays are indexed by thread (T) or application (A); K core types,
    fastest first (type 0 is "big")."""

    # Filled by the simulator; documented here for policy writers.
    time: float                 # seconds since the start
    quantum: float              # seconds
    machine: Machine
    counts: np.ndarray          # (K,) cores per type
    speeds: np.ndarray          # (K,) relative speed per type
    runnable: np.ndarray        # indices of the runnable threads, in thread order
    is_runnable: np.ndarray     # (T,) bool
    app: np.ndarray             # (T,) application of each thread
    local: np.ndarray           # (T,) thread's number inside its application (0 = main thread)
    weight: np.ndarray          # (T,) CFS weight of the thread's nice value
    sf: np.ndarray              # (T,) speedup factor as estimated by the --sf-source
    needs_sample: np.ndarray    # (T, K) bool: IPC sampling wants a quantum on that type
    cpu: np.ndarray             # (T, K) CPU seconds on each type in the current run
    runnable_time: np.ndarray   # (T,) seconds runnable (running or waiting for a core), current run
    progress: np.ndarray        # (T,) progress counter: CPU seconds scaled to big-core seconds
                                #      with the SF estimate in force while they ran
    alone_rate: np.ndarray      # (T,) the thread's rate (big-core seconds per second) were its
                                #      application alone on the machine with its present TLP
    alone_progress: np.ndarray  # (T,) progress counter in seconds of running alone: CPU time
                                #      scaled with the SF estimate and divided by alone_rate
    work: np.ndarray            # (T,) work done in the current run, big-core seconds (an
                                #      application-reported progress, not a counter estimate)
    run_id: np.ndarray          # (T,) changes when the thread's application restarts
    app_threads: np.ndarray     # (A,) threads of each application
    app_weight: np.ndarray      # (A,) CFS weight of each application
    app_runnable: np.ndarray    # (A,) runnable threads of each application now (its TLP)
    app_start: np.ndarray       # (A,) start time of each application's current run
    placement: np.ndarray       # (T, K) the placement in force before this decision
    rng: np.random.Generator    # seeded: the policy's random choices (the CFS-like placement)

    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)

    @property
    def threads(self) -> int:
        return len(self.app)

    @property
    def types(self) -> int:
        return len(self.counts)


class Policy(ABC):
    """Base class of scheduling policies (see the module documentation)."""

    name = "policy"
    #: how tables and plots name it (default: its name)
    label = ""
    #: quanta between periodic decisions; None: decide only at events (threads start or stop)
    period: int | None = 1
    #: or a period in seconds (rounded to whole quanta, at least one), which then wins
    period_s: float | None = None
    #: a built-in policy whose placements need no checking (a user's are checked every time)
    trusted = False
    #: the SF source this policy uses when the user names none (EQP samples IPC, as published)
    default_sf_source = "true"

    def setup(self, view: View) -> None:
        """Called once before the simulation starts (or the enforcing mode's first quantum)."""

    @abstractmethod
    def decide(self, view: View) -> np.ndarray | None:
        """Where each runnable thread runs this quantum (see the class doc); None: no change."""

    def describe(self) -> str:
        return (self.__doc__ or self.name).strip().splitlines()[0]


def call_policy(policy: Policy, method: str, view: View) -> Any:
    """`policy.setup(view)` or `policy.decide(view)`. A user's policy (not `trusted`) that raises
    is the user's mistake, said in one line naming the policy and the call (it was an "internal
    error" of corecast, exit status 1)."""
    fn = getattr(policy, method)
    if policy.trusted:
        return fn(view)
    try:
        return fn(view)
    except UserError:
        raise
    except Exception as err:
        raise UserError(f"policy {policy.name}: {method}() raised {type(err).__name__}: {err}") from None


def check_placement(policy: Policy, S: Any, threads: int, machine: Machine) -> np.ndarray:
    """A user's placement as a (threads, core types) float array, checked as the class doc
    says (finite, >= 0, at most 1 per thread, at most a type's cores per column); else a
    UserError naming the policy."""
    name = policy.name
    counts = np.asarray(machine.counts, dtype=float)
    try:
        S = np.array(S, dtype=float)
    except (TypeError, ValueError):
        raise UserError(f"policy {name}: decide() must return an array of shares (threads x core types)") from None
    if S.shape != (threads, len(counts)):
        raise UserError(f"policy {name}: placement of shape {S.shape}, expected ({threads}, {len(counts)}) "
                        "(threads x core types)")
    if not np.isfinite(S).all() or (S < 0).any():
        raise UserError(f"policy {name}: placement shares must be finite and >= 0")
    if (S.sum(1) > 1 + 1e-9).any():
        i = int(np.argmax(S.sum(1)))
        raise UserError(f"policy {name}: thread {i} given {S[i].sum():.3g} cores at once (at most 1)")
    over = S.sum(0) > counts + 1e-9
    if over.any():
        k = int(np.argmax(over))
        raise UserError(f"policy {name}: {S[:, k].sum():.3g} threads placed on the "
                        f"{int(counts[k])} '{machine.types[k].name}' cores")
    return S


# ------------------------------------------------------------------------ helpers
def fair_shares(weights: np.ndarray, capacity: float) -> np.ndarray:
    """Shares of `capacity` cores among threads of the given weights: proportional to weight,
    none above 1 (a thread runs on one core at a time), the excess of capped threads handed on
    (water-filling)."""
    w = np.asarray(weights, dtype=float)
    n = len(w)
    if n == 0:
        return w
    if capacity >= n:
        return np.ones(n)
    share = np.zeros(n)
    free = np.ones(n, dtype=bool)
    cap = float(capacity)
    while True:
        wf = w[free]
        # summed in order (np.add.accumulate), as the native loop sums: np.sum's pairwise order
        # would differ in the last bits and tip ties the other way
        s = cap * wf / np.add.accumulate(wf)[-1]
        over = s > 1.0
        if not over.any():
            share[free] = s
            return share
        idx = np.flatnonzero(free)[over]
        share[idx] = 1.0
        free[idx] = False
        cap -= len(idx)
        if cap <= 0 or not free.any():
            return share


def ranked(view: View, order: np.ndarray, *, oversubscribe: str = "slowest") -> np.ndarray:
    """Fill the cores fastest first with the threads in `order`, one thread per core; threads left
    when every core is taken share the slowest type's cores with the threads placed there, by
    weight (the big cores stay dedicated to the threads the policy ranked first)."""
    T, K = view.threads, view.types
    S = np.zeros((T, K))
    order = np.asarray(order, dtype=np.int64)
    pos = 0
    n = len(order)
    for k in range(K):
        c = int(view.counts[k])
        if pos >= n:
            break
        if k == K - 1 and n - pos > c:
            rest = order[pos:]
            S[rest, k] = fair_shares(view.weight[rest], c)
            return S
        take = order[pos:pos + c]
        S[take, k] = 1.0
        pos += len(take)
    return S


def sample_first(view: View, order: np.ndarray) -> np.ndarray:
    """`order` with the threads that IPC sampling wants on a big core moved to the front (at most
    one per big core) and those that want a slow core moved to the back."""
    ns = view.needs_sample
    if not ns.any():
        return order
    big = order[ns[order, 0]][: int(view.counts[0])]
    small = order[ns[order, -1] & ~ns[order, 0]]
    mid = order[~np.isin(order, big) & ~np.isin(order, small)]
    return np.concatenate([big, mid, small])


def spread(view: View, threads: np.ndarray, cores_by_type: np.ndarray | None = None) -> np.ndarray:
    """Rows for `threads` taking turns together on the fastest of the given cores (default: the
    whole machine): one core per thread while there are cores, each thread's time on a type
    being that type's part of the cores used (a group rotating over its cores)."""
    T, K = view.threads, view.types
    S = np.zeros((T, K))
    n = len(threads)
    avail = view.counts if cores_by_type is None else np.asarray(cores_by_type, dtype=float)
    if n == 0 or avail.sum() <= 0:
        return S
    used = np.zeros(K)
    left = float(n)
    for k in range(K):
        used[k] = min(avail[k], left)
        left -= used[k]
    S[threads] = used / n
    return S
