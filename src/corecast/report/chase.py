"""Rendering of `corecast chase` and `corecast calibrate`: terminal tables, plots and JSON
documents (their progress is corecast.messages.Progress)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping, Sequence

from rich.console import Console

from ..memprofile import MemoryProfile
from ..model.memory import ConcurrencyAnalysis, Plateau
from .plots import pyplot
from .terminal import fmt, make_table, print_notices

if TYPE_CHECKING:
    from ..collect.chase.run import Run

DOC_KIND = "corecast-chase"
DOC_VERSION = 1


def fmt_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            v = n / scale
            return f"{v:g} {unit}" if v == int(v) else f"{v:.3g} {unit}"
    return f"{n:g} B"


def gbs(v: float | None) -> str:
    return "-" if v is None else f"{v / 1e9:.3g} GB/s"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


# ------------------------------------------------------------------------------ documents
def run_doc(run: "Run") -> dict[str, Any]:
    return {"conditions": run.conditions(), "points": [p.to_dict() for p in run.points],
            "warnings": list(run.warnings)}


def chase_doc(runs: Mapping[str, "Run"], analysis: ConcurrencyAnalysis | None, plateaus: Sequence[Plateau] | None,
              profile: MemoryProfile | None) -> dict[str, Any]:
    """The `corecast chase --json` document: one block per mode run, with its analysis."""
    first = next(iter(runs.values()))
    doc: dict[str, Any] = {"kind": DOC_KIND, "version": DOC_VERSION, "machine": first.machine.to_dict()}
    for mode, run in runs.items():
        block = run_doc(run)
        if mode == "concurrency" and analysis is not None:
            block["analysis"] = analysis.to_dict()
        if mode == "sizes" and plateaus is not None:
            block["plateaus"] = [p.to_dict() for p in plateaus]
        doc[mode] = block
    if profile is not None:
        doc["profile"] = profile.to_dict()
    return doc


# ------------------------------------------------------------------------------ terminal
def _conditions_line(run: "Run") -> str:
    s = run.settings
    c = run.conditions()
    page = f"{run.page_used} pages" + (f" ({run.huge_fraction:.0%} of the buffer in huge pages)"
                                       if run.huge_fraction is not None else "")
    return (f"{fmt_bytes(s.size_bytes) if run.mode != 'sizes' else 'sizes as listed'}, {s.line}-byte lines, "
            f"{s.pattern_label}" + (f" in groups of {s.tlb_group_pages} pages" if s.pattern == "random" else "")
            + f", {page}; {s.samples} samples of {s.duration_s / s.samples * 1e3:.0f} ms per point after a "
            f"{s.warmup_s * 1e3:.0f} ms warm-up (discarded); timer overhead {run.timer_overhead_ns:.0f} ns per "
            f"sample, subtracted; time base: {c['time_base']}; CPUs in --order {run.order}; "
            f"{run.elapsed_s:.1f} s")


def render_concurrency(run: "Run", a: ConcurrencyAnalysis, con: Console) -> None:
    rows = []
    for p in run.points:
        conc = (p.bandwidth_bytes_s / run.settings.line * a.idle_latency_ns * 1e-9) if a.idle_latency_ns else None
        rows.append([p.threads, p.chains, p.misses, p.latency_ns, p.bandwidth_bytes_s / 1e9, conc,
                     _pct(p.steal), f"{100 * p.cpu_share:.0f}%"])
    con.print(make_table("bandwidth and latency against concurrent misses",
                         ["threads", "chains", "misses", "latency ns", "GB/s", "concurrency", "steal", "ran"],
                         rows))
    con.print("misses: dereferences in flight asked for (threads x chains); concurrency: Little's law at the idle "
              "latency (bandwidth x idle latency / line): the misses the memory system had in flight; ran: least "
              "share of the wall time a thread ran")
    con.print(f"idle latency: {fmt(a.idle_latency_ns)} ns (1 thread, 1 chain)")
    pc = a.per_core
    con.print(f"per-core concurrency limit: {pc.describe(' chains')}"
              + (f" — {pc.reason}" if pc.reason else "")
              + (f"; one core's best {gbs(a.per_core_peak_bandwidth_bytes_s)}" if a.per_core_peak_bandwidth_bytes_s else ""))
    con.print(f"chip-wide plateau: {a.chip.describe(' threads')}" + (f" — {a.chip.reason}" if a.chip.reason else ""))
    t, k = a.peak_at
    con.print(f"peak bandwidth: {gbs(a.peak_bandwidth_bytes_s)} ({t} thread{'s' if t > 1 else ''} x {k} "
              f"chain{'s' if k > 1 else ''}); "
              f"per socket {gbs(a.peak_per_socket_bytes_s)} ({a.peak_sockets} socket{'s' if a.peak_sockets > 1 else ''})")
    con.print(_conditions_line(run))
    print_notices(con, a.notes, kind="note")
    print_notices(con, run.warnings)


def render_sizes(run: "Run", plateaus: Sequence[Plateau], con: Console) -> None:
    where = {}
    for p in plateaus:
        for pt in run.points:
            if p.first_bytes <= pt.size_bytes <= p.last_bytes:
                where[pt.size_bytes] = p.label
    rows = [[fmt_bytes(p.size_bytes), p.latency_ns, where.get(p.size_bytes, "(step)"), _pct(p.steal),
             f"{100 * p.cpu_share:.0f}%"] for p in run.points]
    con.print(make_table("latency against working-set size (1 thread, 1 chain)",
                         ["working set", "latency ns", "level", "steal", "ran"], rows))
    for p in plateaus:
        rep = f"; the machine reports {fmt_bytes(p.cache_bytes)}" if p.cache_bytes else ""
        con.print(f"{p.label}: {fmt(p.latency_ns)} ns from {fmt_bytes(p.first_bytes)} to {fmt_bytes(p.last_bytes)}{rep}")
    if not plateaus:
        con.print("no plateau found (three sizes in a row within 25% of each other)")
    con.print(_conditions_line(run))
    print_notices(con, run.warnings)


def render_loaded(run: "Run", con: Console) -> None:
    rows = [[p.delay, p.latency_ns, p.bandwidth_bytes_s / 1e9, (p.load_bandwidth_bytes_s or 0) / 1e9,
             _pct(p.steal), f"{100 * p.cpu_share:.0f}%"] for p in run.points]
    n = run.points[0].loaders if run.points else 0
    con.print(make_table(f"loaded latency: 1 chaser + {n} loader{'s' if n != 1 else ''}",
                         ["delay", "latency ns", "GB/s", "loaders GB/s", "steal", "ran"], rows))
    con.print("delay: turns of an empty loop each loader waits after each line it reads (MLC's injection delay); "
              "latency: the chaser's, per dereference; GB/s: every thread's lines")
    con.print(_conditions_line(run))
    print_notices(con, run.warnings)


def render_profile(profile: MemoryProfile, path: str, con: Console) -> None:
    levels = ", ".join(f"{c.level} {fmt(c.latency_ns)} ns up to {fmt_bytes(c.size_bytes)}" for c in profile.caches)
    con.print(f"memory profile: {levels or 'no cache levels'}; DRAM "
              f"{fmt(profile.dram_latency_ns)} ns; per-core limit "
              f"{fmt(profile.per_core_concurrency_limit) if profile.per_core_limit_reached else 'not reached'}; "
              f"peak {gbs(profile.peak_bandwidth_bytes_s_per_socket)} per socket")


def render_calibration(doc: Mapping[str, Any], path: str, con: Console) -> None:
    c2c = doc["costs"]["core_to_core_ns"]
    rows = [[f"{p['cpus'][0]} <-> {p['cpus'][1]}", p["kind"].replace("_", " "), p["ns"], p["min_ns"]]
            for p in c2c["pairs"]]
    con.print(make_table("core-to-core cache-line transfer (one way)", ["CPUs", "kind", "ns", "least ns"], rows))
    for kind, why in c2c["not_measured"].items():
        con.print(f"{kind.replace('_', ' ')}: not measurable — {why}")
    m = doc["topology"]
    con.print(f"machine: {doc.get('model') or 'unknown model'}; {m['sockets']} socket(s) x {m['cores_per_socket']} "
              f"cores x {m['threads_per_core']} thread(s)")
    render_profile_summary((doc.get("memory") or {}).get("profile"), con)
    con.print(f"calibrated in {doc['provenance']['elapsed_s']:.1f} s")
    print_notices(con, doc["provenance"].get("warnings", []))


def render_profile_summary(mem: Mapping[str, Any] | None, con: Console) -> None:
    if not mem:
        return
    levels = ", ".join(f"{c['level']} {fmt(c['latency_ns'])} ns" for c in mem.get("caches", []))
    lim = mem.get("per_core_concurrency_limit")
    con.print(f"memory: {levels}; DRAM {fmt(mem.get('dram_latency_ns'))} ns; idle {fmt(mem.get('idle_latency_ns'))} ns; "
              f"per-core limit {fmt(lim) if lim else 'not reached at ' + fmt(mem.get('per_core_chains_measured')) + ' chains'}; "
              f"peak {gbs(mem.get('peak_bandwidth_bytes_s_per_socket'))} per socket")


def render(runs: Mapping[str, "Run"], analysis: ConcurrencyAnalysis | None, plateaus: Sequence[Plateau] | None,
           con: Console) -> None:
    """Every mode run, in order."""
    for mode, run in runs.items():
        if mode == "concurrency" and analysis is not None:
            render_concurrency(run, analysis, con)
        elif mode == "sizes":
            render_sizes(run, plateaus or [], con)
        elif mode == "loaded":
            render_loaded(run, con)


# ------------------------------------------------------------------------------ plots
def save_plot(run: "Run", analysis: ConcurrencyAnalysis | None, plateaus: Sequence[Plateau] | None,
              path: str) -> None:
    """The plot of the mode asked for."""
    from . import plots
    if run.mode == "concurrency" and analysis is not None:
        fig = figure_concurrency(run, analysis, "corecast chase: bandwidth against concurrent misses")
    elif run.mode == "sizes":
        fig = figure_sizes(run, plateaus or [], "corecast chase: latency against working set")
    else:
        fig = figure_loaded(run, "corecast chase: loaded latency")
    plots.save(fig, path)
    pyplot().close(fig)



def figure_concurrency(run: "Run", a: ConcurrencyAnalysis, title: str) -> Any:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    by_t: dict[int, list[Any]] = {}
    for p in run.points:
        by_t.setdefault(p.threads, []).append(p)
    for t, pts in sorted(by_t.items()):
        pts.sort(key=lambda p: p.chains)
        line, = ax.plot([p.misses for p in pts], [p.bandwidth_bytes_s / 1e9 for p in pts], "o-", ms=3,
                        label=f"{t} thread{'s' if t > 1 else ''}")
        k = a.per_threads.get(t)
        if k is not None and k.reached:
            y = max(p.bandwidth_bytes_s for p in pts if p.chains <= k.at) / 1e9
            ax.plot([k.at * t], [y], "D", color=line.get_color(), ms=7, mfc="none")
    pc = a.per_core
    if pc.reached:
        ax.axvline(pc.at, color="grey", ls=":", lw=1)
        ax.annotate(f"per-core limit: {pc.at:g} chains", (pc.at, a.peak_bandwidth_bytes_s / 1e9 * 0.8), fontsize=8,
                    ha="left", va="top", xytext=(3, 0), textcoords="offset points")
    else:
        ax.text(0.02, 0.85, f"per-core limit {pc.describe(' chains')}", transform=ax.transAxes, fontsize=8, va="top")
    ax.axhline(a.peak_bandwidth_bytes_s / 1e9, color="black", ls="--", lw=0.8)
    ax.annotate(f"peak {gbs(a.peak_bandwidth_bytes_s)}", (0.98, a.peak_bandwidth_bytes_s / 1e9), fontsize=8,
                xycoords=("axes fraction", "data"), va="bottom", ha="right")
    ax.set_xscale("log", base=2)
    from matplotlib.ticker import FuncFormatter
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.set_ylim(0, a.peak_bandwidth_bytes_s / 1e9 * 1.12)
    ax.set_xlabel("concurrent misses asked for (threads x chains)")
    ax.set_ylabel("bandwidth (GB/s)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def figure_sizes(run: "Run", plateaus: Sequence[Plateau], title: str) -> Any:
    plt = pyplot()
    from matplotlib.ticker import FuncFormatter
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    ax.plot([p.size_bytes for p in run.points], [p.latency_ns for p in run.points], "o-", ms=3)
    for pl in plateaus:
        ax.hlines(pl.latency_ns, pl.first_bytes, pl.last_bytes, color="grey", lw=4, alpha=0.4)
        ax.annotate(f"{pl.label} {pl.latency_ns:.3g} ns", (pl.first_bytes, pl.latency_ns), fontsize=8,
                    xytext=(0, 4), textcoords="offset points")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: fmt_bytes(v)))
    ax.set_xlabel("working set")
    ax.set_ylabel("latency per dereference (ns)")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return fig


def figure_loaded(run: "Run", title: str) -> Any:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.0, 4.5))
    pts = sorted(run.points, key=lambda p: p.bandwidth_bytes_s)
    ax.plot([p.bandwidth_bytes_s / 1e9 for p in pts], [p.latency_ns for p in pts], "o-", ms=4)
    for p in pts:
        ax.annotate(str(p.delay), (p.bandwidth_bytes_s / 1e9, p.latency_ns), fontsize=7, xytext=(3, 3),
                    textcoords="offset points")
    ax.set_xlabel("bandwidth (GB/s)")
    ax.set_ylabel("chaser latency (ns)")
    ax.set_title(title + " (labels: injection delay)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
