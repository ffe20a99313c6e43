"""The counters a campaign opens on every run, through corecast's perf layer: software events
always, scheduler and futex tracepoints when tracefs has them, the CPU family's backend-stall
events when the PMU allows, and the user's --events; each becomes a column of the campaign.
A `PerfCounterPlan` opens them on each run (a `PerfSession`); `CounterSource` is the plan as
one of a run's sources (`corecast.collect.source`).

The perf layer (corecast.collect.perf) is imported when counters are planned, so that a
machine where it cannot load still measures, without counters (`counter_plan`); the event
catalogues and ColumnInfo (numpy, through corecast.dataset) where they are used, for start-up
time: `measure -h` declares this source's option without them.
"""
from __future__ import annotations

from typing import Any, Callable

from ..errors import UserError
from .source import Collected, Host, Option, Run, Source


SOFTWARE_EVENTS = "task_clock,context_switches,cpu_migrations,page_faults"
TRACEPOINTS = ("sched:sched_switch", "sched:sched_wakeup", "sched:sched_migrate_task", "syscalls:sys_enter_futex")
SOFTWARE_COLUMNS = {"task_clock": ("task_clock_ns", "cpu", "ns"), "context_switches": ("context_switches", "counter", "count"),
                    "cpu_migrations": ("cpu_migrations", "counter", "count"), "page_faults": ("page_faults", "counter", "count")}


class PerfCounterPlan:
    """Counters opened on every run through corecast's perf layer (corecast.collect.perf):
    software events always, scheduler and futex tracepoints when tracefs has them, the CPU
    family's backend-stall events when the PMU allows, and the user's --events."""

    def __init__(self, extra: str | None, notice: Callable[[str, str], None]):
        self.notice = notice
        self.specs: list[Any] = []
        self.columns: dict[str, tuple[str, str, str | None, str]] = {}   # event -> (column, kind, unit, origin)
        from .events import backend_stall_events, resolve    # for start-up time (see above)
        for sp in resolve(SOFTWARE_EVENTS):
            col, kind, unit = SOFTWARE_COLUMNS[sp.name]
            self._add(sp, col, kind, unit, "perf software event")
        self.tracepoints_missing: list[str] = []
        for tp in TRACEPOINTS:
            try:
                (sp,) = resolve(tp)
            except UserError as err:
                self.tracepoints_missing.append(f"{tp} ({err})")
                continue
            self._add(sp, "tp_" + tp.split(":", 1)[1], "counter", "count", "perf tracepoint")
        stalls = backend_stall_events()
        self.stall_reason = getattr(stalls, "reason", None) if not list(stalls) else None
        for sp in stalls:
            self._add(sp, sp.name, "stall", "cycles", "perf backend-stall event")
        if extra:
            for sp in resolve(extra):
                self._add(sp, sp.ident, "counter", sp.unit, f"perf event ({sp.origin})")
        self._said: set[str] = set()

    def _add(self, sp: Any, col: str, kind: str, unit: str | None, origin: str) -> None:
        if sp.name in self.columns or any(c[0] == col for c in self.columns.values()):
            return
        self.specs.append(sp)
        self.columns[sp.name] = (col, kind, unit, origin)

    def announce(self) -> None:
        if self.tracepoints_missing:
            self.notice("tracepoints", "tracepoints not available, not counted: " + "; ".join(self.tracepoints_missing))
        if self.stall_reason:
            self.notice("stall-catalog", f"no backend-stall catalog for this CPU ({self.stall_reason}); "
                        "software stall sources only")

    def open(self, pid: int) -> "PerfSession":
        from . import perf
        cs = perf.open_counters(self.specs, pid=pid, inherit=True, enable_on_exec=True)
        return PerfSession(self, cs)


class PerfSession:
    def __init__(self, plan: PerfCounterPlan, cs: Any):
        self.plan = plan
        self.cs = cs

    def read(self) -> tuple[dict[str, float | None], list[Any], dict[str, Any]]:
        from ..dataset import ColumnInfo     # for start-up time (see above)
        vals: dict[str, float | None] = {}
        cols: list[ColumnInfo] = []
        det: dict[str, Any] = {}
        unsupported_stalls = []
        for v in self.cs.read():
            col, kind, unit, origin = self.plan.columns[v.name]
            sp = v.spec
            enc = f" [{sp.encoding}]" if sp is not None and getattr(sp, "encoding", None) else ""
            vals[col] = v.value
            status = v.status if v.status != "ok" or v.value is not None else "unavailable"
            desc = (sp.description if sp is not None else None) or None
            if v.status != "ok" and v.message:
                desc = f"{desc + '; ' if desc else ''}{v.status}: {v.message}"
            # an event that gave no value was asked for, not measured (info's JSON said "measured"
            # of an event this machine does not support)
            said = "measured" if status == "ok" else "asked for"
            cols.append(ColumnInfo(name=col, kind=kind, unit=unit, source=f"{said}: {origin} {v.name}{enc}, "
                                   "inherited by every thread and child, counting from exec",
                                   status=status, description=desc))
            det[col] = {"event": v.name, "status": v.status, "message": v.message, "raw": v.raw,
                        "enabled_ns": v.enabled_ns, "running_ns": v.running_ns, "scaled": v.scaled}
            if kind == "stall" and v.status != "ok":
                unsupported_stalls.append((v.status, v.message))
            elif v.status != "ok":
                self.plan.notice(f"event-{v.name}", f"perf event {v.name}: {v.status}: {v.message}; not counted")
        if unsupported_stalls:
            st, msg = unsupported_stalls[0]
            self.plan.notice("pmu", f"backend-stall events {st} ({msg}): {len(unsupported_stalls)} event(s) "
                             "recorded as unavailable; carrying on with software stall sources")
        return vals, cols, det

    def close(self) -> None:
        self.cs.close()


def counter_plan(events: str | None, notice: Callable[[str, str], None]) -> PerfCounterPlan | None:
    """The counters of every run (`events`: the user's --events), or None where the perf layer
    cannot load (an error if --events asked for some)."""
    try:
        from . import perf  # noqa: F401
    except ImportError as err:
        if events:
            raise UserError(f"--events: perf counters are not available here ({err})") from None
        return None
    return PerfCounterPlan(events, notice)


class CounterSource(Source):
    """The perf counters of every run: opened on the program before it executes (inherited by
    every thread and child, enabled at exec), read after it ended."""

    name = "counters"
    options = (Option("events", "--events", None, (str, type(None)), metavar="SPEC",
                      help="extra perf events to count (software events, tracepoints and backend stalls "
                           "are added when available)"),)

    def __init__(self, plan: Any):
        self.plan = plan
        self.session: Any = None

    @classmethod
    def create(cls, cfg: Any, host: Host) -> "CounterSource | None":
        plan = counter_plan(cfg.option("events"), host.notice_once)
        if plan is None:
            return None
        plan.announce()
        return cls(plan)

    def start(self, run: Run) -> None:
        self._close()
        self.session = self.plan.open(run.pid)

    def stop(self, run: Run) -> None:
        if not run.ran:            # read in collect, after the run's status (its notices follow it)
            self._close()

    def collect(self, run: Run) -> Collected | None:
        if self.session is None:
            return None
        try:
            values, columns, details = self.session.read()
        finally:
            self._close()
        return Collected(dict(values), list(columns), {"counters": details} if details else {})

    def _close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            session.close()
