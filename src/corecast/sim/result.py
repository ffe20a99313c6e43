"""The simulation result: per-level MPKI, TLB and branch MPKI, coherence events, baseline CPI
and the per-1K-instruction events a CPI stack multiplies by the machine's penalties.

`SimResult.to_dict()` is the JSON `corecast sim --json` prints; `read_document(path)` reads such
a file and `check_document` checks its format and version, for `SimResult.load(path)` and for
`corecast throughput --sim FILE` (`corecast.model.cpi.load_sim`) alike. The engine builds the
result from the simulator's counts (`corecast.sim.engine`). docs/sim.md describes every field.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from .. import parsing
from ..errors import UserError

FORMAT = "corecast-sim-result"
VERSION = 1


@dataclass
class SimResult:
    machine: dict[str, Any]
    trace: dict[str, Any]
    cores: int
    split: str
    warmup_instructions: int
    instructions: int
    transactions: int | None
    instructions_per_transaction: float | None
    accesses: dict[str, int]
    caches: list[dict[str, Any]]
    tlbs: list[dict[str, Any]]
    branch: dict[str, Any] | None
    coherence: dict[str, Any]
    issue: dict[str, Any] | None
    events_per_kilo_instruction: dict[str, float]
    unavailable: dict[str, str] = field(default_factory=dict)
    per_core: list[dict[str, Any]] = field(default_factory=list)
    served: dict[str, dict[str, int]] = field(default_factory=dict)

    # ------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "machine": self.machine,
                "trace": self.trace, "cores": self.cores, "split": self.split,
                "warmup_instructions": self.warmup_instructions,
                "instructions": self.instructions, "transactions": self.transactions,
                "instructions_per_transaction": self.instructions_per_transaction,
                "accesses": self.accesses, "caches": self.caches, "tlbs": self.tlbs,
                "branch": self.branch, "coherence": self.coherence, "issue": self.issue,
                "events_per_kilo_instruction": self.events_per_kilo_instruction,
                "unavailable": self.unavailable, "per_core": self.per_core,
                "served": self.served}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "<result>") -> "SimResult":
        check_document(d, where)
        try:
            return cls(**{k: d[k] for k in (
                "machine", "trace", "cores", "split", "warmup_instructions", "instructions",
                "transactions", "instructions_per_transaction", "accesses", "caches", "tlbs",
                "branch", "coherence", "issue", "events_per_kilo_instruction")},
                unavailable=d.get("unavailable", {}), per_core=d.get("per_core", []),
                served=d.get("served", {}))
        except KeyError as err:
            raise UserError(f"{where}: sim result lacks the field {err}") from None

    @classmethod
    def load(cls, path: str | Path) -> "SimResult":
        return cls.from_dict(read_document(path), str(path))

    # convenience -------------------------------------------------------------------
    def cache(self, name: str) -> dict[str, Any]:
        for c in self.caches:
            if c["name"] == name:
                return c
        raise KeyError(name)

    @property
    def baseline_cpi(self) -> float | None:
        return self.issue.get("baseline_cpi") if self.issue else None


# ------------------------------------------------------------------------------ reading
def read_document(path: str | Path) -> Any:
    """The JSON of a `corecast sim --json` file, as written (the one reader of result files;
    `check_document` says whether it is one)."""
    return parsing.read_document(Path(path), "file", "json",
                                 expected="`corecast sim --json` output")


def check_document(doc: Any, where: str = "sim result") -> Mapping[str, Any]:
    """`doc` if it is a sim result of a version this corecast reads, else a UserError."""
    if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
        raise UserError(f"{where}: not a `corecast sim --json` result (no \"format\": \"{FORMAT}\")")
    version = doc.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise UserError(f"{where}: sim result version {version!r} is not supported (this corecast reads "
                        f"{VERSION})")
    return doc
