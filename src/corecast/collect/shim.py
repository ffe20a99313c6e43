"""The sync shim: the environment that preloads it, and the reader of its reports.

The shim (`native/shim/shim.c`, built as `libcorecast_shim.so`) is preloaded into the measured
program with `LD_PRELOAD`. It times only the contended path of pthread mutexes, spin locks,
rwlocks and semaphores (the non-blocking try is made first; the clock is read only when it
fails), always times condition and barrier waits, counts failed trylocks and their spinning,
and records each thread's schedstat when the thread exits. Each process writes one report
(`$CORECAST_SHIM_REPORT` with `%p` replaced by its pid) when it ends.

`stall_categories()` turns the reports of one run into the stall categories the stall-based
predictor extrapolates, in cycles summed over all threads of all processes of the run:

    lock_wait_cycles      mutex_lock, mutex_timedlock, spin_lock, rwlock_* (blocking)
    barrier_wait_cycles   barrier_wait
    cond_wait_cycles      cond_wait, cond_timedwait, sem_wait, sem_timedwait (waiting to be
                          signalled: a semaphore wait is a wait for an event)
    trylock_spin_cycles   mutex_trylock, spin_trylock, rwlock_try*, sem_trywait: from the first
                          failed attempt on an object to acquiring it (or to the last failure)
    runqueue_delay_cycles schedstat run-queue delay of every thread (also exited ones)

and beside the first three, the part of each wait during which cores stood idle (`idle_parts`):

    lock_wait_idle_cycles, barrier_wait_idle_cycles, cond_wait_idle_cycles

The shim integrates, on its slow path only, each waiter's share of the CPUs no thread of the
process was running on (see native/shim/shim.c): a coordinator waiting for busy workers, or an
idle pool while the other threads work, waits with no core idle (its wait overlaps the others'
running and costs no time); a thread waiting for a lock while the other cores have nothing to
do waits on the critical path. The model (`corecast.model.losttime`) charges a category to time
by its idle part, up to the core-time the run lost. A trylock spin keeps its core busy without
work, so all of it is idle; it has no separate column (its idle part is the whole).

"Cycles" are the shim clock's ticks: on x86-64 the TSC, i.e. reference cycles at the nominal
frequency. On other clocks ticks are converted to cycles at the nominal frequency when known.

`ShimSource` is the shim as one of a `measure` run's sources (`corecast.collect.source`): it
preloads the shim into the program (through corecast-launch, never into the supervisor) and
turns the run's reports into its stall categories and counts (ColumnInfo is imported where
its columns are made, for start-up time: see corecast.collect.source).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..errors import UserError
from ..native import native_path
from ..store import OK
from . import locks
from .plugins import read_output_file
from .source import Collected, Host, Option, Run, Source

if TYPE_CHECKING:
    from ..dataset import ColumnInfo

#: the suffix of a category's idle part (dataset.IDLE_PART_SUFFIX, kept here so that `measure -h`
#: imports no dataset and no numpy; tests/test_shim_idle.py checks they agree)
IDLE_PART_SUFFIX = "_idle_cycles"

ENV_REPORT = "CORECAST_SHIM_REPORT"
#: The most of one report read back: the lock table of a busy program (locks.MAX_LOCK_LINES
#: lines of about a hundred bytes are read) with room to spare.
MAX_REPORT_BYTES = 256 << 20
LIBRARY = "libcorecast_shim.so"

LOCK_PRIMS = ("mutex_lock", "mutex_timedlock", "spin_lock", "rwlock_rdlock", "rwlock_wrlock",
              "rwlock_timedrdlock", "rwlock_timedwrlock")
BARRIER_PRIMS = ("barrier_wait",)
COND_PRIMS = ("cond_wait", "cond_timedwait", "sem_wait", "sem_timedwait")
TRY_PRIMS = ("mutex_trylock", "spin_trylock", "rwlock_tryrdlock", "rwlock_trywrlock", "sem_trywait")

CATEGORIES = {
    "lock_wait_cycles": LOCK_PRIMS,
    "barrier_wait_cycles": BARRIER_PRIMS,
    "cond_wait_cycles": COND_PRIMS,
    "trylock_spin_cycles": TRY_PRIMS,
}
#: The idle part of a category: the column's name from the category's.
IDLE_CATEGORIES = ("lock_wait_cycles", "barrier_wait_cycles", "cond_wait_cycles")


def idle_column(category: str) -> str:
    """`lock_wait_cycles` -> `lock_wait_idle_cycles` (corecast.model.losttime reads the same name)."""
    return category[: -len("_cycles")] + IDLE_PART_SUFFIX


IDLE_SOURCE = ("measured: corecast sync shim (LD_PRELOAD), slow path only: each waiter's share of the CPUs no "
               "thread of its process was running on")
CATEGORY_HELP = {
    "lock_wait_cycles": "cycles threads waited for contended mutexes, spin locks and rwlocks",
    "barrier_wait_cycles": "cycles threads waited in pthread barriers",
    "cond_wait_cycles": "cycles threads waited on condition variables and semaphores",
    "trylock_spin_cycles": "cycles threads spun on failed trylocks before acquiring",
    "runqueue_delay_cycles": "cycles threads were runnable but waiting for a CPU (schedstat)",
}


def library_path() -> Path:
    return native_path(LIBRARY)


def shim_env(report_dir: str | Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment variables that preload the shim and send its reports to `report_dir`.

    An LD_PRELOAD already in `base` is kept (after the shim).
    """
    base = dict(os.environ if base is None else base)
    lib = str(library_path())
    pre = base.get("LD_PRELOAD", "").strip()
    env = {"LD_PRELOAD": f"{lib} {pre}".strip() if lib not in pre.split() else pre,
           ENV_REPORT: str(Path(report_dir) / "shim.%p")}
    return env


