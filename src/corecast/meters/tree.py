"""The meter tree: node -> socket -> core from the topology module, and a watched process with
slots for its threads.

Every online CPU is in the tree, whatever the daemon's own affinity (it watches the machine,
not itself). A core's PUs (SMT siblings) are summed into it; a socket's cores into the socket;
the node holds everything. A watched process (`--pid`) is a scope of its own under the node,
with `max_threads` thread slots: each slot follows one thread at a time (its record's `aux`
says which tid), reassigned as threads come and go.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..collect import topology
from ..collect.topology import Topology, format_cpulist, parse_cpulist


@dataclass(frozen=True)
class Scope:
    index: int
    name: str
    kind: str                 # node | socket | core | process | thread
    parent: int               # -1 for the node
    cpus: tuple[int, ...] = ()
    slot: int = -1            # thread slots: 0, 1, ...

    @property
    def cpus_text(self) -> str:
        return format_cpulist(self.cpus)


@dataclass
class Tree:
    scopes: list[Scope] = field(default_factory=list)
    topology: Topology | None = None
    pid: int | None = None

    def of_kind(self, kind: str) -> list[Scope]:
        return [s for s in self.scopes if s.kind == kind]

    def named(self, name: str) -> Scope | None:
        return next((s for s in self.scopes if s.name == name), None)

    @property
    def node(self) -> Scope:
        return self.scopes[0]

    @property
    def cpus(self) -> tuple[int, ...]:
        return self.scopes[0].cpus

    def socket_of(self, cpu: int) -> Scope | None:
        return next((s for s in self.of_kind("socket") if cpu in s.cpus), None)


def online_cpus(cpu_root: Path = topology.SYSFS_CPU) -> list[int]:
    try:
        return parse_cpulist((cpu_root / "online").read_text(), str(cpu_root / "online"))
    except OSError:
        return sorted(int(d.name[3:]) for d in cpu_root.glob("cpu[0-9]*"))


def build(topo: Topology | None = None, pid: int | None = None, max_threads: int = 0) -> Tree:
    """The tree of this machine (or of `topo`), with a watched process and its thread slots."""
    if topo is None:
        topo = topology.read_topology(allowed=online_cpus())
    scopes: list[Scope] = [Scope(0, "node", "node", -1, tuple(topo.cpus))]
    by_socket: dict[int, int] = {}
    for p in sorted(topo.pus, key=lambda p: p.package):
        if p.package not in by_socket:
            by_socket[p.package] = len(scopes)
            cpus = tuple(q.os_index for q in topo.pus if q.package == p.package)
            scopes.append(Scope(len(scopes), f"socket{p.package}", "socket", 0, cpus))
    seen: set[int] = set()
    for p in sorted(topo.pus, key=lambda p: p.core):
        if p.core in seen:
            continue
        seen.add(p.core)
        cpus = tuple(q.os_index for q in topo.pus if q.core == p.core)
        scopes.append(Scope(len(scopes), f"core{p.core}", "core", by_socket[p.package], cpus))
    tree = Tree(scopes, topo, pid)
    if pid is not None:
        proc = Scope(len(scopes), f"pid{pid}", "process", 0)
        scopes.append(proc)
        for k in range(max_threads):
            scopes.append(Scope(len(scopes), f"pid{pid}.thread{k}", "thread", proc.index, slot=k))
    return tree


__all__ = ["Scope", "Tree", "build", "online_cpus"]
