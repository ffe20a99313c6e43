"""What corecast says on standard error beside its results: progress of long work, notes, the
files it wrote, and detail -- at one verbosity for the whole process, set by the command line.

    -q  results, warnings and errors only: no progress, no notes, no file names
        (default) progress on a terminal, notes, every written file named once
    -v  also detail: what was read, how long each command took

The functions are usable from every layer (collectors, simulators, renderers); they print
nothing the verbosity leaves out. Standard error is looked up at each call, so a test that
captures it sees what a user would.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

QUIET, NORMAL, VERBOSE = 0, 1, 2

_level = NORMAL
_command = ""
_named: set[str] = set()
_drawn: "Progress | None" = None      # the progress line on the terminal now, cleared before a message


def configure(level: int = NORMAL, command: str = "") -> None:
    """Set the verbosity and the command name notes are prefixed with (by the CLI, per run)."""
    global _level, _command
    _level = level
    _command = command
    _named.clear()


def level() -> int:
    return _level


def _prefix() -> str:
    return f"corecast {_command}: " if _command else "corecast: "


def _print(text: str) -> None:
    err = sys.stderr
    if _drawn is not None:
        _drawn.close()                  # redrawn at its next update
    try:
        err.flush()
        print(text, file=err, flush=True)
    except (OSError, ValueError):   # standard error closed: nothing to tell
        pass


def note(text: str) -> None:
    """Something a user may want to know that changes nothing in the result (-q leaves it out)."""
    if _level >= NORMAL:
        _print(f"{_prefix()}note: {text}")


def step(text: str) -> None:
    """A stage of long work begins (fitting, learning, ...): -q leaves it out."""
    if _level >= NORMAL:
        _print(f"{_prefix()}{text}...")


def warning(text: str) -> None:
    """Something that makes the result less than asked for: said at every verbosity."""
    _print(f"{_prefix()}warning: {text}")


def detail(text: str) -> None:
    """What -v adds: what was read, how long things took."""
    if _level >= VERBOSE:
        _print(f"{_prefix()}{text}")


def wrote(path: Any, what: str = "") -> None:
    """Name a file corecast wrote, once per file and run (-q leaves it out)."""
    key = os.path.abspath(os.fspath(path))
    if key in _named:
        return
    _named.add(key)
    if _level >= NORMAL:
        _print(f"wrote {os.fspath(path)}" + (f": {what}" if what else ""))


def _count(n: float, unit: str) -> str:
    return f"{n:,.0f} {unit}".rstrip()


class Progress:
    """The progress of one piece of long work, drawn on one line of standard error when it is a
    terminal (and -q is not given), at most five times a second; the line is cleared at the end.

        with Progress("simulating", total=n, unit="records") as p:
            for chunk in chunks:
                ...
                p.advance(len(chunk))

    `total` may be None when it is not known (a count and the time are shown then). Nothing is
    drawn where standard error is a file or a pipe: logs stay clean.
    """

    INTERVAL_S = 0.2

    def __init__(self, what: str, total: float | None = None, unit: str = "", stream: Any = None):
        self.what, self.total, self.unit = what, total, unit
        self.done = 0.0
        self.stream = stream
        self.start = time.monotonic()
        self.drawn = False
        self._last = 0.0

    @property
    def live(self) -> bool:
        s = self.stream if self.stream is not None else sys.stderr
        try:
            return _level >= NORMAL and s.isatty()
        except (AttributeError, ValueError):
            return False

    def __enter__(self) -> "Progress":
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def begin(self, total: float | None = None) -> None:
        """Start (again) from now: a stage that follows another under the same `with`."""
        self.total, self.done, self.start = total, 0.0, time.monotonic()

    def advance(self, n: float = 1) -> None:
        self.update(self.done + n)

    def update(self, done: float) -> None:
        self.done = done
        now = time.monotonic()
        finished = bool(self.total) and done >= self.total      # the last state is always drawn
        if (finished or now - self._last >= self.INTERVAL_S) and self.live:
            self._last = now
            self._draw(now)

    def line(self, now: float | None = None) -> str:
        """The text of the progress line."""
        elapsed = (now if now is not None else time.monotonic()) - self.start
        text = f"{self.what}: "
        if self.total:
            frac = min(1.0, self.done / self.total)
            text += f"{100 * frac:.0f}% ({_count(self.done, '')}/{_count(self.total, self.unit)})"
            if 0 < frac < 1 and elapsed > 1:
                text += f", {elapsed:.0f} s, about {elapsed * (1 - frac) / frac:.0f} s left"
            else:
                text += f", {elapsed:.0f} s"
        else:
            text += f"{_count(self.done, self.unit)}, {elapsed:.0f} s"
        return text

    def _draw(self, now: float) -> None:
        s = self.stream if self.stream is not None else sys.stderr
        global _drawn
        try:
            s.write("\r\x1b[K" + self.line(now))
            s.flush()
            self.drawn = True
            _drawn = self
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        global _drawn
        if _drawn is self:
            _drawn = None
        if self.drawn:
            s = self.stream if self.stream is not None else sys.stderr
            try:
                s.write("\r\x1b[K")
                s.flush()
            except (OSError, ValueError):
                pass
            self.drawn = False
