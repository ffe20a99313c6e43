"""The daemon's side of the blackboard: it takes the name (an abstract Unix socket
"corecast-meters-NAME" bound for the daemon's life: a second daemon with the same name fails,
and a crashed one frees it), builds the board in a new file and renames it into place (a
reader never maps half a layout; what another user planted in /dev/shm is refused, never
opened or written through: `_New`), marks it running and stopped, and tells subscribers
(ccm_subscribe) of every trigger change with one byte on that socket. The records themselves
are written by the C loop (engine.py).

The socket is reachable by every local user (an abstract name has no permissions) and the
daemon often runs as root: a subscriber is admitted only when its credentials (SO_PEERCRED)
may read the board by its file mode (`may_read`), at most MAX_SUBSCRIBERS at once and at most
MAX_SUBSCRIBERS_PER_USER of one user (root and the daemon's own user excepted), and the
accepting thread outlives running out of descriptors (EMFILE, ENFILE)."""
from __future__ import annotations

import ctypes as C
import errno
import mmap
import os
import secrets
import select
import signal
import socket
import stat
import struct
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import UserError
from ..messages import Throttle
from . import layout as L
from .board import SHM, Board, board_path, check_name, peer_credentials, planted, socket_address

MAX_SUBSCRIBERS = 64       # connected at once; more are refused (each holds one of the daemon's descriptors)
MAX_SUBSCRIBERS_PER_USER = 16   # of one uid at once, so that one user cannot take every place; root and the
                                # daemon's own user are not held to it (they could stop the daemon anyway)
WARN_EVERY_S = 10.0        # a refusal of one kind is logged at most this often (a flood is one line)
SO_PEERGROUPS = getattr(socket, "SO_PEERGROUPS", 59)     # Linux 4.13; Python names it from 3.13 on


@dataclass
class Layout:
    """What the daemon puts on the board: descriptors and the initial records' sizes."""

    scopes: list[L.Scope]
    meters: list[L.MeterDesc]
    triggers: list[L.TriggerDesc]
    advice: list[L.AdviceDesc]


def _put(struct: C.Structure, **values: Any) -> C.Structure:
    for k, v in values.items():
        if isinstance(v, str):
            size = getattr(type(struct), k).size
            b = v.encode()
            if len(b) >= size:                 # cut at a character boundary, NUL kept
                b = v.encode()[: size - 1].decode("utf-8", "ignore").encode()
            v = b
        setattr(struct, k, v)
    return struct


