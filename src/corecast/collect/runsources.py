"""The registry of a `measure` run's sources (`SOURCES`, in the order their columns appear in
a campaign), and the small ones: wall time and rusage, PSI, the throughput regex, plugins, the
sampled run-queue delay. The sync shim's source is `corecast.collect.shim.ShimSource`, the perf
counters' `corecast.collect.counters.CounterSource`. The protocol is `corecast.collect.source`.

Adding a source is one class and one registry line (docs/extending.md). ColumnInfo is imported
where a column is made, for start-up time (see corecast.collect.source).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from ..store import OK
from . import plugins as plug
from . import sources
from .counters import CounterSource
from .shim import CATEGORY_HELP, ShimSource
from .source import Collected, Host, Option, Run, Source

SAMPLE_S = 0.1
BUNDLED_WORKLOADS = ("corecast-lockbench", "corecast-membw", "corecast-barrier")
DEFAULT_THROUGHPUT = r"^throughput:\s*([0-9.eE+-]+)"

COLUMN_DEFS: dict[str, tuple[str, str | None, str, str]] = {
    # name: (kind, unit, source, description)
    "time_s": ("time", "s", "measured: wall clock from exec to exit of the run's first process",
               "elapsed time of the run"),
    "user_s": ("cpu", "s", "measured: wait4 rusage of the run's processes", "user CPU time"),
    "sys_s": ("cpu", "s", "measured: wait4 rusage of the run's processes", "system CPU time"),
    "rss_bytes": ("memory", "bytes", "measured: wait4 rusage ru_maxrss (largest process of the run)",
                  "peak resident set size"),
    "voluntary_ctxsw": ("counter", "count", "measured: wait4 rusage", "voluntary context switches"),
    "involuntary_ctxsw": ("counter", "count", "measured: wait4 rusage", "involuntary context switches"),
    "minor_faults": ("counter", "count", "measured: wait4 rusage", "minor page faults"),
    "major_faults": ("counter", "count", "measured: wait4 rusage", "major page faults"),
    "psi_cpu_some_s": ("counter", "s", "measured: /proc/pressure/cpu (system-wide)",
                       "time some task on the machine waited for a CPU during the run"),
    "psi_memory_some_s": ("counter", "s", "measured: /proc/pressure/memory (system-wide)",
                          "time some task waited for memory during the run"),
    "psi_memory_full_s": ("counter", "s", "measured: /proc/pressure/memory (system-wide)",
                          "time all non-idle tasks waited for memory during the run"),
    "psi_io_some_s": ("counter", "s", "measured: /proc/pressure/io (system-wide)",
                      "time some task waited for I/O during the run"),
}


def _col(name: str, status: str = "ok") -> Any:
    from ..dataset import ColumnInfo     # for start-up time (corecast.collect.source says why)
    kind, unit, source, desc = COLUMN_DEFS[name]
    return ColumnInfo(name=name, kind=kind, unit=unit, source=source, status=status, description=desc)


# ============================================================================ wall time, rusage
class Rusage(Source):
    """Wall time from exec to exit, and wait4's rusage, as corecast-launch reports them."""

    name = "rusage"

    def collect(self, run: Run) -> Collected:
        words = run.report.get("rusage", "").split()
        ru = {k: int(v) for k, v in zip(words[0::2], words[1::2])}
        vals: dict[str, float | None] = {
            "time_s": float(run.report.get("wall_ns", "nan")) / 1e9,
            "user_s": ru.get("utime_us", 0) / 1e6,
            "sys_s": ru.get("stime_us", 0) / 1e6,
            "rss_bytes": float(ru.get("maxrss_kb", 0)) * 1024.0,
            "voluntary_ctxsw": float(ru.get("nvcsw", 0)),
            "involuntary_ctxsw": float(ru.get("nivcsw", 0)),
            "minor_faults": float(ru.get("minflt", 0)),
            "major_faults": float(ru.get("majflt", 0))}
        return Collected(vals, [_col(n) for n in vals])


