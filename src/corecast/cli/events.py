"""`corecast events`: the PMUs and events of this machine, and the encoding of any spec."""
from __future__ import annotations

import argparse
import json
import sys

from ..collect.catalogue import catalogue
from ..collect.events import BACKEND_STALLS, backend_stall_events, parse_cpu, resolve
from ..collect.events import pfm
from ..errors import UserError

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
    p.add_argument("--format", choices=("table", "json"), default="table")


def _translate(args) -> int:
    out = []
    for spec in args.translate:
        for e in resolve(spec, args.cpu):
            out.append(e)
    if args.format == "json":
        print(json.dumps([e.to_dict() for e in out], indent=1))
    else:
        for e in out:
            print(e.translate())
            if e.description:
                print(f"    {e.description}")
    return 0


def _libpfm(args) -> int:
    lib = pfm.require()
    try:
        evs = lib.events(args.libpfm)
    except LookupError as err:
        raise UserError(str(err)) from None
    if args.format == "json":
        print(json.dumps([{"name": n, "description": d, "attrs": [{"name": a, "description": ad} for a, ad in at]}
                          for n, d, at in evs], indent=1))
        return 0
    for n, d, attrs in evs:
        print(f"{n}: {d}")
        for a, ad in attrs:
            print(f"    :{a}  {ad}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.translate:
        return _translate(args)
    if args.libpfm:
        return _libpfm(args)
    if args.cpu:
        cpu = parse_cpu(args.cpu)
        stalls = backend_stall_events(cpu)
        print(f"CPU: {cpu.describe()}")
        if not stalls:
            print(f"backend stalls: {stalls.reason}")
        for e in stalls:
            print(f"  {e.translate()}\n      {e.description}")
        return 0
    data = catalogue()
    if args.format == "json":
        print(json.dumps(data, indent=1))
        return 0
    print(f"CPU: {data['cpu']}")
    print(f"perf_event_paranoid: {data['perf_event_paranoid']}")
    print(f"PMUs: {', '.join(data['pmus']) or 'none'}")
    print(f"tracepoints: {data['tracefs'] or 'tracefs not mounted'}")
    print(f"libpfm4: {data['libpfm']}")
    print("[Events]")
    for e in data["events"]:
        print(f"  {e['name']:<30} {e['status']:<14} {e['description']}")
        if e["status"] != "ok" and e["message"]:
            print(f"  {'':<30} {'':<14} ({e['message']})")
    if not data["backend_stalls"].endswith(" events"):
        print(f"  {BACKEND_STALLS:<30} {'-':<14} {data['backend_stalls']}")
    print("[Software sources]")
    for k, v in data["sources"].items():
        print(f"  {k:<30} {'ok' if v == 'ok' else 'unavailable':<14} {'' if v == 'ok' else v}")
    sys.stdout.flush()
    return 0
