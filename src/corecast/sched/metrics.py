"""What a schedule achieved: per application its completion time and slowdown, and for the
workload ASP, unfairness, STP, ANTT, energy and EDP.

- slowdown_i = CT_i / CT_alone_i, CT_alone_i being the application's completion time alone on the
  whole AMP (its runnable threads taking turns on the fastest cores, one per core: the `alone`
  reference policy, the same for every policy compared);
- ASP (aggregate speedup) = sum_i (CT_small_i / CT_i - 1), CT_small_i being its completion time
  when the same workload runs, under the same rules, on a machine of as many cores all of the
  slowest type (every thread an equal weighted share of every core);
- unfairness = max_i slowdown_i / min_i slowdown_i (1 is perfectly fair);
- STP = sum_i 1 / slowdown_i (system throughput), ANTT = mean_i slowdown_i (average normalised
  turnaround time);
- energy: every core draws its type's active power while it runs a thread and its idle power
  otherwise, over the whole simulated time; EDP = energy x that time.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .engine import Options, SimResult, check_quanta, simulate
from .machine import Machine
from .policies import Alone, FairShare, make_policy
from .policy import Policy
from .workload import Workload


@dataclass
class AppMetrics:
    name: str
    category: str
    threads: int
    runs: int
    completion_time: float
    alone_time: float
    small_time: float

    @property
    def slowdown(self) -> float:
        return self.completion_time / self.alone_time

    @property
    def speedup(self) -> float:
        """Against the all-small machine."""
        return self.small_time / self.completion_time


@dataclass
class Metrics:
    policy: str
    workload: str
    machine: str
    sf_source: str
    apps: list[AppMetrics]
    asp: float
    unfairness: float
    stp: float
    antt: float
    energy_j: float
    time_s: float
    edp: float
    migrations: float = 0.0
    decisions: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "workload": self.workload, "machine": self.machine,
                "sf_source": self.sf_source, "asp": self.asp, "unfairness": self.unfairness,
                "stp": self.stp, "antt": self.antt, "energy_j": self.energy_j, "time_s": self.time_s,
                "edp_js": self.edp, "migrations": self.migrations, "decisions": self.decisions,
                "apps": [{"name": a.name, "category": a.category, "threads": a.threads, "runs": a.runs,
                          "completion_time_s": a.completion_time, "alone_time_s": a.alone_time,
                          "all_small_time_s": a.small_time, "slowdown": a.slowdown,
                          "speedup_vs_small": a.speedup} for a in self.apps],
                "notes": list(self.notes)}


def compute(result: SimResult, alone: np.ndarray, small: np.ndarray) -> Metrics:
    """The metrics of a simulation, given each application's time alone and on the all-small
    machine (pure arithmetic: see the module documentation for the formulas)."""
    ct = result.completion_times
    alone = np.asarray(alone, dtype=float)
    small = np.asarray(small, dtype=float)
    sd = ct / alone
    apps = [AppMetrics(a.name, a.category, a.threads, len(a.completion_times), float(c), float(al), float(sm))
            for a, c, al, sm in zip(result.apps, ct, alone, small)]
    asp = float(np.sum(small / ct - 1.0))
    unf = float(sd.max() / sd.min()) if len(sd) else math.nan
    return Metrics(result.policy, result.workload, result.machine, result.sf_source, apps, asp, unf,
                   float(np.sum(1.0 / sd)), float(np.mean(sd)), result.energy_j, result.end_time,
                   result.energy_j * result.end_time, result.migrations, result.decisions,
                   list(result.notes))


class References:
    """Completion times alone and on the all-small machine, computed once per workload and
    machine and shared by every policy compared on them."""

    def __init__(self, workload: Workload, machine: Machine, options: Options):
        self.wl, self.m = workload, machine
        ref = Options(quantum=options.quantum, migration_cost=options.migration_cost,
                      sf_source="true", seed=options.seed, max_time=options.max_time)
        self._ref = ref
        check_quanta(workload, machine.all_of(-1), ref)     # the longest reference: refused before any run
        self._alone: np.ndarray | None = None
        self._small: np.ndarray | None = None

    @property
    def alone(self) -> np.ndarray:
        if self._alone is None:
            one = self.wl.with_rules(runs=1, restart=False)
            self._alone = np.array([simulate(one.only(i), self.m, Alone(), self._ref).completion_times[0]
                                    for i in range(len(self.wl.apps))])
        return self._alone

    @property
    def small(self) -> np.ndarray:
        if self._small is None:
            self._small = simulate(self.wl, self.m.all_of(-1), FairShare(), self._ref).completion_times
        return self._small


def evaluate(workload: Workload, machine: Machine, policy: str | Policy, options: Options | None = None,
             refs: References | None = None) -> tuple[SimResult, Metrics]:
    """Simulate `workload` under `policy` and compute its metrics."""
    o = options or Options()
    pol = make_policy(policy) if isinstance(policy, str) else policy
    res = simulate(workload, machine, pol, o)
    refs = refs or References(workload, machine, o)
    bad = [a.name for a in res.apps if not a.completion_times]
    met = compute(res, refs.alone, refs.small)
    if bad:
        met.notes.append(f"no completed run: {', '.join(bad)}")
    return res, met
