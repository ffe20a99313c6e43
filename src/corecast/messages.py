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
from typing import Any, Callable

QUIET, NORMAL, VERBOSE = 0, 1, 2

_level = NORMAL
_command = ""
_named: set[str] = set()


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


#: Control characters a line of text may not carry to a terminal: C0 but tab and line feed,
#: DEL and C1 (ESC starts an escape sequence; CSI and OSC are also single C1 characters).
_CONTROL = {c: f"\\x{c:02x}" for c in [*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)]}


#: ... and tab and line feed too, for a name that must stay one field of one line.
_CONTROL_ALL = {**_CONTROL, 0x09: "\\x09", 0x0a: "\\x0a"}


def visible(text: str, one_line: bool = False) -> str:
    """`text` with its control characters shown as \\xNN instead of sent: a column name, a
    command, a machine's name or a cell from another user's file can carry escape sequences
    (OSC 52 writes the owner's clipboard, others set the title or clear the screen) that must
    not reach the owner's terminal as they are. `one_line`: tabs and line feeds as well."""
    return text.translate(_CONTROL_ALL if one_line else _CONTROL)



class Throttle:
    """Lines of a kind at most one every `every` seconds: a flood another user can send (refused
    requests to a server, refused subscribers of a board) is one line, not one each. `line`
    gives the text to log, with the count of those held back since the last, or None."""

    def __init__(self, every: float):
        self.every = every
        self._seen: dict[str, tuple[float, int]] = {}     # kind: (when logged, held back since)

    def line(self, kind: str, text: str) -> str | None:
        now = time.monotonic()
        last, since = self._seen.get(kind, (-self.every, 0))
        if now - last < self.every:
            self._seen[kind] = (last, since + 1)
            return None
        self._seen[kind] = (now, 0)
        return text + (f" ({since} more refused like it in the last {now - last:.0f} s)" if since else "")

def _print(text: str) -> None:
    text = visible(text)
    err = sys.stderr
    live = [p for p in _active if p.drawn]
    try:
        for p in live:                # a line said during long work goes above its progress line
            p.clear()
        err.flush()
        print(text, file=err, flush=True)
        for p in live:
            p.redraw()
    except (OSError, ValueError):   # standard error closed: nothing to tell
        pass


def say(text: str) -> None:
    """A line of what is going on (a failed run, a notice), unprefixed: -q leaves it out."""
    if _level >= NORMAL:
        _print(text)


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


#: Characters of the bar a Progress(bar=True) draws.
BAR_WIDTH = 24


