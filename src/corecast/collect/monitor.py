"""The monitor behind `corecast stat`: interval and event-based sampling, per thread or per
CPU, explicit round-robin multiplexing of event sets, coordinated virtual counters, derived
metrics, and the PMCTrack-style table / CSV / JSON-lines writers.

    mon = Monitor(sets=[resolve("instr,cycles"), resolve("llc_misses")],
                  virtual=["runq_delay", "psi_cpu_some"], interval=0.1,
                  target=Target.command(["./prog"]))
    for row in mon.run():
        ...

The counter access goes through a `Backend` (the real one is perf_event_open; tests use a
simulated PMU), so every path above — scaling, multiplexing, EBS, thread churn, formatting —
runs the same code with and without hardware counters.

Threads are followed through the kernel's task records (see `perf.TaskTracker`): a new thread
is picked up when the kernel reports its creation, and a thread's `exit` row is the kernel's
own count of it from creation to exit, less what its earlier rows reported -- so every thread
has its rows, however short its life, and they add up to the process's inherited totals. A
backend without task records falls back to finding threads in /proc.
"""
from __future__ import annotations

import ast
import csv
import io
import json
import math
import os
import select
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence, TextIO

from ..errors import UserError
from . import sources
from . import ticks as native_ticks
from .events.spec import EventSpec
from .perf import (CounterValue, Launched, TrackerUnavailable, combine_cpus, denied_message,
                   interval_value, launch, open_counters, open_sampler, open_tracker, paranoid, remainder, scale)

MIN_INTERVAL = 0.01
SAMPLE_TYPES = ("tick", "ebs", "exit")
BATCH_PERIOD = 0.1      # the longest the monitor takes ticks in C without returning to Python
WAKES = ("auto", "records", "tick")
TICK_WAKE_MAX = 0.02    # wake="auto": at intervals up to this, look for records at the ticks only
FLUSH_PERIOD = 0.05     # writers flush when they are idle and this long has passed since the last flush


# ============================================================================================
# the backend: where counts come from

class Handle(Protocol):
    def read(self) -> list[CounterValue]: ...
    def enable(self) -> None: ...
    def disable(self) -> None: ...
    def close(self) -> None: ...


class Backend(Protocol):
    def open(self, specs: Sequence[EventSpec], pid: int, cpu: int, inherit: bool,
             enable_on_exec: bool, enabled: bool) -> Handle: ...
    def open_sampler(self, specs: Sequence[EventSpec], pid: int, cpu: int,
                     enable_on_exec: bool, enabled: bool) -> Any: ...
    def threads(self, pid: int) -> list[int]: ...
    def thread_name(self, pid: int, tid: int) -> str: ...
    def online_cpus(self) -> list[int]: ...
    def now(self) -> float: ...
    def wait(self, seconds: float, target: "Target", fds: Sequence[int] = ()) -> None: ...
    # optional: a backend with task records (perf.TaskTracker's face) offers
    # open_tracker(sets, roots, cpus, enable_on_exec, live) -> tracker, raising TrackerUnavailable
    # optional: ticks(plan, t0, interval, first, count, target, fds, wake) -> ticks.TickBatch | None
    # takes up to `count` ticks (sleeping to each deadline t0 + k * interval, reading every handle
    # of `plan` there) and stops early when one of `fds` is ready or the target ends: at once
    # with `wake`, else after the tick it was found at (see collect/ticks.py)


class PerfBackend:
    """The real thing: perf_event_open and /proc."""

    def __init__(self) -> None:
        self._ticks: native_ticks.NativeTicks | None = None
        self._no_ticks = False

    def _native(self) -> native_ticks.NativeTicks | None:
        if self._ticks is None and not self._no_ticks:
            lib = native_ticks.load()
            if lib is None:
                self._no_ticks = True
                return None
            self._ticks = native_ticks.NativeTicks(lib)
        return self._ticks

    def ticks(self, plan, t0, interval, first, count, target, fds=(), wake=True, rings=()):
        """Take up to `count` ticks in C (see collect/ticks.py); None when it cannot: no native
        library, or a target whose end cannot be watched (no pidfd)."""
        nt = self._native()
        if nt is None:
            return None
        watch = list(fds)
        child = False
        if target.kind != "system":
            if target.pidfd is None:
                return None
            if not wake and nt.sigchld and target.kind == "command" and target.child is not None:
                child = True          # its SIGCHLD says when it ends: no poll of its pidfd
            else:
                watch.append(target.pidfd)
        return nt.take(plan, t0, interval, first, count, watch, wake, rings, child)

    def catch_sigchld(self, on: bool) -> bool:
        """Have a launched command's SIGCHLD end the sleep between ticks (see ticks.py)."""
        nt = self._native()
        return nt.catch_sigchld(on) if nt is not None else False

    def open(self, specs, pid, cpu, inherit, enable_on_exec, enabled):
        return open_counters(specs, pid=pid, cpu=cpu, inherit=inherit, enable_on_exec=enable_on_exec,
                             enabled=enabled)

    def open_sampler(self, specs, pid, cpu, enable_on_exec, enabled):
        return open_sampler(specs, pid=pid, cpu=cpu, enable_on_exec=enable_on_exec, enabled=enabled)

    def open_tracker(self, sets, roots, cpus, enable_on_exec, live):
        return open_tracker(sets, roots, cpus, enable_on_exec=enable_on_exec, live=live)

    def threads(self, pid):
        return sources.list_threads(pid)

    def thread_name(self, pid, tid):
        return sources.thread_name(pid, tid)

    def online_cpus(self):
        try:
            return sorted(os.sched_getaffinity(0)) if not Path("/sys/devices/system/cpu/online").exists() \
                else _parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
        except OSError:
            return list(range(os.cpu_count() or 1))

    def now(self):
        return time.monotonic()

    def wait(self, seconds, target, fds=()):
        """Sleep up to `seconds`, waking early when the target exits or one of `fds` (ring
        buffers) has records. True when it slept the whole time with nothing to report (so the
        target, watched through its pidfd, is still running); None when it cannot tell."""
        if seconds <= 0:
            return None
        watch = list(fds) + ([target.pidfd] if target.pidfd is not None else [])
        if watch:
            try:
                r, _, _ = select.select(watch, [], [], seconds)
                return (not r) if target.pidfd is not None else None
            except (OSError, ValueError):
                pass
        time.sleep(seconds)
        return None


def _parse_cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


# ============================================================================================
# the target

#: How long a command gets to end on SIGTERM (--duration) before SIGKILL.
STOP_GRACE_S = 2.0


class Target:
    """What is monitored: a command corecast launches, a running process, or the system."""

    def __init__(self, kind: str, pid: int = -1, argv: Sequence[str] | None = None,
                 child: Launched | None = None, env: dict[str, str] | None = None):
        self.env = env
        self.kind = kind            # command | pid | system
        self.pid = pid
        self.argv = list(argv or [])
        self.child = child
        self.pidfd: int | None = None
        self.exit_status: int | None = None

    @classmethod
    def command(cls, argv: Sequence[str], env: dict[str, str] | None = None) -> "Target":
        return cls("command", argv=argv, env=env)

    @classmethod
    def attach(cls, pid: int) -> "Target":
        if not Path(f"/proc/{pid}").is_dir():
            raise UserError(f"-p {pid}: no such process")
        return cls("pid", pid=pid)

    @classmethod
    def system(cls) -> "Target":
        return cls("system")

    def prepare(self) -> None:
        """Fork the command (stopped before exec)."""
        if self.kind == "command" and self.child is None:
            self.child = launch(self.argv, env=self.env)
            self.pid = self.child.pid
        if self.pid > 0:
            try:
                self.pidfd = os.pidfd_open(self.pid)
            except (OSError, AttributeError):
                self.pidfd = None

    def start(self) -> None:
        if self.child is not None and not self.child.started:
            self.child.start()

    def alive(self) -> bool:
        if self.kind == "system":
            return True
        if self.child is not None:
            return self.child.poll() is None
        return Path(f"/proc/{self.pid}").is_dir() and _not_zombie(self.pid)

    def finish(self) -> None:
        if self.child is not None:
            if self.child.started:
                self.exit_status = self.child.wait()
            else:
                self.child.abandon()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _not_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


# ============================================================================================
# virtual counters

@dataclass
class VirtValue:
    name: str
    value: float | None
    unit: str
    status: str = "ok"         # ok | unavailable
    message: str = ""
    scope: str = "thread"      # thread | process | system

    def to_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "unit": self.unit, "status": self.status,
                "message": self.message, "scope": self.scope}


VIRTUAL_COUNTERS: dict[str, tuple[str, str, str]] = {
    # name: (unit, scope, description)
    "runq_delay": ("ns", "thread", "time waiting on a run queue (schedstat)"),
    "run_time": ("ns", "thread", "time on CPU (schedstat)"),
    "timeslices": ("count", "thread", "timeslices run (schedstat)"),
    "ctxsw": ("count", "thread", "context switches, voluntary + involuntary (/proc status)"),
    "ctxsw_vol": ("count", "thread", "voluntary context switches (/proc status)"),
    "ctxsw_invol": ("count", "thread", "involuntary context switches (/proc status)"),
    "psi_cpu_some": ("us", "system", "PSI: time some task waited for a CPU"),
    "psi_cpu_full": ("us", "system", "PSI: time all non-idle tasks waited for a CPU"),
    "psi_mem_some": ("us", "system", "PSI: time some task stalled on memory"),
    "psi_mem_full": ("us", "system", "PSI: time all non-idle tasks stalled on memory"),
    "psi_io_some": ("us", "system", "PSI: time some task stalled on I/O"),
    "psi_io_full": ("us", "system", "PSI: time all non-idle tasks stalled on I/O"),
    "energy": ("J", "system", "RAPL energy of all packages (powercap)"),
    "energy_dram": ("J", "system", "RAPL DRAM energy (powercap)"),
    "llc_occupancy": ("bytes", "process", "LLC occupancy of the target's threads (resctrl)"),
    "mem_bw": ("bytes", "process", "memory traffic of the target's threads (resctrl mbm_total)"),
    "mem_bw_local": ("bytes", "process", "local memory traffic (resctrl mbm_local)"),
}
VIRTUAL_ALIASES = {"psi_memory_some": "psi_mem_some", "psi_memory_full": "psi_mem_full",
                   "schedstat": "runq_delay", "context_switches": "ctxsw", "rapl": "energy"}


