"""The tables of `corecast throughput`: the CPI stack, then the throughput per core count
(the document `corecast.model.throughput.analyse` returns).

rich is imported when drawing (for start-up time: `throughput --json` never loads it).
"""
from __future__ import annotations

import math
from typing import Any

from ..sim.mrc import fmt_bytes
from .terminal import duration


def _time(t: float | None) -> str:
    """A time to four figures in a unit that fits (`terminal.duration`); — where there is none."""
    return duration(t, 4, "—")


def _fmt_num(v: float | None, digits: int = 4) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "—"
    return f"{v:,.{digits}g}" if abs(v) < 1e5 else f"{v:,.0f}"


def _rps(v: float | None) -> str:
    return "—" if v is None or not math.isfinite(v) else f"{v:,.0f}"


def render(out: dict[str, Any]) -> None:
    from rich.table import Table

    from .terminal import console as make_console

    console = make_console()
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

    llc = out.get("llc")
    if llc:
        share = (f"{fmt_bytes(llc['cache_size'])} per core at every core count" if llc["cache_size"]
                 else f"divided among the cores sharing one ({llc['shared_by']})")
        console.print(f"\n{llc['name']} {fmt_bytes(llc['size_bytes'])}: {share}; the input's events were taken "
                      f"at {fmt_bytes(llc['events_at_bytes'])} per core; miss-rate curve {llc['curve']}",
                      width=min(console.width, 100))
    tgt = out["target"]
    title = (f"Throughput: {out['instructions']:,.0f} instructions per transaction, lock fraction "
             f"{out['lock_fraction']:g} ({out['lock_model']}), target {tgt['statistic']} response "
             f"<= {_time(tgt['seconds'])}")
    console.print()
    console.print(title, width=min(console.width, 100))
    t = Table()
    names = ("cores", "lock", "CPI", "time/txn", "saturation", "M/M/1", "M/M/c")
    if llc:
        names = ("cores", f"{llc['name']}/core", "DRAM /1K", "stack CPI") + names[1:]
    for name in names:
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
        row = [str(r["cores"])]
        if llc:
            row += [fmt_bytes(r["llc_share_bytes"]), f"{r['llc_events'].get('dram', 0.0):.3f}",
                    _fmt_num(r["stack_cpi"])]
        row += [f"{100 * r['lock_penalty']:.0f}%", _fmt_num(r["cpi"]),
               _time(r["transaction_time_s"]), _rps(r["capacity"]),
               _rps(r["mm1"]["arrival_rate"]) if r["mm1"] else "—",
               _rps(r["mmc"]["arrival_rate"]) if r["mmc"] else "—"]
        if closed:
            c = r["closed"]
            row += [_rps(c["throughput"]) if c else "—", _time(c["response_time_s"]) if c else "—"]
        if has_meas:
            row += [_rps(r["measured"]), "—" if r["error"] is None else f"{100 * r['error']:+.1f}%"]
        t.add_row(*row)
    console.print(t)
    legend = ("throughput in requests/s. lock: penalty lock fraction x (c - 1); saturation: every core "
              "busy; M/M/1: one queue per core, M/M/c: one shared queue, each at the largest load "
              "meeting the target")
    if closed:
        legend += (f"; closed: {closed['clients']} closed-loop clients, think time "
                   f"{_time(closed['think_time_s']) if closed['think_time_s'] else '0'} "
                   "(machine-repairman model, exact)")
    if has_meas:
        legend += "; error: (saturation - measured) / measured"
    if llc:
        legend += (f"; {llc['name']}/core: the last-level cache each core has; DRAM /1K: its misses per 1K "
                   "instructions there, from the curve; stack CPI: before the lock penalty")
    console.print(legend + ".", width=min(console.width, 100))
    for n in out["notes"]:
        console.print(f"note: {n}")
