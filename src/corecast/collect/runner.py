"""Scaling campaigns: run a program at several core counts, repeatedly, and record every run.

A campaign is a plan of *slots* -- (core count, repetition, warm-up or not) -- executed in an
interleaved order: warm-ups first, then repetition 0 over all core counts ascending,
repetition 1 descending, and so on, so slow drift of the machine (thermal, other tenants)
spreads over every core count instead of biasing one.

Each run:
- is started by `corecast-launch` (`corecast.collect.procs.Supervised`), which pins itself to
  the run's CPUs (the first N of the campaign's core order) before executing the program, so
  every process and thread the program creates inherits the placement; it runs in its own
  process group with stdin from /dev/null and stdout/stderr to files in the run's private
  folder (removed after the run, and by corecast's sentinel if corecast dies);
- waits, before exec, until every source has started on it (the perf counters are opened on
  it: inherited by every thread, enabled at exec, as `perf stat` does);
- has `{cores}`, `{threads}` and `{rep}` replaced in its arguments and `--env` values;
- is killed with its whole process group (SIGTERM, then SIGKILL after a grace period) when it
  runs past the timeout; every process still descending from it is killed when it exits, and
  the whole tree when corecast dies (SIGKILL included);
- is measured by every registered source (`corecast.collect.runsources`: wall time and
  rusage, PSI, throughput, plugins, the sync shim or the sampled run-queue delay, perf
  counters), each behind the protocol of `corecast.collect.source`;
- is committed to the campaign file as soon as it finishes, whatever its outcome: a failing
  run is stored with its status, exit status and the tail of its stderr, and reported.

Setting a campaign up (its checks, its file) is `corecast.collect.campaign`.
"""
from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..dataset import ColumnInfo
from ..errors import UserError
from ..native import native_path
from ..parsing import MAX_ROWS
from ..store import OK, Campaign, RunRecord
from . import plugins as plug
from . import procs
from . import runsources
from .source import TAIL_CHARS, TAIL_LINES, Host, Run, Source, tail  # noqa: F401 (the tails' sizes)
from .procs import find_program  # noqa: F401 (measure's and serve's name for it)
from .topology import format_cpulist

GRACE_S = 2.0
STATUSES = ("ok", "failed", "crashed", "timeout", "not run")


# ====================================================================== configuration
@dataclass
class CampaignConfig:
    """A campaign's settings, stored in its file and used again on --resume. The settings of
    the sources (--throughput, --plugin, --no-shim, --events, ...) are in `options`, declared
    by each source (`corecast.collect.source.Option`); stored beside the others."""

    command: list[str]
    cores: list[int]
    reps: int = 3
    warmup: int = 1
    timeout: float | None = None
    order: str = "socket"
    cpu_order: list[int] = field(default_factory=list)   # resolved order (PUs)
    env: dict[str, str] = field(default_factory=dict)
    threads_per_core: int = 1
    cwd: str = "."
    grace_s: float = GRACE_S
    options: dict[str, Any] = field(default_factory=dict)

    def option(self, key: str) -> Any:
        """A source's setting (its default when the campaign does not say)."""
        if key in self.options:
            return self.options[key]
        for o in runsources.options():
            if o.key == key:
                return o.setting(None)
        raise KeyError(key)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "options"}
        d = {k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v) for k, v in d.items()}
        for o in runsources.options():
            d[o.key] = self.option(o.key)
        d.update({k: v for k, v in self.options.items() if k not in d})
        slots = plan(self.cores, self.reps, self.warmup)
        d["planned_runs"] = len(slots)
        d["measured_runs"] = sum(1 for s in slots if not s.warmup)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "CampaignConfig":
        known = set(cls.__dataclass_fields__) - {"options"}
        opts = {o.key: d[o.key] for o in runsources.options() if o.key in d}
        return cls(**{k: v for k, v in d.items() if k in known}, options=opts)


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
    total = (reps + warmup) * len(counts)
    if total > MAX_ROWS:        # before the plan is made: --reps 100000000 took every byte of memory
        raise UserError(f"--reps {reps} and --warmup {warmup} at {len(counts)} core count(s) make {total:,} runs; "
                        f"a campaign holds at most {MAX_ROWS:,} (what a Dataset may have)")
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
def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


class Interrupted(Exception):
    """The campaign was stopped (Ctrl-C, SIGTERM); the run in progress was killed, not recorded."""


