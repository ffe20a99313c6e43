"""perf_event_open(2) from Python, without a kernel module.

    from corecast.collect.events import resolve
    from corecast.collect.perf import open_counters, launch

    child = launch(["./prog", "arg"])                  # forked, waits before exec
    with open_counters(resolve("instr,cycles,task_clock"), pid=child.pid,
                       enable_on_exec=True) as cs:
        child.start()                                  # exec: counting starts here
        status = child.wait()
        for v in cs.read():                            # readable after the target exited
            print(v.name, v.value, v.status, v.message)

Every event carries a status: `ok`, `not supported` (the machine lacks it), `denied` (with the
`perf_event_paranoid` value and what to do) or `invalid` (the kernel rejected the attribute).
A value that could not be counted is `None`, never 0. Values are scaled by
time_enabled/time_running when the kernel multiplexed the counter.

`open_sampler` opens an event group whose leader overflows every `sample_period` events and
writes a sample (the group's counts) into an mmap ring buffer; `Sampler.drain()` reads them,
with the lost-record accounting the kernel gives (PERF_RECORD_LOST and PERF_FORMAT_LOST).
"""
from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import select
import signal
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

from ..errors import UserError
from .events import abi
from .events.spec import EventSpec

PARANOID_PATH = Path("/proc/sys/kernel/perf_event_paranoid")
STATUSES = ("ok", "not supported", "denied", "invalid")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long

_lost_format_ok: bool | None = None     # does this kernel take PERF_FORMAT_LOST (Linux >= 6.0)?
_lock = threading.Lock()


def paranoid() -> int | None:
    try:
        return int(PARANOID_PATH.read_text().strip())
    except (OSError, ValueError):
        return None


def _is_privileged() -> bool:
    if os.geteuid() == 0:
        return True
    # CAP_PERFMON (38) or CAP_SYS_ADMIN (21) in the effective set
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("CapEff:"):
                caps = int(line.split()[1], 16)
                return bool(caps >> 38 & 1 or caps >> 21 & 1)
    except (OSError, ValueError):
        pass
    return False


def denied_message(spec: EventSpec | None = None, cpu_wide: bool = False) -> str:
    p = paranoid()
    what = "system-wide (per-CPU) counting" if cpu_wide else (
        "kernel-mode counting" if spec is not None and not spec.exclude_kernel else "this event")
    if spec is not None and spec.type == abi.PERF_TYPE_TRACEPOINT:
        what = "tracepoints"
    need = {"system-wide (per-CPU) counting": 0, "kernel-mode counting": 1}.get(what, -1)
    return (f"permission denied for {what} (kernel.perf_event_paranoid={p if p is not None else '?'}; "
            f"needs <= {need} or CAP_PERFMON: run as root, or `sysctl kernel.perf_event_paranoid={need}`)")


def perf_event_open(attr: abi.PerfEventAttr, pid: int, cpu: int, group_fd: int = -1,
                    flags: int = abi.FD_CLOEXEC) -> int:
    """The raw system call; raises OSError with errno."""
    if abi.NR_PERF_EVENT_OPEN is None:
        raise OSError(errno.ENOSYS, "perf_event_open: unknown system call number on this architecture")
    ctypes.set_errno(0)
    fd = _libc.syscall(ctypes.c_long(abi.NR_PERF_EVENT_OPEN), ctypes.byref(attr), ctypes.c_int(pid),
                       ctypes.c_int(cpu), ctypes.c_int(group_fd), ctypes.c_ulong(flags))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int(fd)


def make_attr(spec: EventSpec, *, disabled: bool = True, inherit: bool = False,
              enable_on_exec: bool = False, read_format: int = 0, sample_period: int | None = None,
              sample_type: int = 0, exclude_kernel: bool | None = None, wakeup_events: int = 0,
              task: bool = False, comm: bool = False, sample_id_all: bool = False,
              inherit_stat: bool = False, watermark: int = 0) -> abi.PerfEventAttr:
    attr = abi.PerfEventAttr()
    attr.type = spec.type
    attr.size = abi.ATTR_SIZE
    attr.config = spec.config
    attr.config1 = spec.config1
    attr.config2 = spec.config2
    attr.read_format = read_format
    attr.set_flag("disabled", disabled)
    attr.set_flag("inherit", inherit)
    attr.set_flag("inherit_stat", inherit_stat)
    attr.set_flag("enable_on_exec", enable_on_exec)
    attr.set_flag("exclude_user", spec.exclude_user)
    attr.set_flag("exclude_kernel", spec.exclude_kernel if exclude_kernel is None else exclude_kernel)
    attr.set_flag("exclude_hv", spec.exclude_hv)
    attr.set_flag("task", task)
    attr.set_flag("comm", comm)
    attr.set_flag("sample_id_all", sample_id_all)
    if sample_period:
        attr.sample_period = sample_period
        attr.sample_type = sample_type
        attr.wakeup_events = wakeup_events
    if watermark:
        # wake a poll()er once `watermark` bytes are in the buffer (the union's other face)
        attr.set_flag("watermark", True)
        attr.wakeup_events = watermark
    return attr


