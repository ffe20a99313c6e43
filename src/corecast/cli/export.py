"""corecast export: write any Dataset (CSV, JSON, campaign file) as CSV or JSON.

The Dataset module (numpy) is imported in `run`, for start-up time: `export -h` never needs it.
"""
from __future__ import annotations

from pathlib import Path

from .. import outputs
from ..errors import UserError
from ._output import print_document, write_stdout

COMMAND = "export"
HELP = "convert a Dataset or campaign file to CSV or JSON"
DESCRIPTION = """\
Read a Dataset (CSV, JSON, or a campaign file written by `corecast measure`) and write it:

  csv      a plain CSV (a header, one line a row: pandas.read_csv loads it as it is); the
           metadata (machine, command, column sources and units) goes to FILE.meta.json beside
           it, which corecast reads back with the CSV (--metadata inline puts it in a
           `# corecast:` first line instead; --metadata none leaves it out)
  json     one object: the metadata (with the side tables, such as the per-lock table of a
           campaign recorded with the sync shim) and "rows" (a list of row objects)
  records  the rows alone as a JSON array of objects (pandas.read_json loads it as it is)

examples:
  corecast export campaign.db -o data.csv          # data.csv and data.csv.meta.json
  corecast export data.csv --format records > rows.json
  corecast export campaign.db --table locks -o locks.csv   # the per-lock table"""


def add_arguments(p) -> None:
    p.add_argument("file", help="Dataset or campaign file")
    p.add_argument("-o", "--output", metavar="FILE", help="output file (.csv or .json; a device or a pipe gets CSV); default: standard output")
    p.add_argument("--format", choices=("csv", "json", "records"),
                   help="output format (default: from -o's extension, else csv)")
    p.add_argument("--table", metavar="NAME",
                   help="write a side table instead of the runs: `locks` (the sync shim's per-lock table, one row "
                        "per run, lock and call site, with the run's cores and repetition); csv, json or records")
    p.add_argument("--json", action="store_true", help="as --format json: the metadata and the rows in one object")
    p.add_argument("--metadata", choices=("sidecar", "inline", "none"),
                   help="CSV only: where the metadata goes (default: sidecar with -o, none on standard output)")


def run(args) -> int:
    from .. import dataset as ds_mod

    if args.json and args.format not in (None, "json"):
        raise UserError(f"--json and --format {args.format} ask for two formats: give one")
    kind = outputs.check(args.output) if args.output else None
    data = ds_mod.load(args.file)
    fmt = args.format or ("json" if args.json else None)
    if fmt is None and kind in ("descriptor", "in place"):
        fmt = "csv"                 # a device, a pipe, /dev/stdout: as on standard output
    if fmt is None and args.output:
        ext = args.output.rsplit(".", 1)[-1].lower() if "." in args.output else ""
        if ext not in ("csv", "json"):
            raise UserError(f"{args.output}: cannot tell the format from the extension (use .csv or .json, or --format)")
        fmt = ext
    fmt = fmt or "csv"
    if args.metadata and fmt != "csv":
        raise UserError("--metadata is for CSV output (JSON carries its metadata; records are rows only)")
    out = Path(args.output) if args.output else None
    if args.table is not None:
        if args.metadata:
            raise UserError("--metadata is for the runs' CSV, not a side table (--table)")
        return _side_table(data, args.table, fmt, out)
    if fmt == "csv":
        how = args.metadata or ("sidecar" if kind in ("new", "regular") else "none")
        if how == "sidecar" and out is None:
            raise UserError("--metadata sidecar needs -o FILE (a sidecar lives beside a file)")
        text = data.to_csv(out, metadata=how)
        if out is None:
            write_stdout(text)
        return 0
    text = data.to_json(out) if fmt == "json" else data.to_records(out)
    if out is None:
        write_stdout(text)
    return 0


def _side_table(data, name: str, fmt: str, out: Path | None) -> int:
    if name not in data.tables:
        have = ", ".join(data.tables) or "none"
        raise UserError(f"{data.label}: no side table '{name}' (side tables: {have})")
    rows = data.tables[name]
    print_document(fmt, {"table": name, "rows": rows}, rows=lambda doc: doc["rows"], indent=1, allow_nan=False,
                   output=out, what=f"side table {name}, {len(rows)} rows")
    return 0

