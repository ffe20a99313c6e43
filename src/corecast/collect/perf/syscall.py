"""The perf_event_open(2) system call from Python: attributes, the call, what its errors mean,
and perf_event_paranoid."""
from __future__ import annotations

import ctypes
import errno
import os
import select
from pathlib import Path
from typing import Iterable

from ..events import abi
from ..events.spec import EventSpec

PARANOID_PATH = Path("/proc/sys/kernel/perf_event_paranoid")
STATUSES = ("ok", "not supported", "denied", "invalid")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long



def paranoid() -> int | None:
    try:
        return int(PARANOID_PATH.read_text().strip())
    except (OSError, ValueError):
        return None


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




def wait_readable(fds: Iterable[int], timeout: float) -> list[int]:
    fds = list(fds)
    if not fds:
        return []
    try:
        r, _, _ = select.select(fds, [], [], timeout)
    except (OSError, ValueError):
        return []
    return r
