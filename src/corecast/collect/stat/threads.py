"""Following a monitored process's threads (the `Monitor`'s thread tracking): through the
kernel's task records (`perf.TaskTracker`) when the backend gives them, else found in /proc.

A new thread is picked up when the kernel reports its creation, and a thread's `exit` row is
the kernel's own count of it from creation to exit, less what its earlier rows reported -- so
every thread has its rows, however short its life, and they add up to the process's inherited
totals. Without task records, threads are looked for in /proc, and the end of the run says how
many the kernel created that got no row (from its count of task creations).

`ThreadTracking` is a part of `monitor.Monitor` (a mixin: it works on the monitor's state, which
`Monitor.__init__` sets up); `_ThreadState` is what the monitor keeps per thread, CPU or process.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ...errors import UserError
from ..events.spec import EventSpec
from ..perf import CounterValue, TrackerUnavailable, combine_cpus, remainder
from .backend import Handle
from .rows import Row, _deltas, _fmt_num, _reading, why_not_counted

THREAD_TRACKING = ("kernel", "poll")


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


class ThreadTracking:
    """The monitor's thread tracking: the tracker's start and fallback, its records, the exit
    rows of the threads it follows, and what the end of a run says about them."""

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

    def _count_creations(self, launched: bool) -> None:
        """Threads found in /proc miss those that live less than a look: count what the kernel
        creates below a launched command, so that the end can say how many may have no row."""
        opener = getattr(self.backend, "open_creations", None)
        if not launched:
            self._creations_why = ("threads an attached process created before it was attached, or between "
                                   "looks, are not counted anywhere")
        elif opener is None:
            self._creations_why = "this counter backend does not count task creations"
        else:
            try:
                self._creations = opener(self.target.pid, True)
            except UserError as err:
                self._creations_why = f"the kernel's count of task creations is unavailable: {err}"

    def _missed_threads(self) -> None:
        """With threads found in /proc: say how many the kernel created that got no row of their
        own (or that it cannot be known)."""
        look = f"{self.discover_period * 1000:.0f} ms"
        created = None
        if self._creations is not None:
            vals = self._creations.read()
            self._creations.close()
            self._creations = None
            if vals and vals[0].status == "ok" and vals[0].value is not None:
                created = int(vals[0].value)
            else:
                why = vals[0].message if vals else "-"
                self._creations_why = f"the kernel's count of task creations failed ({why})"
        if created is None:
            self.notes.append(f"--threads poll finds threads in /proc (every {look} or each tick): a thread that "
                              f"lived shorter may have no row, and how many did cannot be known "
                              f"({self._creations_why})")
            return
        seen = self.threads_seen - 1           # the root was not created below itself
        missed = max(0, created - seen)
        if missed:
            self.notes.append(f"--threads poll saw {seen:,} of the {created:,} tasks created (threads and child "
                              f"processes, by the kernel's sched:sched_process_fork count): {missed:,} lived "
                              f"shorter than a look ({look} or a tick), or were child processes, and have no "
                              f"row; -A or --threads kernel counts them all")

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

    def _settle_tracker(self) -> None:
        """The process's inherited totals, and whether the per-thread rows add up to them."""
        tr = self.tracker
        self.inherited = [tr.read(s) for s in range(len(self.sets))]
        for vals in self.inherited:
            for v in vals:
                if v.value is None:
                    v.message = why_not_counted(v)    # never a bare "not counted"
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
                # A thread's last switch can fall between its exit record and the process's
                # totals (a race of one or two events): a count that small is not a lost row.
                unit = v.spec.unit if v.spec else "count"
                slack = max(0.01 * abs(v.value), 2.0 if unit == "count" else 0.0)
                if abs(acc[0] - v.value) > slack:
                    self.notes.append(f"the per-thread rows of {v.name} add up to {acc[0] / v.value:.1%} of the "
                                      f"process total ({_fmt_num(v.value, unit)})")
