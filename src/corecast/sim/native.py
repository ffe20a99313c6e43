"""ctypes bindings of the native simulator core (native/sim/, libcorecast_sim.so).

The structures here mirror native/sim/ccsim.h field by field; `_check_sizes()` compares
their sizes with the library's own at load time so a mismatch fails loudly.
"""
from __future__ import annotations

import ctypes as C
from functools import lru_cache

import numpy as np

from ..native import load_library

MAX_CACHES = 8
MAX_TLBS = 6
MAX_CORES = 64
NUNITS = 5
NCLASS = 4

#: numpy dtype of one trace record (16 bytes, little-endian), as `cc_rec` in native/include/cctrace.h
#: (its constants below too: tests/test_trace_header.py compiles the header and compares).
RECORD_DTYPE = np.dtype([("addr", "<u8"), ("aux", "<u4"), ("tid", "<u2"), ("kind", "u1"),
                         ("size", "u1")])

KIND_FETCH, KIND_LOAD, KIND_STORE, KIND_MODIFY, KIND_BRANCH, KIND_MARKER, KIND_UOP = range(7)
BR_TAKEN, BR_COND, BR_INDIRECT, BR_CALL, BR_RET = 1, 2, 4, 8, 16
UNIT_ALU, UNIT_LOAD, UNIT_STORE, UNIT_BRANCH, UNIT_FP = range(5)
UOP_FIRST, UOP_PLACEHOLDER = 1, 2
REG_NONE = 0xFF

CACHE_KIND = {"data": 0, "instruction": 1, "unified": 2}
REPLACEMENT = {"lru": 0, "fifo": 1, "random": 2, "plru": 3}
POLICY = {"inclusive": 0, "exclusive": 1, "victim": 2, "non-inclusive": 3}
SPLIT = {"threads": 0, "transactions": 1, "chunks": 2}
BRANCH = {"none": 0, "gshare": 1, "bimodal": 2}


class CacheCfg(C.Structure):
    _fields_ = [("level", C.c_int32), ("kind", C.c_int32), ("replacement", C.c_int32),
                ("policy", C.c_int32), ("write_allocate", C.c_int32), ("shared", C.c_int32),
                ("size", C.c_uint64), ("line_size", C.c_uint32), ("ways", C.c_uint32)]


class TlbCfg(C.Structure):
    _fields_ = [("level", C.c_int32), ("kind", C.c_int32), ("replacement", C.c_int32),
                ("pad", C.c_int32), ("entries", C.c_uint32), ("ways", C.c_uint32),
                ("page_size", C.c_uint64)]


class Config(C.Structure):
    _fields_ = [("ncores", C.c_int32), ("ncaches", C.c_int32), ("ntlbs", C.c_int32),
                ("bp_kind", C.c_int32), ("bp_history_bits", C.c_int32),
                ("issue_enabled", C.c_int32), ("sched_size", C.c_int32),
                ("issue_width", C.c_int32), ("units", C.c_int32 * NUNITS),
                ("split_mode", C.c_int32), ("stack_hash", C.c_int32),
                ("straddle_all", C.c_int32), ("bp_table_size", C.c_uint32),
                ("force_general", C.c_uint32),
                ("chunk_instructions", C.c_uint64), ("stack_lo", C.c_uint64),
                ("stack_hi", C.c_uint64), ("warmup_instructions", C.c_uint64),
                ("seed", C.c_uint64), ("caches", CacheCfg * MAX_CACHES),
                ("tlbs", TlbCfg * MAX_TLBS)]


class CacheStats(C.Structure):
    _fields_ = [("access", C.c_uint64 * NCLASS), ("miss", C.c_uint64 * NCLASS),
                ("writebacks", C.c_uint64), ("coh_misses", C.c_uint64),
                ("coh_invalidations", C.c_uint64), ("back_invalidations", C.c_uint64),
                ("fills", C.c_uint64), ("evictions", C.c_uint64)]


class TlbStats(C.Structure):
    _fields_ = [("access", C.c_uint64 * 2), ("miss", C.c_uint64 * 2)]


