"""corecast evaluate: hold-out evaluation of every prediction method on a dataset.

The Dataset reader, the models and their renderers are imported where they are used, for
start-up time (numpy and scipy: 0.7 s of CPU that `evaluate -h` never needs).
"""
from __future__ import annotations

import argparse
import os

from .. import messages
from ..errors import UserError
from ..report import tables as T
from . import add_format, output_format
from ._args import level
from ._output import print_document
from .predict import METHODS, options, target

COMMAND = "evaluate"
HELP = "fit every method on the smaller core counts, predict the larger ones, and score them"
DESCRIPTION = """\
Fit every method (auto, estima when there are stall categories, timex, usl) on the rows with
cores <= K, predict the larger measured core counts, and print side by side per method: the
absolute % error per point, MAPE, max error, the share of measured points inside the band
(coverage at --level; every band is calibrated on the method's own rolling-origin errors
within the rows fitted on), and whether the core count of best performance was found.

With --corpus DIR instead of a file: every series of a corpus of real scaling curves (a folder
of sources, each a folder of cores,throughput CSVs with a source.toml; data/corpus is bundled)
is fitted on its first --train-frac of core counts and predicted beyond; per source, the
median over its series of each method's median absolute % error and the coverage of its band;
overall, the median over the sources (each source weighs the same), and how many of the
held-out points each band held. auto's priors are the shipped ones, or with
--leave-one-source-out learned from the other sources only (its band too: learned from the other
sources' held-out errors); with --target-machine source every method is given each series'
machine and placement; Extra-P is scored beside them where it is installed. The series are
fitted in --jobs worker processes; on a terminal a bar says how far each stage is.

examples:
  corecast evaluate run.csv --train-max-cores 8
  corecast evaluate data/usl/raytracer.csv --train-max-cores 20 --json
  corecast evaluate --corpus data/corpus --train-frac 0.25
  corecast evaluate --corpus data/corpus --leave-one-source-out --target-machine source"""


def add_arguments(p) -> None:
    p.add_argument("file", nargs="?", help="Dataset (CSV, JSON or campaign file)")
    p.add_argument("--train-max-cores", type=float, default=None, metavar="K",
                   help="fit on cores <= K, predict the rest (needed with a file)")
    p.add_argument("--corpus", metavar="DIR", help="evaluate on every series of a corpus instead of one file")
    p.add_argument("--train-frac", type=float, default=None, metavar="F",
                   help="with --corpus: fit on the cores up to F of each series' largest count "
                        "(at least its two smallest; default 0.25)")
    p.add_argument("--methods", default=None, metavar="LIST",
                   help=f"methods to compare (comma-separated from {', '.join(METHODS)}; "
                        "default: all that apply)")
    p.add_argument("--level", type=level, default=0.8, help="level of the bands (default 0.8)")
    p.add_argument("--clock", type=float, default=None, metavar="GHZ",
                   help="the measured machine's clock frequency, for data that does not record it")
    p.add_argument("--size", type=float, default=None, help="use the rows of this problem size")
    p.add_argument("--stalls", default=None, metavar="COLS", help="stall categories to use")
    p.add_argument("--kernels", default=None, metavar="NAMES", help="kernels ('paper' for ESTIMA's six)")
    p.add_argument("--checkpoints", type=int, default=None, metavar="C", help="checkpoints for kernel selection")
    p.add_argument("--refit", action="store_true", help="refit selected kernels on all training points")
    p.add_argument("--target-machine", metavar="SPEC",
                   help="the machine the data were measured on, as predict reads it: every method is fitted "
                        "on effective cores and predicts the held-out threads' (SMT, oversubscription, NUMA "
                        "crossing); with --corpus, 'source' takes each source's machine from its source.toml")
    p.add_argument("--placement", choices=("compact", "spread", "smt-last"), default=None,
                   help="with --target-machine SPEC: how the threads were laid out (default: a campaign's "
                        "--order, else spread, as the operating system places threads it is not told where to put)")
    p.add_argument("--leave-one-source-out", action="store_true",
                   help="with --corpus: auto's priors learned from the other sources only, source by source")
    p.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                   help="with --corpus: fit in N worker processes (default: one per CPU this process may use)")
    add_format(p, "method and held-out core count (with --corpus: per source and method)")


