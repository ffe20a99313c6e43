"""`corecast stat`: count events of a command, a running process or the whole machine."""
from __future__ import annotations

import argparse
import math
import sys

from .. import messages
from ..collect.events import resolve
from ..collect.stat import MIN_INTERVAL, WRITERS, Monitor, Target, parse_metric, parse_virtual
from ..errors import UserError
from ..parsing import interval
from ..region import load as load_regions
from . import program

COMMAND = "stat"
HELP = "count performance events per thread or per CPU, sampled over time (PMCTrack-style)"
DESCRIPTION = """\
Count events of a command (`-- CMD ...`), a running process (-p PID) or every CPU (-S),
sampled every -T seconds or every N events (ebs=N), one row per thread per sample.

  corecast stat -c instr,cycles -T 0.5 -- ./prog 8
  corecast stat -c task_clock,context_switches -V runq_delay,psi_cpu_some -- ./prog
  corecast stat -c pmc0,pmc1,pmc3=0x2e,umask3=0x41 -c backend_stalls -m ipc -- ./prog
  corecast stat -c task_clock:ebs=1000000,page_faults -- ./prog     # a sample per ms of CPU
  corecast stat -S -c context_switches -T 1 -- sleep 3                # per CPU (needs permission)

Threads are followed through the kernel's task records: a thread is picked up when it is
created (at the next tick with -T 0.02 or less, see --wake), and its `exit` row is the kernel's
count of its whole life less what its earlier rows reported, so every thread has its rows
however short its life (--threads poll: find them in /proc instead). Child processes get rows
of their own; [Process totals] are the inherited counts. Rows are flushed at most ~0.1 s after
they are measured; SIGINT, SIGTERM and SIGHUP end the run with its last rows and the totals.

Several -c sets rotate round-robin, one set live per interval (the `set` column); a value the
kernel multiplexed is scaled and shown with '~'; '-' means not counted (never 0). Event specs:
mnemonics (instr, cycles, llc_misses, backend_stalls, task_clock, ...), PMCTrack raw form,
perf form cpu/event=..,umask=../, tracepoints sched:sched_switch, libpfm4 names.
See `corecast events`.
"""


def interval_ms(text: str) -> float:
    """perf's --interval-print: milliseconds."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of milliseconds") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive number of milliseconds")
    return v / 1000.0


#: perf's short options and what corecast stat calls them (PMCTrack's letters are kept).
PERF_LETTERS = {"-e": "-c (or --event)", "-I": "-T (or --interval-print MS)", "-x": "--field-separator SEP",
                "-a": "-S (or --all-cpus)"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--events", "--event", action="append", default=[], metavar="SPEC",
                   help="an event set (repeat for round-robin sets; perf's --event is accepted)")
    p.add_argument("-V", "--virtual", action="append", default=[], metavar="VIRT,...",
                   help="virtual counters: runq_delay, run_time, timeslices, ctxsw, ctxsw_vol, ctxsw_invol, "
                        "psi (psi_cpu_some, ...), energy, energy_dram, llc_occupancy, mem_bw, mem_bw_local")
    p.add_argument("-T", "--interval", type=interval, default=1.0, metavar="TIME",
                   help=f"sampling interval: seconds, or 100ms, 0.5s (default 1 s, at least {MIN_INTERVAL} s)")
    p.add_argument("--interval-print", type=interval_ms, dest="interval", metavar="MS",
                   help="the sampling interval in milliseconds, as perf's --interval-print")
    p.add_argument("-S", "--per-cpu", "--all-cpus", action="store_true",
                   help="count per CPU, system-wide (perf's --all-cpus)")
    p.add_argument("-p", "--pid", type=int, help="attach to a running process and all its threads")
    p.add_argument("-A", "--totals", action="store_true", help="print totals only")
    p.add_argument("-m", "--metric", action="append", default=[], metavar="NAME=EXPR",
                   help="derived metric, e.g. ipc=instr/cycles (built-ins: ipc, cpi, mpki, miss_rate, "
                        "branch_miss_rate, stall_ratio, utilization)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write the report to FILE (default: standard error, as perf does, so that it never "
                        "mixes with the measured program's own output)")
    p.add_argument("--format", choices=sorted([*WRITERS, "jsonl"]), default="table",
                   help="table (default), csv, or jsonl: JSON Lines, one object a line ('json' is the same)")
    p.add_argument("-j", "--json", action="store_true",
                   help="as --format jsonl: JSON Lines, a header, one sample a line, a summary (as perf stat -j "
                        "writes one object a line)")
    p.add_argument("--field-separator", metavar="SEP", dest="separator",
                   help="CSV output with this separator (perf's -x/--field-separator)")
    p.add_argument("--threads", choices=["kernel", "poll"], default="kernel", dest="thread_tracking",
                   help="how threads are followed: 'kernel' (default) from the kernel's task records, so "
                        "every thread has exact rows however short its life; 'poll' finds them in /proc "
                        "(no inherited counters: with hardware events, leaves the PMU's counters to the "
                        "per-thread ones)")
    p.add_argument("--wake", choices=["auto", "records", "tick"], default="auto",
                   help="when the monitor wakes between ticks: 'records' at once for each task record (a new "
                        "thread is picked up as it is created) and for the target's end; 'tick' only at the ticks "
                        "(a plain sleep, cheaper: new threads are picked up at the next tick, exit rows stay exact); "
                        "'auto' (default): 'tick' at -T 0.02 or less, else 'records'")
    p.add_argument("--duration", type=interval, metavar="TIME",
                   help="stop after this long (with -p or -S and no command)")
    p.add_argument("--cpu-model", metavar="CPU", help=argparse.SUPPRESS)
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="command and arguments")
    _perf_hints(p)


class _PerfLetter(argparse.Action):
    """A perf letter that means something else here: refused with what corecast calls it."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        parser.error(f"{option_string} is perf's spelling; did you mean {PERF_LETTERS[option_string]}?")