class Stats(C.Structure):
    _fields_ = [("records", C.c_uint64), ("instructions", C.c_uint64), ("markers", C.c_uint64),
                ("first_marker_instr", C.c_uint64), ("last_marker_instr", C.c_uint64),
                ("access", C.c_uint64 * NCLASS), ("split", C.c_uint64 * NCLASS),
                ("served", (C.c_uint64 * 5) * NCLASS),
                ("stlb_hit", C.c_uint64 * 2), ("tlb_walk", C.c_uint64 * 2),
                ("branches", C.c_uint64), ("cond_branches", C.c_uint64), ("taken", C.c_uint64),
                ("mispredicts", C.c_uint64),
                ("invalidations", C.c_uint64), ("upgrades", C.c_uint64),
                ("interventions", C.c_uint64), ("coh_misses", C.c_uint64),
                ("coh_exposed", C.c_uint64), ("mem_writebacks", C.c_uint64),
                ("uops", C.c_uint64), ("cycles", C.c_uint64), ("issue_instructions", C.c_uint64),
                ("placeholder_instructions", C.c_uint64), ("warm", C.c_uint64),
                ("cache", CacheStats * MAX_CACHES), ("tlb", TlbStats * MAX_TLBS),
                ("core_instructions", C.c_uint64 * MAX_CORES)]


class LackeyState(C.Structure):
    _fields_ = [("lines", C.c_uint64), ("trace_lines", C.c_uint64), ("bad_lines", C.c_uint64),
                ("first_bad_line", C.c_uint64), ("messages", C.c_uint64),
                ("msg_dropped", C.c_uint64), ("markers", C.POINTER(C.c_uint64)),
                ("nmarkers", C.c_uint64), ("msg", C.c_char_p), ("msg_cap", C.c_uint64),
                ("msg_len", C.c_uint64), ("tid", C.c_uint16), ("max_tid", C.c_uint16),
                ("pad", C.c_uint32)]


_P = C.c_void_p


@lru_cache(maxsize=1)
def lib() -> C.CDLL:
    """The loaded simulator library (UserError when corecast was built without it)."""
    L = load_library("libcorecast_sim.so")
    L.cc_sim_new.restype = _P
    L.cc_sim_new.argtypes = [C.POINTER(Config), C.c_char_p, C.c_size_t]
    L.cc_sim_free.argtypes = [_P]
    L.cc_sim_run.argtypes = [_P, _P, C.c_size_t]
    L.cc_sim_run.restype = C.c_int
    L.cc_sim_finish.argtypes = [_P]
    L.cc_sim_stats.argtypes = [_P, C.POINTER(Stats)]
    L.cc_sizeof.argtypes = [C.c_int]
    L.cc_sizeof.restype = C.c_size_t
    L.cc_array_new.restype = _P
    L.cc_array_new.argtypes = [C.c_uint32, C.c_uint32, C.c_int, C.c_uint64]
    L.cc_array_free.argtypes = [_P]
    L.cc_array_access.argtypes = [_P, C.c_uint64, C.POINTER(C.c_uint64)]
    L.cc_array_access.restype = C.c_int
    L.cc_array_set_clock.argtypes = [_P, C.c_uint64]
    L.cc_lackey_parse.argtypes = [C.POINTER(LackeyState), _P, C.c_size_t, C.c_int, _P,
                                  C.c_size_t, C.POINTER(C.c_size_t)]
    L.cc_lackey_parse.restype = C.c_size_t
    L.cc_annot_new.restype = _P
    L.cc_annot_new.argtypes = [_P, _P, _P, _P, _P, _P, C.c_uint64]
    L.cc_annot_free.argtypes = [_P]
    L.cc_annotate.argtypes = [_P, _P, C.c_size_t, _P, C.c_int]
    L.cc_annotate.restype = C.c_size_t
    L.cc_annot_add.restype = C.c_int
    L.cc_annot_add.argtypes = [_P, _P, _P, _P, _P, _P, _P, C.c_uint64, _P]
    L.cc_annot_unknown.restype = C.c_size_t
    L.cc_annot_unknown.argtypes = [_P, _P, C.c_size_t, _P, C.c_size_t]
    L.cc_annotate_until_unknown.restype = C.c_size_t
    L.cc_annotate_until_unknown.argtypes = [_P, _P, C.c_size_t, _P, C.POINTER(C.c_size_t)]
    L.cc_ring_create.restype = _P
    L.cc_ring_create.argtypes = [C.c_uint64]
    L.cc_ring_fd.restype = C.c_int
    L.cc_ring_fd.argtypes = [_P]
    L.cc_ring_capacity.restype = C.c_uint64
    L.cc_ring_capacity.argtypes = [_P]
    L.cc_ring_wait.restype = C.c_uint64
    L.cc_ring_wait.argtypes = [_P, C.c_uint64, C.c_int]
    L.cc_ring_at.restype = _P
    L.cc_ring_at.argtypes = [_P]
    L.cc_ring_release.argtypes = [_P, C.c_uint64]
    L.cc_ring_done.restype = C.c_int
    L.cc_ring_done.argtypes = [_P]
    L.cc_ring_counts.argtypes = [_P, C.POINTER(C.c_uint64), C.POINTER(C.c_uint64)]
    L.cc_ring_close.argtypes = [_P]
    L.cc_ring_threads.restype = C.c_int
    L.cc_ring_threads.argtypes = [_P]
    L.cc_trace_census.argtypes = [_P, C.c_size_t, _P, _P]
    L.cc_zstd_bound.restype = C.c_size_t
    L.cc_zstd_bound.argtypes = [C.c_size_t]
    L.cc_zc_new.restype = _P
    L.cc_zc_new.argtypes = [C.c_int]
    L.cc_zc_free.argtypes = [_P]
    L.cc_zc_compress.restype = C.c_size_t
    L.cc_zc_compress.argtypes = [_P, _P, C.c_size_t, _P, C.c_size_t]
    L.cc_zd_new.restype = _P
    L.cc_zd_new.argtypes = []
    L.cc_zd_free.argtypes = [_P]
    L.cc_zd_records.restype = C.c_int
    L.cc_zd_records.argtypes = [_P, _P, C.c_size_t, _P, C.c_size_t]
    L.cc_lz4_bound.restype = C.c_size_t
    L.cc_lz4_bound.argtypes = [C.c_size_t]
    L.cc_lz4_compress.restype = C.c_size_t
    L.cc_lz4_compress.argtypes = [_P, C.c_size_t, _P, C.c_size_t]
    L.cc_lz4_census.restype = C.c_size_t
    L.cc_lz4_census.argtypes = [_P, C.c_size_t, _P, C.c_size_t, _P, _P]
    L.cc_lz4_records.restype = C.c_int
    L.cc_lz4_records.argtypes = [_P, C.c_size_t, _P, C.c_size_t]
    L.cc_annot_counts.argtypes = [_P, C.POINTER(C.c_uint64), C.POINTER(C.c_uint64)]
    _check_sizes(L)
    return L