def _jobs(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number of processes") from None
    if not 1 <= n <= 256:
        raise argparse.ArgumentTypeError(f"between 1 and 256 processes (got {n})")
    return n


def run(args) -> int:
    if args.corpus:
        # The corpus' fits are thousands of tiny matrix operations in one process per CPU:
        # a BLAS thread pool per process only spins (measured: a third of the wall time).
        # Set before numpy is first imported.
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
    from .. import dataset as ds_mod
    from ..model import evaluate as E
    from ..model.topo import measured_machine
    from ..report import prediction as R
    from ..report import terminal

    if args.corpus:
        return _corpus(args)
    if not args.file:
        raise UserError("give a Dataset file (with --train-max-cores K) or --corpus DIR")
    if args.train_max_cores is None:
        raise UserError("--train-max-cores K is needed with a file (fit on cores <= K, predict the rest)")
    if args.leave_one_source_out:
        raise UserError("--leave-one-source-out goes with --corpus DIR")
    if args.jobs is not None:
        raise UserError("--jobs goes with --corpus DIR")
    if args.train_frac is not None:         # ignored before: a file is split by --train-max-cores
        raise UserError("--train-frac goes with --corpus DIR (a file is split by --train-max-cores K)")
    data = ds_mod.load(args.file)
    po = options(args)                      # validated once, before anything is fitted
    data = po.with_clock(data)
    opts = po.fit_kwargs(data)
    size = opts.pop("size")
    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    machine = None
    if args.target_machine == "source":
        raise UserError("--target-machine source goes with --corpus DIR; give a machine for a file")
    tgt = target(args)
    if tgt is not None:
        # not given: as the measurements were placed (a campaign's --order), else spread
        machine = (tgt.machine, measured_machine(data, given_order=tgt.placement)[1])
    ev = E.evaluate(data, args.train_max_cores, methods=methods, level=args.level, size=size, machine=machine,
                    **opts)
    ev.label = str(args.file)
    print_document(output_format(args), lambda: R.evaluation_doc(ev),
                   lambda: R.render_evaluation(ev, terminal.console()), rows=T.evaluation_rows, allow_nan=False)
    if not any(m.ok for m in ev.methods):
        # the table (or JSON) says why each failed; the status says that nothing was evaluated
        why = "; ".join(f"{m.method}: {m.error}" for m in ev.methods if m.error)
        raise UserError(f"no method could be evaluated on {args.file}" + (f" ({why})" if why else ""))
    return 0


def _corpus(args) -> int:
    from ..model import corpus as C
    from ..model import scorecard
    from ..report import prediction as R
    from ..report import terminal

    if args.file:
        raise UserError("give either a file or --corpus, not both")
    if args.train_max_cores is not None:    # ignored before: each series is split by --train-frac
        raise UserError("--train-max-cores goes with a file (with --corpus each series is split by --train-frac F)")
    if args.placement is not None:
        raise UserError("--placement is for --target-machine SPEC with a file (with --corpus each source's "
                        "source.toml gives it)")
    if args.target_machine not in (None, "source"):
        raise UserError("with --corpus, --target-machine takes 'source' (each source's machine from its "
                        "source.toml); a corpus has no one machine")
    from ..model.trials import default_jobs

    methods = [m.strip() for m in args.methods.split(",") if m.strip()] if args.methods else None
    if args.train_frac is None:
        args.train_frac = 0.25
    bar = messages.Progress("", bar=True)

    def progress(what: str, done: int, total: int) -> None:
        if what != bar.what:
            bar.close()
            bar.what = what
            bar.begin(total)
        bar.update(done)

    with bar:
        ev = scorecard.evaluate_corpus(C.load_corpus(args.corpus), methods, train_frac=args.train_frac,
                                       level=args.level, target=args.target_machine == "source",
                                       leave_one_source_out=args.leave_one_source_out, progress=progress,
                                       jobs=args.jobs or default_jobs())
    print_document(output_format(args), ev.to_dict, lambda: R.render_corpus(ev, terminal.console()),
                   rows=T.corpus_rows, allow_nan=False)
    if not any(s.median_error for s in ev.sources):
        # the table says which failed; the status says that nothing was evaluated
        raise UserError(f"no method could predict any series of {args.corpus} (methods: {', '.join(ev.methods)})")
    return 0
