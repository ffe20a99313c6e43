"""What a `corecast chase` run says about the memory system: pure functions over its Dataset.

- `knee(x, y)`: where a growing curve stops growing. A rising line and a second line after a
  breakpoint, y = a + b*min(x, c) + d*max(x - c, 0), are fitted by least squares for every
  breakpoint c among the measured x, then for c between the best one's neighbours (the knee of
  bandwidth at 1, 2, 4, 8, 12 chains may lie at 10); the best c is the knee when the curve really flattened
  there: the slope after it is at most `flat` (a quarter) of the slope before it, over at least
  two measured points past it. Otherwise the limit was not reached in the range measured, and
  the result says how much the curve still grew.
- `analyse_concurrency(ds)`: idle latency (one thread, one chain), the per-core concurrency limit
  (the knee of bandwidth against chains for one thread), the same for every thread count, the
  chip-wide plateau (the knee of the best bandwidth against threads), and the peak bandwidth (in
  all and per socket). Concurrency is Little's law: bandwidth x latency / line. With each
  point's own latency it gives back threads x chains (every chain has one load in flight); with
  the idle latency it is the number of idle-latency misses the memory system must have had in
  flight to deliver that bandwidth, which stops growing where the hardware stops overlapping.
- `staircase(sizes, latencies)`: the plateaus of latency against working-set size, labelled
  L1, L2, ... and DRAM (by the cache sizes the machine reports where given: the plateau that
  reaches past the largest cache is memory, never "L3 (2)"; else in order).
- `build_profile(...)`: the memory profile (`corecast.memprofile`) from those.

Nothing here reads /proc or runs anything; the collector (`corecast.collect.chase`) does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from ..memprofile import CacheLevel, MemoryProfile


# ------------------------------------------------------------------------------ knees
@dataclass
class Knee:
    """Where y stops growing with x."""

    at: float | None            # the knee; None when y was still growing at the largest x
    reached: bool
    peak: float                 # the largest y
    last_x: float               # the largest x measured
    slope_before: float | None = None
    slope_after: float | None = None
    growth_after: float | None = None   # relative growth from the breakpoint to the largest x
    breakpoint: float | None = None     # the best breakpoint, reached or not
    reason: str = ""

    def describe(self, unit: str = "") -> str:
        if self.reached:
            return f"{self.at:.3g}{unit}"
        if self.last_x == 1 and unit.endswith("s"):
            unit = unit[:-1]
        return f"not reached at {self.last_x:g}{unit}" + (
            f" (still +{self.growth_after:.0%} past {self.breakpoint:g})" if self.growth_after is not None
            and self.breakpoint is not None else "")

    def to_dict(self) -> dict[str, Any]:
        d = {"at": self.at, "reached": self.reached, "peak": self.peak, "last_x": self.last_x,
             "slope_before": self.slope_before, "slope_after": self.slope_after,
             "growth_after": self.growth_after, "breakpoint": self.breakpoint, "reason": self.reason}
        return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in d.items()}


def knee(x: Sequence[float], y: Sequence[float], flat: float = 0.25, beyond: int = 2) -> Knee:
    """The knee of y(x) (see the module doc); x need not be evenly spaced."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[ok], ys[ok]
    order = np.argsort(xs)
    xs, ys = xs[order], ys[order]
    if len(xs) == 0:
        return Knee(None, False, math.nan, math.nan, reason="no points")
    peak, last = float(ys.max()), float(xs[-1])
    if len(np.unique(xs)) < 3:
        n = len(np.unique(xs))
        return Knee(None, False, peak, last, reason=f"{n} distinct value{'s' if n > 1 else ''}: too few to see a knee")
    def fit(c: float) -> tuple[float, float, float, float]:
        A = np.column_stack([np.ones_like(xs), np.minimum(xs, c), np.maximum(xs - c, 0.0)])
        coef, *_ = np.linalg.lstsq(A, ys, rcond=None)
        return float(np.sum((A @ coef - ys) ** 2)), c, float(coef[1]), float(coef[2])

    ux = np.unique(xs)
    tiny = 1e-12 * max(1.0, float(np.sum(ys ** 2)))
    best: tuple[float, float, float, float] | None = None      # (sse, c, b, d)
    for i in range(1, len(ux) - 1):                             # the measured x first, then
        cand = fit(float(ux[i]))                                # between their neighbours
        if best is None or cand[0] < best[0] - tiny:
            best = cand
    if best is None:
        return Knee(None, False, peak, last, reason="too few points")
    i = int(np.searchsorted(ux, best[1]))
    for c in np.linspace(ux[i - 1], ux[i + 1], 201)[1:-1]:
        cand = fit(float(c))
        if cand[0] < best[0] - tiny:
            best = cand
    _, c, b, d = best
    c = float(round(c, 3))
    at_c = float(np.interp(c, xs, ys))
    growth = float(ys[-1] / at_c - 1.0) if at_c > 0 else None
    after = int(np.sum(xs > c))
    if b <= 0:
        return Knee(None, False, peak, last, b, d, growth, c, reason="y does not grow with x")
    if d <= flat * b and after >= beyond:
        return Knee(c, True, peak, last, b, d, growth, c, reason=f"slope after {c:g} is {d / b:.0%} of the slope before")
    why = (f"only {after} point{'s' if after != 1 else ''} past {c:g}" if d <= flat * b else
           f"still growing past {c:g} at {d / b:.0%} of the earlier slope")
    return Knee(None, False, peak, last, b, d, growth, c, reason=why)


