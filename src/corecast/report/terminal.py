"""Terminal output: rich tables and consistent number formatting.

rich is imported by the functions that draw (for start-up time: `fmt` is used by commands that
print no table, and `measure -q --json` never loads rich).
"""
from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Iterable, Sequence

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table


def console(file: Any = None) -> Console:
    """A console on stdout (or `file`) that does not colour numbers by itself.

    Output that goes to a file or a pipe is never wrapped (so that grep finds whole lines):
    text keeps its lines and tables take their natural width, whatever COLUMNS says (shells
    and test runners export it for the terminal, not for the file).
    """
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
    from rich.table import Table

    return Table(title=title, title_justify="left", min_width=len(title), **options)


def make_table(title: str | None, headers: Sequence[str], rows: Iterable[Sequence[Any]],
               justify: Sequence[str] | None = None, styles: Sequence[str | None] | None = None) -> Table:
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
    from rich.text import Text

    label, style = ("warning", "bold yellow") if kind == "warning" else ("note", "cyan")
    for it in items:
        con.print(Text(f"{label}: ", style=style) + Text(it))
