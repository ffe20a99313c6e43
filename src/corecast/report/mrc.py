"""Rendering of miss-rate curves (corecast.sim.mrc): the terminal table, the plot, the Dataset."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dataset import ColumnInfo, Dataset
from ..sim.mrc import MrcResult, auto_sizes, fmt_bytes
from .plots import pyplot
from .terminal import fmt, titled_table


def render_terminal(res: MrcResult, con: Any) -> None:
    shared = res.curves[0]
    kind = "fully associative LRU" + (f"; {shared.set_associative['ways']}-way LRU beside it"
                                      if shared.set_associative else "")
    t = titled_table(f"miss ratio against cache size ({kind}; {res.line}-byte lines; {res.accesses_kind} accesses"
                    + (f"; SHARDS rate {res.sample_rate:.4g}" if res.sample_rate < 1 else "") + ")")
    t.add_column("cache size", justify="right")
    for c in res.curves:
        t.add_column(c.scope, justify="right")
        if c.set_associative:
            t.add_column(f"{c.scope} {c.set_associative['ways']}-way", justify="right")
    for i, size in enumerate(shared.sizes_bytes):
        row = [fmt_bytes(size)]
        for c in res.curves:
            row.append(fmt(c.miss_ratio[i], 4))
            if c.set_associative:
                row.append(fmt(c.set_associative["miss_ratio"][i], 4))
        t.add_row(*row)
    con.print(t)
    for c in res.curves:
        ws = ", ".join(fmt_bytes(w) for w in c.working_sets_bytes) or "none found"
        con.print(f"{c.scope}: {c.accesses:,} accesses, footprint {fmt_bytes(c.footprint_bytes)}, "
                  f"knee {fmt_bytes(c.knee_bytes) if c.knee_bytes else '-'}, working sets {ws}")
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
            line, = ax.plot(grid, h.miss_ratio(grid), label=c.scope)
            ax.plot(c.sizes_bytes, c.miss_ratio, "o", color=line.get_color(), ms=3)
        if c.set_associative:
            ax.plot(c.set_associative["sizes_bytes"], c.set_associative["miss_ratio"], "s--", ms=4,
                    label=f"{c.scope}, {c.set_associative['ways']}-way")
        if c.knee_bytes:
            ax.axvline(c.knee_bytes, color="grey", ls=":", lw=1)
    ax.set_xscale("log", base=2)
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_bytes(v)))
    ax.set_xlabel("cache size")
    ax.set_ylabel("miss ratio")
    ax.set_ylim(bottom=0)
    ax.set_title(title)
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
        unit = "bytes" if name == "cache_bytes" else ("count" if name == "misses" else "ratio")
        ds.columns[name] = ColumnInfo(name=name, kind="other", unit=unit, source=how, status="ok")
    return ds
