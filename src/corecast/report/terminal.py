"""Terminal output: rich tables and consistent number formatting.

rich is imported by the functions that draw (for start-up time: `fmt` is used by commands that
print no table, and `measure -q --json` never loads rich). Where rich is not installed (a bare
machine: the ground-truth kit runs corecast on the system's Python with only NumPy and SciPy)
the same calls give plain text: `PlainConsole` writes lines with the markup taken out and
`PlainTable` draws columns with spaces (`have_rich()` says which).
"""
from __future__ import annotations

import functools
import math
import re
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from ..messages import visible

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


@lru_cache(maxsize=1)
def have_rich() -> bool:
    try:
        import rich  # noqa: F401
    except ImportError:
        return False
    return True


_MARKUP = re.compile(r"(?<!\\)\[/?(?:bold|dim|italic|red|green|yellow|cyan|blue|magenta|white|bold [a-z]+|)\]")


def plain(text: str) -> str:
    """rich markup taken out of `text` ([bold]...[/bold], [/]), escaped brackets kept."""
    return _MARKUP.sub("", text).replace("\\[", "[")


def escape(text: str) -> str:
    """`text` with what rich would read as markup escaped (as rich.markup.escape)."""
    return re.sub(r"(\\*)(\[[a-z#/@].*?\])", r"\1\1\\\2", text)


#: A tag as rich's markup reads it (rich.markup.RE_TAGS), with the backslashes before it.
_RICH_TAG = re.compile(r"(\\*)(\[[a-z#/@][^[]*?\])")
#: corecast's own markup: the styles its texts use, nothing else (no [link=...], no [@click]).
_OWN_TAG = re.compile(r"\[/?(?:bold|dim|italic|red|green|yellow|cyan|blue|magenta|white|bold [a-z]+|)\]")


def own_markup(text: str) -> str:
    """`text` with every markup tag escaped but corecast's own styles (_OWN_TAG): a name from
    another user's file interpolated into a line or a cell is read by rich as markup, where
    `[link=URL]` makes a hidden hyperlink on the owner's terminal (OSC 8) and a stray closing
    tag ends the command with rich's MarkupError. The rendering consoles apply it to every
    string they are given (`_fitting_console`); `escape` a name to show its brackets as well."""
    def one(m: re.Match[str]) -> str:
        slashes, tag = m.group(1), m.group(2)
        if len(slashes) % 2 or _OWN_TAG.fullmatch(tag):
            return m.group(0)              # escaped already, or corecast's own style
        return slashes * 2 + "\\" + tag
    return _RICH_TAG.sub(one, text) if "[" in text else text


class PlainTable:
    """What corecast draws with rich's Table, in plain columns (rich not installed)."""

    def __init__(self, title: str | None = None, **_: Any):
        self.title = title
        self.headers: list[str] = []
        self.justify: list[str] = []
        self.rows: list[list[str]] = []

    def add_column(self, header: str, justify: str = "left", **_: Any) -> None:
        self.headers.append(plain(str(header)))
        self.justify.append(justify)

    def add_row(self, *cells: Any, **_: Any) -> None:
        self.rows.append([plain(str(c)) for c in cells])

    def render(self) -> str:
        width = [max([len(h)] + [len(r[i]) for r in self.rows if i < len(r)]) for i, h in enumerate(self.headers)]

        def line(cells: Sequence[str]) -> str:
            return "  ".join(c.rjust(w) if j == "right" else c.ljust(w)
                             for c, w, j in zip(cells, width, self.justify)).rstrip()
        out = ([plain(self.title)] if self.title else []) + [line(self.headers), line(["-" * w for w in width])]
        return "\n".join(out + [line(r) for r in self.rows])


class PlainConsole:
    """A console without rich: lines of text, markup taken out, tables in plain columns."""

    def __init__(self, file: Any = None):
        self.file = file or sys.stdout

    def print(self, *objs: Any, **_: Any) -> None:
        parts = [o.render() if isinstance(o, PlainTable) else plain(str(o)) for o in objs]
        self.file.write(visible(" ".join(parts)) + "\n")


def console(file: Any = None) -> Console:
    """A console on stdout (or `file`) that does not colour numbers by itself.

    Output that goes to a file or a pipe is never wrapped (so that grep finds whole lines):
    text keeps its lines and tables take their natural width, whatever COLUMNS says (shells
    and test runners export it for the terminal, not for the file). Without rich: a
    PlainConsole.
    """
    if not have_rich():
        return PlainConsole(file)      # type: ignore[return-value]

    out = file or sys.stdout
    cls = _fitting_console()
    if not (hasattr(out, "isatty") and out.isatty()):
        return cls(file=out, highlight=False, soft_wrap=True, width=PIPE_WIDTH)
    return cls(file=out, highlight=False, soft_wrap=False)


#: The width of output to a file or a pipe: wider than any line corecast writes.
PIPE_WIDTH = 100_000


