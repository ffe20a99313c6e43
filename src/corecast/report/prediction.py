"""Reports of `corecast predict` and `corecast evaluate`: the JSON document, terminal tables, the
prediction plot (measured points, each method's prediction and band, a line where the
measurements end; the stall categories' extrapolations below) and the HTML page."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from ..model.base import Prediction
from ..model.evaluate import Evaluation
from ..model.series import convert
from . import html as H
from . import locks as L
from . import terminal as T
from .plots import literal, pyplot

METHOD_COLORS = {"auto": "#1b6ac9", "estima": "#c0392b", "timex": "#2f8f46", "usl": "#8e44ad"}


def _num(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _intish(v: float) -> float | int:
    return int(v) if float(v).is_integer() else float(v)


# ============================================================================ the document
def prediction_doc(label: str, method: str, fitted: Any, cores: Sequence[float], level: float,
                   work: float | None = None) -> dict[str, Any]:
    """The `--json` document of `corecast predict`. `work`: the work of one run in the units
    of the measured throughput (`predictors.work_per_run`), so that throughput = work / time;
    without it a predicted time gives the throughput in runs per second (1/time_s), and a
    predicted throughput the time per unit of work (1/throughput)."""
    cores = np.asarray(cores, dtype=float)
    p: Prediction = fitted.predict(cores, level)
    metric = p.metric
    k = work if work is not None and work > 0 else None
    with np.errstate(divide="ignore"):
        if metric == "time_s":
            t = np.asarray(p.value, dtype=float)
            x = (k or 1.0) / t
        else:
            x = np.asarray(p.value, dtype=float)
            t = (k or 1.0) / x
    unit = "runs/s (1/time_s)" if metric == "time_s" and k is None else "as measured"
    preds = []
    tgt = p.params.get("target")
    for i, c in enumerate(cores):
        preds.append({"cores": _intish(c), "time_s": _num(t[i]), "throughput": _num(x[i]),
                      "low": None if p.low is None else _num(p.low[i]),
                      "high": None if p.high is None else _num(p.high[i])})
        if tgt:
            preds[-1].update(tgt["positions"][i])
            preds[-1]["effective_cores"] = tgt["effective_cores"][i]
    bn = getattr(fitted, "bottlenecks", None)
    bottlenecks = [b.to_dict() for b in bn(cores)] if bn else []
    la = getattr(fitted, "analysis", None)
    doc: dict[str, Any] = {
        "file": label, "method": method, "metric": metric, "level": level,
        "model": p.model, "predictions": preds, "work_per_run": k, "throughput_unit": unit,
        "models": fitted.models(float(cores.max())),
        "bottlenecks": bottlenecks,
        "lost_core_time": la.to_dict() if la is not None else None,
        "warnings": list(dict.fromkeys(p.warnings)),
    }
    if tgt:
        doc["target_machine"] = {**tgt["machine"], "placement": tgt["placement"], "smt_yield": tgt["smt_yield"],
                                 "smt_yield_source": tgt["smt_yield_source"],
                                 "measured_machine": tgt.get("measured_machine"),
                                 "cross_domain_cost": tgt.get("cross_domain_cost"),
                                 "cross_domain_source": tgt.get("cross_domain_source"),
                                 "busy_share": tgt.get("busy_share"),
                                 "busy_share_source": tgt.get("busy_share_source")}
    if method == "auto":
        doc["chosen"] = list(p.params.get("chosen", []))
        doc["reason"] = p.params.get("reason")
    for k in ("size_ratio", "freq_ratio"):
        if k in p.params:
            doc[k] = p.params[k]
    return doc


# ============================================================================ terminal
def _time_means_nothing(doc: dict[str, Any]) -> bool:
    """Throughput-only data with no work per run: its time_s would be 1/throughput (7.7e-09
    "seconds" for 1.3e8 operations/s), so the table leaves the column out (the JSON keeps it)."""
    return doc["metric"] == "throughput" and not doc.get("work_per_run")


def _prediction_header(doc: dict[str, Any]) -> list[str]:
    metric = doc["metric"]
    x = "runs/s" if doc.get("throughput_unit", "").startswith("runs/s") else "throughput"
    if _time_means_nothing(doc):
        return ["cores", x, f"low ({metric})", f"high ({metric})"]
    return ["cores", "time_s", x, f"low ({metric})", f"high ({metric})"]


def render_terminal(doc: dict[str, Any], con: Any) -> None:
    metric = doc["metric"]
    con.print(f"[bold]{doc['file']}[/bold]: method {doc['method']}"
              + (f" → {' + '.join(doc['chosen'])}" if doc.get("chosen") else "")
              + f"; model: {doc['model']}")
    if doc.get("reason"):
        con.print(f"  {doc['reason']}")
    lvl = int(round(100 * doc["level"]))
    rows = [[p["cores"], p["time_s"], p["throughput"], p["low"], p["high"]] for p in doc["predictions"]]
    if _time_means_nothing(doc):
        rows = [[r[0], *r[2:]] for r in rows]
    header = _prediction_header(doc)
    tm = doc.get("target_machine")
    if tm:
        con.print(f"  target: {tm['sockets']} socket(s) × {tm['cores_per_socket']} cores × "
                  f"{tm['threads_per_core']} thread(s) = {tm['cpus']} CPUs"
                  + (f" ({tm['name']})" if tm.get("name") else "") + f", placement {tm['placement']}")
        header = header + ["sockets", "SMT shared", "effective cores"]
        for r, p in zip(rows, doc["predictions"]):
            r += [p["sockets_used"], "oversubscribed" if p["oversubscribed"] else p["smt_shared"], p["effective_cores"]]
    con.print(T.make_table(f"Predictions ({metric} band at {lvl}%)", header, rows))
    if doc.get("work_per_run"):
        con.print(f"  throughput = work per run / time_s, work per run {doc['work_per_run']:.6g} "
                  "(median of the measured throughput × time_s)")
    models = doc.get("models") or {}
    mrows = []
    for col, m in models.items():
        if col == "auto" or not isinstance(m, dict) or "kernel" not in m:
            continue
        mrows.append([col, m["kernel"], m.get("points", "-"), m.get("checkpoint_rmse"), m.get("formula", "")])
    if mrows:
        con.print(T.make_table("Models", ["series", "kernel", "points", "checkpoint RMSE", "formula"], mrows,
                               justify=["left", "left", "right", "right", "left"]))
    lost = doc.get("lost_core_time")
    if lost:
        con.print(T.make_table("Lost core-time (core-seconds: cores × wall − CPU time of the program's threads)",
                               LOST_HEADER, lost_rows(lost), justify=["right"] * len(LOST_HEADER)))
        con.print(f"  {lost['summary']}")
        if lost["categories"]:
            con.print(T.make_table("Waits: charged to time (cores stood idle) or waiting while other threads work",
                                   WAITS_HEADER, waits_rows(lost),
                                   justify=["left", "right", "right", "right", "right", "left"]))
    if doc.get("bottlenecks"):
        top = doc["predictions"][-1]["cores"]
        brow = []
        for b in doc["bottlenecks"]:
            brow.append([b["rank"], b["category"], b["model"], b["growth"], _share(b.get("share_measured")),
                         _share(b.get("share_at_largest_target")), _pct(b.get("charged_share")), b["verdict"]])
        con.print(T.make_table(f"Bottlenecks (stalls per core, largest measured → {top} cores)",
                               ["rank", "category", "model", "growth", "share now", f"share at {top}",
                                "charged", "verdict"],
                               brow, justify=["right", "left", "left", "right", "right", "right", "right", "left"]))
    L.render_predicted(doc.get("locks"), con)
    T.print_notices(con, doc.get("warnings") or [])


LOST_HEADER = ["cores", "wall s", "CPU s", "core-s", "lost core-s", "run-queue core-s", "loss vs linear",
               "waits core-s", "charged core-s"]
WAITS_HEADER = ["category", "wait core-s", "idle part (shim)", "charged core-s", "waiting while others work",
                "verdict"]


def _pct(v: Any) -> str:
    return "-" if v is None else f"{100 * float(v):.0f}%"


def _share(v: Any) -> str:
    """A share of the stalls as a percentage, as the "charged" column beside it: the fractions
    were printed raw, "1" beside "6.421e-06" in one column. A share too small to round to 1%
    is "<1%", never a "0%" that reads as none measured."""
    if v is None:
        return "-"
    f = float(v)
    if f != f:
        return "-"
    if 0 < f < 0.005:
        return "<1%"
    return f"{100 * f:.0f}%"


def lost_rows(lost: dict[str, Any]) -> list[list[Any]]:
    """The lost-core-time table of a prediction document: one row per measured core count."""
    return [[c["cores"], c["wall_s"], c["cpu_s"], c["core_s"], c["lost_core_s"], c["runqueue_delay_core_s"],
             c["scaling_loss_core_s"], c["waits_core_s"], c["charged_core_s"]] for c in lost["per_count"]]


def waits_rows(lost: dict[str, Any]) -> list[list[Any]]:
    """Each stall category at the largest measured count: its wait, the idle part the shim
    measured, what is charged to time, the rest (waiting while other threads work), the verdict."""
    return [[c["category"], c["wait_core_s"], "-" if c["idle_core_s"] is None else c["idle_core_s"],
             c["charged_core_s"], c["overlap_core_s"], c["verdict"]] for c in lost["categories"]]


def render_evaluation(ev: Evaluation, con: Any) -> None:
    con.print(f"[bold]{ev.label}[/bold]: fitted on cores ≤ {ev.train_max_cores:g} "
              f"({', '.join(f'{c:g}' for c in ev.train_cores)}), predicting "
              f"{', '.join(f'{c:g}' for c in ev.test_cores)}; metric {ev.metric}; bands at {100 * ev.level:.0f}%")
    ok = [m for m in ev.methods if m.ok]
    headers = ["cores", "measured"] + [m.method for m in ok]
    rows = []
    for i, c in enumerate(ev.test_cores):
        row: list[Any] = [_intish(c), ok[0].points[i].measured if ok else None]
        for m in ok:
            p = m.points[i]
            row.append(f"{T.fmt(p.predicted)} ({p.abs_pct_error:.1f}%{'' if p.inside is not False else ', out'})")
        rows.append(row)
    con.print(T.make_table("Predicted (absolute % error)", headers, rows))
    srows = []
    for m in ev.methods:
        if m.ok:
            srows.append([m.method, m.mape, m.max_error, m.coverage, m.best_found, m.model])
        else:
            srows.append([m.method, None, None, None, None, f"could not run: {m.error}"])
    con.print(T.make_table("Per method", ["method", "MAPE %", "max error %", "coverage", "best cores found",
                                          "model"], srows,
                           justify=["left", "right", "right", "right", "right", "left"]))


def render_corpus(ev: Any, con: Any) -> None:
    """The corpus evaluation (corecast.model.corpus.CorpusEvaluation) as one table."""
    for note in getattr(ev, "notes", []):
        con.print(f"note: {note}")
    if getattr(ev, "leave_one_source_out", False):
        con.print("auto's priors learned without the source scored (leave-one-source-out)")
    con.print(f"fitted on the cores up to {ev.train_frac:g} of each series' largest count (at least two), "
              f"predicting the rest; median absolute % error per source (median over its series), "
              f"coverage of the {100 * ev.level:.0f}% band in brackets")
    headers = ["source", "series"] + ev.methods
    rows = []
    for s in ev.sources:
        row = [s.source, s.series]
        for m in ev.methods:
            if m not in s.median_error:
                row.append(f"failed ({s.failed.get(m, 0)})")
                continue
            cell = f"{s.median_error[m]:.1f}%"
            if m in s.coverage:
                cell += f" [{100 * s.coverage[m]:.0f}%]"
            if s.failed.get(m):
                cell += f" ({s.failed[m]} failed)"
            row.append(cell)
        rows.append(row)
    overall = ev.overall()
    rows.append(["all sources (median)", sum(s.series for s in ev.sources)]
                + [f"{overall[m]:.1f}%" if math.isfinite(overall[m]) else "-" for m in ev.methods])
    common = ev.overall_common()
    n_common = len(ev.common_sources())
    if n_common < len(ev.sources):
        rows.append([f"the {n_common} sources all predicted", ""]
                    + [f"{common[m]:.1f}%" if math.isfinite(common[m]) else "-" for m in ev.methods])
    geo = ev.geomean_common()
    rows.append([f"geometric mean, {n_common} sources", ""]
                + [f"{geo[m]:.1f}%" if math.isfinite(geo[m]) else "-" for m in ev.methods])
    con.print(T.make_table("Corpus evaluation", headers, rows, justify=["left"] + ["right"] * (len(headers) - 1)))
    for peer in ("usl", "extrap"):
        if "auto" in ev.methods and peer in ev.methods:
            h = ev.head_to_head("auto", peer)
            con.print(f"auto below {peer} in {h['below']} of the {h['sources']} sources both predicted, "
                      f"equal to the decimal in {h['equal']}, above in {h['above']}")
    for m in ev.methods:
        c = ev.coverage_summary(m) if hasattr(ev, "coverage_summary") else {}
        if c:
            con.print(f"{m}'s {100 * ev.level:.0f}% band held {100 * c['points']:.1f}% of the held-out points "
                      f"({100 * c['mean_over_sources']:.1f}% averaged over the sources); within 65-95% in "
                      f"{c['within_65_95']} of {c['sources']} sources, within 75-85% in {c['within_75_85']}")


def evaluation_doc(ev: Evaluation) -> dict[str, Any]:
    return ev.to_dict()


# ============================================================================ plot
def legend_label(text: str, limit: int = 70) -> str:
    """`text` cut to at most `limit` characters at a word's end, with an ellipsis where cut (a
    label cut in the middle of a word, 'CPU 8.985 s on the co', read as a mistake)."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + "…"


