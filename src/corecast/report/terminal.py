"""Terminal output: rich tables and consistent number formatting."""
from __future__ import annotations

import math
import sys
from typing import Any, Iterable, Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text


def console(file: Any = None) -> Console:
    """A console on stdout (or `file`) that does not colour numbers by itself.

    Output that goes to a file or a pipe is never wrapped (so that grep finds whole lines):
    text keeps its lines and tables take their natural width, whatever COLUMNS says (shells
    and test runners export it for the terminal, not for the file).
    """
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


def make_table(title: str | None, headers: Sequence[str], rows: Iterable[Sequence[Any]],
               justify: Sequence[str] | None = None, styles: Sequence[str | None] | None = None) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", show_edge=False, pad_edge=False,
              header_style="bold")
    for i, h in enumerate(headers):
        t.add_column(h, justify=(justify[i] if justify else ("left" if i == 0 else "right")), no_wrap=(i == 0))
    for i, row in enumerate(rows):
        style = styles[i] if styles and i < len(styles) else None
        t.add_row(*[c if isinstance(c, Text) else fmt(c) for c in row], style=style)
    return t


def print_notices(con: Console, items: Iterable[str], kind: str = "warning") -> None:
    label, style = ("warning", "bold yellow") if kind == "warning" else ("note", "cyan")
    for it in items:
        con.print(Text(f"{label}: ", style=style) + Text(it))
