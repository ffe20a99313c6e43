"""`corecast stat`: count events of a command, a running process or the whole machine."""
from __future__ import annotations

import argparse
import sys

from .. import messages, outputs
from ..collect import procs
from ..collect.events import resolve
from ..collect.stat import (DEFAULT_EVENTS, DEFAULT_NOTE, MIN_INTERVAL, WRITERS, Monitor, Target, parse_metric,
                             parse_virtual)
from ..errors import UserError
from ..parsing import arg, time_s
from ..region import load as load_regions
from . import program

COMMAND = "stat"
HELP = "count performance events per thread or per CPU, sampled over time (PMCTrack-style)"
DESCRIPTION = """\
Count events of a command (`-- CMD ...`), a running process (-p PID) or every CPU (-S),
sampled every -T seconds or every N events (ebs=N), one row per thread per sample. Without -c,
perf stat's default set (task_clock, context_switches, cpu_migrations, page_faults, and cycles,
instr, branches, branch_misses where the PMU has them). The command is found as `measure`
finds it: in PATH, then among corecast's bundled workloads (corecast-lockbench, ...).

  corecast stat -- ./prog 8                                          # the default set

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


#: -T and perf's --interval-print (a bare number in milliseconds there): from MIN_INTERVAL to
#: corecast.parsing's bound on a time (720h); --duration: above 0, the same bound.
_INTERVAL = arg(time_s, noun="interval", low=MIN_INTERVAL)
_INTERVAL_MS = arg(time_s, noun="interval", low=MIN_INTERVAL, unit="ms")
_DURATION = arg(time_s, noun="duration")


#: perf's short options and what corecast stat calls them (PMCTrack's letters are kept).
PERF_LETTERS = {"-e": "-c (or --event)", "-I": "-T (or --interval-print MS)", "-x": "--field-separator SEP",
                "-a": "-S (or --all-cpus)"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--events", "--event", action="append", default=[], metavar="SPEC",
                   help="an event set (repeat for round-robin sets; perf's --event is accepted). Without -c "
                        "and -V, perf stat's default set: " + ", ".join(DEFAULT_EVENTS))
    p.add_argument("-V", "--virtual", action="append", default=[], metavar="VIRT,...",
                   help="virtual counters: runq_delay, run_time, timeslices, ctxsw, ctxsw_vol, ctxsw_invol, "
                        "psi (psi_cpu_some, ...), energy, energy_dram, llc_occupancy, mem_bw, mem_bw_local")
    p.add_argument("-T", "--interval", type=_INTERVAL, default=1.0, metavar="TIME",
                   help=f"sampling interval: seconds, or 100ms, 0.5s (default 1 s, at least {MIN_INTERVAL} s)")
    p.add_argument("--interval-print", type=_INTERVAL_MS, dest="interval", metavar="MS",
                   help="the sampling interval in milliseconds, as perf's --interval-print (or with a unit)")
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
    p.add_argument("--duration", type=_DURATION, metavar="TIME",
                   help="stop after this long: with -p or -S, the end of the monitoring (the process "
                        "runs on); a command still running then gets SIGTERM")
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
    if args.output:
        outputs.check(args.output)          # before anything starts
    default = not args.events and not args.virtual          # perf stat's default set, as perf counts it
    sets = [resolve(s) for s in args.events] if not default else [resolve(",".join(DEFAULT_EVENTS))]
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
        # removed below, or by corecast's sentinel if corecast dies (SIGKILL included)
        region_file = str(procs.temp_file("corecast-regions-", ".jsonl"))
        target = Target.command(cmd, env=dict(os.environ, CORECAST_REGION_OUT=region_file))
    elif args.pid is not None:
        target = Target.attach(args.pid)
    elif args.per_cpu:
        target = Target.system()
    else:
        raise UserError("nothing to monitor: give a command after --, -p PID, or -S")
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
    if default:
        mon.notes.append(DEFAULT_NOTE)
    sink = None
    if args.output:
        # written as it goes (live: a new file made with O_EXCL, renamed only over a regular
        # file; a device or a pipe written in place), named on standard error at the end
        sink = outputs.Output(args.output, what=f"{args.format} report", live=True)
    out = sys.stderr
    rows = None
    try:
        if sink is not None:
            out = sink.open()
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
    except BaseException:
        if rows is not None:
            rows.close()                    # an error here ends the monitoring now: its command is killed
        if sink is not None:
            sink.abort()                    # live: what was written is kept
        raise
    else:
        if sink is not None:
            sink.commit()
    finally:
        if region_file is not None:
            procs.remove(region_file)
    status = target.exit_status
    if status is not None and status != 0 and cmd:
        if status < 0:
            import signal
            try:
                name = signal.Signals(-status).name
            except ValueError:
                name = f"signal {-status}"
            why = " (--duration reached: corecast stopped it)" if mon.ended_by == "duration" else ""
            messages.note(f"'{cmd[0]}' was ended by {name}{why}")
        else:
            messages.note(f"'{cmd[0]}' exited with status {status}")
    if status is not None and cmd:
        # as perf: corecast's own status is the command's (128 + N when a signal N ended it)
        return 128 - status if status < 0 else status
    return 0
