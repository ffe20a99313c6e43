"""The meters: what each one is, and how it is obtained on this machine (its inputs), or why it
cannot be (never a 0 for something not counted).

A meter is defined once (`MeterDef`: name, unit, kind, the scopes it exists at, its name in the
Prometheus exposition, and its `recipe`: how its value is obtained) and registered with
`register` (the built-in ones in `DEFS`, at the end of this module). `plan()` turns the wanted
meters into instances, one per scope, by calling each one's recipe: each instance either has its
inputs (cumulative counts the engine reads: a field of a /proc line, a perf counter, a thread's
schedstat, a value the daemon sets) and its quality, or is unavailable with the reason:

- software, everywhere: CPU busy and steal (/proc/stat), run-queue delay (/proc/schedstat per
  CPU), PSI some/full of cpu, memory and io (rates of the `total=` counters), runnable tasks,
  context switches, migrations and page faults (perf software events per CPU when counting a
  CPU is allowed, else the node's totals from /proc/stat and /proc/vmstat);
- hardware, through corecast's perf layer and event catalogues, when the PMU allows: CPI, L2
  and LLC miss ratios, the LLC-miss stall cycle ratio, memory bandwidth (the memory
  controllers' uncore PMU, else resctrl), memory concurrency (uncore read-queue occupancy);
- a watched process (--pid): its threads' CPU use and run-queue delay (schedstat per thread).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol, Sequence

from ..collect import sources
from ..collect.events import backend_stall_events, host_cpu, resolve
from ..collect.events.cpu import CpuId, parse_cpu
from ..collect.events.kernel import SYSFS_PMUS
from ..collect.events.spec import EventSpec
from ..collect.topology import parse_cpulist
from ..errors import UserError
from . import layout as L
from .tree import Scope, Tree

PU_LEVELS = ("core", "socket", "node")
OPTIONAL = 1 << 31          # an input that may be missing: it adds 0 instead of making the value NaN
GROUPS = ("software", "hardware", "probe", "process")


class Recipe(Protocol):
    """How a meter's value is obtained here: its instances at the given scopes (each with its
    inputs and quality, or unavailable with the reason). `ctx` holds what this machine offers."""

    def __call__(self, d: MeterDef, scopes: Sequence[Scope], ctx: Context) -> list[Instance]: ...


@dataclass(frozen=True)
class MeterDef:
    name: str
    unit: str
    kind: int               # layout.GAUGE | RATE | RATIO
    levels: tuple[str, ...]
    help: str
    prom: str               # the gauge family of its window statistics
    total_unit: str = ""    # the cumulative count beside it (a counter family), if any
    total_prom: str = ""
    group: str = "software"
    recipe: Recipe = field(kw_only=True, compare=False, repr=False)


# ============================================================================================
# instances

@dataclass(frozen=True)
class Input:
    file: tuple             # ("proc", path) | ("perf", event name, cpu) | ("thread", slot, path) | ("external", name)
    key: str = ""
    fields: int = 0         # bit i: field i after the key is summed; OPTIONAL


@dataclass
class Instance:
    meter: MeterDef
    scope: Scope
    quality: int            # layout.MEASURED | DERIVED | UNAVAILABLE
    source: str             # "measured: ..." or "unavailable: <why>"
    num: list[Input] = field(default_factory=list)
    den: list[Input] = field(default_factory=list)
    scale: float = 1.0
    total_scale: float = 0.0
    bias: float = 0.0

    @property
    def available(self) -> bool:
        return self.quality != L.UNAVAILABLE

    @property
    def has_total(self) -> bool:
        return self.available and bool(self.meter.total_prom) and self.total_scale > 0


def _bits(*fields: int) -> int:
    out = 0
    for f in fields:
        out |= 1 << f
    return out


@dataclass
class Env:
    """What this machine offers, found once: where /proc is, the clock tick, whether per-CPU
    perf counting is allowed, which events can be counted (through the backend, so that tests
    give a simulated PMU), and the CPU model for the event catalogues."""

    proc: Path = sources.PROC
    sys: Path = sources.SYS
    user_hz: int = os.sysconf("SC_CLK_TCK")
    cpu: CpuId | str | None = None        # a CPU name ("skylake") for its catalogues; None: this one
    status: Callable[[EventSpec], str | None] | None = None     # None: countable, else why not (the daemon
                                                                # asks its backend)
    specs: dict[str, EventSpec] = field(default_factory=dict)         # every perf event planned, by name
    probe_reason: str | None = None     # why the memory-latency probe cannot run (None: it can)
    probe_source: str = "derived: a pinned pointer chase (chase's kernel) at a low duty cycle, over the idle latency"
    pmus: Path = SYSFS_PMUS

    def event(self, text: str) -> EventSpec | str:
        """An event of the running CPU (or of `cpu`), or why it cannot be had."""
        try:
            spec = resolve(text, pmu=self.cpu)[0]
        except UserError as err:
            return str(err)
        why = self.countable(spec)
        if why:
            return why
        self.specs[spec.name] = spec
        return spec

    def countable(self, spec: EventSpec) -> str | None:
        return self.status(spec) if self.status is not None else None


@dataclass
class Context:
    """What a recipe works with: the machine (`env`), the tree of scopes, and what is found once
    for several meters (whether perf software events can be counted per CPU)."""

    env: Env
    tree: Tree
    _percpu_sw: list[str | None] = field(default_factory=list)

    def percpu_software(self) -> str | None:
        """None when perf software events can be counted per CPU here, else why not (asked once)."""
        if not self._percpu_sw:
            self._percpu_sw.append(percpu_software(self.env))
        return self._percpu_sw[0]


def per_scope(make: Callable[[MeterDef, Scope, Context], Instance]) -> Recipe:
    """A recipe from a function that makes the instance at one scope."""
    def recipe(d: MeterDef, scopes: Sequence[Scope], ctx: Context) -> list[Instance]:
        return [make(d, s, ctx) for s in scopes]
    recipe.__name__ = recipe.__qualname__ = getattr(make, "__name__", "recipe")
    return recipe


def _proc_exists(env: Env, rel: str) -> bool:
    return (env.proc / rel).exists()


def _per_pu(inst: Instance, pu_inputs: Callable[[int], tuple[list[Input], list[Input]]]) -> Instance:
    for c in inst.scope.cpus:
        n, d = pu_inputs(c)
        inst.num += n
        inst.den += d
    return inst


def _unavailable(d: MeterDef, s: Scope, why: str) -> Instance:
    return Instance(d, s, L.UNAVAILABLE, f"unavailable: {why}")


# ============================================================================================
# recipes: software, everywhere

def cpu_time(fields: int, what: str) -> Recipe:
    """A share of CPU time: the /proc/stat cpuN fields `fields` (bits) over all, per CPU."""
    def make(d: MeterDef, s: Scope, ctx: Context) -> Instance:
        stat = ("proc", str(ctx.env.proc / "stat"))
        inst = Instance(d, s, L.MEASURED, f"measured: /proc/stat cpuN ({what}) / all, summed over the scope's CPUs",
                        total_scale=1.0 / ctx.env.user_hz)
        return _per_pu(inst, lambda c: ([Input(stat, f"cpu{c}", fields)], [Input(stat, f"cpu{c}", _bits(*range(8)))]))
    return per_scope(make)


@per_scope
def runq_delay(d: MeterDef, s: Scope, ctx: Context) -> Instance:
    """Run-queue delay per CPU from /proc/schedstat."""
    env = ctx.env
    if not _proc_exists(env, "schedstat"):
        return _unavailable(d, s, "the kernel has no /proc/schedstat (built without CONFIG_SCHEDSTATS); "
                                  "psi_cpu_some is the node's CPU wait, and --pid threads keep their own")
    ss = ("proc", str(env.proc / "schedstat"))
    inst = Instance(d, s, L.MEASURED, "measured: /proc/schedstat cpuN run_delay (ns), summed",
                    scale=1e-9, total_scale=1e-9)
    return _per_pu(inst, lambda c: ([Input(ss, f"cpu{c}", _bits(7))], []))


@per_scope
def runnable(d: MeterDef, s: Scope, ctx: Context) -> Instance:
    stat = ("proc", str(ctx.env.proc / "stat"))
    return Instance(d, s, L.MEASURED, "measured: /proc/stat procs_running less the daemon's own sampling thread",
                    num=[Input(stat, "procs_running", _bits(0))], bias=-1.0)


def psi(res: str, kind: str) -> Recipe:
    """Pressure stall information: the `total=` counter of /proc/pressure/RES's `kind` line."""
    def make(d: MeterDef, s: Scope, ctx: Context) -> Instance:
        env = ctx.env
        p = sources.psi(res, proc=env.proc)
        if isinstance(p, sources.Unavailable):
            return _unavailable(d, s, p.reason)
        if kind == "full" and p[res].full_us is None:
            return _unavailable(d, s, f"/proc/pressure/{res} has no 'full' line on this kernel")
        f = ("proc", str(env.proc / "pressure" / res))
        return Instance(d, s, L.MEASURED, f"measured: /proc/pressure/{res} {kind} total (us)",
                        num=[Input(f, kind, _bits(3))], scale=1e-6, total_scale=1e-6)
    return per_scope(make)


