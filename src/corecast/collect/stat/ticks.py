"""Taking `corecast stat`'s ticks in C: sleep to each tick's deadline and read the counters
there, several ticks per call (native/stat/ticks.c).

On a virtual machine a 10 ms monitor pays mostly for being woken: here a C loop that only
sleeps costs ~60 us of CPU per wake-up, an interpreter that only sleeps ~85 us, before any
work. `NativeTicks.take` hands the C loop up to `count` ticks at a time, so the interpreter
is woken once per batch (at most every 100 ms) instead of once per tick, while every tick is
still read at its own deadline. The loop returns early, before the tick it waits for, when a
watched descriptor is ready (the target's pidfd at its exit, a ring buffer with task records,
the monitor's signal pipe), so the caller handles those exactly when they happen.

A reading is `(raw, enabled_ns, running_ns, lost)` for a counter that was read, or a
`CounterValue` carrying the status of one that could not be (never opened, read failed).
"""
from __future__ import annotations

import ctypes as C
import os
from dataclasses import dataclass, field
from typing import Any, Sequence

from ...native import native_path
from ..events import abi
from ..perf import CounterValue

Reading = Any           # tuple[int, int, int, int | None] | CounterValue

SLOT = 40               # bytes per read: value, enabled, running, id, lost
WHY = ("all", "ready", "signal", "error")


class _PollFd(C.Structure):
    _fields_ = [("fd", C.c_int), ("events", C.c_short), ("revents", C.c_short)]


class _Ticks(C.Structure):
    _fields_ = [("t0_ns", C.c_int64), ("interval_ns", C.c_int64), ("first", C.c_int64),
                ("max_ticks", C.c_int32), ("nread", C.c_int32), ("slot", C.c_int32), ("nwatch", C.c_int32),
                ("wake", C.c_int32), ("nrings", C.c_int32), ("child", C.c_int32), ("pad", C.c_int32),
                ("read_fds", C.c_void_p), ("watch", C.c_void_p), ("rings", C.c_void_p), ("times", C.c_void_p),
                ("lens", C.c_void_p), ("data", C.c_void_p),
                ("done", C.c_int32), ("why", C.c_int32), ("err", C.c_int32), ("found", C.c_int32)]


POLLIN = 0x001


@dataclass(slots=True)
class TickBatch:
    """What one call took: `ticks` as (monotonic time, readings per planned handle), in order,
    and why it ended: `all` (every tick asked for), `ready` (a watched descriptor, listed in
    `ready`, was ready: with `wake`, it woke the sleep before the next tick; without, it was
    found right after the last tick's reads), `signal` (a signal interrupted the sleep) or
    `error` (errno `err`: the caller falls back to waiting itself)."""

    ticks: list[tuple[float, list[list[Reading]]]] = field(default_factory=list)
    why: str = "all"
    ready: list[int] = field(default_factory=list)
    err: int = 0
    wake: bool = True
    found: int = 0          # without wake, what was ready after the last tick: 1 ring buffer, 2 SIGCHLD, 4 watched


_lib: Any = None
_lib_error: str | None = None


def load() -> Any:
    """The native library, or None when it is missing (corecast built without a compiler):
    callers then wait in Python, tick by tick."""
    global _lib, _lib_error
    if _lib is not None or _lib_error is not None:
        return _lib
    try:
        lib = C.CDLL(str(native_path("libcorecast_ticks.so")))
        lib.cc_ticks.argtypes = [C.POINTER(_Ticks)]   # a _Ticks passed as is goes by reference
        lib.cc_ticks.restype = C.c_int32
        lib.cc_ticks_size.restype = C.c_int32
        lib.cc_ticks_sigchld.argtypes = [C.c_int32]
        lib.cc_ticks_sigchld.restype = C.c_int32
        if lib.cc_ticks_size() != C.sizeof(_Ticks):
            raise OSError(f"struct cc_ticks is {lib.cc_ticks_size()} bytes in C, {C.sizeof(_Ticks)} here")
    except Exception as err:  # noqa: BLE001 -- any failure means: wait in Python
        _lib_error = str(err)
        return None
    _lib = lib
    return lib


class _Layout:
    """Where each planned handle's counters land in the read buffer."""

    def __init__(self, plan: Sequence[Any]):
        fds: list[int] = []
        self.entries: list[list[tuple[int, bool] | CounterValue]] = []
        self.specs: list[list[Any]] = []
        lost = set()
        for h in plan:
            row: list[tuple[int, bool] | CounterValue] = []
            for c in h.counters:
                if c.fd is None:
                    row.append(c.read())          # the status it failed with (no system call)
                else:
                    has_lost = bool(c.read_format & abi.FORMAT_LOST)
                    lost.add(has_lost)
                    row.append((len(fds), has_lost))
                    fds.append(c.fd)
            self.entries.append(row)
            self.specs.append([c.spec for c in h.counters])
        self.fds = fds
        # every counter read, all with the same format: one comprehension per tick (see _collect)
        self.simple = len(lost) <= 1 and all(e.__class__ is tuple for row in self.entries for e in row)
        self.has_lost = lost == {True}
        self.bounds = []
        at = 0
        for row in self.entries:
            self.bounds.append((at, at + len(row)))
            at += len(row)


