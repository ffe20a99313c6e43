"""`corecast throughput`: a CPI stack and the server throughput it implies (the memcached method
of Hart, Frachtenberg and Berezecki)."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from ..errors import UserError

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
"""


# ============================================================================ option parsing
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_FREQ_UNITS = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def _time(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*(s|ms|us|µs|ns)?\s*", text)
    try:
        v = float(m.group(1)) * _TIME_UNITS[m.group(2) or "s"] if m else math.nan
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v < 0:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (e.g. 1ms, 500us, 0.002)")
    return v


def _frequency(text: str) -> float:
    m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*([kKmMgG]?[hH][zZ])?\s*", text)
    try:
        v = float(m.group(1)) * _FREQ_UNITS[(m.group(2) or "hz").lower()] if m else math.nan
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"not a frequency: {text!r} (e.g. 2.5GHz, 1.66e9)")
    return v


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


def _percentile(text: str) -> float | None:
    t = text.strip().lower()
    if t == "mean":
        return None
    t = t[1:] if t.startswith("p") else t
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentile: {text!r} (mean, 99, p99.9, 0.95)") from None
    if v >= 1.0:
        v /= 100.0
    if not (0.0 < v < 1.0):
        raise argparse.ArgumentTypeError(f"a percentile must lie strictly between 0 and 100: {text!r}")
    return v


def _measured(text: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*[:=]\s*([0-9.eE+]+)\s*", part)
        if not m or int(m.group(1)) < 1:
            raise argparse.ArgumentTypeError(f"not a measured list: {text!r} (e.g. 1:128000,2:174000)")
        try:
            out[int(m.group(1))] = float(m.group(2))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number in {part!r}") from None
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


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return v


def _fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (0.0 <= v < 1.0):
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1): {text!r}")
    return v


