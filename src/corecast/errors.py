"""The one exception type for mistakes a user can make.

Anything a user can cause -- a malformed file, an unknown metric or event, a program that
fails, a missing permission -- raises `UserError` with one line that names the file, line,
column or option. The command line prints that line and exits with status 2; it never shows
a traceback for these.
"""
from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import IO, Any, Iterator


class UserError(Exception):
    """A mistake in what the user gave corecast. `str(err)` is the whole message: one line."""

    exit_status = 2

    def __init__(self, message: str):
        message = " ".join(str(message).split("\n"))
        super().__init__(message)


def where(path: object, line: int | None = None, column: str | None = None) -> str:
    """Format a location as `file:line: column 'x'` for error messages."""
    out = str(path)
    if line is not None:
        out += f":{line}"
    if column is not None:
        out += f": column '{column}'"
    return out


def _open_error(path: object, what: str, err: OSError) -> UserError:
    """The one line for a file that cannot be opened."""
    if isinstance(err, FileNotFoundError):
        return UserError(f"{path}: no such {what}")
    if isinstance(err, IsADirectoryError):
        return UserError(f"{path}: is a directory, not a {what}")
    if isinstance(err, PermissionError):
        return UserError(f"{path}: permission denied")
    return UserError(f"{path}: cannot open: {err.strerror or err}")


def _input_fd(path: object, what: str) -> tuple[int, bool]:
    """A descriptor to read `path` from, and whether it is a regular file. A named pipe (FIFO,
    or `<(...)`) is opened without waiting for a writer, then read as usual: to its end when
    something writes to it, as empty when nothing does -- never an open that waits forever."""
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # type: ignore[arg-type]
    except OSError as err:
        raise _open_error(path, what, err) from None
    st = os.fstat(fd)
    if stat.S_ISDIR(st.st_mode):
        os.close(fd)
        raise UserError(f"{path}: is a directory, not a {what}")
    regular = stat.S_ISREG(st.st_mode)
    if not regular:
        os.set_blocking(fd, True)          # a pipe with a writer: wait for its data
    return fd, regular


@contextmanager
def opened(path: object, mode: str = "r", what: str = "file", **kw: Any) -> Iterator[IO[Any]]:
    """open() whose failures are UserErrors: `PATH: no such <what>`, `is a directory`,
    `permission denied`, or the system's reason. Opened to read, a named pipe never blocks the
    open (see `_input_fd`)."""
    if set(mode) <= set("rbt"):
        fd, _ = _input_fd(path, what)
        fh = os.fdopen(fd, mode, **kw)
    else:
        try:
            fh = open(path, mode, **kw)  # type: ignore[call-overload]
        except OSError as err:
            raise _open_error(path, what, err) from None
    with fh:
        yield fh


def read_input(path: object, what: str = "file", limit: int | None = None) -> tuple[bytes, bool]:
    """The whole of a file a user gave, and whether it is a regular file; a named pipe is read
    to its end, or as empty when nothing writes to it (see `_input_fd`). `limit`: the most bytes
    taken; a larger file (or pipe) is one UserError line naming the bound, read no further."""
    fd, regular = _input_fd(path, what)
    try:
        return read_fd(fd, path, what, limit, regular), regular
    finally:
        os.close(fd)


def read_fd(fd: int, path: object, what: str, limit: int | None, regular: bool) -> bytes:
    """All of open descriptor `fd` (named `path`, a `what`), at most `limit` bytes: a regular
    file larger than that is refused before it is read, anything else once it has given more
    (one UserError line naming the bound). The descriptor is the caller's to close."""
    if limit is not None and regular and os.fstat(fd).st_size > limit:
        raise UserError(f"{path}: {os.fstat(fd).st_size:,} bytes, more than the {limit:,} corecast reads "
                        f"from a {what} like this")
    chunks = []
    got = 0
    while True:
        try:
            b = os.read(fd, 1 << 20)
        except OSError as err:
            raise UserError(f"{path}: cannot read: {err.strerror or err}") from None
        if not b:
            break
        chunks.append(b)
        got += len(b)
        if limit is not None and got > limit:
            raise UserError(f"{path}: more than the {limit:,} bytes corecast reads from a {what} like this")
    return b"".join(chunks)


def need_regular_file(path: object, what: str, why: str) -> None:
    """A UserError unless `path` is a regular file (a pipe or a device cannot be `why`)."""
    try:
        st = os.stat(os.fspath(path))  # type: ignore[arg-type]
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}") from None
    except OSError as err:
        raise UserError(f"{path}: cannot read: {err.strerror or err}") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{path}: is a directory, not a {what}")
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{path}: not a regular file ({why}): write it to a file first")