@dataclass
class PrimStat:
    calls: int = 0
    contended: int = 0
    wait: int = 0       # clock ticks
    max: int = 0
    idle: int = 0       # ticks of the waits during which cores stood idle (this waiter's share)
    idle_known: bool = True     # False: a report of an older shim, which did not count it

    def add(self, other: "PrimStat") -> None:
        self.calls += other.calls
        self.contended += other.contended
        self.wait += other.wait
        self.max = max(self.max, other.max)
        self.idle += other.idle
        self.idle_known = self.idle_known and other.idle_known


@dataclass
class ThreadInfo:
    tid: int
    exited: bool
    run_ns: int
    delay_ns: int
    slices: int
    stats: dict[str, PrimStat] = field(default_factory=dict)


@dataclass
class ProcessReport:
    pid: int
    ppid: int
    clock: str
    ticks: int
    ns: int
    end: str                 # "exit" or "signal N"
    threads: list[ThreadInfo]
    path: str = ""
    cpus: int | None = None  # CPUs in the process's affinity mask when the shim was loaded
    text: str = field(default="", repr=False)   # the whole report (its lock table: collect.locks)


@dataclass
class ShimSummary:
    """All reports of one run, added up."""

    processes: list[ProcessReport]
    prims: dict[str, PrimStat]
    threads: int
    run_ns: int
    delay_ns: int
    ticks_per_s: float | None        # the shim clock's rate, calibrated on the run itself
    clock: str | None
    incomplete: list[str] = field(default_factory=list)   # reports that could not be read

    @property
    def report_texts(self) -> list[str]:
        """The reports read whole (truncated ones left out), for `collect.locks.lock_rows`."""
        return [pr.text for pr in self.processes]

    def wait_ticks(self, prims: Iterable[str]) -> int:
        return sum(self.prims[p].wait for p in prims if p in self.prims)

    def idle_ticks(self, prims: Iterable[str]) -> int | None:
        """Ticks of these primitives' waits during which cores stood idle; None when a report
        did not count them (an older shim) while it had waits of them."""
        got = [self.prims[p] for p in prims if p in self.prims]
        if any(not st.idle_known and st.wait > 0 for st in got):
            return None
        return sum(st.idle for st in got)


def parse_report(text: str, path: str = "shim report") -> ProcessReport:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("corecast-shim "):
        raise ValueError(f"{path}: not a corecast shim report")
    if lines[-1].strip() != "done":
        raise ValueError(f"{path}: truncated (no 'done' line)")
    head: dict[str, str] = {}
    threads: dict[int, ThreadInfo] = {}
    for ln in lines[1:-1]:
        parts = ln.split()
        if not parts:
            continue
        if parts[0] == "thread":
            kv = dict(zip(parts[2::2], parts[3::2]))
            tid = int(parts[1])
            threads[tid] = ThreadInfo(tid=tid, exited=kv.get("exited") == "1", run_ns=int(kv.get("run_ns", 0)),
                                      delay_ns=int(kv.get("delay_ns", 0)), slices=int(kv.get("slices", 0)))
        elif parts[0] == "stat":
            tid, prim = int(parts[1]), parts[2]
            kv = dict(zip(parts[3::2], parts[4::2]))
            st = PrimStat(int(kv.get("calls", 0)), int(kv.get("contended", 0)), int(kv.get("wait", 0)),
                          int(kv.get("max", 0)), int(kv.get("idle", 0)), "idle" in kv)
            th = threads.setdefault(tid, ThreadInfo(tid, False, 0, 0, 0))
            th.stats[prim] = st
        else:
            head[parts[0]] = " ".join(parts[1:])
    try:
        return ProcessReport(pid=int(head["pid"]), ppid=int(head.get("ppid", 0)), clock=head.get("clock", "tsc"),
                             ticks=int(head.get("ticks", 0)), ns=int(head.get("ns", 0)),
                             end=head.get("end", "exit"), threads=list(threads.values()), path=path,
                             cpus=int(head["cpus"]) if "cpus" in head else None, text=text)
    except (KeyError, ValueError) as err:
        raise ValueError(f"{path}: malformed header ({err})") from None