def _count(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1: {text!r}")
    return v


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
    p.add_argument("--baseline-cpi", type=_positive_float, metavar="CPI",
                   help="the issue CPI with perfect caches and prediction (overrides the input's)")
    p.add_argument("--instructions", type=_positive_float, metavar="I",
                   help="instructions per transaction (default: from the input)")
    p.add_argument("--lock-fraction", type=_fraction, metavar="F",
                   help="critical-section share of cycles; the lock penalty on c cores is F x (c - 1) "
                        "(default: from the input, else 0)")
    p.add_argument("--lock-model", choices=("wait-share", "amdahl"), default="wait-share",
                   help="how the lock penalty p costs throughput: wait-share X = c (1 - p) / T (the "
                        "paper's, default) or amdahl X = c / (T (1 + p))")
    p.add_argument("--cores", type=_cores, default=None, metavar="LIST",
                   help="core counts, e.g. 1,2,4 or 1-8 (default: 1, 2, 4, ... up to the machine's "
                        "cores)")
    p.add_argument("--frequency", type=_frequency, metavar="F",
                   help="clock frequency, e.g. 2.5GHz (overrides the machine's)")
    p.add_argument("--penalty", type=_penalty, action="append", default=[], metavar="NAME=CYCLES",
                   help="override or add a penalty in cycles (repeatable)")
    p.add_argument("--target", type=_time, default=1e-3, metavar="T",
                   help="response-time target for the M/M/1 and M/M/c columns, e.g. 1ms, 200us "
                        "(default: 1ms)")
    p.add_argument("--percentile", type=_percentile, default=None, metavar="P",
                   help="bound this percentile of the response time instead of the mean (e.g. 99)")
    p.add_argument("--clients", type=_count, metavar="N",
                   help="closed-loop load generator with N clients (connections), solved exactly")
    p.add_argument("--think-time", type=_time, default=0.0, metavar="T",
                   help="each client's pause between a reply and its next request (default: 0)")
    p.add_argument("--measured", type=_measured, metavar="LIST",
                   help="measured throughput to compare with, e.g. 1:128000,2:174000")
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")


# ============================================================================ inputs
def _read_inputs(args: argparse.Namespace):
    from ..model import cpi
    if args.mpki:
        return cpi.load_mpki(args.mpki), "mpki", args.mpki
    return cpi.load_sim(args.sim, baseline_cpi=args.baseline_cpi), "sim", args.sim


def _default_cores(machine: Any) -> list[int]:
    """1, 2, 4, ... up to the machine's core count (and the count itself)."""
    n = int(getattr(machine, "cores", 1) or 1)
    out = [1 << i for i in range(n.bit_length()) if (1 << i) <= n]
    return sorted(set(out + [n]))


def build(args: argparse.Namespace) -> dict[str, Any]:
    """Everything the command prints, as plain data."""
    from ..model import cpi
    inputs, kind, path = _read_inputs(args)
    if args.baseline_cpi is not None and kind == "mpki":
        inputs.baseline_cpi = args.baseline_cpi
    notes: list[str] = []
    machine = None
    if args.machine:
        from ..sim.machine import load_machine
        machine = load_machine(args.machine)
        if inputs.machine and inputs.machine != machine.name:
            notes.append(f"the events were simulated on '{inputs.machine}' but the penalties and "
                         f"frequency are '{machine.name}''s")
    elif inputs.machine:
        from ..sim.machine import load_machine
        ref = inputs.machine_path if inputs.machine_path and Path(inputs.machine_path).exists() else inputs.machine
        machine = load_machine(ref)
    elif args.frequency is None:
        raise UserError("give --machine (frequency and penalties) or at least --frequency")
    frequency = args.frequency if args.frequency is not None else machine.frequency_hz
    penalties: dict[str, float] = {}
    sources: dict[str, str] = {}
    if machine is not None:
        for k, v in machine.penalties.items():
            penalties[k] = float(v)
            how = machine.penalty_sources.get(k, "given")
            sources[k] = f"machine {machine.name}" + ("" if how == "given" else f" ({how})")
    for k, v in inputs.penalties.items():
        penalties[k], sources[k] = v, f"input {Path(path).name}"
    for k, v in args.penalty:
        penalties[k], sources[k] = v, "--penalty"
    stack = cpi.cpi_stack(inputs.baseline_cpi, inputs.events, penalties, labels=inputs.labels,
                          penalty_sources=sources)
    instructions = args.instructions if args.instructions is not None else inputs.instructions
    if instructions is None:
        raise UserError(f"instructions per transaction unknown: give --instructions (the input {path} "
                        "does not say)")
    lock = args.lock_fraction if args.lock_fraction is not None else (inputs.lock_fraction or 0.0)
    cores = args.cores or _default_cores(machine)
    ests = cpi.estimate_cores(stack.cpi, instructions, frequency, cores, lock, args.lock_model)
    rows = cpi.throughput_at_cores(ests, target=args.target, percentile=args.percentile,
                                   clients=args.clients, think_time=args.think_time,
                                   measured=args.measured)
    notes = list(inputs.notes) + notes
    for c in stack.components:
        if "formula" in c.penalty_source:
            notes.append(f"{c.name} penalty {c.penalty_cycles:g} cycles from the {c.penalty_source}")
    if args.measured:
        extra = sorted(set(args.measured) - set(cores))
        if extra:
            notes.append(f"measured values at {', '.join(map(str, extra))} core(s) are not among --cores")
    return {
        "machine": None if machine is None else {"name": machine.name, "path": machine.path},
        "frequency_hz": frequency,
        "input": {"kind": kind, "path": str(path)},
        "instructions": instructions,
        "lock_fraction": lock,
        "lock_model": args.lock_model,
        "stack": {**stack.to_dict(), "rows": stack.rows()},
        "target": {"seconds": args.target,
                   "statistic": "mean" if args.percentile is None else f"p{100 * args.percentile:g}"},
        "closed_loop": None if args.clients is None else {"clients": args.clients,
                                                          "think_time_s": args.think_time},
        "cores": [r.to_dict() for r in rows],
        "notes": notes + [n for r in rows for n in r.notes],
    }


# ============================================================================ rendering
def _fmt_num(v: float | None, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:,.{digits}g}" if abs(v) < 1e5 else f"{v:,.0f}"


def _fmt_time(t: float | None) -> str:
    if t is None or not math.isfinite(t):
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if t >= scale:
            return f"{t / scale:.4g} {unit}"
    return f"{t / 1e-9:.4g} ns"


def _rps(v: float | None) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:,.0f}"