def classify_errno(err: int, spec: EventSpec, pid: int, cpu: int) -> tuple[str, str]:
    """(status, message) for a failed perf_event_open."""
    kind = spec.kind
    if err in (errno.EACCES, errno.EPERM):
        return "denied", denied_message(spec, cpu_wide=(pid == -1))
    if err in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.ENXIO):
        if kind == "hardware":
            return "not supported", ("this machine has no hardware PMU for it (a VM without a virtual PMU, "
                                     "or the CPU lacks the event)")
        return "not supported", f"the kernel does not support this {kind} event ({os.strerror(err)})"
    if err == errno.ESRCH:
        return "invalid", f"no process or thread {pid} (it exited)"
    if err == errno.EMFILE:
        return "invalid", "too many open files (raise `ulimit -n`)"
    if err == errno.E2BIG:
        return "invalid", "the kernel rejected the attribute size"
    if err == errno.EINVAL:
        if kind == "hardware":
            return "invalid", ("the kernel rejected the encoding (invalid or unsupported on this CPU; "
                               f"config={spec.config:#x})")
        return "invalid", "the kernel rejected the event attributes (EINVAL)"
    if err == errno.EBUSY:
        return "not supported", "the counter is in use by another tool (EBUSY)"
    return "invalid", f"perf_event_open failed: {os.strerror(err)}"


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

    @property
    def fraction_running(self) -> float | None:
        return self.running_ns / self.enabled_ns if self.enabled_ns else None

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

    @property
    def name(self) -> str:
        return self.spec.name

    def read(self) -> CounterValue:
        if self.fd is None:
            return CounterValue(self.spec.name, None, None, 0, 0, self.status, self.message, spec=self.spec)
        n = 3 + bool(self.read_format & abi.FORMAT_ID) + bool(self.read_format & abi.FORMAT_LOST)
        try:
            data = os.read(self.fd, 8 * n)
        except OSError as err:
            return CounterValue(self.spec.name, None, None, 0, 0, "invalid", f"read failed: {err.strerror}",
                                spec=self.spec)
        if len(data) < 24:
            return CounterValue(self.spec.name, None, None, 0, 0, "invalid", "short read", spec=self.spec)
        vals = struct.unpack(f"<{len(data) // 8}Q", data)
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
                  enable_on_exec: bool = False, group: bool = False, enabled: bool | None = None) -> CounterSet:
    """Open `specs` on a process/thread (`pid`, all CPUs) or on a CPU (`pid=-1`, `cpu>=0`).

    With `inherit`, threads and children the target creates later are counted too (and their
    counts are folded in when they exit, so the set is readable after the target exited).
    With `enable_on_exec`, counting starts when the target calls exec (see `launch`); otherwise
    the counters start enabled unless `enabled=False`. `group=True` schedules them as one
    group (all or none on the PMU at a time). Failures are per event, never an exception,
    except a missing target (UserError) or system-wide counting without permission
    (UserError, with what to do)."""
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
                      inherit=inherit, enable_on_exec=enable_on_exec and (not group or leader == -1))
        if c.fd is None and c.message.startswith("no process"):
            for o in counters:
                o.close()
            raise UserError(f"cannot attach to process {pid}: it does not exist (or exited)")
        if group and leader == -1 and c.fd is not None:
            leader = c.fd
        counters.append(c)
    if pid == -1 and counters and all(c.status == "denied" for c in counters):
        for o in counters:
            o.close()
        raise UserError(denied_message(None, cpu_wide=True))
    cs = CounterSet(counters, pid, cpu, group)
    cs.enabled = enabled
    return cs


# --------------------------------------------------------------------------------------------
# the mmap ring buffer