class Writer:
    """The daemon's board: created by `create()`, published `running()`, `stop()`ped."""

    def __init__(self, name: str, path: Path, mm: mmap.mmap, app_mm: mmap.mmap | None, sock: socket.socket,
                 replaced: str | None, board_fd: int = -1):
        self.name, self.path, self.mm, self.app_mm, self.sock = name, path, mm, app_mm, sock
        self.replaced = replaced                      # what was there before, when it was stale
        self.header = L.Header.from_buffer(mm)
        self.base = C.addressof(C.c_char.from_buffer(mm))
        self.say: Callable[[str], None] = _say        # where refusals are logged (the daemon may set its own)
        self._board_fd = board_fd                     # the board's file: its mode says who may subscribe
        self._subs: list[socket.socket] = []
        self._sub_uid: dict[socket.socket, int] = {}  # each subscriber's uid (for MAX_SUBSCRIBERS_PER_USER)
        self._subs_lock = threading.Lock()
        self._closing = False
        self._warnings = Throttle(WARN_EVERY_S)             # refusals: one line per kind per WARN_EVERY_S
        self._spare = _spare_fd()                     # given up to accept (and refuse) at EMFILE
        self._accept = threading.Thread(target=self._accepting, name="meters-subscribers", daemon=True)
        self._accept.start()

    @classmethod
    def create(cls, name: str, layout: Layout, interval_ns: int, window_ns: int, app_slots: int = 64,
               app_mode: int = 0o660) -> "Writer":
        check_name(name)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(socket_address(name))
        except OSError as err:
            sock.close()
            if err.errno != errno.EADDRINUSE:
                raise UserError(f"blackboard '{name}': cannot take its name: {err.strerror}") from None
            raise UserError(_taken(name)) from None
        sock.listen(64)
        path = board_path(name)
        app_path = Path(f"{path}.app")
        for p, what in ((path, "blackboard"), (app_path, "application area")):
            why = planted(p, what, shared_write=True)     # ours or root's, whatever its mode: replaced
            if why:                                       # nothing made yet: nothing left behind
                sock.close()
                raise UserError(f"{why}: remove it or give another --blackboard NAME")
        replaced = None
        if os.path.lexists(path):
            replaced = f"replaced a stale blackboard {path}{_owner(name)}"
        made: list[_New] = []
        app = None
        try:
            board = _New(name, _size(layout), BOARD_MODE)
            made.append(board)
            app = _make_app(name, app_slots, app_mode) if app_slots else None
            if app is not None:
                made.append(app)
            _fill(board.mm, name, layout, interval_ns, window_ns, app_slots)
            if app is not None:
                app.publish(app_path)       # first: a reader of the board finds its application area
            board.publish(path)             # readers see the whole layout or nothing
        except BaseException as err:
            for new in made:
                new.discard()
            if app is not None and app.published:
                _unlink(app_path)
            sock.close()
            if isinstance(err, OSError):
                raise UserError(f"cannot make the blackboard {path}: {err.strerror or err}") from None
            raise
        board_fd = os.dup(board.fd)         # kept: its mode says who may subscribe (fstat at each accept)
        for new in made:
            new.close()                     # the mappings stay
        return cls(name, path, board.mm, app.mm if app is not None else None, sock, replaced, board_fd)

    def running(self) -> None:
        self.header.heartbeat_ns = time.monotonic_ns()
        self.header.state = L.RUNNING

    def notify(self) -> None:
        """One byte to every subscriber (a trigger changed)."""
        with self._subs_lock:
            keep = []
            for s in self._subs:
                try:
                    s.send(b"!", socket.MSG_DONTWAIT)
                    keep.append(s)
                except BlockingIOError:
                    keep.append(s)          # it has bytes it did not read yet: it will look anyway
                except OSError:
                    s.close()
            self._subs = keep

    def subscribers(self) -> int:
        with self._subs_lock:
            return len(self._subs)

    def _accepting(self) -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError as err:
                if self._closing:
                    return
                if err.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self._out_of_files(err)
                    continue
                if err.errno in (errno.EINTR, errno.ECONNABORTED, errno.EPROTO, errno.EPERM):
                    continue
                return                      # the socket was shut down or closed
            try:
                self._admit(conn)
            except Exception as err:        # noqa: BLE001 - one bad connection never ends the thread
                conn.close()
                self._warn("error", f"subscriber refused: {err}")

    def _admit(self, conn: socket.socket) -> None:
        """Keep `conn` as a subscriber, or close it: a user who may not read the board, or one
        beyond MAX_SUBSCRIBERS or beyond MAX_SUBSCRIBERS_PER_USER of its user (root and the
        daemon's own user excepted), is refused (and logged, at most once per WARN_EVERY_S)."""
        try:
            pid, uid, gid = peer_credentials(conn)
        except OSError as err:
            conn.close()
            self._warn("credentials", f"subscriber refused: its credentials could not be read ({err.strerror})")
            return
        try:
            st = os.fstat(self._board_fd) if self._board_fd >= 0 else os.stat(self.path, follow_symlinks=False)
        except OSError:
            st = None
        if st is None or not may_read(st, uid, gid, lambda: _peer_groups(conn)):
            mode = f"mode {stat.S_IMODE(st.st_mode):04o}, uid {st.st_uid}, gid {st.st_gid}" if st else "gone"
            self._warn(f"uid {uid}", f"subscriber refused: uid {uid} (pid {pid}) may not read the blackboard "
                                     f"{self.path} ({mode})")
            conn.close()
            return
        capped = uid not in (0, os.geteuid())
        with self._subs_lock:
            if len(self._subs) >= MAX_SUBSCRIBERS or (capped and self._of_user(uid) >= MAX_SUBSCRIBERS_PER_USER):
                # full: first drop those that went away (the next trigger change would, later)
                gone = [s for s in self._subs if not _connected(s)]
                for s in gone:
                    s.close()
                self._subs = [s for s in self._subs if s not in gone]
            self._sub_uid = {s: self._sub_uid[s] for s in self._subs if s in self._sub_uid}
            mine = self._of_user(uid)
            if len(self._subs) < MAX_SUBSCRIBERS and not (capped and mine >= MAX_SUBSCRIBERS_PER_USER):
                self._subs.append(conn)
                self._sub_uid[conn] = uid
                return
            full = len(self._subs) >= MAX_SUBSCRIBERS
        if full:
            self._warn("full", f"subscriber refused: {MAX_SUBSCRIBERS} subscribers connected already "
                               f"(uid {uid}, pid {pid})")
        else:
            self._warn(f"uid {uid} full", f"subscriber refused: uid {uid} (pid {pid}) has "
                                          f"{MAX_SUBSCRIBERS_PER_USER} subscribers connected already")
        conn.close()

    def _of_user(self, uid: int) -> int:
        """How many subscribers `uid` has connected (under _subs_lock)."""
        return sum(1 for s in self._subs if self._sub_uid.get(s) == uid)

    def _out_of_files(self, err: OSError) -> None:
        """accept() failed for want of a descriptor (this process's or the system's): the
        spare one is given up to accept the newest connection and close it (else it stays
        queued and every accept fails again at once), then taken again; a short sleep lets
        whatever holds the descriptors let go."""
        self._warn("files", f"subscriber refused: no descriptor to accept it ({err.strerror})")
        if self._spare < 0:                 # lost to another thread last time: taken again if it can be
            self._spare = _spare_fd()
        if self._spare >= 0:
            os.close(self._spare)
            self._spare = -1
            try:
                conn, _ = self.sock.accept()
                conn.close()
            except OSError:
                pass
            self._spare = _spare_fd()
        time.sleep(0.1)

    def _warn(self, kind: str, text: str) -> None:
        """Log `text`, at most one refusal of a kind every WARN_EVERY_S (`messages.Throttle`)."""
        line = self._warnings.line(kind, text)
        if line is None:
            return
        try:
            self.say(line)
        except Exception:                   # noqa: BLE001 - a log that fails never ends the thread
            pass

    def stop(self, unlink: bool = True) -> None:
        """Mark the board stopped (readers see it stale) and remove it."""
        self.header.state = L.STOPPED
        if unlink:
            for p in (self.path, Path(f"{self.path}.app")):
                try:
                    p.unlink()
                except FileNotFoundError:
                    pass
        self._closing = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)     # wakes the accepting thread, which ends:
        except OSError:                              # the name is free once it has let go
            pass
        self._accept.join(2.0)
        self.sock.close()
        with self._subs_lock:
            for s in self._subs:
                s.close()
            self._subs = []
            self._sub_uid = {}
        if not self._accept.is_alive():              # else it may still use them (closed at exit)
            for fd in (self._board_fd, self._spare):
                if fd >= 0:
                    os.close(fd)
            self._board_fd = self._spare = -1


