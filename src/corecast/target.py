"""Machine descriptions for prediction: the machine measured and the machine predicted for.

A `MachineSpec` says how many sockets, cores per socket and hardware threads per core a machine
has (and, where known, NUMA nodes, clock, memory bandwidth and a calibration profile). It is
read from any of the forms a user has at hand (`parse_spec`):

- a bundled name (`corecast.targets`, `src/corecast/targets/*.toml`),
- a TOML file (the same keys as the bundled ones; `chase_profile = "memory.json"` names a
  memory profile, corecast.memprofile, whose peak bandwidth per socket is used when the TOML
  gives none),
- the JSON `corecast calibrate` writes (`"kind": "corecast-target"`, shape in
  `calibration_doc`; its memory profile gives the bandwidth per socket),
- hwloc's XML (`lstopo --of xml` run on the target),
- `lscpu` or `lscpu -J` output saved to a file,
- an inline form: `sockets=2,cores=32,smt=2[,ghz=2.4][,numa=4]` (cores per socket; smt threads
  per core), or `cpus=64` when only the logical CPU count is known.

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
import tomllib
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from . import outputs
from .errors import UserError, read_input
from .parsing import json_document
from .memprofile import profile_from_doc, read_profile

ORDERS = ("compact", "spread", "smt-last")

#: The largest machine a description may give (docs/predict.md): real machines stay well inside
#: (the largest x86 and Arm servers: 8 sockets, under 300 cores a socket, 2 to 8 threads a core),
#: and a count past them is a typo, not a machine to plan a placement for (a billion sockets took
#: 22 GB before the kernel stopped it).
MAX_SOCKETS = 64
MAX_CORES_PER_SOCKET = 4096
MAX_THREADS_PER_CORE = 16
MAX_CPUS = 65536
MAX_NUMA_NODES = 1024
MAX_DESCRIPTION_BYTES = 16 << 20


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
        bounds = {"sockets": MAX_SOCKETS, "cores_per_socket": MAX_CORES_PER_SOCKET,
                  "threads_per_core": MAX_THREADS_PER_CORE}
        for k in ("sockets", "cores_per_socket", "threads_per_core"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise UserError(f"{src}: {k} must be a whole number of at least 1 (got {v!r})")
            if v > bounds[k] and not (k == "cores_per_socket" and self.known == "cpus"):
                raise UserError(f"{src}: {k} = {v:,} is above {bounds[k]:,}, the most corecast takes")
        if self.cpus > MAX_CPUS:
            raise UserError(f"{src}: {self.cpus:,} logical CPUs is above {MAX_CPUS:,}, the most corecast takes")
        if self.numa_nodes is not None and (not isinstance(self.numa_nodes, int) or isinstance(self.numa_nodes, bool)
                                            or self.numa_nodes < 1):
            raise UserError(f"{src}: numa_nodes must be a whole number of at least 1")
        if self.numa_nodes is not None and self.numa_nodes > MAX_NUMA_NODES:
            raise UserError(f"{src}: numa_nodes = {self.numa_nodes:,} is above {MAX_NUMA_NODES:,}, "
                            "the most corecast takes")
        for k in ("ghz", "memory_bandwidth_gbs_per_socket"):
            v = getattr(self, k)
            if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise UserError(f"{self.source or 'machine'}: {k} must be a positive number (got {v!r})")

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
    """Names of the bundled machine descriptions."""
    d = resources.files("corecast") / "targets"
    return sorted(p.name[:-5] for p in d.iterdir() if p.name.endswith(".toml"))


_INLINE = re.compile(r"^[a-z_]+=[^,=]+(,[a-z_]+=[^,=]+)*$")


def parse_spec(text: str) -> MachineSpec:
    """A MachineSpec from a bundled name, a file (TOML, calibrate JSON, hwloc XML, lscpu text
    or JSON), or the inline form. Mistakes end in one UserError line."""
    text = text.strip()
    if not text:
        raise UserError("machine description: empty")
    if _INLINE.match(text) and not Path(text).exists():
        return _inline(text)
    if text in bundled():
        d = resources.files("corecast") / "targets" / f"{text}.toml"
        return _from_toml(d.read_text(encoding="utf-8"), f"bundled machine {text}", default_name=text)
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
    if s.startswith("{"):
        try:
            doc = json_document(body, str(p))
        except json.JSONDecodeError as err:
            raise UserError(f"{p}:{err.lineno}: not valid JSON ({err.msg})") from None
        if isinstance(doc, dict) and "lscpu" in doc:
            return _from_lscpu(_flatten_lscpu(doc["lscpu"]), str(p))
        if isinstance(doc, dict) and doc.get("kind") == "corecast-target":
            return _from_calibration(doc, str(p))
        raise UserError(f"{p}: a JSON file, but neither `lscpu -J` output nor `corecast calibrate` output")
    if re.search(r"^\s*(Socket\(s\)|Core\(s\) per socket|Thread\(s\) per core)\s*:", body, re.M):
        fields = {}
        for line in body.splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                fields[k.strip() + ":"] = v.strip()
        return _from_lscpu(fields, str(p))
    return _from_toml(body, str(p), default_name=p.stem)


def _inline(text: str) -> MachineSpec:
    pairs = [part.split("=", 1) for part in text.split(",")]
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

    if "cpus" in kv:
        if set(kv) - {"cpus", "ghz"}:
            raise UserError(f"machine description '{text}': cpus= stands alone (or with ghz=)")
        return MachineSpec(sockets=1, cores_per_socket=num("cpus"), threads_per_core=1,
                           ghz=num("ghz", float) if "ghz" in kv else None, source=f"inline '{text}'",
                           known="cpus")
    if "cores" not in kv:
        raise UserError(f"machine description '{text}': cores= (per socket) is needed")
    return MachineSpec(sockets=num("sockets") if "sockets" in kv else 1, cores_per_socket=num("cores"),
                       threads_per_core=num("smt") if "smt" in kv else 1,
                       numa_nodes=num("numa") if "numa" in kv else None,
                       ghz=num("ghz", float) if "ghz" in kv else None,
                       memory_bandwidth_gbs_per_socket=num("bandwidth", float) if "bandwidth" in kv else None,
                       source=f"inline '{text}'")


_TOML_KEYS = {"name", "description", "model", "sockets", "cores_per_socket", "threads_per_core", "numa_nodes",
              "ghz", "memory_bandwidth_gbs_per_socket", "source", "notes", "chase_profile"}


def _from_toml(body: str, where: str, default_name: str = "") -> MachineSpec:
    try:
        d = tomllib.loads(body)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{where}: not a machine description (TOML: {err})") from None
    except RecursionError:
        raise UserError(f"{where}: not a machine description (TOML nested too deep)") from None
    unknown = sorted(set(d) - _TOML_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r} (keys: {', '.join(sorted(_TOML_KEYS))})")
    for k in ("sockets", "cores_per_socket"):
        if k not in d:
            raise UserError(f"{where}: '{k}' is missing")
    spec = MachineSpec(sockets=d["sockets"], cores_per_socket=d["cores_per_socket"],
                       threads_per_core=d.get("threads_per_core", 1), numa_nodes=d.get("numa_nodes"),
                       ghz=d.get("ghz"), memory_bandwidth_gbs_per_socket=d.get("memory_bandwidth_gbs_per_socket"),
                       name=d.get("name", default_name), model=d.get("model", ""), source=where)
    if "chase_profile" in d:
        # a memory profile (`corecast chase --profile` or `corecast calibrate` output), relative
        # to the TOML file; the bandwidth given in the TOML wins over the profile's
        ref = d["chase_profile"]
        if not isinstance(ref, str) or not ref:
            raise UserError(f"{where}: chase_profile must name a file")
        path = Path(ref) if Path(ref).is_absolute() or where.startswith("bundled") else Path(where).parent / ref
        profile = read_profile(path)
        spec.calibration = {"memory": profile.to_dict()}
        if spec.memory_bandwidth_gbs_per_socket is None:
            spec.memory_bandwidth_gbs_per_socket = profile.bandwidth_gbs_per_socket
    return spec


def _flatten_lscpu(items: list[Mapping[str, Any]]) -> dict[str, str]:
    out: dict[str, str] = {}
    for it in items:
        if "field" in it:
            out[str(it["field"]).strip()] = str(it.get("data", "")).strip()
        out.update(_flatten_lscpu(it.get("children", [])))
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


def _from_calibration(doc: Mapping[str, Any], where: str) -> MachineSpec:
    m = doc.get("machine") or {}
    try:
        spec = MachineSpec(sockets=int(m["sockets"]), cores_per_socket=int(m["cores_per_socket"]),
                           threads_per_core=int(m.get("threads_per_core") or 1),
                           numa_nodes=int(m["numa_nodes"]) if m.get("numa_nodes") else None,
                           ghz=float(m["ghz"]) if m.get("ghz") else None, model=str(m.get("model", "")),
                           name=str(m.get("model", "")), source=where)
    except (KeyError, TypeError, ValueError) as err:
        raise UserError(f"{where}: calibration file without a usable machine block ({err})") from None
    spec.calibration = {k: doc.get(k) for k in ("core_to_core_ns", "memory") if doc.get(k) is not None}
    if doc.get("memory") is not None:
        profile = profile_from_doc(doc["memory"], f"{where}: memory")     # checked here, once
        spec.memory_bandwidth_gbs_per_socket = profile.bandwidth_gbs_per_socket
    return spec


CALIBRATION_KIND = "corecast-target"
CALIBRATION_VERSION = 1


def calibration_doc(machine: Mapping[str, Any], core_to_core: Mapping[str, Any] | None,
                    memory: Mapping[str, Any] | None, **extra: Any) -> dict[str, Any]:
    """The JSON `corecast calibrate` writes and `parse_spec` reads back (`_from_calibration`):

        {"kind": "corecast-target", "version": 1,
         "machine": {"sockets", "cores_per_socket", "threads_per_core", "numa_nodes", "cpus",
                     "ghz", "model"},
         "core_to_core_ns": {"smt", "same_socket", "cross_socket": ns per one-way cache-line
                             transfer (median over pairs; null where the machine has no such
                             pair), "pairs": [{"cpus": [a, b], "kind", "ns", "min_ns",
                             "max_ns"}], "not_measured": {kind: why}, "method": "..."},
         "memory": a memory profile (corecast.memprofile: "kind": "corecast-memory-profile"),
         "memory_bandwidth_gbs_per_socket": the profile's peak per socket, GB/s,
         ... and what `extra` adds (elapsed_s, created, corecast_version, warnings, host)}

    `machine` is a corecast.dataset.Machine as a dict (sockets, cores, threads_per_core,
    logical_cpus, numa_nodes, nominal_freq_hz, cpu_model)."""
    sockets = int(machine.get("sockets") or 1)
    cores = int(machine.get("cores") or machine.get("logical_cpus") or 1)
    freq = machine.get("nominal_freq_hz")
    bw = (memory or {}).get("peak_bandwidth_bytes_s_per_socket")
    return {"kind": CALIBRATION_KIND, "version": CALIBRATION_VERSION,
            "machine": {"sockets": sockets, "cores_per_socket": max(1, cores // sockets),
                        "threads_per_core": int(machine.get("threads_per_core") or 1),
                        "numa_nodes": machine.get("numa_nodes"), "cpus": machine.get("logical_cpus"),
                        "ghz": round(freq / 1e9, 3) if freq else None, "model": machine.get("cpu_model") or ""},
            "core_to_core_ns": dict(core_to_core) if core_to_core is not None else None,
            "memory": dict(memory) if memory is not None else None,
            "memory_bandwidth_gbs_per_socket": bw / 1e9 if bw else None, **extra}


def write_calibration(doc: Mapping[str, Any], path: str | Path) -> None:
    """Write a calibration document (after checking that `parse_spec` reads it back)."""
    _from_calibration(doc, str(path))
    outputs.write_text(path, json.dumps(doc, indent=1, allow_nan=False) + "\n", "the calibration")