def parse_virtual(text: str | Sequence[str] | None) -> list[str]:
    if not text:
        return []
    items = text.split(",") if isinstance(text, str) else [i for t in text for i in t.split(",")]
    out = []
    for it in items:
        k = it.strip().lower()
        if not k:
            raise UserError(f"-V '{text}': empty virtual counter name")
        k = VIRTUAL_ALIASES.get(k, k)
        if k == "psi":
            out.extend(n for n in VIRTUAL_COUNTERS if n.startswith("psi_"))
            continue
        if k not in VIRTUAL_COUNTERS:
            raise UserError(f"-V: unknown virtual counter '{it.strip()}' (known: "
                            f"{', '.join(VIRTUAL_COUNTERS)}, psi)")
        if k not in out:
            out.append(k)
    return out


class VirtualSampler:
    """Reads the virtual counters; `sample()` is called in the same tick as the counters."""

    def __init__(self, names: Sequence[str], pid: int, proc: Path = sources.PROC,
                 sys_root: Path = sources.SYS):
        self.names = list(names)
        self.pid = pid
        self.proc = proc
        self.sys_root = sys_root
        self.unavailable: dict[str, str] = {}
        self._prev_thread: dict[tuple[str, int], float] = {}
        self._prev_sys: dict[str, float] = {}
        self._rapl: list[sources.RaplDomain] = []
        self._resctrl: sources.ResctrlGroup | None = None
        self._setup()

    def _setup(self) -> None:
        want = set(self.names)
        if want & {"runq_delay", "run_time", "timeslices"}:
            why = sources.schedstat_unavailable(self.proc)
            if why is None and self.pid <= 0:
                why = "schedstat is per thread: give a command or -p PID"
            if why:
                for n in want & {"runq_delay", "run_time", "timeslices"}:
                    self.unavailable[n] = why
        if want & {"ctxsw", "ctxsw_vol", "ctxsw_invol"} and self.pid <= 0:
            for n in want & {"ctxsw", "ctxsw_vol", "ctxsw_invol"}:
                self.unavailable[n] = "context switches are per thread: give a command or -p PID"
        psi_names = [n for n in want if n.startswith("psi_")]
        if psi_names:
            p = sources.psi(proc=self.proc)
            if isinstance(p, sources.Unavailable):
                for n in psi_names:
                    self.unavailable[n] = p.reason
            else:
                for n in psi_names:
                    res = {"cpu": "cpu", "mem": "memory", "io": "io"}[n.split("_")[1]]
                    if res not in p:
                        self.unavailable[n] = f"/proc/pressure/{res} is missing"
                    elif n.endswith("_full") and p[res].full_us is None:
                        self.unavailable[n] = f"this kernel has no 'full' line in /proc/pressure/{res}"
        if want & {"energy", "energy_dram"}:
            r = sources.rapl_domains(self.sys_root)
            if isinstance(r, sources.Unavailable):
                for n in want & {"energy", "energy_dram"}:
                    self.unavailable[n] = r.reason
            else:
                self._rapl = r
                if "energy_dram" in want and not any(d.name.startswith("dram") for d in r):
                    self.unavailable["energy_dram"] = "no RAPL DRAM domain on this machine"
                if "energy" in want and not any(d.name.startswith("package") for d in r):
                    self.unavailable["energy"] = "no RAPL package domain on this machine"
        rc = want & {"llc_occupancy", "mem_bw", "mem_bw_local"}
        if rc:
            if self.pid <= 0:
                why: str | None = "resctrl monitoring follows the target's threads: give a command or -p PID"
            else:
                g = sources.resctrl_group(f"corecast-{os.getpid()}-{self.pid}", self.sys_root)
                why = g.reason if isinstance(g, sources.Unavailable) else None
                if not isinstance(g, sources.Unavailable):
                    self._resctrl = g
            if why:
                for n in rc:
                    self.unavailable[n] = why
        # prime system-wide baselines
        self._system_now()

    def add_threads(self, tids: Sequence[int]) -> None:
        if self._resctrl is not None:
            self._resctrl.add_tasks(tids)

    def _system_now(self) -> dict[str, float]:
        cur: dict[str, float] = {}
        names = [n for n in self.names if n not in self.unavailable]
        if any(n.startswith("psi_") for n in names):
            p = sources.psi(proc=self.proc)
            if not isinstance(p, sources.Unavailable):
                for n in names:
                    if n.startswith("psi_"):
                        res = {"cpu": "cpu", "mem": "memory", "io": "io"}[n.split("_")[1]]
                        pr = p.get(res)
                        if pr is not None:
                            v = pr.full_us if n.endswith("_full") else pr.some_us
                            if v is not None:
                                cur[n] = float(v)
        for d in self._rapl:
            e = sources.read_energy_uj(d)
            if e is not None:
                cur[f"rapl:{d.name}"] = float(e)
        if self._resctrl is not None:
            r = self._resctrl.read()
            for key, n in (("llc_occupancy", "llc_occupancy"), ("mbm_total_bytes", "mem_bw"),
                           ("mbm_local_bytes", "mem_bw_local")):
                if r.get(key) is not None:
                    cur[n] = float(r[key])  # type: ignore[arg-type]
        return cur

    def sample_system(self) -> dict[str, VirtValue]:
        """System- and process-scope counters: deltas since the previous call."""
        cur = self._system_now()
        out: dict[str, VirtValue] = {}
        for n in self.names:
            unit, scope, _ = VIRTUAL_COUNTERS[n]
            if scope == "thread":
                continue
            if n in self.unavailable:
                out[n] = VirtValue(n, None, unit, "unavailable", self.unavailable[n], scope)
                continue
            if n in ("energy", "energy_dram"):
                total, seen = 0.0, False
                for d in self._rapl:
                    if (n == "energy") != d.name.startswith("package"):
                        continue
                    k = f"rapl:{d.name}"
                    if k in cur and k in self._prev_sys:
                        total += sources.energy_delta_uj(int(cur[k]), int(self._prev_sys[k]), d.max_uj)
                        seen = True
                out[n] = VirtValue(n, total / 1e6 if seen else None, unit, "ok", "" if seen else "no reading", scope)
                continue
            if n == "llc_occupancy":
                out[n] = VirtValue(n, cur.get(n), unit, "ok", "", scope)
                continue
            if n in cur and n in self._prev_sys:
                out[n] = VirtValue(n, cur[n] - self._prev_sys[n], unit, "ok", "", scope)
            else:
                out[n] = VirtValue(n, None, unit, "ok", "no reading", scope)
        self._prev_sys = cur
        return out

    def sample_thread(self, tid: int, final: bool = False, pid: int | None = None) -> dict[str, VirtValue]:
        """Thread-scope counters of thread `tid` of process `pid` (default: the target)."""
        pid = self.pid if pid is None else pid
        out: dict[str, VirtValue] = {}
        st = ctx = None
        for n in self.names:
            unit, scope, _ = VIRTUAL_COUNTERS[n]
            if scope != "thread":
                continue
            if n in self.unavailable:
                out[n] = VirtValue(n, None, unit, "unavailable", self.unavailable[n], scope)
                continue
            if n in ("runq_delay", "run_time", "timeslices"):
                if st is None:
                    st = sources.thread_schedstat(pid, tid, self.proc)
                cur = None if st is None else {"runq_delay": st.wait_ns, "run_time": st.run_ns,
                                               "timeslices": st.timeslices}[n]
            else:
                if ctx is None:
                    ctx = sources.context_switches(pid, tid, self.proc)
                cur = None if ctx is None else {"ctxsw": ctx.total, "ctxsw_vol": ctx.voluntary,
                                                "ctxsw_invol": ctx.involuntary}[n]
            key = (n, tid)
            if cur is None:
                msg = "the thread exited before it could be read" if final else "not readable"
                out[n] = VirtValue(n, None, unit, "ok", msg, scope)
                continue
            prev = self._prev_thread.get(key, 0.0)
            self._prev_thread[key] = float(cur)
            out[n] = VirtValue(n, float(cur) - prev, unit, "ok", "", scope)
        return out

    def prime_thread(self, tid: int) -> None:
        """Baseline a thread seen for the first time mid-run: its schedstat counts from its
        creation, which is what we want, so nothing to do; kept for symmetry."""

    def close(self) -> None:
        if self._resctrl is not None:
            self._resctrl.remove()
            self._resctrl = None


# ============================================================================================
# derived metrics

BUILTIN_METRICS = {
    "ipc": "instr / cycles",
    "cpi": "cycles / instr",
    "mpki": "1000 * llc_misses / instr",
    "miss_rate": "llc_misses / llc_refs",
    "branch_miss_rate": "branch_misses / branches",
    "stall_ratio": "backend_stalls / cycles",
    "utilization": "task_clock / interval_ns",
}
_ALLOWED_NODES = (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Add, ast.Sub, ast.Mult, ast.Div,
                  ast.USub, ast.UAdd, ast.Constant, ast.Name, ast.Load, ast.Pow)


@dataclass
class Metric:
    name: str
    expr: str
    names: tuple[str, ...]
    _code: Any = None

    def evaluate(self, env: dict[str, float | None]) -> float | None:
        vals = {}
        for n in self.names:
            v = env.get(n)
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return None
            vals[n] = v
        try:
            r = eval(self._code, {"__builtins__": {}}, vals)  # noqa: S307 -- AST checked below
        except (ZeroDivisionError, OverflowError, ValueError):
            return None
        return float(r)


