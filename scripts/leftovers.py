#!/usr/bin/env python3
"""Kill corecast at random moments and count what it leaves behind (issue 25's proof).

    python scripts/leftovers.py [--kills 100] [--commands stat,sched,measure] [--signal KILL]
                                [--max-delay 1.5] [--seed N]

Each trial starts one command that runs a process tree -- a program with a child, a grandchild
and a child that left with setsid -- with a unique marker in its environment and a private
temporary folder (TMPDIR), sends the signal after a random delay (0 to --max-delay seconds,
which covers corecast's start, the program's start, its run and, for `measure`, the moments
between runs), and then looks for

- processes: any process whose environment carries the trial's marker (corecast itself,
  corecast-launch, corecast-sentinel, the program and every descendant inherit it);
- cgroups: `corecast-sched-PID` under every mounted cgroup hierarchy;
- temporary files: anything in the trial's TMPDIR (measure's run folders, stat's region file).

Leftovers are waited for up to 10 s (the supervisor and the sentinel clean up after corecast's
death, not before it), counted, and then removed so that the next trial starts clean. `sched`
needs root, two CPUs and a cgroup cpu controller; it is skipped (and said) elsewhere.

Prints one line per command: trials, trials with leftovers, and the leftover processes,
cgroups and files in all. Exit status 1 if anything was left.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

MARK = "CORECAST_LEFTOVER_MARK"
#: A program with a child, a grandchild and a child that escaped its process group with setsid.
TREE = "setsid sh -c 'sleep 60' & sh -c 'sleep 60 & sleep 60' & sleep 60"
#: For measure: the same tree in many short runs, so kills land between runs too.
SHORT_TREE = "setsid sh -c 'sleep 60' & sh -c 'sleep 60' & sleep 0.05"
COMMANDS = ("stat", "sched", "measure")


def command(kind: str, folder: Path) -> list[str]:
    py = [sys.executable, "-m", "corecast"]
    if kind == "stat":
        return [*py, "stat", "-c", "task_clock", "-T", "0.2", "--", "sh", "-c", TREE]
    if kind == "sched":
        cpus = sorted(os.sched_getaffinity(0))
        return [*py, "sched", "run", "--policy", "rr", "--big", str(cpus[0]), "--small", str(cpus[1]),
                "--emulate", "cgroup", "--quantum", "20ms", "--", f"sh -c \"{TREE}\""]
    if kind == "measure":
        return [*py, "measure", "-q", "--cores", "1", "--reps", "100", "--warmup", "0", "-o",
                str(folder / "c.db"), "--", "sh", "-c", SHORT_TREE]
    raise ValueError(kind)


def sched_possible() -> str | None:
    """Why `sched run --emulate cgroup` cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs two CPUs"
    if not cgroup_mounts():
        return "no cgroup file system"
    return None


def cgroup_mounts() -> list[Path]:
    try:
        text = Path("/proc/self/mounts").read_text()
    except OSError:
        return []
    return [Path(f[1]) for f in (ln.split() for ln in text.splitlines()) if len(f) >= 3
            and f[2] in ("cgroup", "cgroup2")]


def marked(token: str) -> list[int]:
    """Every process (not this one) whose environment carries the marker."""
    from corecast.collect import procs
    return procs.carrying(MARK, token)


def sched_cgroups(pid: int) -> list[Path]:
    found = []
    for m in cgroup_mounts():
        for d in (m / f"corecast-sched-{pid}",):
            if d.exists():
                found.append(d)
        try:                                   # v1: under this process's own cgroup, one level down
            for sub in m.iterdir():
                if sub.is_dir() and (sub / f"corecast-sched-{pid}").exists():
                    found.append(sub / f"corecast-sched-{pid}")
        except OSError:
            pass
    return found


@dataclass
class Left:
    processes: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes or self.cgroups or self.files)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def trial(kind: str, delay: float, sig: int, root: Path, settle_s: float = 10.0) -> Left:
    """One kill; what was left (and is removed before returning)."""
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    folder = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=root))
    tmp = folder / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), **{MARK: token})
    p = subprocess.Popen(command(kind, folder), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, cwd=folder)
    time.sleep(delay)
    p.send_signal(sig)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    deadline = time.monotonic() + settle_s
    while time.monotonic() < deadline:
        if not marked(token) and not sched_cgroups(p.pid) and not any(tmp.iterdir()):
            break
        time.sleep(0.05)
    left = Left([f"{q} {_cmdline(q)}" for q in marked(token)], [str(c) for c in sched_cgroups(p.pid)],
                [x.name for x in tmp.iterdir()])
    # clean up whatever was left, so that the next trial starts from nothing
    for q in marked(token):
        try:
            os.kill(q, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10.0              # killed processes leave their cgroups as they die
    while sched_cgroups(p.pid) and time.monotonic() < deadline:
        for c in sched_cgroups(p.pid):
            for d in [*sorted((x for x in c.rglob("*") if x.is_dir()), key=lambda x: -len(x.parts)), c]:
                try:
                    d.rmdir()
                except OSError:
                    pass
        time.sleep(0.05)
    shutil.rmtree(folder, ignore_errors=True)
    return left


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--commands", default=",".join(COMMANDS))
    ap.add_argument("--signal", default="KILL")
    ap.add_argument("--max-delay", type=float, default=1.5)
    ap.add_argument("--seed", type=int, default=None)
    a = ap.parse_args(argv)
    sig = getattr(signal, "SIG" + a.signal.upper().removeprefix("SIG"))
    seed = a.seed if a.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"leftovers: {a.kills} x SIG{a.signal.upper().removeprefix('SIG')} per command at random delays "
          f"0-{a.max_delay:g} s (seed {seed})")
    bad = 0
    root = Path(tempfile.mkdtemp(prefix="corecast-leftovers-"))
    try:
        for kind in a.commands.split(","):
            if kind == "sched" and sched_possible():
                print(f"{kind:8s} skipped: {sched_possible()}")
                continue
            n = dirty = procs = cgroups = files = 0
            for _ in range(a.kills):
                left = trial(kind, rng.uniform(0, a.max_delay), sig, root)
                n += 1
                if left:
                    dirty += 1
                    procs += len(left.processes)
                    cgroups += len(left.cgroups)
                    files += len(left.files)
                    print(f"  {kind}: left {left}", flush=True)
            print(f"{kind:8s} {n} kills: {dirty} with leftovers; {procs} processes, {cgroups} cgroups, "
                  f"{files} temporary files left", flush=True)
            bad += dirty
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
