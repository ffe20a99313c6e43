"""What `corecast measure` shows: the progress of a campaign while it runs (a line with the time
left on a terminal's standard error, a line for every failed run and every notice) and the
summary of a campaign file per core count (the table, and the rows `measure --json` prints).

rich is imported where it draws (for start-up time): `corecast measure -q --json` never loads it;
without rich the tables are plain text (report.terminal).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import messages
from ..collect.runner import Reporter, Slot
from ..dataset import Dataset
from ..store import OK, RunRecord
from .terminal import escape, fmt, new_table


# ====================================================================== progress
class ProgressReporter(Reporter):
    """The campaign's progress on standard error (corecast.messages.Progress: a line with the
    runs done, the time left and the run going on, on a terminal only); a line for every run
    that fails and every notice, above it. Before, a rich progress bar: its console printed the
    bar's last state into a redirected standard error (`measure ... 2>err`), and a resumed
    campaign with nothing left showed a spinner at 8/8."""

    def __init__(self, console: Any = None, verbose: bool = False):
        self.verbose = verbose
        self.progress: messages.Progress | None = None

    def start(self, total: int, done: int) -> None:
        if done >= total:               # nothing left to run (a finished campaign resumed)
            return
        self.progress = messages.Progress("measuring", unit="runs")
        self.progress.begin(total, done=done)

    def run_started(self, slot: Slot, index: int) -> None:
        if self.progress is not None:
            kind = "warm-up" if slot.warmup else f"rep {slot.repetition + 1}"
            self.progress.update(self.progress.done,
                                 f"{slot.cores} core{'s' if slot.cores != 1 else ''}, {kind}")

    def run_finished(self, record: RunRecord) -> None:
        kind = "warm-up" if record.warmup else f"rep {record.repetition + 1}"
        cores = f"{record.cores} core{'s' if record.cores != 1 else ''}"
        if self.verbose and record.status == OK:
            messages.say(f"run {record.slot} ({cores}, {kind}): ok, {fmt(record.values.get('time_s'))} s")
        if record.status != OK:
            messages.say(f"run {record.slot} ({cores}, {kind}): {record.status}: {record.message}")
            for line in (record.stderr_tail or "").strip().splitlines()[-3:]:
                messages.say(f"    {line[:200]}")
        if self.progress is not None:
            self.progress.advance(1)

    def notice(self, text: str) -> None:
        messages.say(f"note: {text}")

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.close()
            self.progress = None


# ====================================================================== summary
def summary_rows(ds: Dataset) -> list[dict[str, Any]]:
    """Per core count: runs, failures, median time and throughput, speedup, peak RSS, stalls."""
    rows = []
    cores = ds.distinct_cores
    exit_st = ds.metrics.get("exit_status")
    tput_name = "throughput" if "throughput" in ds.metrics and np.isfinite(ds.metrics["throughput"]).any() else None
    stalls = ds.stall_names
    for c in cores:
        m = ds.cores == c
        n = int(m.sum())
        failed = int(np.sum(m & np.isfinite(exit_st) & (exit_st != 0))) if exit_st is not None else 0
        row: dict[str, Any] = {"cores": int(c), "runs": n, "failed": failed}
        for name in ("time_s", "rss_bytes"):
            if name in ds.metrics:
                v = ds.metrics[name][m]
                v = v[np.isfinite(v)]
                row[name] = (float(np.median(v)), float(v.min()), float(v.max())) if len(v) else None
        if tput_name:
            v = ds.metrics[tput_name][m]
            v = v[np.isfinite(v)]
            row["throughput"] = float(np.median(v)) if len(v) else None
        st = {}
        for s in stalls:
            v = ds.metrics[s][m]
            v = v[np.isfinite(v)]
            if len(v):
                st[s] = float(np.median(v))
        row["stalls"] = st
        rows.append(row)

    # Speedup: throughput (or 1/time) relative to the smallest core count, scaled so that the
    # smallest count's speedup is its core count (1 core -> 1.0).
    def rate(r: dict[str, Any]) -> float | None:
        if tput_name:
            return r.get("throughput")
        return 1.0 / r["time_s"][0] if r.get("time_s") and r["time_s"][0] > 0 else None
    first = next((r for r in rows if rate(r)), None)
    for r in rows:
        x = rate(r)
        r["speedup"] = x / rate(first) * first["cores"] if (x and first) else None
    return rows


def render_summary(ds: Dataset, console: Any) -> None:
    """Two tables: time/throughput/memory per core count, then the stall categories."""
    rows = summary_rows(ds)
    # Titles are lines of their own, not table titles (rich wraps those to the table's width).
    console.print(escape(f"{ds.path}: {ds.command or ''}"))
    t = new_table()
    t.add_column("cores", justify="right")
    t.add_column("runs ok", justify="right")
    t.add_column("time_s", justify="right")
    t.add_column("min – max", justify="right")
    has_x = any(r.get("throughput") is not None for r in rows)
    if has_x:
        t.add_column("throughput", justify="right")
    t.add_column("speedup", justify="right")
    t.add_column("peak RSS", justify="right")
    for r in rows:
        runs = f"{r['runs'] - r['failed']}/{r['runs']}"
        if r["failed"]:
            runs = f"[red]{runs}[/]"
        ts = r.get("time_s")
        cells = [str(r["cores"]), runs, fmt(ts[0]) if ts else "-", f"{fmt(ts[1])} – {fmt(ts[2])}" if ts else "-"]
        if has_x:
            cells.append(fmt(r.get("throughput")))
        cells.append(f"{r['speedup']:.2f}" if r.get("speedup") else "-")
        rss = r.get("rss_bytes")
        cells.append(f"{rss[0] / 2**20:.1f} MiB" if rss else "-")
        t.add_row(*cells)
    console.print(t)
    names = [n for n in ds.stall_names if any(r["stalls"].get(n, 0) > 0 for r in rows)]
    if names:
        console.print("stall categories: median cycles per run, summed over threads")
        st = new_table()
        st.add_column("cores", justify="right")
        for n in names:
            st.add_column(n.removesuffix("_cycles"), justify="right")
        for r in rows:
            st.add_row(str(r["cores"]), *[fmt(r["stalls"].get(n)) for n in names])
        console.print(st)
