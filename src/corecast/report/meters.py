"""What `corecast meters show`, `list` and `replay` print, the replay's plot (RCRTool's
trace view: each meter over time, the trigger states and the advice below) and its --json
document (which `corecast serve` shows beside the recording's rows)."""
from __future__ import annotations

import math
import re
import time
from typing import Any, Iterable

import numpy as np

from rich.console import Console
from rich.markup import escape

from . import plots
from .terminal import fmt, make_table


def _unavailable(con: Console, items: Iterable[tuple[str, str, str]]) -> None:
    """Unavailable meters grouped by meter: `meter (scopes): reason`."""
    groups: dict[tuple[str, str], list[str]] = {}
    for name, scope, reason in items:
        groups.setdefault((name, reason), []).append(scope)
    if not groups:
        return
    con.print("[bold]Unavailable[/bold]")
    for (name, reason), scopes in groups.items():
        where = scopes[0] if len(scopes) == 1 else f"{len(scopes)} scopes"
        con.print(f"  {escape(name)} ({escape(where)}): {escape(reason.removeprefix('unavailable: '))}")


def show(snap: Any, con: Console) -> None:
    """A live board (a meters.Snapshot)."""
    age = time.time() - snap.heartbeat_real_s if snap.heartbeat_real_s else None
    state = f"[bold red]stale[/bold red]: {escape(snap.stale)}" if snap.stale else "live"
    con.print(f"[bold]blackboard {escape(snap.name)}[/bold]: daemon pid {snap.pid}, {state}; every "
              f"{fmt(snap.interval_s * 1e3)} ms, window {fmt(snap.window_s * 1e3)} ms; {snap.ticks} ticks "
              f"({snap.late_ticks} lost)" + (f"; last tick {fmt(age)} s ago" if age is not None else ""))
    rows = []
    for m, r in snap.meters:
        if m.quality == "unavailable" or (m.scope_kind == "thread" and not r.aux):
            continue
        scope = f"{m.scope} (tid {r.aux})" if m.scope_kind == "thread" else m.scope
        rows.append([m.name, scope, r.current, r.avg, r.min, r.max, m.unit, m.quality])
    con.print(make_table("Meters", ["meter", "scope", "current", "avg", "min", "max", "unit", "quality"], rows,
                         justify=["left", "left", "right", "right", "right", "right", "left", "left"]))
    if snap.triggers:
        con.print(make_table("Triggers", ["trigger", "scope", "meter", "state", "value", "low", "high", "dwell s",
                                          "changes"],
                             [[t.name, t.scope, t.meter, s.state, s.value, t.low, t.high, t.dwell_s, s.transitions]
                              for t, s in snap.triggers],
                             justify=["left", "left", "left", "left"] + ["right"] * 5))
    if snap.advice:
        con.print(make_table("Advice", ["scope", "allowed_workers", "min", "max", "policy", "triggers high"],
                             [[a.scope, s.allowed, a.min_workers, a.max_workers, a.policy, s.high_triggers]
                              for a, s in snap.advice],
                             justify=["left", "right", "right", "right", "left", "right"]))
    if snap.apps:
        con.print(make_table("Application area", ["app", "pid", "key", "value", "alive"],
                             [[a.app, a.pid, a.key, a.value, a.alive] for a in snap.apps],
                             justify=["left", "right", "left", "right", "left"]))
    _unavailable(con, [(m.name, m.scope, m.source) for m, _r in snap.meters if m.quality == "unavailable"])


def listing_doc(instances: Iterable[Any]) -> dict[str, Any]:
    """`meters list --json`: every meter and scope, with its status and source (or why not)."""
    rows = []
    for i in instances:
        status, _, source = i.source.partition(": ")
        if status not in ("measured", "derived", "unavailable"):
            status, source = ("measured" if i.available else "unavailable"), i.source
        rows.append({"meter": i.meter.name, "scope": i.scope.name, "unit": i.meter.unit, "status": status,
                     "source": source})
    return {"kind": "corecast-meters-list", "meters": rows}


