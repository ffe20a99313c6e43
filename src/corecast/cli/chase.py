"""`corecast chase`: latency and bandwidth against outstanding misses, the concurrency limits,
the latency staircase, loaded latency, and the memory profile."""
from __future__ import annotations

import argparse
import sys

from .. import messages, outputs
from ..parsing import arg, count, seed, size_bytes, time_s
from . import add_format, output_format
from ._output import print_document

COMMAND = "chase"
HELP = "pointer-chasing memory benchmark: latency and bandwidth against concurrent misses, limits, profile"
DESCRIPTION = """\
Each thread walks k independent pointer chains at once (dereferenced interleaved), so k loads
are in flight per thread. Chains are random cyclic permutations within TLB-locality groups
(64 pages by default), disjoint between chains and threads, so neither the prefetchers nor the
TLB help. For every (threads, chains) point: latency per dereference, bandwidth, Little's-law
concurrency, steal time; then the idle latency, the per-core concurrency limit (chains per
thread past which bandwidth stops growing), the chip-wide plateau over threads, and the peak
bandwidth.

modes:
  (default)      the concurrency sweep over --threads x --chains at --size
  --sweep-size   latency against working-set size: the L1/L2/L3/DRAM staircase, labelled
  --loaded       one chaser and N loaders with injection delays: MLC's loaded-latency table

defaults: --size 256MiB, --chains 1,2,3,4,6,8,12,16,20,24,32,40,48,64, --threads pow2 (1, 2,
4, ... all CPUs), 5 samples of 80 ms per point after a 100 ms warm-up (discarded); the default
sweep takes about 16 s on 2 CPUs.

examples:
  corecast chase                                  # the concurrency sweep
  corecast chase --threads 1 --chains 1-16 --plot bw.png -o chase.csv
  corecast chase --sweep-size --plot staircase.png
  corecast chase --loaded --delays 0,100,1000
  corecast chase --profile memory.json            # sweep + staircase -> the memory profile
  corecast chase --chains 8 -o sweep.csv          # the thread counts at 8 chains, a Dataset
  corecast usl sweep.csv                          # (the USL needs 3 or more thread counts)"""


#: Measured time per point: at most a minute (a sweep has tens of points).
_DURATION = arg(time_s, high=60.0)


def add_arguments(p: argparse.ArgumentParser) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--sweep-size", action="store_true",
                      help="latency against working-set size (1 thread, 1 chain), plateaus labelled")
    mode.add_argument("--loaded", action="store_true",
                      help="loaded latency: one chaser and --loaders loaders at each --delays")
    p.add_argument("--size", type=arg(size_bytes), default=None, metavar="BYTES",
                   help="buffer size, e.g. 256MiB (default 256MiB; the loaded mode's loaders get another)")
    p.add_argument("--chains", default=None, metavar="LIST",
                   help="chains per thread: 1-16 | 1,2,4,8 (default 1,2,3,4,6,8,12,16,20,24,32,40,48,64; at most 64)")
    p.add_argument("--threads", default=None, metavar="LIST",
                   help="thread counts: pow2 | all | 1-4 | 1,2 (default pow2: 1, 2, 4, ... all CPUs)")
    p.add_argument("--order", default="socket", metavar="ORDER",
                   help="which CPUs N threads get: socket (default) | spread | smt-last | a CPU list, as in measure")
    p.add_argument("--oversubscribe", action="store_true",
                   help="allow more threads than CPUs (they then share CPUs; figures over wall time)")
    p.add_argument("--pattern", default="random", metavar="P",
                   help="random (default) | forward | stride:N (N bytes between a chain's lines)")
    p.add_argument("--line", type=arg(size_bytes), default=64, metavar="BYTES",
                   help="bytes per dereference: one pointer per line (default 64)")
    p.add_argument("--page", choices=("4k", "2m", "thp"), default="4k",
                   help="4k pages (default), 2m hugetlb pages (falls back to thp) or thp "
                        "(madvise MADV_HUGEPAGE; falls back to 4k); the fallback is said")
    p.add_argument("--tlb-group", type=arg(count), default=64, metavar="PAGES",
                   help="random pattern: pages a chain stays within before it moves on (default 64)")
    p.add_argument("--duration", type=_DURATION, default=None, metavar="TIME",
                   help="measured time per point, above 0 and at most 1 min (default 0.4 s; --sweep-size "
                        "0.25 s), after the warm-up")
    p.add_argument("--samples", type=arg(count, high=1000), default=5, metavar="N",
                   help="samples per point, 1 to 1000 (default 5)")
    p.add_argument("--sizes", default=None, metavar="LIST",
                   help="--sweep-size (or --profile): sizes, e.g. 16KiB,1MiB,256MiB (default 4KiB to 8x the "
                        "last cache, at least 256MiB, in steps of x1.5 and x2)")
    p.add_argument("--loaders", type=arg(count), default=None, metavar="N",
                   help="--loaded: loader threads (default: every CPU but the chaser's)")
    p.add_argument("--delays", default=None, metavar="LIST",
                   help="--loaded: injection delays (default 0,20,50,100,200,500,1000,2000,5000,10000)")
    p.add_argument("--seed", type=arg(seed), default=1, help="seed of the random chains (default 1)")
    add_format(p, "measured point (its `mode`: concurrency, sizes or loaded)",
               json_help="print a JSON document instead of tables")
    p.add_argument("--plot", metavar="FILE", help="write a plot (.png, .svg or .pdf)")
    p.add_argument("-o", "--output", metavar="DATASET",
                   help="write the points as a corecast Dataset (.csv or .json)")
    p.add_argument("--profile", metavar="FILE.json",
                   help="also measure what is missing (the sweep or the staircase) and write the memory profile")


