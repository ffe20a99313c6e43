"""The sampling loop in C (native/meters/engine.c) and its Python face.

At 1 ms, a Python loop would cost more than the 2% of a core the meters may take, so the ticks
are taken in C: `Engine.run(n)` sleeps to each deadline, reads every file once, computes every
meter, its window, the triggers and the advice, publishes each record under its seqlock, and
comes back after n ticks, at a trigger or advice change, or at a signal. Python describes the
work once (`add_instance`, `add_trigger`, `add_advice`) and does, between calls, what is rare:
trigger actions, following a process's threads, recording.

`tick(t_ns)` takes one tick at a given time: tests drive the same computation on a virtual
clock, and a backend without file descriptors (a simulated PMU) is read in Python and its
counts handed over with `set_external` before each tick.
"""
from __future__ import annotations

import ctypes as C
import os
from dataclasses import dataclass
from typing import Any, Iterable

from . import layout as L
from .catalog import Input, Instance


@dataclass(frozen=True)
class Event:
    kind: str          # trigger | advice
    index: int         # into the trigger or advice table
    state: int         # the new trigger state, or allowed_workers
    previous: int
    t_ns: int
    value: float       # the window average that crossed, or the linked triggers HIGH


#: Sources read at most this often, whatever --interval: /proc/stat counts in 10 ms units (USER_HZ
#: is 100), /proc/vmstat costs ~20 us a read, a perf counter of another CPU costs an
#: inter-processor interrupt each read (~13 us on a 2-vCPU VM; on a machine with many CPUs that
#: is the bulk of the cost; a CPU's software events are one group read), and memory and I/O
#: pressure cost ~2 us a file (the kernel formats its averages at every read) for stalls that
#: last milliseconds: at 1 ms they were half of the daemon's work per tick. CPU pressure, the
#: gauges' other sources and the threads' schedstat are read every tick.
SLOW_S = 0.01


def slow(ref: tuple) -> bool:
    if ref[0] == "perf":
        return True
    if ref[0] != "proc":
        return False
    path = str(ref[1])
    return os.path.basename(path) in ("stat", "vmstat") or path.endswith(("pressure/memory", "pressure/io"))


