"""`corecast sim`: trace-driven cache, TLB, branch and issue simulation.

Each action imports the part of corecast.sim it runs, for start-up time: numpy, rich and the
native simulator load only for the actions that need them (`sim machines` needs none).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Iterable

from .. import messages, outputs
from ..errors import UserError
from ._args import route_actions
from ..report.plots import check_plot_path, save
from ..report.sim import render_machine, render_machines, render_result
from ..report.tables import machines_rows, mrc_rows, sim_rows
from ..parsing import arg, count, fraction, fmt_size, seed, size_bytes, time_s
from ..sim.machine import bundled, load_machine, parse_size
from . import _Parser, add_format, add_verbosity, output_format, program
from ._output import print_document

COMMAND = "sim"
HELP = "simulate a memory trace on a machine description: MPKI, TLB, branch, coherence, CPI"
DESCRIPTION = """\
Simulate a trace on a machine's caches, TLBs, branch predictor and issue logic.

  corecast sim TRACE --machine M [--cores N] [--json]    simulate a trace
  corecast sim --online --machine M [--cores N] -- CMD   simulate CMD as it runs (QEMU plugin,
                                                         no trace file; --save-trace to keep one)
  corecast sim capture -o TRACE [--marker SYM] -- CMD   record CMD (QEMU plugin, or lackey)
  corecast sim mrc TRACE [--sizes LIST] [--assoc N]      miss-rate curves in one pass
  corecast sim mrc --online [...] -- CMD                 the same, of CMD as it runs
  corecast sim mrc-online [--ways LIST] -- CMD          LLC occupancy and misses by cache ways
                                                         (resctrl: Intel CAT/CMT, AMD PQoS)
  corecast sim convert INPUT -o TRACE [--from lackey|din|csv]
  corecast sim gen KIND -o TRACE [...]                   synthetic traces (stream, random,
                                                         pingpong, transactions, chains)
  corecast sim machines [NAME]                           bundled machine descriptions