def render(out: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    probe = Console()
    console = Console(highlight=False, soft_wrap=False,
                      width=probe.width if probe.is_terminal else 200)
    mach = out["machine"]["name"] if out["machine"] else "(no machine)"
    st = out["stack"]
    console.print(f"CPI stack: {mach} at {out['frequency_hz'] / 1e9:.4g} GHz, "
                  f"{out['input']['kind']} {out['input']['path']}")
    t = Table()
    t.add_column("component")
    t.add_column("per 1K instructions", justify="right")
    t.add_column("penalty (cycles)", justify="right")
    t.add_column("cycles per 1K instructions", justify="right")
    t.add_column("share", justify="right")
    total = st["cycles_per_kilo"]
    for r in st["rows"]:
        is_total = r["name"] == "total"
        t.add_row(r["component"] if not is_total else f"total (CPI {st['cpi']:.4g})",
                  "—" if r["per_kilo"] is None else f"{r['per_kilo']:,.3f}",
                  "—" if r["penalty_cycles"] is None else f"{r['penalty_cycles']:,.4g}",
                  f"{r['cycles_per_kilo']:,.1f}",
                  "" if is_total else f"{100 * r['cycles_per_kilo'] / total:.1f}%",
                  end_section=r["name"] == st["rows"][-2]["name"])
    console.print(t)

    tgt = out["target"]
    title = (f"Throughput: {out['instructions']:,.0f} instructions per transaction, lock fraction "
             f"{out['lock_fraction']:g} ({out['lock_model']}), target {tgt['statistic']} response "
             f"<= {_fmt_time(tgt['seconds'])}")
    console.print()
    console.print(title, width=min(console.width, 100))
    t = Table()
    for name in ("cores", "lock", "CPI", "time/txn", "saturation", "M/M/1", "M/M/c"):
        t.add_column(name, justify="right", no_wrap=True)
    closed = out["closed_loop"]
    if closed:
        t.add_column(f"closed N={closed['clients']}", justify="right", no_wrap=True)
        t.add_column("closed resp.", justify="right", no_wrap=True)
    has_meas = any(r["measured"] is not None for r in out["cores"])
    if has_meas:
        t.add_column("measured", justify="right", no_wrap=True)
        t.add_column("error", justify="right", no_wrap=True)
    for r in out["cores"]:
        row = [str(r["cores"]), f"{100 * r['lock_penalty']:.0f}%", _fmt_num(r["cpi"]),
               _fmt_time(r["transaction_time_s"]), _rps(r["capacity"]),
               _rps(r["mm1"]["arrival_rate"]) if r["mm1"] else "—",
               _rps(r["mmc"]["arrival_rate"]) if r["mmc"] else "—"]
        if closed:
            c = r["closed"]
            row += [_rps(c["throughput"]) if c else "—", _fmt_time(c["response_time_s"]) if c else "—"]
        if has_meas:
            row += [_rps(r["measured"]), "—" if r["error"] is None else f"{100 * r['error']:+.1f}%"]
        t.add_row(*row)
    console.print(t)
    legend = ("throughput in requests/s. lock: penalty lock fraction x (c - 1); saturation: every core "
              "busy; M/M/1: one queue per core, M/M/c: one shared queue, each at the largest load "
              "meeting the target")
    if closed:
        legend += (f"; closed: {closed['clients']} closed-loop clients, think time "
                   f"{_fmt_time(closed['think_time_s']) if closed['think_time_s'] else '0'} "
                   "(machine-repairman model, exact)")
    if has_meas:
        legend += "; error: (saturation - measured) / measured"
    console.print(legend + ".", width=min(console.width, 100))
    for n in out["notes"]:
        console.print(f"note: {n}")


def run(args: argparse.Namespace) -> int:
    out = build(args)
    if args.json:
        json.dump(out, sys.stdout, indent=2, allow_nan=False, default=_json_default)
        sys.stdout.write("\n")
    else:
        render(out)
    return 0


def _json_default(o: Any) -> Any:
    try:
        import numpy as np
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
