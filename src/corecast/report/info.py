"""The text of `corecast info`: what a Dataset or campaign file holds (the summary
`report.documents.dataset_summary` builds), with the columns grouped by source and the notes
written as lines of text."""
from __future__ import annotations

import json
import re
from typing import Any

from typing import TYPE_CHECKING

from ..dataset import Dataset
from . import terminal
from .terminal import escape

if TYPE_CHECKING:
    from rich.console import Console


def render_terminal(s: dict[str, Any], data: Dataset, con: Console) -> None:
    """The summary `s` of `data` on `con`: runs per core count, machine, command, the columns
    table, the sources, the notes."""
    runs = ", ".join(f"{c['cores']}×{c['runs']}" for c in s["cores"])
    con.print(f"[bold]{escape(s['file'])}[/bold]: {s['rows']} runs at {len(s['cores'])} core counts ({runs})")
    con.print(f"machine: {escape(data.machine.describe())}")
    if data.command:
        con.print(f"command: {escape(str(data.command))}")
    if data.corecast_version:
        con.print(f"recorded by corecast {data.corecast_version}")
    con.print()
    con.print(terminal.make_table(
        "Columns", ["column", "kind", "unit", "status", "values", "missing", "min", "max"],
        [[c["name"], c["kind"], c["unit"] or "-", c["status"], c["values"], c["missing"], c["min"], c["max"]]
         for c in s["columns"]],
        justify=["left", "left", "left", "left", "right", "right", "right", "right"]))
    if s.get("waits"):
        con.print()
        con.print(terminal.make_table(
            "Waits: while cores stood idle, or overlapping other threads' running (sync shim)",
            ["category", "cores", "wait cycles", "idle part", "overlapping", "idle share"],
            [[w["category"], r["cores"], r["wait_cycles"], r["idle_cycles"], r["overlap_cycles"],
              "-" if r["idle_cycles"] is None or not r["wait_cycles"] else f"{100 * r['idle_cycles'] / r['wait_cycles']:.0f}%"]
             for w in s["waits"] for r in w["per_count"]],
            justify=["left", "right", "right", "right", "right", "right"]))
    con.print()
    con.print("[bold]Sources[/bold]")
    for names, source in source_groups(s["columns"]):
        con.print(f"  {escape(', '.join(names))}: {escape(source)}")
    for name, t in (s.get("tables") or {}).items():
        con.print(f"[bold]side table {escape(name)}[/bold]: {t['rows']} rows"
                  + (f" (`corecast locks {escape(s['file'])}` ranks them)" if name == "locks" else ""))
        for g in t.get("busiest", []):
            last = g["per_cores"][-1] if g["per_cores"] else {}
            share = last.get("wait_share")
            con.print(f"  {escape(g['site'])}: {escape(str(g['call']))}"
                      + ("" if share is None else f": waits {100 * share:.1f}% of thread time at {last['cores']} "
                               + ("core" if last["cores"] == 1 else "cores")))
    for line in note_lines(data.notes or {}):
        con.print(line)


def column_source(c: dict) -> str:
    """A column's source as `info` says it: a column no run gave a value for (an event this
    machine does not support, one denied) is not "measured: ..." -- it says its status and what
    was asked for, as the columns table's status does."""
    src = c.get("source") or "not recorded"
    status = c.get("status") or "ok"
    if status in ("ok", "derived") or c.get("values"):
        return src
    return f"{status}, no value: " + re.sub(r"^(measured|asked for):\s*", "", src)


def source_groups(columns: list[dict]) -> list[tuple[list[str], str]]:
    """Columns with the same source, one line each: sources that differ only by naming their
    own column (as the perf software events do) are written once, "(the column)" in its place."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for c in columns:
        src = column_source(c)
        key = re.sub(rf"(?<![\w]){re.escape(c['name'])}(?![\w])", "(the column)", src)
        groups.setdefault(key, []).append((c["name"], src))
    out = []
    for key, members in groups.items():
        if len(members) > 1:
            out.append(([n for n, _ in members], key))
        else:
            out.append(([members[0][0]], members[0][1]))
    return out


def note_lines(notes: dict) -> list[str]:
    """The notes as lines of text: a table of values as `key: value` pairs, a list one item a
    line -- never a Python dict or list printed raw."""
    out = []
    for k, v in notes.items():
        if isinstance(v, dict):
            out.append(f"[bold]{escape(k)}[/bold]: " + ", ".join(f"{escape(kk)} {escape(_plain(vv))}"
                                                                for kk, vv in v.items()))
        elif isinstance(v, (list, tuple)):
            out.append(f"[bold]{escape(k)}[/bold]:")
            out.extend(f"  - {escape(_plain(item))}" for item in v)
        else:
            out.append(f"[bold]{escape(k)}[/bold]: {escape(_plain(v))}")
    return out


def _plain(v) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, default=str)
    return str(v)
