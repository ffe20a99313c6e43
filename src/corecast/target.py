"""Machine descriptions for prediction: the machine measured and the machine predicted for.

A `MachineSpec` says how many sockets, cores per socket and hardware threads per core a machine
has (and, where known, NUMA nodes, clock, memory bandwidth and a calibration profile). It is
read from any of the forms a user has at hand (`parse_spec`):

- a bundled machine's name (`src/corecast/machines/*.toml`: those with a [topology] of identical
  cores), or a machine description file, TOML or the JSON `corecast calibrate` writes: the
  one schema of docs/machines.md, read by `corecast.machines.schema` (the old forms too); its
  [memory] profile (corecast.memprofile) gives the bandwidth per socket where none is given,
- hwloc's XML (`lstopo --of xml` run on the target),
- `lscpu` or `lscpu -J` output saved to a file,
- an inline form: `sockets=2,cores=32,smt=2[,ghz=2.4][,numa=4]` (cores per socket; smt threads
  per core), `cpus=64` when only the logical CPU count is known, or `cpus=80,smt=2` /
  `cpus=128,sockets=2` with the part of the topology that is (the cores are what is left).

`placement(spec, threads, order)` says where `threads` software threads land: how many sockets
they span, whether any share a core with an SMT sibling, and whether there are more threads than
logical CPUs (oversubscription). The orders are those of `corecast measure`: `compact` (fill a
socket's cores, then its SMT siblings, then the next socket), `spread` (round-robin over the
sockets, physical cores first) and `smt-last` (every physical core of every socket before any
SMT sibling). `socket`, the name `corecast measure --order` gives the first, is accepted too.

This module describes; it reads no /proc and fits nothing (the measured machine's own topology
comes from `corecast.collect.topology`, and the models use what is here).
"""
from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .errors import UserError, read_input
from .headers import norm
from .machines import schema
from .machines.schema import MAX_DESCRIPTION_BYTES
from .parsing import json_document

ORDERS = ("compact", "spread", "smt-last")

#: Where threads go when nothing says where (neither --placement nor a campaign's --order): as
#: the operating system places threads it is not told where to put, on idle physical cores
#: first, over the sockets. Leave-one-source-out with each source's machine given as the
#: target and measured machine but not its placement: 15.9% median over the sources (geometric
#: mean 15.9%, below the USL in 20 of 31) with `spread`, as with each source's own placement;
#: 16.6% (16.7%, 19 of 31) with `compact` (docs/predict.md; model/topo.py).
DEFAULT_PLACEMENT = "spread"

#: The bounds on a machine (sockets, cores, threads, CPUs, NUMA nodes) are the reader's, for
#: every form read here: corecast.machines.schema.check_counts (docs/machines.md).


@dataclass
class MachineSpec:
    """A machine's structure (counts are per machine unless named per socket)."""

    sockets: int
    cores_per_socket: int
    threads_per_core: int = 1
    numa_nodes: int | None = None
    ghz: float | None = None
    memory_bandwidth_gbs_per_socket: float | None = None
    name: str = ""
    model: str = ""
    source: str = ""                    # where the description came from
    calibration: dict[str, Any] | None = None   # `corecast calibrate`'s measurements, if any
    known: str = "topology"             # "topology", or "cpus" when only the CPU count is known

    def __post_init__(self) -> None:
        src = self.source or "machine"
        schema.check_counts(src, self.sockets, self.cores_per_socket, self.threads_per_core, self.numa_nodes,
                            cpus_only=self.known == "cpus")
        for k in ("ghz", "memory_bandwidth_gbs_per_socket"):
            v = getattr(self, k)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise UserError(f"{src}: {k} must be a positive number (got {v!r})")

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def cpus(self) -> int:
        return self.cores * self.threads_per_core

    def describe(self) -> str:
        if self.known == "cpus":
            return f"{self.cpus} logical CPUs (topology unknown)"
        out = (f"{self.sockets} socket{'s' if self.sockets > 1 else ''} × {self.cores_per_socket} cores"
               f" × {self.threads_per_core} thread{'s' if self.threads_per_core > 1 else ''} = {self.cpus} CPUs")
        if self.ghz:
            out += f", {self.ghz:g} GHz"
        return (f"{self.name}: " if self.name else "") + out

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if v not in (None, "") and k != "calibration"}
        d["cores"], d["cpus"] = self.cores, self.cpus
        if self.calibration is not None:
            d["calibrated"] = True
        return d