def parse_metric(text: str) -> Metric:
    """`NAME=EXPR` (or a built-in NAME: ipc, cpi, mpki, miss_rate, branch_miss_rate,
    stall_ratio, utilization). EXPR uses event names (mnemonics, pmcN, stall_*,
    backend_stalls = sum of the stall events), virtual counters, interval_ns, numbers,
    + - * / ** and parentheses."""
    name, eq, expr = text.partition("=")
    name = name.strip()
    if not eq:
        if name in BUILTIN_METRICS:
            expr = BUILTIN_METRICS[name]
        else:
            raise UserError(f"-m '{text}': write NAME=EXPR, or a built-in metric "
                            f"({', '.join(BUILTIN_METRICS)})")
    if not name.isidentifier():
        raise UserError(f"-m '{text}': metric name '{name}' must be an identifier")
    expr = expr.strip()
    if not expr:
        raise UserError(f"-m '{text}': empty expression")
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError:
        raise UserError(f"-m '{text}': cannot parse the expression '{expr}'") from None
    names = []
    for node in ast.walk(tree):
        if not isinstance(node, _ALLOWED_NODES):
            raise UserError(f"-m '{text}': only numbers, names, + - * / ** and parentheses are allowed")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float)):
            raise UserError(f"-m '{text}': '{node.value!r}' is not a number")
        if isinstance(node, ast.Name):
            names.append(node.id)
    return Metric(name, expr, tuple(dict.fromkeys(names)), compile(tree, "<metric>", "eval"))


def check_metric_names(metrics: Sequence[Metric], sets: Sequence[Sequence[EventSpec]],
                       virtual: Sequence[str]) -> None:
    known = {"interval_ns"} | set(virtual)
    for s in sets:
        for e in s:
            known |= {e.ident, e.label}
            if e.name.startswith("stall_"):
                known.add("backend_stalls")
    for m in metrics:
        missing = [n for n in m.names if n not in known]
        if missing:
            raise UserError(f"-m {m.name}={m.expr}: unknown name(s) {', '.join(missing)} "
                            f"(events and virtual counters here: {', '.join(sorted(known))})")


# ============================================================================================
# rows

def _reading(v: CounterValue) -> Any:
    """A counter's reading as the monitor keeps it: (raw, enabled_ns, running_ns, lost) when it
    was read, else the CounterValue that says why not."""
    if v.status == "ok" and v.raw is not None:
        return (v.raw, v.enabled_ns, v.running_ns, v.lost)
    return v


def _deltas(specs: Sequence[EventSpec], cur: Sequence[Any], prev: Sequence[Any] | None) -> list[CounterValue]:
    """The counts between two readings of the same counters (`perf.delta_value` on readings),
    scaled by that interval's enabled/running times."""
    out = []
    for i, c in enumerate(cur):
        if c.__class__ is not tuple:
            out.append(c)
            continue
        raw, en, run, lost = c
        p = prev[i] if prev is not None else None
        if p is not None and p.__class__ is tuple:
            raw -= p[0]
            en -= p[1]
            run -= p[2]
            if lost is not None:
                lost -= p[3] or 0
        val, msg = interval_value(raw, en, run)
        spec = specs[i]
        out.append(CounterValue(spec.name, val, raw, en, run, "ok", msg, lost, spec))
    return out


@dataclass(slots=True)
class Row:
    nsample: int
    time_s: float
    pid: int
    tid: int | None
    cpu: int | None
    comm: str
    sample_type: str                  # tick | ebs | exit
    set_index: int
    values: list[CounterValue]        # counts in this interval, for the live set
    virt: dict[str, VirtValue] = field(default_factory=dict)
    metrics: dict[str, float | None] = field(default_factory=dict)
    interval_ns: int = 0

    def env(self) -> dict[str, float | None]:
        env: dict[str, float | None] = {"interval_ns": float(self.interval_ns)}
        stalls = [v.value for v in self.values if v.spec is not None and v.spec.name.startswith("stall_")]
        for v in self.values:
            if v.spec is not None:
                env[v.spec.ident] = v.value
                env[v.spec.label] = v.value
        if stalls:
            env["backend_stalls"] = None if any(s is None for s in stalls) else float(sum(stalls))  # type: ignore[arg-type]
        for k, vv in self.virt.items():
            env[k] = vv.value
        return env

    def to_dict(self) -> dict:
        return {"nsample": self.nsample, "time_s": round(self.time_s, 6), "pid": self.pid, "tid": self.tid,
                "cpu": self.cpu, "comm": self.comm, "sample_type": self.sample_type, "set": self.set_index,
                "interval_ns": self.interval_ns,
                "counters": [v.to_dict() for v in self.values],
                "virtual": {k: v.to_dict() for k, v in self.virt.items()},
                "metrics": self.metrics}


@dataclass
class Totals:
    """Sums over the whole run, per set and event (for -A and the closing summary)."""

    per_set: list[dict[str, list[float]]] = field(default_factory=list)   # name -> [value, raw, en, run]
    status: list[dict[str, tuple[str, str]]] = field(default_factory=list)
    virt: dict[str, float | None] = field(default_factory=dict)
    virt_info: dict[str, VirtValue] = field(default_factory=dict)
    rows: int = 0
    lost_samples: int = 0
    throttled: int = 0

    def add(self, row: Row, count_system_virt: bool) -> None:
        self.rows += 1
        while len(self.per_set) <= row.set_index:
            self.per_set.append({})
            self.status.append({})
        d = self.per_set[row.set_index]
        st = self.status[row.set_index]
        for v in row.values:
            name = v.name
            acc = d.get(name)
            if acc is None:
                acc = d[name] = [0.0, 0, 0, 0]
            ok = v.status == "ok"
            if ok and v.value is not None:
                acc[0] += v.value
                acc[1] += v.raw or 0
            acc[2] += v.enabled_ns
            acc[3] += v.running_ns
            if not ok or name not in st:
                st[name] = (v.status, v.message)
        if not row.virt:
            return
        for k, vv in row.virt.items():
            self.virt_info.setdefault(k, vv)
            if vv.scope != "thread" and not count_system_virt:
                continue
            if vv.value is None:
                self.virt.setdefault(k, None)
                continue
            if k == "llc_occupancy":
                self.virt[k] = max(self.virt.get(k) or 0.0, vv.value)
            else:
                self.virt[k] = (self.virt.get(k) or 0.0) + vv.value


# ============================================================================================
# the monitor

@dataclass
class _ThreadState:
    tid: int
    comm: str
    handles: list[Handle | None]         # one per set
    prev: list[list[Any] | None]         # per set: the last readings (see _reading)
    sampler: Any = None
    prev_sample: list[int] | None = None
    prev_sample_times: tuple[int, int] = (0, 0)
    last_sample_time: float = 0.0
    pid: int = -1                        # its process (a child process of the target has its own)
    root: bool = True                    # counted by counters opened on it, not inherited ones
    opened: bool = True                  # its own counters are open (False: it was gone first)
    exited: bool = False                 # the kernel reported its exit
    reads: dict[tuple[int, int], list[tuple[int, int, int, int | None]]] = field(default_factory=dict)
    nreads: int = 0
    fresh: bool = False                  # picked up at the tick being made: its first row is the next tick's


THREAD_TRACKING = ("kernel", "poll")