BOARD_MODE = 0o644        # any user may read the board (docs/meters.md); only the daemon writes it


def may_read(st: os.stat_result, uid: int, gid: int, groups: Callable[[], Sequence[int]]) -> bool:
    """Whether user `uid` (group `gid`, supplementary `groups()`, asked only when they matter)
    may read the file of status `st`, by the file's mode as the kernel decides for a reader:
    root and the owner may; a member of the file's group by its group bits; anyone else by its
    other bits. A board is 0644 (anyone); a board made group- or owner-only restricts its
    subscribers the same way."""
    if uid == 0 or uid == st.st_uid:
        return True
    in_group = gid == st.st_gid or ((st.st_mode & 0o044) not in (0, 0o044) and st.st_gid in groups())
    if in_group:
        return bool(st.st_mode & stat.S_IRGRP)
    return bool(st.st_mode & stat.S_IROTH)


def _peer_groups(conn: socket.socket) -> list[int]:
    """The supplementary groups of the process at the other end of `conn` (SO_PEERGROUPS), []
    where the kernel cannot say (then only its primary group counts)."""
    for n in (64, 65536):
        try:
            raw = conn.getsockopt(socket.SOL_SOCKET, SO_PEERGROUPS, 4 * n)
        except OSError as err:
            if err.errno == errno.ERANGE:
                continue
            return []
        return list(struct.unpack(f"{len(raw) // 4}I", raw[: len(raw) // 4 * 4]))
    return []


def _connected(s: socket.socket) -> bool:
    """Whether subscriber `s` is still there (a subscriber sends nothing: end of file or an
    error is one that went away)."""
    try:
        r = select.poll()
        r.register(s, select.POLLIN)
        if not r.poll(0):
            return True
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def _spare_fd() -> int:
    try:
        return os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return -1


def _say(text: str) -> None:
    print(f"corecast meters: {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def _taken(name: str) -> str:
    """The one line saying who holds the name of board `name` (its socket was bound already):
    a live daemon of this user or root, or someone else (by the credentials SO_PEERCRED gives
    of the process listening there, or of none: a name bound and never listened on)."""
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    c.settimeout(1.0)
    try:
        c.connect(socket_address(name))
        pid, uid, _gid = peer_credentials(c)
    except OSError:
        return (f"blackboard '{name}': its name (the abstract socket @corecast-meters-{name}) is bound by a "
                "process that accepts no connection, not a corecast daemon: give another --blackboard NAME")
    finally:
        c.close()
    if uid not in (os.geteuid(), 0):
        return (f"blackboard '{name}': its name (the abstract socket @corecast-meters-{name}) is held by another "
                f"user (uid {uid}, pid {pid}), not a daemon of yours or root's: give another --blackboard NAME")
    return f"blackboard '{name}' is taken by a live daemon{_owner(name)}; stop it or give another --blackboard NAME"


def _sections(layout: Layout) -> tuple[list[tuple[int, int]], int]:
    """Each section's (descriptors' offset, records' offset), and the board's size."""
    off = C.sizeof(L.Header)
    sections = []
    for items, rec in ((layout.scopes, None), (layout.meters, L.MeterRec), (layout.triggers, L.TriggerRec),
                       (layout.advice, L.AdviceRec)):
        d_off = off
        off += len(items) * (C.sizeof(items[0]) if items else 0)
        r_off = off
        if rec is not None:
            off += len(items) * C.sizeof(rec)
        sections.append((d_off, r_off))
    return sections, max(off, 4096)


def _size(layout: Layout) -> int:
    return _sections(layout)[1]


def _fill(mm: mmap.mmap, name: str, layout: Layout, interval_ns: int, window_ns: int, app_slots: int) -> None:
    """The header, the descriptors and the initial records of a new board."""
    scopes, meters, triggers, advice = layout.scopes, layout.meters, layout.triggers, layout.advice
    sections, size = _sections(layout)
    h = L.Header.from_buffer(mm)
    (s_off, _), (md_off, mr_off), (td_off, tr_off), (ad_off, ar_off) = sections
    _put(h, magic=L.MAGIC, version=L.VERSION, header_size=C.sizeof(L.Header), layout_size=size,
         byte_order=L.BYTE_ORDER, state=L.STARTING, pid=os.getpid(), flags=1 if app_slots else 0,
         pid_start=L.lib().ccmx_pid_start(os.getpid()), started_real_ns=time.time_ns(),
         interval_ns=interval_ns, window_ns=window_ns,
         scope_count=len(scopes), scope_off=s_off, scope_size=C.sizeof(L.Scope),
         meter_count=len(meters), meter_desc_off=md_off, meter_desc_size=C.sizeof(L.MeterDesc),
         meter_rec_off=mr_off, meter_rec_size=C.sizeof(L.MeterRec),
         trigger_count=len(triggers), trigger_desc_off=td_off, trigger_desc_size=C.sizeof(L.TriggerDesc),
         trigger_rec_off=tr_off, trigger_rec_size=C.sizeof(L.TriggerRec),
         advice_count=len(advice), advice_desc_off=ad_off, advice_desc_size=C.sizeof(L.AdviceDesc),
         advice_rec_off=ar_off, advice_rec_size=C.sizeof(L.AdviceRec), name=name)
    del h
    for items, d_off in ((scopes, s_off), (meters, md_off), (triggers, td_off), (advice, ad_off)):
        for i, it in enumerate(items):
            mm[d_off + i * C.sizeof(it): d_off + (i + 1) * C.sizeof(it)] = bytes(it)
    nan = float("nan")
    for i, _m in enumerate(meters):
        r = L.MeterRec(current=nan, avg=nan, min=nan, max=nan, total=nan)
        mm[mr_off + i * C.sizeof(r): mr_off + (i + 1) * C.sizeof(r)] = bytes(r)
    for i, _t in enumerate(triggers):
        r = L.TriggerRec(state=L.LOW, value=nan)
        mm[tr_off + i * C.sizeof(r): tr_off + (i + 1) * C.sizeof(r)] = bytes(r)
    for i, a in enumerate(advice):
        r = L.AdviceRec(allowed=a.max_workers)
        mm[ar_off + i * C.sizeof(r): ar_off + (i + 1) * C.sizeof(r)] = bytes(r)


class _New:
    """A new file of /dev/shm, `size` bytes of `mode` (whatever the umask), mapped for writing;
    nothing that was there is ever opened, followed or changed. It is made unnamed (O_TMPFILE:
    a daemon killed while it builds the board leaves nothing behind), or where the file system
    cannot, under a random name taken with O_CREAT|O_EXCL|O_NOFOLLOW; `publish` gives it its
    name by renaming it over the old one."""

    def __init__(self, name: str, size: int, mode: int):
        self.name = name
        self.tmp: Path | None = None
        self.published = False
        self.fd = -1
        try:
            self.fd = os.open(SHM, os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError as err:
            if err.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
            self.fd = self._named(lambda p: os.open(p, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                                                    | os.O_CLOEXEC, 0o600))
        try:
            os.fchmod(self.fd, mode)
            os.ftruncate(self.fd, size)
            self.mm = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            self.discard()
            raise

    def _named(self, make: Callable[[Path], Any]) -> Any:
        """make(path) under a fresh random name in /dev/shm (never one another user can guess
        and plant ahead of it); the name is kept in self.tmp."""
        for _ in range(32):
            tmp = SHM / f".corecast-{self.name}.{secrets.token_hex(8)}.tmp"
            try:
                r = make(tmp)
            except FileExistsError:
                continue
            self.tmp = tmp
            return r
        raise OSError(errno.EEXIST, "no free temporary name")

    def publish(self, path: Path) -> None:
        if self.tmp is None:       # linkat(/proc/self/fd/N, AT_SYMLINK_FOLLOW): fails if the name exists
            fds = os.open("/proc/self/fd", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:                   # (a directory fd: os.link of the path alone calls link(2), which
                self._named(lambda p: os.link(str(self.fd), p, src_dir_fd=fds, follow_symlinks=True))
            finally:               # links /proc's symbolic link itself and fails)
                os.close(fds)
        os.replace(self.tmp, path)  # rename(2): replaces the name, never writes through it
        self.tmp = None
        self.published = True

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def discard(self) -> None:
        if self.tmp is not None:
            _unlink(self.tmp)
            self.tmp = None
        self.close()


def _unlink(p: Path) -> None:
    try:
        p.unlink()
    except OSError:
        pass


def _make_app(name: str, slots: int, mode: int) -> _New:
    app = _New(name, C.sizeof(L.AppHeader) + slots * C.sizeof(L.AppSlot), mode)
    ah = L.AppHeader(magic=L.APP_MAGIC, version=L.VERSION, header_size=C.sizeof(L.AppHeader), slot_count=slots,
                     slot_size=C.sizeof(L.AppSlot), daemon_pid=os.getpid())
    app.mm[:C.sizeof(ah)] = bytes(ah)
    return app


def _owner(name: str) -> str:
    """` (pid N, since ...)` from the board there now, or ''."""
    try:
        with Board.open(name) as b:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(b.header.started_real_ns * 1e-9))
            return f" (pid {b.pid}, started {when})"
    except (UserError, OSError):
        return ""


def scope_struct(name: str, kind: str, parent: int, cpus: Sequence[int], cpus_text: str) -> L.Scope:
    return _put(L.Scope(), name=name, kind=kind, parent=parent, ncpus=len(cpus), cpus=cpus_text)


def meter_struct(name: str, scope: str, scope_index: int, unit: str, quality: int, kind: int, has_total: bool,
                 total_unit: str, source: str) -> L.MeterDesc:
    return _put(L.MeterDesc(), name=name, scope=scope, scope_index=scope_index, unit=unit, quality=quality,
                kind=kind, has_total=int(has_total), total_unit=total_unit, source=source)


def trigger_struct(name: str, meter: str, scope: str, meter_index: int, scope_index: int, low: float, high: float,
                   dwell_ns: int, advice_index: int, actions: str) -> L.TriggerDesc:
    return _put(L.TriggerDesc(), name=name, meter=meter, scope=scope, meter_index=meter_index,
                scope_index=scope_index, low=low, high=high, dwell_ns=dwell_ns, advice_index=advice_index,
                actions=actions)


def advice_struct(scope: str, scope_index: int, min_workers: int, max_workers: int, interval_ns: int,
                  policy: str) -> L.AdviceDesc:
    return _put(L.AdviceDesc(), scope=scope, scope_index=scope_index, min_workers=min_workers,
                max_workers=max_workers, interval_ns=interval_ns, policy=policy)
