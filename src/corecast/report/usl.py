"""Rendering of a USL analysis: terminal tables, a figure, an HTML page."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from rich.console import Console

from ..model.usl import Analysis, usl
from . import html as H
from .plots import literal, pyplot
from .terminal import fmt, make_table, print_notices


def _ci(lo: float, hi: float) -> str:
    return f"[{fmt(lo)}, {fmt(hi)}]"


def parameter_rows(a: Analysis) -> list[list[Any]]:
    f = a.fit
    se = f.se
    ci = f.confint(a.level)
    names = ("α  contention", "β  coherency", "γ  X at N=1, no overhead")
    return [[names[i], fmt(float(f.params[i]), 6), fmt(float(se[i]), 4), _ci(ci[i, 0], ci[i, 1])]
            for i in range(3)]


def derived_rows(a: Analysis) -> list[list[Any]]:
    f = a.fit
    nmax = f.n_max
    nmax_se = f.n_max_se()
    return [
        ["N_max  peak load √((1−α)/β)", nmax, "" if math.isnan(nmax_se) else f"± {fmt(nmax_se, 3)} (s.e.)"],
        ["X_max  throughput at the peak" if math.isfinite(nmax) else "X_max  ceiling γ/α (no peak)", f.x_max, ""],
        ["N_opt  1/α", f.n_opt, ""],
        ["X_roof  γ/α, contention ceiling", f.x_roof, ""],
        ["R²", f.r2, ""],
        ["residual standard error", f.sigma, f"on {f.dof} degrees of freedom"],
    ]


def point_rows(a: Analysis) -> list[list[Any]]:
    return [[p.cores, p.throughput, p.fitted, p.residual, p.efficiency, p.capacity,
             f"{100 * p.contention:.0f}%", f"{100 * p.coherency:.0f}%", p.count, ", ".join(p.flags)]
            for p in a.points]


POINT_HEADERS = ["N", "X", "fitted", "residual", "eff.", "C(N)", "cont.", "coh.", "runs", "flags"]
POINT_LEGEND = ("X: measured throughput (median of the runs); eff.: efficiency X/(γN); C(N): capacity X/γ; "
                "cont./coh.: share of the time per unit of work lost to contention (α) and coherency (β)")


def prediction_rows(a: Analysis, at: Sequence[float]) -> list[list[Any]]:
    n = np.asarray(at, dtype=float)
    y, lo, hi = a.fit.band(n, a.level, "prediction")
    return [[c, v, l, h, v / (a.fit.gamma * c)] for c, v, l, h in zip(n, y, lo, hi)]


def _rss_pair(am: Any, f: Any) -> str:
    """The two residual sums of squares, or their ratio where X's unit puts them past the floats
    (an RSS of 1e600 is inf, one of 1e-600 is 0; the fit's own unit keeps them)."""
    if all(math.isfinite(x.rss) and (x.rss > 0) == (x.rss_unit > 0) for x in (am, f)):
        return f"RSS {fmt(am.rss)} vs USL {fmt(f.rss)}"
    ratio = am.rss_unit / f.rss_unit if f.rss_unit > 0 else math.inf
    return f"RSS {fmt(ratio)} times the USL's"


def render_terminal(a: Analysis, con: Console, label: str, predict_at: Sequence[float] | None = None) -> None:
    f = a.fit
    con.print(f"[bold]USL fit[/bold] of {label}: throughput from {a.source}, {f.n} points at "
              f"{len(a.points)} core counts")
    con.print()
    con.print(make_table("Parameters", ["parameter", "estimate", "std. error", f"{a.level:.0%} interval"],
                         parameter_rows(a)))
    con.print()
    con.print(make_table("Derived", ["quantity", "value", ""], derived_rows(a)))
    con.print()
    con.print(f"[bold]Verdict:[/bold] {a.verdict}")
    am = a.nested.amdahl
    con.print(f"[bold]Amdahl's law[/bold] (β = 0): α = {fmt(am.alpha)}, γ = {fmt(am.gamma)}, ceiling "
              f"γ/α = {fmt(am.x_roof)}, {_rss_pair(am, f)}. {a.nested.summary}.")
    con.print()
    styles = ["bold red" if p.flags else None for p in a.points]
    con.print(make_table("Points", POINT_HEADERS, point_rows(a), styles=styles))
    con.print(POINT_LEGEND, style="dim")
    if predict_at is not None and len(predict_at):
        con.print()
        con.print(make_table(f"Predicted ({a.level:.0%} prediction band)",
                             ["N", "X", "low", "high", "efficiency"], prediction_rows(a, predict_at)))
    if a.warnings or a.notes:
        con.print()
    print_notices(con, a.warnings, "warning")
    print_notices(con, a.notes, "note")


def figure(a: Analysis, title: str | None = None, predict_at: Sequence[float] | None = None) -> Any:
    plt = pyplot()
    f = a.fit
    N = np.array([p.cores for p in a.points])
    X = np.array([p.throughput for p in a.points])
    lo = np.array([p.low for p in a.points])
    hi = np.array([p.high for p in a.points])
    flagged = np.array([bool(p.flags) for p in a.points])
    top = float(N.max())
    right = 1.6 * top
    if math.isfinite(f.n_max):
        right = max(right, min(1.3 * f.n_max, 6 * top))
    if predict_at is not None and len(predict_at):
        right = max(right, 1.05 * float(np.max(predict_at)))
    grid = np.linspace(min(1.0, float(N.min())), right, 400)
    y, blo, bhi = f.band(grid, a.level, "prediction")
    am = a.nested.amdahl

    fig, ax = plt.subplots(figsize=(8, 5))
    ax.fill_between(grid, blo, bhi, color="#3b82c4", alpha=0.15, lw=0,
                    label=f"USL {a.level:.0%} prediction band")
    ax.plot(grid, y, color="#1f5f99", lw=2, label=f"USL fit (α={f.alpha:.3g}, β={f.beta:.3g}, γ={f.gamma:.5g})")
    ax.plot(grid, usl(grid, am.alpha, 0.0, am.gamma), color="#8c6d1f", lw=1.3, ls="--",
            label=f"Amdahl fit (α={am.alpha:.3g})")
    if math.isfinite(am.x_roof):
        ax.axhline(am.x_roof, color="#8c6d1f", lw=1, ls=":", label=f"Amdahl ceiling γ/α = {am.x_roof:.4g}")
    ymax = max(float(np.nanmax(bhi)), float(X.max()), float(hi.max())) * 1.1
    lin = f.gamma * grid
    ax.plot(grid[lin <= ymax], lin[lin <= ymax], color="#999999", lw=1, ls=":", label="linear γN")
    if math.isfinite(f.n_max) and f.n_max <= right:
        ax.axvline(f.n_max, color="#b3261e", lw=1, ls="-.", label=f"N_max = {f.n_max:.3g}")
    err = np.vstack([X - lo, hi - X])
    ok = ~flagged
    ax.errorbar(N[ok], X[ok], yerr=err[:, ok] if np.any(err) else None, fmt="o", color="#1d232b",
                ms=5, capsize=3, label="measured (median, min–max)", zorder=5)
    if flagged.any():
        ax.errorbar(N[flagged], X[flagged], yerr=err[:, flagged] if np.any(err) else None, fmt="o",
                    color="#b3261e", ms=7, mfc="none", mew=1.5, capsize=3, label="flagged point", zorder=6)
    ax.set_xlim(0, right)
    ax.set_ylim(0, ymax)
    ax.set_xlabel("N (cores / load)")
    ax.set_ylabel(literal(f"throughput X(N)  [{a.source}]"))
    ax.set_title(literal(title) or "Universal Scalability Law")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def render_html(a: Analysis, label: str, dataset: Any = None, predict_at: Sequence[float] | None = None) -> str:
    f = a.fit
    fig = figure(a, title=f"USL: {label}", predict_at=predict_at)
    blocks = [f'<p class="verdict">{H.esc(a.verdict)}</p>']
    if a.warnings:
        blocks.append(H.notice_list(a.warnings, "warning"))
    if a.notes:
        blocks.append(H.notice_list(a.notes, "note"))
    blocks.append(H.figure(fig))
    blocks.append(H.section("Parameters",
                            H.table(["parameter", "estimate", "std. error", f"{a.level:.0%} interval"],
                                    parameter_rows(a)),
                            H.table(["quantity", "value", ""], [[r[0], fmt(r[1]), r[2]] for r in derived_rows(a)])))
    am = a.nested.amdahl
    blocks.append(H.section(
        "Is coherency (β) needed?",
        H.table(["model", "α", "β", "γ", "RSS", "AICc"],
                [["USL", fmt(f.alpha), fmt(f.beta), fmt(f.gamma), fmt(f.rss), fmt(a.nested.aicc_usl)],
                 ["Amdahl", fmt(am.alpha), "0", fmt(am.gamma), fmt(am.rss), fmt(a.nested.aicc_amdahl)]]),
        H.paragraph(a.nested.summary + ".")))
    blocks.append(H.section("Points",
                            H.table(POINT_HEADERS, [[fmt(c) for c in r[:-1]] + [r[-1]] for r in point_rows(a)],
                                    flag_rows=[bool(p.flags) for p in a.points]),
                            H.paragraph(POINT_LEGEND)))
    if predict_at is not None and len(predict_at):
        blocks.append(H.section(f"Predictions ({a.level:.0%} prediction band)",
                                H.table(["N", "X", "low", "high", "efficiency"],
                                        [[fmt(c) for c in r] for r in prediction_rows(a, predict_at)])))
    if dataset is not None:
        meta = [["file", label], ["throughput from", a.source]]
        if dataset.machine.to_dict():
            meta.append(["machine", dataset.machine.describe()])
        if dataset.command:
            meta.append(["command", dataset.command])
        if dataset.corecast_version:
            meta.append(["recorded by", f"corecast {dataset.corecast_version}"])
        blocks.append(H.section("Data", H.table(["", ""], meta)))
    pyplot().close(fig)
    return H.page(f"USL analysis of {label}", blocks,
                  subtitle="X(N) = γN / (1 + α(N−1) + βN(N−1)), fitted by bounded nonlinear least squares")