class Monitor:
    def __init__(self, sets: Sequence[Sequence[EventSpec]], target: Target, interval: float = 1.0,
                 virtual: Sequence[str] = (), per_cpu: bool = False, totals_only: bool = False,
                 metrics: Sequence[Metric] = (), backend: Backend | None = None,
                 discover_period: float = 0.05, max_duration: float | None = None,
                 cpus: Sequence[int] | None = None, thread_tracking: str = "kernel",
                 batch_period: float = BATCH_PERIOD, wake: str = "auto"):
        if not sets and not virtual:
            raise UserError("no events: give at least one -c SPEC (or -V for virtual counters only)")
        if not sets:
            sets = [[]]
        if interval < MIN_INTERVAL - 1e-12:
            raise UserError(f"-T {interval}: the interval must be at least {MIN_INTERVAL} s")
        if thread_tracking not in THREAD_TRACKING:
            raise UserError(f"--threads {thread_tracking}: choose {' or '.join(THREAD_TRACKING)}")
        if wake not in WAKES:
            raise UserError(f"--wake {wake}: choose {', '.join(WAKES)}")
        self.sets = [list(s) for s in sets]
        self.target = target
        self.interval = float(interval)
        self.virtual_names = list(virtual)
        self.per_cpu = per_cpu
        self.totals_only = totals_only
        self.metrics = list(metrics)
        self.backend: Backend = backend or PerfBackend()
        self.discover_period = discover_period
        self.max_duration = max_duration
        self.cpus = list(cpus) if cpus is not None else None
        self.thread_tracking = thread_tracking
        ebs = [(i, e) for i, s in enumerate(self.sets) for e in s if e.sample_period]
        if ebs and len(self.sets) > 1:
            raise UserError("event-based sampling (ebs) takes one event set: drop the other -c sets")
        if ebs and (per_cpu or totals_only):
            raise UserError("event-based sampling (ebs) works per thread: drop -S / -A")
        self.ebs = bool(ebs)
        check_metric_names(self.metrics, self.sets, self.virtual_names)
        self.totals = Totals()
        self.nsample = 0
        self.live = 0
        self.threads: dict[int, _ThreadState] = {}
        self.cpu_states: dict[int, _ThreadState] = {}
        self.proc_state: _ThreadState | None = None
        self.notes: list[str] = []
        self.t0 = 0.0
        self.vsampler: VirtualSampler | None = None
        self.tracker: Any = None              # perf.TaskTracker (or a backend's equivalent)
        self.inherited: list[list[CounterValue]] | None = None   # the process's totals, per set
        self.lost_task_records = 0
        self._empty_wakes = 0
        self._record_gaps = 0                 # threads whose exit counts came from their own counters
        self.threads_followed = ""            # per-thread mode: "kernel" (task records) or "poll" (/proc)
        self.mappings: list[list[tuple[str, EventSpec]]] = [
            [(e.label if e.pmc is not None else f"pmc{j}", e) for j, e in enumerate(s)] for s in self.sets]
        # ticks taken in C, several per call (backend.ticks): see _next_tick
        self.batch_period = batch_period
        # wake on a task record or the target's end at once (ppoll), or look at each tick (a
        # plain sleep, cheaper; a launched command's end still wakes it through SIGCHLD)
        self.wake_on_records = wake == "records" or (wake == "auto" and self.interval > TICK_WAKE_MAX + 1e-12)
        self.ticks_native = 0                 # ticks whose counters were read in C
        self._batching = True
        self._buffer: deque[tuple[float, list]] = deque()   # ticks taken ahead, not yet turned into rows
        self._buffer_drain = True
        self._pending_wake = False            # a batch ended on a watched descriptor after its last tick
        self._plan_index: dict[int, int] = {}
        self._plan_list: list[Handle] = []
        self._plan_rows: list[tuple[Any, int, int | None, int | None]] | None = None
        self._plan_key: tuple[int, int, int] | None = None
        self._plan_gen = 0                    # bumped when a thread is added, ends or closes
        self._last_why = ""
        self._tick_values: list | None = None  # the readings of the tick being turned into rows
        self._tick_drain = True               # whether that tick's rows must drain the task records first
        self._idle: Callable[[], None] | None = None
        self._stop: int | None = None         # the signal that ended the run
        self._sigfd: int | None = None
        self._sig_saved: tuple[Any, ...] | None = None
        self._sigchld = False

    @property
    def exact_threads(self) -> bool:
        """Whether threads were followed through the kernel's task records (exact exit rows)."""
        return self.threads_followed == "kernel"

    # ---------------------------------------------------------------------------------------
    def _open_sets(self, pid: int, cpu: int, inherit: bool, enable_on_exec: bool) -> list[Handle | None]:
        out: list[Handle | None] = []
        try:
            for i, s in enumerate(self.sets):
                if not s:
                    out.append(None)
                    continue
                live = i == self.live
                out.append(self.backend.open(s, pid, cpu, inherit, enable_on_exec and live,
                                             live and not enable_on_exec))
        except UserError:
            for h in out:
                if h is not None:
                    h.close()
            raise
        return out

    def _add_thread(self, tid: int, enable_on_exec: bool = False, pid: int | None = None,
                    root: bool = True) -> _ThreadState | None:
        pid = self.target.pid if pid is None else pid
        comm = self.backend.thread_name(pid, tid)
        try:
            if self.ebs:
                sampler = self.backend.open_sampler(self.sets[0], tid, -1, enable_on_exec, not enable_on_exec)
                ts = _ThreadState(tid, comm, [], [None], sampler=sampler, pid=pid, root=root)
                ts.last_sample_time = self.backend.now()
            else:
                ts = _ThreadState(tid, comm, self._open_sets(tid, -1, False, enable_on_exec),
                                  [None] * len(self.sets), pid=pid, root=root)
        except UserError:
            if tid == self.target.pid and not self.threads:
                raise
            if self.tracker is None:
                return None       # the thread exited between listing and opening
            # gone before its counters could be opened: the kernel's exit record still counts it
            ts = _ThreadState(tid, comm, [None] * len(self.sets), [None] * len(self.sets), pid=pid,
                              root=root, opened=False)
        self.threads[tid] = ts
        self._plan_gen += 1
        if self.vsampler is not None and ts.opened:
            self.vsampler.add_threads([tid])
        return ts

    def _one_counter(self) -> bool:
        """Totals only, counted by one inherited counter on the root: right for a command corecast
        launches (every thread it will have inherits it), wrong for a process attached with -p,
        whose threads already exist (an inherited counter sees only its own thread and those
        created later): those are counted thread by thread and only the totals printed."""
        return self.totals_only and self.target.kind != "pid"

    def _discover(self) -> None:
        if self.target.kind == "system" or self.per_cpu or self._one_counter() or self.tracker is not None:
            return
        for tid in self.backend.threads(self.target.pid):
            if tid not in self.threads:
                self._add_thread(tid)

    # ---------------------------------------------------------------------------------------
    # the kernel's task records

    def _start_tracker(self, enable_on_exec: bool) -> None:
        """Follow the target's threads through task records; on failure say why, once, and
        fall back to /proc."""
        if self.thread_tracking != "kernel":
            return
        opener = getattr(self.backend, "open_tracker", None)
        if opener is None:
            self._fallback("this counter backend gives no task records")
            return
        try:
            self.tracker = opener(self.sets, sorted(self.threads), self.backend.online_cpus(),
                                  enable_on_exec, self.live)
        except TrackerUnavailable as err:
            self._fallback(str(err))
            return
        self.threads_followed = "kernel"
        if self.target.kind == "pid":
            # threads a not-yet-followed thread created while we attached are roots of their own
            for _ in range(5):
                self._drain_tracker()
                new = [t for t in self.backend.threads(self.target.pid) if t not in self.threads]
                if not new:
                    break
                self.backend.wait(0.002, self.target)
                self._drain_tracker()        # a creation record lags /proc by a moment
                for t in new:
                    if t not in self.threads and self._add_thread(t) is not None:
                        try:
                            if not self.tracker.add_root(t, False, self.live):
                                self._close_thread(t)
                        except TrackerUnavailable as err:
                            self._stop_tracker(str(err))
                            return

    def _fallback(self, reason: str) -> None:
        self.threads_followed = "poll"
        ms = f"{self.discover_period * 1000:.0f} ms"
        self.notes.append(f"exact per-thread counts unavailable ({reason}): threads are found in /proc every "
                          f"{ms} or each tick, so a thread that lives shorter may have no row and each thread "
                          f"misses what it counted before it was found; -A counts the whole process exactly")

    def _stop_tracker(self, reason: str) -> None:
        if self.tracker is not None:
            self.tracker.close()
            self.tracker = None
        for ts in self.threads.values():
            ts.root = True
        self._plan_gen += 1
        self._fallback(reason)

    def _ghost(self, tid: int, pid: int) -> _ThreadState:
        """A thread known only from an exit or count record (its creation record was lost)."""
        ts = _ThreadState(tid, self.backend.thread_name(pid, tid), [None] * len(self.sets),
                          [None] * len(self.sets), pid=pid, root=False, opened=False)
        self.threads[tid] = ts
        self._plan_gen += 1
        return ts

    def _drain_tracker(self, at_tick: bool = False) -> bool:
        """Take the records written since the last drain: pick up new threads (opening their
        own counters for the interval rows), note exits and the exiting threads' counts.
        `at_tick`: the drain before a tick's rows -- a thread picked up there has counted
        nothing yet, so its first row is the next tick's (what it did before its counters
        were opened is in its exit row, from the kernel's count)."""
        res = self.tracker.drain()
        self.lost_task_records += res.lost_records
        for rec in res.forks:
            if rec.tid not in self.threads:
                ts = self._add_thread(rec.tid, pid=rec.pid, root=False)
                if ts is not None and at_tick:
                    ts.fresh = True
        for rec in res.exits:
            ts = self.threads.get(rec.tid) or self._ghost(rec.tid, rec.pid)
            ts.exited = True
            self._plan_gen += 1
        for r in res.reads:
            ts = self.threads.get(r.tid) or self._ghost(r.tid, r.pid)
            ts.reads.setdefault((r.set_index, r.index), []).append(
                (r.raw, r.enabled_ns, r.running_ns, r.lost))
            ts.nreads += 1
        return bool(res.forks or res.exits or res.reads or res.lost_records)

    def _complete(self, ts: _ThreadState) -> bool:
        return ts.exited and ts.nreads >= self.tracker.expected_reads

    def _exit_values(self, ts: _ThreadState, s: int, specs: Sequence[EventSpec],
                     reported: dict[str, CounterValue], own: Callable[[], dict[str, CounterValue]] | None
                     ) -> tuple[list[CounterValue], bool]:
        """The exit row of a thread for set `s`: per event, the kernel's count of the thread's
        whole life less what its rows already reported; when that record is missing, the
        delta of the thread's own counter (`own`, when it has one)."""
        ncpu = len(self.tracker.cpus)
        vals: list[CounterValue] = []
        extra = False
        own_vals: dict[str, CounterValue] | None = None
        idx = {e.name: i for i, e in enumerate(self.sets[s])}
        for spec in specs:
            i = idx[spec.name]
            parts = ts.reads.get((s, i))
            prev = reported.get(spec.name)
            if self.tracker.counting(s, i) and parts is not None and len(parts) >= ncpu:
                v = remainder(spec, combine_cpus(spec, parts), prev)
                extra = extra or bool(v.raw)
            elif own is not None:
                if own_vals is None:
                    own_vals = own()
                v = own_vals[spec.name]
                if self.tracker.counting(s, i) and ts.exited:
                    self._record_gaps += 1
                    v.message = ((v.message + "; ") if v.message else "") + \
                        "the kernel's exit record was lost: from the thread's own counter"
            elif not self.tracker.counting(s, i):
                st, msg = self.tracker.failed[s][i]
                v = CounterValue(spec.name, None, None, 0, 0, st, msg, spec=spec)
            else:
                self._record_gaps += 1
                v = CounterValue(spec.name, None, None, 0, 0, "ok",
                                 "not counted: the kernel's exit record was lost", spec=spec)
            vals.append(v)
        return vals, extra

    def _tracked_exit_rows(self, ts: _ThreadState, now: float, interval_ns: int) -> list[Row]:
        """Exit rows of a thread that is not a root: one for the live set, and one for another
        set only when that set counted something its rows did not report (a round-robin set
        that was live while the thread ran before it was picked up)."""
        out = []
        for s, specs in enumerate(self.sets):
            h = ts.handles[s] if s < len(ts.handles) else None
            prev = ts.prev[s] if s < len(ts.prev) else None
            reported = {spec.name: CounterValue(spec.name, None, p[0], p[1], p[2], "ok", "", p[3], spec)
                        for spec, p in zip(specs, prev or ()) if p.__class__ is tuple}
            own = None
            if s == self.live and h is not None:
                def own(h=h, prev=prev, specs=specs):
                    return {v.name: v for v in _deltas(specs, [_reading(c) for c in h.read()], prev)}
            vals, extra = self._exit_values(ts, s, specs, reported, own)
            if s != self.live and not extra:
                continue
            virt = {}
            if s == self.live and self.vsampler is not None:
                virt = self.vsampler.sample_thread(ts.tid, True, ts.pid)
            out.append(Row(0, now - self.t0, ts.pid, ts.tid, None, ts.comm, "exit", s, vals, virt, {},
                           interval_ns))
        return out

    # ---------------------------------------------------------------------------------------
    def _readings(self, h: Handle) -> list:
        """The handle's readings at this tick: taken in C at the tick when it was, else now."""
        tv = self._tick_values
        if tv is not None:
            i = self._plan_index.get(id(h))
            if i is not None:
                return tv[i]
        return [_reading(v) for v in h.read()]

    def _counter_row(self, ts: _ThreadState, now: float, sample_type: str, tid: int | None,
                     cpu: int | None, interval_ns: int, final: bool = False) -> Row | None:
        s = self.live
        h = ts.handles[s]
        if h is None:
            vals: list[CounterValue] = []
        else:
            cur = self._readings(h)
            vals = _deltas(self.sets[s], cur, ts.prev[s])
            ts.prev[s] = cur
        pid = ts.pid if ts.pid > 0 else self.target.pid
        virt: dict[str, VirtValue] = {}
        if self.vsampler is not None and tid is not None:
            virt.update(self.vsampler.sample_thread(tid, final, pid))
        if ts.comm == "" and tid is not None:
            ts.comm = self.backend.thread_name(pid, tid)
        return Row(0, now - self.t0, pid, tid, cpu, ts.comm, sample_type, self.live, vals,
                   virt, {}, interval_ns)

    def _finish_row(self, row: Row, sysvirt: dict[str, VirtValue], first_in_tick: bool) -> Row:
        self.nsample += 1
        row.nsample = self.nsample
        if sysvirt:
            row.virt.update(sysvirt)
        if self.metrics:
            env = row.env()
            for m in self.metrics:
                row.metrics[m.name] = m.evaluate(env)
        self.totals.add(row, count_system_virt=first_in_tick)
        return row

    def _thread_rows(self, now: float, interval_ns: int, final: bool) -> list[Row]:
        rows: list[Row] = []
        if self.tracker is None:
            live_tids = set(self.backend.threads(self.target.pid)) if not final else set()
            for tid, ts in sorted(self.threads.items()):
                gone = final or tid not in live_tids
                r = self._counter_row(ts, now, "exit" if gone else "tick", tid, None, interval_ns, gone)
                if r:
                    rows.append(r)
                if gone:
                    self._close_thread(tid)
            return rows
        if self._tick_drain:
            self._drain_tracker(at_tick=True)
        for tid, ts in sorted(self.threads.items()):
            if ts.root or (final and not ts.exited):
                # a root counts with its own counters; so does, at the end of a run cut short,
                # a thread still running (the kernel writes its record only at its exit)
                gone = final or ts.exited
                if ts.opened:
                    r = self._counter_row(ts, now, "exit" if gone else "tick", tid, None, interval_ns, gone)
                    if r:
                        rows.append(r)
                if gone:
                    self._close_thread(tid)
            elif self._complete(ts) or final:
                rows.extend(self._tracked_exit_rows(ts, now, interval_ns))
                self._close_thread(tid)
            elif ts.fresh:
                ts.fresh = False
            elif not ts.exited and ts.opened:
                r = self._counter_row(ts, now, "tick", tid, None, interval_ns)
                if r:
                    rows.append(r)
            # an exited thread whose count records are still being written: next tick
        return rows

    def _tick_rows(self, now: float, last: float, final: bool) -> list[Row]:
        interval_ns = int(round((now - last) * 1e9))
        rows: list[Row] = []
        if self.per_cpu:
            for cpu, ts in sorted(self.cpu_states.items()):
                r = self._counter_row(ts, now, "exit" if final else "tick", None, cpu, interval_ns)
                if r:
                    r.pid = -1
                    rows.append(r)
        elif self._one_counter() or self.target.kind == "system":
            if self.proc_state is not None:
                r = self._counter_row(self.proc_state, now, "exit" if final else "tick", None, None, interval_ns)
                if r:
                    rows.append(r)
        else:
            rows = self._thread_rows(now, interval_ns, final)
        sysvirt = self.vsampler.sample_system() if self.vsampler is not None else {}
        out = []
        for i, r in enumerate(rows):
            out.append(self._finish_row(r, sysvirt, i == 0))
        return out

    def _ebs_order(self) -> list[EventSpec]:
        s = self.sets[0]
        return [e for e in s if e.sample_period] + [e for e in s if not e.sample_period]

    def _ebs_rows(self, now: float, final: bool) -> list[Row]:
        out: list[Row] = []
        tracked = self.tracker is not None
        if tracked:
            self._drain_tracker()
            live_tids: set[int] = set()
        else:
            live_tids = set(self.backend.threads(self.target.pid)) if not final else set()
        sysvirt = self.vsampler.sample_system() if self.vsampler is not None else {}
        first = True
        for tid, ts in sorted(self.threads.items()):
            if ts.sampler is not None:
                out.extend(self._ebs_samples(ts, now))
            if not tracked:
                gone = final or tid not in live_tids
                own_counts = True
            elif ts.root or (final and not ts.exited):
                gone = final or ts.exited
                own_counts = True
            else:
                gone = final or self._complete(ts)
                own_counts = False
            if not gone:
                continue
            if own_counts:
                if ts.sampler is None:
                    self._close_thread(tid)
                    continue
                vals = self._ebs_own_exit(ts)
            else:
                reported: dict[str, CounterValue] = {}
                if ts.sampler is not None and ts.prev_sample is not None:
                    pen, prun = ts.prev_sample_times
                    opened = [c for c in ts.sampler.counters if c.fd is not None]
                    for c, raw in zip(opened, ts.prev_sample):
                        reported[c.spec.name] = CounterValue(c.spec.name, None, raw, pen, prun, "ok", spec=c.spec)
                own = (lambda ts=ts: {v.name: v for v in self._ebs_own_exit(ts)}) if ts.sampler is not None else None
                vals, _ = self._exit_values(ts, 0, self._ebs_order(), reported, own)
            virt = self.vsampler.sample_thread(tid, True, ts.pid) if self.vsampler is not None else {}
            pid = ts.pid if ts.pid > 0 else self.target.pid
            row = Row(0, now - self.t0, pid, tid, None, ts.comm, "exit", 0, vals, virt, {}, 0)
            out.append(self._finish_row(row, sysvirt, first))
            first = False
            self._close_thread(tid)
        return out

    def _ebs_samples(self, ts: _ThreadState, now: float) -> list[Row]:
        out = []
        res = ts.sampler.drain()
        self.totals.lost_samples += res.lost_records
        self.totals.throttled += res.throttled
        specs = ts.sampler.specs
        for s in res.samples:
            vals = []
            prev = ts.prev_sample or [0] * len(s.values)
            pen, prun = ts.prev_sample_times
            den, drun = s.enabled_ns - pen, s.running_ns - prun
            opened = [c for c in ts.sampler.counters if c.fd is not None] if hasattr(
                ts.sampler, "counters") else None
            order = [c.spec for c in opened] if opened is not None else specs
            byname = {}
            for spec, cur, p in zip(order, s.values, prev):
                raw = cur - p
                byname[spec.name] = CounterValue(spec.name, scale(raw, den, drun), raw, den, drun, "ok", "",
                                                 None, spec)
            for spec in specs:
                vals.append(byname.get(spec.name) or CounterValue(spec.name, None, None, 0, 0, "invalid",
                                                                  "not in the sampled group", spec=spec))
            ts.prev_sample = s.values
            ts.prev_sample_times = (s.enabled_ns, s.running_ns)
            row = Row(0, now - self.t0, s.pid, s.tid, s.cpu, ts.comm, "ebs", 0, vals, {}, {}, 0)
            out.append(self._finish_row(row, {}, False))
        return out

    def _ebs_own_exit(self, ts: _ThreadState) -> list[CounterValue]:
        """What a thread's sampler counted since its last sample."""
        cur = ts.sampler.read()
        prev = ts.prev_sample
        pen, prun = ts.prev_sample_times
        vals = []
        for i, c in enumerate(cur):
            if c.status != "ok" or c.raw is None:
                vals.append(c)
                continue
            praw = prev[i] if prev and i < len(prev) else 0
            raw = c.raw - praw
            den, drun = c.enabled_ns - pen, c.running_ns - prun
            vals.append(CounterValue(c.name, scale(raw, den, drun), raw, den, drun, "ok", "", c.lost, c.spec))
        return vals

    def _close_thread(self, tid: int) -> None:
        ts = self.threads.pop(tid, None)
        if ts is None:
            return
        self._plan_gen += 1
        for h in ts.handles:
            if h is not None:
                h.close()
        if ts.sampler is not None:
            ts.sampler.close()

    def _rotate(self) -> None:
        if len(self.sets) <= 1:
            return
        nxt = (self.live + 1) % len(self.sets)
        states = list(self.threads.values()) + list(self.cpu_states.values())
        if self.proc_state is not None:
            states.append(self.proc_state)
        for ts in states:
            h = ts.handles[self.live]
            if h is not None:
                h.disable()
        if self.tracker is not None:
            self.tracker.disable(self.live)
            self.tracker.enable(nxt)
        for ts in states:
            h = ts.handles[nxt]
            if h is not None:
                h.enable()
        self.live = nxt

    # ---------------------------------------------------------------------------------------
    def start(self) -> None:
        tgt = self.target
        tgt.prepare()
        try:
            if self.virtual_names:
                self.vsampler = VirtualSampler(self.virtual_names, tgt.pid)
            launched = tgt.kind == "command"
            if self.per_cpu:
                cpus = self.cpus if self.cpus is not None else self.backend.online_cpus()
                for cpu in cpus:
                    handles = self._open_sets(-1, cpu, False, False)
                    self.cpu_states[cpu] = _ThreadState(-1, f"cpu{cpu}", handles, [None] * len(self.sets))
                self._check_denied_cpu()
            elif self._one_counter() or tgt.kind == "system":
                if tgt.kind == "system":
                    raise UserError("system-wide counting needs -S (per CPU), or give a command or -p PID")
                handles = self._open_sets(tgt.pid, -1, True, launched)
                self.proc_state = _ThreadState(tgt.pid, "", handles, [None] * len(self.sets))
            else:
                if launched:
                    self._add_thread(tgt.pid, enable_on_exec=True)
                else:
                    for tid in self.backend.threads(tgt.pid):
                        self._add_thread(tid)
                    if not self.threads:
                        raise UserError(f"-p {tgt.pid}: the process has no threads left (it exited)")
                # the roots' own counters (not inherited) are open first: see perf.TaskTracker
                self.threads_followed = "poll"
                self._start_tracker(launched)
            self.t0 = self.backend.now()
            tgt.start()
            if self.proc_state is not None and not self.proc_state.comm:
                self.proc_state.comm = self.backend.thread_name(tgt.pid, tgt.pid)
            for ts in self.threads.values():
                ts.comm = self.backend.thread_name(ts.pid if ts.pid > 0 else tgt.pid, ts.tid) or ts.comm
        except BaseException:
            self.close()
            tgt.finish()
            raise

    def _check_denied_cpu(self) -> None:
        states = list(self.cpu_states.values())
        vals = [h.read() for ts in states for h in ts.handles if h is not None]
        flat = [v for vs in vals for v in vs]
        if flat and all(v.status == "denied" for v in flat):
            raise UserError(denied_message(None, cpu_wide=True))

    def _wait(self, deadline: float, now: float) -> bool:
        """Sleep until the deadline or until something happens: the target ends, or (with
        task records) the kernel reports a thread's creation or exit -- then take it in. True
        when nothing happened (the target is known to be still running)."""
        sig = [self._sigfd] if self._sigfd is not None else []
        if self.tracker is None:
            quiet = self.backend.wait(min(deadline - now, self.discover_period), self.target, sig)
            self._discover()
            if quiet is not True:
                self._drain_sigfd()
            return quiet is True
        if self._empty_wakes < 2:
            quiet = self.backend.wait(deadline - now, self.target, self.tracker.fds + sig)
        else:
            # buffers that keep waking with nothing new (the kernel flags them hung up once
            # every task is gone): sleep in steps until the target is reaped
            quiet = self.backend.wait(min(deadline - now, self.discover_period), self.target, sig)
        if quiet is True:
            return True
        self._woken()
        return False

    def _woken(self) -> None:
        """Take in what woke a wait before its deadline (task records; a signal, a thread to
        find in /proc)."""
        self._drain_sigfd()
        if self.tracker is None:
            self._discover()
            return
        got = self._drain_tracker()
        self._empty_wakes = 0 if got else self._empty_wakes + 1

    def _look(self) -> bool:
        """A tick right after which a watched descriptor was ready (records, the target's end,
        a signal): take that in before the tick's rows. True when the run ends at that tick."""
        self._drain_sigfd()
        if self.tracker is not None:
            got = self._drain_tracker(at_tick=True)
            self._empty_wakes = 0 if got else self._empty_wakes + 1
        return self._stop is not None or not self.target.alive()

    def _plan(self) -> list[Handle]:
        """The handles whose readings the rows of a tick need (see _thread_rows)."""
        key = (self.live, len(self.threads), self._plan_gen)
        if key == self._plan_key:
            return self._plan_list
        tp = self.target.pid
        if self.per_cpu:
            states = [(ts, -1, None, cpu) for cpu, ts in sorted(self.cpu_states.items())]
        elif self.proc_state is not None:
            ps = self.proc_state
            states = [(ps, ps.pid if ps.pid > 0 else tp, None, None)]
        else:
            states = [(ts, ts.pid if ts.pid > 0 else tp, tid, None) for tid, ts in sorted(self.threads.items())
                      if ts.opened and (ts.root or not ts.exited)]
        plan = []
        rows = []
        for st in states:
            h = st[0].handles[self.live]
            if h is not None:
                plan.append(h)
                rows.append(st)
        self._plan_index = {id(h): i for i, h in enumerate(plan)}
        self._plan_list, self._plan_key = plan, key
        # a tick whose rows are exactly one `tick` row per planned handle (see _quiet_rows):
        # every state has its counters and no thread has ended
        self._plan_rows = rows if (len(rows) == len(states) and self.vsampler is None and
                                   not any(ts.exited for ts in self.threads.values()) and
                                   all(st[0].comm for st in states)) else None
        return plan

    def _quiet_rows(self, now: float, last: float, values: list) -> list[Row] | None:
        """The rows of a tick taken in C in a quiet stretch (no record, no end, no virtual
        counter): one `tick` row per planned handle, in _tick_rows' order; None when the
        general path must make them."""
        rows_of = self._plan_rows
        if rows_of is None or self._plan_key != (self.live, len(self.threads), self._plan_gen):
            return None
        s = self.live
        specs = self.sets[s]
        interval_ns = int(round((now - last) * 1e9))
        t = now - self.t0
        add = self.totals.add
        metrics = self.metrics
        out = []
        first = True
        for (ts, pid, tid, cpu), cur in zip(rows_of, values):
            vals = _deltas(specs, cur, ts.prev[s])
            ts.prev[s] = cur
            self.nsample += 1
            row = Row(self.nsample, t, pid, tid, cpu, ts.comm, "tick", s, vals, {}, {}, interval_ns)
            if metrics:
                env = row.env()
                for m in metrics:
                    row.metrics[m.name] = m.evaluate(env)
            add(row, first)
            first = False
            out.append(row)
        return out

    def _ticks_per_call(self) -> int:
        """How many ticks one call of backend.ticks may take: as many as fit in batch_period
        when every tick's rows come from counters alone, else one (round-robin sets rotate,
        and virtual counters are read, in Python at each tick)."""
        if len(self.sets) > 1 or self.vsampler is not None or self.batch_period <= 0:
            return 1
        return max(1, int(self.batch_period / self.interval + 1e-9))

    def _take(self, k: int) -> native_ticks.TickBatch | None:
        """Ticks k, k+1, ... taken by the backend (None: it cannot; wait in Python)."""
        ticker = getattr(self.backend, "ticks", None)
        if not self._batching or ticker is None or self.ebs or self.threads_followed == "poll":
            return None
        count = self._ticks_per_call()
        if self.max_duration is not None:
            # the tick that ends the run is taken in Python, as the final one
            count = min(count, math.ceil((self.max_duration - 1e-9) / self.interval) - k)
            if count <= 0:
                return None
        ring = self.tracker is not None and self._empty_wakes < 2
        if self.wake_on_records:
            watch = list(self.tracker.fds) if ring else []
            if self._sigfd is not None:
                watch.append(self._sigfd)
            rings: list[int] = []
        else:
            # looked at after each tick: the buffers' heads in memory; signals end the sleep
            watch = []
            rings = self.tracker.rings if ring else []
        batch = ticker(self._plan(), self.t0, self.interval, k, count, self.target, watch,
                       self.wake_on_records, rings)
        if batch is None:
            self._batching = False
            return None
        if batch.why == "error":
            self._batching = False       # wait in Python from now on
        # with the ring buffers watched a record ends the batch, so its ticks come before any
        # record not yet drained; otherwise the rows drain them at each tick, as in Python
        self._buffer_drain = self.tracker is not None and not ring
        self.ticks_native += len(batch.ticks)
        return batch

    def _next_tick(self, k: int) -> tuple[float, bool, list | None, bool]:
        """Wait for tick k: (its time, whether the run ends there, the readings taken in C at
        the tick or None, whether its rows must drain the task records first)."""
        if self._buffer:
            now, values, drain, look = self._buffer.popleft()
            return now, self._look() if look else False, values, drain
        deadline = self.t0 + k * self.interval
        ended = False
        self._empty_wakes = 0
        # known to be running since the last look: a batch that took all its ticks saw no exit
        running = self._last_why == "all"
        self._last_why = ""
        if self._pending_wake:
            self._pending_wake = False
            self._woken()
        while True:
            if self._stop is not None:
                ended = True
                break
            now = self.backend.now()
            if now >= deadline - 1e-9:
                break
            if not running and not self.target.alive():
                ended = True
                break
            if self._idle is not None:
                self._idle()
            batch = self._take(k)
            if batch is None:
                running = self._wait(deadline, now)
                continue
            if batch.ticks:
                # the target was running at each of them (its pidfd was not ready), and no
                # record came before them that was not drained -- but for a batch that found a
                # watched descriptor ready right after its last tick: that one looks first
                d = self._buffer_drain
                entries = [(t, v, d, False) for t, v in batch.ticks]
                if batch.why == "ready" and not batch.wake:
                    t, v, _, _ = entries[-1]
                    entries[-1] = (t, v, False, True)
                    self._pending_wake = False
                else:
                    self._pending_wake = batch.why != "all"
                self._last_why = batch.why
                self._buffer.extend(entries)
                now, values, drain, look = self._buffer.popleft()
                return now, self._look() if look else False, values, drain
            running = False
            self._woken()
        now = self.backend.now()
        if not ended and not running and not self.target.alive():
            ended = True
        return now, ended, None, True

    def run(self, idle: Callable[[], None] | None = None, handle_signals: bool = False) -> Iterator[Row]:
        """Start the target, then yield rows as they are measured, until the target exits (or
        max_duration passes, or KeyboardInterrupt). Rows measured before an error are yielded
        before it is raised.

        `idle` is called before each sleep (the CLI flushes its output there). With
        `handle_signals` (main thread only), SIGINT, SIGTERM and SIGHUP end the run as the
        target's exit does: a last row for every thread, then the totals; SIGTERM and SIGHUP
        are passed on to a command corecast launched. A second signal raises KeyboardInterrupt."""
        self._idle = idle
        try:
            if handle_signals:
                self._catch_signals()
            yield from self._run()
        finally:
            self._release_signals()

    def _run(self) -> Iterator[Row]:
        self.start()
        last = self.t0
        k = 0
        try:
            while True:
                k += 1
                now, ended, values, drain = self._next_tick(k)
                if self.max_duration is not None and now - self.t0 >= self.max_duration - 1e-9:
                    ended = True
                rows = None
                if values is not None and not ended and not drain:
                    rows = self._quiet_rows(now, last, values)
                if rows is None:
                    self._tick_values, self._tick_drain = values, drain
                    try:
                        if self.ebs:
                            rows = self._ebs_rows(now, ended)
                        else:
                            rows = self._tick_rows(now, last, ended)
                    finally:
                        self._tick_values, self._tick_drain = None, True
                for r in rows:
                    yield r
                last = now
                if ended:
                    break
                self._rotate()
                if not self._buffer:
                    self._discover()
        finally:
            self.close()
            if self.target.kind == "command" and self.target.child is not None and \
                    self.target.child.status is None and self.max_duration is not None:
                self.target.child.stop(grace=STOP_GRACE_S)     # SIGKILL if SIGTERM is ignored
            self.target.finish()

    # ---------------------------------------------------------------------------------------
    # signals: end the run cleanly, with every row and the totals

    def _catch_signals(self) -> None:
        try:
            r, w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return
        try:
            old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
        except (ValueError, OSError):         # not the main thread
            os.close(r)
            os.close(w)
            return
        self._sigfd = r
        self._sig_saved = (r, w, old_fd, old)
        # a launched command's end ends the sleep between ticks (see wake_on_records)
        hook = getattr(self.backend, "catch_sigchld", None)
        self._sigchld = bool(hook is not None and self.target.kind == "command" and not self.wake_on_records
                             and hook(True))

    def _release_signals(self) -> None:
        if self._sig_saved is None:
            return
        r, w, old_fd, old = self._sig_saved
        self._sig_saved = None
        self._sigfd = None
        if self._sigchld:
            self.backend.catch_sigchld(False)  # type: ignore[attr-defined]
            self._sigchld = False
        for s, h in old.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(old_fd)
        os.close(r)
        os.close(w)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self._stop is not None:
            raise KeyboardInterrupt
        self._stop = signum
        name = signal.Signals(signum).name
        child = self.target.child if self.target.kind == "command" else None
        if signum != signal.SIGINT and child is not None and child.started:
            child.kill(signum)
            self.notes.append(f"stopped by {name} (passed on to the command)")
        else:
            self.notes.append("interrupted" if signum == signal.SIGINT else f"stopped by {name}")

    def _drain_sigfd(self) -> None:
        if self._sigfd is None:
            return
        try:
            while os.read(self._sigfd, 512):
                pass
        except OSError:
            pass

    def _settle_tracker(self) -> None:
        """The process's inherited totals, and whether the per-thread rows add up to them."""
        tr = self.tracker
        self.inherited = [tr.read(s) for s in range(len(self.sets))]
        if self.lost_task_records:
            self.notes.append(f"the kernel's ring buffer overflowed: {self.lost_task_records} task records lost")
        if self._record_gaps:
            self.notes.append(f"{self._record_gaps} exit count(s) came from the threads' own counters (their "
                              f"kernel records were lost): those miss what ran before the thread was picked up")
        for s, vals in enumerate(self.inherited):
            d = self.totals.per_set[s] if s < len(self.totals.per_set) else {}
            for v in vals:
                acc = d.get(v.name)
                if v.status != "ok" or v.value is None or acc is None or not v.value:
                    continue
                if abs(acc[0] - v.value) > 0.01 * abs(v.value):
                    self.notes.append(f"the per-thread rows of {v.name} add up to {acc[0] / v.value:.1%} of the "
                                      f"process total ({_fmt_num(v.value, v.spec.unit if v.spec else 'count')})")

    def close(self) -> None:
        if self.tracker is not None:
            try:
                self._settle_tracker()
            finally:
                self.tracker.close()
                self.tracker = None
        for tid in list(self.threads):
            self._close_thread(tid)
        for ts in list(self.cpu_states.values()) + ([self.proc_state] if self.proc_state else []):
            for h in ts.handles:
                if h is not None:
                    h.close()
        self.cpu_states.clear()
        self.proc_state = None
        if self.vsampler is not None:
            self.vsampler.close()