def software_event(event: str, node: tuple[str, str, str] | None = None) -> Recipe:
    """A perf software event per CPU; where it cannot be counted per CPU, the node's total from
    `node` = (file under /proc, its key, the file's name in the source) when there is one."""
    def make(d: MeterDef, s: Scope, ctx: Context) -> Instance:
        env = ctx.env
        percpu_sw = ctx.percpu_software()
        if percpu_sw is None:
            spec = env.event(event)
            if isinstance(spec, EventSpec):
                inst = Instance(d, s, L.MEASURED, f"measured: perf software event {spec.name} per CPU",
                                total_scale=1.0)
                return _per_pu(inst, lambda c: ([Input(("perf", spec.name, c))], []))
            percpu_sw = spec
        if s.kind == "node" and node is not None:
            rel, key, shown = node
            return Instance(d, s, L.MEASURED, f"measured: {shown} {key}",
                            num=[Input(("proc", str(env.proc / rel)), key, _bits(0))], total_scale=1.0)
        return _unavailable(d, s, f"per-CPU perf software events cannot be opened ({percpu_sw})"
                            + ("; the node's value comes from /proc" if node is not None else ""))
    return per_scope(make)


# ============================================================================================
# recipes: hardware, through corecast's perf layer and event catalogues

def _first(env: Env, pairs: Sequence[tuple[str, str]]) -> tuple[EventSpec, EventSpec] | str:
    why = "no recipe"
    for a, b in pairs:
        ea, eb = env.event(a), env.event(b)
        if isinstance(ea, EventSpec) and isinstance(eb, EventSpec):
            return ea, eb
        why = ea if isinstance(ea, str) else str(eb)
    return why