# ------------------------------------------------------------------------------ concurrency
@dataclass
class ConcurrencyAnalysis:
    line_bytes: int
    idle_latency_ns: float | None
    per_core: Knee                                  # bandwidth against chains, one thread
    per_threads: dict[int, Knee]                    # the same for every thread count
    chip: Knee                                      # best bandwidth against threads
    peak_bandwidth_bytes_s: float
    peak_at: tuple[int, int]                        # (threads, chains)
    peak_per_socket_bytes_s: float
    peak_sockets: int
    per_core_peak_bandwidth_bytes_s: float | None
    best_by_threads: dict[int, tuple[float, int]] = field(default_factory=dict)   # T -> (bw, chains)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"line_bytes": self.line_bytes, "idle_latency_ns": self.idle_latency_ns,
                "per_core_limit": self.per_core.to_dict(),
                "per_thread_count_limit": {str(t): k.to_dict() for t, k in self.per_threads.items()},
                "chip_plateau": self.chip.to_dict(),
                "peak_bandwidth_bytes_s": self.peak_bandwidth_bytes_s,
                "peak_at": {"threads": self.peak_at[0], "chains": self.peak_at[1]},
                "peak_bandwidth_bytes_s_per_socket": self.peak_per_socket_bytes_s,
                "peak_sockets": self.peak_sockets,
                "per_core_peak_bandwidth_bytes_s": self.per_core_peak_bandwidth_bytes_s,
                "best_by_threads": {str(t): {"bandwidth_bytes_s": bw, "chains": k}
                                    for t, (bw, k) in self.best_by_threads.items()},
                "notes": self.notes}


def _col(ds: Dataset, name: str) -> np.ndarray:
    if name == "cores":
        return ds.cores
    if not ds.has(name):
        raise UserError(f"{ds.label}: no '{name}' column (not a `corecast chase` concurrency sweep)")
    return ds.column(name)


def analyse_concurrency(ds: Dataset, line_bytes: int | None = None) -> ConcurrencyAnalysis:
    """The limits of a concurrency sweep (columns cores, chains, latency_ns, bandwidth_bytes_s
    and, where present, sockets)."""
    threads = _col(ds, "cores").astype(int)
    chains = _col(ds, "chains").astype(int)
    lat, bw = _col(ds, "latency_ns"), _col(ds, "bandwidth_bytes_s")
    sockets = ds.column("sockets").astype(int) if ds.has("sockets") else np.ones(len(ds), dtype=int)
    line = int(line_bytes or ds.notes.get("chase", {}).get("line_bytes", 64))
    ok = np.isfinite(bw) & np.isfinite(lat)
    if not ok.any():
        raise UserError(f"{ds.label}: no measured points")
    notes: list[str] = []
    idle_rows = ok & (threads == 1) & (chains == 1)
    idle = float(np.median(lat[idle_rows])) if idle_rows.any() else ds.notes.get("chase", {}).get("idle_latency_ns")
    if idle is None:
        notes.append("no point with one thread and one chain: no idle latency")
    per_threads: dict[int, Knee] = {}
    best: dict[int, tuple[float, int]] = {}
    for t in sorted(set(threads[ok].tolist())):
        m = ok & (threads == t)
        per_threads[t] = knee(chains[m], bw[m])
        i = int(np.flatnonzero(m)[np.argmax(bw[m])])
        best[t] = (float(bw[i]), int(chains[i]))
    t1 = min(per_threads)
    if t1 != 1:
        notes.append(f"no one-thread curve: the per-core limit is read from {t1} threads")
    per_core = per_threads[t1]
    chip = knee(list(best), [v[0] for v in best.values()])
    i = int(np.flatnonzero(ok)[np.argmax(bw[ok])])
    return ConcurrencyAnalysis(
        line_bytes=line, idle_latency_ns=idle, per_core=per_core, per_threads=per_threads, chip=chip,
        peak_bandwidth_bytes_s=float(bw[i]), peak_at=(int(threads[i]), int(chains[i])),
        peak_per_socket_bytes_s=float(bw[i] / max(1, sockets[i])), peak_sockets=int(max(1, sockets[i])),
        per_core_peak_bandwidth_bytes_s=best[1][0] if 1 in best else None, best_by_threads=best, notes=notes)