class RingBuffer:
    """The ring buffer of one event: a control page and `pages` data pages (a power of two)
    mapped read-write, so that the kernel never overwrites records not yet read."""

    def __init__(self, fd: int, pages: int):
        if pages < 1 or pages & (pages - 1):
            raise ValueError("pages must be a power of two")
        self._page = mmap.PAGESIZE
        self.size = pages * self._page
        self.mm: mmap.mmap | None = mmap.mmap(fd, (pages + 1) * self._page, mmap.MAP_SHARED,
                                              mmap.PROT_READ | mmap.PROT_WRITE)
        # where it is mapped (for native code that looks at the head; valid until close)
        probe = ctypes.c_char.from_buffer(self.mm)
        self.address = ctypes.addressof(probe)
        del probe

    def read_records(self) -> list[tuple[int, int, bytes]]:
        """(type, misc, body) of every whole record written since the last call; their space
        is handed back to the kernel."""
        mm = self.mm
        if mm is None:
            return []
        head = struct.unpack_from("<Q", mm, abi.MMAP_DATA_HEAD)[0]
        tail = struct.unpack_from("<Q", mm, abi.MMAP_DATA_TAIL)[0]
        # x86 and arm64 loads of the head are ordered before the data loads below for a
        # PROT_READ|WRITE mapping as the kernel documents; Python adds no reordering.
        if head == tail:
            return []
        size, base = self.size, self._page
        avail = head - tail
        start = tail % size
        if start + avail <= size:
            data = bytes(mm[base + start: base + start + avail])
        else:
            first = size - start
            data = bytes(mm[base + start: base + size]) + bytes(mm[base: base + avail - first])
        out = []
        off = 0
        while off + 8 <= len(data):
            rtype, misc, rsize = struct.unpack_from("<IHH", data, off)
            if rsize < 8 or off + rsize > len(data):
                break
            out.append((rtype, misc, data[off + 8: off + rsize]))
            off += rsize
        struct.pack_into("<Q", mm, abi.MMAP_DATA_TAIL, tail + off)
        return out

    def close(self) -> None:
        if self.mm is not None:
            try:
                self.mm.close()
            except (BufferError, ValueError):
                pass
            self.mm = None


# --------------------------------------------------------------------------------------------
# overflow (event-based) sampling through the mmap ring buffer

@dataclass
class Sample:
    """One overflow sample: the group's cumulative raw counts at that moment."""

    pid: int
    tid: int
    time_ns: int
    cpu: int
    enabled_ns: int
    running_ns: int
    values: list[int]          # in the order of the sampler's specs
    lost: list[int] | None = None


@dataclass
class DrainResult:
    samples: list[Sample] = field(default_factory=list)
    lost_records: int = 0          # PERF_RECORD_LOST: samples the buffer had no room for
    throttled: int = 0             # PERF_RECORD_THROTTLE: the kernel throttled the event
    other: int = 0