def _cpu(env: Env) -> CpuId:
    return env.cpu if isinstance(env.cpu, CpuId) else (parse_cpu(env.cpu) if env.cpu else host_cpu())


def per_cpu_ratio(events: Callable[[Env], tuple[EventSpec, EventSpec, str] | str]) -> Recipe:
    """A per-CPU hardware ratio: `events` gives (numerator event, denominator event, source) or
    why not, once for the meter; summed over each scope's CPUs."""
    def recipe(d: MeterDef, scopes: Sequence[Scope], ctx: Context) -> list[Instance]:
        r = events(ctx.env)
        if isinstance(r, str):
            return [_unavailable(d, s, r) for s in scopes]
        num, den, src = r
        return [_per_pu(Instance(d, s, L.MEASURED, src), lambda c: ([Input(("perf", num.name, c))],
                                                                     [Input(("perf", den.name, c))]))
                for s in scopes]
    return recipe


def _cpi_events(env: Env) -> tuple[EventSpec, EventSpec, str] | str:
    r = _first(env, [("cycles", "instr")])
    return (*r, "measured: perf cycles / instructions per CPU") if isinstance(r, tuple) else r


def _llc_events(env: Env) -> tuple[EventSpec, EventSpec, str] | str:
    r = _first(env, [("llc_misses", "llc_refs")])
    return (*r, "measured: perf LLC misses / references per CPU") if isinstance(r, tuple) else r