def run(args: argparse.Namespace) -> int:
    from ..collect import chase as C
    from ..errors import UserError
    from ..model import memory as M
    from ..report import chase as R
    from ..report import plots, terminal
    from ..report.tables import chase_rows

    if args.plot:
        plots.check_plot_path(args.plot)
    if args.output and not args.output.lower().endswith((".csv", ".json")) \
            and outputs.check(args.output) not in ("in place", "descriptor"):
        raise UserError(f"{args.output}: cannot tell the format from the extension (use .csv or .json)")
    for path in (args.output, args.profile):          # before the work, not after it
        if path:
            outputs.check(path)
    pattern, stride = C.parse_pattern(args.pattern)
    settings = C.Settings(size_bytes=C.DEFAULT_SIZE if args.size is None else args.size, line=args.line,
                          page=args.page, pattern=pattern, stride_bytes=stride, tlb_group_pages=args.tlb_group,
                          samples=args.samples, seed=args.seed)
    mode = "loaded" if args.loaded else ("sizes" if args.sweep_size else "concurrency")
    req = C.Request(settings, mode=mode, threads=args.threads, chains=args.chains, sizes=args.sizes,
                    delays=args.delays, loaders=args.loaders, order=args.order, oversubscribe=args.oversubscribe,
                    duration_s=args.duration, profile=bool(args.profile))
    fmt = output_format(args)
    with messages.Progress(mode, unit="points") as bar:
        runs = C.measure(req, bar.callback)
    datasets = {m: C.to_dataset(r) for m, r in runs.items()}
    stopped = any(r.interrupted for r in runs.values())
    res = M.analyse(datasets)
    profile = res.profile(datasets) if args.profile else None
    if profile is not None:
        profile.write(args.profile)
    if args.output and mode in datasets:
        C.to_dataset(runs[mode], idle_row=False).save(args.output)

    def render() -> None:
        R.render(runs, res.concurrency, res.plateaus, terminal.console())
        if profile is not None:
            R.render_profile(profile, args.profile, terminal.console())

    print_document(fmt, lambda: R.chase_doc(runs, res.concurrency, res.plateaus, profile), render,
                   rows=chase_rows, indent=1, allow_nan=False)
    if args.plot and mode in runs:
        R.save_plot(runs[mode], res.concurrency, res.plateaus, args.plot)
    if stopped:
        print("corecast chase: interrupted; the points measured before it are above"
              + (f" and in {args.output}" if args.output else ""), file=sys.stderr)
        return 130
    return 0
