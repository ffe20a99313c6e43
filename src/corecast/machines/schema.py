"""The one reader of machine descriptions: the schema every command reads (docs/machines.md).

A description is TOML (the bundled files beside this module, or a user's file) or the same
tables as JSON (what `corecast calibrate` writes, `"kind": "corecast-machine"`):

    name = "epyc-9654-2s"                      # default: the file's name
    model = "2 x AMD EPYC 9654 (Genoa)"
    description = "..."; source = "..."; notes = ["..."]
    [topology]   sockets, cores_per_socket, threads_per_core, numa_nodes
    [[core_type]] name, count, speed, active_w, idle_w, cpus   (asymmetric machines)
    [clock]      frequency = "2.4GHz"          (corecast.parsing's frequency units)
    [[cache]]    level, kind, size = "32KiB", line_size, ways, replacement, policy,
                 write_allocate, shared, latency_cycles
    [[tlb]]      level, kind, entries, ways, page_size, replacement
    [branch]     kind, history_bits, table_size
    [pipeline]   fetch_depth, scheduler_size, drain_ipc, issue_width, units
    [memory]     latency_cycles, bandwidth_gbs_per_socket, profile (a memory profile file)
    [costs]      cycles per event (stlb_hit, dtlb_miss, itlb_miss, branch_mispredict,
                 misaligned_load, coherence_miss) and core_to_core_ns (calibrate's figures)
    [sim]        name, description, cores: what `corecast sim` calls the part it simulates
    [provenance] what `corecast calibrate` recorded about its run (kept as it is)

Each command reads the parts it needs (`uses`): predict the topology (and clock, memory, the
core-to-core costs), sim the clock, caches, TLBs, branch predictor, pipeline and costs, sched
the core types. Every mistake is one `UserError` line naming the file and the key; the old
forms (legacy.py) are read as this schema with a note naming the new form.
"""
from __future__ import annotations

import functools
import json
import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from .. import messages, outputs
from ..errors import UserError, read_input
from ..memprofile import profile_from_doc, read_profile
from ..parsing import json_document, toml_document
from . import legacy
from .table import Table, pow2 as _pow2

KIND = "corecast-machine"
VERSION = 1

#: The largest machine a description may give (docs/machines.md): real machines stay well inside
#: (the largest x86 and Arm servers: 8 sockets, under 300 cores a socket, 2 to 8 threads a core),
#: and a count past them is a typo, not a machine to plan a placement for (a billion sockets took
#: 22 GB before the kernel stopped it).
MAX_SOCKETS = 64
MAX_CORES_PER_SOCKET = 4096
MAX_THREADS_PER_CORE = 16
MAX_CPUS = 65536
MAX_NUMA_NODES = 1024
MAX_DESCRIPTION_BYTES = 16 << 20
MAX_CORE_TYPES = 8            # an asymmetric machine's kinds of core
MAX_TYPED_CORES = 4096        # cores of all types together
MAX_ENTRIES = 64              # caches, TLBs or notes one description may list
MAX_LEVEL = 8                 # the deepest cache level a description may name

#: Other names of bundled machines: the names their commands knew them by before one file
#: described each physical machine (`sim --machine zen4-genoa` is the EPYC 9654's core).
ALIASES = {"zen4-genoa": "epyc-9654-2s"}

CACHE_KINDS = ("data", "instruction", "unified")
REPLACEMENT = {"tree-plru": "plru", "pseudo-lru": "plru", "plru": "plru", "lru": "lru",
               "fifo": "fifo", "random": "random", "rand": "random"}
POLICY = {"inclusive": "inclusive", "exclusive": "exclusive", "victim": "victim",
          "non-inclusive": "non-inclusive", "noninclusive": "non-inclusive", "nine": "non-inclusive"}
BRANCH_KINDS = ("gshare", "bimodal")
UNIT_CLASSES = ("alu", "load", "store", "branch", "fp")
#: The event costs, in cycles, a [costs] table may give (a cache's and memory's latency sit
#: with the cache and in [memory]).
COST_KEYS = ("stlb_hit", "dtlb_miss", "itlb_miss", "branch_mispredict", "misaligned_load", "coherence_miss")
C2C_KINDS = ("smt", "same_socket", "cross_socket")