# ============================================================================ PSI
PSI_COLUMNS = {"psi_cpu_some_s": ("cpu", "some"), "psi_memory_some_s": ("memory", "some"),
               "psi_memory_full_s": ("memory", "full"), "psi_io_some_s": ("io", "some")}


def psi_totals() -> tuple[dict[str, float | None], str | None]:
    """PSI stall-time totals (seconds) for the columns in PSI_COLUMNS (None where unavailable),
    and why PSI is unavailable, if it is (corecast.collect.sources reads them)."""
    got = sources.psi()
    if not got:
        return {c: None for c in PSI_COLUMNS}, getattr(got, "reason", "PSI unavailable")
    out: dict[str, float | None] = {}
    for col, (res, kind) in PSI_COLUMNS.items():
        p = got.get(res)
        us = None if p is None else (p.some_us if kind == "some" else p.full_us)
        out[col] = None if us is None else us / 1e6
    return out, None


class Psi(Source):
    """System-wide PSI stall times, the difference over the run."""

    name = "psi"

    def __init__(self, host: Host):
        self.host = host
        self.before: dict[str, float | None] = {}
        self.after: dict[str, float | None] = {}
        self.why: str | None = None

    @classmethod
    def create(cls, cfg: Any, host: Host) -> "Psi":
        return cls(host)

    def prepare(self, run: Run) -> None:
        self.before, _ = psi_totals()

    def stop(self, run: Run) -> None:
        if run.ran:
            self.after, self.why = psi_totals()

    def collect(self, run: Run) -> Collected:
        got = Collected()
        for n in PSI_COLUMNS:
            a, b = self.before.get(n), self.after.get(n)
            if a is None or b is None:
                got.values[n] = None
                got.columns.append(_col(n, status="unavailable"))
                self.host.notice_once("psi", f"no PSI stall times: {self.why or 'not reported for ' + n}")
            else:
                got.values[n] = max(b - a, 0.0)
                got.columns.append(_col(n))
        return got


# ============================================================================ throughput
class Throughput(Source):
    """The throughput the program prints, parsed with a regex (the bundled workloads' by
    default)."""

    name = "throughput"
    options = (Option("throughput", "--throughput", None, (str, type(None)), metavar="REGEX",
                      help="regex with one group capturing the throughput in the program's stdout (or stderr)"),)

    def __init__(self, regex: str, host: Host):
        self.label = regex
        self.rx = plug.compile_number_regex(regex, "--throughput")
        self.host = host

    @classmethod
    def validate(cls, cfg: Any) -> None:
        if cfg.option("throughput") is not None:
            plug.compile_number_regex(cfg.option("throughput"), "--throughput")

    @classmethod
    def create(cls, cfg: Any, host: Host) -> "Throughput | None":
        rx = cfg.option("throughput")
        if rx is None and Path(cfg.command[0]).name in BUNDLED_WORKLOADS:
            rx = DEFAULT_THROUGHPUT
        return cls(rx, host) if rx else None

    def collect(self, run: Run) -> Collected:
        from ..dataset import ColumnInfo     # for start-up time (corecast.collect.source says why)
        v, _, _ = plug.extract(self.rx, run.stdout, "last")
        where = "stdout"
        if v is None:
            v2, _, _ = plug.extract(self.rx, run.stderr, "last")
            if v2 is not None:
                v, where = v2, "stderr"
        got = Collected({"throughput": v}, [ColumnInfo(
            name="throughput", kind="throughput", unit=None,
            source=f"parsed from the program's {where} with /{self.label}/", status="ok",
            description="throughput the program reported (last match)")])
        if v is None and run.record.status == OK:
            got.notes.append(f"throughput: /{self.label}/ matched nothing in stdout or stderr")
            self.host.notice(f"run {run.record.slot}: the throughput regex matched nothing in the program's output")
        return got


