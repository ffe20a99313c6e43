"""Workloads for the AMP scheduling simulator: applications made of threads and phases.

A workload is TOML (bundled ones in `corecast/sched/workloads/`):

    name = "mix"
    [rules]                   # the PMCTrack/ACFS papers' experimental rules (the defaults)
    runs = 3                  # every application restarts until the slowest has completed 3 runs
    restart = true            # false: each application runs once (a batch)
    summary = "geomean"       # an application's completion time: geomean | mean | first

    [[app]]
    name = "swim"
    threads = 4               # threads the application creates
    priority = 0              # nice value, -20..19 (CFS weights)
    sharing = "static"        # parallel work: static (own share, then a barrier) | dynamic (a pool)
    category = "HP-high"      # a label for reports
    copies = 1                # the same application several times
    [[app.phase]]
    work_s = 30               # seconds the phase takes on ONE big core (all its threads' work)
    sf = 2.1                  # speedup factor: time on the slowest core type / time on the fastest
    tlp = 4                   # threads runnable in its parallel part (default: threads)
    serial_fraction = 0.1     # share of the work done by one thread while the others wait
    iterations = 5            # serial + parallel parts alternate this many times
    ipc = 1.2                 # IPC on a big core (IPC sampling and its phase rule)
    metrics.big = { ipc = 1.2, llc_mpki = 3.0 }    # counter metrics per core type (SF models)
    metrics.small = { ipc = 0.6, llc_mpki = 3.1 }

An application with one phase may put the phase's keys in the [[app]] table itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..errors import UserError
from . import _toml as T

MAX_THREADS = 4096          # threads in a workload, all applications together
MAX_APPS = 1024             # applications in a workload (copies included)
MAX_SEGMENTS = 100_000      # serial and parallel parts of one application
MAX_WORK_S = 1e6            # work of one phase, in seconds of one big core (11.6 days)
MAX_RUNS = 1000             # runs of the slowest application ([rules] runs, --runs)
SUMMARIES = ("geomean", "mean", "first")
SHARING = ("static", "dynamic")

#: CFS's weight of each nice value -20..19 (the kernel's sched_prio_to_weight table).
NICE_WEIGHTS = (88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
                9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
                1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
                110, 87, 70, 56, 45, 36, 29, 23, 18, 15)


def nice_weight(nice: int) -> float:
    return float(NICE_WEIGHTS[nice + 20])


@dataclass(frozen=True)
class Phase:
    work_s: float
    sf: float | None = None            # None: the machine's speed ratio (compute-bound)
    tlp: int | None = None             # None: all the application's threads
    serial_fraction: float = 0.0
    iterations: int = 1
    ipc: float = 1.0
    metrics: Mapping[str, Mapping[str, float]] = field(default_factory=dict)


@dataclass
class App:
    name: str
    threads: int = 1
    priority: int = 0
    sharing: str = "static"
    category: str = ""
    phases: tuple[Phase, ...] = ()

    @property
    def weight(self) -> float:
        return nice_weight(self.priority)

    @property
    def work_s(self) -> float:
        return sum(p.work_s for p in self.phases)


@dataclass
class Rules:
    runs: int = 3
    restart: bool = True
    summary: str = "geomean"


@dataclass
class Workload:
    name: str
    apps: list[App]
    rules: Rules = field(default_factory=Rules)
    description: str = ""
    machine: str = ""
    source: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def threads(self) -> int:
        return sum(a.threads for a in self.apps)

    def with_rules(self, **kw: Any) -> "Workload":
        r = Rules(**{**self.rules.__dict__, **{k: v for k, v in kw.items() if v is not None}})
        return Workload(self.name, self.apps, r, self.description, self.machine, self.source, self.notes)

    def only(self, i: int) -> "Workload":
        """Application i alone (for its completion time alone on the machine)."""
        return Workload(f"{self.name}:{self.apps[i].name}", [self.apps[i]], self.rules, source=self.source)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "machine": self.machine,
                "rules": dict(self.rules.__dict__),
                "apps": [{"name": a.name, "threads": a.threads, "priority": a.priority,
                          "sharing": a.sharing, "category": a.category,
                          "phases": [{k: v for k, v in p.__dict__.items() if v not in (None, {}) and k != "metrics"}
                                     for p in a.phases]} for a in self.apps]}


# ------------------------------------------------------------------------ segments
@dataclass
class Segments:
    """An application's phases unrolled into the parts the engine runs one after the other: each
    part has its work (big-core seconds, all threads together), its runnable threads (1 for a
    serial part) and the phase it belongs to."""

    work: np.ndarray
    tlp: np.ndarray
    phase: np.ndarray


def segments(app: App) -> Segments:
    work, tlp, phase = [], [], []
    for pi, p in enumerate(app.phases):
        n = p.tlp or app.threads
        k = p.iterations
        for _ in range(k):
            if p.serial_fraction > 0:
                work.append(p.work_s * p.serial_fraction / k)
                tlp.append(1)
                phase.append(pi)
            if p.serial_fraction < 1:
                work.append(p.work_s * (1 - p.serial_fraction) / k)
                tlp.append(n)
                phase.append(pi)
    return Segments(np.array(work, dtype=float), np.array(tlp, dtype=np.int64), np.array(phase, dtype=np.int64))


# ------------------------------------------------------------------------ reading
def bundled_workloads() -> list[str]:
    return T.bundled("workloads")


def load_workload(name_or_path: str | Path) -> Workload:
    """A bundled workload name or a TOML file."""
    data, where = T.read(name_or_path, "workloads", "workload")
    return parse_workload(data, where)


_PHASE_KEYS = {"work_s", "sf", "tlp", "serial_fraction", "iterations", "ipc", "metrics"}
_APP_KEYS = {"name", "threads", "priority", "sharing", "category", "copies", "phase"}


def _phase(d: Mapping[str, Any], threads: int, where: str) -> Phase:
    work = T.number(d, "work_s", where, low=0.0, strict_low=True, high=MAX_WORK_S, required=True)
    sf = T.number(d, "sf", where, low=0.0, strict_low=True, high=1e3)
    tlp = T.whole(d, "tlp", where, low=1)
    if tlp is not None and tlp > threads:
        raise UserError(f"{where}: tlp {tlp} is more than the application's {threads} threads")
    sfrac = T.number(d, "serial_fraction", where, default=0.0, low=0.0, high=1.0)
    its = T.whole(d, "iterations", where, default=1, low=1, high=MAX_SEGMENTS // 2)
    ipc = T.number(d, "ipc", where, default=1.0, low=0.0, strict_low=True)
    met = d.get("metrics", {})
    if not isinstance(met, dict) or not all(isinstance(v, dict) for v in met.values()):
        raise UserError(f"{where}: 'metrics' must be tables of metric = value per core type, "
                        "e.g. metrics.big = {{ ipc = 1.2 }}")
    metrics = {}
    for ct, vals in met.items():
        metrics[str(ct)] = {str(k): float(T.number(vals, k, f"{where}: metrics.{ct}")) for k in vals}
    return Phase(float(work), sf, tlp, float(sfrac), int(its), float(ipc), metrics)


def parse_workload(data: Mapping[str, Any], where: str = "<workload>") -> Workload:
    T.unknown_keys(data, {"name", "description", "machine", "source", "rules", "app", "notes"}, where)
    rd = data.get("rules", {})
    if not isinstance(rd, dict):
        raise UserError(f"{where}: [rules] must be a table")
    T.unknown_keys(rd, {"runs", "restart", "summary"}, f"{where}: [rules]")
    restart = rd.get("restart", True)
    if not isinstance(restart, bool):
        raise UserError(f"{where}: [rules] restart must be true or false")
    summary = T.text(rd, "summary", f"{where}: [rules]", "geomean")
    if summary not in SUMMARIES:
        raise UserError(f"{where}: [rules] summary '{summary}': choose {', '.join(SUMMARIES)}")
    rules = Rules(int(T.whole(rd, "runs", f"{where}: [rules]", default=3, low=1, high=MAX_RUNS)), restart, summary)
    raw = data.get("app")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{where}: no [[app]] tables: a workload needs at least one application")
    apps: list[App] = []
    for i, a in enumerate(raw):
        w = f"{where}: app {i + 1}"
        if not isinstance(a, dict):
            raise UserError(f"{w}: must be a table")
        name = T.text(a, "name", w) or f"app{i + 1}"
        w = f"{where}: app '{name}'"
        T.unknown_keys(a, _APP_KEYS | _PHASE_KEYS, w)
        threads = int(T.whole(a, "threads", w, default=1, low=1, high=MAX_THREADS))
        prio = int(T.whole(a, "priority", w, default=0, low=-20, high=19))
        sharing = T.text(a, "sharing", w, "static")
        if sharing not in SHARING:
            raise UserError(f"{w}: sharing '{sharing}': choose {', '.join(SHARING)}")
        copies = int(T.whole(a, "copies", w, default=1, low=1, high=MAX_APPS))
        phases_raw = a.get("phase")
        inline = _PHASE_KEYS & set(a)
        if phases_raw is not None and inline:
            raise UserError(f"{w}: give the phase's keys ({', '.join(sorted(inline))}) either in "
                            "[[app.phase]] tables or in the [[app]] table, not both")
        if phases_raw is None:
            if "work_s" not in a:
                raise UserError(f"{w}: no work: give work_s (and sf, tlp ...) or [[app.phase]] tables")
            phases_raw = [{k: a[k] for k in inline}]
        if not isinstance(phases_raw, list) or not phases_raw:
            raise UserError(f"{w}: 'phase' must be [[app.phase]] tables")
        phases = tuple(_phase(p, threads, f"{w}: phase {j + 1}") for j, p in enumerate(phases_raw))
        nseg = sum(p.iterations * (1 + (0 < p.serial_fraction < 1)) for p in phases)
        if nseg > MAX_SEGMENTS:
            raise UserError(f"{w}: {nseg} serial and parallel parts; at most {MAX_SEGMENTS}")
        cat = T.text(a, "category", w)
        if len(apps) + copies > MAX_APPS:
            raise UserError(f"{w}: {len(apps) + copies} applications so far; a workload has at most {MAX_APPS}")
        for c in range(copies):
            apps.append(App(name if copies == 1 else f"{name}#{c + 1}", threads, prio, sharing, cat, phases))
    total = sum(a.threads for a in apps)
    if total > MAX_THREADS:
        raise UserError(f"{where}: {total} threads in all; the simulator places at most {MAX_THREADS}")
    names = [a.name for a in apps]
    if len(set(names)) != len(names):
        raise UserError(f"{where}: two applications are named '{next(n for n in names if names.count(n) > 1)}'")
    notes = data.get("notes", [])
    if isinstance(notes, str):
        notes = [notes]
    return Workload(T.text(data, "name", where) or Path(where).stem, apps, rules,
                    T.text(data, "description", where), T.text(data, "machine", where),
                    T.text(data, "source", where) or where, [str(n) for n in notes])
