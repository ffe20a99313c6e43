"""A chase run as a corecast Dataset (what `-o` writes and `usl`, `export`, `info` read).

One row per point. `cores` is the number of threads (chasers, plus loaders in the loaded mode),
`size` the buffer's bytes (a key column: the working set); the rest are metric columns with
their units: `chains` (per thread), `latency_ns`, `bandwidth_bytes_s` (kind throughput, so
`corecast usl FILE` fits it as it is), `concurrency` (Little's law at the idle latency, see
corecast.model.memory), `sockets`, `steal` and `cpu_share`; the loaded mode adds `delay`,
`loaders` and `load_bandwidth_bytes_s`. A concurrency sweep has several rows per thread count
(one per chain count), which `usl` reads as repetitions of that count: for the thread scaling at
one chain count, run the sweep with that `--chains`. The (1 thread, 1 chain) point a sweep
measures for the idle latency when it was not asked for is left out of the rows `-o` writes
(`idle_row=False`; its latency is the notes' `idle_latency_ns`), so that it is not read as a
repetition of one thread.
"""
from __future__ import annotations

from ... import __version__
from ...dataset import ColumnInfo, Dataset
from .run import Run

SOURCE = "measured: corecast chase"

_COLUMNS = {
    "chains": ("other", "chains per thread", "independent pointer chains each thread walks, interleaved"),
    "latency_ns": ("latency", "ns", "time per dereference of one chain (median over the samples)"),
    "bandwidth_bytes_s": ("throughput", "bytes/s", "lines dereferenced x line size per second, all threads"),
    "concurrency": ("other", "lines", "Little's law at the idle latency: bandwidth x idle latency / line"),
    "sockets": ("other", "count", "sockets the threads' CPUs span"),
    "steal": ("other", "ratio", "steal time / time of the point's CPUs (/proc/stat)"),
    "cpu_share": ("other", "ratio", "least share of the wall time any thread of the point ran"),
    "delay": ("other", "loop turns", "injection delay of each loader after each line"),
    "loaders": ("other", "count", "bandwidth loader threads"),
    "load_bandwidth_bytes_s": ("throughput", "bytes/s", "the loaders' part of the bandwidth"),
}


def idle_latency_ns(run: Run) -> float | None:
    """The latency of the one-thread, one-chain point of a concurrency sweep."""
    return next((p.latency_ns for p in run.points if p.threads == 1 and p.chains == 1 and not p.loaders), None)


def to_dataset(run: Run, idle_row: bool = True) -> Dataset:
    """The run's points as a Dataset (see the module doc). `idle_row=False` (what `-o` writes)
    leaves out the idle-latency point the sweep added unasked; the analysis keeps it."""
    line = run.settings.line
    idle = idle_latency_ns(run) if run.mode == "concurrency" else None
    rows = []
    for p in run.points:
        if not idle_row and run.idle_only and p.threads == 1 and p.chains == 1 and not p.loaders:
            continue
        row: dict[str, float | None] = {"cores": p.threads + p.loaders, "size": p.size_bytes, "chains": p.chains,
                                        "latency_ns": p.latency_ns, "bandwidth_bytes_s": p.bandwidth_bytes_s}
        if run.mode == "concurrency":
            # Little's law: lines per second x seconds per line at idle
            row["concurrency"] = p.bandwidth_bytes_s / line * idle * 1e-9 if idle else None
        row.update(sockets=p.sockets, steal=p.steal, cpu_share=p.cpu_share)
        if run.mode == "loaded":
            row.update(delay=p.delay, loaders=p.loaders, load_bandwidth_bytes_s=p.load_bandwidth_bytes_s)
        rows.append(row)
    notes = {"chase": {**run.conditions(), "idle_latency_ns": idle, "warnings": list(run.warnings),
                       "caches": [{"level": c.level, "size_bytes": c.size_bytes, "shared_cpus": c.shared_cpus}
                                  for c in run.caches]}}
    ds = Dataset.from_rows(rows, machine=run.machine, command="corecast chase", notes=notes,
                           corecast_version=__version__)
    for name in ds.metric_names:
        kind, unit, what = _COLUMNS[name]
        ds.columns[name] = ColumnInfo(name=name, kind=kind, unit=unit, source=SOURCE, status="ok", description=what)
    return ds