def read_reports(report_dir: str | Path) -> ShimSummary:
    """Read and add up every report a run's processes left in `report_dir`."""
    procs: list[ProcessReport] = []
    bad: list[str] = []
    d = Path(report_dir)
    for p in sorted(d.glob("shim.*")):
        if p.name.endswith(".tmp"):
            bad.append(f"{p.name}: process ended while writing its report")
            continue
        try:
            # the program wrote them, and may have left anything at a report's name (a FIFO no
            # one writes to made `measure` wait for ever, a link to /dev/zero read without end)
            text = read_output_file(p, "sync shim report", MAX_REPORT_BYTES).decode(errors="replace")
            procs.append(parse_report(text, p.name))
        except UserError as err:
            bad.append(f"{p.name}: {err}")
        except ValueError as err:
            bad.append(str(err))
    prims: dict[str, PrimStat] = {}
    nthreads = run_ns = delay_ns = 0
    ticks = ns = 0
    clock = None
    for pr in procs:
        clock = clock or pr.clock
        ticks += pr.ticks
        ns += pr.ns
        for th in pr.threads:
            nthreads += 1
            run_ns += th.run_ns
            delay_ns += th.delay_ns
            for name, st in th.stats.items():
                prims.setdefault(name, PrimStat()).add(st)
    rate = ticks / ns * 1e9 if ns > 1_000_000 and ticks > 0 else None
    return ShimSummary(processes=procs, prims=prims, threads=nthreads, run_ns=run_ns, delay_ns=delay_ns,
                       ticks_per_s=rate, clock=clock, incomplete=bad)


def stall_categories(summary: ShimSummary, nominal_hz: float | None = None) -> dict[str, float]:
    """The shim's stall categories in cycles (see the module docstring)."""
    if summary.clock == "tsc" or summary.ticks_per_s is None:
        factor = 1.0                                   # TSC ticks are reference cycles
        cycles_per_ns = (summary.ticks_per_s or nominal_hz or 1e9) / 1e9
    else:
        factor = (nominal_hz / summary.ticks_per_s) if nominal_hz else 1.0
        cycles_per_ns = (nominal_hz or summary.ticks_per_s) / 1e9
    out = {name: float(summary.wait_ticks(prims)) * factor for name, prims in CATEGORIES.items()}
    out["runqueue_delay_cycles"] = float(summary.delay_ns) * cycles_per_ns
    return out


def idle_parts(summary: ShimSummary, nominal_hz: float | None = None) -> dict[str, float | None]:
    """The idle part of the categories that have one (`IDLE_CATEGORIES`), in the same cycles as
    `stall_categories`; None where the reports did not count it."""
    factor = 1.0 if summary.clock == "tsc" or summary.ticks_per_s is None or not nominal_hz else \
        nominal_hz / summary.ticks_per_s
    out: dict[str, float | None] = {}
    for name in IDLE_CATEGORIES:
        v = summary.idle_ticks(CATEGORIES[name])
        out[idle_column(name)] = None if v is None else float(v) * factor
    return out


def idle_column_infos() -> list[ColumnInfo]:
    """The idle columns' descriptions: kind `counter`, so that no predictor takes them for stall
    categories of their own (they are parts of one)."""
    from ..dataset import ColumnInfo     # for start-up time (corecast.collect.source says why)
    return [ColumnInfo(name=idle_column(c), kind="counter", unit="cycles", source=IDLE_SOURCE, status="ok",
                       description=f"the part of {c} during which cores stood idle (the rest overlapped other "
                                   "threads' running)")
            for c in IDLE_CATEGORIES]


