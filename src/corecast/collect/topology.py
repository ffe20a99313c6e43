"""The machine's CPU topology from sysfs, and the order in which a campaign adds cores.

Terms follow hwloc: a *PU* (processing unit, a logical CPU the kernel numbers `cpuN`) belongs
to a *core* (the PUs sharing one core are SMT siblings), a core to a *package* (socket), and
PUs to *NUMA nodes*. Physical ids from sysfs (`physical_package_id`, `core_id`) are not
guaranteed dense or unique across dies, so cores are identified by their set of sibling PUs
(`core_cpus_list`, or `thread_siblings_list` on older kernels) and packages by
`package_cpus_list`/`physical_package_id`; logical indexes are assigned in order of the lowest
PU, as hwloc does.

Only PUs that are online *and* in this process's affinity mask are used (hwloc's default
"allowed" set), so a campaign started under `taskset` or in a cpuset stays inside it.

Orderings (`order_cpus`): the sequence of PUs a run with N cores takes the first N of.
- `socket` (default): fill one socket before the next; inside a socket, one PU of every
  physical core first, then the SMT siblings.
- `smt-last`: one PU of every physical core of every socket (socket by socket) first, then
  the second PUs of all cores, and so on.
- `spread`: round-robin across sockets (core 0 of socket 0, core 0 of socket 1, ...),
  physical cores before SMT siblings.
- a LIST such as `0,2,4-7`: exactly these PUs, in this order.
"""
from __future__ import annotations

import os
import platform
import re
import socket as _socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from ..dataset import Machine
from ..errors import UserError

SYSFS_CPU = Path("/sys/devices/system/cpu")
SYSFS_NODE = Path("/sys/devices/system/node")
ORDERS = ("socket", "spread", "smt-last")


MAX_CPUS = 8192   # the kernel's largest NR_CPUS: a CPU list never names more


def parse_cpulist(text: str, what: str = "CPU list") -> list[int]:
    """Parse the kernel's list format (`0-3,8,10-11`) into sorted unique ints."""
    s = text.strip()
    if not s:
        return []
    out: list[int] = []
    for part in s.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?(?::(\d+))?", part)
        if not m:
            raise UserError(f"{what}: '{part}' is not a CPU number or range (e.g. 0-3,8)")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or step < 1:
            raise UserError(f"{what}: '{part}' is an empty range")
        if hi >= MAX_CPUS:
            raise UserError(f"{what}: '{part}' goes past CPU {MAX_CPUS - 1} (Linux's limit)")
        out.extend(range(lo, hi + 1, step))
    return sorted(set(out))


def format_cpulist(cpus: Iterable[int]) -> str:
    """The inverse of parse_cpulist, keeping the given order where it is not ascending."""
    cpus = list(cpus)
    if cpus != sorted(cpus):
        return ",".join(str(c) for c in cpus)
    parts: list[str] = []
    i = 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        parts.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class PU:
    """One logical CPU."""

    os_index: int
    package: int          # logical socket index (0..sockets-1)
    core: int             # logical core index, machine-wide
    smt_index: int        # 0 for the first PU of its core, 1 for its first sibling, ...
    node: int | None      # NUMA node OS index, None when the machine reports none


