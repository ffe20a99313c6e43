"""The blackboard: POSIX shared memory /dev/shm/corecast-NAME that one `corecast meters`
daemon writes and anyone reads (layout: native/meters/corecast_meters.h, mirrored in
`layout`).

Reading (no root needed):

    from corecast.meters import Board
    with Board.open("default") as b:              # NAME; None: $CORECAST_METERS or "default"
        if (why := b.stale()):
            print("stale:", why)
        r = b.read("cpu_busy", "node")            # Reading: current, avg, min, max, total, count
        print(r.avg, b.meter("cpu_busy").source)
        snap = b.snapshot()                       # every meter, trigger, advice and app value
        gen = b.generation(); b.wait_change(gen, timeout=5.0)
        b.publish("phase", 2)                     # the application area

Every record is copied under its seqlock by the same C code as the header-only reader, so a
Python reader never sees a torn record either. A value the daemon could not compute is None.

Writing is the daemon's (writer.py).
"""
from __future__ import annotations

import ctypes as C
import errno
import math
import os
import re
import socket
import stat
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import UserError
from . import layout as L

SHM = Path("/dev/shm")
READ_TRIES = 40             # reads of a record a live daemon is in the middle of writing (50 ms each)
NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,%d}" % (L.NAME_MAX - 1))


def check_name(name: str) -> str:
    if not NAME_RE.fullmatch(name or ""):
        raise UserError(f"--blackboard: '{name}' is not a blackboard name (1 to {L.NAME_MAX} letters, digits, "
                        "'_', '-', '.'; not starting with '.')")
    return name


def default_name(name: str | None = None) -> str:
    """`name` as given (an empty one is refused by check_name, never taken for the default);
    None: $CORECAST_METERS, else "default"."""
    return name if name is not None else (os.environ.get("CORECAST_METERS") or "default")


def board_path(name: str) -> Path:
    return SHM / f"corecast-{name}"


def socket_address(name: str) -> bytes:
    return b"\0corecast-meters-" + name.encode()


UCRED = struct.Struct("iII")        # struct ucred of SO_PEERCRED: pid, uid, gid