def counters(summary: ShimSummary) -> dict[str, float]:
    """Counts the shim saw: calls and contended calls of lock-type primitives, failed trylocks."""
    lock_calls = sum(summary.prims[p].calls for p in LOCK_PRIMS if p in summary.prims)
    contended = sum(summary.prims[p].contended for p in LOCK_PRIMS if p in summary.prims)
    try_fail = sum(summary.prims[p].contended for p in TRY_PRIMS if p in summary.prims)
    return {"lock_acquisitions": float(lock_calls), "lock_contended": float(contended),
            "trylock_failures": float(try_fail), "threads_seen": float(summary.threads)}


def check_available() -> Path:
    """The shim library, or a UserError saying why it cannot be used."""
    try:
        return library_path()
    except UserError as err:
        raise UserError(f"{err} (or run without the shim: --no-shim)") from None


# ============================================================================ as a run's source
SHIM_SOURCE = "measured: corecast sync shim (LD_PRELOAD), contended path only"
_COUNTS = (("lock_acquisitions", "blocking lock calls"), ("lock_contended", "blocking lock calls that had to wait"),
           ("trylock_failures", "failed trylock calls"), ("threads_seen", "threads the shim saw"))


class ShimSource(Source):
    """The sync shim's stall categories, run-queue delay and counts (on unless --no-shim)."""

    name = "shim"
    options = (Option("shim", "--no-shim", True, bool, action="store_true", convert=lambda given: not given,
                      help="do not preload the sync shim (no lock/barrier/condition wait categories)"),)

    def __init__(self, host: Host):
        self.host = host

    @classmethod
    def validate(cls, cfg: Any) -> None:
        if cfg.option("shim"):
            check_available()

    @classmethod
    def create(cls, cfg: Any, host: Host) -> "ShimSource | None":
        if not cfg.option("shim"):
            return None
        check_available()
        return cls(host)

    def prepare(self, run: Run) -> None:
        env = shim_env(run.folder, run.env)
        # corecast-launch puts the preload into the program's environment at exec, so the
        # shim never runs inside the supervisor (its threads would be counted as the run's)
        run.env["CORECAST_LAUNCH_PRELOAD"] = env.pop("LD_PRELOAD")
        run.env.update(env)

    def collect(self, run: Run) -> Collected:
        from ..dataset import ColumnInfo     # for start-up time (corecast.collect.source says why)
        got = Collected()
        summary = read_reports(run.folder)
        if not summary.processes:
            got.notes.append("the sync shim wrote no report (static binary, setuid program, or killed by SIGKILL)")
            for name in list(CATEGORIES) + ["runqueue_delay_cycles"]:
                got.values[name] = None
            got.values.update({c.name: None for c in idle_column_infos()})
            if run.record.status == OK:
                self.host.notice_once("shim-none", f"the sync shim wrote no report for '{run.argv[0]}' (a static or "
                                      "setuid program cannot be preloaded): no lock/barrier/condition wait categories")
        else:
            got.values.update(stall_categories(summary, self.host.nominal_hz))
            got.values.update(idle_parts(summary, self.host.nominal_hz))
            got.values.update(counters(summary))
            got.provenance["shim"] = {
                "processes": len(summary.processes), "threads": summary.threads,
                "clock": summary.clock, "ticks_per_s": summary.ticks_per_s,
                "primitives": {k: asdict(v) for k, v in sorted(summary.prims.items())},
                "incomplete": summary.incomplete,
            }
            self._lock_table(run, got, summary)
        for name in CATEGORIES:
            got.columns.append(ColumnInfo(name=name, kind="stall", unit="cycles", source=SHIM_SOURCE,
                                          status="ok", description=CATEGORY_HELP[name]))
        got.columns.extend(idle_column_infos())
        got.columns.append(ColumnInfo(name="runqueue_delay_cycles", kind="stall", unit="cycles",
                                      source="measured: schedstat run-queue delay of every thread, read by the "
                                             "sync shim when each thread exits",
                                      status="ok", description=CATEGORY_HELP["runqueue_delay_cycles"]))
        for name, desc in _COUNTS:
            got.columns.append(ColumnInfo(name=name, kind="counter", unit="count", source=SHIM_SOURCE,
                                          status="ok", description=desc))
        return got

    def _lock_table(self, run: Run, got: Collected, summary: ShimSummary) -> None:
        """The run's per-lock rows (`corecast.collect.locks`) as its `locks` side table."""
        rate = summary.ticks_per_s
        if rate is None and summary.clock == "tsc":
            rate = self.host.nominal_hz
        table = locks.lock_rows(summary.report_texts, rate)
        if table is None:
            return
        got.tables["locks"] = table.rows
        got.provenance["locks"] = table.summary
        got.notes.extend(table.notes)
