"""What the kernel says about its events: the perf PMUs under /sys/bus/event_source/devices
with the `format/` files that place each term in the config words (read by the perf form
`pmu/event=..,umask=../` of `spec`), and the tracepoints under tracefs."""
from __future__ import annotations

import os
import re
from pathlib import Path

from ...errors import UserError
from ...native import system_program

SYSFS_PMUS = Path("/sys/bus/event_source/devices")
TRACEFS_DIRS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))


def read_format(pmu_dir: Path) -> dict[str, list[tuple[str, int, int]]]:
    """A PMU's `format/` files: each term (event, umask, ...) and the config bits it fills."""
    fmt: dict[str, list[tuple[str, int, int]]] = {}
    fdir = pmu_dir / "format"
    if not fdir.is_dir():
        return fmt
    for f in fdir.iterdir():
        try:
            text = f.read_text().strip()
        except OSError:
            continue
        m = re.fullmatch(r"(config\d?):([\d,\-]+)", text)
        if not m:
            continue
        ranges = []
        for part in m.group(2).split(","):
            lo, _, hi = part.partition("-")
            ranges.append((m.group(1), int(lo), int(hi or lo)))
        fmt[f.name] = ranges
    return fmt


def place(value: int, ranges: list[tuple[str, int, int]], term: str, spec: str) -> dict[str, int]:
    """`value` of `term` spread over its bit ranges: {config field: bits}; too wide is a mistake in `spec`."""
    out: dict[str, int] = {}
    width = sum(hi - lo + 1 for _, lo, hi in ranges)
    if value >> width:
        raise UserError(f"event spec '{spec}': {term}={value:#x} does not fit in its {width} bits")
    for field_name, lo, hi in ranges:
        n = hi - lo + 1
        out[field_name] = out.get(field_name, 0) | (value & ((1 << n) - 1)) << lo
        value >>= n
    return out


def sysfs_pmus() -> list[str]:
    """The perf PMUs of this machine, by name."""
    try:
        return sorted(p.name for p in SYSFS_PMUS.iterdir())
    except OSError:
        return []


def tracefs_dir(mount: bool = True) -> Path | None:
    """Where tracefs is; mounts it at /sys/kernel/tracing when it is not (as perf does), if we
    may. A mount of ours is named to corecast's sentinel first, which unmounts it when corecast
    ends, however it ends (perf leaves it mounted; corecast leaves no mount behind)."""
    for d in TRACEFS_DIRS:
        if (d / "events").is_dir():
            return d
    tool = system_program("mount") if mount and os.geteuid() == 0 and TRACEFS_DIRS[0].is_dir() else None
    if tool:                              # never a user's `mount`, nor the current folder's, as root
        import subprocess
        from ..procs import track_mount, untrack    # here: most readers of this module mount nothing
        track_mount(TRACEFS_DIRS[0])
        res = subprocess.run([tool, "-t", "tracefs", "nodev", str(TRACEFS_DIRS[0])], capture_output=True,
                             check=False)
        if (TRACEFS_DIRS[0] / "events").is_dir():
            if res.returncode != 0:           # mounted meanwhile by someone else: theirs to keep
                untrack(TRACEFS_DIRS[0])
            return TRACEFS_DIRS[0]
        untrack(TRACEFS_DIRS[0])
    return None


def tracepoint_id(system: str, event: str) -> int | None:
    d = tracefs_dir()
    if d is None:
        return None
    try:
        return int((d / "events" / system / event / "id").read_text().strip())
    except (OSError, ValueError):
        return None
