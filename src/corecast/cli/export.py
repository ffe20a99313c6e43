"""corecast export: write any Dataset (CSV, JSON, campaign file) as CSV or JSON."""
from __future__ import annotations

import sys

from .. import dataset as ds_mod
from ..errors import UserError

COMMAND = "export"
HELP = "convert a Dataset or campaign file to CSV or JSON"
DESCRIPTION = """\
Read a Dataset (CSV, JSON, or a campaign file written by `corecast measure`) and write it as
CSV or JSON, with its metadata (machine, command, column sources and units).

examples:
  corecast export campaign.db -o data.csv
  corecast export data.csv --format json > data.json"""


def add_arguments(p) -> None:
    p.add_argument("file", help="Dataset or campaign file")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (.csv or .json); default: standard output")
    p.add_argument("--format", choices=("csv", "json"), help="output format (default: from -o's extension, else csv)")


def run(args) -> int:
    data = ds_mod.load(args.file)
    fmt = args.format
    if fmt is None and args.output:
        ext = args.output.rsplit(".", 1)[-1].lower() if "." in args.output else ""
        if ext not in ("csv", "json"):
            raise UserError(f"{args.output}: cannot tell the format from the extension (use .csv or .json, or --format)")
        fmt = ext
    fmt = fmt or "csv"
    text = data.to_json() if fmt == "json" else data.to_csv()
    if args.output:
        ds_mod._write_atomic(__import__("pathlib").Path(args.output), text)
    else:
        sys.stdout.write(text)
    return 0
