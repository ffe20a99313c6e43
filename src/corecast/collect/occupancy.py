"""A running program's last-level cache on real hardware, through Linux resctrl: its occupancy
(Intel CMT, AMD PQoS monitoring) and its miss curve built by restricting the cache ways it may
fill (Intel CAT, AMD PQoS allocation), as the PMCTrack paper's third case study did.

For each way count asked for, the program runs once in a resctrl control group of its own
(`/sys/fs/resctrl/corecast-mrc-PID`) whose schemata gives it only that many ways of every L3
domain (a contiguous mask from the lowest way; with CDP, code and data alike). The program is
placed in the group between fork and exec, so every thread and child it makes is in it from the
first instruction. Each run is monitored through a monitoring group of its own under the control
group (`mon_groups/runN`): a fresh RMID, which the kernel hands out only once the lines an earlier
owner left in the cache have gone (its limbo list), so a run does not inherit the occupancy of
the run before it. While it runs, its `llc_occupancy` (summed over the L3 domains) is sampled; at the end the group's memory traffic (`mbm_total_bytes`, the lines the last level
fetched and wrote back) and, where a PMU counts them, its instructions and last-level misses.
The curve is the misses -- or the memory traffic, without a PMU -- against the cache bytes the
ways give (from the group's `size` file, else the L3's size from sysfs times ways / all ways).

Other programs keep the whole cache (the default group's schemata is left as it is), so the
restricted program shares its ways with them, as it would on a shared machine. On a machine
without resctrl (most VMs: the hypervisor hides RDT) `probe` says why in one line.

Paths are relative to `root` (resctrl) and `sys_root` (sysfs) so that tests can use a fake tree.
"""
from __future__ import annotations

import os
import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UserError
from . import sources
from .events.spec import resolve
from .perf.counting import open_counters
from .procs import Supervised, track_cgroup, untrack

RESCTRL = Path("/sys/fs/resctrl")


@dataclass(frozen=True)
class L3:
    """What resctrl offers for the last-level cache."""

    root: Path
    cbm_mask: int              # every way of the cache, one bit each
    min_bits: int              # the fewest ways a mask may hold
    domains: tuple[str, ...]   # L3 domain ids, as the schemata names them
    resources: tuple[str, ...]  # "L3", or "L3CODE" and "L3DATA" with CDP
    monitoring: frozenset[str]  # llc_occupancy, mbm_total_bytes, ...
    cache_bytes: int | None    # one L3's size (sysfs), when known

    @property
    def ways(self) -> int:
        return bin(self.cbm_mask).count("1")


def _read(p: Path) -> str | None:
    try:
        return p.read_text().strip()
    except OSError:
        return None


def probe(root: Path = RESCTRL, sys_root: Path = sources.SYS,
          cpuinfo: Path = sources.PROC / "cpuinfo") -> L3 | str:
    """The L3 resctrl can partition and monitor, or why it cannot here (one line)."""
    info = root / "info"
    if not (info / "L3").is_dir():
        flags = _read(cpuinfo) or ""
        if not re.search(r"\bcat_l3\b|\brdt_a\b", flags):
            return ("no cache allocation on this machine: the CPU offers no L3 way partitioning "
                    "(no cat_l3 / rdt_a flag: Intel CAT or AMD PQoS missing, or hidden by the "
                    "hypervisor), so no online miss curve; `corecast sim mrc TRACE` gives one from a trace")
        if not info.is_dir():
            return f"resctrl is not mounted (mount -t resctrl resctrl {root})"
        return "resctrl offers no L3 allocation (info/L3 missing)"
    mask = _read(info / "L3" / "cbm_mask")
    try:
        cbm = int(mask or "", 16)
    except ValueError:
        return f"{info / 'L3' / 'cbm_mask'}: unreadable ({mask!r})"
    min_bits = int(_read(info / "L3" / "min_cbm_bits") or "1")
    schem = _read(root / "schemata") or ""
    resources, domains = [], []
    for line in schem.splitlines():
        name, _, rest = line.strip().partition(":")
        if name in ("L3", "L3CODE", "L3DATA"):
            resources.append(name)
            domains = [d.split("=")[0].strip() for d in rest.split(";") if "=" in d]
    if not resources or not domains:
        return f"{root / 'schemata'}: no L3 line"
    mon = frozenset((_read(info / "L3_MON" / "mon_features") or "").split())
    return L3(root, cbm, min_bits, tuple(domains), tuple(resources), mon, l3_size(sys_root))


def l3_size(sys_root: Path = sources.SYS) -> int | None:
    """One L3's size in bytes from sysfs (cpu0's level-3 unified cache)."""
    for idx in sorted((sys_root / "devices/system/cpu/cpu0/cache").glob("index*")):
        if _read(idx / "level") == "3":
            m = re.fullmatch(r"(\d+)([KMG]?)", _read(idx / "size") or "")
            if m:
                return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]
    return None