def listing(instances: Iterable[Any], con: Console) -> None:
    """The meters this machine gives (catalog.Instance), without starting a daemon."""
    live: dict[tuple[str, str, str], list[str]] = {}
    gone = []
    for i in instances:
        if i.available:
            live.setdefault((i.meter.name, i.meter.unit, i.source), []).append(i.scope.name)
        else:
            gone.append((i.meter.name, i.scope.name, i.source))
    rows = [[name, ", ".join(s) if len(s) <= 4 else f"{s[0]} ... {s[-1]} ({len(s)})", unit, src]
            for (name, unit, src), s in live.items()]
    con.print(make_table("Meters", ["meter", "scopes", "unit", "source"], rows, justify=["left"] * 4))
    _unavailable(con, gone)


def replay(rec: Any, con: Console) -> None:
    """A recording (meters.record.Recording): each series' statistics, the trigger changes."""
    ds = rec.dataset
    span = float(rec.elapsed_s[-1]) if len(rec.elapsed_s) else 0.0
    con.print(f"[bold]{escape(rec.path)}[/bold]: {len(ds)} windows over {fmt(span)} s (window "
              f"{fmt((rec.window_s or 0) * 1e3)} ms, interval {fmt((rec.interval_s or 0) * 1e3)} ms); "
              f"machine: {escape(ds.machine.describe())}")
    rows = []
    for s in rec.meters:
        st = s.stats()
        rows.append([s.meter, s.scope, st["mean"], st["min"], st["p95"], st["max"], s.unit])
    con.print(make_table("Meters (window averages)", ["meter", "scope", "mean", "min", "p95", "max", "unit"], rows,
                         justify=["left", "left", "right", "right", "right", "right", "left"]))
    for s in rec.triggers:
        changes = rec.transitions(s)
        text = ", ".join(f"{what} at {fmt(t)} s" for t, what in changes) or "no change"
        con.print(f"trigger {escape(s.meter)} at {escape(s.scope)}: {escape(text)}")
    for s in rec.advice:
        v = s.values[[math.isfinite(x) for x in s.values]]
        if len(v):
            con.print(f"allowed_workers at {escape(s.scope)}: {fmt(float(v.min()))} to {fmt(float(v.max()))}")
    _unavailable(con, [(k.split("@")[0], k.split("@")[-1], v) for k, v in rec.unavailable.items()])


# the recorder describes a trigger's column as "trigger state, 0 low, 1 high (METER low L high H
# dwell D s)" (meters/record.py); the levels are read back from there
_LEVELS = re.compile(r"\((\S+) low (\S+) high (\S+) dwell (\S+) s\)\s*$")


def _levels(source: str) -> dict[str, float | None]:
    m = _LEVELS.search(source or "")
    if not m:
        return {"low": None, "high": None, "dwell_s": None}
    try:
        return {"low": float(m.group(2)), "high": float(m.group(3)), "dwell_s": float(m.group(4))}
    except ValueError:
        return {"low": None, "high": None, "dwell_s": None}


def replay_doc(rec: Any) -> dict[str, Any]:
    """`corecast meters replay FILE --json`: what the text says, as data. Series are named by
    their Dataset column; the values themselves are the recording's rows."""
    ds = rec.dataset
    span = float(rec.elapsed_s[-1]) if len(rec.elapsed_s) else 0.0

    def num(v: float) -> float | None:
        return float(v) if v is not None and math.isfinite(v) else None

    advice = []
    for s in rec.advice:
        v = s.values[[math.isfinite(x) for x in s.values]]
        advice.append({"column": s.column, "scope": s.scope, "min": num(float(v.min())) if len(v) else None,
                       "max": num(float(v.max())) if len(v) else None})
    return {
        "file": rec.path, "windows": len(ds), "span_s": span, "interval_s": rec.interval_s,
        "window_s": rec.window_s, "machine": ds.machine.describe(),
        "meters": [{"column": s.column, "meter": s.meter, "scope": s.scope, "unit": s.unit,
                    "source": ds.columns[s.column].source, **s.stats()} for s in rec.meters],
        "triggers": [{"column": s.column, "trigger": s.meter, "scope": s.scope, "meter": s.watches,
                      **_levels(ds.columns[s.column].source),
                      "transitions": [{"elapsed_s": t, "change": what} for t, what in rec.transitions(s)]}
                     for s in rec.triggers],
        "advice": advice,
        "unavailable": [{"meter": k.rsplit("@", 1)[0], "scope": k.rsplit("@", 1)[-1], "reason": v}
                        for k, v in rec.unavailable.items()],
    }


