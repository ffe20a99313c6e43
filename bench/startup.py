"""The cost of starting corecast: CPU time (user + system, the whole process tree) and wall
time of short commands that do almost nothing, against `perf stat` doing the same, in one run.

Issue 15 measured `corecast stat -- true` at 0.27 s of CPU against perf's 0.01 s: the cost of
starting is to be proportional to what is asked. Each command is run `--reps` times,
interleaved; the median CPU time is printed, and the ratio to perf for the stat commands.
`python -c pass` (this environment's interpreter, with its site packages) is the floor
no Python command can go under (`make setup`'s development install adds nothing to it; meson-
python's editable loader, which it replaced, added ~40 ms and ran ninja at `import corecast`);
`import corecast.cli.stat` is what `stat` imports before it counts anything, and the standard
library's share of it is measured alone (the modules that path imports, nothing of corecast's).
`--installed BIN/corecast` measures a second corecast beside it, e.g. a wheel installed into a
bare virtual environment (`pip wheel . -w W; python3 -m venv V; V/bin/pip install --no-deps
W/corecast-*.whl`: stat needs nothing beyond the standard library).

Issue 26's targets: `corecast usl` on a small file (data/usl/specsdm91.csv, 7 points) under
0.3 s (0.85 s when it imported scipy.stats), and `-h` of any command under 0.1 s: the script
prints `usl`'s figures and the median and slowest `-h` over every command and action.

Issue 28's target: `corecast stat -c task_clock -- true` at most 3x `perf stat -e task-clock --
true`. The development install's `corecast` is the C front end (native/stat/front.c), which
counts that command without Python; the same command through Python (CORECAST_FRONT=python: the
front end hands it over) is measured beside it, and the front end's cost of handing a command
to Python shows in `corecast usl -h` and the others.

Run it without PYTHONDONTWRITEBYTECODE (a user's Python writes and reads byte code; with it set
every start compiles what it imports).

    .venv/bin/python bench/startup.py [--reps N] [--corecast PATH] [--installed PATH]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402


def cpu_seconds(cmd: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """User + system CPU of `cmd` and every descendant it waited for, and its wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=False, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


#: The standard library modules `corecast stat -c task_clock -- true` imports (issue 28), the
#: floor of a counting path written in Python whatever corecast's own modules do.
STAT_STDLIB = ("argparse", "ctypes", "dataclasses", "json", "tomllib", "pathlib", "tempfile", "typing", "threading",
               "select", "mmap", "signal", "math", "struct", "fcntl", "re", "enum", "inspect")
SMALL = Path(__file__).resolve().parent.parent / "data" / "usl" / "specsdm91.csv"


