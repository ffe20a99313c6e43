"""Peak bandwidth of `corecast chase` (many chains on every CPU) against a STREAM-like triad
measured in the same run (bench/chase_triad.c, compiled here with gcc -O2).

Target (issue 11): the chase's peak within 25% of the triad's bandwidth. The triad is counted as
STREAM counts it (24 bytes per element: two reads and a write, the write-allocate read left
out) and reported as its best repetition, as STREAM does; the chase's peak is its best point
(median of its samples, over the time the threads ran). Both are pinned to the same CPUs, in
the order `corecast measure` uses. The load average is printed before and after: on a shared
machine both figures fall.

    .venv/bin/python bench/chase_peak.py [--array-mib 128] [--reps 10] [--chains 16,32,48,64]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

from corecast.collect import chase as C  # noqa: E402
from corecast.collect.chase.run import parse_counts  # noqa: E402
from corecast.model import memory as M  # noqa: E402

HERE = Path(__file__).resolve().parent


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def triad(cpus: list[int], mib: int, reps: int) -> tuple[float, float]:
    """Best bandwidth of the triad, bytes/s (STREAM's count: 24 bytes per element), over the
    wall time (STREAM's way) and over the time each thread ran (corecast chase's way)."""
    if shutil.which("gcc") is None:
        raise SystemExit("needs gcc")
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "triad"
        subprocess.run(["gcc", "-O2", "-std=gnu11", "-pthread", "-o", str(exe), str(HERE / "chase_triad.c")],
                       check=True)
        n = (mib << 20) // 8
        out = subprocess.run([str(exe), str(n), str(reps), *map(str, cpus)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    rows = [line.split() for line in out[1:]]          # the first repetition warms up, as STREAM's
    return 24 * n / min(float(r[0]) for r in rows) * 1e9, max(float(r[1]) for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--array-mib", type=int, default=128, help="MiB per triad array (three of them)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--chains", default="16,32,48,64")
    ap.add_argument("--size", default="256MiB")
    a = ap.parse_args()
    _machine.header("corecast chase: peak bandwidth against a STREAM-like triad, same run")
    print(f"# before: {load()}")
    ses = C.Session(C.Settings(duration_s=0.5))
    cpus = ses.plan.cpus
    tri1 = triad(cpus, a.array_mib, a.reps)
    run = C.concurrency_sweep(ses, [len(cpus)], parse_counts(a.chains, "--chains"))
    res = M.analyse({"concurrency": C.to_dataset(run)})
    tri2 = triad(cpus, a.array_mib, a.reps)
    wall, cpu = max(tri1[0], tri2[0]), max(tri1[1], tri2[1])
    peak = res.concurrency.peak_bandwidth_bytes_s
    print(f"CPUs {cpus}; triad arrays 3 x {a.array_mib} MiB, best of {a.reps} repetitions, run before and after "
          f"the chase: {tri1[0] / 1e9:.2f} and {tri2[0] / 1e9:.2f} GB/s over the wall time, {tri1[1] / 1e9:.2f} and "
          f"{tri2[1] / 1e9:.2f} GB/s over the time the threads ran")
    for p in run.points:
        print(f"  chase {p.threads} threads x {p.chains:2d} chains: {p.bandwidth_bytes_s / 1e9:6.2f} GB/s, "
              f"latency {p.latency_ns:6.1f} ns, threads ran {p.cpu_share:.0%} of the time, steal "
              f"{'-' if p.steal is None else f'{p.steal:.1%}'}")
    shared = min(p.cpu_share for p in run.points) < 0.9
    for label, tri in (("the time the threads ran", cpu), ("the wall time (STREAM)", wall)):
        ratio = peak / tri
        print(f"chase peak {peak / 1e9:.2f} GB/s ({res.concurrency.peak_at[1]} chains per thread) / triad over "
              f"{label} {tri / 1e9:.2f} GB/s = {ratio:.2f} (target 0.75-1.25: "
              f"{'met' if 0.75 <= ratio <= 1.25 else 'NOT met'})")
    if shared:
        print("  other programs shared these CPUs: compare on the time the threads ran (the chase's base)")
    for w in run.warnings:
        print(f"  note: {w}")
    print(f"# after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
