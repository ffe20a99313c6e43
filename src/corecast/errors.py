"""The one exception type for mistakes a user can make.

Anything a user can cause -- a malformed file, an unknown metric or event, a program that
fails, a missing permission -- raises `UserError` with one line that names the file, line,
column or option. The command line prints that line and exits with status 2; it never shows
a traceback for these.
"""
from __future__ import annotations

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


@contextmanager
def opened(path: object, mode: str = "r", what: str = "file", **kw: Any) -> Iterator[IO[Any]]:
    """open() whose failures are UserErrors: `PATH: no such <what>`, `is a directory`,
    `permission denied`, or the system's reason."""
    try:
        fh = open(path, mode, **kw)  # type: ignore[call-overload]
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a {what}") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied") from None
    except OSError as err:
        raise UserError(f"{path}: cannot open: {err.strerror or err}") from None
    with fh:
        yield fh
