"""`corecast serve`: the web dashboard."""
from __future__ import annotations

import argparse

COMMAND = "serve"
HELP = "a local web dashboard: live stat and meters, campaigns, predictions, USL, replay of traces"
DESCRIPTION = """\
Serve a dashboard on this machine (loopback by default; read-only: it never writes a file):

  Live         a running `corecast stat` (started and stopped from the page, of a command, a
               pid or every CPU, events chosen from this machine's catalogue) as scrolling time
               series per thread or per CPU; and a `corecast meters` blackboard by name
               (default $CORECAST_METERS, else "default"): node/socket/core meters with their
               trigger levels and states, the allowed workers, stale boards said as such
  Campaigns    the runs of a campaign file, updated as `corecast measure` records them
  Predictions  `corecast predict` of a campaign or Dataset: method and target on the page;
               the band, the stall categories and the bottlenecks
  USL          `corecast usl` of any Dataset: the fit, its band and the data checks
  Replay       a recorded `corecast stat --format json -o trace.jsonl` or `corecast meters
               --record meters.csv` with a time slider

Open the address it prints: its ?token= is the server's secret, which the first visit keeps
in a cookie; any request without it (another user's included) is refused (docs/serve.md).

FILES are campaign files, Datasets (CSV/JSON), stat traces and meters recordings, or folders
holding them (looked at again on each visit, so a campaign started later shows up). The page's
numbers are the documents the commands print with --json.

examples:
  corecast serve campaign.db data/usl/
  corecast serve --listen 127.0.0.1:9000 trace.jsonl meters.csv
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="*", metavar="FILE", help="campaign files, Datasets, stat traces, meters recordings, or folders")
    p.add_argument("--listen", default="127.0.0.1:8765", metavar="HOST:PORT",
                   help="address to listen on (default 127.0.0.1:8765; port 0: any free port)")
    p.add_argument("--allow-commands", action="store_true",
                   help="let the page start `stat` of a command even when --listen is not a loopback address")


def run(args: argparse.Namespace) -> int:
    from ..serve import run as serve     # aiohttp loads when serving, not for `corecast -h`
    return serve(args.files, args.listen, allow_commands=args.allow_commands)