def _every_help(cc: str, reps: int) -> dict[str, float]:
    """Median wall time of `-h` for every command and every action of one."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from gen_cli_docs import actions  # every (command, action) the parser knows
    out: dict[str, float] = {}
    for words in actions():
        cmd = [cc, *words, "-h"]
        out[" ".join(words)] = statistics.median(cpu_seconds(cmd)[1] for _ in range(reps))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--corecast", default=str(Path(sys.executable).with_name("corecast")))
    ap.add_argument("--installed", metavar="PATH", help="a second corecast to measure (e.g. from a wheel)")
    a = ap.parse_args()
    _machine.header("start-up cost: CPU time of short commands (median over repetitions)")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("# note: PYTHONDONTWRITEBYTECODE is set: modules without fresh byte code are compiled at each start")
    cc = a.corecast
    cases: dict[str, list[str]] = {
        "python -c pass (floor)": [sys.executable, "-c", "pass"],
        "python: stat's standard-library imports": [sys.executable, "-c", "import " + ", ".join(STAT_STDLIB)],
        "python: import corecast.cli.stat": [sys.executable, "-c", "import corecast.cli, corecast.cli.stat"],
        "corecast --version": [cc, "--version"],
        "corecast stat -- true": [cc, "stat", "--", "true"],
        "corecast stat -c task_clock -- true": [cc, "stat", "-c", "task_clock", "--", "true"],
        "corecast stat -c task_clock -- true (Python path)": [cc, "stat", "-c", "task_clock", "--", "true"],
        "corecast usl -h": [cc, "usl", "-h"],
        "corecast sched sim -h": [cc, "sched", "sim", "-h"],
        "corecast sim capture -h": [cc, "sim", "capture", "-h"],
        "corecast usl specsdm91.csv (7 points)": [cc, "usl", str(SMALL)],
        "corecast usl specsdm91.csv --json": [cc, "usl", str(SMALL), "--json"],
    }
    envs: dict[str, dict[str, str]] = {
        "corecast stat -c task_clock -- true (Python path)": dict(os.environ, CORECAST_FRONT="python")}
    front = os.path.realpath(cc).endswith("corecast-front")
    print(f"# {cc} is {'the C front end (native/stat/front.c)' if front else 'Python (no C front end)'}")
    if a.installed:
        cases["installed: python -c pass (floor)"] = [str(Path(a.installed).with_name("python")), "-c", "pass"]
        cases["installed: corecast stat -- true"] = [a.installed, "stat", "--", "true"]
        cases["installed: corecast stat -c task_clock -- true"] = [a.installed, "stat", "-c", "task_clock",
                                                                   "--", "true"]
    perf = shutil.which("perf")
    if perf:
        cases["perf stat -- true"] = [perf, "stat", "--", "true"]
        cases["perf stat -e task-clock -- true"] = [perf, "stat", "-e", "task-clock", "--", "true"]
        cases["perf --version"] = [perf, "--version"]
    else:
        print("# perf not installed: no peer figures")
    times: dict[str, list[float]] = {k: [] for k in cases}
    walls: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(a.reps):
        for name, cmd in cases.items():
            cpu, wall = cpu_seconds(cmd, envs.get(name))
            times[name].append(cpu)
            walls[name].append(wall)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'command':<52} {'CPU ms (median)':>16} {'quartiles':>16} {'wall ms (median)':>17}")
    for name, v in times.items():
        q = statistics.quantiles(v, n=4) if len(v) > 1 else [v[0], v[0], v[0]]
        print(f"{name:<52} {1e3 * med[name]:>16.1f} {1e3 * q[0]:>7.1f}-{1e3 * q[2]:<8.1f} "
              f"{1e3 * statistics.median(walls[name]):>17.1f}")
    helps = _every_help(cc, max(3, a.reps // 5))
    worst = max(helps, key=lambda k: helps[k])
    print(f"-h of every command and action ({len(helps)}): median wall {1e3 * statistics.median(helps.values()):.1f} ms, "
          f"slowest {worst!r} {1e3 * helps[worst]:.1f} ms (issue 26's target: under 100 ms)")
    print(f"usl on a 7-point file: median wall {1e3 * statistics.median(walls['corecast usl specsdm91.csv (7 points)']):.1f} ms "
          "(issue 26's target: under 300 ms; 850 ms when it imported scipy.stats)")
    if perf:
        for mine, peer in (("corecast --version", "perf --version"),
                           ("corecast stat -- true", "perf stat -- true"),
                           ("corecast stat -c task_clock -- true", "perf stat -e task-clock -- true"),
                           ("corecast stat -c task_clock -- true (Python path)", "perf stat -e task-clock -- true"),
                           ("python: stat's standard-library imports", "perf stat -e task-clock -- true"),
                           ("python: import corecast.cli.stat", "perf stat -e task-clock -- true"),
                           ("installed: corecast stat -- true", "perf stat -- true"),
                           ("installed: corecast stat -c task_clock -- true", "perf stat -e task-clock -- true")):
            if mine in med and med[peer] > 0:
                print(f"ratio {mine!r} / {peer!r}: {med[mine] / med[peer]:.1f}x")
        for mine in ("corecast stat -c task_clock -- true", "corecast stat -c task_clock -- true (Python path)",
                     "installed: corecast stat -c task_clock -- true"):
            if mine in med:
                r = med[mine] / med["perf stat -e task-clock -- true"]
                w = statistics.median(walls[mine]) / statistics.median(walls["perf stat -e task-clock -- true"])
                print(f"target: {mine!r} at most 3x perf's -- {'met' if max(r, w) <= 3 else 'not met'} "
                      f"({r:.1f}x by CPU time, {w:.1f}x by wall time)")
    floor = med["python -c pass (floor)"]
    print(f"corecast stat -- true above the interpreter's floor: {1e3 * (med['corecast stat -- true'] - floor):.1f} ms")
    print(f"# load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