def _l2_events(env: Env) -> tuple[EventSpec, EventSpec, str] | str:
    cpu = _cpu(env)
    if cpu.vendor != "intel":
        return f"corecast has no L2 miss/reference recipe for {cpu.describe()}"
    r = _first(env, [("L2_RQSTS:ALL_DEMAND_MISS", "L2_RQSTS:ALL_DEMAND_REFERENCES"),
                     ("L2_RQSTS:MISS", "L2_RQSTS:REFERENCES")])
    return (*r, f"measured: {r[0].name} / {r[1].name} per CPU (libpfm4)") if isinstance(r, tuple) else r


def _llc_stall_events(env: Env) -> tuple[EventSpec, EventSpec, str] | str:
    """The catalogue's L3-miss stall event over cycles."""
    stalls = backend_stall_events(_cpu(env))
    ev = next((e for e in stalls if e.name == "stall_l3_miss_stalls"), None)
    if ev is None:
        return getattr(stalls, "reason", "") or (f"the event catalogue of {_cpu(env).describe()} has no "
                                                 "LLC-miss stall event")
    why = env.countable(ev)
    cyc = env.event("cycles")
    if why or not isinstance(cyc, EventSpec):
        return why or str(cyc)
    env.specs[ev.name] = ev
    return ev, cyc, f"measured: {ev.description.split(':')[0]} / cycles per CPU (corecast's catalogue)"


def _imc_pmus(env: Env) -> list[tuple[str, int]]:
    """Memory-controller uncore PMUs (Intel uncore_imc_N) and the CPU each is read on."""
    out = []
    try:
        dirs = sorted(p for p in env.pmus.iterdir() if p.name.startswith("uncore_imc"))
    except OSError:
        return []
    for p in dirs:
        try:
            cpus = parse_cpulist((p / "cpumask").read_text())
        except OSError:
            continue
        for c in cpus:
            out.append((p.name, c))
    return out


def _imc_events(env: Env, pmu: str, names: Sequence[str]) -> list[tuple[EventSpec, float]] | str:
    """Named events of an uncore PMU (sysfs events/NAME, with .scale and .unit) as specs with
    the factor to bytes."""
    out = []
    for n in names:
        try:
            alias = (env.pmus / pmu / "events" / n).read_text().strip()
        except OSError:
            return f"{pmu} has no event {n}"
        scale = 1.0
        try:
            scale = float((env.pmus / pmu / "events" / f"{n}.scale").read_text())
            unit = (env.pmus / pmu / "events" / f"{n}.unit").read_text().strip()
            scale *= {"MiB": 2 ** 20, "KiB": 2 ** 10, "B": 1, "bytes": 1}.get(unit, 1)
        except (OSError, ValueError):
            pass
        spec = env.event(f"{pmu}/{alias},name={pmu}.{n}/")
        if isinstance(spec, str):
            return spec
        out.append((spec, scale))
    return out


@per_scope
def mem_bandwidth(d: MeterDef, s: Scope, ctx: Context) -> Instance:
    """DRAM traffic: the memory controllers' CAS counts, else resctrl's (the node only)."""
    env = ctx.env
    imcs = [(p, c) for p, c in _imc_pmus(env) if c in s.cpus]
    if imcs:
        inst = Instance(d, s, L.MEASURED, "measured: uncore_imc CAS reads + writes (x 64 bytes)", total_scale=1.0)
        for pmu, c in imcs:
            evs = _imc_events(env, pmu, ("cas_count_read", "cas_count_write"))
            if isinstance(evs, str):
                return _unavailable(d, s, evs)
            scales = {sc for _, sc in evs}
            if len(scales) != 1:
                return _unavailable(d, s, f"{pmu}: reads and writes scaled differently")
            inst.scale = inst.total_scale = scales.pop()
            inst.num += [Input(("perf", e.name, c)) for e, _ in evs]
        return inst
    why = sources.resctrl_unavailable(env.sys, env.proc / "cpuinfo")
    if why is None and s.kind == "node":
        doms = sorted((env.sys / "fs" / "resctrl" / "mon_data").glob("mon_L3_*"))
        return Instance(d, s, L.MEASURED, "measured: resctrl mbm_total_bytes of the root group (every task "
                                          "not in another group)",
                        num=[Input(("proc", str(p / "mbm_total_bytes")), "", _bits(0)) for p in doms],
                        total_scale=1.0)
    return _unavailable(d, s, "perf exposes no memory-controller PMU here (uncore_imc_*), and "
                              + (why or "resctrl attributes bandwidth to the node only"))


