"""`corecast sched run`: start programs together and apply a scheduling policy to their threads
every quantum with sched_setaffinity.

Each quantum the runner finds every thread of every program (and of their children), reads each
thread's CPU time (/proc/PID/task/TID/schedstat: the task clock), its state and the CPU it last
ran on, charges the CPU time to the core type the thread was placed on, and builds the same
`View` the simulator gives a policy: CPU time per core type, runnable time, progress in big-core
seconds (CPU time on small CPUs divided by the program's SF) and the SF itself (declared with
--sf, else the machine's speed ratio). An application-reported progress file, where given, is
the program's `work`. The policy's placement is turned into affinities: the threads with the
largest share on the big type get the big CPUs (one each), the others the small CPUs.

Programs alone (`alone` reference policy) are run first, once per distinct command, for the
slowdowns.

Each program is started through corecast-launch (`corecast.collect.procs.Supervised`), in a
process group of its own: when it ends, when the run stops (an error, Ctrl-C) and when corecast
dies (SIGKILL included), its whole tree is killed -- nothing is left running pinned to the CPUs
the policy chose -- and the emulation's cgroup is removed (by corecast's sentinel if corecast
cannot do it itself).
"""
from __future__ import annotations

import errno
import math
import os
import shlex
import signal
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ...collect.procs import Supervised
from ...errors import UserError
from ..machine import CoreType, Machine
from ..policies import make_policy
from ..policy import Policy, View, call_policy, check_placement
from ..workload import nice_weight
from . import emulate as E
from .hybrid import Hybrid, detect, format_cpus, parse_cpus
from .progress import Instructions, choose

MAX_THREADS = 512
CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class ProgramResult:
    index: int
    command: str
    sf: float | None
    threads: int = 0
    wall_s: float = math.nan
    alone_s: float = math.nan
    cpu_s: float = 0.0
    big_share: float = math.nan          # of the samples where a thread of it was seen running
    exit_status: int | None = None
    progress: float | None = None

    @property
    def slowdown(self) -> float:
        return self.wall_s / self.alone_s if self.alone_s > 0 else math.nan


@dataclass
class RunResult:
    policy: str
    machine_line: str
    emulation: str
    programs: list[ProgramResult]
    quanta: int
    migrations: int
    progress_source: str
    unfairness: float | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"kind": "corecast-sched-run", "policy": self.policy, "machine": self.machine_line,
                "emulation": self.emulation, "quanta": self.quanta, "migrations": self.migrations,
                "progress_source": self.progress_source, "unfairness": self.unfairness,
                "programs": [{"index": p.index, "command": p.command, "sf": p.sf, "threads": p.threads,
                              "wall_s": _j(p.wall_s), "alone_s": _j(p.alone_s), "slowdown": _j(p.slowdown),
                              "cpu_s": p.cpu_s, "big_share": _j(float(p.big_share)), "exit_status": p.exit_status,
                              "progress": p.progress} for p in self.programs],
                "notes": self.notes}


def _j(x: float | None) -> float | None:
    """A number for JSON: None where there is none (NaN)."""
    return None if x is None or not math.isfinite(x) else float(x)