def way_mask(l3: L3, ways: int) -> int:
    """The mask of `ways` contiguous ways from the lowest way the cache has."""
    if not l3.min_bits <= ways <= l3.ways:
        raise UserError(f"--ways {ways}: this L3 allows {l3.min_bits} to {l3.ways} ways")
    low = (l3.cbm_mask & -l3.cbm_mask).bit_length() - 1
    return ((1 << ways) - 1) << low


def schemata(l3: L3, mask: int) -> str:
    """The schemata lines giving `mask` in every L3 domain (code and data alike with CDP)."""
    doms = ";".join(f"{d}={mask:x}" for d in l3.domains)
    return "\n".join(f"{r}:{doms}" for r in l3.resources) + "\n"


@dataclass
class WayPoint:
    """One run with `ways` ways of the L3."""

    ways: int
    mask: int
    cache_bytes: float | None       # what the ways hold, in one L3 domain
    seconds: float
    exit_status: int
    occupancy_peak: int | None      # llc_occupancy, bytes, summed over the domains
    occupancy_mean: float | None
    samples: int
    memory_bytes: int | None        # mbm_total_bytes during the run
    instructions: float | None      # a PMU's, where there is one
    llc_misses: float | None

    @property
    def memory_lines(self) -> float | None:
        return None if self.memory_bytes is None else self.memory_bytes / 64

    @property
    def mpki(self) -> float | None:
        if self.instructions and self.llc_misses is not None:
            return 1000.0 * self.llc_misses / self.instructions
        return None


@dataclass
class OnlineCurve:
    command: list[str]
    ways_total: int
    cache_bytes: int | None
    points: list[WayPoint]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "ways_total": self.ways_total, "cache_bytes": self.cache_bytes,
                "points": [{**asdict(p), "memory_lines": p.memory_lines, "mpki": p.mpki} for p in self.points],
                "notes": list(self.notes)}


class Group:
    """corecast's resctrl control group: its schemata and tasks, and the monitoring group of the
    run under way."""

    def __init__(self, l3: L3, name: str):
        self.l3, self.path = l3, l3.root / name
        self.mon = self.path
        self.made: list[Path] = []
        track_cgroup(self.path)             # removed by corecast-sentinel if corecast dies before `remove`
        try:
            self.path.mkdir(exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create the resctrl group {self.path}: {err.strerror} "
                            "(root is needed; the kernel may have no free CLOSID)") from None
        self.made.append(self.path)
        if not (self.path / "schemata").exists():
            raise UserError(f"{self.path}: no schemata file appeared: {l3.root} is not a resctrl file system")

    def new_run(self, n: int) -> None:
        """A monitoring group (a fresh RMID) for the next run."""
        mon = self.path / "mon_groups" / f"run{n}"
        try:
            mon.mkdir(exist_ok=True)
        except OSError as err:
            raise UserError(f"cannot create the resctrl monitoring group {mon}: {err.strerror} "
                            "(the kernel may have no free RMID)") from None
        self.made.append(mon)
        self.mon = mon

    def restrict(self, mask: int) -> None:
        try:
            (self.path / "schemata").write_text(schemata(self.l3, mask))
        except OSError as err:
            why = _read(self.l3.root / "info" / "last_cmd_status") or err.strerror
            raise UserError(f"resctrl refused the mask {mask:#x} for {self.path}: {why}") from None
        seen = _masks(_read(self.path / "schemata") or "", self.l3.resources)
        if any(m != mask for m in seen) or not seen:
            raise UserError(f"{self.path}/schemata reads back {seen} after {mask:#x} was written")

    def add(self, pid: int) -> None:
        """Moves `pid` into the control group, then into the run's monitoring group (the kernel
        takes a task into a monitoring group only from its parent control group)."""
        for where in dict.fromkeys([self.path, self.mon]):
            try:
                (where / "tasks").write_text(f"{pid}\n")
            except OSError as err:
                raise UserError(f"cannot move process {pid} into {where}: {err.strerror}") from None

    def bytes_of_ways(self) -> float | None:
        """What the schemata gives in one domain (the kernel's `size` file), if it says."""
        text = _read(self.path / "size") or ""
        for line in text.splitlines():
            name, _, rest = line.strip().partition(":")
            if name in ("L3", "L3DATA"):
                vals = [int(v.split("=")[1]) for v in rest.split(";") if "=" in v and v.split("=")[1].strip().isdigit()]
                if vals:
                    return float(vals[0])
        return None

    def read(self, key: str) -> int | None:
        """A monitoring file summed over the L3 domains (None when none can be read)."""
        total, seen = 0, False
        for d in sorted((self.mon / "mon_data").glob("mon_L3_*")):
            v = _read(d / key)
            if v is not None and v.isdigit():
                total += int(v)
                seen = True
        return total if seen else None

    def remove(self) -> bool:
        """Removes the groups made (their tasks go back to the default group); False when one
        is left."""
        ok = True
        for p in reversed(self.made):
            try:
                os.rmdir(p)
            except OSError:
                ok = False
        if ok:
            untrack(self.path)
        return ok


