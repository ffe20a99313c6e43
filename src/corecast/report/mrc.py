"""Rendering of miss-rate curves: from a trace (corecast.sim.mrc) and from a running program's cache
ways (corecast.collect.occupancy): the terminal table, the plot, the Dataset."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..dataset import ColumnInfo, Dataset
from ..sim.mrc import MrcResult, auto_sizes, fmt_bytes
from .plots import literal, pyplot
from .terminal import fmt, titled_table

if TYPE_CHECKING:                     # the online curve's collector loads the perf layer
    from ..collect.occupancy import OnlineCurve


def render_terminal(res: MrcResult, con: Any) -> None:
    shared = res.curves[0]
    kind = "fully associative LRU" + (f"; {shared.set_associative['ways']}-way LRU beside it"
                                      if shared.set_associative else "")
    counted = "; misses of fetches, loads and read-modify-writes" if res.counted == "exposed" else ""
    t = titled_table(f"miss ratio against cache size ({kind}; {res.line}-byte lines; {res.accesses_kind} accesses"
                     + counted + (f"; SHARDS rate {res.sample_rate:.4g}" if res.sample_rate < 1 else "") + ")")
    t.add_column("cache size", justify="right")
    for c in res.curves:
        t.add_column(c.scope, justify="right")
        if c.instructions:
            t.add_column(f"{c.scope} MPKI", justify="right")
        if c.set_associative:
            t.add_column(f"{c.scope} {c.set_associative['ways']}-way", justify="right")
    for i, size in enumerate(shared.sizes_bytes):
        row = [fmt_bytes(size)]
        for c in res.curves:
            row.append(fmt(c.miss_ratio[i], 4))
            if c.instructions:
                row.append(fmt(c.mpki[i], 4))
            if c.set_associative:
                row.append(fmt(c.set_associative["miss_ratio"][i], 4))
        t.add_row(*row)
    con.print(t)
    for c in res.curves:
        ws = ", ".join(fmt_bytes(w) for w in c.working_sets_bytes) or "none found"
        con.print(f"{c.scope}: {c.accesses:,} accesses, {c.instructions:,} instructions, footprint "
                  f"{fmt_bytes(c.footprint_bytes)}, knee {fmt_bytes(c.knee_bytes) if c.knee_bytes else '-'}, "
                  f"working sets {ws}")
    if res.sample_error:
        con.print(f"[yellow]note: {res.sample_error}[/yellow]")


def figure(res: MrcResult, title: str) -> Any:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for c in res.curves:
        h = c.histogram
        if h is not None:          # the whole curve, not only the sizes asked for
            fine = np.array(auto_sizes(h.line, h.footprint_bytes, h.rate), dtype=float)
            grid = np.unique(np.concatenate([fine, np.geomspace(fine[0], fine[-1], 200)]))
            line, = ax.plot(grid, h.miss_ratio(grid), label=literal(c.scope))
            ax.plot(c.sizes_bytes, c.miss_ratio, "o", color=line.get_color(), ms=3)
        if c.set_associative:
            ax.plot(c.set_associative["sizes_bytes"], c.set_associative["miss_ratio"], "s--", ms=4,
                    label=literal(f"{c.scope}, {c.set_associative['ways']}-way"))
        if c.knee_bytes:
            ax.axvline(c.knee_bytes, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_bytes(v)))
    ax.set_xlabel("cache size")
    ax.set_ylabel("miss ratio")
    ax.set_ylim(bottom=0)
    ax.set_title(literal(title))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def to_dataset(res: MrcResult, source: str) -> Dataset:
    """The curve as a Dataset: one row per cache size (`cache_bytes`), the shared miss ratio and
    misses, and one miss-ratio column per thread when per-thread curves were asked for."""
    shared = res.curves[0]
    rows = []
    for i, size in enumerate(shared.sizes_bytes):
        row: dict[str, float] = {"cores": 1, "cache_bytes": float(size), "miss_ratio": shared.miss_ratio[i],
                                 "misses": shared.misses[i]}
        if shared.instructions:
            row["mpki"] = shared.mpki[i]
        for c in res.curves[1:]:
            row[f"miss_ratio_{c.scope.replace(' ', '_')}"] = c.miss_ratio[i]
        if shared.set_associative:
            row[f"miss_ratio_{shared.set_associative['ways']}way"] = shared.set_associative["miss_ratio"][i]
        rows.append(row)
    how = ("measured: exact LRU stack distances" if res.sample_rate >= 1 else
           f"estimated: SHARDS at rate {res.sample_rate:g}")
    ds = Dataset.from_rows(rows, notes={"mrc": f"miss-rate curve of {source} ({res.accesses_kind} "
                                                f"accesses, {res.line}-byte lines)", "cores": "constant 1"})
    for name in ds.metric_names:
        unit = {"cache_bytes": "bytes", "misses": "count", "mpki": "per 1K instructions"}.get(name, "ratio")
        ds.columns[name] = ColumnInfo(name=name, kind="other", unit=unit, source=how, status="ok")
    return ds


# ---------------------------------------------------------------------------- online (resctrl)
def _mib(v: float | None) -> str:
    return "-" if v is None else f"{v / (1 << 20):,.2f}"


def render_online(res: OnlineCurve, con: Any) -> None:
    from rich.table import Table
    size = f" of {fmt_bytes(res.cache_bytes)}" if res.cache_bytes else ""
    t = Table(title=f"last-level cache by ways ({res.ways_total} ways{size}): {' '.join(res.command)}")
    for name in ("ways", "cache", "seconds", "occupancy peak MiB", "occupancy mean MiB",
                 "memory traffic MiB", "LLC misses", "MPKI", "exit"):
        t.add_column(name, justify="right")
    for p in res.points:
        t.add_row(str(p.ways), fmt_bytes(p.cache_bytes) if p.cache_bytes else "-", f"{p.seconds:.2f}",
                  _mib(p.occupancy_peak), _mib(p.occupancy_mean), _mib(p.memory_bytes),
                  fmt(p.llc_misses, 4), fmt(p.mpki, 4), str(p.exit_status))
    con.print(t)
    for n in res.notes:
        con.print(f"[yellow]note: {n}[/yellow]")


def online_figure(res: OnlineCurve, title: str) -> Any:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    pts = sorted(res.points, key=lambda p: p.ways)
    x = [p.cache_bytes if p.cache_bytes else p.ways for p in pts]
    if any(p.mpki is not None for p in pts):
        ax.plot(x, [p.mpki for p in pts], "o-", label="LLC misses per 1K instructions")
        ax.set_ylabel("LLC MPKI")
    else:
        ax.plot(x, [None if p.memory_bytes is None else p.memory_bytes / (1 << 20) for p in pts], "o-",
                label="memory traffic (MBM)")
        ax.set_ylabel("memory traffic per run (MiB)")
    if any(p.occupancy_peak is not None for p in pts):
        ax2 = ax.twinx()
        ax2.plot(x, [None if p.occupancy_peak is None else p.occupancy_peak / (1 << 20) for p in pts], "s--",
                 color="grey", label="occupancy, peak")
        ax2.set_ylabel("LLC occupancy (MiB)")
        ax2.legend(loc="upper center", fontsize=8)
    if all(p.cache_bytes for p in pts):
        from matplotlib.ticker import FuncFormatter
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_bytes(v)))
        ax.set_xlabel("last-level cache allowed")
    else:
        ax.set_xlabel("ways allowed")
    ax.set_ylim(bottom=0)
    ax.set_title(literal(title))
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def online_dataset(res: OnlineCurve) -> Dataset:
    """One row per way count: the cache the ways hold, and what the run used of it."""
    rows = []
    for p in res.points:
        row = {"cores": 1, "ways": float(p.ways), "time_s": p.seconds}
        for key, v in (("cache_bytes", p.cache_bytes), ("occupancy_peak_bytes", p.occupancy_peak),
                       ("occupancy_mean_bytes", p.occupancy_mean), ("memory_bytes", p.memory_bytes),
                       ("llc_misses", p.llc_misses), ("mpki", p.mpki)):
            if v is not None:
                row[key] = float(v)
        rows.append(row)
    ds = Dataset.from_rows(rows, notes={"mrc": f"LLC ways restricted with resctrl: {' '.join(res.command)}",
                                        "cores": "constant 1"})
    units = {"ways": "count", "cache_bytes": "bytes", "occupancy_peak_bytes": "bytes",
             "occupancy_mean_bytes": "bytes", "memory_bytes": "bytes", "llc_misses": "count",
             "mpki": "per 1K instructions"}
    for name in ds.metric_names:
        if name in units:
            ds.columns[name] = ColumnInfo(name=name, kind="other", unit=units[name],
                                          source="resctrl (CAT, CMT, MBM)" if name != "mpki" and name != "llc_misses"
                                          else "perf", status="ok")
    return ds