@per_scope
def mem_concurrency(d: MeterDef, s: Scope, ctx: Context) -> Instance:
    """Read-queue occupancy per DRAM clock (Intel Xeon E5 v3 to Cascade Lake)."""
    env = ctx.env
    imcs = [(p, c) for p, c in _imc_pmus(env) if c in s.cpus]
    cpu = _cpu(env)
    if not imcs:
        return _unavailable(d, s, "perf exposes no memory-controller PMU here (uncore_imc_*)")
    if not (cpu.vendor == "intel" and cpu.family == 6 and cpu.model in (0x3F, 0x4F, 0x55)):
        return _unavailable(d, s, f"corecast's read-queue occupancy encoding is for Xeon E5 v3 to Cascade Lake, "
                                  f"not {cpu.describe()}")
    inst = Instance(d, s, L.DERIVED, "derived: uncore_imc RPQ occupancy / DRAM clockticks (Little's law)")
    for pmu, c in imcs:
        occ = env.event(f"{pmu}/event=0x80,name={pmu}.rpq_occupancy/")
        clk = env.event(f"{pmu}/event=0x0,name={pmu}.clockticks/")
        if isinstance(occ, str) or isinstance(clk, str):
            return _unavailable(d, s, occ if isinstance(occ, str) else str(clk))
        inst.num.append(Input(("perf", occ.name, c)))
        inst.den.append(Input(("perf", clk.name, c)))
    return inst


# ============================================================================================
# recipes: the memory-latency probe (values the daemon sets from its thread)

def probe(value: str, scale: float, measured: str = "") -> Recipe:
    """The probe's value `value` (GAUGE: scale x raw). Derived (over the idle latency) unless
    `measured` says what of the chase it measures."""
    def recipe(d: MeterDef, scopes: Sequence[Scope], ctx: Context) -> list[Instance]:
        env = ctx.env
        if env.probe_reason:
            return [_unavailable(d, s, env.probe_reason) for s in scopes]
        quality, source = L.DERIVED, env.probe_source
        if measured:
            quality = L.MEASURED
            source = "measured: " + source.split(": ", 1)[-1].split(" over ")[0].rstrip(",") + measured
        return [Instance(d, s, quality, source, num=[Input(("external", value))], scale=scale) for s in scopes]
    return recipe


# ============================================================================================
# recipes: a watched process (--pid)

@per_scope
def process_threads(d: MeterDef, s: Scope, ctx: Context) -> Instance:
    return Instance(d, s, L.MEASURED, f"measured: threads listed in /proc/{ctx.tree.pid}/task",
                    num=[Input(("external", "threads"))])


def schedstat(field_: int) -> Recipe:
    """Field `field_` of the threads' schedstat (0: run time, 1: run-queue wait): summed over the
    threads followed at a process scope, one thread's at a thread scope."""
    what = "run time" if field_ == 0 else "run-queue wait"

    def make(d: MeterDef, s: Scope, ctx: Context) -> Instance:
        tree, env = ctx.tree, ctx.env
        slots = tree.of_kind("thread")
        why = sources.schedstat_unavailable(env.proc)
        if why:
            return _unavailable(d, s, why)
        if s.kind == "process":
            return Instance(d, s, L.MEASURED, f"measured: schedstat {what} (ns) of the threads followed (at most "
                                              f"{len(slots)}; a thread ending loses its last tick)",
                            num=[Input(("thread", t.slot), "", _bits(field_) | OPTIONAL) for t in slots],
                            scale=1e-9, total_scale=1e-9)
        return Instance(d, s, L.MEASURED, f"measured: /proc/{tree.pid}/task/TID/schedstat {what} (ns)",
                        num=[Input(("thread", s.slot), "", _bits(field_))], scale=1e-9, total_scale=1e-9)
    return per_scope(make)


# ============================================================================================
# the meters: each one's definition with its recipe, in the order they are shown

METERS: dict[str, MeterDef] = {}


