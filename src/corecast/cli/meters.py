"""corecast meters: the contention-meter daemon, and what reads its blackboard and recordings.

The daemon, the blackboard and the renderers (numpy, rich) are imported in `run`, for start-up
time: `meters -h` and a mistyped option never need them.
"""
from __future__ import annotations

import argparse
import sys

from .. import messages, outputs
from ..parsing import interval
from . import add_format, output_format
from ._output import print_document

COMMAND = "meters"
HELP = "contention meters of this machine in a shared-memory blackboard, with triggers, advice and Prometheus"
DESCRIPTION = """\
A foreground daemon that samples contention meters (CPU busy and steal, run-queue delay, PSI,
context switches, migrations, page faults; CPI, cache miss ratios and memory bandwidth where the
PMU allows; a watched process's threads) every --interval, keeps each one's current value and
its average, minimum and maximum over --window per node, socket and core, and publishes them in
the POSIX shared-memory blackboard /dev/shm/corecast-NAME (torn-read-safe; read it with
corecast_meters.h, corecast.meters.Board, `corecast meters show`). Triggers (--triggers TOML)
go HIGH and LOW with hysteresis and dwell, log, run commands and wake runtimes; the concurrency
advice allowed_workers follows them. --listen serves /metrics (Prometheus) and /meters.json.

examples:
  corecast meters --interval 1ms --window 100ms
  corecast meters --triggers triggers.toml --listen 127.0.0.1:9464 --record meters.csv
  corecast meters --pid 1234 --meters software,process --duration 60
  corecast meters show                         # the live board
  corecast meters list                         # the meters this machine gives, and why not the others
  corecast meters replay meters.csv --plot meters.png"""


def _pid(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a process id") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a process id")
    return v


def _mode(text: str) -> int:
    try:
        v = int(text, 8)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an octal file mode such as 0660") from None
    if not 0 <= v <= 0o777:
        raise argparse.ArgumentTypeError(f"'{text}' is not a file mode (0 to 0777)")
    return v


def add_arguments(p) -> None:
    p.add_argument("--interval", type=interval, default=0.01, metavar="TIME",
                   help="sampling interval, 1ms to 1s (default 10ms)")
    p.add_argument("--window", type=interval, default=0.1, metavar="TIME",
                   help="window of each meter's average, minimum and maximum (default 100ms)")
    p.add_argument("--meters", metavar="LIST", help="meters to keep: names, groups (software, hardware, probe, process) "
                   "or all (default: all; `corecast meters list` names them)")
    p.add_argument("--triggers", metavar="FILE", help="trigger file (TOML, see docs/meters.md)")
    p.add_argument("--blackboard", default=None, metavar="NAME",
                   help="the blackboard's name: /dev/shm/corecast-NAME (default: $CORECAST_METERS or 'default')")
    p.add_argument("--listen", metavar="[HOST:]PORT", help="serve /metrics and /meters.json (host 127.0.0.1 "
                   "unless given)")
    p.add_argument("--record", metavar="FILE", help="write the meter series as a Dataset (.csv or .json)")
    p.add_argument("--duration", type=interval, metavar="TIME", help="stop after this long (default: until "
                   "SIGINT/SIGTERM)")
    p.add_argument("--pid", type=_pid, help="also watch this process and its threads")
    p.add_argument("--max-threads", type=int, default=64, metavar="N",
                   help="thread slots for --pid (default 64)")
    p.add_argument("--app-mode", type=_mode, default=0o660, metavar="MODE",
                   help="file mode of the application area (default 0660; 0666 lets any user publish)")
    p.add_argument("--memory-profile", metavar="FILE", help="the idle memory latency for the memory-latency "
                   "probe: a `corecast chase --profile` or `corecast calibrate` file (default: measured at start)")
    p.add_argument("--probe-cpu", type=int, metavar="CPU", help="the CPU the probe's pointer chase runs on "
                   "(default: the last one)")
    p.add_argument("--probe-period", type=interval, default=1.0, metavar="TIME",
                   help="time between the probe's 2 ms bursts (default 1s)")
    sub = p.add_subparsers(dest="action", metavar="ACTION")
    s = sub.add_parser("show", help="print the live blackboard")
    s.add_argument("--blackboard", dest="show_board", default=None, metavar="NAME", help="which blackboard")
    s.add_argument("--json", action="store_true", help="print /meters.json's document")
    s = sub.add_parser("list", help="the meters this machine gives, and why not the others")
    s.add_argument("--pid", dest="list_pid", type=_pid, metavar="PID", help="with the meters of a watched process")
    s.add_argument("--meters", dest="list_meters", metavar="LIST", help="only these meters or groups")
    add_format(s, "meter and scope", json_help="print the meters as JSON (each meter and scope, its status and source)")
    s = sub.add_parser("replay", help="print and plot a recording (--record) offline")
    s.add_argument("file", help="a recording (.csv or .json)")
    s.add_argument("--plot", metavar="FILE", help="plot the series (.png, .svg or .pdf)")
    s.add_argument("--meters", dest="replay_meters", metavar="LIST", help="only these meters")
    s.add_argument("--scope", metavar="LIST", help="only these scopes (node, socket0, core1, ...)")
    s.add_argument("--json", dest="replay_json", action="store_true",
                   help="print the statistics and trigger changes as JSON (what `corecast serve` shows)")


def run(args) -> int:
    from ..meters import Board
    from ..meters import daemon as D
    from ..meters import record
    from ..meters.exporter import to_json
    from ..report import meters as R
    from ..report import plots, terminal

    action = getattr(args, "action", None)
    if action == "show":
        with Board.open(args.show_board if args.show_board is not None else args.blackboard) as b:
            snap = b.snapshot()
        print_document("json" if args.json else "table", lambda: to_json(snap),
                       lambda: R.show(snap, terminal.console()), indent=1, allow_nan=False)
        return 0
    if action == "list":
        from ..report.tables import meters_list_rows
        plan = D.meter_plan(args.meters if args.list_meters is None else args.list_meters, args.list_pid or args.pid)
        print_document(output_format(args), lambda: R.listing_doc(plan), lambda: R.listing(plan, terminal.console()),
                       rows=meters_list_rows, indent=1, allow_nan=False)
        return 0
    if action == "replay":
        if args.plot:
            plots.check_plot_path(args.plot)
        only = [m.strip() for m in args.replay_meters.split(",")] if args.replay_meters else None
        scopes = [s.strip() for s in args.scope.split(",")] if args.scope else None
        rec = record.read(args.file, only, scopes)
        print_document("json" if args.replay_json else "table", lambda: R.replay_doc(rec),
                       lambda: R.replay(rec, terminal.console()), indent=1, allow_nan=False)
        if args.plot:
            fig = R.replay_figure(rec)
            if fig.corecast_left_out:
                messages.note(f"{args.plot}: no panel for {', '.join(fig.corecast_left_out)}: zero or missing "
                              "throughout the recording")
            plots.save(fig, args.plot)
            plots.pyplot().close(fig)
        return 0
    if args.record:
        outputs.check(args.record)          # before the daemon starts, not when it records
    opts = D.Options(interval_s=args.interval, window_s=args.window, meters=args.meters, triggers=args.triggers,
                     blackboard=D.B.default_name(args.blackboard), listen=args.listen, record=args.record,
                     duration_s=args.duration, pid=args.pid, max_threads=args.max_threads, app_mode=args.app_mode,
                     probe_cpu=args.probe_cpu, probe_period_s=args.probe_period, memory_profile=args.memory_profile)
    daemon = D.Daemon(opts, log=sys.stderr)
    return daemon.run()
