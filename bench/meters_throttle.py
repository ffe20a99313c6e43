"""Throttling measured: does obeying corecast meters' advice help a program that loses
throughput when oversubscribed?

The workload is corecast-pool (workloads/pool): THREADS workers take tasks from one queue under
a spin lock; with more workers than CPUs the scheduler preempts lock holders and the others
spin through their time slices. Under a running daemon (--interval 10ms, a trigger on the
node's psi_cpu_some feeding the advice), it runs --runs times (default 10) with
`--throttle` (each worker calls cc_throttle_point() before a task: workers beyond
allowed_workers sleep) and as many times without, interleaved; and, as the reference, with as
many workers as CPUs. Medians, quartiles and min-max of the throughput are printed, and the
ratio of the medians with and without throttling.

    .venv/bin/python bench/meters_throttle.py [--runs 10] [--threads 8] [--tasks 100000]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.meters import Board  # noqa: E402
from corecast.native import native_path  # noqa: E402

TRIGGERS = """
[advice]
policy = "halve"
min_workers = 1

[[trigger]]
name = "cpu-pressure"
meter = "psi_cpu_some"
low = 0.3
high = 0.8
dwell = "200ms"
"""


def pool(args: list[str], env: dict) -> tuple[float, str]:
    r = subprocess.run([str(native_path("corecast-pool")), *args], capture_output=True, text=True, env=env,
                       timeout=600, check=True)
    return float(re.search(r"throughput: ([\d.]+)", r.stdout).group(1)), r.stdout


def spread(v: list[float]) -> str:
    q = statistics.quantiles(v, n=4) if len(v) >= 2 else [v[0]] * 3
    return (f"median {statistics.median(v):10.0f}  quartiles {q[0]:10.0f} {q[2]:10.0f}  "
            f"min {min(v):10.0f}  max {max(v):10.0f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--tasks", type=int, default=100000)
    a = ap.parse_args()
    _machine.header("corecast meters: corecast-pool throughput with and without cc_throttle_point()")
    print(f"# load before: {os.getloadavg()}")
    name = f"bench-throttle-{os.getpid()}"
    tmp = Path(tempfile.mkdtemp())
    (tmp / "t.toml").write_text(TRIGGERS)
    d = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", name, "--interval", "10ms",
                          "--triggers", str(tmp / "t.toml")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    try:
        for _ in range(300):
            try:
                with Board.open(name) as b:
                    if b.state == "running":
                        break
            except Exception:
                pass
            time.sleep(0.05)
        env = dict(os.environ, CORECAST_METERS=name)
        cpus = os.cpu_count() or 1
        base = ["-t", str(a.threads), "-n", str(a.tasks)]
        res: dict[str, list[float]] = {"without": [], "with": [], f"{cpus} workers (reference)": []}
        allowed, slept = [], []
        for i in range(a.runs):
            x, _ = pool(base, env)
            res["without"].append(x)
            x, out = pool(base + ["--throttle"], env)
            res["with"].append(x)
            allowed.append(int(re.search(r"allowed_workers: (-?\d+)", out).group(1)))
            slept.append(int(re.search(r"slept: (\d+)", out).group(1)))
            x, _ = pool(["-t", str(cpus), "-n", str(a.tasks)], env)
            res[f"{cpus} workers (reference)"].append(x)
            print(f"  run {i + 1}: without {res['without'][-1]:.0f}, with {res['with'][-1]:.0f} "
                  f"(allowed_workers {allowed[-1]} at start, slept {slept[-1]}), "
                  f"{cpus} workers {res[f'{cpus} workers (reference)'][-1]:.0f} tasks/s", flush=True)
    finally:
        d.terminate()
        _, err = d.communicate(timeout=30)
    print(f"# load after: {os.getloadavg()}")
    print(f"# {a.threads} workers, {a.tasks} tasks, {cpus} CPUs; tasks/s:")
    for k, v in res.items():
        print(f"{k:24s} {spread(v)}")
    print(f"ratio of medians with/without cc_throttle_point(): "
          f"{statistics.median(res['with']) / statistics.median(res['without']):.2f}")
    print(f"allowed_workers seen at the start of the throttled runs: {sorted(set(allowed))}")
    changes = [line for line in err.splitlines() if "->" in line]
    print(f"trigger and advice changes during the runs: {len(changes)}")
    for line in changes[:10]:
        print("  " + line)


if __name__ == "__main__":
    main()
