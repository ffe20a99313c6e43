"""A command's result in the format asked for (`--format`/`--json`, see `output_format`): the one
place that chooses among the terminal's tables, the JSON document and the tidy tables, and writes
the text to standard output or to a file (docs/outputs.md gives each command's shapes)."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

Rows = Callable[[Any], list[dict[str, Any]]]


def document_text(fmt: str, doc: Any, rows: Rows | None = None, *, indent: int = 2, allow_nan: bool = True,
                  default: Callable[[Any], Any] | None = None) -> str:
    """The text of `doc` in `fmt`: "json" (the document, `indent` and `allow_nan` as json.dumps
    takes them, and a line end), or "csv"/"records" (`rows(doc)` as a tidy table,
    report.tables.table_text).

    `default` is json.dumps's, for what JSON cannot carry (numpy numbers, objects); given, the
    rows are made from the document as JSON reads it back, so that they hold what the JSON
    document holds."""
    if fmt == "json":
        return json.dumps(doc, indent=indent, allow_nan=allow_nan, default=default) + "\n"
    if fmt not in ("csv", "records") or rows is None:
        raise ValueError(f"no {fmt} text for this document")
    from ..report.tables import table_text

    if default is not None:
        doc = json.loads(json.dumps(doc, allow_nan=allow_nan, default=default))
    return table_text(rows(doc), fmt)


def print_document(fmt: str, doc: Any, render: Callable[[], Any] | None = None, *, rows: Rows | None = None,
                   indent: int = 2, allow_nan: bool = True, default: Callable[[Any], Any] | None = None,
                   output: str | os.PathLike[str] | None = None, what: str = "") -> None:
    """Show a command's result in `fmt` (`output_format(args)`, or "json"/"table" for a command
    that has only --json):

    - "table": `render()`, the terminal's tables (a command with no tidy rows, `rows` None,
      shows them for "csv" and "records" too);
    - "json", "csv", "records": `document_text` (see there for `rows`, `indent`, `allow_nan`
      and `default`), on standard output, or with `output` to that file through
      corecast.outputs (whole or not at all, and named on standard error: "wrote OUTPUT: what").

    `doc` is the document, or a function that makes it: called only when a document is
    written, so that the terminal's tables never pay for (or fail in) a document they do not
    show."""
    if fmt == "table" or (fmt in ("csv", "records") and rows is None):
        if render is None:
            raise ValueError(f"no terminal table for this document ({fmt})")
        render()
        return
    text = document_text(fmt, doc() if callable(doc) else doc, rows, indent=indent, allow_nan=allow_nan,
                         default=default)
    if output is None:
        write_stdout(text)
    else:
        from .. import outputs

        outputs.write_text(output, text, what)


def write_stdout(text: str) -> None:
    """A document's text on standard output. On a terminal its control characters are shown
    as \\xNN (messages.visible), as ls shows a file's name there: a CSV's cell or column name
    from another user's file may carry escape sequences (JSON escapes them itself); a file or a
    pipe gets the text as it is, byte for byte."""
    try:
        tty = sys.stdout.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty:
        from ..messages import visible

        text = visible(text)
    sys.stdout.write(text)
