"""Where `corecast stat`'s counts come from: the `Backend` protocol and the real one on
perf_event_open (tests give the monitor a simulated PMU through the same protocol)."""
from __future__ import annotations

import os
import select

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Sequence

from .. import sources
from . import ticks as native_ticks
from ..events.spec import EventSpec, resolve
from ..perf import CounterValue, open_counters, open_sampler, open_tracker

if TYPE_CHECKING:
    from .target import Target

#: The tracepoint that fires for every task (thread or process) the kernel creates.
CREATIONS = "sched:sched_process_fork"


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
    # with `wake`, else after the tick it was found at (see collect/stat/ticks.py)


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
        """Take up to `count` ticks in C (see collect/stat/ticks.py); None when it cannot: no native
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

    def open_creations(self, pid, enable_on_exec):
        """A counter of the tasks (threads and processes) created below `pid` from now on (the
        sched:sched_process_fork tracepoint, inherited): how many threads `--threads poll` may
        have missed. Raises UserError when it cannot be counted (tracefs, permission)."""
        specs = resolve(CREATIONS)
        return open_counters(specs, pid=pid, cpu=-1, inherit=True, enable_on_exec=enable_on_exec,
                             enabled=not enable_on_exec)

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
