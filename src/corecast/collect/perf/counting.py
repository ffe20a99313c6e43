"""Counting: counters and groups opened on a thread, a process tree or a CPU, their values
scaled by time enabled/running, and what a value that could not be counted says."""
from __future__ import annotations

import errno
import fcntl
import os
import struct
from dataclasses import dataclass
from typing import Sequence

from ...errors import UserError
from ..events import abi
from ..events.spec import EventSpec
from .syscall import classify_errno, denied_message, make_attr, paranoid, perf_event_open

_lost_format_ok: bool | None = None     # does this kernel take PERF_FORMAT_LOST (Linux >= 6.0)?

@dataclass(slots=True)
class CounterValue:
    """One event's reading. `value` is the scaled estimate, None when nothing was counted."""

    name: str
    value: float | None
    raw: int | None
    enabled_ns: int
    running_ns: int
    status: str
    message: str = ""
    lost: int | None = None
    spec: EventSpec | None = None

    @property
    def scaled(self) -> bool:
        return self.value is not None and self.running_ns < self.enabled_ns

    def to_dict(self) -> dict:
        return {"name": self.name, "value": self.value, "raw": self.raw, "enabled_ns": self.enabled_ns,
                "running_ns": self.running_ns, "status": self.status, "message": self.message,
                "lost": self.lost}


def scale(raw: int, enabled: int, running: int) -> float | None:
    """perf's estimate: raw * enabled / running; None when the counter never ran."""
    if running <= 0:
        return None
    if running >= enabled:
        return float(raw)
    return raw * (enabled / running)


NOT_COUNTED = "not counted in this interval (the kernel had no counter free)"
DID_NOT_RUN = "did not run in this interval"


def interval_value(raw: int, enabled: int, running: int) -> tuple[float | None, str]:
    """A counter's value over one interval from its raw count and enabled/running times there,
    with a note when it is not a plain count."""
    if enabled > 0 and running <= 0:
        return None, NOT_COUNTED
    if enabled <= 0:
        # a per-thread counter is enabled only while its thread is scheduled: the thread did
        # not run in this interval, so the count is a true zero
        return float(raw), DID_NOT_RUN
    return scale(raw, enabled, running), ""


def delta_value(name: str, cur: "CounterValue", prev: "CounterValue | None") -> "CounterValue":
    """The counts between two readings of the same counter, scaled by that interval's
    enabled/running times."""
    if cur.status != "ok" or cur.raw is None:
        return cur
    p_raw = prev.raw if (prev is not None and prev.raw is not None) else 0
    p_en = prev.enabled_ns if prev is not None else 0
    p_run = prev.running_ns if prev is not None else 0
    raw = cur.raw - p_raw
    en = cur.enabled_ns - p_en
    run = cur.running_ns - p_run
    prev_lost = (prev.lost or 0) if prev is not None else 0
    lost = None if cur.lost is None else cur.lost - prev_lost
    val, msg = interval_value(raw, en, run)
    return CounterValue(name, val, raw, en, run, "ok", msg, lost, cur.spec)


class Counter:
    """One opened event (or a failed attempt, with its status)."""

    def __init__(self, spec: EventSpec, fd: int | None, status: str, message: str,
                 read_format: int, note: str = ""):
        self.spec = spec
        self.fd = fd
        self.status = status
        self.message = message or note
        self.read_format = read_format
        self.note = note
        self.last: CounterValue | None = None
        self.group_index = -1        # its place in a group read with PERF_FORMAT_GROUP

    def words(self) -> int:
        """Words per counter in a PERF_FORMAT_GROUP read (value, id, lost)."""
        return 1 + bool(self.read_format & abi.FORMAT_ID) + bool(self.read_format & abi.FORMAT_LOST)

    @property
    def name(self) -> str:
        return self.spec.name

    def read(self) -> CounterValue:
        if self.fd is None:
            return CounterValue(self.spec.name, None, None, 0, 0, self.status, self.message, spec=self.spec)
        group = bool(self.read_format & abi.FORMAT_GROUP)
        n = 3 + bool(self.read_format & abi.FORMAT_ID) + bool(self.read_format & abi.FORMAT_LOST)
        if group:                    # nr, enabled, running, then each counter's words
            n = 3 + 64 * self.words()
        try:
            data = os.read(self.fd, 8 * n)
        except OSError as err:
            return CounterValue(self.spec.name, None, None, 0, 0, "invalid", f"read failed: {err.strerror}",
                                spec=self.spec)
        if len(data) < 24:
            return CounterValue(self.spec.name, None, None, 0, 0, "invalid", "short read", spec=self.spec)
        vals = struct.unpack(f"<{len(data) // 8}Q", data)
        if group:
            at = 3 + max(0, self.group_index) * self.words()
            if at >= len(vals) or self.group_index >= vals[0]:
                return CounterValue(self.spec.name, None, None, 0, 0, "invalid", "short read", spec=self.spec)
            raw, en, run = vals[at], vals[1], vals[2]
            lost = vals[at + self.words() - 1] if self.read_format & abi.FORMAT_LOST else None
        else:
            raw, en, run = vals[0], vals[1], vals[2]
            lost = vals[-1] if self.read_format & abi.FORMAT_LOST else None
        val = scale(raw, en, run)
        msg = self.note
        if val is None:
            msg = "not counted (enabled but never running: no counter free, or the event never ran)" \
                if en else (self.note or "not counted yet (never enabled)")
        v = CounterValue(self.spec.name, val, raw, en, run, "ok", msg, lost, self.spec)
        self.last = v
        return v

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None


