"""sim's view of a machine description: the processor a trace is simulated on.

A machine description is the one schema of docs/machines.md, read by
`corecast.machines.schema` (the bundled files in `src/corecast/machines/`). sim reads its clock,
caches, TLBs, branch predictor, pipeline and costs::

    [clock]
    frequency = "1.66GHz"

    [sim]                           # optional: the part simulated, when not the whole machine
    name = "zen4-genoa"             # the name its results give (default: the machine's)
    cores = 8                       # the default --cores (default: every core of [topology], or 1)

    [[cache]]
    level = 2
    kind = "unified"                # data | instruction | unified
    size = "512KiB"
    line_size = 64
    ways = 8
    replacement = "lru"             # lru | fifo | random | plru
    policy = "non-inclusive"        # inclusive | exclusive | victim | non-inclusive
    shared = false                  # false: one per core; true: one for all cores; N: one per N cores
    latency_cycles = 15             # the l2_hit penalty (l3_hit at level 3)

    [[tlb]]                         level, kind, entries, ways ("full" or a number), page_size
    [branch]                        kind (gshare | bimodal), history_bits, table_size
    [pipeline]                      fetch_depth, scheduler_size, drain_ipc, issue_width, units
    [memory]
    latency_cycles = 190            # the dram penalty
    [costs]                         # cycles: stlb_hit, dtlb_miss, itlb_miss, misaligned_load,
                                    # coherence_miss, branch_mispredict (absent: the formula
                                    # 2 x fetch_depth + scheduler_size / drain_ipc)

The old form (`frequency_hz`, `cores`, `[penalties]`) is read too (corecast.machines.legacy).
`load_machine(name_or_path)` reads a bundled machine by name (see `bundled()`) or any file;
`parse_machine(data)` a parsed mapping. What this simulator cannot simulate (levels past 3,
sets that are not a power of two, tree-PLRU on other than 2^k ways) is refused here, one
`UserError` naming the file and the key.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ..errors import UserError
from ..machines import schema
from ..machines.schema import Branch as BranchSpec, Cache as CacheSpec, Pipeline as PipelineSpec, Tlb as TLBSpec
from ..machines.table import Table

#: Penalty keys (cycles per event) of a simulated machine, in the order results give them.
PENALTY_KEYS = ("l2_hit", "l3_hit", "dram", "itlb_miss", "dtlb_miss", "stlb_hit",
                "branch_mispredict", "misaligned_load", "coherence_miss")

MISPREDICT_FORMULA = "2 x fetch_depth + scheduler_size / drain_ipc"


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
        for c in d["caches"]:
            # the file's order and the hit latency (in `penalties` here) are the description's
            del c["index"], c["latency_cycles"]
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
    """Names of the bundled machines sim takes (those with a clock and caches), by the name
    their results give."""
    return sorted(_sim_name(d) for d in schema.bundled_for("sim"))


def _sim_name(d: schema.Description) -> str:
    return d.sim.name or d.name


def load_machine(name_or_path: str | Path) -> MachineDescription:
    """Read a machine description: a bundled name (`bundled()`, or any bundled machine's name
    or alias) or a file's path."""
    text = str(name_or_path)
    path = Path(text)
    if not (text.endswith(".toml") or path.exists()):
        if schema.bundled_name(text.lower()) is None:
            raise UserError(f"unknown machine '{text}': give a TOML file or one of "
                            f"{', '.join(bundled())}")
        return from_description(schema.bundled_description(text.lower()), schema.bundled_path(text.lower()))
    if not path.exists():
        raise UserError(f"{path}: no such machine description")
    return from_description(schema.read_file(path))


def parse_machine(data: Mapping[str, Any], where: str = "<machine>") -> MachineDescription:
    """Build a MachineDescription from a parsed TOML mapping (`where` names it in errors)."""
    return from_description(schema.parse(data, where))


