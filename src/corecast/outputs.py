"""Every file corecast writes goes through here, so that one rule holds for all of them.

corecast runs as root beside other users, so an output name may be a device, a pipe, a link
another user planted, or a folder. The rule, by what the name is when corecast writes:

- **a new name or a regular file**: the content goes to an unnamed file in its folder
  (O_TMPFILE, so a corecast killed while it writes, SIGKILL included, leaves nothing behind)
  which at the end gets a fresh temporary name beside it (linkat, which never replaces a
  name) and is renamed over the name; where the file system has no O_TMPFILE, to a temporary
  file made beside it with O_CREAT|O_EXCL|O_NOFOLLOW (a name that exists, a planted link
  included, is never opened), renamed the same way. The rename only replaces a regular file: the name
  is looked at again (lstat) just before it, and anything else found there by then is refused.
  A rename never follows a link at the destination, so the worst a race can do is replace what
  was planted, never write through it. An existing file keeps its permission bits (and, for
  root, its owner); in a world-writable sticky folder (/tmp) a file of another user is not
  replaced (refused, as the kernel's fs.protected_regular would), so root's output never
  becomes another user's file; nor is a file the user may not write (its mode: "permission
  denied", as an open for writing would say). On any error the temporary file is removed, and
  the name keeps what it had.
  `live=True` (stat -o, meters --record CSV) renames the temporary file into place when it is
  opened instead of at the end, so what is written can be read as it grows; the same checks.
- **a character device or a named pipe** (/dev/null, /dev/full, a tty, a FIFO): written in place,
  opened without O_CREAT or O_TRUNC, never replaced; an error such as ENOSPC from /dev/full is
  one line. A FIFO without a reader is waited for, as a shell redirection does. In a
  world-writable sticky folder (/tmp, /dev/shm) a pipe of another user is refused, as
  fs.protected_fifos would refuse it to an open that creates (opened in place it does not).
- **an open descriptor** (/dev/stdout, /dev/stderr, /dev/fd/N, /proc/self/fd/N): the descriptor
  itself is written (a copy of it), whatever it is open to, at its offset.
- **refused with one line**: a folder ("is a directory"), a block device (a disk is no place for
  a report), a socket, a name whose folder does not exist ("no such folder": folders are never
  created), and a **symbolic link** at the name that leads to a regular file or to nothing: the
  link is never followed for the rename and never silently replaced, so the message names the
  link and asks for the file itself. A link that leads to a device or a pipe is followed only
  when it is trusted, as the kernel's fs.protected_symlinks would (which is off on many
  machines): a link in a world-writable sticky folder (/tmp, /dev/shm) is trusted only when
  its owner is the user running corecast or the folder's owner. The same holds for every link
  on the way to the name, the folders' included.

Each regular file written is named once on standard error (`messages.wrote`, never standard
output); a device, a pipe or a descriptor is not announced (nothing was made there).

    with outputs.writing("trace.csv") as fh:      # streaming, text
        fh.write(...)
    outputs.write_text("r.html", page, what="HTML report")
    outputs.save_figure(fig, "p.png", "png")

A failure to write raises `UserError("PATH: cannot write: REASON")` from the write itself
(the file object is guarded), after the temporary file has been removed.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import sys
from contextlib import contextmanager
from typing import IO, Any, Iterator

from . import messages
from .errors import UserError

#: Whether /proc/self/fd is there, through which an unnamed (O_TMPFILE) file is given a name.
_PROC_FD = os.path.isdir("/proc/self/fd")
#: Names that are an open descriptor of this process: written through a copy of it.
_FD_NAME = re.compile(r"/(?:dev/fd|proc/self/fd|proc/thread-self/fd|proc/(\d+)/fd)/(\d+)")
_STD_NAMES = {"/dev/stdout": 1, "/dev/stderr": 2}
_MAX_LINKS = 40


def _fd_alias(p: str) -> int | None:
    norm = os.path.normpath(p) if p.startswith("/") else ""
    if norm in _STD_NAMES:
        return _STD_NAMES[norm]
    m = _FD_NAME.fullmatch(norm)
    if m and (m.group(1) is None or int(m.group(1)) == os.getpid()):
        return int(m.group(2))
    return None


def _trusted(link: os.stat_result, folder: os.stat_result) -> bool:
    """The kernel's fs.protected_symlinks rule: a link in a sticky world-writable folder is
    followed only when its owner is the follower or the folder's owner (and fs.protected_regular's
    for a regular file there: replaced only under the same condition)."""
    shared = folder.st_mode & stat.S_ISVTX and folder.st_mode & stat.S_IWOTH
    return not shared or link.st_uid in (os.geteuid(), folder.st_uid)


def planted_link(p: str) -> str | None:
    """The first symbolic link on the way to `p` (its folders' and its own) that is not trusted
    (see `_trusted`), or None. Links are resolved as the kernel would, one component at a time."""
    cur = "/" if p.startswith("/") else os.getcwd()
    todo = list(reversed(p.split("/")))
    hops = 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            cur = os.path.dirname(cur) or "/"
            continue
        nxt = os.path.join(cur, name)
        try:
            st = os.lstat(nxt)
        except OSError:
            return None                     # the rest does not exist yet: nothing to follow
        if not stat.S_ISLNK(st.st_mode):
            cur = nxt
            continue
        try:
            if not _trusted(st, os.stat(cur)):
                return nxt
            target = os.readlink(nxt)
        except OSError:
            return None
        hops += 1
        if hops > _MAX_LINKS:
            return None                     # the open says "too many levels of links"
        if target.startswith("/"):
            cur = "/"
        todo.extend(reversed(target.split("/")))
    return None


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISBLK(mode):
        return "is a block device (corecast writes no disk)"
    if stat.S_ISSOCK(mode):
        return "is a socket"
    return ""


def check(path: Any) -> str:
    """Say now whether `path` can be written, before long work: "new", "regular", "in place"
    (a device or a pipe) or "descriptor"; a UserError with the reason otherwise."""
    return _plan(os.fspath(path))[0]


def _plan(p: str) -> tuple[str, os.stat_result | None]:
    if not p:
        raise UserError("an empty output name")
    if _fd_alias(p) is not None:
        return "descriptor", None
    bad = planted_link(p)
    if bad is not None:
        try:
            owner = os.lstat(bad).st_uid
        except OSError:
            owner = -1
        where = f"{p}:" if bad == p else f"{p}: {bad}"       # the name itself, or a folder on the way
        raise UserError(f"{where} is a symbolic link owned by another user (uid {owner}) in a folder "
                        "anyone can write to: not followed")
    if p.endswith("/"):
        raise UserError(f"{p}: names a folder, not a file")
    parent = os.path.dirname(p) or "."
    try:
        pst = os.stat(parent)
    except FileNotFoundError:
        raise UserError(f"{p}: no such folder {parent}") from None
    except NotADirectoryError:
        raise UserError(f"{p}: {parent} is not a folder") from None
    except OSError as err:
        raise UserError(f"{p}: cannot reach folder {parent}: {err.strerror or err}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise UserError(f"{p}: {parent} is not a folder")
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        return "new", None
    except OSError as err:
        raise UserError(f"{p}: cannot write: {err.strerror or err}") from None
    if stat.S_ISREG(st.st_mode):
        if not _trusted(st, pst):
            raise UserError(f"{p}: a file of another user (uid {st.st_uid}) in a folder anyone can write to: "
                            "not replaced (remove it, or choose another name)")
        # A file this user may not write (chmod 444 or 000) was replaced all the same: the rename
        # needs only the folder's permission. Judged as an open for writing would be (root may).
        if not os.access(p, os.W_OK, effective_ids=os.access in os.supports_effective_ids):
            raise UserError(f"{p}: permission denied (a file you may not write is not replaced)")
        return "regular", st
    if stat.S_ISLNK(st.st_mode):
        try:
            to = os.stat(p)
        except OSError:
            to = None
        if to is None or stat.S_ISREG(to.st_mode):
            raise UserError(f"{p}: is a symbolic link (to {os.readlink(p)}); corecast writes no file "
                            "through a link: name the file itself")
        st = to
    why = _kind_of(st.st_mode)
    if why:
        raise UserError(f"{p}: {why}")
    _check_owner_in_place(p, st)
    return "in place", st


def _check_owner_in_place(p: str, st: os.stat_result) -> None:
    """A pipe (or device) of another user in a world-writable sticky folder is not written: the
    kernel's fs.protected_fifos guards only opens with O_CREAT, which a pipe written in place is
    not, so another user's `mkfifo /tmp/report.json` would receive root's report (or hold it
    forever waiting for a reader). `st`: what the name leads to."""
    try:
        folder = os.stat(os.path.dirname(os.path.realpath(p)) or "/")
    except OSError:
        return
    if not _trusted(st, folder):
        what = "named pipe" if stat.S_ISFIFO(st.st_mode) else "device"
        raise UserError(f"{p}: a {what} of another user (uid {st.st_uid}) in a folder anyone can write to: "
                        "not written (remove it, or choose another name)")


def _in_place_fd(p: str, kind: str) -> int:
    """A descriptor to write `p` in place: a copy of an open descriptor, or the device or pipe
    opened without O_CREAT/O_TRUNC (a FIFO without a reader is waited for)."""
    if kind == "descriptor":
        n = _fd_alias(p)
        assert n is not None
        for s in (sys.stdout, sys.stderr):
            try:
                if s is not None and s.fileno() == n:
                    s.flush()
            except (AttributeError, OSError, ValueError):
                pass
        try:
            fd = os.dup(n)
        except OSError:
            raise UserError(f"{p}: descriptor {n} is not open") from None
        import fcntl
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
            os.close(fd)
            raise UserError(f"{p}: descriptor {n} is not open for writing")
    else:
        flags = os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC
        try:
            fd = os.open(p, flags | os.O_NONBLOCK)
        except OSError as err:
            if err.errno != errno.ENXIO:    # ENXIO: a FIFO nobody reads yet
                raise UserError(f"{p}: cannot write: {err.strerror or err}") from None
            try:
                fd = os.open(p, flags)
            except OSError as err2:
                raise UserError(f"{p}: cannot write: {err2.strerror or err2}") from None
        os.set_blocking(fd, True)
        try:        # what was opened, not what was looked at: a name swapped meanwhile is caught
            _check_owner_in_place(p, os.fstat(fd))
        except UserError:
            os.close(fd)
            raise
    why = _kind_of(os.fstat(fd).st_mode)
    if why:
        os.close(fd)
        raise UserError(f"{p}: {why}")
    return fd


class _Guarded:
    """A file object whose write errors are one line (and abort its Output first)."""

    def __init__(self, fh: IO[Any], out: "Output"):
        self._fh = fh
        self._out = out

    def write(self, data: Any) -> int:
        try:
            return self._fh.write(data)
        except OSError as err:
            raise self._out.fail(err) from None

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._fh.flush()
        except OSError as err:
            raise self._out.fail(err) from None

    def close(self) -> None:
        self._out.commit()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._fh)


class Output:
    """One file being written by the rule above: `open()` gives a file object, then exactly one
    of `commit()` (the file is whole: rename, announce) or `abort()` (nothing is left).

    binary: bytes or text (UTF-8). live: rename the temporary file into place at `open`.
    seekable: the file object can seek and be read back (traces write their header last);
    for a device or a pipe it is then staged in an unnamed temporary file and copied at
    `commit`. `what` (settable until `commit`) is said beside the name when it is announced."""

    def __init__(self, path: Any, *, binary: bool = False, what: str = "", announce: bool = True,
                 live: bool = False, seekable: bool = False, newline: str | None = None):
        self.path = path
        self.p = os.fspath(path)
        self.binary, self.what, self.announce = binary, what, announce
        self.live, self.seekable, self.newline = live, seekable, newline
        self.kind = ""
        self._fh: IO[Any] | None = None
        self._file: _Guarded | None = None
        self._tmp: str | None = None
        self._anon = False                 # the content is in an unnamed file (O_TMPFILE) until commit
        self._target_fd: int | None = None
        self._done = False

    # ------------------------------------------------------------------ open
    @property
    def regular(self) -> bool:
        """Whether the output is (or becomes) a regular file under its name."""
        return self.kind in ("new", "regular")

    def open(self) -> _Guarded:
        kind, st = _plan(self.p)
        fd = None
        if kind in ("descriptor", "in place"):
            fd = _in_place_fd(self.p, kind)
            if kind == "in place" and stat.S_ISREG(os.fstat(fd).st_mode):   # replaced meanwhile
                os.close(fd)
                fd = None
                kind, st = "regular", os.lstat(self.p)
        self.kind = kind
        mode = ("w+b" if self.seekable else "wb") if self.binary else ("w+" if self.seekable else "w")
        if fd is not None:
            if self.seekable:
                self._target_fd = fd
                import tempfile     # here, for start-up time (as secrets and shutil below)
                fh: IO[Any] = tempfile.TemporaryFile(mode=mode, **self._text_kw())
            else:
                fh = os.fdopen(fd, mode, **self._text_kw())
        else:
            fh = os.fdopen(self._create_temp(st), mode, **self._text_kw())
            if self.live:
                try:
                    self._name_it(fh.fileno())
                    self._publish()
                except UserError:
                    fh.close()
                    raise
        self._fh = fh
        self._file = _Guarded(fh, self)
        return self._file

    def _text_kw(self) -> dict[str, Any]:
        return {} if self.binary else {"encoding": "utf-8", "newline": self.newline}

    def _create_temp(self, st: os.stat_result | None) -> int:
        """The file the content goes to until `commit`: unnamed where the folder's file system
        can (O_TMPFILE: a corecast killed while it writes, SIGKILL included, leaves nothing
        behind), else a fresh name beside the output (O_CREAT|O_EXCL|O_NOFOLLOW)."""
        folder = os.path.dirname(self.p) or "."
        access = os.O_RDWR if self.seekable else os.O_WRONLY
        fd = -1
        if _PROC_FD and hasattr(os, "O_TMPFILE"):
            try:
                fd = os.open(folder, os.O_TMPFILE | access | os.O_CLOEXEC, 0o666)
                self._anon = True
            except OSError:
                fd = -1                     # a file system without it (EOPNOTSUPP): a named one
        if fd < 0:
            fd = self._named_temp(lambda tmp: os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
                                                      | access, 0o666))
        if st is not None:                  # an existing file keeps its permissions (and owner)
            try:
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & 0o777)
                if os.geteuid() == 0:
                    os.fchown(fd, st.st_uid, st.st_gid)
            except OSError:
                pass
        return fd

    def _named_temp(self, make: Any) -> Any:
        """`make(name)` for a fresh temporary name beside the output (it raises FileExistsError
        for a name taken); the name is kept in `_tmp`."""
        folder, name = os.path.split(self.p)
        for _ in range(100):
            import secrets
            tmp = os.path.join(folder, f".{name[:120]}.{secrets.token_hex(4)}.tmp")
            try:
                got = make(tmp)
                break
            except FileExistsError:
                continue
            except OSError as err:
                raise UserError(f"{self.p}: cannot write: {err.strerror or err}") from None
        else:
            raise UserError(f"{self.p}: cannot write: no free temporary name beside it")
        self._tmp = tmp
        return got

    def _name_it(self, fd: int) -> None:
        """The unnamed file gets a temporary name beside the output (linkat, which never replaces
        a name), just before it is renamed over it: a name exists only from here to the rename."""
        if self._anon:
            # linkat(AT_SYMLINK_FOLLOW) through the descriptor's /proc link: Python calls linkat
            # only when a dir_fd is given (plain link(2) would link the /proc link itself: EXDEV);
            # the source's path is absolute, so the folder given is not used
            root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                self._named_temp(lambda tmp: os.link(f"/proc/self/fd/{fd}", tmp, src_dir_fd=root,
                                                     follow_symlinks=True))
            finally:
                os.close(root)
            self._anon = False

    def _publish(self) -> None:
        """Rename the temporary file over the name, which must be absent or a regular file."""
        assert self._tmp is not None
        try:
            st = os.lstat(self.p)
        except FileNotFoundError:
            st = None
        except OSError as err:
            raise self.fail(err) from None
        if st is not None and not stat.S_ISREG(st.st_mode):
            self.abort()
            raise UserError(f"{self.p}: became something other than a regular file while corecast wrote it; "
                            "nothing was replaced")
        try:
            os.rename(self._tmp, self.p)
        except OSError as err:
            raise self.fail(err) from None
        self._tmp = None

    # ------------------------------------------------------------------ end
    def fail(self, err: OSError) -> UserError:
        """Give the file up after a write error: the UserError to raise."""
        kept = self.live and self.regular and self._tmp is None
        self.abort()
        return UserError(f"{self.p}: cannot write: {err.strerror or err}"
                         + ("; what was written before is kept" if kept else ""))

    def commit(self) -> None:
        if self._done:
            return
        fh = self._fh
        if fh is not None:
            try:
                fh.flush()
                if self._target_fd is not None:
                    fh.seek(0)
                    with os.fdopen(self._target_fd, "wb", closefd=True) as dst:
                        self._target_fd = None
                        import shutil
                        shutil.copyfileobj(fh.buffer if hasattr(fh, "buffer") else fh, dst, 1 << 20)
                if self._anon:
                    self._name_it(fh.fileno())
                fh.close()
            except OSError as err:
                raise self.fail(err) from None
        if self._tmp is not None:
            self._publish()
        self._done = True
        self._fh = None
        if self.announce and self.regular:
            messages.wrote(self.path, self.what)

    def abort(self) -> None:
        """Nothing is left: the temporary file is removed (a live file keeps what it has)."""
        if self._done:
            return
        self._done = True
        for closing in (self._fh,):
            if closing is not None:
                try:
                    closing.close()
                except (OSError, ValueError):
                    pass
        self._fh = None
        if self._target_fd is not None:
            os.close(self._target_fd)
            self._target_fd = None
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass
            self._tmp = None


@contextmanager
def writing(path: Any, *, binary: bool = False, what: str = "", live: bool = False,
            announce: bool = True, newline: str | None = None) -> Iterator[_Guarded]:
    """A file object for `path`, committed when the block ends, given up when it raises."""
    out = Output(path, binary=binary, what=what, live=live, announce=announce, newline=newline)
    fh = out.open()
    try:
        yield fh
    except BaseException:
        out.abort()
        raise
    out.commit()


def write_bytes(path: Any, data: bytes, what: str = "", announce: bool = True) -> bool:
    """Write a whole document; whether it is a regular file (False: a device, a pipe, a descriptor)."""
    out = Output(path, binary=True, what=what, announce=announce)
    fh = out.open()
    try:
        fh.write(data)
    except BaseException:
        out.abort()
        raise
    out.commit()
    return out.regular


def write_text(path: Any, text: str, what: str = "", announce: bool = True) -> bool:
    """Write a whole text document (UTF-8); whether it is a regular file."""
    return write_bytes(path, text.encode("utf-8"), what, announce)


def save_figure(fig: Any, path: Any, fmt: str, what: str = "plot", **kw: Any) -> None:
    """A matplotlib figure in format `fmt` (png, svg, pdf)."""
    out = Output(path, binary=True, what=what)
    fh = out.open()
    try:
        fig.savefig(fh, format=fmt, **kw)
    except BaseException:
        out.abort()
        raise
    out.commit()


def remove_stale(path: Any) -> None:
    """Remove a regular file left from an earlier write (a sidecar that no longer belongs);
    anything else there -- a link, a device -- is left alone."""
    p = os.fspath(path)
    try:
        st = os.lstat(p)
        if stat.S_ISREG(st.st_mode) and planted_link(os.path.dirname(p) or ".") is None and \
                _trusted(st, os.stat(os.path.dirname(p) or ".")):
            os.unlink(p)
    except OSError:
        pass