class Sampler:
    """An event group sampled on the overflow of its leader (PMCTrack's EBS)."""

    SAMPLE_TYPE = abi.SAMPLE_TID | abi.SAMPLE_TIME | abi.SAMPLE_CPU | abi.SAMPLE_READ

    def __init__(self, counters: list[Counter], pid: int, cpu: int, pages: int, read_format: int):
        self.counters = counters
        self.pid = pid
        self.cpu = cpu
        self.read_format = read_format
        self.lost_records = 0
        self.throttled = 0
        self._rb: RingBuffer | None = None
        leader = counters[0]
        if leader.fd is not None:
            try:
                self._rb = RingBuffer(leader.fd, pages)
            except OSError as err:
                leader.status, leader.message = "invalid", f"mmap of the ring buffer failed: {err.strerror}"
                self.close()

    @property
    def specs(self) -> list[EventSpec]:
        return [c.spec for c in self.counters]

    @property
    def fd(self) -> int | None:
        return self.counters[0].fd

    def enable(self) -> None:
        if self.fd is not None:
            fcntl.ioctl(self.fd, abi.IOC_ENABLE, abi.IOC_FLAG_GROUP)

    def disable(self) -> None:
        if self.fd is not None:
            try:
                fcntl.ioctl(self.fd, abi.IOC_DISABLE, abi.IOC_FLAG_GROUP)
            except OSError:
                pass

    def read(self) -> list[CounterValue]:
        """The group's cumulative counts (one read of the leader, PERF_FORMAT_GROUP)."""
        opened = [c for c in self.counters if c.fd is not None]
        failed = {id(c): CounterValue(c.name, None, None, 0, 0, c.status, c.message, spec=c.spec)
                  for c in self.counters if c.fd is None}
        if not opened:
            return list(failed.values())
        per = 2 + bool(self.read_format & abi.FORMAT_LOST)
        try:
            data = os.read(opened[0].fd, 8 * (3 + per * len(opened)))
            s, _ = self._parse_read(data, 0)
        except (OSError, struct.error) as err:
            return [CounterValue(c.name, None, None, 0, 0, "invalid", f"read failed: {err}", spec=c.spec)
                    for c in self.counters]
        vals = dict(zip((id(c) for c in opened), range(len(s.values))))
        out = []
        for c in self.counters:
            if id(c) in failed:
                out.append(failed[id(c)])
                continue
            i = vals[id(c)]
            raw = s.values[i]
            v = scale(raw, s.enabled_ns, s.running_ns)
            out.append(CounterValue(c.name, v, raw, s.enabled_ns, s.running_ns, "ok",
                                    "" if v is not None else "not counted", s.lost[i] if s.lost else None,
                                    c.spec))
        return out

    def _parse_read(self, buf: bytes, off: int) -> tuple[Sample, int]:
        nr, en, run = struct.unpack_from("<3Q", buf, off)
        off += 24
        per = 2 + bool(self.read_format & abi.FORMAT_LOST)
        vals, lost = [], []
        for _ in range(nr):
            rec = struct.unpack_from(f"<{per}Q", buf, off)
            off += 8 * per
            vals.append(rec[0])
            if per == 3:
                lost.append(rec[2])
        return Sample(0, 0, 0, 0, en, run, vals, lost or None), off

    def drain(self) -> DrainResult:
        """Read every record the kernel wrote since the last drain."""
        out = DrainResult()
        if self._rb is None:
            return out
        for rtype, _misc, body in self._rb.read_records():
            if rtype == abi.RECORD_SAMPLE:
                pid, tid, t, cpu, _res = struct.unpack_from("<IIQII", body, 0)
                s, _ = self._parse_read(body, 24)
                s.pid, s.tid, s.time_ns, s.cpu = pid, tid, t, cpu
                out.samples.append(s)
            elif rtype == abi.RECORD_LOST:
                _id, lost = struct.unpack_from("<QQ", body, 0)
                out.lost_records += lost
            elif rtype == abi.RECORD_LOST_SAMPLES:
                out.lost_records += struct.unpack_from("<Q", body, 0)[0]
            elif rtype == abi.RECORD_THROTTLE:
                out.throttled += 1
            else:
                out.other += 1
        self.lost_records += out.lost_records
        self.throttled += out.throttled
        return out

    def lost_total(self) -> int:
        """Samples lost so far: the kernel's PERF_FORMAT_LOST count of the leader when it has
        one (a full buffer that is never drained writes no PERF_RECORD_LOST), else the
        PERF_RECORD_LOST records seen by `drain`."""
        vals = self.read()
        fmt = vals[0].lost if vals and vals[0].lost is not None else 0
        return max(fmt, self.lost_records)

    def close(self) -> None:
        if self._rb is not None:
            self._rb.close()
            self._rb = None
        for c in self.counters:
            c.close()

    def __enter__(self) -> "Sampler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_sampler(specs: Sequence[EventSpec], pid: int = -1, cpu: int = -1, pages: int = 64,
                 enable_on_exec: bool = False, enabled: bool | None = None,
                 inherit: bool = False) -> Sampler:
    """Open `specs` as one group led by the event with a `sample_period` (it is moved first);
    every period a sample with the whole group's counts goes into a ring buffer of `pages`
    pages (a power of two). Samples read the group, which the kernel refuses with inheritance
    on older kernels, so samplers are opened per thread (`inherit=False`) by default."""
    if pages & (pages - 1):
        raise ValueError("pages must be a power of two")
    specs = list(specs)
    lead = [s for s in specs if s.sample_period]
    if len(lead) != 1:
        raise UserError("event-based sampling needs exactly one event with ebs=PERIOD")
    specs.remove(lead[0])
    specs.insert(0, lead[0])
    if enabled is None:
        enabled = not enable_on_exec
    rf = abi.FORMAT_TOTAL_TIME_ENABLED | abi.FORMAT_TOTAL_TIME_RUNNING | abi.FORMAT_ID | abi.FORMAT_GROUP
    counters: list[Counter] = []
    leader_fd = -1
    for i, spec in enumerate(specs):
        if i == 0:
            c = _open_one(spec, pid, cpu, -1, disabled=not enabled, inherit=inherit,
                          enable_on_exec=enable_on_exec, sample_period=spec.sample_period,
                          sample_type=Sampler.SAMPLE_TYPE, wakeup_events=1, extra_read_format=abi.FORMAT_GROUP)
            if c.fd is None:
                if c.message.startswith("no process"):
                    raise UserError(f"cannot attach to process {pid}: it does not exist (or exited)")
                counters.append(c)
                for s in specs[1:]:
                    counters.append(Counter(s, None, c.status if c.status != "ok" else "invalid",
                                            f"not opened: the sampling leader {spec.name} failed ({c.message})", rf))
                return Sampler(counters, pid, cpu, pages, rf)
            leader_fd = c.fd
            rf = c.read_format
        else:
            c = _open_one(spec, pid, cpu, leader_fd, disabled=False, inherit=inherit,
                          extra_read_format=abi.FORMAT_GROUP)
        counters.append(c)
    # the group read in samples lists only members that opened; keep the order consistent
    s = Sampler(counters, pid, cpu, pages, rf)
    return s


