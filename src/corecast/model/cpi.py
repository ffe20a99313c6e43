"""CPI stacks and the throughput they imply (the memcached method of Hart, Frachtenberg and
Berezecki).

A CPI stack splits cycles per instruction into a baseline -- the issue rate with perfect caches
and prediction -- and one component per event that stalls the pipeline:

    cycles per 1K instructions = events per 1K instructions x penalty (cycles)
    CPI = baseline CPI + sum(cycles per 1K instructions) / 1000

A transaction of I instructions then takes CPI x I / frequency seconds on one core. On c cores
a lock serialises part of the work: with a share s of cycles in critical sections, each core
loses p(c) = s x (c - 1) to the lock (the lock-serialisation penalty). Two ways to charge it:

- "wait-share" (default, the paper's): p is the share of each core's cycles spent waiting,
  so a core completes (1 - p) / T transactions per second and X(c) = c (1 - p) / T.
  Meaningful while p < 1.
- "amdahl": p is added on top of each transaction's cycles, T(c) = T (1 + p), so
  X(c) = c / (T (1 + s (c - 1))) -- Amdahl's law with serial fraction s; it never goes to 0.

Queueing models (`corecast.model.queueing`) turn the per-core service time into throughput at
a response-time target (M/M/1 per core, M/M/c shared queue) or under a closed-loop load
generator (the machine-repairman model, which exact MVA reproduces).

Where cores share a last-level cache, each core count has its own stack (its share of the cache:
`corecast.model.misscurve`) and `CPIModel.cpi_by_cores` its own CPI.

This module takes plain values (penalty tables, frequencies, event rates) and never reads a
machine description: `corecast.model.throughput` puts a machine's penalties together with
the inputs. It reads the inputs: `load_mpki` the small `--mpki` format (TOML, JSON or CSV),
`load_sim` a `corecast sim --json` result (through `corecast.sim.result`).
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import UserError
from ..parsing import read_document
from ..sim import result as sim_result
from ..sim.result import check_document
from . import queueing
from .base import Prediction

__all__ = [
    "PENALTY_NAMES", "COMPONENT_LABELS", "LOCK_MODELS", "CPIComponent", "CPIStack", "cpi_stack",
    "transaction_time", "lock_penalty", "CoreEstimate", "estimate_cores", "CoreThroughput",
    "throughput_at_cores", "CPIModel", "CPIInputs", "load_mpki", "parse_mpki", "inputs_from_sim", "load_sim",
]

#: Penalty names a machine description gives (cycles), in the order a stack prints them.
PENALTY_NAMES: tuple[str, ...] = ("l2_hit", "l3_hit", "dram", "itlb_miss", "dtlb_miss",
                                  "stlb_hit", "branch_mispredict", "misaligned_load", "coherence_miss")

#: How each event prints in a CPI stack (the event is what is counted per 1K instructions).
COMPONENT_LABELS: dict[str, str] = {
    "l2_hit": "L1 miss, L2 hit",
    "l3_hit": "L2 miss, L3 hit",
    "dram": "last-level miss (DRAM)",
    "itlb_miss": "ITLB miss (page walk)",
    "dtlb_miss": "DTLB miss (page walk)",
    "stlb_hit": "L1 TLB miss, STLB hit",
    "branch_mispredict": "branch mispredict",
    "misaligned_load": "misaligned load",
    "coherence_miss": "coherence miss",
}

LOCK_MODELS: tuple[str, ...] = ("wait-share", "amdahl")


def _num(name: str, value: Any, *, positive: bool = False) -> float:
    if isinstance(value, bool):
        raise UserError(f"{name} must be a number, got {value!r}")
    try:
        v = float(value)
    except (TypeError, ValueError, OverflowError):       # OverflowError: an integer past the largest float
        raise UserError(f"{name} must be a finite number, got {str(value)[:40]}") from None
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise UserError(f"{name} must be a finite number {'>' if positive else '>='} 0, got {value!r}")
    return v


# ============================================================================ the stack
@dataclass(frozen=True)
class CPIComponent:
    """One stall source: how often it happens and what each occurrence costs."""

    name: str
    per_kilo: float              # events per 1,000 instructions
    penalty_cycles: float        # cycles each event adds
    label: str = ""
    penalty_source: str = ""     # where the penalty came from ("machine NAME", "input", ...)

    @property
    def cycles_per_kilo(self) -> float:
        return self.per_kilo * self.penalty_cycles

    @property
    def cpi(self) -> float:
        return self.cycles_per_kilo / 1000.0

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "label": self.label or self.name, "per_kilo": self.per_kilo,
                "penalty_cycles": self.penalty_cycles, "cycles_per_kilo": self.cycles_per_kilo,
                "cpi": self.cpi, "penalty_source": self.penalty_source}


@dataclass(frozen=True)
class CPIStack:
    """Baseline CPI plus stall components; `cpi` is their sum."""

    baseline_cpi: float
    components: tuple[CPIComponent, ...] = ()

    @property
    def stall_cycles_per_kilo(self) -> float:
        return math.fsum(c.cycles_per_kilo for c in self.components)

    @property
    def cycles_per_kilo(self) -> float:
        return self.baseline_cpi * 1000.0 + self.stall_cycles_per_kilo

    @property
    def cpi(self) -> float:
        return self.cycles_per_kilo / 1000.0

    def share(self, name: str) -> float:
        """Fraction of all cycles due to component `name` ("baseline" for the issue part)."""
        if name == "baseline":
            return self.baseline_cpi * 1000.0 / self.cycles_per_kilo
        for c in self.components:
            if c.name == name:
                return c.cycles_per_kilo / self.cycles_per_kilo
        raise KeyError(name)

    def rows(self) -> list[dict[str, Any]]:
        """The stack as the paper's Tables 2 and 4 lay it out: the baseline, one row per
        component, and the total (whose cycles per 1K instructions / 1000 is the CPI)."""
        out: list[dict[str, Any]] = [{"component": "baseline (issue)", "name": "baseline",
                                      "per_kilo": None, "penalty_cycles": None,
                                      "cycles_per_kilo": self.baseline_cpi * 1000.0}]
        for c in self.components:
            out.append({"component": c.label or c.name, "name": c.name, "per_kilo": c.per_kilo,
                        "penalty_cycles": c.penalty_cycles, "cycles_per_kilo": c.cycles_per_kilo})
        out.append({"component": "total", "name": "total", "per_kilo": None, "penalty_cycles": None,
                    "cycles_per_kilo": self.cycles_per_kilo})
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"baseline_cpi": self.baseline_cpi, "cpi": self.cpi,
                "cycles_per_kilo": self.cycles_per_kilo,
                "components": [c.to_dict() for c in self.components]}


def cpi_stack(baseline_cpi: float, events: Mapping[str, float], penalties: Mapping[str, float],
              *, labels: Mapping[str, str] | None = None,
              penalty_sources: Mapping[str, str] | None = None) -> CPIStack:
    """Build a CPI stack from event frequencies per 1K instructions and penalties in cycles.

    Every event needs a penalty; penalties without an event are simply unused. Components
    keep the order of `PENALTY_NAMES` first, then the input order of other events.
    """
    base = _num("baseline CPI", baseline_cpi, positive=True)
    missing = [e for e in events if e not in penalties]
    if missing:
        known = ", ".join(sorted(penalties)) or "none"
        raise UserError(f"no penalty for event(s) {', '.join(missing)} (penalties known: {known}); "
                        "give one in the input's [penalties] table")
    order = [e for e in PENALTY_NAMES if e in events] + [e for e in events if e not in PENALTY_NAMES]
    comps = []
    for name in order:
        comps.append(CPIComponent(
            name=name, per_kilo=_num(f"frequency of '{name}' per 1K instructions", events[name]),
            penalty_cycles=_num(f"penalty of '{name}' (cycles)", penalties[name]),
            label=(labels or {}).get(name) or COMPONENT_LABELS.get(name, name),
            penalty_source=(penalty_sources or {}).get(name, "")))
    return CPIStack(baseline_cpi=base, components=tuple(comps))


# ============================================================================ time and cores
def transaction_time(cpi: float, instructions: float, frequency_hz: float) -> float:
    """Seconds one core spends on a transaction: CPI x instructions / frequency."""
    return (_num("CPI", cpi, positive=True) * _num("instructions per transaction", instructions, positive=True)
            / _num("frequency (Hz)", frequency_hz, positive=True))


def lock_penalty(critical_share: float, cores: int) -> float:
    """The lock-serialisation penalty on c cores: critical-section share of cycles x (c - 1)."""
    s = _num("critical-section share (lock fraction)", critical_share)
    if s >= 1.0:
        raise UserError(f"the critical-section share of cycles must be below 1, got {critical_share!r}")
    c = _cores(cores)
    return s * (c - 1)


def _cores(c: Any) -> int:
    try:
        f = float(c)
    except (TypeError, ValueError):
        raise UserError(f"core counts must be whole numbers >= 1, got {c!r}") from None
    if isinstance(c, bool) or not math.isfinite(f) or f < 1 or f != int(f):
        raise UserError(f"core counts must be whole numbers >= 1, got {c!r}")
    return int(f)


@dataclass(frozen=True)
class CoreEstimate:
    """One core count: the lock penalty, the effective CPI, the per-core service time and the
    saturation throughput (all cores busy all the time)."""

    cores: int
    lock_model: str
    lock_penalty: float          # s (c - 1)
    cpi: float                   # effective cycles per useful instruction on one core
    transaction_time_s: float    # effective seconds of one core per transaction
    valid: bool = True
    note: str = ""

    @property
    def service_rate(self) -> float:
        """Transactions per second one core completes when busy."""
        return 1.0 / self.transaction_time_s if self.valid else math.nan

    @property
    def capacity(self) -> float:
        """Saturation throughput on all cores (utilisation 1): the paper's prediction."""
        return self.cores * self.service_rate if self.valid else math.nan

    @property
    def lock_cycles_per_kilo(self) -> float:
        return math.nan if not self.valid else self.cpi * 1000.0 - self.cpi * 1000.0 / self._factor

    @property
    def _factor(self) -> float:
        return 1.0 / (1.0 - self.lock_penalty) if self.lock_model == "wait-share" else 1.0 + self.lock_penalty

    def to_dict(self) -> dict[str, Any]:
        return {"cores": self.cores, "lock_model": self.lock_model, "lock_penalty": self.lock_penalty,
                "cpi": _finite(self.cpi), "transaction_time_s": _finite(self.transaction_time_s),
                "service_rate": _finite(self.service_rate), "capacity": _finite(self.capacity),
                "valid": self.valid, "note": self.note}