# ============================================================================================
# writers

_DASH14 = "%14s" % "-"
_BLANK14 = "%14s" % ""


def _fmt_num(v: float | None, unit: str = "count") -> str:
    if v is None:
        return "-"
    if unit in ("count", "ns", "us", "bytes") and abs(v - round(v)) < 1e-6 * max(1.0, abs(v)):
        return f"{int(round(v))}"
    if abs(v) >= 1e6 or v == int(v):
        return f"{v:.0f}"
    return f"{v:.4g}"


class Writer:
    """Streams rows as they are measured. Rows are flushed when the monitor is about to sleep
    and FLUSH_PERIOD has passed since the last flush (`flush_due`, the monitor's `idle`
    callback), so a row reaches the output at most ~0.1 s after it was measured (at every
    tick when -T >= 0.05), and always at the end of the run, on a signal and on an error."""

    def __init__(self, out: TextIO, monitor: Monitor):
        self.out = out
        self.mon = monitor
        self._flushed = time.monotonic()
        self._dirty = False

    def header(self) -> None: ...
    def row(self, r: Row) -> None: ...
    def summary(self) -> None: ...

    def flush(self) -> None:
        self.out.flush()
        self._flushed = time.monotonic()
        self._dirty = False

    def flush_due(self) -> None:
        """Flush what was written when FLUSH_PERIOD has passed since the last flush."""
        if self._dirty and time.monotonic() - self._flushed >= FLUSH_PERIOD:
            self.flush()

    def regions(self, regions: dict[str, dict]) -> None:
        """Totals of the code regions the program marked (corecast.region / corecast_region.h)."""
        if not regions:
            return
        w = self.out
        if isinstance(self, JsonWriter):
            w.write(json.dumps({"type": "regions", "regions": regions}) + "\n")
        elif isinstance(self, CsvWriter):
            cw = csv.writer(w, lineterminator="\n")
            for name, t in regions.items():
                for k, v in t.items():
                    cw.writerow(["region", name, k, "" if v is None else v])
        else:
            w.write("[Regions]\n")
            keys = ["calls", "wall_ns", "task_clock_ns", "context_switches", "page_faults", "instructions", "cycles"]
            w.write(f"{'region':<20}" + "".join(f"{k:>18}" for k in keys) + "\n")
            for name, t in regions.items():
                w.write(f"{name:<20}" + "".join(f"{_fmt_num(t.get(k)):>18}" for k in keys) + "\n")
        w.flush()


