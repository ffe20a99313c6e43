"""sched's view of a machine description: an asymmetric multicore (AMP) as core types with a
count, a relative speed and an active and idle power.

A machine description is the one schema of docs/machines.md (`corecast.machines.schema`; the
bundled machines in `src/corecast/machines/`, those with core types listed by
`bundled_machines()`). sched reads its core types:

    name = "2b-2s"
    description = "..."
    [[core_type]]
    name = "big"          # the fastest type is "big" whatever it is called
    count = 2
    speed = 1.0           # relative speed of a purely compute-bound thread
    active_w = 40.0       # watts of one core while it runs a thread
    idle_w = 8.0          # watts of one core while it has nothing to run
    cpus = "0,1"          # optional: the logical CPUs of this type (enforcing mode)

`speed` orders the types and is the "computing power" A-DWRR scales CPU time by; a thread's own
speed on each type comes from its phase's speedup factor (see `rates`). Core ids run type by type,
fastest first: cores 0..count-1 are the fastest type.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import UserError
from ..machines import schema
from ..machines.schema import CoreType

MAX_TYPES = schema.MAX_CORE_TYPES
MAX_CORES = schema.MAX_TYPED_CORES


@dataclass
class Machine:
    """An AMP: core types sorted fastest first."""

    name: str
    types: tuple[CoreType, ...]
    description: str = ""
    source: str = ""
    notes: list[str] = field(default_factory=list)
    #: speeds of the fastest and slowest types that a phase's SF relates (set by `all_of`, where
    #: the machine's own types no longer tell them)
    span: tuple[float, float] | None = None

    @property
    def cores(self) -> int:
        return sum(t.count for t in self.types)

    @property
    def counts(self) -> np.ndarray:
        return np.array([t.count for t in self.types], dtype=float)

    @property
    def speeds(self) -> np.ndarray:
        return np.array([t.speed for t in self.types], dtype=float)

    @property
    def big(self) -> CoreType:
        return self.types[0]

    @property
    def core_type(self) -> np.ndarray:
        """The type index of every core id."""
        return np.repeat(np.arange(len(self.types)), [t.count for t in self.types])

    def default_sf(self) -> float:
        """The speedup factor of a purely compute-bound thread: fastest over slowest speed."""
        hi, lo = self.span or (self.types[0].speed, self.types[-1].speed)
        return hi / lo

    def all_of(self, k: int) -> "Machine":
        """The same number of cores, all of type k (the all-small machine of ASP is all_of(-1))."""
        t = self.types[k]
        return Machine(f"{self.name} (all {t.name})", (CoreType(t.name, self.cores, t.speed, t.active_w, t.idle_w),),
                       source=self.source, span=self.span or (self.types[0].speed, self.types[-1].speed))

    def describe(self) -> str:
        parts = [f"{t.count} {t.name} (speed {t.speed:g})" for t in self.types]
        return f"{self.name}: " + " + ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "source": self.source,
                "cores": self.cores,
                "core_types": [{"name": t.name, "count": t.count, "speed": t.speed,
                                "active_w": t.active_w, "idle_w": t.idle_w,
                                **({"cpus": t.cpus} if t.cpus else {})} for t in self.types]}


def rates(machine: Machine, sf: np.ndarray) -> np.ndarray:
    """Work per CPU-second of threads with speedup factors `sf` on each core type (T x K).

    Work is counted in seconds of the fastest type: a thread does 1 unit per second on a big core
    and 1/SF on the slowest type. A type in between is placed by its speed: its slowdown against
    the fastest is interpolated linearly between 1 (speed of the fastest) and SF (speed of the
    slowest)."""
    sp = machine.speeds
    sf = np.asarray(sf, dtype=float)
    hi, lo = machine.span or (sp[0], sp[-1])
    pos = (hi - sp) / (hi - lo) if hi != lo else np.zeros_like(sp)
    slow = 1.0 + np.outer(sf - 1.0, pos)
    return 1.0 / slow


def bundled_machines() -> list[str]:
    """Names of the bundled machines sched takes (those with core types)."""
    return sorted(d.name for d in schema.bundled_for("sched"))


def load_machine(name_or_path: str | Path) -> Machine:
    """A bundled machine name or a TOML file."""
    text = str(name_or_path)
    if not (text.endswith(".toml") or Path(text).exists()):
        if schema.bundled_name(text) is None:
            raise UserError(f"unknown machine '{text}': give a TOML file or one of "
                            f"{', '.join(bundled_machines())}")
        return from_description(schema.bundled_description(text), text)
    return from_description(schema.read_file(Path(text), "machine"))


def parse_machine(data: Mapping[str, Any], where: str = "<machine>") -> Machine:
    return from_description(schema.parse(data, where, default_name=Path(where).stem))


def from_description(d: schema.Description, where: str | None = None) -> Machine:
    """sched's view of a description: its core types, fastest first."""
    if not d.core_types:
        raise UserError(f"{d.where}: no [[core_type]] tables: sched needs a machine's core types "
                        "(count, speed, power; docs/machines.md)")
    return Machine(d.name, d.core_types, d.description, d.source or where or d.where, list(d.notes))


def inline_machine(big: int, small: int, speed_ratio: float = 2.0) -> Machine:
    """A two-type machine from counts alone (tests, enforcing mode without a description)."""
    if big < 0 or small < 0 or big + small < 1:
        raise UserError(f"{big} big and {small} small cores: at least one core")
    if not speed_ratio > 0:
        raise UserError(f"speed ratio {speed_ratio}: must be > 0")
    types = []
    if big:
        types.append(CoreType("big", big, 1.0))
    if small:
        types.append(CoreType("small", small, 1.0 / speed_ratio))
    return Machine(f"{big}B-{small}S", tuple(types), source="inline")