def _masks(text: str, resources: Sequence[str]) -> list[int]:
    out = []
    for line in text.splitlines():
        name, _, rest = line.strip().partition(":")
        if name in resources:
            out += [int(v.split("=")[1], 16) for v in rest.split(";") if "=" in v]
    return out


def _counters(pid: int) -> Any:
    """Instructions and last-level misses of the program, where a PMU counts them; else None."""
    try:
        cs = open_counters(resolve("instructions,LLC-load-misses"), pid=pid, inherit=True, enable_on_exec=True)
    except (UserError, OSError):
        return None
    if not any(c.fd is not None for c in cs.counters):
        cs.close()
        return None
    return cs


def measure(cmd: Sequence[str], ways: Sequence[int], l3: L3, *, interval: float = 0.1,
            env: dict[str, str] | None = None, progress: Callable[[str], None] | None = None) -> OnlineCurve:
    """Run `cmd` once per way count with only that many L3 ways, and what each run used."""
    if not cmd:
        raise UserError("no program given: corecast sim mrc-online -- PROGRAM [ARGS]")
    counts = sorted({int(w) for w in ways}, reverse=True)
    masks = {w: way_mask(l3, w) for w in counts}
    group = Group(l3, f"corecast-mrc-{os.getpid()}")
    notes: list[str] = []
    if "llc_occupancy" not in l3.monitoring:
        notes.append("resctrl monitors no llc_occupancy here (no CMT): occupancy is not shown")
    if "mbm_total_bytes" not in l3.monitoring:
        notes.append("resctrl monitors no mbm_total_bytes here (no MBM): memory traffic is not shown")
    points: list[WayPoint] = []
    try:
        for n, w in enumerate(counts, 1):
            if progress:
                progress(f"{w} of {l3.ways} ways (mask {masks[w]:#x})")
            group.restrict(masks[w])
            group.new_run(n)
            points.append(_run(cmd, w, masks[w], group, interval, env))
    finally:
        if not group.remove():
            notes.append(f"the resctrl group {group.path} (or a monitoring group in it) could not be "
                         "removed: rmdir it")
    if all(p.instructions is None for p in points):
        notes.append("no PMU counts last-level misses here: the curve is the memory traffic (resctrl MBM)")
    return OnlineCurve(list(cmd), l3.ways, l3.cache_bytes, points, notes)


def _run(cmd: Sequence[str], ways: int, mask: int, group: Group, interval: float,
         env: dict[str, str] | None) -> WayPoint:
    # through corecast-launch, as measure, stat and sched run: stopped before exec, and its whole
    # tree killed when it ends, when it is stopped and when corecast dies (SIGKILL included)
    child = Supervised(cmd, env=env)
    counters = None
    try:
        group.add(child.pid)                 # before exec: every thread it makes is in the group
        counters = _counters(child.pid)
        mem0 = group.read("mbm_total_bytes")
        t0 = time.monotonic()
        child.start()
        if child.exec_error is not None:
            raise UserError(f"cannot run '{cmd[0]}': {os.strerror(child.exec_error)}")
    except BaseException:
        if counters is not None:
            counters.close()
        if child.started:
            child.close()
        else:
            child.abandon()
        raise
    occ: list[int] = []
    try:
        while True:
            v = group.read("llc_occupancy")
            if v is not None:
                occ.append(v)
            child.poll(interval)             # the supervisor's report, for up to one interval
            if child.ended:
                break
    except BaseException:
        child.stop()
        raise
    seconds = time.monotonic() - t0
    mem1 = group.read("mbm_total_bytes")
    instr = misses = None
    if counters is not None:
        vals = counters.read()
        counters.close()
        instr, misses = (v.value if v is not None else None for v in vals[:2])
    size = group.bytes_of_ways()
    if size is None and group.l3.cache_bytes:
        size = group.l3.cache_bytes * ways / group.l3.ways
    return WayPoint(ways, mask, size, seconds, child.status if child.status is not None else -1,
                    max(occ) if occ else None, sum(occ) / len(occ) if occ else None, len(occ),
                    None if mem0 is None or mem1 is None else max(0, mem1 - mem0), instr, misses)


def parse_ways(text: str, l3: L3) -> list[int]:
    """'all' (every count from the fewest allowed to all), or a list such as 1,2,4,8 or 2-6."""
    if text.strip().lower() == "all":
        return list(range(l3.min_bits, l3.ways + 1))
    out: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", part)
        if not m:
            raise UserError(f"--ways {text}: give all, or way counts such as 1,2,4,8 or 2-6")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        out.extend(range(lo, hi + 1))
    for w in out:
        way_mask(l3, w)
    return out