@dataclass
class Position:
    """Where `threads` land on a machine."""

    threads: int
    cores_used: int             # physical cores with at least one thread
    sockets_used: int
    smt_shared: bool            # some core runs two or more threads
    oversubscribed: bool        # more threads than logical CPUs
    runnable: int               # threads that can run at once: min(threads, cpus)
    per_socket: list[int] = field(default_factory=list)   # threads on each socket
    per_domain: list[int] = field(default_factory=list)   # threads on each NUMA node (sockets if unknown)

    @property
    def cross_fraction(self) -> float:
        """The share of pairs of running threads that sit on different NUMA nodes (sockets where
        the nodes are not known): 0 on one node, towards 1 - 1/k spread evenly over k nodes."""
        pairs = self.runnable * (self.runnable - 1)
        if pairs <= 0:
            return 0.0
        return 1.0 - sum(k * (k - 1) for k in self.per_domain) / pairs


# ------------------------------------------------------------------------------ placement
def placement(spec: MachineSpec, threads: int, order: str = "compact") -> Position:
    """Where `threads` threads run on `spec` under `order` (see the module doc)."""
    if order == "socket":                                  # `corecast measure --order socket`
        order = "compact"
    if order not in ORDERS:
        raise UserError(f"--placement {order}: choose {', '.join(ORDERS)}")
    if threads < 1:
        raise UserError(f"{threads} threads: at least 1")
    runnable = min(threads, spec.cpus)
    S, C, T = spec.sockets, spec.cores_per_socket, spec.threads_per_core
    # threads per core, socket by socket: a list of S lists of C counts
    load = [[0] * C for _ in range(S)]
    slots: list[tuple[int, int]] = []                     # (socket, core) in the order filled
    if order == "compact":
        for s in range(S):
            for t in range(T):
                slots.extend((s, c) for c in range(C))
    elif order == "spread":
        for t in range(T):
            for c in range(C):
                slots.extend((s, c) for s in range(S))
    else:                                                  # smt-last
        for t in range(T):
            for s in range(S):
                slots.extend((s, c) for c in range(C))
    for s, c in slots[:runnable]:
        load[s][c] += 1
    per_socket = [sum(row) for row in load]
    # NUMA nodes split a socket's cores in equal consecutive blocks (a socket is one node when
    # the count is unknown or does not divide evenly).
    nodes = spec.numa_nodes or S
    per_node = nodes // S if nodes % S == 0 and C % max(nodes // S, 1) == 0 else 1
    block = C // per_node
    per_domain = [sum(row[b * block:(b + 1) * block]) for row in load for b in range(per_node)]
    return Position(threads=threads, cores_used=sum(1 for row in load for n in row if n),
                    sockets_used=sum(1 for n in per_socket if n), runnable=runnable,
                    smt_shared=any(n > 1 for row in load for n in row),
                    oversubscribed=threads > spec.cpus, per_socket=per_socket, per_domain=per_domain)


# ------------------------------------------------------------------------------ reading
def bundled() -> list[str]:
    """Names of the bundled machines predict takes: those with a [topology] of identical cores
    (docs/machines.md)."""
    return sorted(d.name for d in schema.bundled_for("predict"))


_KEY = r" *[A-Za-z][A-Za-z0-9_() -]*"          # sockets, cores_per_socket, lscpu's "Core(s) per socket"
_INLINE = re.compile(rf"^{_KEY}=[^,=]+(,{_KEY}=[^,=]+)*$")


def parse_spec(text: str, files: bool = True) -> MachineSpec:
    """A MachineSpec from a bundled name, a file (a machine description in TOML or calibrate's
    JSON, hwloc XML, lscpu text or JSON), or the inline form. Mistakes end in one UserError line.
    `files=False`: a bundled name or the inline form only, and no file is looked at (what a
    server takes from a request)."""
    text = text.strip()
    if not text:
        raise UserError("machine description: empty")
    if _INLINE.match(text) and (not files or not Path(text).exists()):
        return _inline(text)
    real = schema.bundled_name(text)
    if real is not None:
        return spec_of(schema.bundled_description(real), f"bundled machine {real}")
    if not files:
        raise UserError(f"machine description '{text}': neither a bundled name ({', '.join(bundled())}) nor the "
                        "inline form (sockets=2,cores=32,smt=2 or cpus=64)")
    p = Path(text)
    if not p.exists():
        names = ", ".join(bundled())
        raise UserError(f"machine description '{text}': no such file, bundled name ({names}) or inline form "
                        "(sockets=2,cores=32,smt=2 or cpus=64)")
    try:
        body = read_input(p, "machine description", limit=MAX_DESCRIPTION_BYTES)[0].decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file (TOML, JSON, hwloc XML or lscpu output expected)") from None
    s = body.lstrip()
    if s.startswith("<"):
        return _from_hwloc(body, str(p))
    if s.startswith("{") or p.suffix.lower() == ".json":
        try:
            doc = json_document(body, str(p))
        except json.JSONDecodeError as err:
            raise UserError(f"{p}:{err.lineno}: not valid JSON ({err.msg})") from None
        if isinstance(doc, dict) and "lscpu" in doc:
            return _from_lscpu(_flatten_lscpu(doc["lscpu"], str(p)), str(p))
        if isinstance(doc, dict) and doc.get("kind") in (schema.KIND, "corecast-target"):
            return spec_of(schema.parse(doc, str(p), default_name=p.stem, base=p.parent), str(p))
        raise UserError(f"{p}: a JSON file, but neither `lscpu -J` output nor a machine description "
                        f"(\"kind\": \"{schema.KIND}\", what `corecast calibrate` writes)")
    # lscpu's text, whole or cut short before its topology lines (a cut one read as TOML said
    # "not valid TOML"; now it says which lscpu line is missing)
    if re.search(r"^\s*(Socket\(s\)|Core\(s\) per socket|Thread\(s\) per core|Architecture|CPU\(s\)|"
                 r"On-line CPU\(s\) list|CPU op-mode\(s\))\s*:", body, re.M):
        fields = {}
        for line in body.splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                fields[k.strip() + ":"] = v.strip()
        return _from_lscpu(fields, str(p))
    return spec_of(schema.read_text(body, str(p), default_name=p.stem, base=p.parent), str(p))