Run `corecast sim capture -h` (and so on) for each action's options. TRACE is a corecast
trace file, or lackey/din/CSV text (converted on the fly). See docs/sim.md.
"""

ACTIONS = ("capture", "convert", "gen", "machines", "mrc", "mrc-online", "online")
ONLINE = "--online"          # `sim --online ... -- CMD`: the action `online`, wherever the flag is
MAX_GEN_RECORDS = 1 << 30     # records `sim gen` writes: a 16GiB trace
#: Each action's one line (its man page's NAME, its description in shell completion).
ACTION_HELP = {
    "capture": "record a program's instruction and memory trace (QEMU plugin or valgrind lackey)",
    "convert": "convert lackey, Dinero or CSV text into a corecast trace",
    "gen": "write a synthetic trace with known behaviour",
    "machines": "list the bundled machine descriptions, or show one",
    "mrc": "miss-rate curves of a trace in one pass (LRU stack distances, SHARDS)",
    "mrc-online": "a program's LLC occupancy and misses by cache ways (resctrl)",
    "online": "simulate a program as it runs (QEMU plugin, shared-memory ring, no trace file)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("trace", metavar="TRACE", help="trace file (or an action: "
                        + ", ".join(ACTIONS) + ")")
    parser.add_argument("--machine", "-m", metavar="M",
                        help="bundled machine name or TOML file (see `corecast sim machines`)")
    parser.add_argument("--cores", type=int, default=1, metavar="N",
                        help="simulated cores (default 1)")
    add_format(parser, "cache and TLB", json_help="print the result as JSON")
    parser.add_argument("-o", "--output", metavar="FILE", help="also write the JSON result here")
    parser.add_argument("--split", default="auto",
                        choices=["auto", "threads", "transactions", "chunks"],
                        help="how the trace is spread over cores (default auto: threads if "
                             "there are several, else transactions if marked, else chunks)")
    parser.add_argument("--chunk", type=int, default=100_000, metavar="INSTR",
                        help="instructions per chunk with --split chunks (default 100000)")
    parser.add_argument("--warmup", type=int, default=0, metavar="INSTR",
                        help="instructions simulated before counting starts")
    parser.add_argument("--stack", metavar="LO-HI",
                        help="stack address range (hex) to hash per core when splitting; "
                             "default: guessed from the trace")
    parser.add_argument("--no-stack-hash", action="store_true",
                        help="do not give each core its own copy of the stack when splitting")
    parser.add_argument("--straddle", choices=["line", "access"], default="line",
                        help="a line-straddling miss sends the missing line (line, default) or "
                             "the whole access (access, as cachegrind) to the next level")
    parser.add_argument("--no-tlb", action="store_true", help="leave the TLBs out")
    parser.add_argument("--seed", type=arg(seed), default=1, help="seed of random replacement")

    route_actions(parser, _sub_parsers(parser.prog), ACTION_HELP)
    routed = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):  # type: ignore[no-untyped-def]
        # `--online` anywhere before the program's `--` makes it the online action
        args = list(sys.argv[1:] if args is None else args)
        head = args[:args.index("--")] if "--" in args else args
        if ONLINE in head and (not args or args[0] not in ACTIONS):
            args.remove(ONLINE)
            args.insert(0, "online")
        if args and args[0] == "mrc" and "--" in args:     # `sim mrc --online [...] -- PROGRAM [ARGS]`
            i = args.index("--")
            ns, extra = routed(args[:i], namespace)
            ns.program = args[i + 1:]
            return ns, extra
        return routed(args, namespace)

    parser.parse_known_args = parse_known_args  # type: ignore[method-assign]


def _sub_parsers(prog: str) -> dict[str, argparse.ArgumentParser]:
    fmt = argparse.RawDescriptionHelpFormatter
    cap = _Parser(prog=f"{prog} capture", formatter_class=fmt,
                  description="Record a program's instruction and memory trace (QEMU user mode "
                              "with corecast's plugin where qemu-x86_64 is installed, else valgrind "
                              "lackey), add branch outcomes and register dependencies from its "
                              "disassembly (objdump), and write a corecast trace.")
    cap.add_argument("-o", "--output", required=True, metavar="TRACE", help="trace file to write")
    cap.add_argument("--backend", choices=["auto", "qemu", "lackey"], default="auto",
                     help="how to record: qemu (fast), lackey (valgrind), auto (qemu when present)")
    cap.add_argument("--marker", action="append", default=[], metavar="SYM|0xADDR",
                     help="a function or address whose execution starts a transaction "
                          "(repeatable)")
    cap.add_argument("--no-annotate", action="store_true",
                     help="skip the disassembly pass (no branch or uop records)")
    cap.add_argument("program", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]",
                     help="the program to run")

    conv = _Parser(prog=f"{prog} convert", formatter_class=fmt,
                   description="Convert lackey --trace-mem text, Dinero din text or CSV "
                               "(tid,kind,addr,size[,taken,target]) into a corecast trace.")
    conv.add_argument("input", metavar="INPUT")
    conv.add_argument("-o", "--output", required=True, metavar="TRACE")
    conv.add_argument("--from", dest="fmt", default="auto", choices=["auto", "lackey", "din", "csv"])
    conv.add_argument("--marker", action="append", default=[], metavar="0xADDR",
                      help="instruction address that starts a transaction (lackey input)")
    conv.add_argument("--to-csv", action="store_true",
                      help="write CSV instead (INPUT may then be a corecast trace)")

    gen = _Parser(prog=f"{prog} gen", formatter_class=fmt,
                  description="Write a synthetic trace with known behaviour.")
    gen.add_argument("kind", choices=["stream", "random", "pingpong", "transactions", "chains"])
    gen.add_argument("-o", "--output", required=True, metavar="TRACE")
    gen.add_argument("-n", type=arg(count), default=100_000,
                     help=f"accesses, rounds, transactions or instructions (the trace at most {MAX_GEN_RECORDS:,} records)")
    gen.add_argument("--stride", type=arg(size_bytes), default=8, help="stream: bytes between accesses")
    gen.add_argument("--working-set", type=arg(size_bytes), default="1MiB", help="random: bytes touched")
    gen.add_argument("--write-fraction", type=arg(fraction, one=True), default=0.0, help="random: share of stores")
    gen.add_argument("--threads", type=arg(count), default=2, help="pingpong: threads")
    gen.add_argument("--pattern", choices=["write", "read"], default="write",
                     help="pingpong: the other threads write or read the line")
    gen.add_argument("--false-sharing", action="store_true",
                     help="pingpong: each thread its own word of the line")
    gen.add_argument("--width", type=arg(count), default=1,
                     help="chains: independent chains, 1 to 255 (a register each)")
    gen.add_argument("--seed", type=arg(seed), default=1)

    mach = _Parser(prog=f"{prog} machines", formatter_class=fmt,
                   description="List the bundled machine descriptions, or show one.")
    mach.add_argument("name", nargs="?", help="machine name or TOML file to show")
    add_format(mach, "machine (without NAME) or cache and TLB of the machine NAME",
               json_help="print the machines (or the machine NAME) as JSON")
    mrc = _Parser(prog=f"{prog} mrc", formatter_class=fmt,
                  description="Miss-rate curves of a trace in one pass: exact LRU stack distances "
                              "(every fully associative size at once), SHARDS sampling for large "
                              "traces, set-associative points beside them, per-thread curves, the "
                              "knee and the working sets. See docs/sim.md.")
    mrc.add_argument("trace", metavar="TRACE", nargs="?", help="trace file (or, with --online, the program)")
    mrc.add_argument("--online", action="store_true",
                     help="run the program after -- under the QEMU plugin and build the curves as it runs "
                          "(no trace file)")
    mrc.add_argument("--sizes", default="auto", metavar="LIST|auto",
                     help="cache sizes, e.g. 32KiB,1MiB,32MiB (default: powers of two up to the footprint)")
    mrc.add_argument("--line", type=arg(size_bytes), default=64, help="line size in bytes (default 64)")
    mrc.add_argument("--assoc", default="full", metavar="full|N",
                     help="also simulate N-way LRU caches at the sizes (default: full only)")
    mrc.add_argument("--sample", type=float, default=1.0, metavar="R",
                     help="SHARDS sampling rate in (0, 1] (default 1: exact)")
    mrc.add_argument("--sample-max", type=arg(count), default=None, metavar="N",
                     help="fixed-size SHARDS: track at most N lines, the rate falling from --sample "
                          "as the footprint asks (bounded memory; e.g. 8192)")
    mrc.add_argument("--accesses", choices=["all", "data", "instr"], default="all",
                     help="which accesses make the curve (default all: a unified cache)")
    mrc.add_argument("--count", choices=["all", "exposed"], default="all",
                     help="which accesses' misses are counted: all (default), or those a core waits "
                          "for (fetches, loads, read-modify-writes; stores still move lines), as the "
                          "CPI stack's events count them: the curve `throughput --mrc` takes")
    mrc.add_argument("--per-thread", action="store_true", help="a curve per thread beside the shared one")
    add_format(mrc, "curve and cache size", json_help="print the result as JSON")
    mrc.add_argument("--plot", metavar="FILE", help="draw the curve (PNG, SVG or PDF)")
    mrc.add_argument("-o", "--output", metavar="DATASET", help="write the curve as a Dataset (CSV or JSON)")
    mrc.set_defaults(program=[])          # with --online: what follows `--` (see add_arguments)
    online = _Parser(prog=f"{prog} mrc-online", formatter_class=fmt,
                     description="Run a program once per number of last-level cache ways it may fill "
                                 "(resctrl cache allocation: Intel CAT, AMD PQoS), measuring its LLC "
                                 "occupancy (CMT), memory traffic (MBM) and, with a PMU, its LLC misses: "
                                 "its miss curve on this machine's cache. Needs root and a CPU whose "
                                 "resctrl is mounted; elsewhere it says why. See docs/sim.md.")
    online.add_argument("--ways", default="all", metavar="LIST|all",
                        help="way counts to run with, e.g. 1,2,4,8 or 2-6 (default all)")
    online.add_argument("--interval", type=arg(time_s, noun="interval"), default=0.1, metavar="TIME",
                        help="time between occupancy readings, e.g. 100ms (default 0.1 s)")
    online.add_argument("--resctrl", default="/sys/fs/resctrl", metavar="DIR",
                        help="where resctrl is mounted (default /sys/fs/resctrl)")
    online.add_argument("--json", action="store_true", help="print the result as JSON")
    online.add_argument("--plot", metavar="FILE", help="draw the curve (PNG, SVG or PDF)")
    online.add_argument("-o", "--output", metavar="DATASET", help="write the points as a Dataset")
    online.add_argument("program", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]",
                        help="the program to run")
    onl = _Parser(prog=f"{prog} --online", formatter_class=fmt,     # (also `sim online`)
                  description="Simulate a program as it runs: QEMU user mode with corecast's plugin hands its "
                              "records to the simulator through a shared-memory ring (no trace file), decoded as "
                              "they come (objdump) as `sim capture` decodes them. The counts are those of "
                              "`sim capture` then `sim TRACE` of the same run (--save-trace writes that trace "
                              "too). The threads of the program are spread over the cores (--split threads). "
                              "See docs/sim.md.")
    onl.add_argument("--machine", "-m", metavar="M",
                     help="bundled machine name or TOML file (see `corecast sim machines`)")
    onl.add_argument("--cores", type=int, default=1, metavar="N", help="simulated cores (default 1)")
    add_format(onl, "cache and TLB", json_help="print the result as JSON")
    onl.add_argument("-o", "--output", metavar="FILE", help="also write the JSON result here")
    onl.add_argument("--save-trace", metavar="TRACE", help="also write the trace simulated (compressed)")
    onl.add_argument("--split", default="threads", choices=["auto", "threads"],
                     help="how the records are spread over cores: by thread (the transactions and chunks "
                          "splits need the whole trace first: capture it, then `sim TRACE`)")
    onl.add_argument("--warmup", type=int, default=0, metavar="INSTR",
                     help="instructions simulated before counting starts")
    onl.add_argument("--straddle", choices=["line", "access"], default="line",
                     help="a line-straddling miss sends the missing line (line, default) or the whole access "
                          "(access, as cachegrind) to the next level")
    onl.add_argument("--no-tlb", action="store_true", help="leave the TLBs out")
    onl.add_argument("--seed", type=arg(seed), default=1, help="seed of random replacement")
    onl.add_argument("--marker", action="append", default=[], metavar="SYM|0xADDR",
                     help="a function or address whose execution starts a transaction (repeatable)")
    onl.add_argument("--no-annotate", action="store_true",
                     help="no decoding (no branch or uop records: caches and TLBs only)")
    onl.add_argument("program", nargs=argparse.REMAINDER, metavar="-- CMD [ARGS]", help="the program to run")
    subs = {"capture": cap, "convert": conv, "gen": gen, "machines": mach, "mrc": mrc, "mrc-online": online,
            "online": onl}
    for sub in subs.values():
        add_verbosity(sub)
    return subs


# ----------------------------------------------------------------------------------------

def _numpy_one_blas_thread() -> None:
    """Import numpy with OpenBLAS told to start no threads of its own. Its threads spin for a
    tenth of a second after they start, waiting for work that never comes here (the simulator
    and the trace code are C and numpy without BLAS): 0.11 s of CPU a process on the 2-vCPU VM,
    a tenth of cachegrind's whole time on sort of 100,000 lines, paid twice by `sim capture`
    then `sim TRACE`. The variable is put back at once, so the programs corecast runs never see
    it."""
    if "numpy" in sys.modules:
        return
    import os
    saved = os.environ.get("OPENBLAS_NUM_THREADS")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        if saved is None:
            del os.environ["OPENBLAS_NUM_THREADS"]
        else:
            os.environ["OPENBLAS_NUM_THREADS"] = saved


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "action", None)
    if action != "machines":
        _numpy_one_blas_thread()
    if action == "capture":
        return _capture(args)
    if action == "convert":
        return _convert(args)
    if action == "gen":
        return _gen(args)
    if action == "machines":
        return _machines(args)
    if action == "mrc":
        return _mrc(args)
    if action == "mrc-online":
        return _mrc_online(args)
    if action == "online":
        return _simulate_online(args)
    return _simulate(args)


def _parse_stack(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        lo, hi = (int(x, 16) for x in text.split("-", 1))
    except ValueError:
        raise UserError(f"--stack {text}: give LO-HI in hex, e.g. 7ffd0000-7fff0000") from None
    if hi <= lo:
        raise UserError(f"--stack {text}: HI must be above LO")
    return lo, hi


def _simulate(args: argparse.Namespace) -> int:
    from ..sim.engine import SimOptions, simulate
    from ..sim.trace import load

    if not args.machine:
        raise UserError("--machine is required (a bundled name such as penryn-l5420, or a TOML "
                        "file; `corecast sim machines` lists them)")
    if args.cores < 1:
        raise UserError(f"--cores {args.cores}: must be at least 1")
    machine = load_machine(args.machine)
    if args.output:
        outputs.check(args.output)          # before the work, not after it
    trace = load(args.trace)
    if args.chunk < 1:
        raise UserError(f"--chunk {args.chunk}: at least 1 instruction")
    if args.warmup < 0:
        raise UserError(f"--warmup {args.warmup}: 0 or more instructions")
    opts = SimOptions(split=args.split, chunk_instructions=args.chunk,
                      stack=_parse_stack(args.stack),
                      stack_hash=False if args.no_stack_hash else None,
                      warmup_instructions=args.warmup, seed=args.seed,
                      straddle_all=args.straddle == "access", tlb=not args.no_tlb)
    messages.detail(f"read {args.trace}: {len(trace):,} records; machine {machine.name}")
    with messages.Progress("simulating", total=len(trace), unit="records") as bar:
        res = simulate(trace, machine, args.cores, opts, chunk=1 << 18, progress=bar.update)
    return _print_result(args, res, machine)


def _simulate_online(args: argparse.Namespace) -> int:
    from ..sim.capture import qemu_trace_meta
    from ..sim.engine import SimOptions, Simulator
    from ..sim.online import OnlineRun
    from ..sim.trace import TraceWriter

    cmd = program(args.program, "no program given: corecast sim --online --machine M [--cores N] -- PROGRAM [ARGS]")
    if not args.machine:
        raise UserError("--machine is required (a bundled name such as penryn-l5420, or a TOML "
                        "file; `corecast sim machines` lists them)")
    if args.cores < 1:
        raise UserError(f"--cores {args.cores}: must be at least 1")
    if args.warmup < 0:
        raise UserError(f"--warmup {args.warmup}: 0 or more instructions")
    machine = load_machine(args.machine)
    for path in (args.output, args.save_trace):
        if path:
            outputs.check(path)          # before the work, not after it
    opts = SimOptions(split="threads", warmup_instructions=args.warmup, seed=args.seed,
                      straddle_all=args.straddle == "access", tlb=not args.no_tlb)
    sim = Simulator(machine, args.cores, opts, "threads")
    writer = TraceWriter(args.save_trace, {"source": "qemu", "command": cmd}) if args.save_trace else None
    try:
        # the program's own output goes to standard error when standard output is the result's
        quiet_out = sys.stderr.fileno() if output_format(args) != "table" else None
        with OnlineRun(cmd, annotate=not args.no_annotate, markers=args.marker, stdout=quiet_out) as run, \
                messages.Progress("simulating", unit="instructions") as bar:
            run.progress = lambda instructions, records: bar.update(instructions)
            for recs in run.records():
                sim.feed(recs)
                if writer is not None:
                    writer.write(recs)
        info = run.info
        if args.warmup and not sim.stats().warm:
            raise UserError(f"--warmup {args.warmup}: the program ran only {int(sim.stats().instructions):,} "
                            "instructions")
        meta = {"source": "qemu (online)", "threads": info["threads"]}
        res = sim.result(meta, None)
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        sim.close()
    if writer is not None:
        writer.close(qemu_trace_meta(info))
    for w in info["warnings"]:
        messages.warning(w)
    return _print_result(args, res, machine)


def _print_result(args, res, machine) -> int:
    """A simulation's result: to -o as JSON, then on standard output in the format asked."""
    if args.output:
        print_document("json", res.to_dict, output=args.output, what="the result as JSON")
    print_document(output_format(args), res.to_dict, lambda: render_result(res, machine), rows=sim_rows)
    return 0