def _finite(v: float) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def estimate_cores(cpi: float, instructions: float, frequency_hz: float, cores: Sequence[int],
                   critical_share: float = 0.0, lock_model: str = "wait-share") -> list[CoreEstimate]:
    """Per core count: the lock penalty s (c - 1), the effective CPI and transaction time."""
    if lock_model not in LOCK_MODELS:
        raise UserError(f"unknown lock model {lock_model!r}; choose one of {', '.join(LOCK_MODELS)}")
    t1 = transaction_time(cpi, instructions, frequency_hz)
    out = []
    for c in cores:
        c = _cores(c)
        p = lock_penalty(critical_share, c)
        if lock_model == "wait-share":
            if p >= 1.0:
                out.append(CoreEstimate(c, lock_model, p, math.nan, math.nan, valid=False,
                                        note=f"lock penalty {100 * p:.0f}% >= 100%: the wait-share model "
                                             "predicts no throughput here (use --lock-model amdahl)"))
                continue
            factor = 1.0 / (1.0 - p)
        else:
            factor = 1.0 + p
        out.append(CoreEstimate(c, lock_model, p, cpi * factor, t1 * factor))
    return out


# ============================================================================ throughput by model
@dataclass
class CoreThroughput:
    """Throughput at one core count by each model."""

    estimate: CoreEstimate
    mm1: queueing.TargetCapacity | None = None       # per-core queues, load split evenly
    mmc: queueing.TargetCapacity | None = None       # one shared queue, c servers
    closed: dict[str, Any] | None = None             # a closed-loop generator, solved exactly
    measured: float | None = None                    # measured throughput to compare with
    notes: list[str] = field(default_factory=list)

    @property
    def error(self) -> float | None:
        """(predicted capacity - measured) / measured."""
        if self.measured is None or not self.estimate.valid:
            return None
        return (self.estimate.capacity - self.measured) / self.measured

    def to_dict(self) -> dict[str, Any]:
        return {**self.estimate.to_dict(),
                "mm1": self.mm1.to_dict() if self.mm1 else None,
                "mmc": self.mmc.to_dict() if self.mmc else None,
                "closed": self.closed, "measured": self.measured, "error": self.error,
                "notes": list(self.notes)}


