"""corecast predict: extrapolate time and throughput to more cores.

The Dataset reader, the models and their renderers are imported in `run`, for start-up time:
they load numpy and scipy (0.7 s of CPU), which `predict -h` and a mistyped option never need.
So the methods' names are written here (tests/test_cli_conventions.py checks they are the
model registry's, `corecast.model.predictors.METHODS`).
"""
from __future__ import annotations

import sys

from .. import messages, outputs
from ..errors import UserError
from ..report import plots
from ..report import tables as T
from . import add_format, output_format
from ._args import core_list, level
from ._output import print_document

COMMAND = "predict"
HELP = "predict time and throughput at more cores (stall-based ESTIMA, time extrapolation, USL)"
DESCRIPTION = """\
Extrapolate from the core counts measured to the ones asked for.

methods:
  estima  every stall category (any column other than cores, repetition, size, time_s,
          throughput and known counters) extrapolated separately with ESTIMA's kernels and
          checkpoint selection; stalls per core turned into time by an extrapolated scaling
          factor; bottlenecks ranked by growth
  timex   the same kernels and selection on the time series directly
  mva     measured service demands (CPU time, each hot lock's hold time from the sync shim's
          per-lock table, off-CPU time) in a closed queueing network solved exactly at each
          thread count: a campaign recorded with the shim only (not a plain CSV)
  usl     the Universal Scalability Law
  auto    (default) validates the applicable methods on the measured points (rolling
          origin); predicts with the stall method when its stall categories explain the
          measured time, else with the method the corpus of real many-core curves trusts
          (priors.toml; as shipped, the USL blended with Amdahl's law); with two core counts, the
          two-point USL with the corpus' coherency share; never below a throughput measured at
          fewer threads unless the fit and the measurements show the curve turning down

every band is calibrated on the method's rolling-origin errors (noise, error growth with the
distance of extrapolation); auto's is the corpus' band learned out of sample (the quantiles of
held-out errors on sources it never saw, scaled by the series' noise, error growth and the
laws' disagreement), never narrower than the repetitions' spread. With --target-machine,
threads beyond the CPUs, SMT siblings and NUMA nodes are read from the measurements where they
show them (else priors), and the band widens by their uncertainty.

low/high are the bounds of the input metric (time_s, else throughput) at --level.

examples:
  corecast predict run.csv --cores 16,24,32
  corecast predict run.csv --cores 16-64:2x --method estima --plot pred.png --report pred.html
  corecast predict run.csv --cores 48 --freq-ratio 1.2 --size-ratio 2 --json
  corecast predict run.csv --cores 32-128:2x --target-machine sockets=2,cores=32,smt=2"""


#: `corecast.model.predictors.METHODS`, without importing the models (see the docstring).
METHODS = ("auto", "estima", "mva", "timex", "usl")


def add_arguments(p) -> None:
    p.add_argument("file", help="Dataset: CSV with cores and time_s and/or throughput (other numeric columns are "
                                "stall categories), JSON, or a campaign file")
    p.add_argument("--cores", type=core_list, required=True, metavar="CORES",
                   help="core counts to predict, e.g. 16,24,32 or 16-64:2x")
    p.add_argument("--method", choices=METHODS, default="auto", help="default: auto")
    p.add_argument("--level", type=level, default=0.8, help="level of the band (default 0.8)")
    p.add_argument("--size-ratio", type=float, default=None, metavar="R",
                   help="target / measured problem size: scales the stalls (weak scaling)")
    p.add_argument("--target-size", type=float, default=None, metavar="S",
                   help="target problem size, in the units of the size column (else bytes, against the "
                        "measured memory footprint rss_bytes); gives --size-ratio")
    p.add_argument("--freq-ratio", type=float, default=1.0, metavar="R",
                   help="measured / target clock frequency: scales the time")
    p.add_argument("--clock", type=float, default=None, metavar="GHZ",
                   help="the measured machine's clock frequency, for data that does not record it (a plain "
                        "CSV): a stalled cycle per core then costs a cycle of time")
    p.add_argument("--size", type=float, default=None, help="use the rows of this problem size")
    p.add_argument("--stalls", default=None, metavar="COLS", help="stall categories to use (comma-separated; "
                                                                  "default: every stall column)")
    p.add_argument("--kernels", default=None, metavar="NAMES",
                   help="kernels to choose from (comma-separated; 'paper' for ESTIMA's six; default: all)")
    p.add_argument("--checkpoints", type=int, default=None, metavar="C",
                   help="checkpoints for kernel selection (default from the number of points)")
    p.add_argument("--refit", action="store_true",
                   help="refit the selected kernel on all points (default: keep the fit validated on the checkpoints)")
    p.add_argument("--target-machine", metavar="SPEC",
                   help="predict for this machine: a bundled name (e.g. epyc-9654-2s), a TOML file, "
                        "`corecast calibrate`'s JSON, `lstopo --of xml` or `lscpu [-J]` output, or "
                        "sockets=2,cores=32,smt=2[,ghz=2.4] / cpus=64")
    p.add_argument("--placement", choices=("compact", "spread", "smt-last"), default=None,
                   help="how threads are laid out on the target: compact (a socket's cores, then its SMT "
                        "siblings, then the next socket), spread (physical cores first, round-robin over the "
                        "sockets) or smt-last (physical cores socket by socket, then the siblings); default: as "
                        "the measurements were placed (a campaign's --order, --measured-placement), else "
                        "spread, as the operating system places threads it is not told where to put")
    p.add_argument("--measured-machine", metavar="SPEC",
                   help="the machine the data were measured on, in the same forms as --target-machine, where "
                        "the file does not record it (a plain CSV; a campaign records its machine)")
    p.add_argument("--measured-placement", choices=("compact", "spread", "smt-last"), default=None,
                   help="how the measured threads were laid out (default: the campaign's --order, else the "
                        "target's placement)")
    p.add_argument("--smt-yield", type=float, default=None, metavar="Y",
                   help="what a thread on an SMT sibling adds, as a share of a core (default: the prior "
                        "learned from the corpus)")
    add_format(p, "predicted core count")
    p.add_argument("--plot", metavar="FILE", help="write the prediction plot (.png, .svg or .pdf)")
    p.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML report")