class NativeTicks:
    """The C tick loop with its buffers (reused from call to call)."""

    def __init__(self, lib: Any):
        self.lib = lib
        self.ct = _Ticks()
        self._cap = (0, 0)          # (ticks, reads) the buffers hold
        self._watch = (_PollFd * 8)()
        self._wcap = 8
        self._watched: tuple[int, ...] = ()
        self._layout: _Layout | None = None
        self._layout_key: tuple[int, ...] = ()
        self._fixed: tuple[float, float] | None = None
        self._rings = (C.c_uint64 * 64)()
        self._ringset: tuple[int, ...] = ()
        self.sigchld = False

    def catch_sigchld(self, on: bool) -> bool:
        """Install (or remove) the C handler whose flag the loop looks at after each tick
        without `wake`, so that a launched command's end is seen at once without polling
        its pidfd. True when installed."""
        ok = self.lib.cc_ticks_sigchld(1 if on else 0) == 0
        self.sigchld = on and ok
        return self.sigchld

    def _buffers(self, count: int, nread: int) -> None:
        if count <= self._cap[0] and nread <= self._cap[1]:
            return
        count, nread = max(count, self._cap[0]), max(nread, self._cap[1], 1)
        self._times = (C.c_int64 * count)()
        self._lens = (C.c_int32 * (count * nread))()
        self._data = (C.c_uint8 * (count * nread * SLOT))()
        self._fds = (C.c_int32 * nread)()
        self._cap = (count, nread)
        ct = self.ct
        ct.times = C.addressof(self._times)
        ct.lens = C.addressof(self._lens)
        ct.data = C.addressof(self._data)
        ct.read_fds = C.addressof(self._fds)
        self._layout_key = ()       # rewrite the descriptors into the new array

    def take(self, plan: Sequence[Any], t0: float, interval: float, first: int, count: int,
             watch: Sequence[int], wake: bool = True, rings: Sequence[int] = (),
             child: bool = False) -> TickBatch:
        """Ticks first, first+1, ... (at most `count`): see ticks.c for `wake`, `rings` (the
        mapped control pages of ring buffers, looked at after each tick without `wake`) and
        `child` (look at the SIGCHLD flag, see catch_sigchld)."""
        ct = self.ct
        rings = tuple(rings)
        if rings != self._ringset:
            if len(rings) > len(self._rings):
                self._rings = (C.c_uint64 * len(rings))()
            for i, a in enumerate(rings):
                self._rings[i] = a
            ct.rings = C.addressof(self._rings)
            ct.nrings = len(rings)
            self._ringset = rings
        ct.child = 1 if child and self.sigchld else 0
        self._buffers(count, max(1, self._cap[1]))
        key = tuple(map(id, plan))
        if self._layout is None or key != self._layout_key:
            lay = _Layout(plan)
            self._buffers(count, len(lay.fds))
            for i, fd in enumerate(lay.fds):
                self._fds[i] = fd
            self._layout, self._layout_key = lay, key
            ct.nread = len(lay.fds)
            ct.slot = SLOT
        lay = self._layout
        watch = tuple(watch)
        if watch != self._watched:
            if len(watch) > self._wcap:
                self._watch = (_PollFd * len(watch))()
                self._wcap = len(watch)
            for i, fd in enumerate(watch):
                self._watch[i].fd = fd
                self._watch[i].events = POLLIN
            ct.nwatch = len(watch)
            ct.watch = C.addressof(self._watch)
            self._watched = watch
        for i in range(len(watch)):
            self._watch[i].revents = 0
        if self._fixed != (t0, interval):
            ct.t0_ns = round(t0 * 1e9)
            ct.interval_ns = round(interval * 1e9)
            self._fixed = (t0, interval)
        ct.first = first
        ct.max_ticks = count
        ct.wake = 1 if wake else 0
        self.lib.cc_ticks(ct)
        out = self._collect(lay, len(lay.fds), watch)
        out.wake = wake
        out.found = ct.found
        return out

    def _collect(self, lay: _Layout, nread: int, watch: Sequence[int]) -> TickBatch:
        ct = self.ct
        done = ct.done
        why = ct.why
        out = TickBatch(why=WHY[why] if 0 <= why < len(WHY) else "error", err=ct.err)
        if why == 1:
            out.ready = [self._watch[i].fd for i in range(len(watch)) if self._watch[i].revents]
        if not done:
            return out
        q = memoryview(self._data).cast("B")[: done * nread * SLOT].cast("Q").tolist()
        lens = self._lens[: done * nread]
        times = self._times[:done]
        per = SLOT // 8
        ticks = out.ticks
        if lay.simple and (not lens or min(lens) >= 24):
            bounds = lay.bounds
            step = nread * per
            for j in range(done):
                b = j * step
                if lay.has_lost:
                    flat = [(q[o], q[o + 1], q[o + 2], q[o + 4]) for o in range(b, b + step, per)]
                else:
                    flat = [(q[o], q[o + 1], q[o + 2], None) for o in range(b, b + step, per)]
                ticks.append((times[j] / 1e9, [flat[a:z] for a, z in bounds]))
            return out
        for j in range(done):
            base = j * nread
            vals: list[list[Reading]] = []
            for r, row in enumerate(lay.entries):
                rv: list[Reading] = []
                for i, e in enumerate(row):
                    if e.__class__ is tuple:
                        s, has_lost = e  # type: ignore[misc]
                        n = lens[base + s]
                        if n >= 24:
                            o = (base + s) * per
                            rv.append((q[o], q[o + 1], q[o + 2], q[o + 4] if has_lost else None))
                        else:
                            rv.append(_failed_read(n, lay.specs[r][i]))
                    else:
                        rv.append(e)
                vals.append(rv)
            ticks.append((times[j] / 1e9, vals))
        return out


def _failed_read(n: int, spec: Any) -> CounterValue:
    msg = f"read failed: {os.strerror(-n)}" if n < 0 else "short read"
    return CounterValue(spec.name, None, None, 0, 0, "invalid", msg, spec=spec)
