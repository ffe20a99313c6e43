"""The monitor behind `corecast stat`: interval and event-based sampling, per thread or per CPU,
explicit round-robin multiplexing of event sets, coordinated virtual counters and derived
metrics; the rows go to the table / CSV / JSON-lines writers of `writers`.

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

The monitor is one state machine in four modules: this one (the tick loop, the rows of a tick,
round-robin sets, the start and the end of a run), `threads` (following the threads: task
records, the exit rows they give, the /proc fallback), `ebs` (the rows of event-based
sampling) and `signals` (a signal ends the run as the target's exit does). The last three are
mixins of `Monitor`: they work on the state `Monitor.__init__` sets up.

Size: about 660 lines, one subject: the tick loop, the batches of ticks taken in C and the
rows of a tick share the state machine's transitions, which read best in one place.
"""
from __future__ import annotations

import math

from collections import deque

from typing import Any, Callable, Iterator, Sequence

from ...errors import UserError

from . import ticks as native_ticks
from ..events.spec import EventSpec
from ..perf import CounterValue, denied_message
from .backend import Backend, Handle, PerfBackend
from .ebs import EbsRows
from .metrics import Metric, check_metric_names
from .rows import _BARE, Row, Totals, _deltas, _reading, why_not_counted
from .signals import SignalHandling
from .target import STOP_GRACE_S, Target
from .threads import THREAD_TRACKING, ThreadTracking, _ThreadState
from .virtual import VirtValue, VirtualSampler


MIN_INTERVAL = 0.01
BATCH_PERIOD = 0.1      # the longest the monitor takes ticks in C without returning to Python
WAKES = ("auto", "records", "tick")
TICK_WAKE_MAX = 0.02    # wake="auto": at intervals up to this, look for records at the ticks only

#: What `stat` counts when it is given no event (-c) and no virtual counter (-V): perf stat's
#: default set. A hardware event the PMU lacks is counted as not supported, saying why.
DEFAULT_EVENTS = ("task_clock", "context_switches", "cpu_migrations", "page_faults", "cycles", "instr",
                  "branches", "branch_misses")
DEFAULT_NOTE = (f"no -c given: counted the default set, as perf stat does ({', '.join(DEFAULT_EVENTS)}); "
                "choose events with -c")

# ============================================================================================
# the monitor

class Monitor(ThreadTracking, EbsRows, SignalHandling):
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
        self.threads_seen = 0                 # threads given rows of their own, the root included
        self._creations: Handle | None = None  # with "poll": the kernel's count of tasks created
        self._creations_why = ""              # why that count is not known
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
        self.ended_by = "exit"                # what ended the monitoring (END_CAUSES)
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
        if not comm and pid in self.threads:
            # gone before its name could be read: a new thread starts with its creator's name
            # (the kernel copies it), the process's unless the thread renamed itself
            comm = self.threads[pid].comm
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
        self.threads_seen += 1
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
        for v in row.values:
            if v.value is None and v.message in _BARE:
                v.message = why_not_counted(v)        # every value not counted says why
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
            live_tids = set(self.backend.threads(self.target.pid)) if self._look_live(final) else set()
            for tid, ts in sorted(self.threads.items()):
                gone = final or tid not in live_tids
                label = "exit" if tid not in live_tids else (self.ended_by if final else "tick")
                r = self._counter_row(ts, now, label, tid, None, interval_ns, gone)
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
                    label = "exit" if ts.exited else (self.ended_by if final else "tick")
                    r = self._counter_row(ts, now, label, tid, None, interval_ns, gone)
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
                r = self._counter_row(ts, now, self.ended_by if final else "tick", None, cpu, interval_ns)
                if r:
                    r.pid = -1
                    rows.append(r)
        elif self._one_counter() or self.target.kind == "system":
            if self.proc_state is not None:
                r = self._counter_row(self.proc_state, now, self.ended_by if final else "tick", None, None,
                                      interval_ns)
                if r:
                    rows.append(r)
        else:
            rows = self._thread_rows(now, interval_ns, final)
        sysvirt = self.vsampler.sample_system() if self.vsampler is not None else {}
        out = []
        for i, r in enumerate(rows):
            out.append(self._finish_row(r, sysvirt, i == 0))
        return out

    def _look_live(self, final: bool) -> bool:
        """Whether the rows of this tick must look which threads are alive (/proc): at every
        tick, and at the last one when the monitoring ended while the target runs on (a thread
        that ended is labelled `exit`, the others by what ended the monitoring)."""
        return not final or self.ended_by != "exit"

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
                if self.threads_followed == "poll":
                    self._count_creations(launched)
            self.t0 = self.backend.now()
            tgt.start()
            if self.proc_state is not None and self.proc_state.comm in ("", Target.LAUNCHER_COMM):
                self.proc_state.comm = tgt.comm(self.backend.thread_name(tgt.pid, tgt.pid))
            for ts in self.threads.values():
                name = self.backend.thread_name(ts.pid if ts.pid > 0 else tgt.pid, ts.tid) or ts.comm
                ts.comm = tgt.comm(name) if ts.tid == tgt.pid else name
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
        ended_here = False
        try:
            while True:
                k += 1
                now, ended, values, drain = self._next_tick(k)
                timed_out = self.max_duration is not None and now - self.t0 >= self.max_duration - 1e-9
                if ended or timed_out:
                    self.ended_by = self._end_cause(ended)
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
                    ended_here = True
                    break
                self._rotate()
                if not self._buffer:
                    self._discover()
        finally:
            if not ended_here:
                # an error (a write error at a flush: `stat -o /dev/full`), a second signal, or
                # the rows no longer wanted: the command's tree is killed now, not waited for
                self.target.abort()
            self.close()
            if self.target.kind == "command" and self.target.child is not None and \
                    self.target.child.status is None and self.max_duration is not None:
                self.target.child.stop(grace=STOP_GRACE_S)     # SIGKILL if SIGTERM is ignored
            self.target.finish()
            self._still_running()


    def close(self) -> None:
        if self.threads_followed == "poll" and (self._creations is not None or self._creations_why):
            self._missed_threads()
            self._creations_why = ""
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