def peer_credentials(sock: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process at the other end of a connected Unix socket, as the
    kernel recorded them when it connected (or listened)."""
    return UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size))


def subscribe(name: str | None = None) -> socket.socket:
    """A socket that becomes readable (one byte) at every trigger state change of board `name`
    (ccm_subscribe of corecast_meters.h). An abstract socket name carries no owner nor
    permissions, so any local user could bind the daemon's first: the server must be the
    owner of the board file (one this user trusts, as `Board.open` does) or root, else
    UserError."""
    name = check_name(default_name(name))
    path = board_path(name)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        raise UserError(f"no blackboard '{name}' ({path} does not exist: is `corecast meters --blackboard "
                        f"{name}` running?)") from None
    why = refusal(path, st)
    if why:
        raise UserError(why)
    owner = st.st_uid
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    try:
        s.connect(socket_address(name))
        pid, uid, _gid = peer_credentials(s)
    except OSError as err:
        s.close()
        raise UserError(f"blackboard '{name}': no daemon to subscribe to ({err.strerror or err})") from None
    if uid not in (owner, 0):
        s.close()
        raise UserError(f"blackboard '{name}': its socket is held by uid {uid} (pid {pid}), not by the board's "
                        f"owner (uid {owner}) or root: not subscribed")
    return s


class _Handle(C.Structure):
    """ccm_board of corecast_meters.h (the C reader's handle, process-private memory): where
    the mappings are, and the application area's file (kept open) and geometry, copied and
    checked at open: that area is writable by others (--app-mode), its header is never read
    again. Checked against ccmx_board_size() at open (a mismatch is a stale build)."""

    _fields_ = [("h", C.c_void_p), ("base", C.c_void_p), ("size", C.c_size_t), ("app", C.c_void_p),
                ("app_size", C.c_size_t), ("app_writable", C.c_int), ("name", C.c_char * (L.NAME_MAX + 1)),
                ("sections", C.c_uint32 * 20), ("interval_ns", C.c_int64),
                ("app_header_size", C.c_uint32), ("app_slot_count", C.c_uint32), ("app_slot_size", C.c_uint32),
                ("app_fd", C.c_int)]


_KINDS = ((stat.S_ISLNK, "symbolic link"), (stat.S_ISDIR, "directory"), (stat.S_ISFIFO, "FIFO"),
          (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"))


def refusal(path: Path, st: os.stat_result, what: str = "blackboard", shared_write: bool = False) -> str | None:
    """Why the file with status `st` at `path` is not one this user may trust as a `what`, or
    None. Another user can plant anything in /dev/shm (mode 1777): a reader and the daemon
    trust only a regular file owned by their own user or root, and a board that only its owner
    can write (`shared_write`: the application area, writable by --app-mode on purpose)."""
    for test, kind in _KINDS:
        if test(st.st_mode):
            return f"{path} is a {kind}, not a {what}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file, not a {what}"
    if st.st_uid not in (os.geteuid(), 0):
        return f"{path} is owned by uid {st.st_uid}, not you or root"
    if not shared_write and st.st_mode & 0o022:
        return f"{path} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o}): not a {what} to trust"
    return None


def planted(path: Path, what: str = "blackboard", shared_write: bool = False) -> str | None:
    """`refusal` of what is at `path` now (not following a symbolic link), or None when nothing
    is there or it may be trusted."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"{path}: {err.strerror or err}"
    return refusal(path, st, what, shared_write)


def read_head(path: Path, n: int) -> bytes:
    """The first `n` bytes of a file of /dev/shm, opened as the reader opens a board (no
    symbolic link followed, a FIFO never waited for, checked with fstat): UserError with the
    reason when it may not be trusted."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise UserError(f"{path} is a symbolic link, not a blackboard") from None
        raise UserError(f"{path}: {err.strerror or err}") from None
    try:
        why = refusal(path, os.fstat(fd))
        if why:
            raise UserError(why)
        return os.pread(fd, n, 0)
    finally:
        os.close(fd)


def _num(v: float) -> float | None:
    return None if v is None or math.isnan(v) else v


# ============================================================================================
# what a reader gets

@dataclass(frozen=True)
class ScopeInfo:
    index: int
    name: str
    kind: str
    parent: int
    cpus: str


@dataclass(frozen=True)
class MeterInfo:
    index: int
    name: str
    scope: str
    scope_kind: str
    unit: str
    quality: str          # measured | derived | unavailable
    kind: str             # gauge | rate | ratio
    source: str           # where the value comes from, or why it is unavailable
    has_total: bool
    total_unit: str


@dataclass(frozen=True)
class Reading:
    current: float | None
    avg: float | None
    min: float | None
    max: float | None
    total: float | None
    count: int            # ticks with a value in the window
    t_ns: int             # CLOCK_MONOTONIC of the tick that wrote it (0: never written)
    aux: int              # a thread record's tid

    def to_dict(self) -> dict[str, Any]:
        return {"current": self.current, "avg": self.avg, "min": self.min, "max": self.max, "total": self.total,
                "count": self.count, "t_ns": self.t_ns}


@dataclass(frozen=True)
class TriggerInfo:
    index: int
    name: str
    meter: str
    scope: str
    low: float
    high: float
    dwell_s: float
    advice: int
    actions: str


@dataclass(frozen=True)
class TriggerState:
    state: str            # low | high
    value: float | None   # the window average last evaluated
    since_ns: int
    pending_ns: int
    transitions: int
    ups: int
    downs: int


@dataclass(frozen=True)
class AdviceInfo:
    index: int
    scope: str
    min_workers: int
    max_workers: int
    interval_s: float
    policy: str


@dataclass(frozen=True)
class AdviceState:
    allowed: int
    changed_ns: int
    changes: int
    high_triggers: int


@dataclass(frozen=True)
class AppValue:
    pid: int
    app: str
    key: str
    value: float | None
    t_ns: int
    alive: bool


@dataclass
class Snapshot:
    """Everything on a board at one moment (each record consistent by itself)."""

    name: str
    pid: int
    state: str
    stale: str | None
    interval_s: float
    window_s: float
    ticks: int
    late_ticks: int
    heartbeat_real_s: float
    started_real_s: float
    scopes: list[ScopeInfo] = field(default_factory=list)
    meters: list[tuple[MeterInfo, Reading]] = field(default_factory=list)
    triggers: list[tuple[TriggerInfo, TriggerState]] = field(default_factory=list)
    advice: list[tuple[AdviceInfo, AdviceState]] = field(default_factory=list)
    apps: list[AppValue] = field(default_factory=list)


# ============================================================================================
# the reader

class Board:
    """A blackboard opened for reading (and for publishing in the application area)."""

    def __init__(self, name: str, handle: C.Array):
        self.name = name
        self._lib = L.lib()
        self._h = handle
        hd = _Handle.from_buffer_copy(handle)
        self._base = int(hd.base)
        self._app = hd if hd.app else None
        self.header = L.Header.from_address(self._base)
        # the sections' places, copied once: the header's first lines are rewritten at every tick,
        # and its counts and offsets never change while the daemon runs
        h = L.Header.from_buffer_copy(C.string_at(self._base, C.sizeof(L.Header)))
        self._layout = h
        size = hd.size
        for count, off, elem, need in (
                (h.scope_count, h.scope_off, h.scope_size, L.Scope),
                (h.meter_count, h.meter_desc_off, h.meter_desc_size, L.MeterDesc),
                (h.meter_count, h.meter_rec_off, h.meter_rec_size, L.MeterRec),
                (h.trigger_count, h.trigger_desc_off, h.trigger_desc_size, L.TriggerDesc),
                (h.trigger_count, h.trigger_rec_off, h.trigger_rec_size, L.TriggerRec),
                (h.advice_count, h.advice_desc_off, h.advice_desc_size, L.AdviceDesc),
                (h.advice_count, h.advice_rec_off, h.advice_rec_size, L.AdviceRec)):
            if count and (elem < C.sizeof(need) or off < C.sizeof(L.Header) or off + count * elem > size):
                raise UserError(f"{board_path(name)} is a damaged blackboard: a section outside it")
        kinds = {}
        self._scopes = []
        for i in range(h.scope_count):
            s = L.Scope.from_address(self._base + h.scope_off + i * h.scope_size)
            info = ScopeInfo(i, L.text(s.name), L.text(s.kind), s.parent, L.text(s.cpus))
            self._scopes.append(info)
            kinds[info.name] = info.kind
        self._meters = []
        for i in range(h.meter_count):
            d = L.MeterDesc.from_address(self._base + h.meter_desc_off + i * h.meter_desc_size)
            scope = L.text(d.scope)
            self._meters.append(MeterInfo(i, L.text(d.name), scope, kinds.get(scope, ""), L.text(d.unit),
                                          L.QUALITIES[d.quality] if d.quality < 3 else "unknown",
                                          L.KINDS[d.kind] if d.kind < 3 else "unknown", L.text(d.source),
                                          bool(d.has_total), L.text(d.total_unit)))
        self._index = {(m.name, m.scope): m.index for m in self._meters}
        self._triggers = []
        for i in range(h.trigger_count):
            d = L.TriggerDesc.from_address(self._base + h.trigger_desc_off + i * h.trigger_desc_size)
            self._triggers.append(TriggerInfo(i, L.text(d.name), L.text(d.meter), L.text(d.scope), d.low, d.high,
                                              d.dwell_ns * 1e-9, d.advice_index, L.text(d.actions)))
        self._advice = []
        for i in range(h.advice_count):
            d = L.AdviceDesc.from_address(self._base + h.advice_desc_off + i * h.advice_desc_size)
            self._advice.append(AdviceInfo(i, L.text(d.scope), d.min_workers, d.max_workers, d.interval_ns * 1e-9,
                                           L.text(d.policy)))
        self._check_indexes()
        self._rec = L.MeterRec()
        self._lock = threading.Lock()

    def _check_indexes(self) -> None:
        """Every index on the board points inside it and at what its name says (the C reader
        checks the sections' bounds; a board whose descriptors disagree is damaged, never shown
        with another scope's name)."""
        h = self._layout
        n = len(self._scopes)

        def bad(what: str) -> UserError:
            return UserError(f"{board_path(self.name)} is a damaged blackboard: {what}")
        for s in self._scopes:
            if not -1 <= s.parent < n or s.parent == s.index:
                raise bad(f"scope {s.index} ({s.name!r}) has parent index {s.parent} ({n} scopes)")
        for i in range(h.meter_count):
            d = L.MeterDesc.from_address(self._base + h.meter_desc_off + i * h.meter_desc_size)
            m = self._meters[i]
            if d.scope_index >= n or self._scopes[d.scope_index].name != m.scope:
                raise bad(f"meter {i} ({m.name}@{m.scope}) has scope index {d.scope_index} ({n} scopes)")
        for i in range(h.trigger_count):
            d = L.TriggerDesc.from_address(self._base + h.trigger_desc_off + i * h.trigger_desc_size)
            t = self._triggers[i]
            if (d.scope_index >= n or self._scopes[d.scope_index].name != t.scope or d.meter_index >= h.meter_count
                    or self._meters[d.meter_index].name != t.meter or not -1 <= d.advice_index < h.advice_count):
                raise bad(f"trigger {i} ({t.name}@{t.scope}) has meter index {d.meter_index}, scope index "
                          f"{d.scope_index}, advice index {d.advice_index} ({h.meter_count} meters, {n} scopes, "
                          f"{h.advice_count} advised scopes)")
        for i in range(h.advice_count):
            d = L.AdviceDesc.from_address(self._base + h.advice_desc_off + i * h.advice_desc_size)
            a = self._advice[i]
            if d.scope_index >= n or self._scopes[d.scope_index].name != a.scope:
                raise bad(f"advice {i} ({a.scope}) has scope index {d.scope_index} ({n} scopes)")

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, name: str | None = None) -> "Board":
        """Open board NAME (None: $CORECAST_METERS, else "default"); UserError when there is none."""
        name = check_name(default_name(name))
        lib = L.lib()
        if lib.ccmx_board_size() != C.sizeof(_Handle):
            raise UserError("libcorecast_meters.so: its reader's handle differs from corecast.meters.board "
                            "(a stale build: run `make native`)")
        handle = (C.c_char * lib.ccmx_board_size())()
        r = lib.ccmx_open(handle, name.encode())
        if r == -errno.ENOENT:
            raise UserError(f"no blackboard '{name}' ({board_path(name)} does not exist: is `corecast meters "
                            f"--blackboard {name}` running?)")
        if r == -errno.EPROTO:
            raise UserError(f"{board_path(name)} is not a corecast blackboard of layout version {L.VERSION}")
        if r in (-errno.ELOOP, -errno.ENOTSUP, -errno.EPERM):       # refused by ccm__map's checks
            raise UserError(planted(board_path(name)) or f"{board_path(name)}: {os.strerror(-r)}")
        if r != 0:
            raise UserError(f"cannot open blackboard {board_path(name)}: {os.strerror(-r)}")
        try:
            return cls(name, handle)
        except BaseException:
            lib.ccmx_close(handle)
            raise

    def close(self) -> None:
        if self._h is not None:
            self._app = None                  # its descriptor is closed with the handle
            self._lib.ccmx_close(self._h)
            self._h = None

    def __enter__(self) -> "Board":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ what is on it
    @property
    def pid(self) -> int:
        return self.header.pid

    @property
    def state(self) -> str:
        return {L.STARTING: "starting", L.RUNNING: "running", L.STOPPED: "stopped"}.get(self.header.state, "?")

    @property
    def interval_s(self) -> float:
        return self.header.interval_ns * 1e-9

    @property
    def window_s(self) -> float:
        return self.header.window_ns * 1e-9

    def scopes(self) -> list[ScopeInfo]:
        return list(self._scopes)

    def meters(self) -> list[MeterInfo]:
        return list(self._meters)

    def meter(self, name: str, scope: str = "node") -> MeterInfo:
        i = self._index.get((name, scope))
        if i is None:
            raise UserError(f"blackboard '{self.name}' has no meter '{name}' at scope '{scope}'")
        return self._meters[i]

    def triggers(self) -> list[TriggerInfo]:
        return list(self._triggers)

    def advice_scopes(self) -> list[AdviceInfo]:
        return list(self._advice)

    def stale(self, max_age_s: float = 0.0) -> str | None:
        """Why the board is stale (the daemon stopped, died, or has not ticked for max(1 s, 5
        intervals), or for `max_age_s`), or None when it is live."""
        buf = C.create_string_buffer(200)
        return buf.value.decode() if self._lib.ccmx_stale(self._h, max_age_s, buf, 200) else None

    # ------------------------------------------------------------------ records
    def _copy(self, addr: int, rec: C.Structure) -> C.Structure:
        # The C read gives up after 50 ms inside one write. On a busy machine a live daemon can
        # be preempted that long in the middle of a write: the read is tried again while the
        # daemon is alive and ticking (READ_TRIES x 50 ms at most); a dead one ends it at once.
        for _ in range(READ_TRIES):
            if self._lib.ccmx_read_rec(addr, C.byref(rec), C.sizeof(rec)) == 0:
                return rec
            if self.stale() is not None:
                break
        raise UserError(f"blackboard '{self.name}': a record stays in the middle of a write (the daemon "
                        "died while writing it): the board is stale")

    def reading(self, index: int) -> Reading:
        h = self._layout
        r = self._copy(self._base + h.meter_rec_off + index * h.meter_rec_size, L.MeterRec())
        return Reading(_num(r.current), _num(r.avg), _num(r.min), _num(r.max), _num(r.total), r.count, r.t_ns, r.aux)

    def read(self, meter: str, scope: str = "node") -> Reading:
        return self.reading(self.meter(meter, scope).index)

    def trigger_state(self, index: int) -> TriggerState:
        h = self._layout
        r = self._copy(self._base + h.trigger_rec_off + index * h.trigger_rec_size, L.TriggerRec())
        return TriggerState(L.STATES.get(r.state, "unknown"), _num(r.value), r.since_ns, r.pending_ns,
                            r.transitions, r.ups, r.downs)

    def advice_state(self, index: int) -> AdviceState:
        h = self._layout
        r = self._copy(self._base + h.advice_rec_off + index * h.advice_rec_size, L.AdviceRec())
        return AdviceState(r.allowed, r.changed_ns, r.changes, r.high_triggers)

    def allowed_workers(self, scope: str = "node") -> int | None:
        for a in self._advice:
            if a.scope == scope:
                return self.advice_state(a.index).allowed
        return None

    def apps(self) -> list[AppValue]:
        """The values programs published in the application area: its slots within the geometry
        checked at open, read from the file with pread (a file truncated by one of its writers
        ends the list, it cannot fault), each under its seqlock as ccm_read_app does (the
        sequence number read with the slot and again after it, even and unchanged). Slots a
        publisher stays inside for 50 ms in all (killed there, or on purpose) are left out."""
        a, n, out, deadline = self._app, C.sizeof(L.AppSlot), [], 0
        for i in range(a.app_slot_count if a else 0):
            off = a.app_header_size + i * a.app_slot_size
            if off + n > a.app_size:
                break
            while True:
                raw = os.pread(a.app_fd, n, off)
                if len(raw) < n:
                    return out
                if not int.from_bytes(raw[:4], sys.byteorder) & 1 and os.pread(a.app_fd, 4, off) == raw[:4]:
                    s = L.AppSlot.from_buffer_copy(raw)
                    break
                now = time.monotonic_ns()
                deadline = deadline or now + 50_000_000
                if now > deadline:
                    s = None
                    break
                os.sched_yield()
            if s is not None and s.owner:
                alive = s.pid > 0 and self._lib.ccmx_pid_start(s.pid) == s.pid_start
                out.append(AppValue(s.pid, L.text(s.app), L.text(s.key), _num(s.value), s.t_ns, alive))
        return out

    def publish(self, key: str, value: float) -> None:
        """Publish `value` under `key` in the application area, as this process."""
        if not key or len(key.encode()) >= 40:
            raise UserError(f"application key '{key}': 1 to 39 bytes")
        r = self._lib.ccmx_app_publish(self._h, key.encode(), float(value))
        if r == -errno.EACCES:
            raise UserError(f"{board_path(self.name)}.app: no write permission (the daemon's --app-mode)")
        if r == -errno.ENOSPC:
            raise UserError(f"blackboard '{self.name}': every application slot is taken")
        if r == -errno.ESTALE:
            raise UserError(f"{board_path(self.name)}.app was truncated after the board was opened (by one of "
                            "its writers): open the board again")
        if r == -errno.EMFILE:
            raise UserError(f"blackboard '{self.name}': this process publishes to 64 application areas "
                            "already (close a board first)")
        if r == -errno.ENOENT:
            raise UserError(f"blackboard '{self.name}' has no application area")
        if r != 0:
            raise UserError(f"blackboard '{self.name}': cannot publish: {os.strerror(-r)}")

    def subscribe(self) -> socket.socket:
        """`subscribe(self.name)`: a socket readable at every trigger state change."""
        return subscribe(self.name)

    def generation(self) -> int:
        return self.header.trigger_gen

    def wait_change(self, generation: int, timeout: float | None = None) -> bool:
        """Sleep until a trigger changes state after `generation` (True) or `timeout` s pass."""
        ms = -1 if timeout is None else max(0, int(timeout * 1000))
        return bool(self._lib.ccmx_wait_change(self._h, generation & 0xFFFFFFFF, ms))

    def snapshot(self) -> Snapshot:
        h = self.header
        snap = Snapshot(self.name, h.pid, self.state, self.stale(), self.interval_s, self.window_s, h.ticks,
                        h.late_ticks, h.heartbeat_real_ns * 1e-9, h.started_real_ns * 1e-9, self.scopes())
        snap.meters = [(m, self.reading(m.index)) for m in self._meters]
        snap.triggers = [(t, self.trigger_state(t.index)) for t in self._triggers]
        snap.advice = [(a, self.advice_state(a.index)) for a in self._advice]
        snap.apps = self.apps()
        return snap


def allowed_workers(scope: str | None = None) -> int | None:
    """allowed_workers for `scope` on the process's advised board ($CORECAST_METERS or
    "default"; scope None: $CORECAST_METERS_SCOPE or "node"), or None without a live daemon.
    The same code as cc_allowed_workers() of corecast_meters.h."""
    n = L.lib().ccmx_allowed_workers(scope.encode() if scope else None)
    return None if n < 0 else n


def throttle_point(worker: int) -> int:
    """cc_throttle_point_as(): worker `worker` (0-based) sleeps here while it is beyond the
    allowed count (the GIL is released meanwhile). Returns how many times it slept."""
    return L.lib().ccmx_throttle_point_as(int(worker))


def release() -> None:
    """cc_throttle_release(): wake every worker sleeping in throttle_point, and let none sleep
    there until reset() (the work is over)."""
    L.lib().ccmx_throttle_release()


def reset() -> None:
    L.lib().ccmx_throttle_reset()


def attach(name: str | None = None, scope: str | None = None) -> bool:
    """Advise this process from board `name` and `scope` (cc_meters_attach); False when that
    board is not there yet (it is looked for again every second)."""
    return L.lib().ccmx_attach(name.encode() if name else None, scope.encode() if scope else None) == 0