def throughput_at_cores(estimates: Sequence[CoreEstimate], *, target: float | None = None,
                        percentile: float | None = None, clients: int | None = None,
                        think_time: float = 0.0,
                        measured: Mapping[int, float] | None = None) -> list[CoreThroughput]:
    """Run the queueing models on each core count's service time.

    With `target` (seconds): M/M/1 (one queue per core, the load split evenly) and M/M/c (one
    shared queue) give the largest arrival rate whose mean -- or `percentile` -- response
    time meets it. With `clients`: `clients` closed-loop clients thinking `think_time` between
    requests against a c-server station, solved exactly (machine-repairman model, = exact
    MVA). `measured` (throughput by core count) adds the relative error of the saturation
    throughput.
    """
    out = []
    for e in estimates:
        row = CoreThroughput(estimate=e, measured=None if measured is None else measured.get(e.cores))
        if not e.valid:
            row.notes.append(e.note)
            out.append(row)
            continue
        mu = e.service_rate
        if target is not None:
            try:
                row.mm1 = queueing.max_arrival_rate(mu, servers=1, target=target, percentile=percentile,
                                                    queues=e.cores)
                row.mmc = queueing.max_arrival_rate(mu, servers=e.cores, target=target,
                                                    percentile=percentile)
            except queueing.TargetUnreachable as err:
                row.notes.append(f"{e.cores} core(s): {err}")
        if clients is not None:
            # One c-server station and a think time: the machine-repairman model is the exact
            # solution (exact MVA gives the same numbers, tests/test_queueing.py) in O(N) time
            # and without MVA's loss of precision deep in saturation.
            m = queueing.machine_repairman(clients, think_time, e.transaction_time_s, e.cores)
            row.closed = {"model": "machine-repairman", "clients": clients, "think_time_s": think_time,
                          "throughput": m.throughput, "response_time_s": m.response_time,
                          "utilization": m.utilization, "queue_length": m.mean_in_system}
        out.append(row)
    return out


