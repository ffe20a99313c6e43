"""`corecast events`: the PMUs and events of this machine, and the encoding of any spec."""
from __future__ import annotations

import argparse
import json
import sys

from ..collect import sources
from ..collect.events import (BACKEND_STALLS, MNEMONICS, backend_stall_events, host_cpu, parse_cpu,
                              resolve, sysfs_pmus, tracefs_dir)
from ..collect.events import pfm
from ..collect.perf import paranoid, probe
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
    cpu = host_cpu()
    mn = [e for name in MNEMONICS for e in resolve(name)]
    stalls = backend_stall_events()
    probed = probe(mn + list(stalls))
    lib = pfm.load()
    src = sources.available()
    data = {
        "cpu": cpu.describe(),
        "perf_event_paranoid": paranoid(),
        "pmus": sysfs_pmus(),
        "tracefs": str(tracefs_dir() or ""),
        "libpfm": (f"libpfm4 {lib.version}: " + ", ".join(p.name for p in lib.pmus() if p.present))
        if lib else pfm.unavailable_reason(),
        "events": [{"name": e.name, "status": st, "message": msg, "description": e.description,
                    "encoding": e.translate()} for e, st, msg in probed],
        "backend_stalls": stalls.reason or f"{len(stalls)} events",
        "sources": {k: (v or "ok") for k, v in src.items()},
    }
    if args.format == "json":
        print(json.dumps(data, indent=1))
        return 0
    print(f"CPU: {data['cpu']}")
    print(f"perf_event_paranoid: {data['perf_event_paranoid']}")
    print(f"PMUs: {', '.join(data['pmus']) or 'none'}")
    print(f"tracepoints: {data['tracefs'] or 'tracefs not mounted'}")
    print(f"libpfm4: {data['libpfm']}")
    print("[Events]")
    for e, st, msg in probed:
        tag = "" if e.name != "stall_" else ""
        line = f"  {e.name:<30} {st:<14} {e.description}"
        print(line + tag)
        if st != "ok" and msg:
            print(f"  {'':<30} {'':<14} ({msg})")
    if not stalls:
        print(f"  {BACKEND_STALLS:<30} {'-':<14} {stalls.reason}")
    print("[Software sources]")
    for k, v in src.items():
        print(f"  {k:<30} {'ok' if v is None else 'unavailable':<14} {v or ''}")
    sys.stdout.flush()
    return 0
