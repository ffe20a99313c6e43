"""corecast locks: a campaign's locks ranked by wait share at each core count.

The Dataset reader and the renderers (numpy, rich) are imported in `run`, for start-up time:
`locks -h` never needs them.
"""
from __future__ import annotations

from . import add_format, output_format
from ._output import print_document

COMMAND = "locks"
HELP = "rank a campaign's locks and their call sites by wait share at each core count"
DESCRIPTION = """\
The sync shim counts every pthread mutex, spin lock and rwlock acquisition by lock and call
site (`corecast measure`, unless --no-shim): how often it was taken, how often it had to wait,
how long it waited and how long it was held. This ranks the (lock, call site) pairs of a
campaign by the share of thread time spent waiting for them at the largest core count -- as
`perf lock contention` ranks one run, but across the campaign's core counts -- with their hold
share, hold time per acquisition, acquisitions, contended share and longest wait.

A lock is named `&queue_lock` when it is a global or static of a program with a symbol table,
else after the function that takes it (`lock in push()`); a call site is `file.c:41 function`
where the program has debug information (gcc -g), else the function.

examples:
  corecast locks lock.db
  corecast locks lock.db --top 5 --format csv > locks.csv"""


def add_arguments(p) -> None:
    p.add_argument("file", help="campaign file (corecast measure), or a Dataset exported from one (JSON)")
    p.add_argument("--top", type=int, default=None, metavar="N", help="the N busiest (lock, call site) pairs only")
    add_format(p, "(lock, call site, core count)")


def run(args) -> int:
    from .. import dataset as ds_mod
    from ..errors import UserError
    from ..report import locks as R
    from ..report import terminal

    if args.top is not None and args.top < 1:
        raise UserError(f"--top {args.top}: at least 1")
    data = ds_mod.load(args.file)
    doc = R.locks_doc(data, top=args.top)
    print_document(output_format(args), doc, lambda: R.render_terminal(doc, terminal.console()),
                   rows=R.locks_rows, allow_nan=False)
    return 0