def _check_sizes(L: C.CDLL) -> None:
    want = {0: RECORD_DTYPE.itemsize, 1: C.sizeof(Config), 2: C.sizeof(Stats),
            3: C.sizeof(LackeyState), 4: C.sizeof(CacheCfg), 5: C.sizeof(TlbCfg)}
    for what, size in want.items():
        got = L.cc_sizeof(what)
        if got != size:
            raise RuntimeError(f"libcorecast_sim.so structure {what} is {got} bytes, Python "
                               f"expects {size}: rebuild with `make native`")


def as_records(a: np.ndarray) -> np.ndarray:
    """`a` as a C-contiguous array of RECORD_DTYPE (no copy when it already is one)."""
    if a.dtype != RECORD_DTYPE:
        raise TypeError(f"records must have dtype {RECORD_DTYPE}, not {a.dtype}")
    return np.ascontiguousarray(a)


class ReplacementArray:
    """One set-associative array with a replacement policy (for tests and exploration)."""

    def __init__(self, sets: int, ways: int, replacement: str = "lru", seed: int = 1):
        L = lib()
        self._h = L.cc_array_new(sets, ways, REPLACEMENT[replacement], seed)
        if not self._h:
            raise ValueError(f"bad geometry: {sets} sets x {ways} ways with {replacement}")

    def access(self, line: int) -> tuple[bool, int | None]:
        """Access `line`: (hit, evicted line or None)."""
        v = C.c_uint64()
        hit = lib().cc_array_access(self._h, line, C.byref(v))
        return bool(hit), (None if v.value == 2**64 - 1 else v.value)

    def set_clock(self, clock: int) -> None:
        """Move the LRU/FIFO clock (tests of the 32-bit stamp renumbering)."""
        lib().cc_array_set_clock(self._h, clock)

    def __del__(self) -> None:
        h = getattr(self, "_h", None)
        if h:
            lib().cc_array_free(h)
            self._h = None
