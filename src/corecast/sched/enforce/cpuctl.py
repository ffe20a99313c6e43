"""The cgroup v2 `cpu` controller at the root, given back: `corecast sched run`'s emulation
(emulate.CgroupV2) enables it in the root's cgroup.subtree_control when it was not enabled, and
disables it again at the end -- only when this run enabled it, and only when nothing else uses
it by then. Standard library only: this file is also run as a script (`python -I cpuctl.py
MOUNT CGROUP`), the keeper that disables it after corecast died (SIGKILL included).

What counts as "something else uses it" (any one leaves the controller on, and says why):

- another `corecast-sched-*` cgroup at the root (another run relies on it; it saw the
  controller on and will not disable it: the controller stays on after both, a note says so);
- a child of the root that enables `cpu` below itself (its cgroup.subtree_control; the kernel
  would refuse with EBUSY anyway);
- a child of the root whose cpu settings differ from the kernel's defaults (cpu.max,
  cpu.max.burst, cpu.weight, cpu.weight.nice, cpu.idle, cpu.uclamp.*): someone set them, and
  disabling the controller would drop them.

Someone who enabled the controller meanwhile and uses it for nothing the files show (only
cpu.stat's throttling fields, say) cannot be told from this run's own write: that is the one
case where it is disabled under them.

The keeper: started (in a session of its own, ignoring SIGINT and SIGHUP) before the write
that enables the controller, it holds the read end of a pipe that only corecast writes to.
"done" on it: corecast gave the controller back itself, or never enabled it; the keeper exits.
End of file without it (corecast exited without closing the emulation: SIGKILL, a crash) or
SIGTERM: the keeper waits (up to KEEP_WAIT_S) for the emulation's cgroup to be removed -- the
sentinel (corecast.collect.procs) kills what is in it and removes it -- then gives the
controller back by the same rules, and exits.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

KEEP_WAIT_S = 30.0        # how long the keeper waits for the emulation's cgroup to go
PREFIX = "corecast-sched-"

#: The cpu controller's files in a child cgroup, at the kernel's defaults.
DEFAULTS = {"cpu.max": "max 100000", "cpu.max.burst": "0", "cpu.weight": "100", "cpu.weight.nice": "0",
            "cpu.idle": "0", "cpu.uclamp.min": "0.00", "cpu.uclamp.max": "max"}


def enabled(mount: Path) -> set[str] | None:
    """The controllers enabled in `mount`'s cgroup.subtree_control, None when it cannot be read."""
    try:
        return set((mount / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None


def users(mount: Path, own: str) -> list[str]:
    """Who else uses the cpu controller below `mount` (the cgroup named `own` left out)."""
    out = []
    try:
        children = sorted(p for p in mount.iterdir() if p.is_dir() and not p.is_symlink() and p.name != own)
    except OSError as err:
        return [f"{mount} could not be listed ({err.strerror or err})"]
    for c in children:
        if c.name.startswith(PREFIX):
            out.append(f"{c.name} (another corecast sched run)")
            continue
        try:
            if "cpu" in (c / "cgroup.subtree_control").read_text().split():
                out.append(f"{c.name} enables cpu below it")
                continue
        except OSError:
            pass
        for f, default in DEFAULTS.items():
            try:
                v = (c / f).read_text().strip()
            except OSError:
                continue
            if v != default:
                out.append(f"{c.name}/{f} is {v}")
                break
    return out


def give_back(mount: Path, own: str) -> str | None:
    """Disable the cpu controller in `mount`'s cgroup.subtree_control when nothing else uses it:
    None when it was disabled (or is not enabled any more), else why it was left on."""
    ctl = enabled(mount)
    if ctl is None:
        return f"{mount}/cgroup.subtree_control could not be read"
    if "cpu" not in ctl:
        return None
    others = users(mount, own)
    if others:
        return "in use: " + ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
    try:
        (mount / "cgroup.subtree_control").write_text("-cpu")
    except OSError as err:
        return f"the kernel refused to disable it ({err.strerror or err})"
    return None


class _Term(Exception):
    pass


def _on_term(signum: int, frame: object) -> None:
    raise _Term()


def _keep(mount: Path, cgroup: Path) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_term)
    data = b""
    try:
        while True:
            try:
                chunk = os.read(0, 64)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
            if b"done\n" in data:
                return 0
    except _Term:
        pass
    deadline = time.monotonic() + KEEP_WAIT_S
    while cgroup.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    if cgroup.exists():
        print(f"corecast sched: {cgroup} is still there after {KEEP_WAIT_S:.0f} s: the cpu controller is left "
              f"enabled in {mount}/cgroup.subtree_control", file=sys.stderr)
        return 1
    why = give_back(mount, cgroup.name)
    if why:
        print(f"corecast sched: the cpu controller is left enabled in {mount}/cgroup.subtree_control: {why}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(_keep(Path(sys.argv[1]), Path(sys.argv[2])))
