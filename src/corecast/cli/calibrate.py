"""`corecast calibrate`: a short, program-independent measurement of this machine for
`predict --target-machine` (core-to-core latency and the chase memory profile)."""
from __future__ import annotations

import argparse

from .. import messages, outputs
from ._output import print_document

COMMAND = "calibrate"
HELP = "measure this machine for predict --target-machine: core-to-core latency and the memory profile"
DESCRIPTION = """\
Run on the machine you will deploy on (no application needed), then predict for it elsewhere:

  corecast calibrate -o target.json              # on the target, well under a minute
  corecast predict run.db --cores 16,32,64 --target-machine target.json

It measures the latency of handing one cache line between two pinned threads for each kind of
CPU pair the topology has (SMT siblings, two cores of a socket, two sockets; kinds the machine
lacks are named), and a short `corecast chase` memory profile: the latency staircase (cache
levels and DRAM), the idle latency, the per-core concurrency limit and the peak bandwidth per
socket (threads: 1, one socket's CPUs, all CPUs). The file is a machine description (the schema
of docs/machines.md, as JSON) holding the machine's topology too (docs/chase.md, "The
calibration file")."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", default="target.json", metavar="FILE.json",
                   help="where to write the target description (default target.json)")
    p.add_argument("--no-memory", action="store_true", help="leave the memory profile out (core-to-core only)")
    p.add_argument("--json", action="store_true", help="print the file's JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    import time
    from datetime import datetime, timezone

    from .. import __version__
    from ..collect import chase as C
    from ..collect.topology import machine_info
    from ..machines import schema
    from ..model import memory as M
    from ..report import chase as R
    from ..report import terminal

    outputs.check(args.output)                  # before the work, not after it
    started = time.monotonic()
    with messages.Progress("core-to-core", unit="pairs") as bar:
        c2c = C.core_to_core(progress=bar.callback("core-to-core"))
        runs = {} if args.no_memory else C.measure(C.calibration_request(), bar.callback)
    datasets = {m: C.to_dataset(r) for m, r in runs.items()}
    profile = M.analyse(datasets).profile(datasets) if datasets else None
    machine = machine_info()
    doc = schema.calibration_doc(machine.to_dict(), c2c, profile.to_dict() if profile else None,
                            elapsed_s=time.monotonic() - started, created=datetime.now(timezone.utc).isoformat(),
                            corecast_version=__version__, host=machine.to_dict(),
                            warnings=[w for r in runs.values() for w in r.warnings])
    schema.write_calibration(doc, args.output)
    print_document("json" if args.json else "table", doc,
                   lambda: R.render_calibration(doc, args.output, terminal.console()), indent=1, allow_nan=False)
    return 0