# --------------------------------------------------------------------------------------------
# following every thread of a process tree with the kernel's task records

DUMMY = EventSpec(name="dummy", type=abi.PERF_TYPE_SOFTWARE, config=abi.SW_DUMMY,
                  description="software dummy event (carries the task records)")


class TrackerUnavailable(Exception):
    """The kernel cannot follow the target's threads with task records here (the message
    says why); callers fall back to finding threads in /proc."""


@dataclass
class TaskRecord:
    """PERF_RECORD_FORK or PERF_RECORD_EXIT of a task (thread or process)."""

    kind: str                 # fork | exit
    pid: int                  # its process (thread group)
    ppid: int
    tid: int
    ptid: int                 # the thread that created it (fork), or its parent (exit)
    time_ns: int              # perf clock


@dataclass
class ThreadRead:
    """PERF_RECORD_READ written as a task exits: its own counts of one inherited counter on
    one CPU, from its creation to its exit."""

    pid: int
    tid: int
    set_index: int
    index: int                # the event's position in its set
    cpu: int
    raw: int
    enabled_ns: int
    running_ns: int
    lost: int | None = None


@dataclass
class TaskDrain:
    forks: list[TaskRecord] = field(default_factory=list)
    exits: list[TaskRecord] = field(default_factory=list)
    reads: list[ThreadRead] = field(default_factory=list)
    lost_records: int = 0     # PERF_RECORD_LOST: records the buffers had no room for
    unknown: int = 0          # READ records of a counter this tracker did not open


def combine_cpus(spec: EventSpec, parts: Sequence[tuple[int, int, int, int | None]]) -> CounterValue:
    """One task's count of an event opened once per CPU, from its per-CPU (raw, enabled,
    running, lost) parts.

    A per-task counter bound to a CPU is enabled for the task's whole time on any CPU but
    runs only while the task is on that CPU, so its own enabled/running says where the task
    ran, not whether the PMU multiplexed it. Summed over the CPUs, running is the time the
    event counted and enabled (the same on every CPU) the time it was wanted: a hardware
    event is scaled by their ratio; kernel software events and tracepoints always count when
    their task runs, so their sum is exact and is not scaled."""
    raw = sum(p[0] for p in parts)
    run = sum(p[2] for p in parts)
    en = max([p[1] for p in parts] + [run])
    lost_parts = [p[3] for p in parts if p[3] is not None]
    lost = sum(lost_parts) if lost_parts else None
    if spec.kind != "hardware":
        return CounterValue(spec.name, float(raw), raw, run, run, "ok", "", lost, spec)
    val = scale(raw, en, run)
    msg = "" if val is not None else "not counted (never on a counter while the task ran)"
    if en == 0 and raw == 0:
        val, msg = 0.0, "did not run"
    return CounterValue(spec.name, val, raw, en, run, "ok", msg, lost, spec)


def remainder(spec: EventSpec, total: CounterValue, reported: CounterValue | None) -> CounterValue:
    """What a task's lifetime count `total` adds to the cumulative count already reported in
    its earlier rows (`reported`, from a counter opened on it later): its exit row."""
    if reported is None or reported.raw is None:
        return total
    raw = max(0, (total.raw or 0) - reported.raw)
    en = max(0, total.enabled_ns - reported.enabled_ns)
    run = max(0, total.running_ns - reported.running_ns)
    if spec.kind != "hardware":
        return CounterValue(spec.name, float(raw), raw, en, run, "ok", "" if en or raw else "did not run "
                            "in this interval", total.lost, spec)
    return delta_value(spec.name, CounterValue(spec.name, None, raw, en, run, "ok", "", total.lost, spec),
                       None)