# ============================================================================ predictor face
@dataclass(frozen=True)
class CPIModel:
    """The CPI method as a predictor: `predict(cores)` gives the saturation throughput.

    `cpi_by_cores` (core count -> CPI) gives the CPI where it depends on the core count, as it
    does when cores share a last-level cache (`corecast.model.misscurve`); other core counts take
    `cpi`."""

    cpi: float
    instructions: float
    frequency_hz: float
    critical_share: float = 0.0
    lock_model: str = "wait-share"
    method: str = "cpi"
    cpi_by_cores: Mapping[int, float] | None = None

    def at(self, cores: Sequence[int]) -> list[CoreEstimate]:
        if not self.cpi_by_cores:
            return estimate_cores(self.cpi, self.instructions, self.frequency_hz, cores,
                                  self.critical_share, self.lock_model)
        return [e for c in cores for e in estimate_cores(self.cpi_by_cores.get(_cores(c), self.cpi),
                                                         self.instructions, self.frequency_hz, [c],
                                                         self.critical_share, self.lock_model)]

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        ests = self.at([int(c) for c in np.asarray(cores, dtype=float)])
        warns = [e.note for e in ests if not e.valid]
        return Prediction(cores=np.array([e.cores for e in ests], dtype=float),
                          value=np.array([e.capacity for e in ests]), metric="throughput",
                          method=self.method, model=f"CPI stack, lock model {self.lock_model}",
                          params={"cpi": self.cpi, "instructions": self.instructions,
                                  "frequency_hz": self.frequency_hz,
                                  "critical_share": self.critical_share,
                                  **({"cpi_by_cores": dict(self.cpi_by_cores)} if self.cpi_by_cores else {})},
                          warnings=warns)


