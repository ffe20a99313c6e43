"""corecast info: what a Dataset or campaign file holds.

The Dataset module and the renderers (numpy, rich) are imported in `run`, for start-up time:
`info -h` never needs them.
"""
from __future__ import annotations

from . import add_format, output_format
from ._output import print_document

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
    print_document(output_format(args), s, lambda: R.render_terminal(s, data, terminal.console()),
                   rows=lambda doc: doc["columns"])
    return 0