class TableWriter(Writer):
    """PMCTrack's layout: `[Event-to-counter mappings]`, then `[Event counts]` with one line
    per sample: nsample, pid, event (tick/ebs/exit), then the counters."""

    def header(self) -> None:
        m = self.mon
        w = self.out
        if m.totals_only:
            return
        w.write("[Event-to-counter mappings]\n")
        multi = len(m.mappings) > 1
        for i, mp in enumerate(m.mappings):
            for label, e in mp:
                prefix = f"set{i}: " if multi else ""
                extra = f"  ({e.description})" if e.description and e.origin not in ("pmctrack",) else ""
                w.write(f"{prefix}{label}={e.name}{extra}\n")
        for j, n in enumerate(m.virtual_names):
            msg = ""
            if m.vsampler is not None and n in m.vsampler.unavailable:
                msg = f"  (unavailable: {m.vsampler.unavailable[n]})"
            w.write(f"virt{j}={n}{msg}\n")
        for met in m.metrics:
            w.write(f"{met.name}={met.expr}\n")
        w.write("[Event counts]\n")
        self.ncols = max((len(mp) for mp in m.mappings), default=0)
        cols = [f"{'nsample':>7}", f"{'time_s':>9}"]
        cols.append(f"{'cpu':>6}" if m.per_cpu else f"{'pid':>7}")
        if not m.per_cpu and not m.totals_only:
            cols.append(f"{'tid':>7}")
        cols.append(f"{'event':>6}")
        if multi:
            cols.append(f"{'set':>4}")
        labels = m.mappings[0] if not multi else [(f"pmc{j}", None) for j in range(self.ncols)]
        for label, _ in labels:
            cols.append(f"{label:>14}")
        for j, _ in enumerate(m.virtual_names):
            cols.append(f"{'virt' + str(j):>12}")
        for met in m.metrics:
            cols.append(f"{met.name:>10}")
        w.write(" ".join(cols) + "\n")
        self._notes_done: set[str] = set()
        # the fixed part of every row, as one format (see row)
        lead = "%7d %9.3f " + ("%6s" if m.per_cpu else "%7d %7s") + " %6s"
        self._multi = multi
        self._lead = lead + (" %4d" if multi else "")
        w.flush()

    def row(self, r: Row) -> None:
        m = self.mon
        if m.totals_only:
            return
        if m.per_cpu:
            lead = (r.nsample, r.time_s, "-" if r.cpu is None else r.cpu, r.sample_type)
        else:
            lead = (r.nsample, r.time_s, r.pid, "-" if r.tid is None else r.tid, r.sample_type)
        if self._multi:
            lead += (r.set_index,)
        cols = [self._lead % lead]
        values = r.values
        for v in values[:self.ncols]:
            if v.status != "ok":
                cols.append(_DASH14)
                continue
            val = v.value
            if val.__class__ is float and val.is_integer() and -1e15 < val < 1e15:
                txt = "%d" % val              # what _fmt_num gives an integral count
            else:
                txt = _fmt_num(val, v.spec.unit if v.spec else "count")
            if val is not None and v.running_ns < v.enabled_ns:
                txt = "~" + txt               # estimated: the kernel multiplexed this counter
            cols.append("%14s" % txt)
        if len(values) < self.ncols:
            cols.extend([_BLANK14] * (self.ncols - len(values)))
        if m.virtual_names:
            for n in m.virtual_names:
                vv = r.virt.get(n)
                cols.append("%12s" % _fmt_num(vv.value if vv else None, vv.unit if vv else "count"))
        if m.metrics:
            for met in m.metrics:
                val = r.metrics.get(met.name)
                cols.append(f"{('-' if val is None else f'{val:.4g}'):>10}")
        self.out.write(" ".join(cols) + "\n")
        self._dirty = True

    def summary(self) -> None:
        m = self.mon
        w = self.out
        t = m.totals
        title = "[Totals]" if not m.totals_only else "[Event totals]"
        w.write(f"{title}\n")
        for i, mp in enumerate(m.mappings):
            d = t.per_set[i] if i < len(t.per_set) else {}
            st = t.status[i] if i < len(t.status) else {}
            for label, e in mp:
                acc = d.get(e.name)
                status, msg = st.get(e.name, ("ok", ""))
                prefix = f"set{i} " if len(m.mappings) > 1 else ""
                if status != "ok" or acc is None or (acc[2] and not acc[3]):
                    why = msg or "not counted"
                    w.write(f"{prefix}{label:<6} {e.name:<32} {'<' + status + '>' if status != 'ok' else '<not counted>':>18}  {why}\n")
                    continue
                pct = f"  ({100.0 * acc[3] / acc[2]:.1f}% running)" if acc[2] and acc[3] < acc[2] else ""
                unit = f" {e.unit}" if e.unit != "count" else ""
                w.write(f"{prefix}{label:<6} {e.name:<32} {_fmt_num(acc[0], e.unit):>18}{unit}{pct}\n")
        for n in m.virtual_names:
            vi = t.virt_info.get(n)
            if vi is not None and vi.status != "ok":
                w.write(f"virt   {n:<32} {'<unavailable>':>18}  {vi.message}\n")
            else:
                unit = VIRTUAL_COUNTERS[n][0]
                w.write(f"virt   {n:<32} {_fmt_num(t.virt.get(n), unit):>18} {unit}\n")
        if t.lost_samples or t.throttled:
            w.write(f"lost samples: {t.lost_samples}; throttled: {t.throttled}\n")
        if m.inherited is not None:
            w.write("[Process totals] (inherited counters: every thread, from the kernel)\n")
            for i, (mp, vals) in enumerate(zip(m.mappings, m.inherited)):
                prefix = f"set{i} " if len(m.mappings) > 1 else ""
                for (label, e), v in zip(mp, vals):
                    if v.status != "ok" or v.value is None:
                        why = v.message or "not counted"
                        st = f"<{v.status}>" if v.status != "ok" else "<not counted>"
                        w.write(f"{prefix}{label:<6} {e.name:<32} {st:>18}  {why}\n")
                        continue
                    unit = f" {e.unit}" if e.unit != "count" else ""
                    pct = f"  ({100.0 * v.running_ns / v.enabled_ns:.1f}% running)" if v.scaled else ""
                    w.write(f"{prefix}{label:<6} {e.name:<32} {_fmt_num(v.value, e.unit):>18}{unit}{pct}\n")
        for note in m.notes:
            w.write(f"note: {note}\n")
        w.flush()