# ============================================================================ the --mpki format
@dataclass
class CPIInputs:
    """What an `--mpki` file (or a simulator result) says about a workload."""

    baseline_cpi: float
    events: dict[str, float]                 # per 1K instructions
    penalties: dict[str, float] = field(default_factory=dict)   # cycles, override the machine's
    labels: dict[str, str] = field(default_factory=dict)
    instructions: float | None = None        # per transaction
    lock_fraction: float | None = None       # critical-section share of cycles
    source: str = ""
    notes: list[str] = field(default_factory=list)
    machine: str | None = None               # the machine a simulator result was computed for
    machine_path: str | None = None
    cores: int = 1                           # the cores a simulator result was computed on


_TOP_KEYS = {"baseline_cpi", "instructions", "lock_fraction", "events", "penalties", "description"}


def parse_mpki(doc: Mapping[str, Any], where: str = "input") -> CPIInputs:
    """Validate an `--mpki` document already parsed from TOML or JSON."""
    if not isinstance(doc, Mapping):
        raise UserError(f"{where}: expected a table of keys (baseline_cpi, events, ...)")
    unknown = sorted(set(doc) - _TOP_KEYS)
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(unknown)}; expected "
                        f"{', '.join(sorted(_TOP_KEYS))}")
    if "baseline_cpi" not in doc:
        raise UserError(f"{where}: 'baseline_cpi' is missing (the CPI with perfect caches and prediction)")
    base = _num(f"{where}: baseline_cpi", doc["baseline_cpi"], positive=True)
    events: dict[str, float] = {}
    penalties: dict[str, float] = {}
    labels: dict[str, str] = {}
    raw_events = doc.get("events", {})
    if not isinstance(raw_events, Mapping):
        raise UserError(f"{where}: 'events' must be a table of event = frequency per 1K instructions")
    for name, v in raw_events.items():
        if isinstance(v, Mapping):
            extra = sorted(set(v) - {"per_1k", "penalty", "label"})
            if extra or "per_1k" not in v:
                raise UserError(f"{where}: event '{name}' must be a number or a table with per_1k "
                                "(and optionally penalty, label)")
            events[name] = _num(f"{where}: events.{name}.per_1k", v["per_1k"])
            if "penalty" in v:
                penalties[name] = _num(f"{where}: events.{name}.penalty", v["penalty"])
            if "label" in v:
                labels[name] = str(v["label"])
        else:
            events[name] = _num(f"{where}: events.{name}", v)
    raw_pen = doc.get("penalties", {})
    if not isinstance(raw_pen, Mapping):
        raise UserError(f"{where}: 'penalties' must be a table of event = cycles")
    for name, v in raw_pen.items():
        if name in penalties:
            raise UserError(f"{where}: the penalty of '{name}' is given twice")
        penalties[name] = _num(f"{where}: penalties.{name}", v)
    instr = doc.get("instructions")
    lock = doc.get("lock_fraction")
    if lock is not None:
        lock = _num(f"{where}: lock_fraction", lock)
        if lock >= 1:
            raise UserError(f"{where}: lock_fraction must be below 1, got {lock:g}")
    return CPIInputs(baseline_cpi=base, events=events, penalties=penalties, labels=labels,
                     instructions=None if instr is None else _num(f"{where}: instructions", instr, positive=True),
                     lock_fraction=lock, source=where)


_CSV_SCALARS = {"baseline_cpi", "instructions", "lock_fraction"}


def _parse_csv(text: str, where: str) -> dict[str, Any]:
    rows = list(csv.reader(io.StringIO(text)))
    body = [(i + 1, r) for i, r in enumerate(rows) if r and not r[0].lstrip().startswith("#")
            and any(cell.strip() for cell in r)]
    if not body:
        raise UserError(f"{where}: empty file")
    header = [h.strip().lower() for h in body[0][1]]
    if header[:2] != ["name", "per_1k"] or any(h not in ("name", "per_1k", "penalty", "label") for h in header):
        raise UserError(f"{where}:{body[0][0]}: the header must be name,per_1k[,penalty][,label], "
                        f"got {','.join(body[0][1])}")
    doc: dict[str, Any] = {"events": {}}
    for line, r in body[1:]:
        cells = {h: (r[i].strip() if i < len(r) else "") for i, h in enumerate(header)}
        name = cells["name"]
        if not name:
            raise UserError(f"{where}:{line}: a row has no name")
        if cells["per_1k"] == "":
            raise UserError(f"{where}:{line}: '{name}' has no value")
        try:
            value = float(cells["per_1k"])
        except ValueError:
            raise UserError(f"{where}:{line}: '{name}': {cells['per_1k']!r} is not a number") from None
        if name in _CSV_SCALARS:
            doc[name] = value
            continue
        if name in doc["events"]:
            raise UserError(f"{where}:{line}: event '{name}' appears twice")
        ev: dict[str, Any] = {"per_1k": value}
        if cells.get("penalty"):
            try:
                ev["penalty"] = float(cells["penalty"])
            except ValueError:
                raise UserError(f"{where}:{line}: '{name}': penalty {cells['penalty']!r} is not a number") from None
        if cells.get("label"):
            ev["label"] = cells["label"]
        doc["events"][name] = ev
    return doc