def figure(ds: Dataset, fits: dict[str, Any], cores: Sequence[float], level: float, title: str = "",
           main: str | None = None, whole: bool = False) -> Any:
    """Measured points, each method's prediction with its band and a vertical line where the
    measurements end; below, every stall category's measured points and extrapolation.
    `whole`: the curves at whole thread counts only (a prediction for a target machine, whose
    threads are placed on its CPUs, exists at whole counts only)."""
    plt = pyplot()
    cores = np.asarray(cores, dtype=float)
    measured = np.unique(ds.cores)
    top = float(measured.max())
    hi = float(max(cores.max(), top))
    line = np.linspace(float(measured.min()), hi, 120)
    if whole:
        line = np.maximum(np.round(line), 1.0)
    grid = np.unique(np.concatenate([line, cores, measured]))
    est = fits.get("estima")
    if est is None and "auto" in fits:
        est = getattr(fits["auto"], "fits", {}).get("estima")
    sv = None
    if est is not None:
        try:        # stalls it cannot extrapolate (zero at most counts): no panel of them
            sv = est.solve(hi)
        except UserError:
            est = None
    curves = None
    if est is None:
        hook = next((getattr(f, "stall_extrapolations", None) for f in fits.values()
                     if getattr(f, "stall_extrapolations", None)), None)
        if hook is not None:
            curves = hook(grid) or None
    panels = 2 if (est is not None or curves) else 1
    fig, axes = plt.subplots(panels, 1, figsize=(8.0, 4.6 * panels), squeeze=False)
    ax = axes[0, 0]
    metric = None
    banded = False
    shown: list[np.ndarray] = []
    for name, f in fits.items():
        try:
            p = f.predict(grid, level)
        except Exception:       # a method that cannot cover the whole range is left out
            continue
        metric = metric or p.metric
        p = convert(p, metric)
        col = METHOD_COLORS.get(name, None)
        lw = 2.4 if name == main else 1.4
        ax.plot(grid, p.value, color=col, lw=lw, label=literal(legend_label(f"{name}: {p.model}")))
        shown.append(p.value[np.isfinite(p.value) & (p.value > 0)])
        if p.low is not None and p.high is not None:
            # the band is in the legend: the main method's (or the first one drawn) by name
            band = f"{name}: {100 * level:g}% band" if (name == main or (main not in fits and not banded)) else None
            banded = banded or band is not None
            ax.fill_between(grid, p.low, p.high, color=col, alpha=0.12 if name != main else 0.2, lw=0, label=band)
    metric = metric or "time_s"
    y = ds.column(metric) if metric in ds.metrics else None
    if y is not None:
        ok = np.isfinite(y)
        ax.plot(ds.cores[ok], y[ok], "o", ms=3.5, color="#333", alpha=0.55, label="measured")
        ag = ds.aggregate(metric)
        ax.plot(ag.cores, ag.value, "s", ms=5, color="#000", label="measured median")
        shown.append(y[ok & (y > 0)])
    vals = np.concatenate(shown) if shown else np.array([])
    if vals.size:
        # Log scale, limits from the predictions and measurements (a band that runs off to
        # infinity, like a USL throughput band reaching 0, does not flatten the plot).
        ax.set_yscale("log")
        ax.set_ylim(float(vals.min()) / 1.5, float(vals.max()) * 1.5)
    ax.axvline(top, color="#555", ls="--", lw=1)
    ax.text(top, ax.get_ylim()[1], " measurements end", va="top", ha="left", fontsize=8, color="#555")
    for c in cores:
        ax.axvline(c, color="#bbb", lw=0.6, ls=":")
    ax.set_xlabel("cores")
    ax.set_ylabel("time (s)" if metric == "time_s" else "throughput")
    ax.set_title(literal(title) or "prediction")
    ax.legend(fontsize=7.5, loc="best")
    ax.grid(alpha=0.3)
    if est is not None:
        ax2 = axes[1, 0]
        for i, (name, sel) in enumerate(sv.stalls.items()):
            col = plt.cm.tab10(i % 10)
            v, lo, hi_ = sel.band(grid, level)
            ax2.plot(grid, v / grid, color=col, lw=1.5, label=literal(f"{name} ({sel.kernel})"))
            ax2.fill_between(grid, lo / grid, hi_ / grid, color=col, alpha=0.12, lw=0,
                             label=f"shaded: {100 * level:g}% band" if i == 0 else None)
            ag = ds.aggregate(name)
            ax2.plot(ag.cores, ag.value / ag.cores, "o", ms=4, color=col)
    if curves:
        ax2 = axes[1, 0]
        for i, (name, model, mid, lo, hi_) in enumerate(curves):
            col = plt.cm.tab10(i % 10)
            with np.errstate(divide="ignore", invalid="ignore"):
                ax2.plot(grid, mid / grid, color=col, lw=1.5, label=literal(f"{name} ({model})"))
                ax2.fill_between(grid, lo / grid, hi_ / grid, color=col, alpha=0.12, lw=0,
                             label=f"shaded: {100 * level:g}% band" if i == 0 else None)
            ag = ds.aggregate(name)
            ax2.plot(ag.cores, ag.value / ag.cores, "o", ms=4, color=col)
    if est is not None or curves:
        ax2.axvline(top, color="#555", ls="--", lw=1)
        ax2.set_xlabel("cores")
        ax2.set_ylabel("stalled cycles per core")
        ax2.set_yscale("log")
        ax2.set_title("stall categories: measured (points) and extrapolated")
        ax2.legend(fontsize=7.5, loc="best")
        ax2.grid(alpha=0.3)
    fig.tight_layout()
    return fig