def register(d: MeterDef) -> MeterDef:
    """Add a meter to the catalogue (its name must be new); returns it."""
    if d.name in METERS:
        raise ValueError(f"meter '{d.name}' registered twice")
    if d.group not in GROUPS:
        raise ValueError(f"meter '{d.name}': unknown group '{d.group}' (one of {', '.join(GROUPS)})")
    if not callable(getattr(d, "recipe", None)):
        raise ValueError(f"meter '{d.name}' has no recipe")
    METERS[d.name] = d
    return d


DEFS: tuple[MeterDef, ...] = tuple(register(d) for d in (
    MeterDef("cpu_busy", "ratio", L.RATIO, PU_LEVELS, "fraction of CPU time busy (user, nice, system, irq, softirq)",
             "corecast_cpu_busy_ratio", "s", "corecast_cpu_busy_seconds_total",
             recipe=cpu_time(_bits(0, 1, 2, 5, 6), "user+nice+system+irq+softirq")),
    MeterDef("cpu_steal", "ratio", L.RATIO, PU_LEVELS, "fraction of CPU time stolen by the hypervisor",
             "corecast_cpu_steal_ratio", "s", "corecast_cpu_steal_seconds_total", recipe=cpu_time(_bits(7), "steal")),
    MeterDef("runq_delay", "s/s", L.RATE, PU_LEVELS, "time tasks waited on a run queue per second (the mean "
             "number of tasks waiting)", "corecast_runq_delay_ratio", "s", "corecast_runq_delay_seconds_total",
             recipe=runq_delay),
    MeterDef("runnable", "tasks", L.GAUGE, ("node",), "tasks running or waiting to run (/proc/stat procs_running, "
             "the daemon's sampling thread left out)", "corecast_runnable_tasks", recipe=runnable),
    *(MeterDef(f"psi_{res}_{kind}", "s/s", L.RATE, ("node",),
               f"PSI: fraction of time {'some task' if kind == 'some' else 'all non-idle tasks'} stalled on {res}",
               f"corecast_psi_{res}_{kind}_ratio", "s", f"corecast_psi_{res}_{kind}_seconds_total",
               recipe=psi(res, kind))
      for res in ("cpu", "memory", "io") for kind in ("some", "full")),
    MeterDef("context_switches", "1/s", L.RATE, PU_LEVELS, "context switches per second",
             "corecast_context_switches_per_second", "count", "corecast_context_switches_total",
             recipe=software_event("context_switches", node=("stat", "ctxt", "/proc/stat"))),
    MeterDef("migrations", "1/s", L.RATE, PU_LEVELS, "task migrations between CPUs per second",
             "corecast_migrations_per_second", "count", "corecast_migrations_total",
             recipe=software_event("cpu_migrations")),
    MeterDef("page_faults", "1/s", L.RATE, PU_LEVELS, "page faults per second",
             "corecast_page_faults_per_second", "count", "corecast_page_faults_total",
             recipe=software_event("page_faults", node=("vmstat", "pgfault", "/proc/vmstat"))),
    MeterDef("cpi", "cycles/instruction", L.RATIO, PU_LEVELS, "cycles per instruction retired",
             "corecast_cycles_per_instruction", group="hardware", recipe=per_cpu_ratio(_cpi_events)),
    MeterDef("l2_miss_ratio", "ratio", L.RATIO, PU_LEVELS, "L2 misses over L2 references (demand)",
             "corecast_l2_miss_ratio", group="hardware", recipe=per_cpu_ratio(_l2_events)),
    MeterDef("llc_miss_ratio", "ratio", L.RATIO, PU_LEVELS, "last-level cache misses over references",
             "corecast_llc_miss_ratio", group="hardware", recipe=per_cpu_ratio(_llc_events)),
    MeterDef("llc_miss_cycle_ratio", "ratio", L.RATIO, PU_LEVELS, "fraction of cycles stalled on an LLC miss",
             "corecast_llc_miss_stall_ratio", group="hardware", recipe=per_cpu_ratio(_llc_stall_events)),
    MeterDef("mem_bandwidth", "bytes/s", L.RATE, ("socket", "node"), "DRAM traffic (reads and writes)",
             "corecast_memory_bandwidth_bytes_per_second", "bytes", "corecast_memory_transferred_bytes_total",
             group="hardware", recipe=mem_bandwidth),
    MeterDef("mem_concurrency", "requests", L.RATIO, ("socket", "node"), "mean outstanding DRAM reads per "
             "memory channel (read-queue occupancy per DRAM clock)", "corecast_memory_outstanding_reads",
             group="hardware", recipe=mem_concurrency),
    MeterDef("mem_latency", "ratio", L.GAUGE, ("node",), "memory-latency probe: a pinned pointer chase's "
             "latency over the idle latency (1: an idle memory system)", "corecast_memory_probe_latency_ratio",
             group="probe", recipe=probe("probe_ratio", 1e-6)),
    MeterDef("mem_probe_latency", "s", L.GAUGE, ("node",), "memory-latency probe: the pinned pointer chase's "
             "latency per dereference", "corecast_memory_probe_latency_seconds", group="probe",
             recipe=probe("probe_latency", 1e-12, measured=", its latency per dereference")),
    MeterDef("mem_probe_cost", "ratio", L.GAUGE, ("node",), "memory-latency probe: the fraction of one CPU its "
             "bursts took", "corecast_memory_probe_cost_ratio", group="probe",
             recipe=probe("probe_cost", 1e-6, measured=", the daemon's CPU time during its bursts over the time "
                                                       "elapsed")),
    MeterDef("process_cpu", "s/s", L.RATE, ("process",), "CPU time of the watched process per second (cores "
             "used)", "corecast_process_cpu_ratio", "s", "corecast_process_cpu_seconds_total", group="process",
             recipe=schedstat(0)),
    MeterDef("process_runq_delay", "s/s", L.RATE, ("process",), "run-queue delay of the watched process's "
             "threads per second", "corecast_process_runq_delay_ratio", "s",
             "corecast_process_runq_delay_seconds_total", group="process", recipe=schedstat(1)),
    MeterDef("process_threads", "threads", L.GAUGE, ("process",), "threads of the watched process followed",
             "corecast_process_threads", group="process", recipe=process_threads),
    MeterDef("thread_cpu", "s/s", L.RATE, ("thread",), "CPU time of one thread per second",
             "corecast_thread_cpu_ratio", "s", "corecast_thread_cpu_seconds_total", group="process",
             recipe=schedstat(0)),
    MeterDef("thread_runq_delay", "s/s", L.RATE, ("thread",), "run-queue delay of one thread per second",
             "corecast_thread_runq_delay_ratio", "s", "corecast_thread_runq_delay_seconds_total", group="process",
             recipe=schedstat(1)),
))
#: every meter registered, by name (the built-in ones and any registered later)
BY_NAME = METERS