def _clock(seconds: float) -> str:
    """Elapsed or remaining time: 42 s, 3 min 05 s, 1 h 02 min."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    m, s = divmod(int(round(seconds)), 60)
    if m < 90:
        return f"{m} min {s:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


#: Progress lines drawn now (messages said meanwhile go above them).
_active: list["Progress"] = []


class Progress:
    """The progress of one piece of long work: the one helper every long job uses (simulating,
    capturing, sweeping, measuring, fitting and plotting). It draws one line on standard error
    when that is a terminal (and -q is not given), at most five times a second, and clears it
    at the end:

        with Progress("simulating", total=n, unit="records") as p:
            for chunk in chunks:
                ...
                p.advance(len(chunk))

    The line says the count done (of `total`, with the share and the time left, when the total
    is known), the time so far, and the current item (`label`: "4 cores, rep 2", "plotting").
    Nothing is drawn where standard error is a file or a pipe -- not even at the end -- so
    logs stay clean (a caller whose work is already done when it starts, a resumed campaign
    with nothing left, makes no Progress at all). A note or warning said meanwhile (`messages.note` ...)
    is printed above the line, which is then drawn again.

    With `bar`, a bar of BAR_WIDTH characters goes before the share done.

    `lines=True` is for work whose program writes to the same terminal (`sim capture` runs the
    program on it): no line is redrawn in place (the program's own output would land in it);
    instead a whole line is printed after `LINE_FIRST_S` and then every `LINE_EVERY_S` seconds.
    """

    INTERVAL_S = 0.2
    LINE_FIRST_S, LINE_EVERY_S = 1.0, 10.0

    def __init__(self, what: str, total: float | None = None, unit: str = "", stream: Any = None,
                 lines: bool = False, bar: bool = False):
        self.what, self.total, self.unit, self.bar = what, total, unit, bar
        self.done = 0.0
        self.label = ""
        self.stream = stream
        self.lines = lines
        self.start = time.monotonic()
        self.drawn = False
        self._last = 0.0
        self._base = 0.0
        self._shown = False            # anything drawn since start (begin)

    @property
    def _out(self) -> Any:
        return self.stream if self.stream is not None else sys.stderr

    @property
    def live(self) -> bool:
        try:
            return _level >= NORMAL and self._out.isatty()
        except (AttributeError, ValueError):
            return False

    def __enter__(self) -> "Progress":
        self.start = time.monotonic()
        if self not in _active:
            _active.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def begin(self, total: float | None = None, what: str | None = None, unit: str | None = None,
              done: float = 0.0) -> None:
        """Start (again) from now: a stage that follows another under the same `with`; `done`
        of `total` are done already (a resumed campaign)."""
        self.total, self.done, self.start = total, done, time.monotonic()
        self._base = done                  # done before this start: not in the rate
        self.what = what if what is not None else self.what
        self.unit = unit if unit is not None else self.unit
        self.label, self._last, self._shown = "", 0.0, False
        if self not in _active:
            _active.append(self)

    def advance(self, n: float = 1, label: str | None = None) -> None:
        self.update(self.done + n, label)

    def update(self, done: float, label: str | None = None) -> None:
        self.done = done
        if label is not None:
            self.label = label
        if not self.live:
            return
        now = time.monotonic()
        if self.lines:
            first = self._last == 0.0
            if (now - self.start >= self.LINE_FIRST_S) if first else (now - self._last >= self.LINE_EVERY_S):
                self._last = now
                self._draw(now)
            return
        finished = bool(self.total) and done >= self.total          # the last state is always drawn
        if finished or now - self._last >= self.INTERVAL_S:
            self._last = now
            self._draw(now)

    def callback(self, what: str | None = None) -> Callable[[int, int, str], None]:
        """`f(done, total, label)` for code that reports its progress so (chase's sweeps):
        each call with a new `what` or total starts a new stage."""
        def update(done: int, total: int, label: str) -> None:
            if (what is not None and what != self.what) or total != self.total:
                self.begin(total, what=what)
            self.update(done, label)
        return update

    def line(self, now: float | None = None, bar: bool | None = None) -> str:
        """The text of the progress line (`bar`: with the bar; default: as constructed)."""
        elapsed = (now if now is not None else time.monotonic()) - self.start
        text = f"{self.what}: "
        if self.total:
            frac = min(1.0, self.done / self.total)
            if self.bar if bar is None else bar:
                full = int(round(frac * BAR_WIDTH))
                text += "[" + "#" * full + "." * (BAR_WIDTH - full) + "] "
            text += f"{100 * frac:.0f}% ({_count(self.done, '')}/{_count(self.total, self.unit)})"
            new = self.done - self._base
            if new > 0 and frac < 1 and elapsed > 1:
                text += f", {_clock(elapsed)}, about {_clock(elapsed * (self.total - self.done) / new)} left"
            else:
                text += f", {_clock(elapsed)}"
        else:
            text += f"{_count(self.done, self.unit)}, {_clock(elapsed)}"
        if self.label:
            text += f"; {self.label}"
        return visible(text, one_line=True)

    def _width(self) -> int:
        cols = 0
        try:
            cols = os.get_terminal_size(self._out.fileno()).columns
        except (AttributeError, OSError, ValueError):
            pass
        if cols <= 0:                      # a terminal that does not say its size
            cols = int(os.environ.get("COLUMNS", "80")) if os.environ.get("COLUMNS", "").isdigit() else 80
        return max(20, cols - 1)

    def _draw(self, now: float) -> None:
        try:
            if self.lines:
                self._out.write(self.line(now) + "\n")
            else:
                # one line, never wrapped (a wrapped line cannot be cleared with \r)
                # the bar goes first where the line would not fit: the count and time left stay
                width, text = self._width(), self.line(now)
                if self.bar and len(text) > width:
                    text = self.line(now, bar=False)
                self._out.write("\r\x1b[K" + text[:width])
                self.drawn = True
            self._out.flush()
            self._shown = True
        except (OSError, ValueError):
            pass

    def clear(self) -> None:
        """Take the line off the terminal (it is drawn again at the next update)."""
        if self.drawn:
            try:
                self._out.write("\r\x1b[K")
                self._out.flush()
            except (OSError, ValueError):
                pass
            self.drawn = False

    def redraw(self) -> None:
        if self.live and not self.lines and self._shown:
            self._draw(time.monotonic())

    def close(self) -> None:
        self.clear()
        if self in _active:
            _active.remove(self)