# ------------------------------------------------------------------------ /proc
def _thread_stat(pid: int, tid: int) -> tuple[str, int, int] | None:
    """(state, last CPU, nice) of a thread, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
    except OSError:
        return None
    rest = text[text.rfind(")") + 2:].split()
    try:
        return rest[0], int(rest[36]), int(rest[16])
    except (IndexError, ValueError):
        return None


def _cpu_ns(pid: int, tid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _tasks(pid: int) -> list[tuple[int, int]]:
    """(pid, tid) of every thread of `pid` and of its descendants."""
    out: list[tuple[int, int]] = []
    todo = [pid]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        for t in tids:
            out.append((p, t))
            try:
                kids = Path(f"/proc/{p}/task/{t}/children").read_text().split()
            except OSError:
                kids = []
            todo.extend(int(k) for k in kids)
    return out


# ------------------------------------------------------------------------ the run
@dataclass
class Setup:
    big: list[int]
    small: list[int]
    small_speed: float
    emulation: E.Emulation
    hybrid: Hybrid
    quantum: float

    def machine(self) -> Machine:
        return Machine("enforced", (CoreType("big", len(self.big), 1.0, cpus=format_cpus(self.big)),
                                    CoreType("small", len(self.small), self.small_speed, cpus=format_cpus(self.small))),
                       source="enforcing mode")

    def line(self) -> str:
        return (f"big CPUs {format_cpus(self.big)}, small CPUs {format_cpus(self.small)} "
                f"(small speed {self.small_speed:.2g}); machine {self.hybrid.describe()}")


def prepare(big: str | None, small: str | None, emulate: str, small_speed: float | None, quantum: float,
            sysfs_root: str | Path = "/") -> Setup:
    """The CPUs of each type and the emulation: --big/--small when given, else the hybrid machine
    sysfs describes, else the online CPUs split in two halves (an emulated AMP)."""
    if not (quantum > 0 and math.isfinite(quantum)):
        raise UserError(f"--quantum {quantum}: must be a positive time")
    hy = detect(sysfs_root)
    allowed = set(os.sched_getaffinity(0))
    if (big is None) != (small is None):
        raise UserError("--big and --small go together (or give neither to use what sysfs says)")
    if big is not None:
        b, s = parse_cpus(big, "--big"), parse_cpus(small, "--small")
        if set(b) & set(s):
            raise UserError(f"--big {big} and --small {small} share CPUs {format_cpus(sorted(set(b) & set(s)))}")
        missing = sorted((set(b) | set(s)) - allowed)
        if missing:
            raise UserError(f"CPUs {format_cpus(missing)} are not available here (this process may use "
                            f"{format_cpus(sorted(allowed))})")
    elif hy.hybrid:
        b, s = hy.groups[0].cpus, [c for g in hy.groups[1:] for c in g.cpus]
    else:
        cpus = sorted(allowed)
        if len(cpus) < 2:
            raise UserError("one CPU only: an AMP needs at least one big and one small CPU")
        half = (len(cpus) + 1) // 2
        b, s = cpus[:half], cpus[half:]
    real = hy.hybrid and big is None
    if real and emulate in ("auto", "none"):
        speed = small_speed or hy.groups[1].speed
        emu: E.Emulation = E.Emulation()
    else:
        speed = small_speed if small_speed is not None else 0.5
        if emulate == "none":
            emu = E.Emulation()
        else:
            emu = E.make(emulate, s, speed)
    return Setup(b, s, speed, emu, hy, quantum)


class _Run:
    """One run of a set of programs under a policy."""

    def __init__(self, setup: Setup, commands: list[list[str]], sfs: list[float | None],
                 policy: Policy, progress_files: list[str | None], counters: Instructions | None = None):
        self.st, self.cmds, self.sfs, self.pol, self.pfiles = setup, commands, sfs, policy, progress_files
        self.counters = counters
        self.instr = np.zeros((MAX_THREADS, 2))      # instructions retired on each type
        self.emulated = setup.emulation.kind != "none"
        self.cpu_real = np.zeros(MAX_THREADS)
        self.m = setup.machine()
        A = len(commands)
        T = MAX_THREADS
        self.A, self.T = A, T
        self.slot: dict[tuple[int, int], int] = {}
        self.tapp = np.zeros(T, dtype=np.int64)
        self.tpid = np.zeros(T, dtype=np.int64)
        self.ttid = np.zeros(T, dtype=np.int64)
        self.local = np.zeros(T, dtype=np.int64)
        self.weight = np.full(T, 1024.0)
        self.runnable = np.zeros(T, dtype=bool)
        self.cpu = np.zeros((T, 2))
        self.rtime = np.zeros(T)
        self.progress = np.zeros(T)
        self.alone_progress = np.zeros(T)
        self.alone_rate = np.ones(T)
        self.work = np.zeros(T)
        self.last_ns = np.zeros(T)
        self.on = np.full(T, -1, dtype=np.int64)         # type placed on: 0 big, 1 small
        dsf = 1.0 / setup.small_speed
        self.app_sf = np.array([s if s is not None else dsf for s in sfs])
        self.sf = np.full(T, dsf)
        self.app_threads = np.ones(A, dtype=np.int64)
        self.app_weight = np.full(A, 1024.0)
        self.samples = np.zeros(A)
        self.big_samples = np.zeros(A)
        self.migrations = 0
        self.quanta = 0
        self.S = np.zeros((T, 2))
        self.view = View(time=0.0, quantum=setup.quantum, machine=self.m, counts=self.m.counts,
                         speeds=self.m.speeds, runnable=np.zeros(0, dtype=np.int64), is_runnable=self.runnable,
                         app=self.tapp, local=self.local, weight=self.weight, sf=self.sf,
                         needs_sample=np.zeros((T, 2), dtype=bool), cpu=self.cpu, runnable_time=self.rtime,
                         progress=self.progress, alone_progress=self.alone_progress, alone_rate=self.alone_rate,
                         work=self.work, run_id=np.zeros(T, dtype=np.int64), app_threads=self.app_threads,
                         app_weight=self.app_weight, app_runnable=np.zeros(A, dtype=np.int64),
                         app_start=np.zeros(A), placement=self.S, rng=np.random.default_rng(1))

    def _discover(self, procs: list[Supervised]) -> None:
        for a, p in enumerate(procs):
            if p.ended:
                continue
            for key in _tasks(p.pid):
                if key in self.slot:
                    continue
                i = len(self.slot)
                if i >= self.T:
                    raise UserError(f"more than {self.T} threads: the enforcing mode places at most {self.T}")
                self.slot[key] = i
                self.tapp[i], self.tpid[i], self.ttid[i] = a, key[0], key[1]
                self.local[i] = int((self.tapp[:i] == a).sum())
                self.sf[i] = self.app_sf[a]
        self.app_threads[:] = np.maximum(np.bincount(self.tapp[: len(self.slot)], minlength=self.A), 1)

    def _measure(self, dt: float) -> None:
        big = set(self.st.big)
        self.runnable[:] = False
        for (pid, tid), i in self.slot.items():
            ns = _cpu_ns(pid, tid)
            stat = _thread_stat(pid, tid)
            if ns is None or stat is None or stat[0] in ("Z", "X"):
                continue
            d = max(0.0, (ns - self.last_ns[i]) / 1e9)
            self.last_ns[i] = ns
            k = self.on[i] if self.on[i] >= 0 else (0 if stat[1] in big else 1)
            # an emulated small CPU is a throttled big one: a CPU-second there does a big
            # CPU-second's work, and the slowness is the CPU time the quota withholds. The view
            # keeps the simulator's meaning: time placed on the type (CPU time / speed), and
            # progress is the CPU time itself. On a real hybrid machine a CPU-second on a small
            # core does 1/SF of the work.
            self.cpu[i, k] += d / self.st.small_speed if (self.emulated and k == 1) else d
            self.cpu_real[i] += d
            run = stat[0] == "R" or d > 0
            self.runnable[i] = stat[0] in ("R", "D") or d > 0.2 * dt
            if run:
                self.rtime[i] += dt
            if self.counters is not None:
                di = self.counters.delta(tid)
                if di is not None:
                    self.instr[i, k] += di
                    self.work[i] += di
                    # no SF declared: IPC sampling, instructions per CPU-second on each type
                    a = self.tapp[i]
                    if self.sfs[a] is None and self.cpu[i, 0] > 0 and self.cpu[i, 1] > 0 and self.instr[i, 1] > 0:
                        self.sf[i] = (self.instr[i, 0] / self.cpu[i, 0]) / (self.instr[i, 1] / self.cpu[i, 1])
            slow = 1.0 if (k == 0 or self.emulated) else self.sf[i]
            self.progress[i] += d / slow
            self.alone_progress[i] += d / slow / self.alone_rate[i]
            if self.counters is None:
                self.work[i] += d / slow
            self.weight[i] = nice_weight(max(-20, min(19, stat[2])))
            if d > 0:
                a = self.tapp[i]
                self.samples[a] += 1
                self.big_samples[a] += stat[1] in big

    def _reported(self) -> None:
        """A program's own progress report, where given, is its threads' `work` (split evenly)."""
        for a, path in enumerate(self.pfiles):
            v = _progress_value(path)
            if v is None:
                continue
            mine = np.flatnonzero(self.tapp[: len(self.slot)] == a)
            if len(mine):
                self.work[mine] = v / len(mine)

    def _alone_rates(self, app_runnable: np.ndarray) -> None:
        n = app_runnable[self.tapp]
        used_b = np.minimum(self.m.counts[0], n)
        used_s = np.minimum(self.m.counts[1], np.maximum(n - used_b, 0))
        self.alone_rate[:] = np.where(n > 0, (used_b + used_s / self.sf) / np.maximum(n, 1), 1.0)

    def _apply(self, S: np.ndarray) -> None:
        run = np.flatnonzero(self.runnable)
        order = run[np.argsort(-S[run, 0], kind="stable")]
        nb = len(self.st.big)
        to_big = set(order[:nb][S[order[:nb], 0] > 0].tolist())
        for i in list(self.slot.values()):
            k = 0 if i in to_big else 1
            if self.on[i] == k:
                continue
            tid = int(self.ttid[i])
            try:
                os.sched_setaffinity(tid, self.st.big if k == 0 else self.st.small)
            except (ProcessLookupError, OSError):
                continue
            self.st.emulation.place(tid, k == 1)
            if self.on[i] >= 0:
                self.migrations += 1
            self.on[i] = k

    def run(self, on_quantum: Callable[[], None] | None = None) -> tuple[list[float], list[int | None]]:
        procs: list[Supervised] = []
        waiters: list[threading.Thread] = []
        start = time.monotonic()
        ends: list[float] = [math.nan] * self.A
        status: list[int | None] = [None] * self.A
        try:
            for argv in self.cmds:
                # the programs write to standard error: standard output is the report
                p = Supervised(argv, stdout=2, stderr=2)
                procs.append(p)
                self.st.emulation.adopt(p.pid)       # before it executes: all its threads follow
                p.start()
                if p.exec_error is not None:
                    why = {errno.ENOENT: "no such program", errno.EACCES: "permission denied"}.get(
                        p.exec_error, os.strerror(p.exec_error))
                    raise UserError(f"cannot run '{shlex.join(argv)}': {why}")
            # a waiter per program takes its exit time as it happens, not at the next quantum
            def waiter(a: int, p: Supervised) -> None:
                try:
                    p.wait()
                except UserError:
                    pass
                ends[a] = time.monotonic() - start
            waiters = [threading.Thread(target=waiter, args=(a, p), daemon=True) for a, p in enumerate(procs)]
            for w in waiters:
                w.start()
            call_policy(self.pol, "setup", self.view)
            q = self.st.quantum
            nxt = time.monotonic()
            last = nxt
            while True:
                now = time.monotonic()
                for a, p in enumerate(procs):
                    if status[a] is None and not waiters[a].is_alive():
                        # no report: its supervisor was killed, and the program with it (SIGKILL)
                        status[a] = p.status if p.status is not None else -signal.SIGKILL
                if all(s is not None for s in status):
                    break
                self._discover(procs)
                self._measure(now - last)
                self._reported()
                last = now
                for a in range(self.A):
                    if status[a] is not None:
                        self.runnable[self.tapp == a] = False
                v = self.view
                v.time = now - start
                v.runnable = np.flatnonzero(self.runnable)
                v.app_runnable = np.bincount(self.tapp[v.runnable], minlength=self.A)
                self._alone_rates(v.app_runnable)
                S = call_policy(self.pol, "decide", v)
                if S is not None:
                    # a user's placement is checked as the simulator checks it (a wrong shape was taken)
                    self.S = (np.asarray(S, dtype=float) if self.pol.trusted
                              else check_placement(self.pol, S, self.T, self.m))
                    v.placement = self.S
                self._apply(self.S)
                self.quanta += 1
                if on_quantum:
                    on_quantum()
                nxt += q
                time.sleep(max(0.0, nxt - time.monotonic()))
        finally:
            # the programs still running (an error, Ctrl-C) are killed with their whole tree
            for p in procs:
                p.kill(signal.SIGKILL)
            for w in waiters:
                w.join(timeout=10.0)
            for p in procs:
                p.close()
        return ends, status


def _realtime() -> tuple[str, object]:
    """Run the runner itself at a real-time priority, so that its quanta come on time on a busy
    machine (a late decision leaves the big CPUs where they were); its children are reset to
    the normal policy on fork. Returns a line saying how it runs, and what to restore."""
    try:
        old = (os.sched_getscheduler(0), os.sched_getparam(0))
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
        return "the runner ran at SCHED_FIFO priority 10 (programs at their own policy)", old
    except (AttributeError, PermissionError, OSError):
        return ("the runner ran at normal priority (no permission for SCHED_FIFO): on a busy machine "
                "its decisions may come late"), None


def _restore(old: object) -> None:
    if old is not None:
        try:
            pol, param = old  # type: ignore[misc]
            os.sched_setscheduler(0, pol, param)
        except (OSError, ValueError):
            pass


#: How much of the end of a progress file is read (its last number is what counts).
PROGRESS_TAIL_BYTES = 4096


def _progress_value(path: str | None) -> float | None:
    """The last number in a program's progress file, or None (none yet, or not a regular file).
    Read every quantum, so read without waiting and at most its last PROGRESS_TAIL_BYTES: a FIFO
    blocked the enforcing loop for good, and a link to /dev/zero read until memory ran out. The
    name is first opened with O_PATH (which opens no device) and read only when that is a regular
    file: opening a device can itself act (a link to /dev/watchdog, opened as root every quantum,
    armed the watchdog)."""
    if not path:
        return None
    try:
        ref = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(ref).st_mode):
            return None
        fd = os.open(f"/proc/self/fd/{ref}", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        os.close(ref)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        os.lseek(fd, max(0, st.st_size - PROGRESS_TAIL_BYTES), os.SEEK_SET)
        v = float(os.read(fd, PROGRESS_TAIL_BYTES).split()[-1])
        return v if math.isfinite(v) else None
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(fd)


def enforce(commands: list[str], policy: str, setup: Setup, sfs: list[float | None] | None = None,
            alone: bool = True, progress_files: list[str | None] | None = None,
            progress: str = "auto", period: float | None = None) -> RunResult:
    """Run `commands` together under `policy` (and each alone first for the slowdowns)."""
    try:
        return _enforce(commands, policy, setup, sfs, alone, progress_files, progress, period)
    finally:
        setup.emulation.close()          # also after an error before the run (its cgroup)


def _enforce(commands: list[str], policy: str, setup: Setup, sfs: list[float | None] | None,
             alone: bool, progress_files: list[str | None] | None, progress: str,
             period: float | None) -> RunResult:
    if not commands:
        raise UserError("no programs: give them after --, e.g. -- './a' './b'")
    argvs = []
    for c in commands:
        try:
            argv = shlex.split(c)
        except ValueError as err:
            raise UserError(f"cannot read the command '{c}': {err}") from None
        if not argv:
            raise UserError("an empty command")
        argvs.append(argv)
    sfs = sfs or [None] * len(commands)
    pfiles = progress_files or [None] * len(commands)
    notes: list[str] = []
    counters, psource = choose(progress)
    prio, old = _realtime()
    notes.append(prio)
    try:
        alone_s: dict[str, float] = {}
        if alone:
            for c, argv, sf in zip(commands, argvs, sfs):
                if c in alone_s:
                    continue
                r = _Run(setup, [argv], [sf], make_policy("alone"), [None])
                ends, st = r.run()
                alone_s[c] = ends[0]
        pol = make_policy(policy, period)
        run = _Run(setup, argvs, sfs, pol, pfiles, counters)
        c0, w0 = time.process_time(), time.monotonic()
        ends, status = run.run()
        own = (time.process_time() - c0) / max(time.monotonic() - w0, 1e-9)
        notes.append(f"the runner itself used {own:.0%} of a CPU ({run.quanta} quanta of "
                     f"{setup.quantum * 1e3:g} ms)")
    finally:
        _restore(old)
        if counters is not None:
            counters.close()
    progs = []
    for a, c in enumerate(commands):
        n = int((run.tapp[: len(run.slot)] == a).sum())
        cpu = float(run.cpu_real[: len(run.slot)][run.tapp[: len(run.slot)] == a].sum())
        share = run.big_samples[a] / run.samples[a] if run.samples[a] else math.nan
        progs.append(ProgramResult(a, c, sfs[a], n, ends[a], alone_s.get(c, math.nan), cpu, share, status[a],
                                   _progress_value(pfiles[a])))
        if status[a]:
            notes.append(f"program {a} ('{c}') exited with status {status[a]}")
    sd = [p.slowdown for p in progs if math.isfinite(p.slowdown)]
    unf = max(sd) / min(sd) if len(sd) == len(progs) and sd and min(sd) > 0 else None
    if not alone:
        notes.append("programs were not run alone first (--no-alone): no slowdowns")
    return RunResult(pol.name, setup.line(), setup.emulation.describe(), progs, run.quanta, run.migrations,
                     psource + ("; the programs' progress files" if any(pfiles) else ""), unf, notes)
