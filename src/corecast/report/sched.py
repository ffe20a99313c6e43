"""Rendering of `corecast sched`: terminal tables, grouped bar charts (as the PMCTrack paper's
figures) and the --json documents."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from rich.console import Console

from ..sched.policies import POLICIES, VARIANTS
from .plots import literal, pyplot
from .terminal import fmt, make_table, print_notices

COLOURS = ["#1f5f99", "#8c6d1f", "#7a9a3a", "#b3261e", "#5b3f8c", "#2a8c8c", "#777777", "#c77c1e"]


def label(p: str) -> str:
    """How tables and plots name policy `p`: its class's label (sched.policies' registry), else its name."""
    cls = POLICIES.get(p) or VARIANTS.get(p)
    return (cls.label or p) if cls is not None else p


# ------------------------------------------------------------------------ sim
def sim_doc(workload: Any, machine: Any, options: Any, metrics: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "corecast-sched-sim", "workload": workload.to_dict(), "machine": machine.to_dict(),
            "options": {"quantum_s": options.quantum, "migration_cost_s": options.migration_cost,
                        "sf_source": options.sf_source, "seed": options.seed},
            "results": [m.to_dict() for m in metrics.values()]}


def render_sim(con: Console, workload: Any, machine: Any, options: Any, metrics: dict[str, Any]) -> None:
    con.print(f"[bold]sched sim[/bold]: {workload.name} on {machine.describe()}; quantum "
              f"{fmt(options.quantum * 1e3)} ms, migration cost {fmt(options.migration_cost * 1e6)} µs; "
              f"rules: {'restart until every application has run ' + str(workload.rules.runs) + ' times' if workload.rules.restart else 'each application once'}, "
              f"completion time the {workload.rules.summary} of the runs")
    con.print()
    pols = list(metrics)
    first = metrics[pols[0]]
    if len(pols) == 1:
        m = first
        rows = [[a.name, a.category or "-", a.threads, a.runs, a.completion_time, a.alone_time,
                 a.slowdown, a.speedup] for a in m.apps]
        con.print(make_table(f"{label(m.policy)} (SF: {m.sf_source})",
                             ["application", "category", "threads", "runs", "CT (s)", "alone (s)",
                              "slowdown", "speedup vs small"], rows))
    else:
        rows = [[a.name, a.threads] + [metrics[p].apps[i].slowdown for p in pols] for i, a in enumerate(first.apps)]
        con.print(make_table("Slowdown (completion time / alone on the AMP)",
                             ["application", "threads"] + [label(p) for p in pols], rows))
    con.print()
    rows = [[label(p), m.sf_source, m.asp, m.unfairness, m.stp, m.antt, m.energy_j, m.edp, m.time_s,
             m.migrations, m.decisions] for p, m in metrics.items()]
    con.print(make_table("Workload", ["policy", "SF source", "ASP", "unfairness", "STP", "ANTT", "energy (J)",
                                      "EDP (J·s)", "time (s)", "migrations", "decisions"], rows))
    con.print("ASP: Σ (CT on the all-small machine / CT − 1); unfairness: max/min slowdown; STP: Σ 1/slowdown; "
              "ANTT: mean slowdown; energy and EDP over the simulated time", style="dim")
    notes = [n for m in metrics.values() for n in m.notes]
    if notes:
        con.print()
        print_notices(con, notes, "note")


def _bars(ax: Any, groups: Sequence[str], series: dict[str, Sequence[float]], ylabel: str,
          ref: float | None = None) -> None:
    n = len(series)
    x = np.arange(len(groups))
    width = 0.8 / max(n, 1)
    for j, (name, vals) in enumerate(series.items()):
        ax.bar(x - 0.4 + width * (j + 0.5), np.asarray(vals, dtype=float), width, label=literal(label(name)),
               color=COLOURS[j % len(COLOURS)], edgecolor="white", linewidth=0.4)
    ax.set_xticks(x)
    ax.set_xticklabels([literal(g) for g in groups], rotation=30 if max((len(g) for g in groups), default=0) > 6 else 0,
                       ha="right" if max((len(g) for g in groups), default=0) > 6 else "center", fontsize=8)
    if ref is not None:
        ax.axhline(ref, color="#333333", lw=0.8, ls=":")
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)


def sim_figure(metrics: dict[str, Any], title: str) -> Any:
    plt = pyplot()
    pols = list(metrics)
    apps = [a.name for a in metrics[pols[0]].apps]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(max(8, 1.2 * len(apps) + 5), 4.2),
                                 gridspec_kw={"width_ratios": [max(len(apps), 2), 2]})
    _bars(a1, apps, {p: [a.slowdown for a in metrics[p].apps] for p in pols}, "slowdown", ref=1.0)
    a1.set_title("slowdown per application")
    _bars(a2, ["ASP", "unfairness"], {p: [metrics[p].asp, metrics[p].unfairness] for p in pols}, "")
    a2.set_title("workload")
    a1.legend(fontsize=8)
    fig.suptitle(literal(title), fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------ the paper's figures
def paper_doc(results: list[Any], findings: list[list[Any]]) -> dict[str, Any]:
    out = []
    for res, fnd in zip(results, findings):
        e = res.experiment
        pols = list(next(iter(res.metrics.values())).keys())
        out.append({"experiment": e.name, "figure": e.figure, "machine": e.machine.to_dict(),
                    "source": e.source, "sf_sources": res.sources,
                    "workloads": {w: {p: {"asp": m.asp, "unfairness": m.unfairness, "stp": m.stp,
                                          "antt": m.antt, "slowdowns": [a.slowdown for a in m.apps],
                                          "apps": [a.name for a in m.apps]}
                                      for p, m in row.items()} for w, row in res.metrics.items()},
                    "average": {p: {"asp": float(np.mean([r[p].asp for r in res.metrics.values()])),
                                    "unfairness": float(np.mean([r[p].unfairness for r in res.metrics.values()]))}
                                for p in pols},
                    "findings": [{"statement": f.statement, "holds": f.holds, "simulated": f.detail,
                                  "paper": f.paper} for f in fnd]})
    return {"kind": "corecast-sched-paper", "experiments": out}


def render_paper(con: Console, results: list[Any], findings: list[list[Any]]) -> None:
    for res, fnd in zip(results, findings):
        e = res.experiment
        pols = list(next(iter(res.metrics.values())).keys())
        con.print(f"[bold]{e.figure}[/bold] ({e.name}): {e.machine.describe()}")
        con.print("SF sources: " + ", ".join(f"{label(p)} {s}" for p, s in res.sources.items()), style="dim")
        con.print()
        for what, title in (("asp", "ASP (aggregate speedup over the all-small machine)"),
                            ("unfairness", "Unfairness (max / min slowdown)")):
            rows = []
            for w, row in res.metrics.items():
                cats = " ".join(a.category for a in row[pols[0]].apps)
                rows.append([w, cats] + [getattr(row[p], what) for p in pols])
            rows.append(["average", ""] + [float(np.mean([getattr(r[p], what) for r in res.metrics.values()]))
                                           for p in pols])
            best = min if what == "unfairness" else max
            styles = [None] * (len(rows) - 1) + ["bold"]
            con.print(make_table(title, ["workload", "applications"] + [label(p) for p in pols], rows, styles=styles,
                                 justify=["left", "left"] + ["right"] * len(pols)))
            marks = []
            for w, row in res.metrics.items():
                b = best(pols, key=lambda p: getattr(row[p], what))
                marks.append(f"{w}: {label(b)}")
            con.print(("fairest" if what == "unfairness" else "highest") + ": " + ", ".join(marks), style="dim")
            con.print()
        rows = [[f.statement, "yes" if f.holds else "NO", f.detail, f.paper] for f in fnd]
        con.print(make_table("The paper's findings, in simulation", ["finding", "holds", "simulated", "paper"],
                             rows, justify=["left", "left", "left", "left"]))
        con.print()


def paper_figure(res: Any) -> Any:
    plt = pyplot()
    e = res.experiment
    pols = list(next(iter(res.metrics.values())).keys())
    wls = list(res.metrics) + ["avg"]
    fig, (a1, a2) = plt.subplots(2, 1, figsize=(max(8, 0.9 * len(wls) * max(len(pols), 3) / 3 + 3), 7), sharex=True)
    for ax, what, yl in ((a1, "asp", "ASP"), (a2, "unfairness", "unfairness")):
        series = {}
        for p in pols:
            vals = [getattr(res.metrics[w][p], what) for w in res.metrics]
            series[p] = vals + [float(np.mean(vals))]
        _bars(ax, wls, series, yl, ref=1.0 if what == "unfairness" else None)
        if what == "unfairness":
            lo = min(min(v) for v in series.values())
            ax.set_ylim(max(0.0, math.floor((lo - 0.05) * 10) / 10), None)
    a1.legend(fontsize=8, ncol=len(pols))
    a1.set_title(literal(f"{e.figure} (simulated): {e.machine.name}"), fontsize=10)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------------ SF models
def render_sfmodel(con: Console, model: Any) -> None:
    con.print(f"[bold]SF models[/bold] from {model.windows} windows of {len(model.apps)} applications "
              f"({model.source})")
    con.print()
    for side in (model.big, model.small):
        rows = [["(intercept)", side.intercept]] + [[k, v] for k, v in side.coef.items()]
        con.print(make_table(f"SF from {side.side}-core metrics", ["term", "coefficient"], rows))
        con.print(f"correlation: {fmt(side.r)} in sample, {fmt(side.r_heldout)} on held-out applications; "
                  f"RMSE {fmt(side.rmse)} / {fmt(side.rmse_heldout)}; chosen from: {', '.join(side.candidates)}")
        con.print()
    con.print("phases the phase rule finds (sampling rounds it would start): "
              + ", ".join(f"{a} {n}" for a, n in model.phases.items()), style="dim")


# ------------------------------------------------------------------------ the enforcing mode
def render_run(con: Console, res: Any) -> None:
    con.print(f"[bold]sched run[/bold] under {label(res.policy)}: {res.machine_line}")
    con.print(f"[yellow]{res.emulation}[/yellow]")
    con.print()
    rows = [[p.index, p.command, p.threads, p.sf if p.sf is not None else "-", p.wall_s, p.alone_s,
             p.slowdown, p.big_share, p.cpu_s, p.exit_status] for p in res.programs]
    con.print(make_table("Programs", ["#", "command", "threads", "SF (declared)", "wall (s)", "alone (s)",
                                      "slowdown", "time on big", "CPU (s)", "exit"], rows,
                         justify=["right", "left"] + ["right"] * 8))
    if res.unfairness is not None:
        con.print(f"unfairness (max/min slowdown): {fmt(res.unfairness)}; quanta: {res.quanta}; "
                  f"migrations: {res.migrations}; progress from {res.progress_source}")
    print_notices(con, res.notes, "note")


def render_listing(con: Console, action: str, items: Any) -> None:
    """`sched policies|machines|workloads [NAME]`: the policies ({name: rule}), one machine or
    workload in detail, or the bundled ones in a table."""
    if action == "policies":
        con.print(make_table("Policies", ["name", "rule"], [[n, d] for n, d in items.items()],
                             justify=["left", "left"]))
    elif action == "machines" and not isinstance(items, list):
        m = items
        con.print(f"[bold]{m.name}[/bold]: {m.description}")
        con.print(make_table(None, ["type", "count", "speed", "active W", "idle W", "CPUs"],
                             [[t.name, t.count, t.speed, t.active_w, t.idle_w, t.cpus or "-"] for t in m.types]))
        for n in m.notes:
            con.print(f"note: {n}", style="dim")
        con.print(f"source: {m.source}", style="dim")
    elif action == "machines":
        con.print(make_table("Bundled machines", ["name", "cores", "types", "description"],
                             [[m.name, m.cores, " + ".join(f"{t.count} {t.name}" for t in m.types), m.description]
                              for m in items], justify=["left", "right", "left", "left"]))
    elif not isinstance(items, list):
        w = items
        con.print(f"[bold]{w.name}[/bold]: {w.description}  (machine: {w.machine or '-'})")
        con.print(make_table(None, ["application", "category", "threads", "nice", "phases", "work (s)", "SF"],
                             [[a.name, a.category or "-", a.threads, a.priority, len(a.phases), a.work_s,
                               ", ".join(f"{p.sf:g}" if p.sf else "-" for p in a.phases)] for a in w.apps]))
    else:
        con.print(make_table("Bundled workloads", ["name", "machine", "applications", "threads", "description"],
                             [[w.name, w.machine or "-", len(w.apps), w.threads, w.description] for w in items],
                             justify=["left", "left", "right", "right", "left"]))
