"""The one exception type for mistakes a user can make.

Anything a user can cause -- a malformed file, an unknown metric or event, a program that
fails, a missing permission -- raises `UserError` with one line that names the file, line,
column or option. The command line prints that line and exits with status 2; it never shows
a traceback for these.
"""
from __future__ import annotations


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
