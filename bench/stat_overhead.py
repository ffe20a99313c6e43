"""Overhead of `corecast stat -T 0.01` on a CPU-bound workload, against the workload alone and
against `perf stat -I 10` with the same software events, in one run, in two scenarios:

- one thread: the workload keeps one CPU busy and the monitor runs beside it on another (on a
  VM whose vCPUs share host cores, the monitor still slows it through the shared core);
- every CPU busy: as many threads as CPUs, so whatever CPU a monitor uses comes straight out
  of the workload (the hard case). corecast then writes one row per thread per tick (perf one
  line per event per interval for the whole process).

The workload times its own compute (clock_gettime around fixed work: one loop per thread, from
before the threads start to after they all end), so the figure is the slowdown the monitor
inflicts on the program, not the tools' start-up. Runs are interleaved and repeated; medians
are compared as ratios. corecast runs as by default (threads followed through the kernel's task
records) and with `--threads poll` (per-thread counters only, threads found in /proc).

    .venv/bin/python bench/stat_overhead.py [--reps N] [--iters N] [--scenario one|all|both]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

WORKLOAD = r"""
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static unsigned long n;
static void *work(void *arg) {
    volatile unsigned long x = 0;
    for (unsigned long i = 0; i < n; i++) x += i ^ (x >> 3);
    return arg;
}
int main(int c, char **v) {
    n = strtoul(v[1], 0, 10);
    int threads = c > 2 ? atoi(v[2]) : 1;
    pthread_t t[256];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (threads <= 1) {
        work(0);                         /* the main thread itself: no thread is created */
    } else {
        for (int i = 0; i < threads && i < 256; i++) pthread_create(&t[i], 0, work, 0);
        for (int i = 0; i < threads && i < 256; i++) pthread_join(t[i], 0);
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.6f\n", (b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9);
    return 0;
}
"""
EVENTS_CORECAST = "task_clock,context_switches,page_faults"
EVENTS_PERF = "task-clock,context-switches,page-faults"


def scenario(title: str, prog: list[str], d: Path, reps: int, perf: str | None) -> None:
    variants = {
        "alone": prog,
        "corecast stat -T 0.01": [sys.executable, "-m", "corecast", "stat", "-c", EVENTS_CORECAST,
                                  "-T", "0.01", "-o", str(d / "c.out"), "--", *prog],
        "  ... --threads poll": [sys.executable, "-m", "corecast", "stat", "-c", EVENTS_CORECAST,
                                 "-T", "0.01", "--threads", "poll", "-o", str(d / "p2.out"), "--", *prog],
    }
    if perf:
        variants["perf stat -I 10"] = [perf, "stat", "-I", "10", "-e", EVENTS_PERF, "-o",
                                       str(d / "p.out"), "--", *prog]
    times: dict[str, list[float]] = {k: [] for k in variants}
    for _ in range(reps):
        for name, argv in variants.items():
            r = subprocess.run(argv, capture_output=True, text=True)
            if r.returncode != 0:
                raise SystemExit(f"# {name} failed: {r.stderr.strip()[:200]}")
            times[name].append(float(r.stdout.strip().splitlines()[-1]))
    rows = (d / "c.out").read_text().count(" tick")
    base = statistics.median(times["alone"])
    print(f"## {title}: {' '.join(Path(prog[0]).name if i == 0 else a for i, a in enumerate(prog))}")
    print(f"{'variant':<26} {'median s':>10} {'min s':>8} {'q1 s':>8} {'q3 s':>8} {'ratio to alone':>15}")
    for name, ts in times.items():
        med = statistics.median(ts)
        q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [med, med, med]
        print(f"{name:<26} {med:>10.4f} {min(ts):>8.4f} {q[0]:>8.4f} {q[2]:>8.4f} {med / base:>15.4f}")
    cc = statistics.median(times["corecast stat -T 0.01"]) / base
    cp = statistics.median(times["  ... --threads poll"]) / base
    print(f"corecast overhead: {100 * (cc - 1):+.2f}% (target: within 1%); with --threads poll: {100 * (cp - 1):+.2f}%")
    if "perf stat -I 10" in times:
        pp = statistics.median(times["perf stat -I 10"]) / base
        print(f"perf overhead:     {100 * (pp - 1):+.2f}%; corecast/perf ratio {cc / pp:.4f}")
    print(f"corecast rows in the last run: {rows} tick rows")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=11)
    ap.add_argument("--iters", type=int, default=600_000_000)
    ap.add_argument("--scenario", choices=["one", "all", "both"], default="both")
    args = ap.parse_args()
    _machine.header("stat overhead: CPU-bound workload alone / under corecast stat -T 0.01 / under perf stat -I 10")
    perf = shutil.which("perf")
    if not perf:
        print("# perf not found (apt-get install linux-perf): peer skipped")
    ncpu = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "w.c"
        src.write_text(WORKLOAD)
        exe = Path(d) / "w"
        subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(src)], check=True)
        if args.scenario in ("one", "both"):
            scenario("one thread, a CPU free for the monitor", [str(exe), str(args.iters)], Path(d), args.reps, perf)
        if args.scenario in ("all", "both"):
            scenario(f"every CPU busy ({ncpu} threads)", [str(exe), str(args.iters), str(ncpu)], Path(d),
                     args.reps, perf)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
