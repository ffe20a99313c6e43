"""Sampling: the mmap ring buffer and the event-based sampler (a group whose leader overflows
every sample_period events and writes the group's counts as a sample)."""
from __future__ import annotations

import ctypes
import fcntl
import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Sequence

from ...errors import UserError
from ..events import abi
from ..events.spec import EventSpec
from .counting import Counter, CounterValue, _open_one, scale

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
