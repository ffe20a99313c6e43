"""corecast info: what a Dataset or campaign file holds.

The Dataset module and the renderers (numpy, rich) are imported in `run`, for start-up time:
`info -h` never needs them.
"""
from __future__ import annotations

import json
import sys

from ..report import tables as T
from . import add_format, output_format

COMMAND = "info"
HELP = "show what a Dataset or campaign file holds: machine, columns and their sources, runs"


def add_arguments(p) -> None:
    p.add_argument("file", help="Dataset (CSV, JSON) or campaign file")
    add_format(p, "column", json_help="print a JSON object")


def run(args) -> int:
    from .. import dataset as ds_mod
    from ..report import documents as D
    from ..report import info as R
    from ..report import terminal

    data = ds_mod.load(args.file)
    s = D.dataset_summary(data)
    fmt = output_format(args)
    if fmt in ("csv", "records"):
        sys.stdout.write(T.table_text(s["columns"], fmt))
    elif fmt == "json":
        print(json.dumps(s, indent=2))
    else:
        R.render_terminal(s, data, terminal.console())
    return 0