def spec_of(desc: schema.Description, where: str) -> MachineSpec:
    """predict's view of a machine description: its topology, clock, memory bandwidth, and what a
    calibration measured (core-to-core costs, the memory profile)."""
    if "predict" not in desc.uses():
        if len(desc.core_types) > 1:
            kinds = " + ".join(f"{t.count} {t.name}" for t in desc.core_types)
            raise UserError(f"{where}: an asymmetric machine ({kinds}): predict takes machines of identical "
                            "cores (`corecast sched` simulates this one)")
        raise UserError(f"{where}: no [topology]: predict needs sockets and cores_per_socket (docs/machines.md)")
    t = desc.topology
    assert t is not None
    cal: dict[str, Any] = {}
    if desc.core_to_core_ns is not None:
        cal["core_to_core_ns"] = desc.core_to_core_ns
    if desc.memory.profile is not None:
        cal["memory"] = desc.memory.profile
    calibrated = bool(cal) or desc.form == "calibrate" or "by" in desc.provenance
    return MachineSpec(sockets=t.sockets, cores_per_socket=t.cores_per_socket, threads_per_core=t.threads_per_core,
                       numa_nodes=t.numa_nodes, ghz=desc.frequency_hz / 1e9 if desc.frequency_hz else None,
                       memory_bandwidth_gbs_per_socket=desc.memory.bandwidth_gbs_per_socket, name=desc.name,
                       model=desc.model, source=where, calibration=cal if calibrated else None)


#: Other names of the inline keys: the machine description's own (docs/machines.md) and
#: lscpu's words, so that a machine can be given as its TOML or lscpu names it.
INLINE_ALIASES = {"cores_per_socket": "cores", "threads_per_core": "smt", "numa_nodes": "numa",
                  "logical_cpus": "cpus", "socket_s": "sockets", "core_s_per_socket": "cores",
                  "thread_s_per_core": "smt", "numa_node_s": "numa"}