def _perf_hints(p: argparse.ArgumentParser) -> None:
    for letter in PERF_LETTERS:
        p.add_argument(letter, action=_PerfLetter, nargs="?", help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    cmd = program(args.argv)
    if args.interval < MIN_INTERVAL:
        raise UserError(f"-T {args.interval}: the interval must be at least {MIN_INTERVAL} s")
    sets = [resolve(s) for s in args.events]
    for i, specs in enumerate(sets):
        for e in specs:
            messages.detail(f"set {i}: {e.translate()}")
    virtual = parse_virtual(args.virtual)
    metrics = [parse_metric(m) for m in args.metric]
    if cmd and args.pid is not None:
        raise UserError("give either -p PID or a command, not both")
    region_file = None
    if cmd:
        import os
        import tempfile
        fd, region_file = tempfile.mkstemp(prefix="corecast-regions-", suffix=".jsonl")
        os.close(fd)
        target = Target.command(cmd, env=dict(os.environ, CORECAST_REGION_OUT=region_file))
    elif args.pid is not None:
        target = Target.attach(args.pid)
    elif args.per_cpu:
        target = Target.system()
    else:
        raise UserError("nothing to monitor: give a command after --, -p PID, or -S")
    if args.duration is not None and args.duration <= 0:
        raise UserError("--duration must be positive")
    if args.json:
        if args.format not in ("table", "json", "jsonl"):
            raise UserError(f"--json and --format {args.format} ask for two formats: give one")
        args.format = "jsonl"
    fmt = "json" if args.format == "jsonl" else args.format
    if args.separator is not None:
        if args.format not in ("table", "csv"):
            raise UserError("--field-separator is for CSV output")
        if len(args.separator) != 1:
            raise UserError(f"--field-separator {args.separator!r}: one character")
        fmt = "csv"
    mon = Monitor(sets, target, interval=args.interval, virtual=virtual, per_cpu=args.per_cpu,
                  totals_only=args.totals, metrics=metrics, max_duration=args.duration,
                  thread_tracking=args.thread_tracking, wake=args.wake)
    if args.output:
        try:
            out = open(args.output, "w")
        except OSError as err:
            raise UserError(f"-o {args.output}: cannot write: {err.strerror}") from None
    else:
        out = sys.stderr
    try:
        writer = WRITERS[fmt](out, mon)
        if args.separator is not None:
            writer.separator = args.separator
        # rows are flushed before the monitor sleeps (at most ~0.1 s after they are measured);
        # SIGINT, SIGTERM and SIGHUP end the run with its last rows and the totals
        rows = mon.run(idle=writer.flush_due, handle_signals=True)
        first = True
        try:
            for row in rows:
                if first:
                    writer.header()
                    first = False
                writer.row(row)
        except KeyboardInterrupt:
            if "interrupted" not in mon.notes:
                mon.notes.append("interrupted")
        if first:
            writer.header()
        writer.summary()
        if region_file is not None:
            writer.regions(load_regions(region_file))
    except UserError as err:
        if args.output:
            out.flush()
        raise err
    finally:
        if args.output:
            out.close()
        if region_file is not None:
            import os
            try:
                os.unlink(region_file)
            except OSError:
                pass
    status = target.exit_status
    if status is not None and status != 0 and cmd:
        if status < 0:
            import signal
            try:
                name = signal.Signals(-status).name
            except ValueError:
                name = f"signal {-status}"
            messages.note(f"'{cmd[0]}' was ended by {name}")
        else:
            messages.note(f"'{cmd[0]}' exited with status {status}")
    if args.output:
        messages.wrote(args.output, f"{args.format} report")
    if status is not None and cmd:
        # as perf: corecast's own status is the command's (128 + N when a signal N ended it)
        return 128 - status if status < 0 else status
    return 0
