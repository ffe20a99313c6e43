"""Software sources: what the kernel tells about a program without any PMU.

- per-thread scheduler statistics from /proc/<pid>/task/<tid>/schedstat: time on CPU,
  time waiting on a run queue (run-queue delay), timeslices;
- context switches (voluntary / involuntary) from /proc/<pid>[/task/<tid>]/status;
- pressure stall information (PSI) from /proc/pressure/{cpu,memory,io}: some/full totals;
- resource usage (rusage) of a finished child;
- energy from RAPL through /sys/class/powercap, LLC occupancy and memory bandwidth through
  /sys/fs/resctrl, when present.

Each reader returns None (or an `Unavailable` with the reason) rather than raising when the
source is missing, so a collector can say why a column is empty. Every path is relative to a
`root` so tests can point them at a fake tree.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from .. import messages

PROC = Path("/proc")
SYS = Path("/sys")


@dataclass(frozen=True)
class Unavailable:
    """A source that cannot be read here, and why."""

    name: str
    reason: str

    def __bool__(self) -> bool:
        return False


# --------------------------------------------------------------------------------------------
# schedstat

@dataclass(frozen=True)
class Schedstat:
    """/proc/.../schedstat: ns on CPU, ns waiting on a run queue, timeslices run."""

    run_ns: int
    wait_ns: int
    timeslices: int

    def __sub__(self, other: "Schedstat") -> "Schedstat":
        return Schedstat(self.run_ns - other.run_ns, self.wait_ns - other.wait_ns,
                         self.timeslices - other.timeslices)

    def __add__(self, other: "Schedstat") -> "Schedstat":
        return Schedstat(self.run_ns + other.run_ns, self.wait_ns + other.wait_ns,
                         self.timeslices + other.timeslices)


def parse_schedstat(text: str) -> Schedstat | None:
    parts = text.split()
    if len(parts) < 3:
        return None
    try:
        return Schedstat(int(parts[0]), int(parts[1]), int(parts[2]))
    except ValueError:
        return None


def thread_schedstat(pid: int, tid: int | None = None, proc: Path = PROC) -> Schedstat | None:
    """One thread's schedstat (tid defaults to pid: the main thread); None when it is gone or
    the kernel has no schedstat (CONFIG_SCHED_INFO off)."""
    path = proc / str(pid) / "task" / str(tid if tid is not None else pid) / "schedstat"
    try:
        return parse_schedstat(path.read_text())
    except OSError:
        return None


def process_schedstat(pid: int, proc: Path = PROC) -> dict[int, Schedstat]:
    """Every live thread of a process: {tid: Schedstat}."""
    out = {}
    for tid in list_threads(pid, proc):
        s = thread_schedstat(pid, tid, proc)
        if s is not None:
            out[tid] = s
    return out


def schedstat_unavailable(proc: Path = PROC) -> str | None:
    """Why schedstat cannot be read here, or None."""
    if not (proc / "self" / "schedstat").exists():
        return "the kernel has no /proc/<pid>/schedstat (built without CONFIG_SCHED_INFO)"
    return None


# --------------------------------------------------------------------------------------------
# threads, names, context switches

def list_threads(pid: int, proc: Path = PROC) -> list[int]:
    try:
        return sorted(int(t) for t in os.listdir(proc / str(pid) / "task") if t.isdigit())
    except OSError:
        return []


def thread_name(pid: int, tid: int, proc: Path = PROC) -> str:
    """The thread's name (its comm) as text safe to show and to write in one field: any user
    names their threads as they like (prctl(PR_SET_NAME), up to 15 bytes), escape sequences and
    bytes that are not UTF-8 included; those are shown as \\xNN, as ps shows them as '?'."""
    try:
        raw = (proc / str(pid) / "task" / str(tid) / "comm").read_bytes()
    except OSError:
        return ""
    return messages.visible(raw.decode("utf-8", "backslashreplace").strip(), one_line=True)


@dataclass(frozen=True)
class ContextSwitches:
    voluntary: int
    involuntary: int

    @property
    def total(self) -> int:
        return self.voluntary + self.involuntary

    def __sub__(self, other: "ContextSwitches") -> "ContextSwitches":
        return ContextSwitches(self.voluntary - other.voluntary, self.involuntary - other.involuntary)

    def __add__(self, other: "ContextSwitches") -> "ContextSwitches":
        return ContextSwitches(self.voluntary + other.voluntary, self.involuntary + other.involuntary)


def parse_status_ctxsw(text: str) -> ContextSwitches | None:
    vol = invol = None
    for line in text.splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            vol = int(line.split()[1])
        elif line.startswith("nonvoluntary_ctxt_switches:"):
            invol = int(line.split()[1])
    if vol is None or invol is None:
        return None
    return ContextSwitches(vol, invol)


def context_switches(pid: int, tid: int | None = None, proc: Path = PROC) -> ContextSwitches | None:
    """Context switches of a thread (`tid`) or of a whole process (`tid=None`: the kernel's
    /proc/<pid>/status sums all live threads and those that exited)."""
    path = proc / str(pid) / "status" if tid is None else proc / str(pid) / "task" / str(tid) / "status"
    try:
        return parse_status_ctxsw(path.read_text())
    except OSError:
        return None


# --------------------------------------------------------------------------------------------
# PSI

@dataclass(frozen=True)
class Pressure:
    """Totals of one PSI resource, in microseconds since boot (full is None for cpu on old
    kernels)."""

    resource: str
    some_us: int
    full_us: int | None
    some_avg10: float = 0.0
    full_avg10: float | None = None

    def __sub__(self, other: "Pressure") -> "Pressure":
        full = None if (self.full_us is None or other.full_us is None) else self.full_us - other.full_us
        return Pressure(self.resource, self.some_us - other.some_us, full, self.some_avg10, self.full_avg10)


_PSI_RE = re.compile(r"^(some|full)\s+avg10=([\d.]+)\s+avg60=[\d.]+\s+avg300=[\d.]+\s+total=(\d+)", re.M)


def parse_pressure(resource: str, text: str) -> Pressure | None:
    vals = {m.group(1): (float(m.group(2)), int(m.group(3))) for m in _PSI_RE.finditer(text)}
    if "some" not in vals:
        return None
    full = vals.get("full")
    return Pressure(resource, vals["some"][1], full[1] if full else None, vals["some"][0],
                    full[0] if full else None)


def psi(resource: str | None = None, proc: Path = PROC) -> dict[str, Pressure] | Unavailable:
    """PSI totals for cpu, memory, io (or one of them)."""
    base = proc / "pressure"
    if not base.is_dir():
        return Unavailable("psi", "the kernel has no /proc/pressure (PSI needs Linux >= 4.20 with "
                                  "CONFIG_PSI, and psi=1 on the command line where it is off by default)")
    out: dict[str, Pressure] = {}
    for res in ([resource] if resource else ["cpu", "memory", "io"]):
        try:
            p = parse_pressure(res, (base / res).read_text())
        except OSError as err:
            if resource:
                return Unavailable(f"psi {res}", f"cannot read {base / res}: {err.strerror}")
            continue
        if p is not None:
            out[res] = p
    if not out:
        return Unavailable("psi", f"{base} has nothing readable (PSI disabled: boot with psi=1)")
    return out


# --------------------------------------------------------------------------------------------
# CPU times (/proc/stat): steal time

@dataclass(frozen=True)
class CpuTimes:
    """One CPU's line of /proc/stat, in clock ticks (USER_HZ): the time the hypervisor gave to
    someone else while this virtual CPU wanted to run is `steal`."""

    total: int
    steal: int

    def __sub__(self, other: "CpuTimes") -> "CpuTimes":
        return CpuTimes(self.total - other.total, self.steal - other.steal)


def parse_proc_stat(text: str) -> dict[int, CpuTimes]:
    """Per-CPU times from /proc/stat text (`cpuN user nice system idle iowait irq softirq steal
    ...`; guest time is already inside user and is not added twice)."""
    out: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        m = re.match(r"cpu(\d+)\s+(.*)", line)
        if not m:
            continue
        f = [int(x) for x in m.group(2).split()[:8]]
        f += [0] * (8 - len(f))
        out[int(m.group(1))] = CpuTimes(total=sum(f), steal=f[7])
    return out


def cpu_times(proc: Path = PROC) -> dict[int, CpuTimes] | Unavailable:
    try:
        return parse_proc_stat((proc / "stat").read_text())
    except OSError as err:
        return Unavailable("steal", f"cannot read {proc / 'stat'}: {err.strerror}")


def steal_fraction(before: Mapping[int, CpuTimes], after: Mapping[int, CpuTimes], cpus) -> float | None:
    """Steal time over all time of `cpus` between two readings (None when no tick passed)."""
    d = [after[c] - before[c] for c in set(cpus) if c in before and c in after]
    total = sum(x.total for x in d)
    return sum(x.steal for x in d) / total if total > 0 else None


# --------------------------------------------------------------------------------------------
# rusage

@dataclass(frozen=True)
class Usage:
    user_s: float
    sys_s: float
    max_rss_bytes: int
    voluntary_ctxsw: int
    involuntary_ctxsw: int
    minor_faults: int
    major_faults: int


def usage_from_rusage(ru) -> Usage:
    """From `resource.struct_rusage` (os.wait4 or resource.getrusage); ru_maxrss is in KiB."""
    return Usage(ru.ru_utime, ru.ru_stime, ru.ru_maxrss * 1024, ru.ru_nvcsw, ru.ru_nivcsw,
                 ru.ru_minflt, ru.ru_majflt)


def children_usage() -> Usage:
    import resource
    return usage_from_rusage(resource.getrusage(resource.RUSAGE_CHILDREN))


# --------------------------------------------------------------------------------------------
# RAPL

@dataclass(frozen=True)
class RaplDomain:
    name: str               # package-0, dram, core, uncore, psys
    path: Path
    max_uj: int


def rapl_domains(sys_root: Path = SYS) -> list[RaplDomain] | Unavailable:
    base = sys_root / "class" / "powercap"
    if not base.is_dir():
        return Unavailable("energy", f"no {base} (the kernel has no powercap/RAPL driver, or this "
                                     "is a VM that does not expose RAPL)")
    out = []
    denied = False
    for d in sorted(base.iterdir()):
        if not d.name.startswith(("intel-rapl:", "amd-rapl:")):
            continue
        try:
            name = (d / "name").read_text().strip()
            maxr = int((d / "max_energy_range_uj").read_text().strip())
            (d / "energy_uj").read_text()
        except PermissionError:
            denied = True
            continue
        except (OSError, ValueError):
            continue
        parent = d.name.count(":")
        if parent > 1:   # subzone: name it after its package
            pkg = d.name.split(":")[1]
            name = f"{name}-{pkg}"
        out.append(RaplDomain(name, d / "energy_uj", maxr))
    if not out:
        why = ("energy_uj is readable by root only (since Linux 5.10): run as root"
               if denied else "no RAPL zones under powercap (CPU or kernel without RAPL support)")
        return Unavailable("energy", why)
    return out


def read_energy_uj(domain: RaplDomain) -> int | None:
    try:
        return int(domain.path.read_text().strip())
    except (OSError, ValueError):
        return None


def energy_delta_uj(cur: int, prev: int, max_uj: int) -> int:
    """Energy between two readings of a RAPL counter, across its wrap-around."""
    d = cur - prev
    return d + max_uj + 1 if d < 0 else d


# --------------------------------------------------------------------------------------------
# resctrl: LLC occupancy and memory bandwidth (Intel RDT / AMD PQoS)

@dataclass
class ResctrlGroup:
    """A monitoring group that corecast created for the threads it follows."""

    path: Path
    domains: list[Path] = field(default_factory=list)     # mon_data/mon_L3_XX

    def add_tasks(self, tids) -> None:
        for tid in tids:
            try:
                with open(self.path / "tasks", "w") as fh:
                    fh.write(str(tid))
            except OSError:
                pass            # the thread exited

    def read(self) -> dict[str, int | None]:
        """llc_occupancy_bytes (now), mbm_total_bytes / mbm_local_bytes (cumulative)."""
        out: dict[str, int | None] = {}
        for key in ("llc_occupancy", "mbm_total_bytes", "mbm_local_bytes"):
            total, seen = 0, False
            for d in self.domains:
                try:
                    txt = (d / key).read_text().strip()
                except OSError:
                    continue
                if txt.isdigit():
                    total += int(txt)
                    seen = True
            out[key] = total if seen else None
        return out

    def remove(self) -> None:
        """Remove the group (its RMID goes back to the kernel); corecast-sentinel, which would
        have removed it had corecast died, forgets it. A group that cannot be removed now stays
        named to the sentinel, which tries again when corecast ends."""
        try:
            os.rmdir(self.path)
        except FileNotFoundError:
            pass
        except OSError:
            return
        from .procs import untrack
        untrack(self.path)


def resctrl_unavailable(sys_root: Path = SYS, cpuinfo: Path = PROC / "cpuinfo") -> str | None:
    base = sys_root / "fs" / "resctrl"
    if (base / "info" / "L3_MON").is_dir():
        return None
    try:
        flags = cpuinfo.read_text()
    except OSError:
        flags = ""
    if not re.search(r"\bcqm_llc\b|\bcqm_occup_llc\b|\bcqm_mbm_total\b", flags):
        return ("the CPU does not offer cache/bandwidth monitoring (no cqm_llc / cqm_mbm flags: "
                "Intel RDT or AMD PQoS missing, or hidden by the hypervisor)")
    if not (base / "info").is_dir():
        return f"resctrl is not mounted (mount -t resctrl resctrl {base})"
    return "resctrl has no L3 monitoring (info/L3_MON missing)"


def resctrl_group(name: str, sys_root: Path = SYS) -> ResctrlGroup | Unavailable:
    why = resctrl_unavailable(sys_root)
    if why:
        return Unavailable("resctrl", why)
    base = sys_root / "fs" / "resctrl"
    path = base / "mon_groups" / name
    # Named to corecast-sentinel before it is made, as occupancy.Group's control group is: only
    # `remove` takes it away otherwise, so a SIGKILL of corecast left it (and its RMID, of which
    # a CPU has a few dozen to a few hundred) until the next reboot. The sentinel removes a
    # resctrl group with rmdir (its tasks go back to the default group; nothing is killed).
    from .procs import track_cgroup, untrack     # here: most readers of this module start nothing
    track_cgroup(path)
    try:
        path.mkdir(exist_ok=True)
    except OSError as err:
        untrack(path)
        return Unavailable("resctrl", f"cannot create monitoring group {path}: {err.strerror}")
    doms = sorted((path / "mon_data").glob("mon_L3_*"))
    return ResctrlGroup(path, doms)


def available(proc: Path = PROC, sys_root: Path = SYS) -> Mapping[str, str | None]:
    """Each software source and why it is unavailable (None when it can be read)."""
    p = psi(proc=proc)
    r = rapl_domains(sys_root)
    return {
        "schedstat": schedstat_unavailable(proc),
        "psi": p.reason if isinstance(p, Unavailable) else None,
        "energy": r.reason if isinstance(r, Unavailable) else None,
        "resctrl": resctrl_unavailable(sys_root, proc / "cpuinfo"),
    }
