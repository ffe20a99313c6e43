"""Is this machine hybrid, and which CPUs are big? Read from sysfs (a root can be given, for tests
with a fake tree):

1. the PMUs of Intel's hybrid parts: /sys/bus/event_source/devices/cpu_core/cpus (P cores) and
   cpu_atom/cpus (E cores);
2. else per-CPU capacity (/sys/devices/system/cpu/cpuN/cpu_capacity, the scheduler's view on ARM
   big.LITTLE and others): CPUs grouped by capacity, highest first;
3. else per-CPU maximum frequency (cpufreq/cpuinfo_max_freq): grouped likewise.

One group means a symmetric machine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ...collect.topology import format_cpulist, parse_cpulist
from ...errors import UserError


@dataclass
class CpuGroup:
    name: str
    cpus: list[int]
    speed: float               # relative to the fastest group


@dataclass
class Hybrid:
    groups: list[CpuGroup]
    source: str                # "pmu", "cpu_capacity", "cpuinfo_max_freq" or "none"
    online: list[int] = field(default_factory=list)

    @property
    def hybrid(self) -> bool:
        return len(self.groups) > 1

    def describe(self) -> str:
        if not self.hybrid:
            return f"symmetric: {len(self.online)} CPUs alike ({self.source})"
        return "hybrid (" + self.source + "): " + "; ".join(
            f"{g.name} CPUs {format_cpus(g.cpus)} (speed {g.speed:.2g})" for g in self.groups)


def parse_cpus(text: str, what: str = "CPU list") -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11] (the kernel's list format); anything else, or
    nothing, is a one-line mistake."""
    cpus = parse_cpulist(str(text), f"{what} '{text}'")
    if not cpus:
        raise UserError(f"{what} '{text}': empty (give CPUs like 0-3,8)")
    return cpus


def format_cpus(cpus: list[int]) -> str:
    return format_cpulist(sorted(cpus))


def _read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


def detect(root: str | Path = "/") -> Hybrid:
    """The CPU groups of the machine whose sysfs is under `root`."""
    root = Path(root)
    cpu_dir = root / "sys/devices/system/cpu"
    on = _read(cpu_dir / "online")
    online = parse_cpus(on, f"{cpu_dir / 'online'}") if on else \
        sorted(int(p.name[3:]) for p in cpu_dir.glob("cpu[0-9]*") if p.name[3:].isdigit())
    if not online:
        raise UserError(f"{cpu_dir}: no CPUs found")
    pmu = root / "sys/bus/event_source/devices"
    core, atom = _read(pmu / "cpu_core/cpus"), _read(pmu / "cpu_atom/cpus")
    if core and atom:
        big = [c for c in parse_cpus(core, str(pmu / "cpu_core/cpus")) if c in online]
        small = [c for c in parse_cpus(atom, str(pmu / "cpu_atom/cpus")) if c in online]
        if big and small:
            # the E cores' speed is not in the PMU: take capacities or frequencies where present
            speed = _ratio(cpu_dir, big, small)
            return Hybrid([CpuGroup("P", big, 1.0), CpuGroup("E", small, speed)], "pmu", online)
    for name, rel in (("cpu_capacity", "cpu_capacity"), ("cpuinfo_max_freq", "cpufreq/cpuinfo_max_freq")):
        vals = {}
        for c in online:
            v = _read(cpu_dir / f"cpu{c}" / rel)
            if v is None:
                break
            try:
                vals[c] = float(v)
            except ValueError:
                raise UserError(f"{cpu_dir / f'cpu{c}' / rel}: '{v}' is not a number") from None
        else:
            levels = sorted(set(vals.values()), reverse=True)
            if len(levels) > 1 and levels[0] > 0:
                groups = []
                for i, lv in enumerate(levels):
                    nm = "big" if i == 0 else ("small" if len(levels) == 2 else f"level{i}")
                    groups.append(CpuGroup(nm, [c for c in online if vals[c] == lv], lv / levels[0]))
                return Hybrid(groups, name, online)
    return Hybrid([CpuGroup("all", online, 1.0)], "none", online)


def _ratio(cpu_dir: Path, big: list[int], small: list[int]) -> float:
    for rel in ("cpu_capacity", "cpufreq/cpuinfo_max_freq"):
        b, s = _read(cpu_dir / f"cpu{big[0]}" / rel), _read(cpu_dir / f"cpu{small[0]}" / rel)
        try:
            if b and s and float(b) > 0:
                return float(s) / float(b)
        except ValueError:
            continue
    return 0.6          # not published by the kernel: a typical E/P ratio, said where it is used
