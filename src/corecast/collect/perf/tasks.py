"""Following every thread of a process tree with the kernel's task records (inherited per-CPU
counters with inherit_stat; FORK/EXIT and READ records with each exiting thread's counts)."""
from __future__ import annotations

import errno
import fcntl
import os
import struct
from dataclasses import dataclass, field
from typing import Sequence

from ..events import abi
from ..events.spec import EventSpec
from .counting import Counter, CounterValue, _open_one, delta_value, scale
from .sampling import RingBuffer

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
