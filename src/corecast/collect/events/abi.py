"""The Linux perf_event ABI that corecast uses: constants and `struct perf_event_attr`.

Values are those of `include/uapi/linux/perf_event.h`; they are part of the kernel's stable
user-space ABI. Kept in the events package so that both spec parsing and `collect.perf` can
use them without importing each other.
"""
from __future__ import annotations

import ctypes
import os

# --- event types (perf_type_id) -------------------------------------------------------------
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4
PERF_TYPE_BREAKPOINT = 5

TYPE_NAMES = {
    PERF_TYPE_HARDWARE: "hardware",
    PERF_TYPE_SOFTWARE: "software",
    PERF_TYPE_TRACEPOINT: "tracepoint",
    PERF_TYPE_HW_CACHE: "hw-cache",
    PERF_TYPE_RAW: "raw",
    PERF_TYPE_BREAKPOINT: "breakpoint",
}

# --- generic hardware events (perf_hw_id) ---------------------------------------------------
HW_EVENTS = {
    "cpu-cycles": 0, "cycles": 0,
    "instructions": 1,
    "cache-references": 2,
    "cache-misses": 3,
    "branch-instructions": 4, "branches": 4,
    "branch-misses": 5,
    "bus-cycles": 6,
    "stalled-cycles-frontend": 7, "idle-cycles-frontend": 7,
    "stalled-cycles-backend": 8, "idle-cycles-backend": 8,
    "ref-cycles": 9,
}

# --- software events (perf_sw_ids) ----------------------------------------------------------
SW_EVENTS = {
    "cpu-clock": 0,
    "task-clock": 1,
    "page-faults": 2, "faults": 2,
    "context-switches": 3, "cs": 3,
    "cpu-migrations": 4, "migrations": 4,
    "minor-faults": 5,
    "major-faults": 6,
    "alignment-faults": 7,
    "emulation-faults": 8,
    "dummy": 9,
    "bpf-output": 10,
    "cgroup-switches": 11,
}
SW_TASK_CLOCK = 1
SW_CPU_CLOCK = 0
SW_DUMMY = 9

# --- generic hardware cache events: config = id | (op << 8) | (result << 16) -------------------
HW_CACHE_IDS = {"L1-dcache": 0, "L1-icache": 1, "LLC": 2, "dTLB": 3, "iTLB": 4, "branch": 5, "node": 6}
HW_CACHE_OPS = {"loads": 0, "load": 0, "stores": 1, "store": 1, "prefetches": 2, "prefetch": 2}
HW_CACHE_RESULTS = {"": 0, "misses": 1, "miss": 1}

# --- read_format ------------------------------------------------------------------------------
FORMAT_TOTAL_TIME_ENABLED = 1 << 0
FORMAT_TOTAL_TIME_RUNNING = 1 << 1
FORMAT_ID = 1 << 2
FORMAT_GROUP = 1 << 3
FORMAT_LOST = 1 << 4          # Linux >= 6.0

# --- sample_type ------------------------------------------------------------------------------
SAMPLE_IP = 1 << 0
SAMPLE_TID = 1 << 1
SAMPLE_TIME = 1 << 2
SAMPLE_ADDR = 1 << 3
SAMPLE_READ = 1 << 4
SAMPLE_CALLCHAIN = 1 << 5
SAMPLE_ID = 1 << 6
SAMPLE_CPU = 1 << 7
SAMPLE_PERIOD = 1 << 8
SAMPLE_STREAM_ID = 1 << 9
SAMPLE_IDENTIFIER = 1 << 16

# --- attr flag bits (the __u64 bit field after read_format) ----------------------------------
FLAG_BITS = {
    "disabled": 0, "inherit": 1, "pinned": 2, "exclusive": 3, "exclude_user": 4,
    "exclude_kernel": 5, "exclude_hv": 6, "exclude_idle": 7, "mmap": 8, "comm": 9, "freq": 10,
    "inherit_stat": 11, "enable_on_exec": 12, "task": 13, "watermark": 14,
    "mmap_data": 17, "sample_id_all": 18, "exclude_host": 19, "exclude_guest": 20,
    "context_switch": 26, "inherit_thread": 35, "remove_on_exec": 36,
}

# --- record types in the ring buffer --------------------------------------------------------
RECORD_LOST = 2
RECORD_COMM = 3
RECORD_EXIT = 4
RECORD_THROTTLE = 5
RECORD_UNTHROTTLE = 6
RECORD_FORK = 7
RECORD_READ = 8
RECORD_SAMPLE = 9
RECORD_LOST_SAMPLES = 13

# --- ioctls: _IO('$', n) ------------------------------------------------------------------------
IOC_ENABLE = 0x2400
IOC_DISABLE = 0x2401
IOC_RESET = 0x2403
IOC_SET_OUTPUT = 0x2405         # _IO('$', 5): send this event's records to another's buffer
IOC_FLAG_GROUP = 1

# --- perf_event_open(2) flags -------------------------------------------------------------------
FD_CLOEXEC = 1 << 3            # PERF_FLAG_FD_CLOEXEC

# --- system call numbers --------------------------------------------------------------------
_SYSCALLS = {"x86_64": 298, "amd64": 298, "aarch64": 241, "arm64": 241, "i386": 336, "i686": 336,
             "ppc64le": 319, "ppc64": 319, "s390x": 331, "riscv64": 241, "loongarch64": 241}
NR_PERF_EVENT_OPEN = _SYSCALLS.get(os.uname().machine)     # platform.machine(), without importing it


class PerfEventAttr(ctypes.Structure):
    """`struct perf_event_attr` up to PERF_ATTR_SIZE_VER5 (112 bytes, Linux >= 4.1)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
    ]

    def set_flag(self, name: str, on: bool = True) -> None:
        bit = 1 << FLAG_BITS[name]
        self.flags = (self.flags | bit) if on else (self.flags & ~bit)

    def get_flag(self, name: str) -> bool:
        return bool(self.flags >> FLAG_BITS[name] & 1)


ATTR_SIZE = ctypes.sizeof(PerfEventAttr)
assert ATTR_SIZE == 112, ATTR_SIZE

# Mmap control page (struct perf_event_mmap_page): offsets of the data-area fields.
MMAP_DATA_HEAD = 1024
MMAP_DATA_TAIL = 1032
MMAP_DATA_OFFSET = 1040
MMAP_DATA_SIZE = 1048
