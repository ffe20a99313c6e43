"""corecast sched: scheduling on asymmetric (big/small) multicores.

- descriptions: `machine` (core types: count, speed, power) and `workload` (applications,
  threads, phases with work, speedup factor and parallelism; the papers' experimental rules);
- `engine.simulate`: the event-driven simulator; `policies`: HSP, RR, A-DWRR, EQP, ACFS, an
  energy-aware policy and a CFS-like baseline behind the `policy.Policy` interface;
- `metrics`: slowdowns, ASP, unfairness, STP, ANTT, energy, EDP;
- `sfmodel`: speedup-factor models from per-window counter metrics;
- `experiments`: the PMCTrack paper's case study as data (Figures 8 and 9);
- `enforce`: a user-space scheduler that applies a policy to real programs (the one part here
  that reads /proc and sysfs and calls sched_setaffinity; nothing else imports it).

See docs/sched.md.
"""
from __future__ import annotations

from .engine import Options, SimResult, simulate
from .machine import Machine, load_machine
from .policy import Policy, View, fair_shares, ranked, spread
from .workload import Workload, load_workload

__all__ = ["Machine", "Options", "Policy", "SimResult", "View", "Workload", "fair_shares",
           "load_machine", "load_workload", "ranked", "simulate", "spread"]
