"""The memory-latency probe: does its meter see memory contention, and what does it cost?

A daemon runs with the probe only (`--meters mem_latency,mem_probe_latency,mem_probe_cost`,
one 2 ms burst every --period, default 0.25 s, pinned to the last CPU). Phases of --phase
seconds (default 6) alternate, --rounds times: quiet, then corecast-membw (STREAM's triad, one
thread pinned to CPU 0: a bandwidth load on the memory the probe walks). For each phase the
median of the probe's latency ratio (over the idle latency, measured by the probe at start)
is printed, and the probe's own cost (mem_probe_cost: the daemon's CPU time during its bursts
over the time elapsed), with the machine's load.

    .venv/bin/python bench/meters_probe.py [--rounds 3] [--phase 6] [--period 0.25]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.meters import Board  # noqa: E402
from corecast.native import native_path  # noqa: E402


def sample(b: Board, seconds: float, step: float = 0.1) -> list[float]:
    out, end, last = [], time.monotonic() + seconds, None
    while time.monotonic() < end:
        r = b.read("mem_latency")
        if r.current is not None and r.current != last:
            out.append(r.current)
            last = r.current
        time.sleep(step)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--phase", type=float, default=6.0)
    ap.add_argument("--period", type=float, default=0.25)
    a = ap.parse_args()
    _machine.header("corecast meters: the memory-latency probe, quiet against a bandwidth load")
    print(f"# load before: {os.getloadavg()}")
    name = f"bench-probe-{os.getpid()}"
    d = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", name, "--interval", "10ms",
                          "--meters", "mem_latency,mem_probe_latency,mem_probe_cost", "--probe-period",
                          str(a.period)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    res: dict[str, list[float]] = {"quiet": [], "membw on CPU 0": []}
    try:
        b = None
        for _ in range(600):
            try:
                b = Board.open(name)
                if b.read("mem_latency").current is not None:
                    break
                b.close()
                b = None
            except Exception:
                pass
            time.sleep(0.1)
        if b is None:
            raise SystemExit("the probe gave no value in 60 s")
        print(f"# {b.meter('mem_latency').source}")
        for i in range(a.rounds):
            q = sample(b, a.phase)
            res["quiet"] += q
            load = subprocess.Popen(["taskset", "-c", "0", str(native_path("corecast-membw")), "-t", "1", "--mb",
                                     "64", "--iters", "100000"], stdout=subprocess.DEVNULL)
            time.sleep(0.5)
            m = sample(b, a.phase)
            load.terminate()
            load.wait()
            res["membw on CPU 0"] += m
            print(f"  round {i + 1}: quiet {statistics.median(q):.3f}, membw {statistics.median(m):.3f} "
                  f"({len(q)}, {len(m)} bursts)", flush=True)
        cost = b.read("mem_probe_cost").current
        lat = b.read("mem_probe_latency").current
        b.close()
    finally:
        d.terminate()
        d.wait(timeout=30)
    print(f"# load after: {os.getloadavg()}")
    for k, v in res.items():
        q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3
        print(f"{k:16s} latency over idle: median {statistics.median(v):.3f}  quartiles {q[0]:.3f} {q[2]:.3f}  "
              f"min {min(v):.3f}  max {max(v):.3f}  ({len(v)} bursts)")
    print(f"ratio of the medians, loaded / quiet: {statistics.median(res['membw on CPU 0']) / statistics.median(res['quiet']):.2f}")
    print(f"the probe's cost: {cost * 100:.2f}% of one CPU at one burst every {a.period:g} s "
          f"(last latency {lat * 1e9:.1f} ns)")


if __name__ == "__main__":
    main()