def _seconds(values: Any) -> tuple[float, str]:
    """A scale and unit that read well for times in seconds: ns, µs, ms or s (not 1e-7 s)."""
    finite = np.abs(values[np.isfinite(values)])
    top = float(finite.max()) if finite.size else 0.0
    for limit, scale, unit in ((1e-6, 1e9, "ns"), (1e-3, 1e6, "µs"), (1.0, 1e3, "ms")):
        if 0 < top < limit:
            return scale, unit
    return 1.0, "s"


def flat_meters(rec: Any) -> list[str]:
    """The meters whose every series is zero or missing throughout the recording."""
    names = list(dict.fromkeys(s.meter for s in rec.meters))
    flat = []
    for name in names:
        vals = [s.values[np.isfinite(s.values)] for s in rec.meters if s.meter == name]
        if all(v.size == 0 or not np.any(v != 0) for v in vals):
            flat.append(name)
    return flat


def replay_figure(rec: Any) -> Any:
    """A panel per meter (its scopes as lines, trigger spans shaded), and the triggers and the
    advice; meters that stayed at zero or were missing throughout get no panel (a line under
    the figure names them, and `figure.corecast_left_out` lists them)."""
    plt = plots.pyplot()
    flat = set(flat_meters(rec))
    names = [n for n in dict.fromkeys(s.meter for s in rec.meters) if n not in flat]
    extra = 1 if (rec.triggers or rec.advice) else 0
    n = max(1, len(names) + extra)
    # constrained layout keeps the title above the panels (tight_layout put it over the first)
    fig, axes = plt.subplots(n, 1, sharex=True, figsize=(9, 1.9 * n + 0.9), squeeze=False, layout="constrained")
    t = rec.elapsed_s
    for ax, name in zip(axes[:, 0], names):
        series = [s for s in rec.meters if s.meter == name]
        unit = series[0].unit
        scale = 1.0
        if unit == "s":
            scale, unit = _seconds(np.concatenate([s.values for s in series]))
        for s in series[:12]:
            ax.plot(t, s.values * scale, lw=1.2 if s.scope == "node" else 0.8, label=plots.literal(s.scope))
        ax.set_ylabel(plots.literal(f"{name}\n[{unit}]"), fontsize=8)
        if len(series) > 1:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)   # beside the data
        for s in rec.triggers:
            if s.watches == name:
                _shade(ax, t, s.values)
    if extra:
        ax = axes[-1, 0]
        for s in rec.advice:
            ax.step(t, s.values, where="post", label=plots.literal(f"allowed_workers@{s.scope}"))
        for k, s in enumerate(rec.triggers):
            ax.step(t, s.values * 0.9 + k * 0.02, where="post", lw=0.8, label=plots.literal(f"{s.meter}@{s.scope} (1 high)"))
        ax.set_ylabel("triggers,\nadvice", fontsize=8)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.0)
    axes[-1, 0].set_xlabel("seconds")
    fig.suptitle(f"corecast meters: {rec.path}", fontsize=10)
    left_out = [m for m in dict.fromkeys(s.meter for s in rec.meters) if m in flat]
    if left_out:
        fig.get_layout_engine().set(h_pad=0.06)
        fig.supxlabel(f"not shown (zero or missing throughout): {', '.join(left_out)}", fontsize=7, color="#555")
    fig.corecast_left_out = left_out
    return fig


def _shade(ax: Any, t: Any, high: Any) -> None:
    """Shade the spans where a trigger was HIGH."""
    start = None
    for i, v in enumerate(high):
        if v > 0 and start is None:
            start = t[i]
        elif v <= 0 and start is not None:
            ax.axvspan(start, t[i], color="red", alpha=0.08, lw=0)
            start = None
    if start is not None:
        ax.axvspan(start, t[-1], color="red", alpha=0.08, lw=0)
