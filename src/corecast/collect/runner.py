"""Scaling campaigns: run a program at several core counts, repeatedly, and record every run.

A campaign is a plan of *slots* -- (core count, repetition, warm-up or not) -- executed in an
interleaved order: warm-ups first, then repetition 0 over all core counts ascending,
repetition 1 descending, and so on, so slow drift of the machine (thermal, other tenants)
spreads over every core count instead of biasing one.

Each run:
- is started by `corecast-launch`, which pins itself to the run's CPUs (the first N of the
  campaign's core order) before executing the program, so every process and thread the
  program creates inherits the placement; it runs in its own process group with stdin from
  /dev/null and stdout/stderr to files;
- waits, before exec, until counters are opened on it (inherited by every thread, enabled at
  exec, as `perf stat` does);
- has `{cores}`, `{threads}` and `{rep}` replaced in its arguments and `--env` values;
- is killed with its whole process group (SIGTERM, then SIGKILL after a grace period) when it
  runs past the timeout; leftover processes of the group are killed when the program exits;
- records wall time, user/system CPU, peak RSS, context switches and page faults (wait4's
  rusage), throughput parsed from its output, plugin categories, the sync shim's stall
  categories and run-queue delay, PSI totals, and perf counters where the perf layer is there;
- is committed to the campaign file as soon as it finishes, whatever its outcome: a failing
  run is stored with its status, exit status and the tail of its stderr, and reported.

Setting a campaign up (its checks, its file) is `corecast.collect.campaign`; the counters it
opens on every run are `corecast.collect.counters`.

Size: about 640 lines, one subject: a run from its launch to its record. `Runner._execute` is
one sequence (launch, pin, open the counters, wait with a timeout, kill the group, collect
every source) that reads best in one piece.
"""
from __future__ import annotations

import os
import select
import shutil
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, Sequence

from ..dataset import ColumnInfo
from ..errors import UserError
from ..native import native_path
from ..store import OK, Campaign, RunRecord
from . import plugins as plug
from . import shim as shimmod
from . import sources
from .topology import format_cpulist

TAIL_LINES = 20
TAIL_CHARS = 4000
OUTPUT_SCAN_BYTES = 16 * 1024 * 1024
GRACE_S = 2.0
SAMPLE_S = 0.1
BUNDLED_WORKLOADS = ("corecast-lockbench", "corecast-membw", "corecast-barrier")
DEFAULT_THROUGHPUT = r"^throughput:\s*([0-9.eE+-]+)"
STATUSES = ("ok", "failed", "crashed", "timeout", "not run")


# ====================================================================== configuration
@dataclass
class CampaignConfig:
    command: list[str]
    cores: list[int]
    reps: int = 3
    warmup: int = 1
    timeout: float | None = None
    order: str = "socket"
    cpu_order: list[int] = field(default_factory=list)   # resolved order (PUs)
    env: dict[str, str] = field(default_factory=dict)
    throughput: str | None = None
    plugins: list[str] = field(default_factory=list)
    shim: bool = True
    events: str | None = None
    threads_per_core: int = 1
    cwd: str = "."
    grace_s: float = GRACE_S

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        slots = plan(self.cores, self.reps, self.warmup)
        d["planned_runs"] = len(slots)
        d["measured_runs"] = sum(1 for s in slots if not s.warmup)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CampaignConfig":
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class Slot:
    slot: int
    cores: int
    repetition: int
    warmup: bool


def plan(cores: Sequence[int], reps: int, warmup: int) -> list[Slot]:
    """Every run of a campaign in execution order (see the module docstring)."""
    if reps < 1:
        raise UserError("--reps must be at least 1")
    if warmup < 0:
        raise UserError("--warmup must be 0 or more")
    counts = sorted(set(int(c) for c in cores))
    out: list[Slot] = []
    for w in range(warmup):
        seq = counts if w % 2 == 0 else counts[::-1]
        out.extend(Slot(len(out), c, w, True) for c in seq)
    for r in range(reps):
        seq = counts if r % 2 == 0 else counts[::-1]
        out.extend(Slot(len(out), c, r, False) for c in seq)
    return out


def placeholders(cores: int, threads_per_core: int, rep: int) -> dict[str, str]:
    return {"cores": str(cores), "threads": str(cores * threads_per_core), "rep": str(rep)}


