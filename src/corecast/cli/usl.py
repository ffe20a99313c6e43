"""corecast usl: Gunther's Universal Scalability Law methodology on a Dataset.

The Dataset reader, the fit and its renderers are imported in `run`, for start-up time: they
load numpy and scipy (0.7 s of CPU), which `usl -h` and a mistyped option never need.
"""
from __future__ import annotations

from .. import outputs
from ..report import plots
from ..report import tables as T
from . import add_format, output_format
from ._args import core_list, level
from ._output import print_document

COMMAND = "usl"
HELP = "fit the Universal Scalability Law, with Amdahl's law as the nested model and data checks"
DESCRIPTION = """\
Fit X(N) = γN / (1 + α(N−1) + βN(N−1)) to throughput measured at several core counts (or
loads), by bounded nonlinear least squares (α in [0,1], β >= 0, γ > 0). Reports standard errors,
intervals, N_max, N_opt, the ceilings, efficiency and capacity per point, whether contention or
coherency limits scaling, whether β is needed at all (Amdahl's law as the nested model), and
what in the data looks wrong. A `time_s` column is turned into throughput 1/time.

examples:
  corecast usl data.csv
  corecast usl data.csv --predict 64,128 --plot usl.png --report usl.html
  corecast usl campaign.db --metric ops_per_s --json"""


def add_arguments(p) -> None:
    p.add_argument("file", help="Dataset: CSV (cores,throughput ...), JSON, or a campaign file")
    p.add_argument("--metric", help="column to use as throughput (default: throughput, else 1/time_s)")
    p.add_argument("--level", type=level, default=0.95, help="level of intervals and bands (default 0.95)")
    p.add_argument("--predict", type=core_list, metavar="CORES",
                   help="also predict throughput at these core counts, e.g. 64,128 or 32-256:2x")
    add_format(p, "measured or predicted core count")
    p.add_argument("--plot", metavar="FILE", help="write a plot (.png, .svg or .pdf)")
    p.add_argument("--report", metavar="FILE.html", help="write a self-contained HTML report")


def run(args) -> int:
    from .. import dataset as ds_mod
    from ..model import usl
    from ..report import documents as D
    from ..report import html as H
    from ..report import terminal
    from ..report import usl as R

    if args.plot:
        plots.check_plot_path(args.plot)
    if args.report:
        outputs.check(args.report)
    data = ds_mod.load(args.file)
    label = str(args.file)
    analysis = usl.analyze_dataset(data, metric=args.metric, level=args.level)
    doc = D.usl_doc(analysis, label, predict_at=args.predict)
    print_document(output_format(args), doc,
                   lambda: R.render_terminal(analysis, terminal.console(), label, predict_at=args.predict),
                   rows=T.usl_rows, allow_nan=False)
    if args.plot:
        fig = R.figure(analysis, title=f"USL: {label}", predict_at=args.predict)
        plots.save(fig, args.plot)
        plots.pyplot().close(fig)
    if args.report:
        H.write(args.report, R.render_html(analysis, label, dataset=data, predict_at=args.predict))
    return 0