def parse_meters(text: str | None, pid: int | None = None) -> list[MeterDef]:
    """`--meters LIST|all` (names, or the groups software, hardware, probe, process)."""
    defs = list(METERS.values())
    if text is not None and not text.strip():    # `--meters ''` kept every meter without a word
        raise UserError("--meters: empty (give names, groups or all)")
    if text is None or text.strip() == "all":
        return [d for d in defs if d.group != "process" or pid is not None]
    out: list[MeterDef] = []
    for item in (t.strip() for t in text.split(",")):
        if not item:
            raise UserError(f"--meters '{text}': an empty name")
        picked = [d for d in defs if d.group == item] or ([METERS[item]] if item in METERS else [])
        if not picked:
            raise UserError(f"--meters: unknown meter '{item}' (known: {', '.join(METERS)}; groups: software, "
                            "hardware, probe, process; or all)")
        for d in picked:
            if d.group == "process" and pid is None:
                raise UserError(f"--meters: '{d.name}' needs --pid PID (a process to watch)")
            if d not in out:
                out.append(d)
    return out


# ============================================================================================
# the plan

def percpu_software(env: Env) -> str | None:
    """None when perf software events can be counted per CPU here, else why not."""
    spec = env.event("context_switches")
    return spec if isinstance(spec, str) else None


def plan(tree: Tree, wanted: Sequence[MeterDef], env: Env) -> list[Instance]:
    """Every wanted meter at every scope of the tree it exists at, by its recipe."""
    ctx = Context(env, tree)
    out: list[Instance] = []
    for d in wanted:
        out += d.recipe(d, [s for s in tree.scopes if s.kind in d.levels], ctx)
    return out
