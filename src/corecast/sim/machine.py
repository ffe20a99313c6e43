"""Machine descriptions: the processor a trace is simulated on.

A machine description is a TOML file::

    name = "atom-n540"
    frequency_hz = 1.66e9
    cores = 1                       # cores in the package (the default for `--cores`)

    [penalties]                     # cycles per event; any may be absent
    l2_hit = 15
    dram = 190
    # branch_mispredict absent: 2 x fetch_depth + scheduler_size / drain_ipc

    [pipeline]
    fetch_depth = 6
    scheduler_size = 2
    drain_ipc = 2
    issue_width = 2
    units = { alu = 2, load = 1, store = 1 }

    [[cache]]
    level = 1
    kind = "data"                   # data | instruction | unified
    size = "24KiB"
    line_size = 64
    ways = 6
    replacement = "lru"             # lru | fifo | random | plru
    policy = "non-inclusive"        # inclusive | exclusive | victim | non-inclusive
    write_allocate = true
    shared = false                  # false: one per core; true: one for all cores; N: one per N cores

    [[tlb]]
    level = 1
    kind = "data"                   # data | instruction | unified
    entries = 16
    ways = "full"                   # or a number
    page_size = "4KiB"

    [branch]
    kind = "gshare"                 # gshare | bimodal
    history_bits = 12
    table_size = 4096

`load_machine(name_or_path)` reads a bundled description by name (see `bundled()`) or any
file; every mistake ends in a `UserError` naming the file and the key.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserError, read_input
from ..parsing import size_bytes

MACHINES_DIR = Path(__file__).resolve().parent / "machines"

#: Penalty keys (cycles per event) a machine description may give.
PENALTY_KEYS = ("l2_hit", "l3_hit", "dram", "itlb_miss", "dtlb_miss", "stlb_hit",
                "branch_mispredict", "misaligned_load", "coherence_miss")

CACHE_KINDS = ("data", "instruction", "unified")
_REPLACEMENT_ALIASES = {"tree-plru": "plru", "pseudo-lru": "plru", "plru": "plru", "lru": "lru",
                        "fifo": "fifo", "random": "random", "rand": "random"}
POLICIES = ("inclusive", "exclusive", "victim", "non-inclusive")
_POLICY_ALIASES = {"inclusive": "inclusive", "exclusive": "exclusive", "victim": "victim",
                   "non-inclusive": "non-inclusive", "noninclusive": "non-inclusive",
                   "nine": "non-inclusive"}
BRANCH_KINDS = ("gshare", "bimodal")
UNIT_CLASSES = ("alu", "load", "store", "branch", "fp")

MISPREDICT_FORMULA = "2 x fetch_depth + scheduler_size / drain_ipc"



@dataclass
class CacheSpec:
    """One cache level (for one side, or unified)."""

    level: int
    kind: str                 # data | instruction | unified
    size: int                 # bytes
    line_size: int            # bytes
    ways: int
    replacement: str = "lru"
    policy: str = "non-inclusive"
    write_allocate: bool = True
    shared: int = 1           # cores served by one instance (1 = private); 0 = all cores

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
class TLBSpec:
    level: int
    kind: str                 # data | instruction | unified
    entries: int
    ways: int                 # == entries: fully associative
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
class BranchSpec:
    kind: str = "gshare"
    history_bits: int = 12
    table_size: int = 4096


@dataclass
class PipelineSpec:
    fetch_depth: float | None = None
    scheduler_size: int = 32
    drain_ipc: float | None = None
    issue_width: int = 4
    units: dict[str, int] = field(default_factory=lambda: {"alu": 3, "load": 1, "store": 1})


@dataclass
class MachineDescription:
    """A processor to simulate: caches, TLBs, branch predictor, issue model, penalties."""

    name: str
    frequency_hz: float
    penalties: dict[str, float]
    caches: list[CacheSpec]
    tlbs: list[TLBSpec]
    branch: BranchSpec | None
    pipeline: PipelineSpec
    cores: int = 1
    description: str = ""
    source: str = ""
    path: str | None = None
    #: where each penalty came from: "given" or the formula used
    penalty_sources: dict[str, str] = field(default_factory=dict)

    @property
    def line_size(self) -> int:
        return self.caches[0].line_size if self.caches else 64

    @property
    def levels(self) -> int:
        return max((c.level for c in self.caches), default=0)

    def data_path(self) -> list[CacheSpec]:
        """The caches a load or store goes through, L1 first."""
        return sorted((c for c in self.caches if c.serves_data()), key=lambda c: c.level)

    def instruction_path(self) -> list[CacheSpec]:
        return sorted((c for c in self.caches if c.serves_instructions()), key=lambda c: c.level)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("path", None)
        return d

    def summary(self) -> str:
        parts = []
        for c in sorted(self.caches, key=lambda c: (c.level, c.kind)):
            parts.append(f"{c.name} {_fmt_size(c.size)} {c.ways}-way")
        return f"{self.name} @ {self.frequency_hz / 1e9:.2f} GHz: " + ", ".join(parts)


def _fmt_size(n: int) -> str:
    for unit, mult in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return f"{n}B"


def mispredict_penalty(fetch_depth: float, scheduler_size: float, drain_ipc: float) -> float:
    """The paper's branch-mispredict penalty: refill the front end twice over and drain the
    scheduler: 2 x fetch depth + scheduler size / drain IPC (cycles)."""
    return 2.0 * fetch_depth + scheduler_size / drain_ipc


def bundled() -> list[str]:
    """Names of the machine descriptions shipped with corecast."""
    return sorted(p.stem for p in MACHINES_DIR.glob("*.toml"))


def load_machine(name_or_path: str | Path) -> MachineDescription:
    """Read a machine description: a bundled name (`bundled()`) or a TOML file's path."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") or path.exists()):
        cand = MACHINES_DIR / f"{text.lower()}.toml"
        if not cand.exists():
            raise UserError(f"unknown machine '{text}': give a TOML file or one of "
                            f"{', '.join(bundled())}")
        path = cand
    if not path.exists():
        raise UserError(f"{path}: no such machine description")
    try:
        data = tomllib.loads(read_input(path, "machine description")[0].decode("utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: not valid TOML: {err}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (a machine description is TOML)") from None
    return parse_machine(data, str(path))


def parse_machine(data: Mapping[str, Any], where: str = "<machine>") -> MachineDescription:
    """Build a MachineDescription from a parsed TOML mapping (`where` names it in errors)."""
    r = _Reader(data, where, "")
    r.check_keys({"name", "frequency_hz", "cores", "description", "source", "penalties",
                  "pipeline", "cache", "tlb", "branch"})
    name = r.string("name")
    freq = r.number("frequency_hz", positive=True)
    cores = r.integer("cores", default=1, minimum=1)

    pipe = _parse_pipeline(r.table("pipeline", default={}), where)
    caches = [_parse_cache(c, where, i) for i, c in enumerate(r.array("cache", default=[]))]
    _check_hierarchy(caches, where)
    tlbs = [_parse_tlb(t, where, i) for i, t in enumerate(r.array("tlb", default=[]))]
    _check_tlbs(tlbs, where)
    braw = r.table("branch", default=None)
    branch = _parse_branch(braw, where) if braw is not None else None
    if not caches and not tlbs and branch is None:
        raise UserError(f"{where}: describes no cache, TLB or branch predictor: nothing to simulate "
                        "(add [[cache]] tables; `corecast sim machines penryn-l5420` shows one)")

    pr = _Reader(r.table("penalties", default={}), where, "penalties.")
    pr.check_keys(set(PENALTY_KEYS))
    penalties: dict[str, float] = {}
    sources: dict[str, str] = {}
    for key in PENALTY_KEYS:
        if key in pr.data:
            penalties[key] = float(pr.number(key, nonnegative=True))
            sources[key] = "given"
    if "branch_mispredict" not in penalties:
        if pipe.fetch_depth is not None and pipe.drain_ipc is not None:
            penalties["branch_mispredict"] = mispredict_penalty(
                pipe.fetch_depth, pipe.scheduler_size, pipe.drain_ipc)
            sources["branch_mispredict"] = (
                f"formula {MISPREDICT_FORMULA} = 2 x {pipe.fetch_depth:g} + "
                f"{pipe.scheduler_size} / {pipe.drain_ipc:g}")
    return MachineDescription(
        name=name, frequency_hz=float(freq), penalties=penalties, caches=caches, tlbs=tlbs,
        branch=branch, pipeline=pipe, cores=cores,
        description=str(data.get("description", "")), source=str(data.get("source", "")),
        path=where, penalty_sources=sources)


# ----------------------------------------------------------------------------------------
# parts

def _parse_pipeline(d: Mapping[str, Any], where: str) -> PipelineSpec:
    r = _Reader(d, where, "pipeline.")
    r.check_keys({"fetch_depth", "scheduler_size", "drain_ipc", "issue_width", "units"})
    fetch_depth = r.number("fetch_depth", positive=True, default=None)
    sched = r.integer("scheduler_size", default=32, minimum=1)
    drain = r.number("drain_ipc", positive=True, default=None)
    width = r.integer("issue_width", default=4, minimum=1)
    units_raw = r.table("units", default={"alu": 3, "load": 1, "store": 1})
    ur = _Reader(units_raw, where, "pipeline.units.")
    ur.check_keys(set(UNIT_CLASSES))
    units = {k: ur.integer(k, minimum=1) for k in UNIT_CLASSES if k in units_raw}
    for need in ("alu", "load", "store"):
        if need not in units:
            raise UserError(f"{where}: pipeline.units.{need}: missing (alu, load and store "
                            "units are required; branch and fp default to the alu units)")
    return PipelineSpec(fetch_depth=fetch_depth, scheduler_size=sched, drain_ipc=drain,
                        issue_width=width, units=units)


def _parse_cache(d: Any, where: str, i: int) -> CacheSpec:
    key = f"cache[{i}]."
    if not isinstance(d, Mapping):
        raise UserError(f"{where}: cache[{i}]: must be a table ([[cache]])")
    r = _Reader(d, where, key)
    r.check_keys({"level", "kind", "size", "line_size", "ways", "replacement", "policy",
                  "write_allocate", "shared", "sets"})
    level = r.integer("level", minimum=1)
    if level > 3:
        raise UserError(f"{where}: {key}level: {level}: corecast simulates levels 1 to 3")
    kind = r.choice("kind", CACHE_KINDS,
                    default="unified" if level > 1 else _Reader._MISSING)
    size = r.size("size")
    line = r.size("line_size", default=64)
    if not _pow2(line):
        raise UserError(f"{where}: {key}line_size: {line} is not a power of two")
    ways = r.integer("ways", minimum=1)
    if size % (line * ways):
        raise UserError(f"{where}: {key}size: {size} bytes is not a whole number of sets "
                        f"of {ways} ways x {line} bytes")
    sets = size // (line * ways)
    if not _pow2(sets):
        raise UserError(f"{where}: {key}ways: sets = size / (line_size x ways) = "
                        f"{size} / ({line} x {ways}) = {sets}, which is not a power of two")
    if "sets" in d and r.integer("sets") != sets:
        raise UserError(f"{where}: {key}sets: {d['sets']} does not match size / (line_size x "
                        f"ways) = {sets}")
    repl = r.alias("replacement", _REPLACEMENT_ALIASES, default="lru")
    if repl == "plru" and not _pow2(ways):
        raise UserError(f"{where}: {key}replacement: tree-PLRU needs a power-of-two number "
                        f"of ways, not {ways}")
    if ways > 64 and repl == "plru":
        raise UserError(f"{where}: {key}ways: tree-PLRU supports at most 64 ways")
    policy = r.alias("policy", _POLICY_ALIASES, default="non-inclusive")
    wa = r.boolean("write_allocate", default=True)
    shared_raw = d.get("shared", False)
    if isinstance(shared_raw, bool):
        shared = 0 if shared_raw else 1
    elif isinstance(shared_raw, int) and shared_raw >= 1:
        shared = shared_raw
    else:
        raise UserError(f"{where}: {key}shared: {shared_raw!r}: give true (one cache for all "
                        "cores), false (one per core) or a number of cores per cache")
    return CacheSpec(level=level, kind=kind, size=size, line_size=line, ways=ways,
                     replacement=repl, policy=policy, write_allocate=wa, shared=shared)


def _check_hierarchy(caches: list[CacheSpec], where: str) -> None:
    if not caches:
        return
    lines = {c.line_size for c in caches}
    if len(lines) > 1:
        raise UserError(f"{where}: cache: all levels must use one line_size (found "
                        f"{', '.join(str(x) for x in sorted(lines))})")
    for side, pick in (("data", CacheSpec.serves_data),
                       ("instruction", CacheSpec.serves_instructions)):
        path = [c for c in caches if pick(c)]
        levels = sorted(c.level for c in path)
        if len(levels) != len(set(levels)):
            raise UserError(f"{where}: cache: two caches serve {side} accesses at the same "
                            "level")
        if levels and levels != list(range(1, len(levels) + 1)):
            raise UserError(f"{where}: cache: the {side} path has levels {levels}; levels "
                            "must run 1, 2, 3 without gaps")
        prev_share = None
        for c in sorted(path, key=lambda c: c.level):
            share = math.inf if c.shared == 0 else c.shared
            if prev_share is not None and share < prev_share:
                raise UserError(f"{where}: cache: {c.name} is shared by fewer cores than the "
                                "level above it")
            if prev_share is not None and share != math.inf and prev_share != math.inf \
                    and share % prev_share:
                raise UserError(f"{where}: cache: {c.name} sharing ({c.shared} cores) must be "
                                "a multiple of the level above's")
            prev_share = share
    paths = [p for p in ([c for c in caches if c.serves_data()],
                         [c for c in caches if c.serves_instructions()]) if p]
    if len(paths) == 1 and caches:
        side = "instruction" if not [c for c in caches if c.serves_instructions()] else "data"
        raise UserError(f"{where}: cache: no cache serves {side} accesses (give a level-1 "
                        f"{side} cache or make L1 unified)")


def _parse_tlb(d: Any, where: str, i: int) -> TLBSpec:
    key = f"tlb[{i}]."
    if not isinstance(d, Mapping):
        raise UserError(f"{where}: tlb[{i}]: must be a table ([[tlb]])")
    r = _Reader(d, where, key)
    r.check_keys({"level", "kind", "entries", "ways", "page_size", "replacement"})
    level = r.integer("level", minimum=1)
    if level > 2:
        raise UserError(f"{where}: {key}level: {level}: TLBs have one or two levels")
    kind = r.choice("kind", CACHE_KINDS)
    entries = r.integer("entries", minimum=1)
    ways_raw = d.get("ways", "full")
    if isinstance(ways_raw, str) and ways_raw.lower() in ("full", "fully-associative", "fa"):
        ways = entries
    else:
        ways = r.integer("ways", minimum=1)
    if entries % ways:
        raise UserError(f"{where}: {key}ways: {entries} entries are not a whole number of "
                        f"sets of {ways} ways")
    sets = entries // ways
    if not _pow2(sets):
        raise UserError(f"{where}: {key}ways: sets = entries / ways = {entries} / {ways} = "
                        f"{sets}, which is not a power of two")
    page = r.size("page_size", default=4096)
    if not _pow2(page):
        raise UserError(f"{where}: {key}page_size: {page} is not a power of two")
    repl = r.alias("replacement", _REPLACEMENT_ALIASES, default="lru")
    if repl == "plru" and (not _pow2(ways) or ways > 64):
        raise UserError(f"{where}: {key}replacement: tree-PLRU needs a power-of-two number "
                        f"of ways up to 64, not {ways}")
    return TLBSpec(level=level, kind=kind, entries=entries, ways=ways, page_size=page,
                   replacement=repl)


def _check_tlbs(tlbs: list[TLBSpec], where: str) -> None:
    for side, kinds in (("data", ("data", "unified")), ("instruction", ("instruction", "unified"))):
        path = sorted((t for t in tlbs if t.kind in kinds), key=lambda t: t.level)
        levels = [t.level for t in path]
        if len(levels) != len(set(levels)):
            raise UserError(f"{where}: tlb: two TLBs serve {side} accesses at the same level")
        if levels and levels != list(range(1, len(levels) + 1)):
            raise UserError(f"{where}: tlb: the {side} side has levels {levels}; a level-2 "
                            "TLB needs a level-1 TLB")
        pages = {t.page_size for t in path}
        if len(pages) > 1:
            raise UserError(f"{where}: tlb: the {side} side mixes page sizes "
                            f"{sorted(pages)}; give one page size per side")


def _parse_branch(d: Any, where: str) -> BranchSpec:
    if not isinstance(d, Mapping):
        raise UserError(f"{where}: branch: must be a table ([branch])")
    r = _Reader(d, where, "branch.")
    r.check_keys({"kind", "history_bits", "table_size"})
    kind = r.choice("kind", BRANCH_KINDS, default="gshare")
    table = r.integer("table_size", default=4096, minimum=2)
    if not _pow2(table):
        raise UserError(f"{where}: branch.table_size: {table} is not a power of two")
    hist = r.integer("history_bits", default=0 if kind == "bimodal" else
                     int(math.log2(table)), minimum=0)
    if kind == "gshare" and hist > int(math.log2(table)):
        raise UserError(f"{where}: branch.history_bits: {hist} history bits cannot index a "
                        f"table of {table} counters (at most {int(math.log2(table))})")
    return BranchSpec(kind=kind, history_bits=hist, table_size=table)


def _pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0



def parse_size(text: str | int, where: str, key: str = "size") -> int:
    """A size a person typed ("32KiB", "6MiB", "4096") in bytes; a mistake names `where`."""
    v: Any = text.strip() if isinstance(text, str) else text
    if isinstance(v, str) and v.isdigit():
        v = int(v)
    return _Reader({key: v}, where, "").size(key)

class _Reader:
    """Typed access to one TOML table with errors naming file and key."""

    _MISSING = object()

    def __init__(self, data: Any, where: str, prefix: str):
        if not isinstance(data, Mapping):
            raise UserError(f"{where}: {prefix.rstrip('.') or 'top level'}: must be a table")
        self.data, self.where, self.prefix = data, where, prefix

    def _err(self, key: str, msg: str) -> UserError:
        return UserError(f"{self.where}: {self.prefix}{key}: {msg}")

    def _get(self, key: str, default: Any) -> Any:
        if key in self.data:
            return self.data[key]
        if default is self._MISSING:
            raise self._err(key, "missing")
        return default

    def check_keys(self, allowed: set[str]) -> None:
        for k in self.data:
            if k not in allowed:
                raise self._err(k, f"unknown key (known: {', '.join(sorted(allowed))})")

    def string(self, key: str, default: Any = _MISSING) -> str:
        v = self._get(key, default)
        if not isinstance(v, str) or not v.strip():
            raise self._err(key, "must be a non-empty string")
        return v

    def number(self, key: str, default: Any = _MISSING, positive: bool = False,
               nonnegative: bool = False) -> Any:
        v = self._get(key, default)
        if v is None and default is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self._err(key, f"{v!r} is not a number")
        if positive and v <= 0:
            raise self._err(key, f"{v} must be positive")
        if nonnegative and v < 0:
            raise self._err(key, f"{v} must not be negative")
        return v

    def integer(self, key: str, default: Any = _MISSING, minimum: int | None = None) -> int:
        v = self._get(key, default)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self._err(key, f"{v!r} is not a whole number")
        if minimum is not None and v < minimum:
            raise self._err(key, f"{v} is below the minimum {minimum}")
        return v

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        v = self._get(key, default)
        if not isinstance(v, bool):
            raise self._err(key, f"{v!r} must be true or false")
        return v

    def size(self, key: str, default: Any = _MISSING) -> int:
        """A size in bytes: a whole number, or a string in corecast.parsing's units ("32KiB")."""
        v = self._get(key, default)
        if not isinstance(v, (int, str)) or isinstance(v, bool):
            raise self._err(key, f"{v!r} is not a size")
        return size_bytes(v, f"{self.where}: {self.prefix}{key}")

    def choice(self, key: str, options: tuple[str, ...], default: Any = _MISSING) -> str:
        v = self._get(key, default)
        if not isinstance(v, str) or v.lower() not in options:
            raise self._err(key, f"{v!r}: choose one of {', '.join(options)}")
        return v.lower()

    def alias(self, key: str, aliases: Mapping[str, str], default: Any = _MISSING) -> str:
        v = self._get(key, default)
        if not isinstance(v, str) or v.lower() not in aliases:
            raise self._err(key, f"{v!r}: choose one of {', '.join(sorted(set(aliases.values())))}")
        return aliases[v.lower()]

    def table(self, key: str, default: Any = _MISSING) -> Any:
        v = self._get(key, default)
        if v is not None and not isinstance(v, Mapping):
            raise self._err(key, "must be a table")
        return v

    def array(self, key: str, default: Any = _MISSING) -> list:
        v = self._get(key, default)
        if not isinstance(v, list):
            raise self._err(key, "must be an array of tables ([[...]])")
        return v