@dataclass
class Topology:
    pus: list[PU]
    numa_nodes: dict[int, list[int]] = field(default_factory=dict)

    @property
    def cpus(self) -> list[int]:
        return [p.os_index for p in self.pus]

    @property
    def sockets(self) -> int:
        return len({p.package for p in self.pus})

    @property
    def cores(self) -> int:
        return len({p.core for p in self.pus})

    @property
    def threads_per_core(self) -> int:
        per: dict[int, int] = {}
        for p in self.pus:
            per[p.core] = per.get(p.core, 0) + 1
        return max(per.values()) if per else 0

    def pu(self, os_index: int) -> PU:
        for p in self.pus:
            if p.os_index == os_index:
                return p
        raise KeyError(os_index)

    def describe(self) -> str:
        return (f"{self.sockets} socket(s), {self.cores} core(s), {self.threads_per_core} "
                f"thread(s)/core, {len(self.pus)} PU(s), {max(len(self.numa_nodes), 1)} NUMA node(s)")

    def to_dict(self) -> dict:
        return {"pus": [[p.os_index, p.package, p.core, p.smt_index, p.node] for p in self.pus],
                "numa_nodes": {str(k): v for k, v in self.numa_nodes.items()}}


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def read_topology(cpu_root: str | Path = SYSFS_CPU, node_root: str | Path = SYSFS_NODE,
                  allowed: Iterable[int] | None = None) -> Topology:
    """Read the topology from sysfs (the roots can point at a copy, for tests).

    `allowed`: PUs this process may run on (default: its affinity mask when reading the real
    sysfs, every online PU otherwise).
    """
    cpu_root, node_root = Path(cpu_root), Path(node_root)
    online_txt = _read(cpu_root / "online")
    if online_txt is not None:
        online = parse_cpulist(online_txt, str(cpu_root / "online"))
    else:
        online = sorted(int(m.group(1)) for d in cpu_root.glob("cpu[0-9]*")
                        if (m := re.fullmatch(r"cpu(\d+)", d.name)))
    if not online:
        raise UserError(f"{cpu_root}: no online CPUs found")
    if allowed is None:
        if cpu_root == SYSFS_CPU and hasattr(os, "sched_getaffinity"):
            allowed = os.sched_getaffinity(0)
        else:
            allowed = online
    allowed_set = set(allowed)
    cpus = [c for c in online if c in allowed_set]
    if not cpus:
        raise UserError("no online CPU is in this process's affinity mask")

    # NUMA nodes.
    cpu_node: dict[int, int] = {}
    nodes: dict[int, list[int]] = {}
    for nd in sorted(node_root.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        lst = _read(nd / "cpulist")
        if lst is None:
            continue
        members = [c for c in parse_cpulist(lst, str(nd / "cpulist")) if c in cpus]
        nid = int(nd.name[4:])
        nodes[nid] = members
        for c in members:
            cpu_node[c] = nid

    # Raw package and core groupings.
    pkg_key: dict[int, tuple] = {}
    core_key: dict[int, tuple] = {}
    for c in cpus:
        t = cpu_root / f"cpu{c}" / "topology"
        pkg_list = _read(t / "package_cpus_list") or _read(t / "core_siblings_list")
        pid = _read(t / "physical_package_id")
        pkg_key[c] = ("id", int(pid)) if pid not in (None, "-1") else (
            ("list", tuple(parse_cpulist(pkg_list))) if pkg_list else ("id", 0))
        sib = _read(t / "core_cpus_list") or _read(t / "thread_siblings_list")
        core_key[c] = tuple(parse_cpulist(sib)) if sib else (c,)
        if c not in core_key[c]:
            core_key[c] = (c,)
    # Logical indexes in order of each group's lowest allowed PU (hwloc's convention).
    first_pu: dict[tuple, int] = {}
    for c in cpus:
        first_pu.setdefault(pkg_key[c], c)
    pkg_index = {k: i for i, k in enumerate(sorted(first_pu, key=lambda k: first_pu[k]))}
    core_first: dict[tuple, int] = {}
    for c in cpus:
        core_first.setdefault((pkg_key[c], core_key[c]), c)
    core_order = sorted(core_first, key=lambda k: (pkg_index[k[0]], core_first[k]))
    core_index = {k: i for i, k in enumerate(core_order)}
    seen: dict[int, int] = {}
    pus = []
    for c in cpus:
        ci = core_index[(pkg_key[c], core_key[c])]
        smt = seen.get(ci, 0)
        seen[ci] = smt + 1
        pus.append(PU(os_index=c, package=pkg_index[pkg_key[c]], core=ci, smt_index=smt,
                      node=cpu_node.get(c)))
    return Topology(pus=pus, numa_nodes=nodes)


def order_cpus(topo: Topology, order: str = "socket") -> list[int]:
    """All usable PUs in the order a campaign adds them (see the module docstring)."""
    pus = list(topo.pus)
    if order == "socket":
        key = lambda p: (p.package, p.smt_index, p.core)  # noqa: E731
        return [p.os_index for p in sorted(pus, key=key)]
    if order == "smt-last":
        key = lambda p: (p.smt_index, p.package, p.core)  # noqa: E731
        return [p.os_index for p in sorted(pus, key=key)]
    if order == "spread":
        # rank of the core inside its package
        rank: dict[int, int] = {}
        counts: dict[int, int] = {}
        for p in sorted(pus, key=lambda p: (p.package, p.core)):
            if p.core not in rank:
                rank[p.core] = counts.get(p.package, 0)
                counts[p.package] = rank[p.core] + 1
        key = lambda p: (p.smt_index, rank[p.core], p.package)  # noqa: E731
        return [p.os_index for p in sorted(pus, key=key)]
    # An explicit list.
    if not re.fullmatch(r"[\d,\-: ]+", order):
        raise UserError(f"--order: '{order}' is not one of {', '.join(ORDERS)} or a CPU list such as 0,2,4-7")
    listed: list[int] = []
    for part in order.split(","):
        for c in parse_cpulist(part, "--order"):
            if c in listed:
                raise UserError(f"--order: CPU {c} is listed twice")
            listed.append(c)
    usable = set(topo.cpus)
    bad = [c for c in listed if c not in usable]
    if bad:
        raise UserError(f"--order: CPU {bad[0]} is not online or not allowed here "
                        f"(usable: {format_cpulist(sorted(usable))})")
    return listed


def parse_core_counts(spec: str, available: int) -> list[int]:
    """`--cores`: `1,2,4`, `all`, `1-16` (every count), `1-16:2` (a step), `1-all`, `pow2`
    (1,2,4,.. and all)."""
    s = re.sub(r"-all\b", f"-{available}", spec.strip().lower())
    if not s:
        raise UserError("--cores: empty")
    out: list[int] = []
    for part in s.split(","):
        part = part.strip()
        if part == "all":
            out.append(available)
        elif part == "pow2":
            n = 1
            while n < available:
                out.append(n)
                n *= 2
            out.append(available)
        else:
            m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
            if not m:
                raise UserError(f"--cores: '{part}' is not a count, a range (1-16), 'all' or 'pow2'")
            lo = int(m.group(1))
            hi = int(m.group(2)) if m.group(2) else lo
            step = int(m.group(3)) if m.group(3) else 1
            if lo < 1 or hi < lo or step < 1:
                raise UserError(f"--cores: '{part}' must count from 1 upwards")
            if hi > available:          # checked before the range is made: 1-100000000 is quick
                _too_many(hi, available)
            out.extend(range(lo, hi + 1, step))
    counts = sorted(set(out))
    if counts and counts[-1] > available:
        _too_many(counts[-1], available)
    return counts


def _too_many(asked: int, available: int) -> None:
    raise UserError(f"--cores: {asked} cores asked for, but only {available} are usable here (with this "
                    "--order); measure what exists (--cores 1-all or pow2) and let `corecast predict "
                    "--cores ...` speak for more")


@dataclass(frozen=True)
class Cache:
    """One data (or unified) cache a CPU sees, from sysfs."""

    level: int
    size_bytes: int
    shared_cpus: int        # how many logical CPUs share it


def caches(cpu: int = 0, cpu_root: str | Path = SYSFS_CPU) -> list[Cache]:
    """The data and unified caches of `cpu`, by level (empty where sysfs does not say: some VMs
    and containers)."""
    out = []
    for d in sorted(Path(cpu_root, f"cpu{cpu}", "cache").glob("index[0-9]*")):
        kind, level, size = _read(d / "type"), _read(d / "level"), _read(d / "size")
        if kind not in ("Data", "Unified") or not (level and level.isdigit()) or not size:
            continue
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if not m:
            continue
        shared = _read(d / "shared_cpu_list")
        out.append(Cache(level=int(level), size_bytes=int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)],
                         shared_cpus=len(parse_cpulist(shared)) if shared else 1))
    return sorted(out, key=lambda c: c.level)


