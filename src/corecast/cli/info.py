"""corecast info: what a Dataset or campaign file holds."""
from __future__ import annotations

import json

from .. import dataset as ds_mod
from ..report import documents as D
from ..report import info as R
from ..report import terminal

COMMAND = "info"
HELP = "show what a Dataset or campaign file holds: machine, columns and their sources, runs"


def add_arguments(p) -> None:
    p.add_argument("file", help="Dataset (CSV, JSON) or campaign file")
    p.add_argument("--json", action="store_true", help="print a JSON object")


def run(args) -> int:
    data = ds_mod.load(args.file)
    s = D.dataset_summary(data)
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        R.render_terminal(s, data, terminal.console())
    return 0