# ------------------------------------------------------------------ tables that fit the terminal
# rich fits a table that is too wide by narrowing its columns and cutting what no longer fits
# with "…" -- numbers too ("1.51e+…", "6.418…"). Every table corecast prints goes through
# `fit_table` first (the console's print does it): a column of numbers keeps its full width and
# never wraps; a column of text wraps (at spaces; a word longer than the column is folded, never
# a number in it); and when even that does not fit, columns are left out from the right, and
# a line under the table says which.

#: Placeholder cells that do not make a column text.
_PLACEHOLDERS = {"", "-", "–", "∞", "-∞", "yes", "no", "n/a", "none", "?"}
_NUMBER = re.compile(r"[~≈<>±+\-−]?\d[\d,]*(?:\.\d+)?(?:[eE][+\-]?\d+)?%?")
_LONG_WORD = 20          # text columns may fold words longer than this (never a number)


def _plain(cell: Any) -> str:
    plain = getattr(cell, "plain", None)
    return plain if isinstance(plain, str) else str(cell)


def _width(text: str) -> int:
    from rich.cells import cell_len
    return max((cell_len(line) for line in text.split("\n")), default=0)


def _numeric(cells: list[str]) -> bool:
    """A column of numbers: every cell is short, has a digit and at most a unit's letters
    ("112.2 ns", "4 KiB", "1.51e+06", "0 <-> 1", "12.3%"), or is a placeholder."""
    seen = False
    for c in cells:
        c = c.strip()
        if c.lower() in _PLACEHOLDERS:
            continue
        if len(c) > 24 or not any(ch.isdigit() for ch in c):
            return False
        if any(len(w) > 5 for w in re.findall(r"[^\W\d_]+", c)):
            return False
        seen = True
    return seen


def fit_table(table: Any, width: int) -> list[str]:
    """Make `table` (a rich Table) fit `width` columns without cutting a number: set each
    column's width and wrapping, leaving columns out from the right when needed. Returns the
    headers of the columns left out."""
    cols = list(table.columns)
    if not cols or table.width is not None:
        return []
    cells = [[_plain(c) for c in col._cells] for col in cols]
    heads = [_plain(col.header) for col in cols]
    numeric = [_numeric(c) for c in cells]
    head_word = [max((_width(w) for w in h.split()), default=0) for h in heads]
    full = [max([_width(x) for x in c] + [_width(h)]) for c, h in zip(cells, heads)]
    mins = []
    for i, c in enumerate(cells):
        if numeric[i]:
            mins.append(max([_width(x) for x in c] + [head_word[i], 1]))
            continue
        words = [w for x in c for w in x.split()]
        longest = max((_width(w) for w in words), default=1)
        number = max((len(m) for x in c for m in _NUMBER.findall(x)), default=0)
        mins.append(min(full[i], max(min(longest, _LONG_WORD), number, head_word[i], 1)))

    def room(n: int) -> int:
        # what the columns get: the width less the borders and each column's padding
        extra = (2 if table.box and table.show_edge else 0) + (n - 1 if table.box else 0)
        _, right, _, left = table.padding
        pads = (left + right) * n
        if not table.pad_edge:             # no padding left of the first column, right of the last
            pads -= left + right
        return width - extra - pads

    keep = len(cols)
    while keep > 1 and sum(mins[:keep]) > room(keep):
        keep -= 1
    dropped = [heads[i] or f"column {i + 1}" for i in range(keep, len(cols))]
    if dropped:
        table.columns[:] = cols[:keep]
        for i, col in enumerate(table.columns):
            col._index = i
    avail = room(keep)
    widths = full[:keep]
    if sum(widths) > avail:
        # each column from its least width (its widest number, its longest word: a header may
        # wrap) up, sharing what is left in proportion to what each would still take
        widths = mins[:keep]
        slack = [full[i] - mins[i] for i in range(keep)]
        spare = avail - sum(widths)
        total = sum(slack)
        for i in range(keep):
            widths[i] += spare * slack[i] // total if total else 0
        left = avail - sum(widths)
        for i in range(keep):              # what integer division left over, from the left
            add = min(left, full[i] - widths[i])
            widths[i] += add
            left -= add
    # Every width is set: rich then narrows nothing. A cell wraps only where it is wider than
    # its column, which a number never is; a header may wrap (a no_wrap column would cut it).
    for i, col in enumerate(table.columns):
        col.width, col.no_wrap, col.overflow = widths[i], False, "fold"
    return dropped