class CsvWriter(Writer):
    """One line per (sample, counter): nsample,time_s,pid,tid,cpu,comm,sample_type,set,
    kind,name,value,raw,enabled_ns,running_ns,status,unit,message."""

    FIELDS = ["nsample", "time_s", "pid", "tid", "cpu", "comm", "sample_type", "set", "kind", "name",
              "value", "raw", "enabled_ns", "running_ns", "status", "unit", "message"]
    separator = ","          # perf's --field-separator

    def header(self) -> None:
        self.w = csv.writer(self.out, lineterminator="\n", delimiter=self.separator)
        if not self.mon.totals_only:
            self.w.writerow(self.FIELDS)

    def row(self, r: Row) -> None:
        if self.mon.totals_only:
            return
        base = [r.nsample, f"{r.time_s:.6f}", r.pid, "" if r.tid is None else r.tid,
                "" if r.cpu is None else r.cpu, r.comm, r.sample_type, r.set_index]
        for v in r.values:
            self.w.writerow(base + ["counter", v.name, "" if v.value is None else repr(float(v.value)),
                                    "" if v.raw is None else v.raw, v.enabled_ns, v.running_ns, v.status,
                                    v.spec.unit if v.spec else "count", v.message])
        for n, vv in r.virt.items():
            self.w.writerow(base + ["virtual", n, "" if vv.value is None else repr(float(vv.value)), "", "",
                                    "", vv.status, vv.unit, vv.message])
        for n, val in r.metrics.items():
            self.w.writerow(base + ["metric", n, "" if val is None else repr(float(val)), "", "", "",
                                    "ok" if val is not None else "undefined", "", ""])
        self._dirty = True

    def summary(self) -> None:
        if not self.mon.totals_only:
            return
        self.w.writerow(["set", "kind", "name", "value", "raw", "enabled_ns", "running_ns", "status", "message"])
        t = self.mon.totals
        for i, mp in enumerate(self.mon.mappings):
            d = t.per_set[i] if i < len(t.per_set) else {}
            st = t.status[i] if i < len(t.status) else {}
            for _, e in mp:
                acc = d.get(e.name, [0.0, 0, 0, 0])
                status, msg = st.get(e.name, ("ok", ""))
                counted = status == "ok" and acc[3] > 0
                self.w.writerow([i, "counter", e.name, repr(float(acc[0])) if counted else "",
                                 acc[1] if counted else "", acc[2], acc[3], status, msg])
        for n in self.mon.virtual_names:
            vi = t.virt_info.get(n)
            val = t.virt.get(n)
            self.w.writerow(["", "virtual", n, "" if val is None else repr(float(val)), "", "", "",
                             vi.status if vi else "ok", vi.message if vi else ""])
        self.out.flush()