SECTIONS = {"kind", "version", "name", "model", "description", "source", "notes", "topology", "core_type",
            "clock", "cache", "tlb", "branch", "pipeline", "memory", "costs", "sim", "provenance"}


# ------------------------------------------------------------------------------ records
@dataclass(frozen=True)
class CoreType:
    """One kind of core of an asymmetric machine: how many, how fast, how much power."""

    name: str
    count: int
    speed: float                # relative speed of a purely compute-bound thread
    active_w: float = 0.0       # watts of one core running a thread
    idle_w: float = 0.0         # watts of one idle core
    cpus: str = ""              # the logical CPUs of this type (sched's enforcing mode)


@dataclass(frozen=True)
class Topology:
    sockets: int
    cores_per_socket: int
    threads_per_core: int = 1
    numa_nodes: int | None = None

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket


@dataclass(frozen=True)
class Cache:
    """One cache (for one side, or unified); `index` is its place in the file's [[cache]]."""

    index: int
    level: int
    kind: str                   # data | instruction | unified
    size: int                   # bytes
    line_size: int              # bytes
    ways: int
    replacement: str = "lru"
    policy: str = "non-inclusive"
    write_allocate: bool = True
    shared: int = 1             # cores served by one instance (1 = private); 0 = all cores
    latency_cycles: float | None = None   # cycles a hit costs beyond a level-1 hit

    @property
    def sets(self) -> int:
        return self.size // (self.line_size * self.ways)

    @property
    def name(self) -> str:
        suffix = {"data": "D", "instruction": "I", "unified": ""}[self.kind]
        return f"L{self.level}{suffix}"

    def serves_data(self) -> bool:
        return self.kind in ("data", "unified")

    def serves_instructions(self) -> bool:
        return self.kind in ("instruction", "unified")

    def instances(self, cores: int) -> int:
        """How many copies of this cache `cores` cores have."""
        share = cores if self.shared == 0 else self.shared
        return max(1, -(-cores // share))


@dataclass
class Tlb:
    level: int
    kind: str                   # data | instruction | unified
    entries: int
    ways: int                   # == entries: fully associative
    page_size: int = 4096
    replacement: str = "lru"

    @property
    def sets(self) -> int:
        return self.entries // self.ways

    @property
    def name(self) -> str:
        base = {"data": "DTLB", "instruction": "ITLB", "unified": "STLB"}[self.kind]
        return f"L{self.level} {base}"


@dataclass
class Branch:
    kind: str = "gshare"
    history_bits: int = 12
    table_size: int = 4096


@dataclass
class Pipeline:
    fetch_depth: float | None = None
    scheduler_size: int = 32
    drain_ipc: float | None = None
    issue_width: int = 4
    units: dict[str, int] = field(default_factory=lambda: {"alu": 3, "load": 1, "store": 1})


@dataclass(frozen=True)
class Memory:
    latency_cycles: float | None = None           # a miss to DRAM, beyond a level-1 hit
    bandwidth_gbs_per_socket: float | None = None  # given, else the profile's peak
    profile: dict[str, Any] | None = None          # a memory profile (corecast.memprofile)


@dataclass(frozen=True)
class SimPart:
    """What `corecast sim` calls the part of the machine it simulates (None: the machine's own)."""

    name: str | None = None
    description: str | None = None
    cores: int | None = None    # the default --cores (else every core of the topology, else 1)


@dataclass
class Description:
    """A machine as the schema describes it; `where` names it in messages."""

    name: str
    where: str
    model: str = ""
    description: str = ""
    source: str = ""
    notes: tuple[str, ...] = ()
    topology: Topology | None = None
    core_types: tuple[CoreType, ...] = ()
    frequency_hz: float | None = None
    caches: tuple[Cache, ...] = ()
    tlbs: tuple[Tlb, ...] = ()
    branch: Branch | None = None
    pipeline: Pipeline = field(default_factory=Pipeline)
    memory: Memory = Memory()
    costs: dict[str, float] = field(default_factory=dict)
    core_to_core_ns: dict[str, Any] | None = None
    sim: SimPart = SimPart()
    provenance: dict[str, Any] = field(default_factory=dict)
    form: str = ""              # "" for the schema; else the old form it was read from

    def uses(self) -> tuple[str, ...]:
        """The commands this description serves: predict (a topology of identical cores), sim
        (a clock and something to simulate), sched (core types)."""
        out = []
        if self.topology is not None and len(self.core_types) <= 1:
            out.append("predict")
        if self.frequency_hz is not None and (self.caches or self.tlbs or self.branch is not None):
            out.append("sim")
        if self.core_types:
            out.append("sched")
        return tuple(out)


# ------------------------------------------------------------------------------ bounds
def check_counts(src: str, sockets: Any, cores_per_socket: Any, threads_per_core: Any,
                 numa_nodes: Any = None, cpus_only: bool = False) -> None:
    """The bounds of a topology (every form predict reads goes through here): whole numbers of
    at least 1, at most MAX_*; `cpus_only` when only the logical CPU count is known."""
    bounds = {"sockets": MAX_SOCKETS, "cores_per_socket": MAX_CORES_PER_SOCKET,
              "threads_per_core": MAX_THREADS_PER_CORE}
    for k, v in (("sockets", sockets), ("cores_per_socket", cores_per_socket), ("threads_per_core", threads_per_core)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise UserError(f"{src}: {k} must be a whole number of at least 1 (got {v!r})")
        if v > bounds[k] and not (k == "cores_per_socket" and cpus_only):
            raise UserError(f"{src}: {k} = {v:,} is above {bounds[k]:,}, the most corecast takes")
    cpus = sockets * cores_per_socket * threads_per_core
    if cpus > MAX_CPUS:
        raise UserError(f"{src}: {cpus:,} logical CPUs is above {MAX_CPUS:,}, the most corecast takes")
    if numa_nodes is not None and (not isinstance(numa_nodes, int) or isinstance(numa_nodes, bool) or numa_nodes < 1):
        raise UserError(f"{src}: numa_nodes must be a whole number of at least 1")
    if numa_nodes is not None and numa_nodes > MAX_NUMA_NODES:
        raise UserError(f"{src}: numa_nodes = {numa_nodes:,} is above {MAX_NUMA_NODES:,}, the most corecast takes")


# ------------------------------------------------------------------------------ finding
def _folder() -> Any:
    return resources.files("corecast.machines")


def bundled() -> list[str]:
    """The names of the bundled machine files (aliases not included)."""
    return sorted(p.name[:-5] for p in _folder().iterdir() if p.name.endswith(".toml"))


def bundled_name(name: str) -> str | None:
    """The bundled file a name (or an alias) finds, or None."""
    name = ALIASES.get(name, name)
    return name if name in bundled() else None


def bundled_path(name: str) -> str:
    """The file of a bundled machine (by its name or an alias)."""
    real = bundled_name(name)
    if real is None:
        raise UserError(f"no bundled machine '{name}' (bundled: {', '.join(bundled())})")
    return str(_folder() / f"{real}.toml")


@functools.lru_cache(maxsize=None)
def _bundled_description(name: str) -> Description:
    body = (_folder() / f"{name}.toml").read_text(encoding="utf-8")
    return parse(_toml(body, f"bundled machine {name}"), f"bundled machine {name}", default_name=name)


def bundled_description(name: str) -> Description:
    """A bundled machine (by its name or an alias), read once per process."""
    real = bundled_name(name)
    if real is None:
        raise UserError(f"no bundled machine '{name}' (bundled: {', '.join(bundled())})")
    return _bundled_description(real)


def bundled_for(command: str) -> list[Description]:
    """The bundled machines a command can use ("predict", "sim" or "sched")."""
    return [d for d in (_bundled_description(n) for n in bundled()) if command in d.uses()]


def read_file(path: Path, what: str = "machine description") -> Description:
    try:
        body = read_input(path, what, limit=MAX_DESCRIPTION_BYTES)[0].decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (a {what} is TOML or JSON)") from None
    return read_text(body, str(path), default_name=path.stem, base=path.parent)


def read_text(body: str, where: str, default_name: str = "", base: Path | None = None) -> Description:
    """A description from a file's text: JSON when it opens with `{`, else TOML."""
    if body.lstrip().startswith("{"):
        try:
            data = json_document(body, where)
        except json.JSONDecodeError as err:
            raise UserError(f"{where}:{err.lineno}: not valid JSON ({err.msg})") from None
        if not isinstance(data, dict):
            raise UserError(f"{where}: a machine description is a JSON object")
    else:
        data = _toml(body, where)
    return parse(data, where, default_name=default_name, base=base)


def _toml(body: str, where: str) -> dict[str, Any]:
    try:
        return toml_document(body, where)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{where}: not a machine description: not valid TOML ({err})") from None


_noted: set[str] = set()


def parse(data: Mapping[str, Any], where: str = "<machine>", default_name: str = "",
          base: Path | None = None) -> Description:
    """A Description from parsed TOML or JSON, in this schema or an old form (read as this
    schema, with a note once per file naming the new form). `base`: the folder a relative
    memory profile is found in."""
    if not isinstance(data, Mapping):
        raise UserError(f"{where}: a machine description is a table")
    form = legacy.form_of(data)
    if form:
        data = legacy.upgrade(data, form, where)
    desc = _parse(data, where, default_name, base)
    desc.form = form
    if form and where not in _noted and not where.startswith("<"):
        _noted.add(where)
        messages.note(f"{where}: {legacy.FORMS[form]} in the old form, read as the new one "
                      f"({legacy.hint(form)}; docs/machines.md)")
    return desc


def _parse(data: Mapping[str, Any], where: str, default_name: str, base: Path | None) -> Description:
    r = Table(data, where, "")
    r.check_keys(SECTIONS)
    if "kind" in data and data["kind"] != KIND:
        raise r._err("kind", f"{data['kind']!r}: a machine description's kind is \"{KIND}\"")
    if "version" in data:
        v = r.integer("version", minimum=1)
        if v > VERSION:
            raise r._err("version", f"{v} is newer than this corecast understands ({VERSION})")
    notes = data.get("notes", [])
    notes = [notes] if isinstance(notes, str) else notes
    if not isinstance(notes, list) or len(notes) > MAX_ENTRIES or not all(isinstance(n, str) for n in notes):
        raise r._err("notes", f"a string or a list of at most {MAX_ENTRIES} strings")
    core_types = _core_types(r.array("core_type", default=[]), where)
    topo = _topology(r.table("topology", default=None), core_types, where)
    clock = r.table("clock", default=None)
    freq = None
    if clock is not None:
        c = Table(clock, where, "clock.")
        c.check_keys({"frequency"})
        freq = c.frequency("frequency")
    caches = tuple(_cache(x, where, i) for i, x in enumerate(r.array("cache", default=[], most=MAX_ENTRIES)))
    tlbs = tuple(_tlb(x, where, i) for i, x in enumerate(r.array("tlb", default=[], most=MAX_ENTRIES)))
    braw = r.table("branch", default=None)
    mem, costs, c2c = _memory(r.table("memory", default={}), where, base), *_costs(r.table("costs", default={}), where)
    desc = Description(
        name=r.text("name") or default_name or Path(where).stem, where=where, model=r.text("model"),
        description=r.text("description"), source=r.text("source"), notes=tuple(notes), topology=topo,
        core_types=core_types, frequency_hz=freq, caches=caches, tlbs=tlbs,
        branch=_branch(braw, where) if braw is not None else None,
        pipeline=_pipeline(r.table("pipeline", default={}), where), memory=mem, costs=costs,
        core_to_core_ns=c2c, sim=_sim(r.table("sim", default={}), where),
        provenance=dict(r.table("provenance", default={})))
    return desc


# ------------------------------------------------------------------------------ sections
def _core_types(raw: list, where: str) -> tuple[CoreType, ...]:
    if len(raw) > MAX_CORE_TYPES:
        raise UserError(f"{where}: {len(raw)} core types; at most {MAX_CORE_TYPES}")
    types = []
    for i, t in enumerate(raw):
        r = Table(t, where, f"core_type[{i}].")
        r.check_keys({"name", "count", "speed", "active_w", "idle_w", "cpus"})
        types.append(CoreType(r.text("name") or f"type{i}", r.integer("count", minimum=1, maximum=MAX_TYPED_CORES),
                              float(r.number("speed", positive=True)),
                              float(r.number("active_w", default=0.0, nonnegative=True)),
                              float(r.number("idle_w", default=0.0, nonnegative=True)), r.text("cpus")))
    names = [t.name for t in types]
    if len(set(names)) != len(names):
        raise UserError(f"{where}: two core types are named '{next(n for n in names if names.count(n) > 1)}'")
    total = sum(t.count for t in types)
    if total > MAX_TYPED_CORES:
        raise UserError(f"{where}: {total} cores; at most {MAX_TYPED_CORES}")
    return tuple(sorted(types, key=lambda t: -t.speed))      # fastest first; stable on ties


def _topology(raw: Any, core_types: tuple[CoreType, ...], where: str) -> Topology | None:
    typed = sum(t.count for t in core_types)
    if raw is None:
        return Topology(1, typed) if core_types else None
    r = Table(raw, where, "topology.")
    r.check_keys({"sockets", "cores_per_socket", "threads_per_core", "numa_nodes"})
    sockets = r.integer("sockets", default=1)
    per = r.integer("cores_per_socket", default=None if core_types else Table._MISSING)
    smt = r.integer("threads_per_core", default=1)
    numa = r.integer("numa_nodes", default=None)
    if per is None:
        if typed % sockets:
            raise UserError(f"{where}: topology: {typed} cores of the core types do not split over {sockets} sockets")
        per = typed // sockets
    check_counts(where, sockets, per, smt, numa)
    if core_types and sockets * per != typed:
        raise UserError(f"{where}: topology: {sockets} x {per} cores, but the core types count {typed}")
    return Topology(sockets, per, smt, numa)


def _cache(d: Any, where: str, i: int) -> Cache:
    key = f"cache[{i}]."
    r = Table(d, where, key, what="a table ([[cache]])")
    r.check_keys({"level", "kind", "size", "line_size", "ways", "replacement", "policy", "write_allocate", "shared",
                  "sets", "latency_cycles"})
    level = r.integer("level", minimum=1, maximum=MAX_LEVEL)
    kind = r.choice("kind", CACHE_KINDS, default="unified" if level > 1 else Table._MISSING)
    size = r.size("size")
    line = r.size("line_size", default=64)
    if not _pow2(line):
        raise r._err("line_size", f"{line} is not a power of two")
    ways = r.integer("ways", minimum=1)
    if size % (line * ways):
        raise r._err("size", f"{size} bytes is not a whole number of sets of {ways} ways x {line} bytes")
    if "sets" in d and r.integer("sets") != size // (line * ways):
        raise r._err("sets", f"{d['sets']} does not match size / (line_size x ways) = {size // (line * ways)}")
    shared_raw = d.get("shared", False)
    if isinstance(shared_raw, bool):
        shared = 0 if shared_raw else 1
    elif isinstance(shared_raw, int) and shared_raw >= 1:
        shared = shared_raw
    else:
        raise r._err("shared", f"{shared_raw!r}: give true (one cache for all cores), false (one per core) "
                     "or a number of cores per cache")
    latency = r.number("latency_cycles", default=None, nonnegative=True)
    if latency is not None and level == 1:
        raise r._err("latency_cycles", "a level-1 hit is in the base CPI: give latency_cycles from level 2 on")
    return Cache(i, level, kind, size, line, ways, r.alias("replacement", REPLACEMENT, default="lru"),
                 r.alias("policy", POLICY, default="non-inclusive"), r.boolean("write_allocate", default=True),
                 shared, None if latency is None else float(latency))


def _tlb(d: Any, where: str, i: int) -> Tlb:
    r = Table(d, where, f"tlb[{i}].", what="a table ([[tlb]])")
    r.check_keys({"level", "kind", "entries", "ways", "page_size", "replacement"})
    level = r.integer("level", minimum=1)
    if level > 2:
        raise r._err("level", f"{level}: TLBs have one or two levels")
    kind = r.choice("kind", CACHE_KINDS)
    entries = r.integer("entries", minimum=1, maximum=1 << 20)
    ways_raw = d.get("ways", "full")
    if isinstance(ways_raw, str) and ways_raw.lower() in ("full", "fully-associative", "fa"):
        ways = entries
    else:
        ways = r.integer("ways", minimum=1)
    if entries % ways:
        raise r._err("ways", f"{entries} entries are not a whole number of sets of {ways} ways")
    page = r.size("page_size", default=4096)
    if not _pow2(page):
        raise r._err("page_size", f"{page} is not a power of two")
    return Tlb(level, kind, entries, ways, page, r.alias("replacement", REPLACEMENT, default="lru"))


def _branch(d: Any, where: str) -> Branch:
    r = Table(d, where, "branch.", what="a table ([branch])")
    r.check_keys({"kind", "history_bits", "table_size"})
    kind = r.choice("kind", BRANCH_KINDS, default="gshare")
    table = r.integer("table_size", default=4096, minimum=2, maximum=1 << 30)
    if not _pow2(table):
        raise r._err("table_size", f"{table} is not a power of two")
    bits = int(math.log2(table))
    hist = r.integer("history_bits", default=0 if kind == "bimodal" else bits, minimum=0)
    if kind == "gshare" and hist > bits:
        raise r._err("history_bits", f"{hist} history bits cannot index a table of {table} counters (at most {bits})")
    return Branch(kind, hist, table)


def _pipeline(d: Any, where: str) -> Pipeline:
    r = Table(d, where, "pipeline.")
    r.check_keys({"fetch_depth", "scheduler_size", "drain_ipc", "issue_width", "units"})
    fetch = r.number("fetch_depth", positive=True, default=None)
    sched = r.integer("scheduler_size", default=32, minimum=1)
    drain = r.number("drain_ipc", positive=True, default=None)
    width = r.integer("issue_width", default=4, minimum=1)
    raw = r.table("units", default={"alu": 3, "load": 1, "store": 1})
    u = Table(raw, where, "pipeline.units.")
    u.check_keys(set(UNIT_CLASSES))
    units = {k: u.integer(k, minimum=1) for k in UNIT_CLASSES if k in raw}
    for need in ("alu", "load", "store"):
        if need not in units:
            raise UserError(f"{where}: pipeline.units.{need}: missing (alu, load and store units are required; "
                            "branch and fp default to the alu units)")
    return Pipeline(fetch, sched, drain, width, units)


def _memory(d: Any, where: str, base: Path | None) -> Memory:
    r = Table(d, where, "memory.")
    r.check_keys({"latency_cycles", "bandwidth_gbs_per_socket", "profile"})
    latency = r.number("latency_cycles", default=None, nonnegative=True)
    bw = r.number("bandwidth_gbs_per_socket", default=None, positive=True)
    ref, profile = d.get("profile"), None
    if isinstance(ref, Mapping):
        profile = profile_from_doc(ref, f"{where}: memory.profile")
    elif ref is not None:
        if not isinstance(ref, str) or not ref:
            raise r._err("profile", "must name a memory profile file (`corecast chase --profile`)")
        path = Path(ref)
        if not path.is_absolute() and base is not None:
            path = base / path
        profile = read_profile(path)
    if profile is not None and bw is None:
        bw = profile.bandwidth_gbs_per_socket
    return Memory(None if latency is None else float(latency), None if bw is None else float(bw),
                  profile.to_dict() if profile is not None else None)


def _costs(d: Any, where: str) -> tuple[dict[str, float], dict[str, Any] | None]:
    r = Table(d, where, "costs.")
    r.check_keys({*COST_KEYS, "core_to_core_ns"})
    cycles = {k: float(r.number(k, nonnegative=True)) for k in COST_KEYS if k in d}
    c2c = r.table("core_to_core_ns", default=None)
    if c2c is not None:
        c = Table(c2c, where, "costs.core_to_core_ns.")
        c.check_keys({*C2C_KINDS, "pairs", "not_measured", "method"})
        for k in C2C_KINDS:
            c.number(k, default=None, positive=True)
        c.array("pairs", default=[])
        c2c = dict(c2c)
    return cycles, c2c


def _sim(d: Any, where: str) -> SimPart:
    r = Table(d, where, "sim.")
    r.check_keys({"name", "description", "cores"})
    return SimPart(r.text("name") or None, r.text("description") or None,
                   r.integer("cores", default=None, minimum=1, maximum=MAX_TYPED_CORES))


# ------------------------------------------------------------------------------ calibrate's JSON
def calibration_doc(machine: Mapping[str, Any], core_to_core: Mapping[str, Any] | None,
                    memory: Mapping[str, Any] | None, **provenance: Any) -> dict[str, Any]:
    """The description `corecast calibrate` writes, the schema as JSON (`read_text` reads it):

        {"kind": "corecast-machine", "version": 1, "name": MODEL, "model": MODEL,
         "topology": {"sockets", "cores_per_socket", "threads_per_core", "numa_nodes"},
         "clock": {"frequency": "2.596GHz"},
         "memory": {"bandwidth_gbs_per_socket": the profile's peak per socket,
                    "profile": a memory profile (corecast.memprofile)},
         "costs": {"core_to_core_ns": {"smt", "same_socket", "cross_socket": ns per one-way
                   cache-line transfer (median over pairs; null where the machine has no such
                   pair), "pairs": [{"cpus": [a, b], "kind", "ns", "min_ns", "max_ns"}],
                   "not_measured": {kind: why}, "method": "..."}},
         "provenance": {"by": "corecast calibrate", ... what `provenance` adds (elapsed_s,
                        created, corecast_version, warnings, host)}}

    `machine` is a corecast.dataset.Machine as a dict (sockets, cores, threads_per_core,
    numa_nodes, nominal_freq_hz, cpu_model)."""
    sockets = int(machine.get("sockets") or 1)
    cores = int(machine.get("cores") or machine.get("logical_cpus") or 1)
    topo: dict[str, Any] = {"sockets": sockets, "cores_per_socket": max(1, cores // sockets),
                            "threads_per_core": int(machine.get("threads_per_core") or 1)}
    if machine.get("numa_nodes"):
        topo["numa_nodes"] = int(machine["numa_nodes"])
    model = str(machine.get("cpu_model") or "")
    doc: dict[str, Any] = {"kind": KIND, "version": VERSION, "name": model, "model": model, "topology": topo}
    freq = machine.get("nominal_freq_hz")
    if freq:
        doc["clock"] = {"frequency": f"{round(freq / 1e9, 3):g}GHz"}
    if memory is not None:
        bw = memory.get("peak_bandwidth_bytes_s_per_socket")
        doc["memory"] = {**({"bandwidth_gbs_per_socket": bw / 1e9} if bw else {}), "profile": dict(memory)}
    if core_to_core is not None:
        doc["costs"] = {"core_to_core_ns": dict(core_to_core)}
    doc["provenance"] = {"by": "corecast calibrate", **provenance}
    return doc


def write_calibration(doc: Mapping[str, Any], path: str | Path) -> None:
    """Write calibrate's description (after checking that the reader reads it back)."""
    parse(doc, str(path))
    outputs.write_text(path, json.dumps(doc, indent=1, allow_nan=False) + "\n", "the calibration")
