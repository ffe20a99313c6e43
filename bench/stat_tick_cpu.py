"""The monitor's own CPU time per tick: `corecast stat -T 0.01` against `perf stat -I 10` with the
same software events, both over `sleep S` (so only the monitor runs), in one run.

Each tool's CPU (task-clock, counted by an outer `perf stat`, which includes the monitored
`sleep`) is taken at the 10 ms interval and at an interval longer than the run; the difference
over the number of ticks is the CPU of one tick, start-up excluded. Runs are interleaved and
repeated; medians are compared as a ratio.

    .venv/bin/python bench/stat_tick_cpu.py [--reps N] [--seconds S] [--format table|csv|json]
"""
from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

EVENTS_CORECAST = "task_clock,context_switches,page_faults"
EVENTS_PERF = "task-clock,context-switches,page-faults"


def task_clock_ms(perf: str, argv: list[str]) -> float:
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as f:
        r = subprocess.run([perf, "stat", "-x,", "-e", "task-clock", "-o", f.name, "--", *argv],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"# failed: {' '.join(argv[:6])}...: {r.stderr.strip()[:300]}")
        for line in f.read().splitlines():
            parts = line.split(",")
            if len(parts) > 2 and parts[2].startswith("task-clock"):
                return float(parts[0])
    raise SystemExit("# no task-clock line from perf stat")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--format", default="table", choices=["table", "csv", "json"])
    args = ap.parse_args()
    _machine.header(f"stat CPU per tick: corecast stat -T 0.01 vs perf stat -I 10 over sleep {args.seconds:g}")
    perf = shutil.which("perf")
    if not perf:
        print("# perf not found (apt-get install linux-perf): nothing to compare with")
        return 1
    ticks = round(args.seconds / 0.01)
    long_s = f"{args.seconds * 10:g}"
    with tempfile.TemporaryDirectory() as d:
        sleep = ["sleep", f"{args.seconds:g}"]
        cc = [sys.executable, "-m", "corecast", "stat", "-c", EVENTS_CORECAST, "--format", args.format,
              "-o", str(Path(d) / "c.out")]
        pf = [perf, "stat", "-e", EVENTS_PERF, "-o", str(Path(d) / "p.out")]
        variants = {
            "corecast -T 0.01": cc + ["-T", "0.01", "--", *sleep],
            "corecast -T long": cc + ["-T", long_s, "--", *sleep],
            "perf -I 10": pf + ["-I", "10", "--", *sleep],
            "perf -I long": pf + ["-I", str(int(float(long_s) * 1000)), "--", *sleep],
        }
        ms: dict[str, list[float]] = {k: [] for k in variants}
        for _ in range(args.reps):
            for name, argv in variants.items():
                ms[name].append(task_clock_ms(perf, argv))
    med = {k: statistics.median(v) for k, v in ms.items()}
    print(f"{'variant':<20} {'median ms CPU':>14} {'runs':>30}")
    for k, v in ms.items():
        print(f"{k:<20} {med[k]:>14.1f} {' '.join(f'{x:.0f}' for x in v):>30}")
    cc_tick = (med["corecast -T 0.01"] - med["corecast -T long"]) * 1000 / ticks
    pf_tick = (med["perf -I 10"] - med["perf -I long"]) * 1000 / ticks
    print(f"CPU per tick ({ticks} ticks, start-up excluded): corecast {cc_tick:.1f} us, perf {pf_tick:.1f} us; "
          f"corecast/perf {cc_tick / pf_tick:.3f}")
    print(f"CPU of the whole 10 ms run: corecast {med['corecast -T 0.01']:.0f} ms, perf {med['perf -I 10']:.0f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
