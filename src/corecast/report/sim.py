"""The text of `corecast sim`: a simulation's tables (MPKI per cache, TLBs, branches,
coherence, the issue model, the events a CPI stack takes) and the bundled machine descriptions.

rich is imported when drawing (for start-up time: `sim --json` never loads it).
"""
from __future__ import annotations

from typing import Any, Sequence

from ..messages import visible
from ..sim.machine import MachineDescription
from ..sim.result import SimResult


def _fmt(x: Any, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:,.{digits}f}"
    return f"{x:,}"


def render_result(res: SimResult, machine: MachineDescription) -> None:
    """The tables of `corecast sim TRACE` (without --json)."""
    from .terminal import console, titled_table

    con = console()
    d = res.to_dict()
    con.print(f"[bold]{machine.summary()}[/bold]")
    tr = d["trace"]
    line = (f"trace {tr.get('path') or '-'}: {d['instructions']:,} instructions on "
            f"{d['cores']} core{'s' if d['cores'] > 1 else ''}")
    if d["cores"] > 1:
        line += f" (split by {d['split']})"
    if d["warmup_instructions"]:
        line += f", after {d['warmup_instructions']:,} warm-up instructions"
    con.print(line)
    if d["transactions"]:
        con.print(f"transactions: {d['transactions']:,}, instructions per transaction "
                  f"{_fmt(d['instructions_per_transaction'], 1)}")
    acc = d["accesses"]
    con.print(f"accesses: {acc['load']:,} loads, {acc['store']:,} stores, {acc['modify']:,} "
              f"read-modify-writes, {acc['split_loads'] + acc['split_stores']:,} straddle a line")

    t = titled_table("caches (MPKI: misses per 1,000 instructions)")
    for col in ("cache", "accesses", "misses", "MPKI", "load MPKI", "store MPKI",
                "fetch MPKI", "miss ratio", "writebacks"):
        t.add_column(col, justify="left" if col == "cache" else "right")
    if d["cores"] > 1:
        t.add_column("coherence misses", justify="right")
    for c in d["caches"]:
        row = [f"{c['name']} ({c['instances']}x)" if c["instances"] > 1 else c["name"],
               _fmt(sum(c["accesses"].values())), _fmt(c["misses_total"]), _fmt(c["mpki"]),
               _fmt(c["load_mpki"]), _fmt(c["store_mpki"]), _fmt(c["fetch_mpki"]),
               _fmt(c["miss_ratio"], 4), _fmt(c["writebacks"])]
        if d["cores"] > 1:
            row.append(_fmt(c["coherence_misses"]))
        t.add_row(*row)
    con.print(t)
    if d["tlbs"]:
        t = titled_table("TLBs")
        for col in ("TLB", "entries", "accesses", "misses", "MPKI", "miss ratio"):
            t.add_column(col, justify="left" if col == "TLB" else "right")
        for x in d["tlbs"]:
            t.add_row(x["name"], _fmt(x["entries"]), _fmt(x["accesses"]), _fmt(x["misses"]),
                      _fmt(x["mpki"]), _fmt(x["miss_ratio"], 4))
        con.print(t)
    b = d["branch"]
    if b:
        con.print(f"branches: {b['branches']:,} ({b['conditional']:,} conditional), "
                  f"{b['predictor']} mispredicts {b['mispredicts']:,} = {_fmt(b['mpki'])} MPKI, "
                  f"accuracy {_fmt(b['accuracy'] * 100 if b['accuracy'] is not None else None, 2)}%")
    if d["cores"] > 1:
        c = d["coherence"]
        con.print(f"coherence: {c['invalidations']:,} invalidations, {c['coherence_misses']:,} "
                  f"coherence misses, {c['upgrades']:,} upgrades, {c['interventions']:,} "
                  "interventions (a modified copy supplied the data)")
    iss = d["issue"]
    if iss:
        con.print(f"issue model: {iss['uops']:,} uops, {iss['cycles']:,} cycles, baseline CPI "
                  f"[bold]{_fmt(iss['baseline_cpi'], 3)}[/bold] (scheduler {iss['scheduler_size']}, "
                  f"width {iss['issue_width']})")
        if iss.get("note"):
            con.print(f"  note: {iss['note']}")
    ev = d["events_per_kilo_instruction"]
    if ev:
        t = titled_table("events per 1,000 instructions (for the CPI stack)")
        t.add_column("event")
        t.add_column("per 1K instr", justify="right")
        t.add_column("penalty (cycles)", justify="right")
        for k, v in ev.items():
            pen = machine.penalties.get(k)
            t.add_row(k, _fmt(v, 3), _fmt(pen, 1) if pen is not None else "not given")
        con.print(t)
    for k, why in d["unavailable"].items():
        con.print(f"[yellow]{k}: unavailable: {why}[/yellow]")


def render_machines(machines: Sequence[MachineDescription]) -> None:
    """`corecast sim machines`: one line per machine."""
    for m in machines:
        _line(f"{m.name:16s} {m.description}")


def render_machine(m: MachineDescription) -> None:
    """`corecast sim machines NAME`: the description in words."""
    _line(m.summary())
    if m.description:
        _line(m.description)
    _line(f"cores: {m.cores}; pipeline: fetch depth {m.pipeline.fetch_depth}, scheduler "
          f"{m.pipeline.scheduler_size}, drain IPC {m.pipeline.drain_ipc}, issue width "
          f"{m.pipeline.issue_width}, units {m.pipeline.units}")
    for c in sorted(m.caches, key=lambda c: (c.level, c.kind)):
        share = "private" if c.shared == 1 else ("shared by all cores" if c.shared == 0
                                                  else f"shared by {c.shared} cores")
        _line(f"  {c.name}: {c.size // 1024} KiB, {c.ways}-way, {c.sets} sets, "
              f"{c.line_size} B lines, {c.replacement}, {c.policy}, "
              f"{'write-allocate' if c.write_allocate else 'no write-allocate'}, {share}")
    for t in m.tlbs:
        _line(f"  {t.name}: {t.entries} entries, {t.ways}-way, {t.page_size // 1024} KiB pages")
    if m.branch:
        _line(f"  branch: {m.branch.kind}, {m.branch.history_bits} history bits, "
              f"{m.branch.table_size} counters")
    for k, v in m.penalties.items():
        _line(f"  penalty {k}: {v:g} cycles ({m.penalty_sources.get(k, 'given')})")


def _line(text: str) -> None:
    """A line of a machine's description on standard output, its control characters shown as
    \\xNN (a machine file may come from another user: its name and description are its text)."""
    print(visible(text))