def options(args, method: str = "auto"):
    """The PredictOptions of predict's and evaluate's shared options (validated there, once)."""
    from ..model.usecase import PredictOptions

    return PredictOptions(method=method, kernels=args.kernels, checkpoints=args.checkpoints, refit=args.refit,
                          size=args.size, freq_ratio=getattr(args, "freq_ratio", 1.0),
                          size_ratio=getattr(args, "size_ratio", None), target_size=getattr(args, "target_size", None),
                          clock=getattr(args, "clock", None), stalls=args.stalls)


def target(args):
    """The Target of --target-machine and the options that go with it (None without one)."""
    from ..model.usecase import Target
    from ..target import parse_spec

    for opt, val in (("--smt-yield", getattr(args, "smt_yield", None)),
                     ("--measured-machine", getattr(args, "measured_machine", None)),
                     ("--measured-placement", getattr(args, "measured_placement", None)),
                     ("--placement", args.placement)):
        if val is not None and args.target_machine is None:
            raise UserError(f"{opt} is for --target-machine")
    if args.target_machine is None:     # '' is a mistake, not "no target"
        return None
    measured = getattr(args, "measured_machine", None)
    return Target(parse_spec(args.target_machine), args.placement, getattr(args, "smt_yield", None),
                  parse_spec(measured) if measured else None, getattr(args, "measured_placement", None))


def run(args) -> int:
    from .. import dataset as ds_mod
    from ..model import methods, usecase
    from ..report import documents as D
    from ..report import html as H
    from ..report import prediction as R
    from ..report import terminal

    if args.plot:
        plots.check_plot_path(args.plot)
        if not plots.available():
            raise UserError("--plot needs matplotlib, which is not installed (--report writes the HTML report "
                            "without its plot)")
    if args.report:
        outputs.check(args.report)
    data = ds_mod.load(args.file)
    opts = options(args, args.method)
    tgt = target(args)
    label = str(args.file)
    others = []
    if args.plot or args.report:
        # The plot shows the other applicable methods too; what `auto` fitted is not fitted again.
        others = [m for m in methods.applicable(data, list(opts.stalls or ()) or None) if m != args.method]
    # fitting (and, for --plot/--report, the other methods), then the figure and the report:
    # 1.6 s of silence before; the line is cleared before the results are printed
    steps = 1 + (bool(args.plot or args.report)) + bool(args.plot) + bool(args.report)
    with messages.Progress("predict", total=steps, unit="steps") as bar:
        bar.update(0, f"fitting {args.method}" + (f" and {len(others)} other methods" if others else ""))
        result = usecase.predict(data, opts, tgt, others=others)
        doc = D.predict_doc(result, label, args.cores, args.level)
        fits = result.fits
        bar.update(1)
        bar.clear()
        print_document(output_format(args), doc, lambda: R.render_terminal(doc, terminal.console()),
                       rows=T.predict_rows, allow_nan=False)
        sys.stdout.flush()
        fig = None
        if args.report and not plots.available():
            messages.note("matplotlib is not installed: the HTML report has no plot")
        elif args.plot or args.report:
            bar.update(bar.done, "drawing the figure")
            shown = {m: f for m, f in fits.items() if not isinstance(f, Exception)}
            title = f"{label}: {args.method}"
            if tgt is not None:
                # the chosen method as printed, on the target's positions (fits holds its fit on
                # the measured axis: the plot drew that, not the table's numbers); the others
                # stay on the machine measured, and the title says so
                shown[args.method] = result.fitted
                title += f" on {tgt.machine.name or 'the target machine'} (other methods: the machine measured)"
            fig = R.figure(result.data, shown, args.cores, args.level, title=title, main=args.method,
                           whole=tgt is not None)
            bar.advance(1)
        if args.plot:
            bar.update(bar.done, f"writing {args.plot}")
            plots.save(fig, args.plot)
            bar.advance(1)
        if args.report:
            bar.update(bar.done, f"writing {args.report}")
            H.write(args.report, R.render_html(doc, fig))
            bar.advance(1)
    if fig is not None:
        plots.pyplot().close(fig)
    return 0