class JsonWriter(Writer):
    """JSON lines: a `header` object (mappings, virtual counters, metrics), one `sample` object
    per row, and a closing `summary` object (totals with enabled/running and status)."""

    def header(self) -> None:
        m = self.mon
        hdr = {"type": "header", "format": "corecast-stat", "version": 1, "interval_s": m.interval,
               "per_cpu": m.per_cpu, "totals_only": m.totals_only, "ebs": m.ebs,
               "target": {"kind": m.target.kind, "pid": m.target.pid, "argv": m.target.argv},
               "sets": [[{"label": label, **e.to_dict()} for label, e in mp] for mp in m.mappings],
               "virtual": [{"name": n, "unit": VIRTUAL_COUNTERS[n][0], "scope": VIRTUAL_COUNTERS[n][1],
                            "description": VIRTUAL_COUNTERS[n][2],
                            "unavailable": (m.vsampler.unavailable.get(n) if m.vsampler else None)}
                           for n in m.virtual_names],
               "metrics": [{"name": x.name, "expr": x.expr} for x in m.metrics]}
        self.out.write(json.dumps(hdr) + "\n")
        self.out.flush()

    def row(self, r: Row) -> None:
        if self.mon.totals_only:
            return
        self.out.write(json.dumps({"type": "sample", **r.to_dict()}) + "\n")
        self._dirty = True

    def summary(self) -> None:
        m = self.mon
        t = m.totals
        sets = []
        for i, mp in enumerate(m.mappings):
            d = t.per_set[i] if i < len(t.per_set) else {}
            st = t.status[i] if i < len(t.status) else {}
            ev = []
            for label, e in mp:
                acc = d.get(e.name, [0.0, 0, 0, 0])
                status, msg = st.get(e.name, ("ok", ""))
                counted = status == "ok" and acc[3] > 0
                ev.append({"label": label, "name": e.name, "value": acc[0] if counted else None,
                           "raw": acc[1] if counted else None, "enabled_ns": acc[2], "running_ns": acc[3],
                           "status": status, "message": msg if not counted or status != "ok" else ""})
            sets.append(ev)
        virt = {n: {"value": t.virt.get(n), "unit": VIRTUAL_COUNTERS[n][0],
                    "status": t.virt_info[n].status if n in t.virt_info else "ok",
                    "message": t.virt_info[n].message if n in t.virt_info else ""} for n in m.virtual_names}
        process = None
        if m.inherited is not None:
            process = [[{"label": label, **v.to_dict()} for (label, _), v in zip(mp, vals)]
                       for mp, vals in zip(m.mappings, m.inherited)]
        self.out.write(json.dumps({"type": "summary", "rows": t.rows, "sets": sets, "virtual": virt,
                                   "lost_samples": t.lost_samples, "throttled": t.throttled,
                                   "threads": m.threads_followed or None, "process_totals": process,
                                   "exit_status": m.target.exit_status, "notes": m.notes}) + "\n")
        self.out.flush()


WRITERS: dict[str, type[Writer]] = {"table": TableWriter, "csv": CsvWriter, "json": JsonWriter}