def from_description(d: schema.Description, path: str | None = None) -> MachineDescription:
    """sim's view of a description, with what the simulator cannot do refused."""
    where = d.where
    if d.frequency_hz is None:
        raise UserError(f"{where}: no [clock]: the simulator needs the clock frequency "
                        "([clock] frequency = \"2.4GHz\")")
    caches = [_checked_cache(c, where) for c in d.caches]
    _check_hierarchy(caches, where)
    for i, t in enumerate(d.tlbs):
        _check_tlb(t, where, i)
    _check_tlbs(list(d.tlbs), where)
    if not caches and not d.tlbs and d.branch is None:
        raise UserError(f"{where}: describes no cache, TLB or branch predictor: nothing to simulate "
                        "(add [[cache]] tables; `corecast sim machines penryn-l5420` shows one)")
    given: dict[str, float] = dict(d.costs)
    for level in (2, 3):
        lat = {c.latency_cycles for c in d.caches if c.level == level and c.latency_cycles is not None}
        if len(lat) > 1:
            raise UserError(f"{where}: cache: the level-{level} caches give different latency_cycles "
                            f"({', '.join(f'{x:g}' for x in sorted(lat))}); the simulator takes one l{level}_hit")
        if lat:
            given[f"l{level}_hit"] = lat.pop()
    if d.memory.latency_cycles is not None:
        given["dram"] = d.memory.latency_cycles
    penalties = {k: float(given[k]) for k in PENALTY_KEYS if k in given}
    sources = {k: "given" for k in penalties}
    pipe = d.pipeline
    if "branch_mispredict" not in penalties and pipe.fetch_depth is not None and pipe.drain_ipc is not None:
        penalties["branch_mispredict"] = mispredict_penalty(pipe.fetch_depth, pipe.scheduler_size, pipe.drain_ipc)
        sources["branch_mispredict"] = (f"formula {MISPREDICT_FORMULA} = 2 x {pipe.fetch_depth:g} + "
                                        f"{pipe.scheduler_size} / {pipe.drain_ipc:g}")
    cores = d.sim.cores or (d.topology.cores if d.topology is not None else 1)
    return MachineDescription(
        name=_sim_name(d), frequency_hz=float(d.frequency_hz), penalties=penalties, caches=caches,
        tlbs=[TLBSpec(**asdict(t)) for t in d.tlbs], branch=BranchSpec(**asdict(d.branch)) if d.branch else None,
        pipeline=PipelineSpec(**{**asdict(pipe), "units": dict(pipe.units)}), cores=cores,
        description=d.sim.description or d.description, source=d.source, path=path or where,
        penalty_sources=sources)


# ----------------------------------------------------------------------------------------
# what the simulator can simulate

def _checked_cache(c: schema.Cache, where: str) -> CacheSpec:
    """The cache `c` (the simulator takes the description's own), once checked simulable."""
    key = f"cache[{c.index}]."
    if c.level > 3:
        raise UserError(f"{where}: {key}level: {c.level}: corecast simulates levels 1 to 3")
    sets = c.size // (c.line_size * c.ways)
    if not _pow2(sets):
        raise UserError(f"{where}: {key}ways: sets = size / (line_size x ways) = "
                        f"{c.size} / ({c.line_size} x {c.ways}) = {sets}, which is not a power of two")
    if c.replacement == "plru" and not _pow2(c.ways):
        raise UserError(f"{where}: {key}replacement: tree-PLRU needs a power-of-two number "
                        f"of ways, not {c.ways}")
    if c.ways > 64 and c.replacement == "plru":
        raise UserError(f"{where}: {key}ways: tree-PLRU supports at most 64 ways")
    return c


def _check_tlb(t: schema.Tlb, where: str, i: int) -> None:
    key = f"tlb[{i}]."
    if not _pow2(t.sets):
        raise UserError(f"{where}: {key}ways: sets = entries / ways = {t.entries} / {t.ways} = "
                        f"{t.sets}, which is not a power of two")
    if t.replacement == "plru" and (not _pow2(t.ways) or t.ways > 64):
        raise UserError(f"{where}: {key}replacement: tree-PLRU needs a power-of-two number "
                        f"of ways up to 64, not {t.ways}")


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


def _pow2(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0



def parse_size(text: str | int, where: str, key: str = "size") -> int:
    """A size a person typed ("32KiB", "6MiB", "4096") in bytes; a mistake names `where`."""
    v: Any = text.strip() if isinstance(text, str) else text
    if isinstance(v, str) and v.isdigit():
        v = int(v)
    return Table({key: v}, where, "").size(key)