# ============================================================================ HTML
def render_html(doc: dict[str, Any], fig: Any | None = None, evaluation: Evaluation | None = None) -> str:
    metric = doc["metric"]
    lvl = int(round(100 * doc["level"]))
    blocks = []
    head = f"method {doc['method']}" + (f" → {' + '.join(doc['chosen'])}" if doc.get("chosen") else "")
    blocks.append(H.paragraph(f"{head}; model: {doc['model']}", cls="verdict"))
    if doc.get("reason"):
        blocks.append(H.paragraph(doc["reason"]))
    rows = [[p["cores"], T.fmt(p["time_s"]), T.fmt(p["throughput"]), T.fmt(p["low"]), T.fmt(p["high"])]
            for p in doc["predictions"]]
    if _time_means_nothing(doc):
        rows = [[r[0], *r[2:]] for r in rows]
    blocks.append(H.section(f"Predictions ({metric} band at {lvl}%)", H.table(_prediction_header(doc), rows)))
    if fig is not None:
        blocks.append(H.section("Plot", H.figure(fig)))
    lost = doc.get("lost_core_time")
    if lost:
        body = H.table(LOST_HEADER, [[T.fmt(v) for v in r] for r in lost_rows(lost)]) + H.paragraph(lost["summary"])
        if lost["categories"]:
            body += H.table(WAITS_HEADER, [[r[0]] + [T.fmt(v) if not isinstance(v, str) else v for v in r[1:]]
                                           for r in waits_rows(lost)])
        blocks.append(H.section("Lost core-time (cores × wall − CPU time) and what the waits account for", body))
    if doc.get("bottlenecks"):
        brow = [[b["rank"], b["category"], b["model"], T.fmt(b["growth"]), T.fmt(b["share_measured"]),
                 T.fmt(b["share_at_largest_target"]), _pct(b.get("charged_share")), b["verdict"]]
                for b in doc["bottlenecks"]]
        blocks.append(H.section("Bottlenecks", H.table(
            ["rank", "category", "model", "growth per core", "share (measured)", "share (largest target)",
             "charged to time", "verdict"], brow)))
    blocks.append(L.html_section(doc.get("locks")))
    mrows = []
    for col, m in (doc.get("models") or {}).items():
        if isinstance(m, dict) and "kernel" in m:
            mrows.append([col, m["kernel"], m.get("points", "-"), T.fmt(m.get("checkpoint_rmse")), m.get("formula", "")])
    if mrows:
        blocks.append(H.section("Models", H.table(["series", "kernel", "points", "checkpoint RMSE", "formula"], mrows)))
    if evaluation is not None:
        srows = [[m.method, T.fmt(m.mape), T.fmt(m.max_error), T.fmt(m.coverage), T.fmt(m.best_found)]
                 for m in evaluation.methods if m.ok]
        blocks.append(H.section("Evaluation", H.table(["method", "MAPE %", "max %", "coverage", "best found"], srows)))
    if doc.get("warnings"):
        blocks.append(H.section("Warnings", H.notice_list(doc["warnings"])))
    return H.page("corecast prediction", blocks, subtitle=doc["file"])