class TaskTracker:
    """Counters on a process tree that the kernel hands down to every thread and child it
    creates (inherit), each opened once per CPU so that they can share a per-CPU ring buffer
    (the kernel refuses to map an inherited counter that is not bound to a CPU). Into those
    buffers the kernel writes, for every task of the tree:

    - PERF_RECORD_FORK when it is created and PERF_RECORD_EXIT when it ends (attr.task, on a
      dummy event per CPU that owns the buffer), so new threads are known at once;
    - PERF_RECORD_READ as it exits, with that task's own count of each counter (inherit_stat),
      so every thread, however short-lived, has an exact count from creation to exit.

    The counts of the tree as a whole (`read`) are the inherited totals. The records of the
    counting events go to the dummy's buffer of the same CPU (PERF_EVENT_IOC_SET_OUTPUT).
    No PERF_FORMAT_GROUP: older kernels refuse it with inherit, and each READ record names
    its counter by PERF_FORMAT_ID instead.

    Each root also gets a disabled, not inherited dummy: a context holding an event that is
    not inherited is never marked as its children's clone, so the kernel never swaps the
    root's own (parent) counters into a child at a context switch -- after such a swap the
    child would exit without a READ record."""

    def __init__(self, sets: Sequence[Sequence[EventSpec]], cpus: Sequence[int], pages: int = 64):
        self.sets = [list(s) for s in sets]
        self.cpus = list(cpus)
        self.pages = pages
        self.roots: list[int] = []
        # [set][event] -> {(root, cpu): Counter}
        self.counters: list[list[dict[tuple[int, int], Counter]]] = [[{} for _ in s] for s in self.sets]
        # [set][event] -> (status, message) when the tracker could not count it
        self.failed: list[list[tuple[str, str] | None]] = [[None for _ in s] for s in self.sets]
        self._ids: dict[int, tuple[int, int, int]] = {}
        self._rbs: dict[int, RingBuffer] = {}
        self._out: dict[int, int] = {}
        self._aux: list[Counter] = []
        self.lost_records = 0
        self.enabled = [False] * len(self.sets)

    # -- opening --------------------------------------------------------------------------
    def add_root(self, pid: int, enable_on_exec: bool = False, live: int = 0) -> bool:
        """Follow `pid` (a process, or one thread of a running process) and all it creates
        from now on. False when it no longer exists; TrackerUnavailable when the kernel
        cannot do it."""
        pin = _open_one(DUMMY, pid, -1, -1, disabled=True)
        if pin.fd is None:
            if pin.message.startswith("no process"):
                return False
            raise TrackerUnavailable(f"cannot open a dummy event on {pid}: {pin.message}")
        self._aux.append(pin)
        for cpu in self.cpus:
            d = _open_one(DUMMY, pid, cpu, -1, disabled=False, inherit=True, task=True, watermark=1)
            if d.fd is None:
                if d.message.startswith("no process"):
                    return False
                raise TrackerUnavailable(f"cannot open a task-record event on CPU {cpu}: {d.message}")
            self._aux.append(d)
            if cpu not in self._rbs:
                self._rbs[cpu] = self._map(d.fd, cpu)
                self._out[cpu] = d.fd
            else:
                self._set_output(d.fd, cpu)
        for s, specs in enumerate(self.sets):
            on = s == live
            for i, spec in enumerate(specs):
                if self.failed[s][i] is not None:
                    continue
                for cpu in self.cpus:
                    c = _open_one(spec, pid, cpu, -1, disabled=enable_on_exec or not on, inherit=True,
                                  inherit_stat=True, enable_on_exec=enable_on_exec and on)
                    if c.fd is None:
                        if c.message.startswith("no process"):
                            return False
                        self._drop(s, i, c.status, c.message)
                        break
                    self._set_output(c.fd, cpu)
                    cid = self._read_id(c)
                    if cid is None:
                        c.close()
                        self._drop(s, i, "invalid", "the kernel gave no counter id")
                        break
                    self._ids[cid] = (s, i, cpu)
                    self.counters[s][i][(pid, cpu)] = c
        self.roots.append(pid)
        self.enabled[live] = True
        return True

    def _map(self, fd: int, cpu: int) -> RingBuffer:
        pages = self.pages
        while True:
            try:
                return RingBuffer(fd, pages)
            except OSError as err:
                if err.errno in (errno.EPERM, errno.ENOMEM) and pages > 1:
                    pages //= 2                   # over the perf_event_mlock_kb budget: smaller
                    continue
                raise TrackerUnavailable(f"cannot map a ring buffer for CPU {cpu}: {err.strerror} "
                                         f"(perf_event_mlock_kb and RLIMIT_MEMLOCK bound it)") from None

    def _set_output(self, fd: int, cpu: int) -> None:
        try:
            fcntl.ioctl(fd, abi.IOC_SET_OUTPUT, self._out[cpu])
        except OSError as err:
            raise TrackerUnavailable(f"the kernel refused to share a ring buffer (SET_OUTPUT): "
                                     f"{err.strerror}") from None

    @staticmethod
    def _read_id(c: Counter) -> int | None:
        try:
            data = os.read(c.fd, 8 * 5)
        except OSError:
            return None
        if len(data) < 32:
            return None
        return struct.unpack_from("<4Q", data, 0)[3]

    def _drop(self, s: int, i: int, status: str, message: str) -> None:
        for c in self.counters[s][i].values():
            c.close()
        self.counters[s][i] = {}
        self._ids = {k: v for k, v in self._ids.items() if v[:2] != (s, i)}
        self.failed[s][i] = (status, message)

    # -- reading --------------------------------------------------------------------------
    @property
    def fds(self) -> list[int]:
        """The ring buffers' descriptors: poll() them to wake when a record arrives."""
        return [self._out[c] for c in self.cpus if c in self._out]

    @property
    def rings(self) -> list[int]:
        """Where the ring buffers are mapped: a record is waiting when a buffer's data_head
        differs from its data_tail (valid until close)."""
        return [self._rbs[c].address for c in self.cpus if c in self._rbs and self._rbs[c].mm is not None]

    @property
    def expected_reads(self) -> int:
        """READ records an exiting task of the tree writes: one per counter per CPU."""
        return sum(1 for s in self.failed for f in s if f is None) * len(self.cpus)

    def counting(self, s: int, i: int) -> bool:
        return self.failed[s][i] is None

    def drain(self) -> TaskDrain:
        out = TaskDrain()
        for cpu in self.cpus:
            rb = self._rbs.get(cpu)
            if rb is None:
                continue
            for rtype, _misc, body in rb.read_records():
                if rtype in (abi.RECORD_FORK, abi.RECORD_EXIT) and len(body) >= 24:
                    pid, ppid, tid, ptid, t = struct.unpack_from("<IIIIQ", body, 0)
                    rec = TaskRecord("fork" if rtype == abi.RECORD_FORK else "exit", pid, ppid, tid, ptid, t)
                    (out.forks if rtype == abi.RECORD_FORK else out.exits).append(rec)
                elif rtype == abi.RECORD_READ and len(body) >= 40:
                    pid, tid = struct.unpack_from("<II", body, 0)
                    n = (len(body) - 8) // 8
                    vals = struct.unpack_from(f"<{n}Q", body, 8)
                    key = self._ids.get(vals[3])
                    if key is None:
                        out.unknown += 1
                        continue
                    out.reads.append(ThreadRead(pid, tid, key[0], key[1], key[2], vals[0], vals[1], vals[2],
                                                vals[4] if n > 4 else None))
                elif rtype == abi.RECORD_LOST and len(body) >= 16:
                    out.lost_records += struct.unpack_from("<QQ", body, 0)[1]
        self.lost_records += out.lost_records
        return out

    def read(self, s: int) -> list[CounterValue]:
        """The whole tree's counts of set `s` (inherited totals: live and exited tasks)."""
        out = []
        for i, spec in enumerate(self.sets[s]):
            f = self.failed[s][i]
            if f is not None:
                out.append(CounterValue(spec.name, None, None, 0, 0, f[0], f[1], spec=spec))
                continue
            raw = en = run = 0
            lost: int | None = None
            val: float | None = 0.0
            for root in self.roots:
                parts = []
                for cpu in self.cpus:
                    c = self.counters[s][i].get((root, cpu))
                    if c is None:
                        continue
                    v = c.read()
                    if v.raw is None:
                        continue
                    parts.append((v.raw, v.enabled_ns, v.running_ns, v.lost))
                if not parts:
                    continue
                cv = combine_cpus(spec, parts)
                raw += cv.raw or 0
                en += cv.enabled_ns
                run += cv.running_ns
                if cv.lost is not None:
                    lost = (lost or 0) + cv.lost
                val = None if (val is None or cv.value is None) else val + cv.value
            out.append(CounterValue(spec.name, val if run or raw else None, raw, en, run, "ok",
                                    "" if run or raw else "not counted", lost, spec))
        return out

    # -- control --------------------------------------------------------------------------
    def _ioctl_set(self, s: int, req: int) -> None:
        for ev in self.counters[s]:
            for c in ev.values():
                if c.fd is not None:
                    try:
                        fcntl.ioctl(c.fd, req, 0)      # the kernel applies it to every child too
                    except OSError:
                        pass

    def enable(self, s: int) -> None:
        self._ioctl_set(s, abi.IOC_ENABLE)
        self.enabled[s] = True

    def disable(self, s: int) -> None:
        self._ioctl_set(s, abi.IOC_DISABLE)
        self.enabled[s] = False

    def close(self) -> None:
        for rb in self._rbs.values():
            rb.close()
        self._rbs.clear()
        for s in self.counters:
            for ev in s:
                for c in ev.values():
                    c.close()
        for c in self._aux:
            c.close()
        self._aux.clear()
        self._out.clear()


