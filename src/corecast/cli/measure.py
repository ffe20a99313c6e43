"""`corecast measure`: a scaling campaign -- run a program at several core counts, repeatedly,
pinned, and record time, throughput, memory and every stall source into a campaign file.

The runner, the Dataset and the summary (numpy) are imported in `run`, for start-up time:
`measure -h` and a mistyped option never need them. The options of the stall and metric
sources (--throughput, --plugin, --no-shim, --events, and any source registered in
corecast.collect.runsources) come from the sources themselves.
"""
from __future__ import annotations

import argparse
import shlex
import sys

from .. import messages
from ..collect import runsources
from ..errors import UserError
from ..parsing import arg, time_s
from ..report.tables import campaign_rows
from . import add_format, output_format, program
from ._output import print_document

COMMAND = "measure"
HELP = "run a program at several core counts and record time, throughput, memory and stalls"
DESCRIPTION = """\
Run a program at several core counts (pinned to exactly those cores, warm-ups first, then
repetitions interleaved across the counts), and record each run into an SQLite campaign file
as soon as it finishes: wall time, user/system CPU, peak RSS, context switches, throughput
parsed from the output, the sync shim's lock/barrier/condition wait and trylock spin cycles,
run-queue delay, PSI, perf counters where available, and plugin categories.

{cores}, {threads} and {rep} in the command or in --env values are replaced for each run.

examples:
  corecast measure --cores 1,2 -o lock.db -- corecast-lockbench -t {threads}
  corecast measure --cores 1-all --reps 5 --throughput 'events per second:\\s*([0-9.]+)' \\
      -o sb.db -- sysbench cpu --threads={threads} --time=2 run
  corecast measure --resume -o sb.db          # carry on after an interruption
  corecast predict sb.db --cores 16,32,64     # campaign files are Datasets
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cores", default=None, metavar="SPEC",
                   help="core counts: 1,2,4 | all | 1-16 | 1-16:2 | 1-all | pow2 (default: pow2, i.e. 1,2,4,...,all)")
    p.add_argument("--reps", type=int, default=None, help="measured repetitions per core count (default 3)")
    p.add_argument("--warmup", type=int, default=None, help="warm-up runs per core count, not measured (default 1)")
    p.add_argument("--timeout", type=arg(time_s), default=None, metavar="TIME",
                   help="kill a run's whole process group after this long, e.g. 30s, 5min (default: no limit)")
    p.add_argument("--order", default=None, metavar="ORDER",
                   help="which CPUs N cores are: socket (default) | spread | smt-last | a CPU list such as 0,2,4-7")
    p.add_argument("--env", action="append", default=None, metavar="NAME=VALUE",
                   help="environment variable for the program, e.g. OMP_NUM_THREADS={threads} (repeatable)")
    p.add_argument("--threads-per-core", type=int, default=None, metavar="K",
                   help="{threads} = K x {cores} (default 1)")
    for o in runsources.options():
        p.add_argument(o.flag, **o.argparse_kwargs())
    p.add_argument("-o", "--output", default="campaign.db", metavar="CAMPAIGN",
                   help="campaign file to write (default campaign.db); it must not exist unless --resume")
    p.add_argument("--resume", action="store_true",
                   help="continue the campaign in -o: run only what is not recorded yet, with its own settings")
    add_format(p, "core count", json_help="print the summary as JSON instead of a table")
    p.add_argument("program", nargs=argparse.REMAINDER, metavar="-- PROGRAM ARGS",
                   help="the program to measure and its arguments")


def run(args: argparse.Namespace) -> int:
    from ..collect import campaign as api
    from ..collect.runner import Interrupted, Reporter
    from ..dataset import read_campaign
    from ..report.campaign import ProgressReporter, render_summary
    from ..report.documents import campaign_summary
    from ..report.terminal import console

    command = program(args.program)
    options = {k: getattr(args, k) for k in (*api.CORE_OPTIONS, *(o.dest for o in runsources.options()))}
    # -q: no progress bar and no notes (failed runs are still in the summary); -v: a line a run
    quiet, verbose = args.verbosity == messages.QUIET, args.verbosity == messages.VERBOSE
    reporter = Reporter() if quiet else ProgressReporter(verbose=verbose)
    if args.resume:
        given = [f"--{k.replace('_', '-')}" for k, v in options.items() if v is not None]
        if given:
            raise UserError(f"--resume continues with the campaign's own settings; drop {', '.join(given)}")
        setup = api.resume(args.output, command or None, reporter=reporter)
    else:
        if not command:
            raise UserError("no command to measure (put it after --, e.g. corecast measure -- ./prog -t {threads})")
        setup = api.prepare(command, output=args.output, reporter=reporter, **options)
    try:
        records = setup.run()
    except Interrupted:
        n = setup.recorded()
        print(f"corecast measure: interrupted; {n} run(s) are in {args.output}; "
              f"continue with: corecast measure --resume -o {shlex.quote(args.output)}", file=sys.stderr)
        return 130
    finally:
        setup.close()
    ds = read_campaign(args.output)
    if records:
        messages.wrote(args.output, f"{len(ds.cores)} run(s) recorded")
    else:
        # A finished campaign resumed: nothing was run and nothing written (it said "wrote
        # x.db: 6 run(s) recorded" of a file it had not touched).
        messages.note(f"{args.output}: nothing left to run; its {len(ds.cores)} run(s) were already recorded")
    failed = [r for r in records if r.status != "ok"]

    def render() -> None:
        render_summary(ds, console())
        if failed:
            print(failed_line(failed, args.output))

    print_document(output_format(args), lambda: campaign_summary(ds, args.output), render, rows=campaign_rows,
                   indent=1, default=str)
    return 1 if failed else 0


def failed_line(failed: list, output: str) -> str:
    """The line under the summary for the runs that failed in this session. Warm-ups are not
    runs of the data (the summary's "runs ok" and "N run(s) recorded" leave them out), so they
    are counted apart: "4 run(s) failed" of a campaign that recorded 2 contradicted itself."""
    warm = sum(1 for r in failed if getattr(r, "warmup", False))
    measured = len(failed) - warm
    what = f"{measured} run(s)" + (f" and {warm} warm-up run(s)" if warm else "")
    return (f"{what} failed in this session; they are recorded with their exit status "
            f"(see `corecast export {output}`)")