class Engine:
    def __init__(self, base: int, interval_ns: int, window_ns: int):
        self.lib = L.lib()
        self.e = self.lib.ccm_engine_new(base, interval_ns, window_ns)
        if not self.e:
            raise MemoryError("ccm_engine_new")
        self.interval_ns, self.window_ns = interval_ns, window_ns
        self._files: dict[tuple, int] = {}
        self._inputs: dict[tuple, int] = {}
        self._owned: list[int] = []              # descriptors the engine opened (closed at close())
        self.perf: dict[tuple[str, int], int] = {}     # (event, cpu) -> its input, for set_external
        self.external: dict[str, int] = {}
        self.thread_files: dict[int, int] = {}   # slot -> file index
        self.meters: dict[int, int] = {}         # record -> engine meter
        self.slow_ticks = max(1, round(SLOW_S * 1e9 / interval_ns))
        self._ev = (L.Event * 256)()

    # ------------------------------------------------------------------ building
    def _group_file(self, group: tuple[int, int, int, int]) -> int:
        """The file of a perf group read in one call: (leader fd, position, members, words per member)."""
        key = ("perf-group", group[0])
        if key not in self._files:
            idx = self.lib.ccm_add_perf_group(self.e, group[0], group[2], group[3])
            if idx < 0:
                raise MemoryError("ccm_add_perf_group")
            self._files[key] = idx
            self.lib.ccm_set_file_period(self.e, idx, self.slow_ticks)
        return self._files[key]

    def _file(self, ref: tuple, keyed: bool, perf_fds: dict[tuple[str, int], Any]) -> int:
        if ref in self._files:
            return self._files[ref]
        kind = ref[0]
        if kind == "proc":
            fd = os.open(ref[1], os.O_RDONLY | os.O_CLOEXEC)
            self._owned.append(fd)
            ftype = L.FILE_KEYED if keyed else L.FILE_PLAIN
        elif kind == "perf":
            fd = perf_fds.get((ref[1], ref[2]))
            ftype = L.FILE_PERF if fd is not None else L.FILE_EXTERNAL
            fd = -1 if fd is None else fd
        elif kind == "thread":
            fd, ftype = -1, L.FILE_PLAIN
        else:
            fd, ftype = -1, L.FILE_EXTERNAL
        idx = self.lib.ccm_add_file(self.e, fd, ftype)
        if idx < 0:
            raise MemoryError("ccm_add_file")
        self._files[ref] = idx
        if slow(ref):
            self.lib.ccm_set_file_period(self.e, idx, self.slow_ticks)
        if kind == "thread":
            self.thread_files[ref[1]] = idx
        return idx

    def _input(self, inp: Input, perf_fds: dict[tuple[str, int], Any]) -> int:
        k = (inp.file, inp.key, inp.fields)
        if k in self._inputs:
            return self._inputs[k]
        group = perf_fds.get((inp.file[1], inp.file[2])) if inp.file[0] == "perf" else None
        if isinstance(group, tuple):     # a member of a group read in one call: fields = its place
            f, fields = self._group_file(group), group[1]
        else:
            f, fields = self._file(inp.file, bool(inp.key), perf_fds), inp.fields & 0xFFFFFFFF
        idx = self.lib.ccm_add_input(self.e, f, inp.key.encode(), fields)
        if idx < 0:
            raise MemoryError("ccm_add_input")
        self._inputs[k] = idx
        if inp.file[0] == "perf":
            self.perf[(inp.file[1], inp.file[2])] = idx
        elif inp.file[0] == "external":
            self.external[inp.file[1]] = idx
        return idx

    def add_instance(self, rec: int, inst: Instance, perf_fds: dict[tuple[str, int], Any]) -> int:
        """Add a meter; `perf_fds` gives each (event, cpu) its descriptor, None (read in Python and
        handed over with set_external), or (leader fd, position, members, words per member) for a
        counter of a group read in one call."""
        num = [self._input(i, perf_fds) for i in inst.num]
        den = [self._input(i, perf_fds) for i in inst.den]
        n = (C.c_int * max(1, len(num)))(*num)
        d = (C.c_int * max(1, len(den)))(*den)
        m = self.lib.ccm_add_meter(self.e, rec, inst.meter.kind, inst.scale, inst.total_scale, inst.bias,
                                   int(inst.has_total), n, len(num), d, len(den))
        if m < 0:
            raise MemoryError("ccm_add_meter")
        self.meters[rec] = m
        return m

    def add_trigger(self, rec: int, meter_rec: int, low: float, high: float, dwell_ns: int) -> int:
        return self.lib.ccm_add_trigger(self.e, rec, self.meters[meter_rec], low, high, dwell_ns)

    def add_advice(self, rec: int, min_workers: int, max_workers: int, interval_ns: int, cut_one: bool,
                   triggers: Iterable[int]) -> int:
        t = list(triggers)
        arr = (C.c_int * max(1, len(t)))(*t)
        return self.lib.ccm_add_advice(self.e, rec, min_workers, max_workers, interval_ns, int(cut_one), arr, len(t))

    # ------------------------------------------------------------------ running
    def set_external(self, input_index: int, raw: int, enabled: int = 0, running: int = 0, ok: bool = True) -> None:
        self.lib.ccm_set_external(self.e, input_index, max(0, int(raw)), int(enabled), int(running), int(ok))

    def set_thread(self, slot: int, fd: int) -> None:
        self.lib.ccm_set_file_fd(self.e, self.thread_files[slot], fd)

    def reset_meter(self, rec: int, aux: int = 0) -> None:
        self.lib.ccm_reset_meter(self.e, self.meters[rec], aux)

    def tick(self, t_ns: int) -> int:
        return self.lib.ccm_tick(self.e, t_ns)

    def run(self, max_ticks: int) -> tuple[int, str]:
        why = C.c_int32(0)
        n = self.lib.ccm_run(self.e, max_ticks, C.byref(why))
        return n, L.WHY[why.value] if 0 <= why.value < len(L.WHY) else "error"

    def events(self) -> list[Event]:
        out: list[Event] = []
        while True:
            n = self.lib.ccm_events(self.e, self._ev, len(self._ev))
            for i in range(n):
                ev = self._ev[i]
                out.append(Event("trigger" if ev.kind == L.EV_TRIGGER else "advice", ev.index, ev.state,
                                 ev.previous, ev.t_ns, ev.value))
            if n < len(self._ev):
                return out

    def dropped_events(self) -> int:
        return int(self.lib.ccm_dropped_events(self.e))

    def close(self) -> None:
        if self.e:
            self.lib.ccm_engine_free(self.e)
            self.e = None
        for fd in self._owned:
            try:
                os.close(fd)
            except OSError:
                pass
        self._owned = []

    def __del__(self) -> None:       # pragma: no cover - a safety net
        try:
            self.close()
        except Exception:
            pass


def perf_readings(handles: Iterable[tuple[Any, list[tuple[str, int]]]]) -> dict[tuple[str, int], tuple]:
    """(raw, enabled, running, ok) of every counter of handles without descriptors (a backend
    read in Python), by (event, cpu)."""
    out = {}
    for h, keys in handles:
        for v, key in zip(h.read(), keys):
            ok = v.status == "ok" and v.raw is not None
            out[key] = (v.raw or 0, v.enabled_ns, v.running_ns, ok)
    return out
