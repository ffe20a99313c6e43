"""The blackboard's layout in Python: ctypes mirrors of the structures of
native/meters/corecast_meters.h (version 1), and the native library that reads and writes it.

`lib()` loads libcorecast_meters.so and checks that these mirrors have the sizes and offsets the
C header gives (a layout changed on one side only is an error here, not a wrong number later).
"""
from __future__ import annotations

import ctypes as C
from typing import Any

from ..errors import UserError
from ..native import native_path

MAGIC = b"CCMETERS"
APP_MAGIC = b"CCMAPPS"
VERSION = 1
BYTE_ORDER = 0x01020304
NAME_MAX = 24

STARTING, RUNNING, STOPPED = 0, 1, 2
MEASURED, DERIVED, UNAVAILABLE = 0, 1, 2
QUALITIES = ("measured", "derived", "unavailable")
GAUGE, RATE, RATIO = 0, 1, 2
KINDS = ("gauge", "rate", "ratio")
LOW, HIGH = 1, 2
STATES = {0: "unknown", LOW: "low", HIGH: "high"}

# files the engine reads (engine.c)
FILE_KEYED, FILE_PLAIN, FILE_PERF, FILE_EXTERNAL, FILE_PERF_GROUP = 0, 1, 2, 3, 4
EV_TRIGGER, EV_ADVICE = 1, 2
WHY = ("all", "event", "signal", "error")


class Header(C.Structure):
    _fields_ = [("magic", C.c_char * 8), ("version", C.c_uint32), ("header_size", C.c_uint32),
                ("layout_size", C.c_uint64), ("byte_order", C.c_uint32), ("state", C.c_uint32),
                ("pid", C.c_int32), ("flags", C.c_uint32), ("pid_start", C.c_uint64),
                ("started_real_ns", C.c_int64), ("heartbeat_ns", C.c_int64), ("heartbeat_real_ns", C.c_int64),
                ("interval_ns", C.c_int64), ("window_ns", C.c_int64), ("ticks", C.c_uint64),
                ("trigger_gen", C.c_uint32), ("advice_gen", C.c_uint32),
                ("scope_count", C.c_uint32), ("scope_off", C.c_uint32), ("scope_size", C.c_uint32),
                ("meter_count", C.c_uint32), ("meter_desc_off", C.c_uint32), ("meter_desc_size", C.c_uint32),
                ("meter_rec_off", C.c_uint32), ("meter_rec_size", C.c_uint32),
                ("trigger_count", C.c_uint32), ("trigger_desc_off", C.c_uint32), ("trigger_desc_size", C.c_uint32),
                ("trigger_rec_off", C.c_uint32), ("trigger_rec_size", C.c_uint32),
                ("advice_count", C.c_uint32), ("advice_desc_off", C.c_uint32), ("advice_desc_size", C.c_uint32),
                ("advice_rec_off", C.c_uint32), ("advice_rec_size", C.c_uint32),
                ("late_ticks", C.c_uint64), ("name", C.c_char * 32), ("reserved", C.c_char * 40)]


class Scope(C.Structure):
    _fields_ = [("name", C.c_char * 32), ("kind", C.c_char * 16), ("parent", C.c_int32), ("ncpus", C.c_int32),
                ("cpus", C.c_char * 72)]


class MeterDesc(C.Structure):
    _fields_ = [("name", C.c_char * 40), ("scope", C.c_char * 32), ("unit", C.c_char * 24),
                ("scope_index", C.c_uint32), ("quality", C.c_uint8), ("kind", C.c_uint8), ("has_total", C.c_uint8),
                ("pad", C.c_uint8), ("total_unit", C.c_char * 24), ("source", C.c_char * 384)]


class MeterRec(C.Structure):
    _fields_ = [("seq", C.c_uint32), ("count", C.c_uint32), ("t_ns", C.c_int64), ("current", C.c_double),
                ("avg", C.c_double), ("min", C.c_double), ("max", C.c_double), ("total", C.c_double),
                ("aux", C.c_uint64)]


class TriggerDesc(C.Structure):
    _fields_ = [("name", C.c_char * 40), ("meter", C.c_char * 40), ("scope", C.c_char * 32),
                ("meter_index", C.c_uint32), ("scope_index", C.c_uint32), ("low", C.c_double), ("high", C.c_double),
                ("dwell_ns", C.c_int64), ("advice_index", C.c_int32), ("pad", C.c_uint32),
                ("actions", C.c_char * 64), ("reserved", C.c_char * 40)]


class TriggerRec(C.Structure):
    _fields_ = [("seq", C.c_uint32), ("state", C.c_uint32), ("t_ns", C.c_int64), ("since_ns", C.c_int64),
                ("value", C.c_double), ("pending_ns", C.c_int64), ("transitions", C.c_uint64),
                ("ups", C.c_uint32), ("downs", C.c_uint32), ("reserved", C.c_char * 8)]


class AdviceDesc(C.Structure):
    _fields_ = [("scope", C.c_char * 32), ("scope_index", C.c_uint32), ("min_workers", C.c_uint32),
                ("max_workers", C.c_uint32), ("pad", C.c_uint32), ("interval_ns", C.c_int64),
                ("policy", C.c_char * 32), ("reserved", C.c_char * 40)]


