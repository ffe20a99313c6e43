"""Terminal output: rich tables and consistent number formatting.

rich is imported by the functions that draw (for start-up time: `fmt` is used by commands that
print no table, and `measure -q --json` never loads rich). Where rich is not installed (a bare
machine: the ground-truth kit runs corecast on the system's Python with only NumPy and SciPy)
the same calls give plain text: `PlainConsole` writes lines with the markup taken out and
`PlainTable` draws columns with spaces (`have_rich()` says which).
"""
from __future__ import annotations

import math
import re
import sys
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Iterable, Sequence

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
        self.file.write(" ".join(parts) + "\n")


def console(file: Any = None) -> Console:
    """A console on stdout (or `file`) that does not colour numbers by itself.

    Output that goes to a file or a pipe is never wrapped (so that grep finds whole lines):
    text keeps its lines and tables take their natural width, whatever COLUMNS says (shells
    and test runners export it for the terminal, not for the file). Without rich: a
    PlainConsole.
    """
    if not have_rich():
        return PlainConsole(file)      # type: ignore[return-value]
    from rich.console import Console

    out = file or sys.stdout
    if not (hasattr(out, "isatty") and out.isatty()):
        return Console(file=out, highlight=False, soft_wrap=True, width=PIPE_WIDTH)
    return Console(file=out, highlight=False, soft_wrap=False)


#: The width of output to a file or a pipe: wider than any line corecast writes.
PIPE_WIDTH = 100_000


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
            con.file.write(f"{label}: {it}\n")      # type: ignore[attr-defined]
        return
    from rich.text import Text

    for it in items:
        con.print(Text(f"{label}: ", style=style) + Text(it))