def open_tracker(sets: Sequence[Sequence[EventSpec]], roots: Sequence[int], cpus: Sequence[int],
                 enable_on_exec: bool = False, live: int = 0, pages: int = 64) -> TaskTracker:
    """A `TaskTracker` on `roots` (a launched command's pid, or every thread of a running
    process) for the event `sets`; set `live` counts, the others start disabled. Raises
    TrackerUnavailable with the reason when the kernel cannot do it."""
    tr = TaskTracker(sets, cpus, pages)
    try:
        opened = [r for r in roots if tr.add_root(r, enable_on_exec, live)]
    except BaseException:
        tr.close()
        raise
    if not opened:
        tr.close()
        raise TrackerUnavailable("the target has no threads left")
    return tr


# --------------------------------------------------------------------------------------------
# launching a command so that counting starts exactly at its exec

class Launched:
    """A forked child that waits for `start()` before it execs the command."""

    def __init__(self, argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None):
        if not argv:
            raise UserError("no command to run")
        self.argv = list(argv)
        go_r, go_w = os.pipe()
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:  # child
            try:
                os.close(go_w)
                os.close(err_r)
                os.read(go_r, 1)
                os.close(go_r)
                if cwd:
                    os.chdir(cwd)
                signal.signal(signal.SIGPIPE, signal.SIG_DFL)
                if env is None:
                    os.execvp(self.argv[0], self.argv)
                else:
                    os.execvpe(self.argv[0], self.argv, env)
            except BaseException as err:  # noqa: BLE001 -- report anything to the parent
                try:
                    e = getattr(err, "errno", None) or 0
                    os.write(err_w, f"{e}:{err}".encode()[:512])
                finally:
                    os._exit(127)
        os.close(go_r)
        os.close(err_w)
        self.pid = pid
        self._go = go_w
        self._err = err_r
        self.status: int | None = None
        self.rusage = None
        self.started = False

    def start(self) -> None:
        """Let the child exec. Raises UserError when the command cannot be run."""
        os.write(self._go, b"g")
        os.close(self._go)
        msg = os.read(self._err, 600)
        os.close(self._err)
        self.started = True
        if msg:
            self.wait()
            code, _, text = msg.decode(errors="replace").partition(":")
            reason = os.strerror(int(code)) if code.isdigit() and int(code) else text
            raise UserError(f"cannot run '{self.argv[0]}': {reason}")

    def poll(self) -> int | None:
        if self.status is not None:
            return self.status
        pid, status, ru = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            return None
        self.status = os.waitstatus_to_exitcode(status)
        self.rusage = ru
        return self.status

    def wait(self) -> int:
        if self.status is None:
            _, status, ru = os.wait4(self.pid, 0)
            self.status = os.waitstatus_to_exitcode(status)
            self.rusage = ru
        return self.status

    def kill(self, sig: int = signal.SIGTERM) -> None:
        if self.status is None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, grace: float = 2.0) -> int:
        """SIGTERM, then SIGKILL if the child is still there after `grace` seconds (a program that
        ignores SIGTERM must not keep corecast waiting); returns its status."""
        self.kill(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if self.status is None:
            self.kill(signal.SIGKILL)
        return self.wait()

    def abandon(self) -> None:
        """Tidy up a child that was never started (an error before start)."""
        if not self.started:
            try:
                os.close(self._go)
                os.close(self._err)
            except OSError:
                pass
            self.kill(signal.SIGKILL)
            self.wait()


def launch(argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None) -> Launched:
    """Fork `argv` stopped before exec; open counters on `.pid` with `enable_on_exec=True`,
    then call `.start()`."""
    return Launched(argv, env, cwd)


def wait_readable(fds: Iterable[int], timeout: float) -> list[int]:
    fds = list(fds)
    if not fds:
        return []
    try:
        r, _, _ = select.select(fds, [], [], timeout)
    except (OSError, ValueError):
        return []
    return r


def probe(specs: Sequence[EventSpec]) -> list[tuple[EventSpec, str, str]]:
    """Whether each event can be counted here: open it on this process, then close it."""
    out = []
    for spec in specs:
        c = _open_one(spec, 0, -1, -1, disabled=True)
        out.append((spec, c.status, c.message))
        c.close()
    return out
