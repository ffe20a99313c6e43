"""The memory profile: what `corecast chase --profile` and `corecast calibrate` measured about a
machine's memory, in one JSON shape that every other part reads through `read_profile`.

    {
      "kind": "corecast-memory-profile",
      "version": 1,
      "machine": {"cpu_model": "AMD EPYC", "sockets": 1, "cores": 2, ...},   # corecast Machine
      "line_bytes": 64,                        # bytes per dereference (chase --line)
      "caches": [                              # the latency staircase's plateaus, nearest first
        {"level": "L1", "latency_ns": 0.93, "size_bytes": 49152, "first_bytes": 4096,
         "reported_bytes": 49152}, ...],       # size_bytes: the largest working set still at
                                               #   that latency; reported_bytes: sysfs's size
      "dram_latency_ns": 131.0,                # the last plateau of the staircase (null: none)
      "idle_latency_ns": 101.0,                # one thread, one chain, at the sweep's --size
      "per_core_concurrency_limit": 40,        # chains per thread past which bandwidth stops
                                               #   growing (null: not reached)
      "per_core_limit_reached": true,
      "per_core_chains_measured": 64,          # the most chains per thread measured
      "per_core_peak_bandwidth_bytes_s": 2.0e10,
      "chip_plateau_threads": null,            # threads past which bandwidth stops growing
      "peak_bandwidth_bytes_s": 3.9e10,        # the best point of the sweep
      "peak_bandwidth_bytes_s_per_socket": 3.9e10,   # that point's bandwidth / sockets it spans
      "peak_threads": 2, "peak_sockets": 1,
      "conditions": {...}                      # how it was measured (sizes, durations, pages,
    }                                          #   timer overhead, steal, CPU share, elapsed)

Every figure is null where it was not measured. `read_profile` accepts the profile itself, a
`corecast calibrate` target file (its `memory` key holds a profile), a path to either, or the
parsed JSON; mistakes end in one `UserError` line. `predict` reads the bandwidth ceiling from
it and the meters read the idle latency; nothing here measures (the collector is
`corecast.collect.chase`, the analysis `corecast.model.memory`).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import outputs
from .errors import UserError
from .parsing import read_document

KIND = "corecast-memory-profile"
VERSION = 1


@dataclass
class CacheLevel:
    level: str                      # L1, L2, L3, ...
    latency_ns: float
    size_bytes: int                 # the largest working set measured at this latency
    first_bytes: int | None = None  # the smallest
    reported_bytes: int | None = None   # the size the machine reports for the level (sysfs)


@dataclass
class MemoryProfile:
    machine: dict[str, Any] = field(default_factory=dict)
    line_bytes: int = 64
    caches: list[CacheLevel] = field(default_factory=list)
    dram_latency_ns: float | None = None
    idle_latency_ns: float | None = None
    per_core_concurrency_limit: float | None = None
    per_core_limit_reached: bool = False
    per_core_chains_measured: float | None = None
    per_core_peak_bandwidth_bytes_s: float | None = None
    chip_plateau_threads: float | None = None
    peak_bandwidth_bytes_s: float | None = None
    peak_bandwidth_bytes_s_per_socket: float | None = None
    peak_threads: int | None = None
    peak_sockets: int | None = None
    conditions: dict[str, Any] = field(default_factory=dict)
    source: str = ""                # where it was read from (not written)

    @property
    def bandwidth_gbs_per_socket(self) -> float | None:
        """Peak bandwidth per socket in GB/s (10^9 bytes/s), as machine descriptions give it."""
        v = self.peak_bandwidth_bytes_s_per_socket
        return None if v is None else v / 1e9

    def cache(self, level: str) -> CacheLevel | None:
        return next((c for c in self.caches if c.level == level), None)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source")
        return {"kind": KIND, "version": VERSION, **d}

    def write(self, path: str | Path) -> None:
        """Write the profile through corecast.outputs (which names the file)."""
        outputs.write_text(path, json.dumps(self.to_dict(), indent=1, allow_nan=False) + "\n", "the memory profile")


_NUMBERS = ("dram_latency_ns", "idle_latency_ns", "per_core_concurrency_limit", "per_core_chains_measured",
            "per_core_peak_bandwidth_bytes_s", "chip_plateau_threads", "peak_bandwidth_bytes_s",
            "peak_bandwidth_bytes_s_per_socket")


def profile_from_doc(doc: Mapping[str, Any], where: str = "memory profile") -> MemoryProfile:
    """A MemoryProfile from parsed JSON (the profile, or a calibrate file holding one)."""
    if not isinstance(doc, Mapping):
        raise UserError(f"{where}: a memory profile is a JSON object")
    kind = doc.get("kind")
    if kind in ("corecast-machine", "corecast-target"):
        # a machine description (what `corecast calibrate` writes, docs/machines.md) holds its
        # profile in memory.profile; the first calibration files held it in memory
        mem = doc.get("memory")
        inner = mem.get("profile") if kind == "corecast-machine" and isinstance(mem, Mapping) else mem
        if isinstance(inner, str):
            raise UserError(f"{where}: its memory profile is the file {inner!r}: give that file")
        if not isinstance(inner, Mapping):
            raise UserError(f"{where}: a calibration file without a memory profile (its 'memory' is empty)")
        doc, where = inner, f"{where}: {'memory.profile' if kind == 'corecast-machine' else 'memory'}"
    if doc.get("kind") != KIND:
        raise UserError(f"{where}: not a memory profile (\"kind\" is {json.dumps(doc.get('kind'))}, "
                        f"expected \"{KIND}\")")
    v = doc.get("version")
    if not isinstance(v, int) or isinstance(v, bool):
        raise UserError(f"{where}: \"version\" must be a whole number")
    if v > VERSION:
        raise UserError(f"{where}: memory profile version {v} is newer than this corecast understands")

    def num(key: str, d: Mapping[str, Any] = doc, ctx: str = "") -> float | None:
        x = d.get(key)
        if x is None:
            return None
        if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
            raise UserError(f"{where}: {ctx}{key} must be a number of at least 0 (got {json.dumps(x)})")
        return float(x)

    caches = []
    raw = doc.get("caches") or []
    if not isinstance(raw, list):
        raise UserError(f"{where}: caches must be a list")
    for i, c in enumerate(raw):
        if not isinstance(c, Mapping) or not isinstance(c.get("level"), str):
            raise UserError(f"{where}: caches[{i}] needs a level name")
        lat, size = num("latency_ns", c, f"caches[{i}]."), num("size_bytes", c, f"caches[{i}].")
        if lat is None or size is None:
            raise UserError(f"{where}: caches[{i}] needs latency_ns and size_bytes")
        first, rep = num("first_bytes", c, f"caches[{i}]."), num("reported_bytes", c, f"caches[{i}].")
        caches.append(CacheLevel(c["level"], lat, int(size), None if first is None else int(first),
                                 None if rep is None else int(rep)))
    machine = doc.get("machine") or {}
    cond = doc.get("conditions") or {}
    if not isinstance(machine, Mapping) or not isinstance(cond, Mapping):
        raise UserError(f"{where}: machine and conditions must be objects")
    line = num("line_bytes") or 64
    pt, ps = num("peak_threads"), num("peak_sockets")
    return MemoryProfile(machine=dict(machine), line_bytes=int(line), caches=caches,
                         per_core_limit_reached=bool(doc.get("per_core_limit_reached", False)),
                         peak_threads=None if pt is None else int(pt), peak_sockets=None if ps is None else int(ps),
                         conditions=dict(cond), source=where, **{k: num(k) for k in _NUMBERS})


def read_profile(source: str | Path | Mapping[str, Any]) -> MemoryProfile:
    """The memory profile in `source`: a path to a profile or a calibrate file, or parsed JSON."""
    if isinstance(source, Mapping):
        return profile_from_doc(source)
    p = Path(source)
    return profile_from_doc(read_document(p, "memory profile", "json"), str(p))