@functools.lru_cache(maxsize=1)
def _fitting_console() -> type:
    """rich's Console whose print fits every table to the console's width (fit_table)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    class FittingConsole(Console):
        def print(self, *objects: Any, **kwargs: Any) -> None:  # type: ignore[override]
            for obj in objects:
                dropped = fit_table(obj, self.width) if isinstance(obj, Table) else []
                super().print(obj, **kwargs)
                if dropped:
                    names = ", ".join(dropped)
                    super().print(Text(f"({len(dropped)} column{'s' if len(dropped) > 1 else ''} left out to fit "
                                       f"{self.width} columns: {names}; a wider terminal shows "
                                       f"{'them' if len(dropped) > 1 else 'it'})", style="dim"))

        def render_str(self, text: str, **kwargs: Any) -> Any:  # type: ignore[override]
            # every string a print, a table's cell, header or title is made into Text here:
            # markup other than corecast's own styles is shown as written (own_markup), and text
            # whose tags still do not pair (a data's stray "[/bold]") is shown as written, unstyled
            from rich.errors import MarkupError
            from rich.text import Text

            if kwargs.get("markup") is False or not self._markup:
                return super().render_str(text, **kwargs)
            try:
                return super().render_str(own_markup(text), **kwargs)
            except MarkupError:
                return Text(text.replace("\\[", "["), style=kwargs.get("style") or "", justify=kwargs.get("justify"),
                            overflow=kwargs.get("overflow"))

        def _render_buffer(self, buffer: Any) -> str:
            # the text of every segment shown with its control characters visible
            # (messages.visible: a cell from another user's file may carry escape sequences);
            # rich's own control segments (cursor moves) and styles are left alone
            from rich.segment import Segment
            return super()._render_buffer(Segment(visible(t), st, c) if c is None else Segment(t, st, c)
                                          for t, st, c in buffer)

        def on_broken_pipe(self) -> None:
            # rich's own answer is SystemExit(1): `corecast usl F | head` then exited 1. The
            # reader went away, which is no error: cli.main stops quietly with status 0.
            raise BrokenPipeError(32, "Broken pipe")

    return FittingConsole



def duration(v: float | None, sig: int = 3, missing: str = "-") -> str:
    """A time in seconds to `sig` significant figures in the unit that keeps it under 1,000
    (74 ns, 470 µs, 28 ms; a sort's lock hold was '1088321 ns', memcached's longest wait
    '11206.3 µs'); `missing` for None or a time that is not finite."""
    if v is None or not math.isfinite(v):
        return missing
    r = float(f"{abs(v):.{sig}g}")
    if r >= 1000:
        return f"{v:,.0f} s"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if r >= scale:
            return f"{v / scale:.{sig}g} {unit}"
    return f"{v * 1e9:.{sig}g} ns"

def fmt(v: Any, sig: int = 4) -> str:
    """Numbers with `sig` significant digits; integers as integers; None/NaN as '-'."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10000 else str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        if math.isinf(v):
            return "∞" if v > 0 else "-∞"
        if v != 0 and (abs(v) >= 10 ** (sig + 2) or abs(v) < 1e-3):
            return f"{v:.{sig - 1}e}"
        if float(v).is_integer() and abs(v) < 10 ** sig:
            return str(int(v))
        return f"{v:.{sig}g}"
    return str(v)


def titled_table(title: str, **options: Any) -> Table:
    """A rich Table with its title on the left, at least as wide as its title: rich would wrap
    a longer title to the table's width (and grep would miss it)."""
    if not have_rich():
        return PlainTable(title)       # type: ignore[return-value]
    from rich.table import Table

    return Table(title=title, title_justify="left", min_width=len(title), **options)


def new_table(**options: Any) -> Table:
    """An empty rich Table (`options` are rich's), or a PlainTable without rich."""
    if not have_rich():
        return PlainTable()            # type: ignore[return-value]
    from rich.table import Table

    return Table(**options)


def make_table(title: str | None, headers: Sequence[str], rows: Iterable[Sequence[Any]],
               justify: Sequence[str] | None = None, styles: Sequence[str | None] | None = None) -> Table:
    if not have_rich():
        pt = PlainTable(title)
        for i, h in enumerate(headers):
            pt.add_column(h, justify=(justify[i] if justify else ("left" if i == 0 else "right")))
        for row in rows:
            pt.add_row(*[c if isinstance(c, str) else fmt(c) if not hasattr(c, "plain") else c.plain for c in row])
        return pt                      # type: ignore[return-value]
    from rich.table import Table
    from rich.text import Text

    # at least as wide as its title, which rich would otherwise wrap to the table's width
    t = Table(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False,
              header_style="bold", min_width=len(title) if title else None)
    for i, h in enumerate(headers):
        t.add_column(h, justify=(justify[i] if justify else ("left" if i == 0 else "right")), no_wrap=(i == 0))
    for i, row in enumerate(rows):
        style = styles[i] if styles and i < len(styles) else None
        t.add_row(*[c if isinstance(c, Text) else fmt(c) for c in row], style=style)
    return t


def print_notices(con: Console, items: Iterable[str], kind: str = "warning") -> None:
    label, style = ("warning", "bold yellow") if kind == "warning" else ("note", "cyan")
    if not have_rich():
        for it in items:
            con.file.write(visible(f"{label}: {it}") + "\n")      # type: ignore[attr-defined]
        return
    from rich.text import Text

    for it in items:
        con.print(Text(f"{label}: ", style=style) + Text(it))