class AdviceRec(C.Structure):
    _fields_ = [("seq", C.c_uint32), ("allowed", C.c_uint32), ("t_ns", C.c_int64), ("changed_ns", C.c_int64),
                ("changes", C.c_uint64), ("high_triggers", C.c_uint32), ("last", C.c_uint32),
                ("reserved", C.c_char * 24)]


class AppHeader(C.Structure):
    _fields_ = [("magic", C.c_char * 8), ("version", C.c_uint32), ("header_size", C.c_uint32),
                ("slot_count", C.c_uint32), ("slot_size", C.c_uint32), ("daemon_pid", C.c_int32),
                ("reserved", C.c_char * 36)]


class AppSlot(C.Structure):
    _fields_ = [("seq", C.c_uint32), ("pid", C.c_int32), ("t_ns", C.c_int64), ("value", C.c_double),
                ("pid_start", C.c_uint64), ("app", C.c_char * 32), ("key", C.c_char * 40), ("owner", C.c_uint32),
                ("pad", C.c_uint32), ("reserved", C.c_char * 16)]


class Event(C.Structure):
    _fields_ = [("kind", C.c_int32), ("index", C.c_int32), ("state", C.c_int32), ("previous", C.c_int32),
                ("t_ns", C.c_int64), ("value", C.c_double)]


def _expected() -> list[int]:
    """What ccmx_layout() returns when the mirrors above match the header."""
    s = C.sizeof
    return [s(Header), s(Scope), s(MeterDesc), s(MeterRec), s(TriggerDesc), s(TriggerRec), s(AdviceDesc),
            s(AdviceRec), s(AppHeader), s(AppSlot),
            Header.heartbeat_ns.offset, Header.trigger_gen.offset, Header.advice_gen.offset,
            Header.late_ticks.offset, Header.name.offset, MeterDesc.source.offset, MeterRec.total.offset,
            TriggerDesc.actions.offset, TriggerRec.transitions.offset, AdviceDesc.policy.offset,
            AdviceRec.high_triggers.offset, AppSlot.owner.offset, s(Event)]


_lib: Any = None


def lib() -> Any:
    """libcorecast_meters.so, with its functions' signatures, checked against the mirrors."""
    global _lib
    if _lib is not None:
        return _lib
    L = C.CDLL(str(native_path("libcorecast_meters.so")))
    vp, i32, i64, u32, u64, dbl = C.c_void_p, C.c_int, C.c_int64, C.c_uint32, C.c_uint64, C.c_double
    ip = C.POINTER(C.c_int)
    sig = {
        "ccm_engine_new": ([vp, i64, i64], vp), "ccm_engine_free": ([vp], None),
        "ccm_add_file": ([vp, i32, i32], i32), "ccm_set_file_fd": ([vp, i32, i32], None), "ccm_set_file_period": ([vp, i32, i32], None),
        "ccm_add_perf_group": ([vp, i32, i32, i32], i32),
        "ccm_add_input": ([vp, i32, C.c_char_p, u32], i32),
        "ccm_add_meter": ([vp, i32, i32, dbl, dbl, dbl, i32, ip, i32, ip, i32], i32),
        "ccm_reset_meter": ([vp, i32, u64], None),
        "ccm_add_trigger": ([vp, i32, i32, dbl, dbl, i64], i32),
        "ccm_add_advice": ([vp, i32, i32, i32, i64, i32, ip, i32], i32),
        "ccm_set_external": ([vp, i32, u64, u64, u64, i32], None),
        "ccm_tick": ([vp, i64], i32), "ccm_run": ([vp, i32, C.POINTER(C.c_int32)], i32),
        "ccm_events": ([vp, C.POINTER(Event), i32], i32), "ccm_dropped_events": ([vp], u64),
        "ccmx_read_rec": ([vp, vp, i32], i32), "ccmx_write_rec": ([vp, vp, i32], None),
        "ccmx_open": ([vp, C.c_char_p], i32), "ccmx_close": ([vp], None), "ccmx_board_size": ([], i32),
        "ccmx_stale": ([vp, dbl, C.c_char_p, i32], i32), "ccmx_wait_change": ([vp, u32, i32], i32),
        "ccmx_app_publish": ([vp, C.c_char_p, dbl], i32), "ccmx_pid_start": ([i32], u64),
        "ccmx_attach": ([C.c_char_p, C.c_char_p], i32), "ccmx_allowed_workers": ([C.c_char_p], i32),
        "ccmx_throttle_point_as": ([i32], i32), "ccmx_throttle_release": ([], None), "ccmx_throttle_reset": ([], None), "ccmx_layout": ([C.POINTER(C.c_int64), i32], i32),
    }
    for name, (args, res) in sig.items():
        f = getattr(L, name)
        f.argtypes = args
        f.restype = res
    got = (C.c_int64 * 64)()
    n = L.ccmx_layout(got, 64)
    want = _expected()
    if list(got[:n]) != want:
        raise UserError(f"{native_path('libcorecast_meters.so')}: its blackboard layout differs from "
                        "corecast.meters.layout (a stale build: run `make native`)")
    _lib = L
    return L


def text(raw: bytes) -> str:
    """A fixed-size C string field as text (bytes after the first NUL dropped)."""
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")
