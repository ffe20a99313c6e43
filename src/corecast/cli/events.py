"""`corecast events`: the PMUs and events of this machine, and the encoding of any spec."""
from __future__ import annotations

import argparse

from ..collect.catalogue import catalogue
from ..collect.events import backend_stall_events, parse_cpu, pfm, resolve
from ..errors import UserError
from ..report import events as R
from . import FORMATS, output_format
from ._output import print_document

COMMAND = "events"
HELP = "list this machine's PMUs and events with their status; translate an event spec"
DESCRIPTION = """\
Without options: the CPU, the perf PMUs, every mnemonic and the backend-stall catalog with
its status here (ok / not supported / denied / invalid), the software sources.

  corecast events
  corecast events --translate pmc0,pmc3=0x2e,umask3=0x41           # like PMCTrack's pmc-events
  corecast events --translate backend_stalls --cpu haswell          # for a named CPU model
  corecast events --translate INST_RETIRED:ANY_P --cpu skl          # libpfm4 names
  corecast events --libpfm amd64_fam19h_zen3                        # events libpfm4 knows for a PMU
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--translate", metavar="SPEC", action="append", default=[],
                   help="print the perf encoding of SPEC (repeatable)")
    p.add_argument("--cpu", "--pmu", dest="cpu", metavar="CPU",
                   help="encode for this CPU model: haswell, skylake, icelake, goldencove, fam10h, zen1..zen5, "
                        "a libpfm4 PMU name, intel:6:0x3f or GenuineIntel-6-3F")
    p.add_argument("--libpfm", metavar="PMU", help="list the events libpfm4 knows for PMU")
    p.add_argument("--json", action="store_true", help="print a JSON document instead (as --format json)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="table (default), json (one object: the machine and its events), or a tidy table "
                        "with one row per event for data frames: csv, or records (a JSON array of "
                        "objects); see docs/outputs.md")


def _translate(args) -> int:
    out = [e for spec in args.translate for e in resolve(spec, args.cpu)]
    print_document(args.format, lambda: [e.to_dict() for e in out], lambda: R.render_translation(out),
                   rows=lambda doc: doc, indent=1)
    return 0


def _libpfm(args) -> int:
    lib = pfm.require()
    try:
        evs = lib.events(args.libpfm)
    except LookupError as err:
        raise UserError(str(err)) from None
    print_document(args.format, lambda: R.libpfm_doc(evs), lambda: R.render_libpfm(evs),
                   rows=lambda doc: [dict(e, attrs=[a["name"] for a in e["attrs"]]) for e in doc], indent=1)
    return 0


def _stalls(args) -> int:
    cpu = parse_cpu(args.cpu)
    stalls = backend_stall_events(cpu)
    rows = [e.to_dict() for e in stalls]
    print_document(args.format, lambda: {"cpu": cpu.describe(), "backend_stalls": rows,
                                         "reason": None if stalls else stalls.reason},
                   lambda: R.render_stalls(cpu, stalls), rows=lambda doc: doc["backend_stalls"], indent=1)
    return 0


def run(args: argparse.Namespace) -> int:
    args.format = output_format(args)
    if args.translate:
        return _translate(args)
    if args.libpfm:
        return _libpfm(args)
    if args.cpu:
        return _stalls(args)
    data = catalogue()
    print_document(args.format, data, lambda: R.render_catalogue(data), rows=lambda doc: doc["events"], indent=1)
    return 0