def cpuinfo() -> dict[str, str]:
    """The first processor's block of /proc/cpuinfo."""
    out: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if not line.strip():
                    if out:
                        break
                    continue
                k, _, v = line.partition(":")
                out.setdefault(k.strip(), v.strip())
    except OSError:
        pass
    return out


def nominal_frequency_hz(cpu_root: str | Path = SYSFS_CPU, info: dict[str, str] | None = None) -> float | None:
    """Nominal (base) clock: cpufreq's base_frequency, else the GHz in the model name, else
    cpuinfo_max_freq, else the kernel's `cpu MHz` (on VMs without cpufreq: the TSC rate)."""
    cpu_root = Path(cpu_root)
    base = _read(cpu_root / "cpu0" / "cpufreq" / "base_frequency")
    if base and base.isdigit():
        return int(base) * 1e3
    info = cpuinfo() if info is None else info
    m = re.search(r"@\s*([\d.]+)\s*GHz", info.get("model name", ""))
    if m:
        return float(m.group(1)) * 1e9
    mx = _read(cpu_root / "cpu0" / "cpufreq" / "cpuinfo_max_freq")
    if mx and mx.isdigit():
        return int(mx) * 1e3
    mhz = info.get("cpu MHz")
    try:
        return float(mhz) * 1e6 if mhz else None
    except ValueError:
        return None


def machine_info(topo: Topology | None = None) -> Machine:
    """This machine, for the campaign file and every Dataset measured here."""
    info = cpuinfo()
    try:
        topo = topo or read_topology()
    except UserError:
        topo = None

    def _int(v: str | None, base: int = 10) -> int | None:
        try:
            return int(v, base) if v is not None else None
        except ValueError:
            return None
    model_name = info.get("model name") or info.get("Model") or info.get("cpu model") or platform.processor() or None
    return Machine(
        cpu_model=model_name,
        vendor=info.get("vendor_id") or info.get("CPU implementer"),
        family=_int(info.get("cpu family")),
        model=_int(info.get("model")),
        sockets=topo.sockets if topo else None,
        cores=topo.cores if topo else None,
        threads_per_core=topo.threads_per_core if topo else None,
        logical_cpus=len(topo.pus) if topo else os.cpu_count(),
        numa_nodes=(len(topo.numa_nodes) or 1) if topo else None,
        nominal_freq_hz=nominal_frequency_hz(info=info),
        kernel=f"{platform.system()} {platform.release()}",
        hostname=_socket.gethostname(),
    )


def select(order: Sequence[int], n: int) -> list[int]:
    """The PUs a run with `n` cores gets."""
    if n > len(order):
        raise UserError(f"--cores: {n} cores asked for, but only {len(order)} are usable")
    return list(order[:n])
