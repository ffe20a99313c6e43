"""`corecast throughput`: a CPI stack and the server throughput it implies (the memcached method
of Hart, Frachtenberg and Berezecki)."""
from __future__ import annotations

import argparse
import math
import re
from typing import Any

from ..errors import UserError
from ..parsing import arg, count, fraction, frequency_hz, number, percentile, rate_per_s, size_bytes, time_s
from ..report.tables import throughput_rows
from . import add_format, output_format
from ._output import print_document

COMMAND = "throughput"
HELP = "CPI stack and predicted throughput on N cores from event rates (the memcached method)"
DESCRIPTION = """\
Build a CPI stack from event frequencies per 1K instructions -- a `corecast sim --json`
result or a small --mpki file -- and a machine's penalties, then turn it into throughput:

  cycles per 1K instructions = events per 1K instructions x penalty (cycles)
  CPI = baseline CPI + sum / 1000
  transaction time = CPI x instructions / frequency
  lock penalty on c cores = lock fraction x (c - 1)

and per core count: the saturation throughput (all cores busy), the largest load whose mean
or percentile response time meets --target with one M/M/1 queue per core and with one shared
M/M/c queue, and with --clients the throughput of a closed-loop load generator (exact
machine-repairman model, equal to MVA).

examples:
  corecast throughput --machine penryn-l5420 --mpki w.toml --instructions 9200 \\
      --lock-fraction 0.13 --cores 1,2,4 --measured 1:128000,2:174000,4:232000
  corecast throughput --machine atom-n540 --sim result.json --target 500us --percentile 99
  corecast throughput --machine zen4-genoa --sim result.json --mrc curve.json --cores 1-16

with --mrc (a `corecast sim mrc --count exposed --json` curve) each core count gets its own
stack: the last-level misses at the share of the last-level cache its cores have (the cache
divided among the cores that share it), or at --cache-size for all.
"""


# ============================================================================ option parsing
# times, sizes, frequencies and plain numbers are read by corecast.parsing (one vocabulary for
# every command); what is this command's own is below


def _cores(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise argparse.ArgumentTypeError(f"not a core list: {text!r} (e.g. 1,2,4 or 1-8)")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if lo < 1 or hi < lo:
            raise argparse.ArgumentTypeError(f"core counts must be >= 1 and ranges ascending: {part!r}")
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


def _measured(text: str) -> dict[int, float]:
    """`CORES:THROUGHPUT,...`, each throughput a rate (`128000`, `128000/s`, `128/ms`)."""
    out: dict[int, float] = {}
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*[:=]\s*(\S+)\s*", part)
        if not m or int(m.group(1)) < 1:
            raise argparse.ArgumentTypeError(f"not a measured list: {text!r} (e.g. 1:128000,2:174000)")
        try:
            out[int(m.group(1))] = rate_per_s(m.group(2), None)
        except UserError as err:
            raise argparse.ArgumentTypeError(f"{part.strip()!r}: {err}") from None
    return out


def _penalty(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        v = float(value)
    except ValueError:
        v = math.nan
    if not sep or not name.strip() or not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"not a penalty: {text!r} (e.g. dram=200)")
    return name.strip(), v


def add_arguments(p: argparse.ArgumentParser) -> None:
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--sim", metavar="RESULT", help="a `corecast sim --json` result")
    src.add_argument("--mpki", metavar="FILE",
                     help="event frequencies per 1K instructions and baseline CPI (TOML, JSON or "
                          "CSV; see docs/throughput.md)")
    p.add_argument("--machine", metavar="M",
                   help="machine description: a bundled name (e.g. penryn-l5420) or a TOML file; "
                        "gives the frequency and the penalties (default with --sim: the machine "
                        "the result was simulated on)")
    p.add_argument("--baseline-cpi", type=arg(number), metavar="CPI",
                   help="the issue CPI with perfect caches and prediction (overrides the input's)")
    p.add_argument("--instructions", type=arg(number), metavar="I",
                   help="instructions per transaction (default: from the input)")
    p.add_argument("--lock-fraction", type=arg(fraction), metavar="F",
                   help="critical-section share of cycles; the lock penalty on c cores is F x (c - 1) "
                        "(default: from the input, else 0)")
    p.add_argument("--lock-model", choices=("wait-share", "amdahl"), default="wait-share",
                   help="how the lock penalty p costs throughput: wait-share X = c (1 - p) / T (the "
                        "paper's, default) or amdahl X = c / (T (1 + p))")
    p.add_argument("--cores", type=_cores, default=None, metavar="LIST",
                   help="core counts, e.g. 1,2,4 or 1-8 (default: 1, 2, 4, ... up to the machine's "
                        "cores)")
    p.add_argument("--frequency", type=arg(frequency_hz), metavar="F",
                   help="clock frequency, e.g. 2.5GHz (overrides the machine's)")
    p.add_argument("--penalty", type=_penalty, action="append", default=[], metavar="NAME=CYCLES",
                   help="override or add a penalty in cycles (repeatable)")
    p.add_argument("--target", type=arg(time_s), default=1e-3, metavar="T",
                   help="response-time target for the M/M/1 and M/M/c columns, e.g. 1ms, 200us "
                        "(default: 1ms)")
    p.add_argument("--percentile", type=arg(percentile), default=None, metavar="P",
                   help="bound this percentile of the response time instead of the mean (e.g. 99)")
    p.add_argument("--clients", type=arg(count), metavar="N",
                   help="closed-loop load generator with N clients (connections), solved exactly")
    p.add_argument("--think-time", type=arg(time_s, allow_zero=True), default=0.0, metavar="T",
                   help="each client's pause between a reply and its next request (default: 0)")
    p.add_argument("--measured", type=_measured, metavar="LIST",
                   help="measured throughput to compare with, e.g. 1:128000,2:174000")
    p.add_argument("--mrc", metavar="CURVE",
                   help="a miss-rate curve (`corecast sim mrc --count exposed --json`): the last-level "
                        "events then follow each core count's share of the last-level cache")
    p.add_argument("--cache-size", type=arg(size_bytes), metavar="SIZE",
                   help="with --mrc: the last-level cache each core has, e.g. 4MiB, for every core count "
                        "(default: the cache divided among the cores that share it)")
    add_format(p, "core count", json_help="print JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    from ..model.throughput import analyse      # numpy and the queueing models: not for -h
    from ..report.throughput import render

    out = analyse(mpki=args.mpki, sim=args.sim, machine=args.machine, frequency=args.frequency,
                  baseline_cpi=args.baseline_cpi, instructions=args.instructions,
                  lock_fraction=args.lock_fraction, lock_model=args.lock_model, cores=args.cores,
                  penalties=args.penalty, target=args.target, percentile=args.percentile,
                  clients=args.clients, think_time=args.think_time, measured=args.measured,
                  mrc=args.mrc, cache_size=args.cache_size)
    print_document(output_format(args), out, lambda: render(out), rows=throughput_rows, allow_nan=False,
                   default=_json_default)
    return 0


def _json_default(o: Any) -> Any:
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
