"""AMP scheduling simulator speed: 16 applications, 100 s simulated at 1 ms quanta on 12 cores.

Target (issue 13): under 1 s per policy. The workload: 16 applications on the 2B-10S machine
(2 big + 10 small), single-threaded and parallel ones (1, 1, 2 and 4 threads: 32 threads), two
phases each, restarted until 100 s of simulated time. Prints, per policy, the wall time, the
decisions taken and the events; for the per-quantum policies (A-DWRR, EQP, ACFS) also the pure
Python loop on the same run, as the reference the native loop is held equal to, with the ratio.
No simulator of these policies exists to compare with (the issue says so).
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from _machine import header  # noqa: E402

from corecast.sched import engine  # noqa: E402
from corecast.sched.engine import Options, simulate  # noqa: E402
from corecast.sched.machine import load_machine  # noqa: E402
from corecast.sched.policies import POLICIES, make_policy  # noqa: E402
from corecast.sched.workload import parse_workload  # noqa: E402


def workload():
    apps = []
    for i in range(16):
        th = [1, 1, 2, 4][i % 4]
        apps.append({"name": f"a{i}", "threads": th, "phase": [
            {"work_s": 20 + 3 * i, "sf": 1.3 + 0.15 * (i % 9), "serial_fraction": 0.1 if th > 1 else 0,
             "iterations": 5},
            {"work_s": 15, "sf": 2.5 - 0.1 * (i % 7)}]})
    return parse_workload({"name": "bench16", "rules": {"runs": 1000}, "app": apps})


def main() -> None:
    load = os.getloadavg()
    header("sched simulator speed: 16 applications, 100 s simulated, 1 ms quanta, 12 cores (2B-10S)")
    print(f"# load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    wl = workload()
    m = load_machine("2b-10s")
    print(f"workload: {len(wl.apps)} applications, {wl.threads} threads; machine {m.describe()}")
    print("(an application that has not finished a run by 100 s has no completion time: compared as such)")
    o = Options(quantum=0.001, until=100.0, sf_source="true")
    worst = 0.0
    native = engine._native_loop
    print(f"{'policy':8s} {'seconds':>8s} {'decisions':>10s} {'events':>7s}  python loop (ratio)")
    for name in POLICIES:
        t = time.perf_counter()
        r = simulate(wl, m, make_policy(name), o)
        dt = time.perf_counter() - t
        worst = max(worst, dt)
        ref = ""
        if getattr(make_policy(name), "kind", 0):
            engine._native_loop = lambda sim: None
            t = time.perf_counter()
            r2 = simulate(wl, m, make_policy(name), o)
            dp = time.perf_counter() - t
            engine._native_loop = native
            same = (np.array_equal(r2.completion_times, r.completion_times, equal_nan=True)
                    and r2.energy_j == r.energy_j and r2.decisions == r.decisions)
            ref = f"{dp:.2f} s ({dp / dt:.0f}x slower; same result: {'yes' if same else 'NO'})"
        print(f"{name:8s} {dt:8.3f} {r.decisions:10d} {r.events:7d}  {ref}")
    o2 = Options(quantum=0.001, until=100.0, sf_source="ipc-sampling")
    t = time.perf_counter()
    r = simulate(wl, m, make_policy("eqp"), o2)
    dt = time.perf_counter() - t
    print(f"eqp with IPC sampling: {dt:.3f} s ({r.samples} samples)")
    load = os.getloadavg()
    print(f"# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"slowest policy: {worst:.3f} s (target: under 1 s) -> {'met' if worst < 1.0 else 'NOT met'}")


if __name__ == "__main__":
    main()