def _open_one(spec: EventSpec, pid: int, cpu: int, group_fd: int, **kw) -> Counter:
    """Open one event, retrying as perf does: without PERF_FORMAT_LOST on old kernels, and user
    mode only when kernel counting is denied by perf_event_paranoid."""
    global _lost_format_ok
    rf = abi.FORMAT_TOTAL_TIME_ENABLED | abi.FORMAT_TOTAL_TIME_RUNNING | abi.FORMAT_ID
    rf |= kw.pop("extra_read_format", 0)
    want_lost = _lost_format_ok is not False
    note = ""
    excl_k = None
    for _attempt in range(4):
        fmt = rf | (abi.FORMAT_LOST if want_lost else 0)
        attr = make_attr(spec, read_format=fmt, exclude_kernel=excl_k, **kw)
        try:
            fd = perf_event_open(attr, pid, cpu, group_fd)
        except OSError as err:
            if err.errno == errno.EINVAL and want_lost and _lost_format_ok is None:
                want_lost = False
                continue
            if (err.errno in (errno.EACCES, errno.EPERM) and excl_k is None and not spec.exclude_kernel
                    and pid != -1 and spec.type != abi.PERF_TYPE_TRACEPOINT):
                excl_k = True
                note = (f"user mode only: kernel-mode counting is not allowed "
                        f"(kernel.perf_event_paranoid={paranoid()})")
                continue
            status, msg = classify_errno(err.errno, spec, pid, cpu)
            return Counter(spec, None, status, msg, fmt)
        if want_lost and _lost_format_ok is None:
            _lost_format_ok = True
        elif not want_lost and _lost_format_ok is None:
            _lost_format_ok = False
        return Counter(spec, fd, "ok", "", fmt, note)
    status, msg = classify_errno(errno.EINVAL, spec, pid, cpu)
    return Counter(spec, None, status, msg, rf)


class CounterSet:
    """Counters opened together on one target (a thread, a process with inheritance, a CPU)."""

    def __init__(self, counters: list[Counter], pid: int, cpu: int, group: bool):
        self.counters = counters
        self.pid = pid
        self.cpu = cpu
        self.group = group
        self.enabled = False

    @property
    def specs(self) -> list[EventSpec]:
        return [c.spec for c in self.counters]

    @property
    def opened(self) -> list[Counter]:
        return [c for c in self.counters if c.fd is not None]

    def _ioctl(self, req: int) -> None:
        for c in self.opened:
            try:
                fcntl.ioctl(c.fd, req, 0)
            except OSError:
                pass

    def enable(self) -> None:
        self._ioctl(abi.IOC_ENABLE)
        self.enabled = True

    def disable(self) -> None:
        self._ioctl(abi.IOC_DISABLE)
        self.enabled = False

    def reset(self) -> None:
        self._ioctl(abi.IOC_RESET)

    def read(self) -> list[CounterValue]:
        return [c.read() for c in self.counters]

    def close(self) -> None:
        for c in self.counters:
            c.close()

    def __enter__(self) -> "CounterSet":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self.counters)


def open_counters(specs: Sequence[EventSpec], pid: int = -1, cpu: int = -1, inherit: bool = True,
                  enable_on_exec: bool = False, group: bool = False, enabled: bool | None = None,
                  group_read: bool = False) -> CounterSet:
    """Open `specs` on a process/thread (`pid`, all CPUs) or on a CPU (`pid=-1`, `cpu>=0`).

    With `inherit`, threads and children the target creates later are counted too (and their
    counts are folded in when they exit, so the set is readable after the target exited).
    With `enable_on_exec`, counting starts when the target calls exec (see `launch`); otherwise
    the counters start enabled unless `enabled=False`. `group=True` schedules them as one
    group (all or none on the PMU at a time). Failures are per event, never an exception,
    except a missing target (UserError) or system-wide counting without permission
    (UserError, with what to do). `group_read` makes it a group read in one call
    (PERF_FORMAT_GROUP: one read of the leader gives every counter, so reading another CPU's
    counters costs one inter-processor interrupt, not one each); each opened counter's
    `group_index` is its place in that read. Not with `inherit` (older kernels refuse it)."""
    if group_read:
        group, inherit = True, False
    if pid == -1 and cpu < 0:
        raise UserError("open_counters: give a process (pid) or a CPU (cpu >= 0)")
    if pid == -1 and inherit:
        inherit = False       # per-CPU events cannot inherit
    if enabled is None:
        enabled = not enable_on_exec
    counters: list[Counter] = []
    leader = -1
    for spec in specs:
        c = _open_one(spec, pid, cpu, leader if group else -1, disabled=(not enabled) if (not group or leader == -1) else False,
                      inherit=inherit, enable_on_exec=enable_on_exec and (not group or leader == -1),
                      extra_read_format=abi.FORMAT_GROUP if group_read else 0)
        if c.fd is None and c.message.startswith("no process"):
            for o in counters:
                o.close()
            raise UserError(f"cannot attach to process {pid}: it does not exist (or exited)")
        if group and leader == -1 and c.fd is not None:
            leader = c.fd
        if group_read and c.fd is not None:
            c.group_index = sum(o.fd is not None for o in counters)
        counters.append(c)
    if pid == -1 and counters and all(c.status == "denied" for c in counters):
        for o in counters:
            o.close()
        raise UserError(denied_message(None, cpu_wide=True))
    cs = CounterSet(counters, pid, cpu, group)
    cs.enabled = enabled
    return cs




def probe(specs: Sequence[EventSpec]) -> list[tuple[EventSpec, str, str]]:
    """Whether each event can be counted here: open it on this process, then close it."""
    out = []
    for spec in specs:
        c = _open_one(spec, 0, -1, -1, disabled=True)
        out.append((spec, c.status, c.message))
        c.close()
    return out