def find_program(name: str, env: Mapping[str, str], cwd: str) -> str | None:
    """Full path of the program, looking in PATH and then among corecast's bundled workloads."""
    if "/" in name:
        p = Path(name) if os.path.isabs(name) else Path(cwd) / name
        return str(p) if p.exists() else None
    found = shutil.which(name, path=env.get("PATH", os.defpath))
    if found:
        return found
    if name.startswith("corecast-"):
        try:
            p = native_path(name)
        except UserError:
            return None
        if os.access(p, os.X_OK):
            return str(p)
    return None


# ====================================================================== system sources
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


def read_task_schedstats(pid: int) -> dict[int, tuple[int, int]]:
    """{tid: (run ns, run-queue delay ns)} of every live thread of `pid`."""
    return {tid: (s.run_ns, s.wait_ns) for tid, s in sources.process_schedstat(pid).items()}


# ====================================================================== counters (perf layer)
class CounterSession(Protocol):
    def read(self) -> tuple[dict[str, float | None], list[ColumnInfo], dict[str, Any]]: ...
    def close(self) -> None: ...


class CounterPlan(Protocol):
    """Opens counters on a run's process before it executes the program."""

    def open(self, pid: int) -> CounterSession | None: ...


# ====================================================================== progress reporting
class Reporter:
    """What the runner tells the person watching. The default says nothing; the progress bar
    is `corecast.report.campaign.ProgressReporter`."""

    def start(self, total: int, done: int) -> None: ...
    def run_started(self, slot: Slot, index: int) -> None: ...
    def run_finished(self, record: RunRecord) -> None: ...
    def notice(self, text: str) -> None: ...
    def stop(self) -> None: ...


# ====================================================================== the runner
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
SHIM_SOURCE = "measured: corecast sync shim (LD_PRELOAD), contended path only"


def _col(name: str, status: str = "ok", **over: Any) -> ColumnInfo:
    kind, unit, source, desc = COLUMN_DEFS[name]
    info = ColumnInfo(name=name, kind=kind, unit=unit, source=source, status=status, description=desc)
    for k, v in over.items():
        setattr(info, k, v)
    return info


def _tail(text: str) -> str:
    lines = text.splitlines()[-TAIL_LINES:]
    return "\n".join(lines)[-TAIL_CHARS:]


def _read_output(path: Path) -> str:
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            if size > OUTPUT_SCAN_BYTES:
                fh.seek(size - OUTPUT_SCAN_BYTES)
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class Interrupted(Exception):
    """The campaign was stopped (Ctrl-C, SIGTERM); the run in progress was killed, not recorded."""