def _bytes(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


#: `sim capture` says when its trace passes this size, and again at each doubling.
LARGE_TRACE_BYTES = 1e9


def _capture(args: argparse.Namespace) -> int:
    import time

    from ..sim.capture import capture
    from ..sim.native import RECORD_DTYPE

    cmd = program(args.program)
    # The program writes to the same terminal: the capture's progress is a whole line now and
    # then, never a line redrawn in place (the program's output would land in it).
    bar = messages.Progress("capturing", unit="records", lines=True)
    dec = messages.Progress("decoding", unit="records")
    big = [LARGE_TRACE_BYTES]

    def capturing(instructions: int, records: int) -> None:
        size = records * RECORD_DTYPE.itemsize
        while size >= big[0]:
            rate = size / max(time.monotonic() - bar.start, 1e-3)
            messages.note(f"the trace has passed {_bytes(big[0])} of records ({_bytes(rate)}/s so far; {instructions:,} "
                          f"instructions); Ctrl-C stops the capture")
            big[0] *= 2
        bar.update(records, f"{instructions:,} instructions, {_bytes(size)} written")

    def decoding(done: int, total: int) -> None:     # the disassembly pass, after the run
        if dec.total is None:
            bar.close()
            dec.begin(total)
        dec.update(done)

    with bar, dec:                    # the trace is named on standard error as it is closed
        info = capture(cmd, args.output, markers=args.marker, annotate=not args.no_annotate,
                       backend=args.backend, progress=capturing, decoding=decoding)
    for name, addr in info.markers.items():
        if addr is not None:
            messages.note(f"marker {name} at {addr:#x}")
    for w in info.warnings:
        messages.warning(w)
    return 0


def _mrc(args: argparse.Namespace) -> int:
    from ..report import mrc as R
    from ..report.terminal import console
    from ..sim import mrc
    from ..sim.trace import load

    sizes = None if args.sizes.strip().lower() == "auto" else [
        parse_size(s, "--sizes") for s in args.sizes.split(",") if s.strip()]
    assoc = None
    if args.assoc.strip().lower() != "full":
        try:
            assoc = int(args.assoc)
        except ValueError:
            raise UserError(f"--assoc {args.assoc}: give full or a number of ways") from None
    if args.plot:
        check_plot_path(args.plot)
    if args.output:
        outputs.check(args.output)
    kw = dict(sizes=sizes, line=args.line, accesses=args.accesses, rate=args.sample, assoc=assoc,
              per_thread=args.per_thread, count=args.count, sample_max=args.sample_max)
    if args.online:
        from ..sim.online import OnlineRun
        cmd = program([*([args.trace] if args.trace else []), *args.program],
                      "no program given: corecast sim mrc --online [...] -- PROGRAM [ARGS]")
        quiet_out = sys.stderr.fileno() if output_format(args) != "table" else None
        with OnlineRun(cmd, stdout=quiet_out) as run, \
                messages.Progress("stack distances", unit="instructions") as bar:
            run.progress = lambda instructions, records: bar.update(instructions)
            res = mrc.analyse(run.records(), **kw)
        for w in run.info["warnings"]:
            messages.warning(w)
        name = Path(cmd[0]).name
    else:
        if args.trace is None or args.program:
            raise UserError("give a trace file, or --online and a program after --")
        tr = load(args.trace)
        messages.detail(f"read {args.trace}: {len(tr):,} records")
        with messages.Progress("stack distances", total=len(tr), unit="records") as bar:
            res = mrc.analyse(_counted(tr.chunks(1 << 20), bar), **kw)
        name = Path(args.trace).name
    _show(args, res.to_dict(), lambda: R.render_terminal(res, console()),
          lambda: R.figure(res, f"miss-rate curve: {name}"),
          lambda: R.to_dataset(res, str(args.trace if not args.online else name)), rows=mrc_rows)
    return 0


def _show(args: argparse.Namespace, doc: dict[str, Any], render: Any, figure: Any, dataset: Any,
          rows: Any = None) -> None:
    """The JSON document, a tidy table (with `rows`) or the table, then the plot and the Dataset
    when asked for (each made by its callable only then)."""
    print_document(output_format(args), doc, render, rows=rows, indent=1)
    if args.plot:
        save(figure(), args.plot)
    if args.output:
        dataset().save(args.output, "the points as a Dataset")


def _mrc_online(args: argparse.Namespace) -> int:
    from ..collect import occupancy
    from ..report import mrc as R
    from ..report.terminal import console

    cmd = program(args.program, "no program given: corecast sim mrc-online [--ways LIST] -- PROGRAM [ARGS]")
    if args.plot:
        check_plot_path(args.plot)
    if args.output:
        outputs.check(args.output)
    l3 = occupancy.probe(Path(args.resctrl))
    if isinstance(l3, str):
        raise UserError(l3)
    ways = occupancy.parse_ways(args.ways, l3)

    def progress(text: str) -> None:
        messages.note(f"running with {text}")

    res = occupancy.measure(cmd, ways, l3, interval=args.interval, progress=progress)
    _show(args, res.to_dict(), lambda: R.render_online(res, console()),
          lambda: R.online_figure(res, f"LLC ways: {Path(cmd[0]).name}"), lambda: R.online_dataset(res))
    return 0


def _counted(chunks: Any, bar: messages.Progress) -> Any:
    """The chunks as they are, advancing `bar` by each one's records."""
    for part in chunks:
        yield part
        bar.advance(len(part))


def _convert(args: argparse.Namespace) -> int:
    from ..sim.trace import convert, load, write_csv

    if args.to_csv:
        outputs.check(args.output)
        tr = load(args.input)
        write_csv(tr.records, args.output)
        return 0
    markers = []
    for m in args.marker:
        try:
            markers.append(int(m, 16))
        except ValueError:
            raise UserError(f"--marker {m}: give an instruction address in hex") from None
    path, info = convert(args.input, args.output, args.fmt, markers=markers)
    if info.get("bad_lines"):
        messages.warning(f"{info['bad_lines']:,} lines of {args.input} were not trace lines (first at line "
                         f"{info['first_bad_line']})")
    return 0


def _gen(args: argparse.Namespace) -> int:
    from ..sim import synth
    from ..sim.trace import TraceWriter

    if args.width > synth.MAX_CHAINS:
        raise UserError(f"--width {args.width}: at most {synth.MAX_CHAINS} chains (a register each)")
    meta: dict[str, Any] = {"source": f"synthetic {args.kind}"}
    parts: Iterable[Any]
    if args.kind == "stream":
        if synth.HEAP_BASE + (args.n - 1) * args.stride + 8 > 1 << 64:
            raise UserError(f"-n {args.n} --stride {args.stride}: the stream would pass the top of the address space")
        parts, total = synth.stream_chunks(args.n, stride=args.stride), 2 * args.n
    elif args.kind == "random":
        if synth.HEAP_BASE + args.working_set > 1 << 64:
            raise UserError(f"--working-set {args.working_set}: passes the top of the address space")
        parts = synth.random_chunks(args.n, args.working_set, write_fraction=args.write_fraction, seed=args.seed)
        total = 2 * args.n
    elif args.kind == "pingpong":
        if not 2 <= args.threads <= 65536:
            raise UserError(f"--threads {args.threads}: ping-pong needs 2 to 65,536 threads")
        parts = synth.pingpong_chunks(args.n, args.threads, args.pattern, false_sharing=args.false_sharing)
        total = 2 * args.n * args.threads
    elif args.kind == "transactions":
        meta["stack"] = [synth.STACK_TOP - (1 << 20), synth.STACK_TOP]
        parts, total = synth.transactions_chunks(args.n, seed=args.seed), (2 * 200 + 1) * args.n
    else:
        parts = synth.chains_chunks(args.n, width=args.width)
        total = 2 * args.n                    # a fetch and a uop an instruction
    if total > MAX_GEN_RECORDS:
        raise UserError(f"-n {args.n}: {total:,} records; a generated trace has at most {MAX_GEN_RECORDS:,} "
                        f"({fmt_size(MAX_GEN_RECORDS * 16)})")
    # streamed (every kind is made a slice at a time): memory stays bounded, and the file is
    # whole or absent (TraceWriter), Ctrl-C included
    with TraceWriter(args.output, meta) as w, messages.Progress("generating", total=total, unit="records") as bar:
        try:
            for part in parts:
                w.write(part)
                bar.update(w.count)
        except KeyboardInterrupt:
            w.abort()
            raise
    return 0


def _machines(args: argparse.Namespace) -> int:
    if not args.name:
        machines = [load_machine(n) for n in bundled()]
        doc: Any = [{"name": m.name, "description": m.description} for m in machines]
        print_document(output_format(args), doc, lambda: render_machines(machines), rows=machines_rows)
    else:
        m = load_machine(args.name)
        print_document(output_format(args), m.to_dict(), lambda: render_machine(m), rows=machines_rows)
    return 0
