"""corecast info: what a Dataset or campaign file holds."""
from __future__ import annotations

import json

import numpy as np

from .. import dataset as ds_mod
from ..report import terminal

COMMAND = "info"
HELP = "show what a Dataset or campaign file holds: machine, columns and their sources, runs"


def add_arguments(p) -> None:
    p.add_argument("file", help="Dataset (CSV, JSON) or campaign file")
    p.add_argument("--json", action="store_true", help="print a JSON object")


def summary(data: ds_mod.Dataset) -> dict:
    cols = []
    for name in data.metrics:
        info = data.columns[name]
        v = data.metrics[name]
        ok = np.isfinite(v)
        cols.append({"name": name, "kind": info.kind, "unit": info.unit, "source": info.source,
                     "status": info.status, "values": int(ok.sum()), "missing": int((~ok).sum()),
                     "min": float(v[ok].min()) if ok.any() else None,
                     "max": float(v[ok].max()) if ok.any() else None})
    cores = [{"cores": int(c) if float(c).is_integer() else float(c), "runs": int((data.cores == c).sum())}
             for c in data.distinct_cores]
    return {"file": data.label, "rows": len(data), "machine": data.machine.to_dict(), "command": data.command,
            "corecast_version": data.corecast_version, "notes": data.notes, "columns": cols, "cores": cores,
            "stall_categories": data.stall_names}


def run(args) -> int:
    data = ds_mod.load(args.file)
    s = summary(data)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    con = terminal.console()
    runs = ", ".join(f"{c['cores']}×{c['runs']}" for c in s["cores"])
    con.print(f"[bold]{s['file']}[/bold]: {s['rows']} runs at {len(s['cores'])} core counts ({runs})")
    con.print(f"machine: {data.machine.describe()}")
    if data.command:
        con.print(f"command: {data.command}")
    if data.corecast_version:
        con.print(f"recorded by corecast {data.corecast_version}")
    con.print()
    con.print(terminal.make_table(
        "Columns", ["column", "kind", "unit", "status", "values", "missing", "min", "max"],
        [[c["name"], c["kind"], c["unit"] or "-", c["status"], c["values"], c["missing"], c["min"], c["max"]]
         for c in s["columns"]],
        justify=["left", "left", "left", "left", "right", "right", "right", "right"]))
    con.print()
    con.print("[bold]Sources[/bold]")
    for c in s["columns"]:
        con.print(f"  {c['name']}: {c['source'] or 'not recorded'}")
    for k, v in (data.notes or {}).items():
        con.print(f"{k}: {v}")
    return 0