class Runner:
    """Runs a campaign's slots not yet recorded, each through every source in `sources`
    (`runsources.create(cfg, host)`; made before the campaign file, so that a source's bad
    setting leaves no file behind)."""

    def __init__(self, config: CampaignConfig, campaign: Campaign, *, reporter: Reporter | None = None,
                 sources: Sequence[Source] | None = None, host: Host | None = None):
        self.cfg = config
        self.camp = campaign
        self.rep = reporter or Reporter()
        self.host = host or Host()
        self.sources = list(runsources.create(config, self.host) if sources is None else sources)
        native_path("corecast-launch")
        if not config.cpu_order:
            raise UserError("internal: campaign has no CPU order")
        self._announced: set[str] = set()
        self._known_columns = set(campaign.columns())
        self.host.attach(self.notice_once, self.rep.notice)

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
    def run_one(self, s: Slot) -> RunRecord:
        cfg = self.cfg
        sub = placeholders(s.cores, cfg.threads_per_core, s.repetition)
        argv = [plug.substitute(a, sub) for a in cfg.command]
        cpus = list(cfg.cpu_order[:s.cores])
        rec = RunRecord(slot=s.slot, cores=s.cores, repetition=s.repetition, warmup=s.warmup, cpus=cpus,
                        argv=argv, status=OK, started_at=time.time())
        columns: list[ColumnInfo] = []
        tmp = procs.temp_dir("corecast-run-")
        try:
            env = dict(os.environ)
            env.update({k: plug.substitute(v, sub) for k, v in cfg.env.items()})
            prog = find_program(argv[0], env, cfg.cwd)
            if prog is None:
                rec.status, rec.exit_status = "not run", 127
                rec.message = f"program '{argv[0]}' not found"
                rec.finished_at = time.time()
                return rec
            columns = self._execute(Run(rec, argv, env, tmp, sub, cfg, self.host), prog)
        finally:
            procs.remove(tmp)
        rec.details["_columns"] = columns
        return rec

    def _execute(self, run: Run, prog: str) -> list[ColumnInfo]:
        """Launch, let every source start on the program, wait for its end (sampling), stop
        every source, record how it ended, and collect every source. The columns of the run."""
        cfg, rec = self.cfg, run.record
        for src in self.sources:
            src.prepare(run)
        child = procs.Supervised(run.argv, program=prog, env=run.env, cwd=cfg.cwd,
                                 cpus=format_cpulist(sorted(rec.cpus)), timeout=float(cfg.timeout or 0),
                                 grace=float(cfg.grace_s), stdin=os.devnull, stdout=str(run.folder / "stdout"),
                                 stderr=str(run.folder / "stderr"))
        started: list[Source] = []
        try:
            run.pid = child.pid
            for src in self.sources:
                src.start(run)
                started.append(src)
            child.start()
            samplers = [src for src in self.sources if src.interval]
            every = min((src.interval for src in samplers), default=None)
            if child.exec_error is None:
                for src in samplers:
                    src.sample(run)
            while child.poll(every) is None and not child.ended:
                for src in samplers:
                    src.sample(run)
        except BaseException:
            child.close()
            for src in started:
                src.stop(run)
            raise
        run.report = child.report
        run.ran = child.status is not None and child.exec_error is None
        for src in started:
            src.stop(run)
        if child.status is None and child.exec_error is None:
            raise UserError(f"{child.launcher} ended without reporting the run (report: {child.report})")
        rec.finished_at = time.time()
        rec.stdout_tail, rec.stderr_tail = tail(run.stdout), tail(run.stderr)
        if child.exec_error is not None:
            rec.status, rec.exit_status = "not run", 127
            rec.message = f"cannot execute '{run.argv[0]}': {os.strerror(child.exec_error)}"
            return []
        self._ending(rec, child.report)
        columns: list[ColumnInfo] = []
        for src in self.sources:
            got = src.collect(run)
            if got is None:
                continue
            rec.values.update(got.values)
            columns.extend(got.columns)
            if got.notes:
                rec.details.setdefault("notes", []).extend(got.notes)
            rec.details.update(got.provenance)
            for name, rows in got.tables.items():
                rec.tables.setdefault(name, []).extend(rows)
        return columns

    def _ending(self, rec: RunRecord, report: Mapping[str, str]) -> None:
        """The run's status, exit status and message from corecast-launch's report."""
        timed_out = report.get("timeout") == "1"
        if "signal" in report:
            sig = int(report["signal"])
            rec.signal, rec.exit_status = sig, 128 + sig
            if timed_out:
                rec.status = "timeout"
                rec.message = (f"still running after the {self.cfg.timeout:g} s timeout; process group killed "
                               f"({_signame(sig)})")
            else:
                rec.status = "crashed"
                rec.message = f"killed by {_signame(sig)}"
        else:
            code = int(report.get("exit", "0"))
            rec.exit_status = code
            if timed_out:
                rec.status = "timeout"
                rec.message = (f"still running after the {self.cfg.timeout:g} s timeout; exited with status "
                               f"{code} on SIGTERM")
            elif code != 0:
                rec.status = "failed"
                rec.message = f"exit status {code}"
        leftovers = int(report.get("leftovers", "0") or 0)
        if report.get("stray") == "1":
            rec.details["stray_processes_killed"] = max(leftovers, 1)
            self.notice_once("stray", f"the program left {leftovers or 'some'} process(es) running after it "
                             "exited (in its process group or escaped from it); corecast kills every "
                             "descendant at the end of each run")


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt()