class Runner:
    def __init__(self, config: CampaignConfig, campaign: Campaign, *, reporter: Reporter | None = None,
                 counters: CounterPlan | None = None, nominal_hz: float | None = None):
        self.cfg = config
        self.camp = campaign
        self.rep = reporter or Reporter()
        self.counters = counters
        self.nominal_hz = nominal_hz
        self.plugins = plug.load_plugins(config.plugins)
        rx = config.throughput
        if rx is None and Path(config.command[0]).name in BUNDLED_WORKLOADS:
            rx = DEFAULT_THROUGHPUT
        self.throughput_rx = plug.compile_number_regex(rx, "--throughput") if rx else None
        self.throughput_label = rx
        self.launcher = str(native_path("corecast-launch"))
        if config.shim:
            shimmod.check_available()
        if not config.cpu_order:
            raise UserError("internal: campaign has no CPU order")
        self._announced: set[str] = set()
        self._known_columns = set(campaign.columns())
        self._current_pgid: int | None = None

    # ------------------------------------------------------------ the campaign
    def slots(self) -> list[Slot]:
        return plan(self.cfg.cores, self.cfg.reps, self.cfg.warmup)

    def run(self) -> list[RunRecord]:
        slots = self.slots()
        done = self.camp.done_slots()
        todo = [s for s in slots if s.slot not in done]
        self.rep.start(len(slots), len(slots) - len(todo))
        records: list[RunRecord] = []
        old_term = None
        try:
            try:
                old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
            except ValueError:       # not the main thread
                old_term = None
            for s in todo:
                self.rep.run_started(s, s.slot)
                rec = self.run_one(s)
                self.camp.record_run(rec, self._new_columns(rec))
                records.append(rec)
                self.rep.run_finished(rec)
        except KeyboardInterrupt:
            raise Interrupted() from None
        finally:
            if old_term is not None:
                signal.signal(signal.SIGTERM, old_term)
            self.rep.stop()
        return records

    def attach_notices(self, counters: Any, pending: list[tuple[str, str]]) -> None:
        """Route the counter plan's notices to this campaign (said once, stored in the file)."""
        if counters is not None and hasattr(counters, "notice"):
            counters.notice = self.notice_once
            if hasattr(counters, "announce"):
                counters.announce()
        for key, text in pending:
            self.notice_once(key, text)

    def notice_once(self, key: str, text: str) -> None:
        if key in self._announced:
            return
        self._announced.add(key)
        if text not in self.camp.notices():
            self.camp.add_notice(text)
        self.rep.notice(text)

    def _new_columns(self, rec: RunRecord) -> list[ColumnInfo]:
        cols: list[ColumnInfo] = rec.details.pop("_columns", [])
        out = []
        for c in cols:
            if c.name not in self._known_columns or c.status == "ok":
                out.append(c)
                self._known_columns.add(c.name)
        return out

    # ------------------------------------------------------------ one run
    def _env(self, sub: Mapping[str, str], report_dir: str | None) -> dict[str, str]:
        env = dict(os.environ)
        for k, v in self.cfg.env.items():
            env[k] = plug.substitute(v, sub)
        if report_dir is not None and self.cfg.shim:
            shim = shimmod.shim_env(report_dir, env)
            # corecast-launch puts the preload into the program's environment at exec, so the
            # shim never runs inside the supervisor (its threads would be counted as the run's)
            env["CORECAST_LAUNCH_PRELOAD"] = shim.pop("LD_PRELOAD")
            env.update(shim)
        return env

    def run_one(self, s: Slot) -> RunRecord:
        cfg = self.cfg
        sub = placeholders(s.cores, cfg.threads_per_core, s.repetition)
        argv = [plug.substitute(a, sub) for a in cfg.command]
        cpus = list(cfg.cpu_order[:s.cores])
        rec = RunRecord(slot=s.slot, cores=s.cores, repetition=s.repetition, warmup=s.warmup, cpus=cpus,
                        argv=argv, status=OK, started_at=time.time())
        columns: list[ColumnInfo] = []
        tmp = Path(tempfile.mkdtemp(prefix="corecast-run-"))
        try:
            env = self._env(sub, str(tmp) if cfg.shim else None)
            prog = find_program(argv[0], env, cfg.cwd)
            if prog is None:
                rec.status, rec.exit_status = "not run", 127
                rec.message = f"program '{argv[0]}' not found"
                rec.finished_at = time.time()
                return rec
            self._execute(rec, prog, argv, env, tmp, columns, sub)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        rec.details["_columns"] = columns
        return rec

    def _execute(self, rec: RunRecord, prog: str, argv: list[str], env: dict[str, str], tmp: Path,
                 columns: list[ColumnInfo], sub: Mapping[str, str]) -> None:
        cfg = self.cfg
        out_path, err_path = tmp / "stdout", tmp / "stderr"
        go_r, go_w = os.pipe()
        rep_r, rep_w = os.pipe()
        os.set_inheritable(go_r, True)
        os.set_inheritable(rep_w, True)
        launch_argv = [self.launcher, str(go_r), str(rep_w), format_cpulist(sorted(rec.cpus)),
                       repr(float(cfg.timeout or 0)), repr(float(cfg.grace_s)), "--", prog, *argv[1:]]
        file_actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, str(out_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
            (os.POSIX_SPAWN_OPEN, 2, str(err_path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644),
        ]
        psi0, _ = psi_totals()
        sigdef = [signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM]
        old_cwd = os.getcwd()
        try:
            os.chdir(cfg.cwd)
            sup = os.posix_spawn(self.launcher, launch_argv, env, file_actions=file_actions,
                                 setsigdef=sigdef, setsigmask=[])
        except OSError as err:
            for fd in (go_r, go_w, rep_r, rep_w):
                os.close(fd)
            raise UserError(f"cannot start {self.launcher}: {err.strerror or err}") from None
        finally:
            os.chdir(old_cwd)
        os.close(go_r)
        os.close(rep_w)
        session = None
        child = None
        report: dict[str, str] = {}
        samples: dict[int, tuple[int, int]] = {}
        try:
            reader = _LineReader(rep_r)
            line = reader.readline(None)
            if line is None or not line.startswith("pid "):
                raise UserError(f"{self.launcher} failed to start the run: {line or 'no answer'}")
            child = int(line.split()[1])
            self._current_pgid = child
            if self.counters is not None:
                session = self.counters.open(child)
            os.write(go_w, b"g")
            os.close(go_w)
            go_w = -1
            sample = not cfg.shim
            while True:
                line = reader.readline(SAMPLE_S if sample else None)
                if line is None and reader.eof:
                    break
                if line is None:
                    samples.update(read_task_schedstats(child))
                    continue
                key, _, rest = line.partition(" ")
                if key == "end":
                    break
                if key == "error":
                    raise UserError(f"{self.launcher}: {rest}")
                report[key] = rest
                if key == "exec" and sample:
                    samples.update(read_task_schedstats(child))
            os.waitpid(sup, 0)
            sup = -1
        except BaseException:
            if child is not None:
                self._kill_group(child, signal.SIGKILL)
            if sup > 0:
                try:
                    os.kill(sup, signal.SIGKILL)
                    os.waitpid(sup, 0)
                except (ProcessLookupError, ChildProcessError):
                    pass
            if session is not None:
                session.close()
            raise
        finally:
            for fd in (go_w, rep_r):
                if fd >= 0:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
            self._current_pgid = None
        if "end" not in report and "rusage" not in report:
            if session is not None:
                session.close()
            raise UserError(f"{self.launcher} ended without reporting the run (report: {report})")
        psi1, psi_why = psi_totals()
        rec.finished_at = time.time()
        stdout, stderr = _read_output(out_path), _read_output(err_path)
        rec.stdout_tail, rec.stderr_tail = _tail(stdout), _tail(stderr)
        vals = rec.values
        timed_out = report.get("timeout") == "1"
        stray = report.get("stray") == "1"
        ru = {k: int(v) for k, v in zip(report.get("rusage", "").split()[0::2], report.get("rusage", "").split()[1::2])}

        # ---- how it ended
        if report.get("exec_error") is not None:
            code = int(report["exec_error"])
            rec.status, rec.exit_status = "not run", 127
            rec.message = f"cannot execute '{argv[0]}': {os.strerror(code)}"
            if session is not None:
                session.close()
            return
        if "signal" in report:
            sig = int(report["signal"])
            rec.signal, rec.exit_status = sig, 128 + sig
            if timed_out:
                rec.status = "timeout"
                rec.message = f"still running after the {cfg.timeout:g} s timeout; process group killed ({_signame(sig)})"
            else:
                rec.status = "crashed"
                rec.message = f"killed by {_signame(sig)}"
        else:
            code = int(report.get("exit", "0"))
            rec.exit_status = code
            if timed_out:
                rec.status = "timeout"
                rec.message = f"still running after the {cfg.timeout:g} s timeout; exited with status {code} on SIGTERM"
            elif code != 0:
                rec.status = "failed"
                rec.message = f"exit status {code}"
        leftovers = int(report.get("leftovers", "0") or 0)
        if stray:
            rec.details["stray_processes_killed"] = max(leftovers, 1)
            self.notice_once("stray", f"the program left {leftovers or 'some'} process(es) running after it "
                             "exited (in its process group or escaped from it); corecast kills every "
                             "descendant at the end of each run")

        # ---- rusage and time
        vals["time_s"] = float(report.get("wall_ns", "nan")) / 1e9
        vals["user_s"] = ru.get("utime_us", 0) / 1e6
        vals["sys_s"] = ru.get("stime_us", 0) / 1e6
        vals["rss_bytes"] = float(ru.get("maxrss_kb", 0)) * 1024.0
        vals["voluntary_ctxsw"] = float(ru.get("nvcsw", 0))
        vals["involuntary_ctxsw"] = float(ru.get("nivcsw", 0))
        vals["minor_faults"] = float(ru.get("minflt", 0))
        vals["major_faults"] = float(ru.get("majflt", 0))
        for n in ("time_s", "user_s", "sys_s", "rss_bytes", "voluntary_ctxsw", "involuntary_ctxsw",
                  "minor_faults", "major_faults"):
            columns.append(_col(n))

        # ---- PSI
        for n in PSI_COLUMNS:
            a, b = psi0.get(n), psi1.get(n)
            if a is None or b is None:
                vals[n] = None
                columns.append(_col(n, status="unavailable"))
                self.notice_once("psi", f"no PSI stall times: {psi_why or 'not reported for ' + n}")
            else:
                vals[n] = max(b - a, 0.0)
                columns.append(_col(n))

        # ---- throughput
        if self.throughput_rx is not None:
            v, n, bad = plug.extract(self.throughput_rx, stdout, "last")
            where = "stdout"
            if v is None:
                v2, n2, bad2 = plug.extract(self.throughput_rx, stderr, "last")
                if v2 is not None:
                    v, where = v2, "stderr"
            vals["throughput"] = v
            columns.append(ColumnInfo(name="throughput", kind="throughput", unit=None,
                                      source=f"parsed from the program's {where} with /{self.throughput_label}/",
                                      status="ok", description="throughput the program reported (last match)"))
            if v is None and rec.status == OK:
                rec.details.setdefault("notes", []).append(
                    f"throughput: /{self.throughput_label}/ matched nothing in stdout or stderr")
                self.rep.notice(f"run {rec.slot}: the throughput regex matched nothing in the program's output")

        # ---- plugins
        if self.plugins:
            pv, notes = plug.apply(self.plugins, stdout, stderr, self.cfg.cwd, sub)
            vals.update(pv)
            for c in self.plugins:
                columns.append(ColumnInfo(name=c.name, kind=c.kind, unit=c.unit,
                                          source=f"plugin {Path(c.origin).name}: {c.source} /{c.regex.pattern}/ ({c.aggregate})",
                                          status="ok", description=c.description))
            if notes:
                rec.details.setdefault("notes", []).extend(notes)

        # ---- shim
        if cfg.shim:
            summary = shimmod.read_reports(tmp)
            if not summary.processes:
                rec.details.setdefault("notes", []).append(
                    "the sync shim wrote no report (static binary, setuid program, or killed by SIGKILL)")
                for name in list(shimmod.CATEGORIES) + ["runqueue_delay_cycles"]:
                    vals[name] = None
                if rec.status == OK:
                    self.notice_once("shim-none", f"the sync shim wrote no report for '{argv[0]}' (a static or "
                                     "setuid program cannot be preloaded): no lock/barrier/condition wait categories")
            else:
                vals.update(shimmod.stall_categories(summary, self.nominal_hz))
                vals.update(shimmod.counters(summary))
                rec.details["shim"] = {
                    "processes": len(summary.processes), "threads": summary.threads,
                    "clock": summary.clock, "ticks_per_s": summary.ticks_per_s,
                    "primitives": {k: asdict(v) for k, v in sorted(summary.prims.items())},
                    "incomplete": summary.incomplete,
                }
            for name in shimmod.CATEGORIES:
                columns.append(ColumnInfo(name=name, kind="stall", unit="cycles", source=SHIM_SOURCE,
                                          status="ok", description=shimmod.CATEGORY_HELP[name]))
            columns.append(ColumnInfo(name="runqueue_delay_cycles", kind="stall", unit="cycles",
                                      source="measured: schedstat run-queue delay of every thread, read by the "
                                             "sync shim when each thread exits",
                                      status="ok", description=shimmod.CATEGORY_HELP["runqueue_delay_cycles"]))
            for name, desc in (("lock_acquisitions", "blocking lock calls"),
                               ("lock_contended", "blocking lock calls that had to wait"),
                               ("trylock_failures", "failed trylock calls"),
                               ("threads_seen", "threads the shim saw")):
                columns.append(ColumnInfo(name=name, kind="counter", unit="count", source=SHIM_SOURCE,
                                          status="ok", description=desc))
        else:
            delay = sum(d for _, d in samples.values())
            hz = self.nominal_hz or 1e9
            vals["runqueue_delay_cycles"] = float(delay) * hz / 1e9 if samples else None
            columns.append(ColumnInfo(name="runqueue_delay_cycles", kind="stall", unit="cycles",
                                      source=f"sampled: /proc/PID/task/*/schedstat every {SAMPLE_S:g} s (threads "
                                             "that exit between samples lose their last interval)",
                                      status="ok", description=shimmod.CATEGORY_HELP["runqueue_delay_cycles"]))

        # ---- counters
        if session is not None:
            try:
                cv, ccols, cdet = session.read()
            finally:
                session.close()
            vals.update(cv)
            columns.extend(ccols)
            if cdet:
                rec.details["counters"] = cdet

    @staticmethod
    def _kill_group(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class _LineReader:
    """Lines from a pipe, with a timeout per line (None: wait as long as it takes)."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = b""
        self.eof = False

    def readline(self, timeout: float | None) -> str | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            if self.eof:
                break
            wait = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            r, _, _ = select.select([self.fd], [], [], wait)
            if not r:
                return None
            chunk = os.read(self.fd, 4096)
            if not chunk:
                self.eof = True
                break
            self.buf += chunk
        if b"\n" in self.buf:
            line, _, self.buf = self.buf.partition(b"\n")
            return line.decode(errors="replace")
        if self.buf:
            line, self.buf = self.buf, b""
            return line.decode(errors="replace")
        return None


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt()