# ============================================================================ plugins
class Plugins(Source):
    """User-defined stall categories (`corecast.collect.plugins`)."""

    name = "plugins"
    options = (Option("plugins", "--plugin", list, list, items=str, action="append", metavar="FILE",
                      help="TOML file of application-reported stall categories (repeatable)",
                      convert=lambda paths: [str(Path(p).resolve()) for p in paths]),)

    def __init__(self, cats: list[plug.Category], cwd: str):
        self.cats, self.cwd = cats, cwd
        self._before: dict[str, tuple[int, ...] | None] = {}

    def prepare(self, run: Run) -> None:
        # the files as they are before the run: one the run leaves as it was is not its own
        self._before = plug.states_before(self.cats, self.cwd, run.sub)

    @classmethod
    def validate(cls, cfg: Any) -> None:
        plug.load_plugins(cfg.option("plugins"))

    @classmethod
    def create(cls, cfg: Any, host: Host) -> "Plugins | None":
        cats = plug.load_plugins(cfg.option("plugins"))
        return cls(cats, cfg.cwd) if cats else None

    def collect(self, run: Run) -> Collected:
        from ..dataset import ColumnInfo     # for start-up time (corecast.collect.source says why)
        pv, notes = plug.apply(self.cats, run.stdout, run.stderr, self.cwd, run.sub, self._before)
        cols = [ColumnInfo(name=c.name, kind=c.kind, unit=c.unit,
                           source=f"plugin {Path(c.origin).name}: {c.source} /{c.regex.pattern}/ ({c.aggregate})",
                           status="ok", description=c.description) for c in self.cats]
        return Collected(dict(pv), cols, notes=list(notes))


# ============================================================================ sampled run-queue delay
def read_task_schedstats(pid: int) -> dict[int, tuple[int, int]]:
    """{tid: (run ns, run-queue delay ns)} of every live thread of `pid`."""
    return {tid: (s.run_ns, s.wait_ns) for tid, s in sources.process_schedstat(pid).items()}


class SampledRunqueue(Source):
    """Run-queue delay sampled from /proc/PID/task/*/schedstat while the program runs: the
    source of `runqueue_delay_cycles` when the shim (which reads it as each thread exits) is
    not preloaded."""

    name = "schedstat"
    interval = SAMPLE_S

    def __init__(self, host: Host):
        self.host = host
        self.samples: dict[int, tuple[int, int]] = {}

    @classmethod
    def create(cls, cfg: Any, host: Host) -> "SampledRunqueue | None":
        return None if cfg.option("shim") else cls(host)

    def start(self, run: Run) -> None:
        self.samples = {}

    def sample(self, run: Run) -> None:
        if run.pid is not None:
            self.samples.update(read_task_schedstats(run.pid))

    def collect(self, run: Run) -> Collected:
        from ..dataset import ColumnInfo     # for start-up time (corecast.collect.source says why)
        delay = sum(d for _, d in self.samples.values())
        hz = self.host.nominal_hz or 1e9
        return Collected({"runqueue_delay_cycles": float(delay) * hz / 1e9 if self.samples else None}, [ColumnInfo(
            name="runqueue_delay_cycles", kind="stall", unit="cycles",
            source=f"sampled: /proc/PID/task/*/schedstat every {SAMPLE_S:g} s (threads that exit between "
                   "samples lose their last interval)",
            status="ok", description=CATEGORY_HELP["runqueue_delay_cycles"])])


# ============================================================================ the registry
#: Every source of a run, in the order their columns appear in a campaign.
SOURCES: list[type[Source]] = [Rusage, Psi, Throughput, Plugins, ShimSource, SampledRunqueue, CounterSource]


def register(cls: type[Source]) -> type[Source]:
    """Add a source to the registry (after the others); usable as a class decorator."""
    if cls not in SOURCES:
        SOURCES.append(cls)
    return cls


def unregister(cls: type[Source]) -> None:
    if cls in SOURCES:
        SOURCES.remove(cls)


def options() -> list[Option]:
    """The command-line options and campaign settings of every registered source."""
    return [o for cls in SOURCES for o in cls.options]


def validate(cfg: Any) -> None:
    for cls in SOURCES:
        cls.validate(cfg)


def create(cfg: Any, host: Host) -> list[Source]:
    """The sources that take part in a campaign, in registry order."""
    return [s for cls in SOURCES if (s := cls.create(cfg, host)) is not None]