def load_mpki(path: str | Path) -> CPIInputs:
    """Read an `--mpki` file: TOML (.toml), JSON (.json) or CSV (.csv); see docs/throughput.md."""
    p = Path(path)
    suffix = p.suffix.lower()
    fmt = {".json": "json", ".csv": "text"}.get(suffix, "toml")
    doc = read_document(p, "file", fmt)                   # bounded; a FIFO never blocks
    if fmt == "text":
        doc = _parse_csv(doc, str(p))
    return parse_mpki(doc, str(p))


# ============================================================================ `corecast sim --json`
def inputs_from_sim(doc: Mapping[str, Any], where: str = "sim result",
                    baseline_cpi: float | None = None) -> CPIInputs:
    """The CPI inputs in a `corecast sim --json` result (docs/sim.md): its
    `events_per_kilo_instruction`, `issue.baseline_cpi` and `instructions_per_transaction`.

    `baseline_cpi` fills in (or overrides) the issue model's CPI, which a trace without
    register dependencies cannot give.
    """
    check_document(doc, where)
    unavailable = doc.get("unavailable") or {}
    if not isinstance(unavailable, Mapping):
        unavailable = {}
    raw = doc.get("events_per_kilo_instruction")
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: 'events_per_kilo_instruction' is missing or not a table")
    events = {str(k): _num(f"{where}: events_per_kilo_instruction.{k}", v) for k, v in raw.items()}
    notes: list[str] = []
    if baseline_cpi is None:
        issue = doc.get("issue") or {}
        base = issue.get("baseline_cpi") if isinstance(issue, Mapping) else None
        if base is None:
            why = next((str(v) for k, v in unavailable.items() if "baseline" in str(k) or "issue" in str(k)),
                       "the result has no issue.baseline_cpi")
            raise UserError(f"{where}: no baseline CPI ({why}); give one with --baseline-cpi")
        base = _num(f"{where}: issue.baseline_cpi", base, positive=True)
    else:
        base = _num("--baseline-cpi", baseline_cpi, positive=True)
        notes.append(f"baseline CPI {base:g} given on the command line, not simulated")
    for k, v in unavailable.items():
        notes.append(f"not in the simulation: {k} ({v}); the stack has no component for it")
    ipt = doc.get("instructions_per_transaction")
    instructions = None if ipt is None else _num(f"{where}: instructions_per_transaction", ipt, positive=True)
    cores = doc.get("cores")
    if isinstance(cores, int) and cores > 1:
        notes.append(f"events were simulated on {cores} cores (coherence misses included)")
    mach = doc.get("machine") if isinstance(doc.get("machine"), Mapping) else {}
    for k in ("name", "path"):
        if mach.get(k) is not None and not isinstance(mach.get(k), str):
            raise UserError(f"{where}: machine.{k} must be text, got {str(mach.get(k))[:40]}")
    return CPIInputs(baseline_cpi=base, events=events, instructions=instructions, source=where,
                     notes=notes, machine=mach.get("name"), machine_path=mach.get("path"),
                     cores=cores if isinstance(cores, int) and cores >= 1 else 1)


def load_sim(path: str | Path, baseline_cpi: float | None = None) -> CPIInputs:
    """Read a `corecast sim --json` file's CPI inputs (see `inputs_from_sim`)."""
    return inputs_from_sim(sim_result.read_document(path), str(path), baseline_cpi=baseline_cpi)