def concurrency(bandwidth_bytes_s: np.ndarray | float, latency_ns: np.ndarray | float, line: int) -> Any:
    """Little's law: lines in flight = bandwidth (lines/s) x latency (s)."""
    return np.asarray(bandwidth_bytes_s) / line * np.asarray(latency_ns) * 1e-9


# ------------------------------------------------------------------------------ sizes
@dataclass
class Plateau:
    label: str
    first_bytes: int                # smallest working set on it
    last_bytes: int                 # largest working set on it (the level holds at least this)
    latency_ns: float               # median over its points
    points: int
    cache_bytes: int | None = None  # the size the machine reports for that level

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "first_bytes": self.first_bytes, "last_bytes": self.last_bytes,
                "latency_ns": self.latency_ns, "points": self.points, "cache_bytes": self.cache_bytes}


DRAM_LATENCY_NS = 50.0     # without cache sizes: a last plateau slower than this is memory


def staircase(sizes: Sequence[float], latency_ns: Sequence[float],
              caches: Sequence[tuple[int, int]] | None = None, rise: float = 0.25,
              min_points: int = 3) -> list[Plateau]:
    """Plateaus of latency against working-set size: runs of at least `min_points` consecutive
    sizes whose latency stays within `rise` (25%) above the run's first; the points between
    runs are transitions. Neighbouring runs whose latencies are within `rise` of each other are
    one level (a noisy point, or latency creeping up with TLB misses, had split it) and are
    merged. `caches`: (level, bytes) of the data caches, for the labels."""
    s, y = np.asarray(sizes, dtype=float), np.asarray(latency_ns, dtype=float)
    ok = np.isfinite(s) & np.isfinite(y) & (y > 0)
    s, y = s[ok], y[ok]
    o = np.argsort(s)
    s, y = s[o], y[o]
    runs: list[tuple[int, int]] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and y[j + 1] <= y[i] * (1 + rise):
            j += 1
        if j - i + 1 >= min_points:
            if runs and _same_level(y[runs[-1][0]:runs[-1][1] + 1], y[i:j + 1], rise):
                runs[-1] = (runs[-1][0], j)
            else:
                runs.append((i, j))
        i = j + 1
    out = [Plateau("", int(s[a]), int(s[b]), float(np.median(y[a:b + 1])), b - a + 1) for a, b in runs]
    _label(out, sorted(caches or []))
    return out


def _same_level(a: np.ndarray, b: np.ndarray, rise: float) -> bool:
    lo, hi = sorted((float(np.median(a)), float(np.median(b))))
    return hi <= lo * (1 + rise)