def _inline(text: str) -> MachineSpec:
    pairs = [part.split("=", 1) for part in text.split(",")]
    for p in pairs:
        key = norm(p[0])                 # without case and punctuation, as a table's header
        if key == "threads":
            raise UserError(f"machine description '{text}': threads= is ambiguous: smt= (threads per core) "
                            "or cpus= (logical CPUs)")
        p[0] = INLINE_ALIASES.get(key, key)
    kv = dict(pairs)
    if len(kv) < len(pairs):
        twice = next(k for k, _ in pairs if sum(1 for k2, _ in pairs if k2 == k) > 1)
        raise UserError(f"machine description '{text}': {twice}= is given twice")
    known = {"sockets", "cores", "smt", "ghz", "numa", "cpus", "bandwidth"}
    bad = sorted(set(kv) - known)
    if bad:
        raise UserError(f"machine description '{text}': unknown key {bad[0]!r} "
                        "(sockets, cores (per socket), smt, numa, ghz, bandwidth (GB/s per socket), cpus)")

    def num(k: str, kind: type = int) -> Any:
        try:
            v = kind(kv[k])
        except ValueError:
            raise UserError(f"machine description '{text}': {k}={kv[k]} is not a {'whole ' if kind is int else ''}number") from None
        return v

    if "cpus" in kv and num("cpus") < 1:
        raise UserError(f"machine description '{text}': cpus= must be a whole number of at least 1")
    if "cpus" in kv and not set(kv) - {"cpus", "ghz"}:
        return MachineSpec(sockets=1, cores_per_socket=num("cpus"), threads_per_core=1,
                           ghz=num("ghz", float) if "ghz" in kv else None, source=f"inline '{text}'",
                           known="cpus")
    if "cpus" in kv:
        # the logical CPUs with part of the topology (`cpus=80,smt=2`, `cpus=128,sockets=2`): the
        # cores per socket are what the CPUs leave, and must be a whole number (one socket and no
        # SMT where not said, as in the form with cores=)
        sockets = num("sockets") if "sockets" in kv else 1
        smt = num("smt") if "smt" in kv else 1
        if sockets < 1 or smt < 1:
            raise UserError(f"machine description '{text}': sockets= and smt= must be at least 1")
        cores, rest = divmod(num("cpus"), sockets * smt)
        if "cores" in kv and num("cores") * sockets * smt != num("cpus"):
            raise UserError(f"machine description '{text}': {sockets} socket(s) × {num('cores')} cores × {smt} "
                            f"thread(s) is {num('cores') * sockets * smt} CPUs, not cpus={num('cpus')}")
        if rest or cores < 1:
            raise UserError(f"machine description '{text}': cpus={num('cpus')} is not a whole number of cores "
                            f"for {sockets} socket(s) × {smt} thread(s) per core")
        kv["cores"] = str(cores)
    if "cores" not in kv:
        raise UserError(f"machine description '{text}': cores= (per socket) is needed")
    return MachineSpec(sockets=num("sockets") if "sockets" in kv else 1, cores_per_socket=num("cores"),
                       threads_per_core=num("smt") if "smt" in kv else 1,
                       numa_nodes=num("numa") if "numa" in kv else None,
                       ghz=num("ghz", float) if "ghz" in kv else None,
                       memory_bandwidth_gbs_per_socket=num("bandwidth", float) if "bandwidth" in kv else None,
                       source=f"inline '{text}'")


def _flatten_lscpu(items: Any, where: str = "lscpu -J output") -> dict[str, str]:
    """`lscpu -J`'s fields, children included: a list of objects, each with its own list of
    children; anything else in the file is one UserError naming it."""
    if not isinstance(items, list):
        raise UserError(f"{where}: 'lscpu' and each 'children' must be a list of fields, as `lscpu -J` writes")
    out: dict[str, str] = {}
    for it in items:
        if not isinstance(it, Mapping):
            raise UserError(f"{where}: each field of 'lscpu' must be an object, as `lscpu -J` writes")
        if "field" in it:
            out[str(it["field"]).strip()] = str(it.get("data", "")).strip()
        out.update(_flatten_lscpu(it.get("children", []), where))
    return out


def _from_lscpu(f: Mapping[str, str], where: str) -> MachineSpec:
    def get(key: str) -> int:
        v = f.get(key)
        if v is None:
            raise UserError(f"{where}: lscpu output without '{key}'")
        try:
            return int(v)
        except ValueError:
            raise UserError(f"{where}: lscpu '{key}' is {v!r}, not a number") from None

    mhz = f.get("CPU max MHz:") or f.get("CPU MHz:")
    numa = f.get("NUMA node(s):")
    return MachineSpec(sockets=get("Socket(s):"), cores_per_socket=get("Core(s) per socket:"),
                       threads_per_core=get("Thread(s) per core:"),
                       numa_nodes=int(numa) if numa and numa.isdigit() else None,
                       ghz=round(float(mhz) / 1000, 3) if mhz and re.fullmatch(r"[0-9.]+", mhz) else None,
                       model=f.get("Model name:", ""), name=f.get("Model name:", ""), source=where)


def _from_hwloc(body: str, where: str) -> MachineSpec:
    try:
        root = ET.fromstring(body)
    except ET.ParseError as err:
        raise UserError(f"{where}: not valid XML ({err})") from None
    if root.tag != "topology":
        raise UserError(f"{where}: XML, but not hwloc's (`lstopo --of xml`)")
    objs = list(root.iter("object"))
    count = {t: sum(1 for o in objs if o.get("type") == t) for t in ("Package", "Core", "PU", "NUMANode")}
    if not count["PU"]:
        raise UserError(f"{where}: hwloc XML without processing units")
    sockets = max(1, count["Package"])
    cores = count["Core"] or count["PU"]
    if cores % sockets or count["PU"] % cores:
        raise UserError(f"{where}: an uneven machine ({sockets} packages, {cores} cores, {count['PU']} PUs): "
                        "describe it in TOML instead")
    model = next((i.get("value", "") for o in objs if o.get("type") == "Package"
                  for i in o.iter("info") if i.get("name") == "CPUModel"), "")
    return MachineSpec(sockets=sockets, cores_per_socket=cores // sockets, threads_per_core=count["PU"] // cores,
                       numa_nodes=count["NUMANode"] or None, model=model, name=model, source=where)
