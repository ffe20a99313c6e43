"""A miss-rate curve in a CPI stack: the last-level events at another cache size.

A curve (`corecast sim mrc --count exposed --json`: misses per 1K instructions against cache
size, `MissCurve`) moves the last-level events of a stack to another cache size: on c cores
sharing a last-level cache of S bytes each core has about S / c of it, so misses of the level
above that the last level used to catch go to memory instead (`events_at_cache_size`); the stack,
the CPI and the throughput of each core count then follow the shrinking share
(`corecast.model.throughput`, `corecast.model.cpi.CPIModel.cpi_by_cores`). An LRU cache's misses
do not depend on the smaller LRU caches above it (Mattson's inclusion property), which is why a
curve of the whole access stream can stand for the last level.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import UserError
from ..parsing import read_document
from .cpi import _num

__all__ = ["MissCurve", "parse_mrc", "load_mrc", "events_at_cache_size"]


@dataclass(frozen=True)
class MissCurve:
    """Misses per 1K instructions against cache size (a `corecast sim mrc --json` curve)."""

    sizes_bytes: tuple[float, ...]
    mpki: tuple[float, ...]
    counted: str = "exposed"           # which accesses' misses: "exposed" or "all"
    source: str = ""

    def at(self, size_bytes: float) -> float:
        """Misses per 1K instructions of a cache of `size_bytes`: linear in log2(size) between
        the curve's sizes, its end values beyond them (a cache smaller than the first size is
        taken to miss as that one, larger than the last as that one)."""
        size = _num("cache size (bytes)", size_bytes, positive=True)
        return float(np.interp(math.log2(size), np.log2(self.sizes_bytes), self.mpki))

    def covers(self, size_bytes: float) -> bool:
        return self.sizes_bytes[0] <= size_bytes <= self.sizes_bytes[-1]


def parse_mrc(doc: Mapping[str, Any], where: str = "curve") -> MissCurve:
    """The shared curve of a `corecast sim mrc --json` document."""
    if not isinstance(doc, Mapping) or not isinstance(doc.get("curves"), list) or not doc["curves"]:
        raise UserError(f"{where}: not a miss-rate curve (expected `corecast sim mrc --json` output)")
    c = doc["curves"][0]
    if not isinstance(c, Mapping) or not isinstance(c.get("sizes_bytes"), list):
        raise UserError(f"{where}: the curve has no sizes_bytes")
    if not c.get("instructions") or not isinstance(c.get("mpki"), list):
        raise UserError(f"{where}: the curve has no instructions, so no misses per 1K instructions "
                        "(made from a trace without fetch records, or by a corecast before issue 17)")
    sizes = [_num(f"{where}: sizes_bytes", v, positive=True) for v in c["sizes_bytes"]]
    mpki = [_num(f"{where}: mpki", v) for v in c["mpki"]]
    if len(sizes) != len(mpki) or not sizes:
        raise UserError(f"{where}: sizes_bytes and mpki differ in length")
    if any(b <= a for a, b in zip(sizes, sizes[1:])):
        raise UserError(f"{where}: sizes_bytes must rise")
    return MissCurve(tuple(sizes), tuple(mpki), str(doc.get("counted", "all")), where)


def load_mrc(path: str | Path) -> MissCurve:
    """Read a `corecast sim mrc --json` file (its shared curve)."""
    p = Path(path)
    doc = read_document(p, "file", "json", expected="`corecast sim mrc --json` output")
    return parse_mrc(doc, str(p))


def events_at_cache_size(events: Mapping[str, float], curve: MissCurve, from_bytes: float,
                         to_bytes: float, llc_hit: str | None) -> dict[str, float]:
    """The events with the last-level cache moved from `from_bytes` (where they were simulated or
    measured) to `to_bytes`: memory accesses (`dram`) change by the curve's difference between the
    two sizes, and the hits of the last level (`llc_hit`: l3_hit on a three-level machine, l2_hit
    on a two-level one; None when the last level is the first) by the opposite, so that the misses
    of the level above stay what they were. `dram` stays within [0, those misses].

    Anchored where the events were taken, the set-associative hierarchy's own misses there are
    kept, and only the change comes from the (fully associative) curve."""
    if "dram" not in events:
        raise UserError("the input has no 'dram' event (last-level misses) for the curve to move")
    out = dict(events)
    dram = float(events["dram"]) + curve.at(to_bytes) - curve.at(from_bytes)
    if llc_hit is not None and llc_hit in events:
        above = float(events["dram"]) + float(events[llc_hit])
        out["dram"] = min(max(dram, 0.0), above)
        out[llc_hit] = above - out["dram"]
    else:
        out["dram"] = max(dram, 0.0)
    return out