def _label(plateaus: list[Plateau], caches: list[tuple[int, int]]) -> None:
    """L1, L2, ... and DRAM. With the machine's cache sizes: memory is the plateau that reaches
    past the largest cache (the last one, or the first whose middle is past it), and the
    plateaus before it are caches, each at the smallest level that holds its middle working set
    and above the level before it. Without them: in order, and a last plateau slower than
    DRAM_LATENCY_NS is memory. A second plateau at one level is numbered: "L3 (2)"."""
    labels: list[tuple[str, int | None]] = []
    if caches:
        llc = max(size for _, size in caches)
        dram = next((k for k, p in enumerate(plateaus)
                     if p.last_bytes > llc and (k == len(plateaus) - 1 or math.sqrt(p.first_bytes * p.last_bytes) > llc)),
                    None)
        below = 0
        for k, p in enumerate(plateaus):
            if dram is not None and k >= dram:
                labels.append(("DRAM", None))
                continue
            mid = math.sqrt(p.first_bytes * p.last_bytes)
            fit = next(((lv, size) for lv, size in caches if size >= mid and lv > below), None) \
                or next(((lv, size) for lv, size in caches if lv > below), None) or caches[-1]
            below = fit[0]
            labels.append((f"L{fit[0]}", fit[1]))
    else:
        for k, p in enumerate(plateaus):
            last = k == len(plateaus) - 1
            labels.append(("DRAM" if last and k > 0 and p.latency_ns >= DRAM_LATENCY_NS else f"L{k + 1}", None))
    used: set[str] = set()
    for p, (label, size) in zip(plateaus, labels):
        base, n = label, 2
        while label in used:
            label, n = f"{base} ({n})", n + 1
        used.add(label)
        p.label, p.cache_bytes = label, size


def analyse_sizes(ds: Dataset) -> list[Plateau]:
    """The staircase of a size sweep's Dataset (columns size and latency_ns; the machine's cache
    sizes from its notes, where the collector put them)."""
    if ds.size is None or not ds.has("latency_ns"):
        raise UserError(f"{ds.label}: not a `corecast chase --sweep-size` Dataset (size and latency_ns needed)")
    caches = [(int(c["level"]), int(c["size_bytes"])) for c in ds.notes.get("chase", {}).get("caches", [])
              if isinstance(c, Mapping) and "level" in c and "size_bytes" in c]
    return staircase(ds.size, ds.column("latency_ns"), caches)


# ------------------------------------------------------------------------------ the profile
@dataclass
class Results:
    """What the runs of one `chase` (or `calibrate`) say."""

    concurrency: ConcurrencyAnalysis | None
    plateaus: list[Plateau] | None

    def profile(self, datasets: Mapping[str, Dataset]) -> MemoryProfile:
        machine = next(iter(datasets.values())).machine.to_dict() if datasets else {}
        return build_profile(self.concurrency, self.plateaus, machine,
                             {mode: ds.notes.get("chase", {}) for mode, ds in datasets.items()})


def analyse(datasets: Mapping[str, Dataset]) -> Results:
    """Analyse the Datasets of the modes run ({"concurrency": ..., "sizes": ...})."""
    return Results(analyse_concurrency(datasets["concurrency"]) if "concurrency" in datasets else None,
                   analyse_sizes(datasets["sizes"]) if "sizes" in datasets else None)


def build_profile(conc: ConcurrencyAnalysis | None, plateaus: Sequence[Plateau] | None,
                  machine: Mapping[str, Any], conditions: Mapping[str, Any]) -> MemoryProfile:
    """The memory profile from a concurrency analysis and a staircase (either may be missing)."""
    caches = [CacheLevel(level=p.label, latency_ns=p.latency_ns, size_bytes=p.last_bytes,
                         first_bytes=p.first_bytes, reported_bytes=p.cache_bytes)
              for p in plateaus or [] if p.label.startswith("L")]
    dram = next((p.latency_ns for p in plateaus or [] if p.label == "DRAM"), None)
    pc = conc.per_core if conc else None
    return MemoryProfile(
        machine=dict(machine), line_bytes=int(conc.line_bytes if conc else
                                              next(iter(conditions.values()), {}).get("line_bytes", 64)),
        caches=caches, dram_latency_ns=dram,
        idle_latency_ns=conc.idle_latency_ns if conc else dram,
        per_core_concurrency_limit=pc.at if pc and pc.reached else None,
        per_core_limit_reached=bool(pc and pc.reached),
        per_core_chains_measured=pc.last_x if pc else None,
        per_core_peak_bandwidth_bytes_s=conc.per_core_peak_bandwidth_bytes_s if conc else None,
        chip_plateau_threads=conc.chip.at if conc and conc.chip.reached else None,
        peak_bandwidth_bytes_s=conc.peak_bandwidth_bytes_s if conc else None,
        peak_bandwidth_bytes_s_per_socket=conc.peak_per_socket_bytes_s if conc else None,
        peak_threads=conc.peak_at[0] if conc else None, peak_sockets=conc.peak_sockets if conc else None,
        conditions=dict(conditions))
