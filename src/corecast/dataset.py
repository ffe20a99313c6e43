"""The Dataset: the one structure every part of corecast exchanges.

One row per run: `cores`, optional `repetition`, optional `size` (problem size), and named
numeric metric columns (`time_s`, `throughput`, `rss_bytes`, one column per stall category,
...). Metadata says what machine the runs came from, which command ran, which corecast
version recorded it, and for each column its unit, its source (hardware event, software
source, plugin, file) and its status.

Files:
- CSV (`read_csv`): a header with a `cores` column is enough (`cores,throughput`); a tab or a
  semicolon separates the fields where the header has no comma. A table from another tool
  (`threads,time_ms`, `Processors,Throughput`) is read under corecast's names
  (`corecast.headers`), saying so. Lines starting with `#` are comments; the metadata is in
  FILE.meta.json beside it, or in one `# corecast: {...}` first line.
  An empty cell is a missing value (a run that produced no number); the text `nan` or `inf`
  is an error, as is anything else that is not a number.
- JSON (`read_json`): `{"format": "corecast-dataset", "version": 1, "machine": {...}, "columns": {...},
  "rows": [{"cores": 1, "time_s": 2.5}, ...]}`; a bare list of row objects is accepted too.
- SQLite campaign files (written by `corecast measure` through `corecast.store`): `read_campaign`.

The readers, one per format, are all here; `load(path)` picks one by the file's content.
Every mistake in a file ends in a `UserError` naming the file, line (or row) and column.

Size: about 820 lines, one subject: the Dataset and its files -- the table, its metadata, its
writers and its three readers, which share the checks of key columns, values and metadata.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import shlex
import sqlite3
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from . import headers, messages, outputs, store
from .errors import UserError, read_input, where
from .parsing import MAX_CORES, MAX_DATASET_BYTES, MAX_ROWS, finite, json_document

FORMAT_NAME = "corecast-dataset"
FORMAT_VERSION = 1
CSV_META_PREFIX = "# corecast:"

#: Columns that describe a run rather than measure it.
KEY_COLUMNS = ("cores", "repetition", "size")

#: Column kinds. A `stall` column is a stall category the stall-based predictor extrapolates.
KINDS = ("time", "throughput", "latency", "stall", "memory", "cpu", "counter", "other")

#: Well-known metric columns and what they are. Any other numeric column in a plain file is a
#: stall category (kind `stall`), as the predict command expects.
KNOWN_COLUMNS: dict[str, tuple[str, str]] = {
    "time_s": ("time", "s"),
    "throughput": ("throughput", "1/s"),
    "latency_s": ("latency", "s"),
    "rss_bytes": ("memory", "bytes"),
    "user_s": ("cpu", "s"),
    "sys_s": ("cpu", "s"),
    "cpu_s": ("cpu", "s"),
    "exit_status": ("other", ""),
    "voluntary_ctxsw": ("counter", "count"),
    "involuntary_ctxsw": ("counter", "count"),
    "context_switches": ("counter", "count"),
    "cpu_migrations": ("counter", "count"),
    "page_faults": ("counter", "count"),
    "instructions": ("counter", "count"),
    "cycles": ("counter", "count"),
    "task_clock_ns": ("cpu", "ns"),
    # bytes moved between the cores and memory in a run (resctrl's mbm_total_bytes, uncore or
    # data-fabric counters), or the bandwidth they make: what a bandwidth ceiling is made from
    "memory_bytes": ("memory_traffic", "bytes"),
    "memory_bandwidth_bytes_s": ("memory_traffic", "bytes/s"),
}


@dataclass
class ColumnInfo:
    """Where a column came from and what it means."""

    name: str
    kind: str = "other"
    unit: str | None = None
    source: str | None = None          # e.g. "measured: perf software event task-clock"
    status: str = "ok"                 # ok | not supported | denied | invalid | unavailable | derived
    description: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if v is not None and k != "name"}
        return d

    @classmethod
    def from_dict(cls, name: str, d: Mapping[str, Any], where: object = "metadata") -> "ColumnInfo":
        """A column's description as a file's metadata gives it: every field a string (kind and
        status left at their defaults when null); anything else is one UserError naming it."""
        known = {f.name for f in fields(cls)} - {"name"}
        got: dict[str, Any] = {}
        for k in known:
            v = d.get(k)
            if v is None:
                continue
            if not isinstance(v, str):
                raise UserError(f"{where}: metadata of column '{name}': '{k}' is {_shown(v)}, not a string")
            got[k] = v
        return cls(name=name, **got)


#: A column named `X_idle_cycles` is the part of the stall category `X_cycles` during which cores
#: stood idle (the sync shim's split; corecast.model.losttime): a part of a category, not one.
IDLE_PART_SUFFIX = "_idle_cycles"


def default_column_info(name: str, source: str | None = None) -> ColumnInfo:
    kind, unit = KNOWN_COLUMNS.get(name, ("stall", None))
    if name not in KNOWN_COLUMNS and name.endswith(IDLE_PART_SUFFIX):
        kind, unit = "counter", "cycles"
    if kind == "stall" and name.endswith("_s"):
        unit = "s"
    elif kind == "stall" and ("cycles" in name):
        unit = "cycles"
    return ColumnInfo(name=name, kind=kind, unit=unit, source=source)


#: The machine's fields that are text (the others are counts, and the clock).
_MACHINE_TEXT = ("cpu_model", "vendor", "kernel", "hostname")


def _shown(v: Any) -> str:
    """A value from a file, short, for an error message."""
    try:
        text = json.dumps(v)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class Machine:
    """The machine the runs came from. Every field is optional: a plain CSV says nothing."""

    cpu_model: str | None = None
    vendor: str | None = None
    family: int | None = None
    model: int | None = None
    sockets: int | None = None
    cores: int | None = None              # physical cores in all
    threads_per_core: int | None = None
    logical_cpus: int | None = None
    numa_nodes: int | None = None
    nominal_freq_hz: float | None = None
    kernel: str | None = None
    hostname: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None, where: object = "metadata") -> "Machine":
        """The machine a file's metadata describes, each value checked (names are strings, counts
        whole numbers from 0 to MAX_CORES, the clock a finite number, 0 or more): anything else is
        one UserError naming it, not a failure wherever the value is first used."""
        if not d:
            return cls()
        if not isinstance(d, Mapping):
            raise UserError(f"{where}: metadata 'machine' must be an object")
        got: dict[str, Any] = {}
        for f in fields(cls):
            v = d.get(f.name)
            if v is None:
                continue
            if f.name in _MACHINE_TEXT:
                ok, want = isinstance(v, str), "a string"
            elif f.name == "nominal_freq_hz":        # 0 where a kernel said so: as unknown
                ok, want = _finite_number(v) and v >= 0, "a number, 0 or more"
            else:
                ok = isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_CORES
                want = f"a whole number from 0 to {MAX_CORES:,}"
            if not ok:
                raise UserError(f"{where}: metadata 'machine': '{f.name}' is {_shown(v)}, not {want}")
            got[f.name] = v
        return cls(**got)

    def describe(self) -> str:
        parts = []
        if self.cpu_model:
            parts.append(self.cpu_model)
        topo = []
        if self.sockets:
            topo.append(f"{self.sockets} socket{'s' if self.sockets != 1 else ''}")
        if self.cores:
            topo.append(f"{self.cores} cores")
        if self.threads_per_core:
            topo.append(f"{self.threads_per_core} thread{'s' if self.threads_per_core != 1 else ''}/core")
        if topo:
            parts.append(", ".join(topo))
        if self.nominal_freq_hz:
            parts.append(f"{self.nominal_freq_hz / 1e9:.2f} GHz")
        return "; ".join(parts) if parts else "unknown machine"


@dataclass
class Aggregate:
    """One value per distinct core count: median of the repetitions, with their spread."""

    cores: np.ndarray
    value: np.ndarray      # median
    low: np.ndarray        # smallest repetition
    high: np.ndarray       # largest repetition
    std: np.ndarray        # sample standard deviation (0 with one repetition)
    count: np.ndarray      # repetitions that gave a number
    name: str = ""


@dataclass
class Dataset:
    cores: np.ndarray
    metrics: dict[str, np.ndarray] = field(default_factory=dict)
    repetition: np.ndarray | None = None
    size: np.ndarray | None = None
    columns: dict[str, ColumnInfo] = field(default_factory=dict)
    machine: Machine = field(default_factory=Machine)
    command: str | None = None
    corecast_version: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    path: str | None = None
    #: Side tables: rows that are not one number per run (a campaign's per-lock table, `locks`),
    #: each row a JSON object with the `cores` (and `repetition`) of the run it belongs to.
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.cores = np.asarray(self.cores, dtype=float)
        n = len(self.cores)
        for name, values in list(self.metrics.items()):
            arr = np.asarray(values, dtype=float)
            if arr.shape != (n,):
                raise ValueError(f"column {name!r} has {arr.shape} values for {n} rows")
            self.metrics[name] = arr
            if name not in self.columns:
                self.columns[name] = default_column_info(name)
        for attr in ("repetition", "size"):
            v = getattr(self, attr)
            if v is not None:
                arr = np.asarray(v, dtype=float)
                if arr.shape != (n,):
                    raise ValueError(f"{attr} has {arr.shape} values for {n} rows")
                setattr(self, attr, arr)

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self.cores)

    @property
    def label(self) -> str:
        return self.path or "dataset"

    @property
    def metric_names(self) -> list[str]:
        return list(self.metrics)

    def has(self, name: str) -> bool:
        return name in self.metrics

    def column(self, name: str) -> np.ndarray:
        if name == "cores":
            return self.cores
        if name in ("repetition", "size"):
            v = getattr(self, name)
            if v is None:
                raise UserError(f"{self.label}: has no '{name}' column")
            return v
        if name not in self.metrics:
            avail = ", ".join(self.metrics) or "none"
            raise UserError(f"{self.label}: unknown metric '{name}' (metrics in this file: {avail})")
        return self.metrics[name]

    def names_of_kind(self, kind: str) -> list[str]:
        return [n for n in self.metrics if self.columns[n].kind == kind]

    @property
    def stall_names(self) -> list[str]:
        """Stall categories with at least one measured value."""
        return [n for n in self.names_of_kind("stall") if np.isfinite(self.metrics[n]).any()]

    @property
    def distinct_cores(self) -> np.ndarray:
        return np.unique(self.cores)

    def aggregate(self, name: str) -> Aggregate:
        """Median per distinct core count (missing values skipped), with spread."""
        values = self.column(name)
        cs, med, lo, hi, sd, cnt = [], [], [], [], [], []
        for c in self.distinct_cores:
            v = values[(self.cores == c) & np.isfinite(values)]
            if len(v) == 0:
                continue
            cs.append(c)
            med.append(float(np.median(v)))
            lo.append(float(v.min()))
            hi.append(float(v.max()))
            sd.append(float(v.std(ddof=1)) if len(v) > 1 else 0.0)
            cnt.append(len(v))
        return Aggregate(np.array(cs, dtype=float), np.array(med), np.array(lo), np.array(hi),
                         np.array(sd), np.array(cnt, dtype=int), name=name)

    def throughput_name(self) -> str:
        if "throughput" in self.metrics and np.isfinite(self.metrics["throughput"]).any():
            return "throughput"
        if "time_s" in self.metrics and np.isfinite(self.metrics["time_s"]).any():
            return "time_s"
        if "latency_s" in self.metrics and np.isfinite(self.metrics["latency_s"]).any():
            return "latency_s"
        # a throughput under another name, with its unit (corecast chase's bandwidth_bytes_s)
        for name in self.names_of_kind("throughput"):
            if np.isfinite(self.metrics[name]).any():
                return name
        avail = ", ".join(self.metrics) or "none"
        raise UserError(f"{self.label}: needs a 'throughput', 'time_s' or 'latency_s' column "
                        f"(metrics in this file: {avail})")

    def throughput(self, metric: str | None = None) -> tuple[np.ndarray, np.ndarray, str]:
        """Rows usable as throughput: (cores, X, how X was obtained).

        With `metric` None: the `throughput` column if it has values, else 1/`time_s` (the time
        of a fixed amount of work), else Little's law N/`latency_s` (mean response time at
        concurrency N). A named metric is used as is, except a column of kind `time` (inverted)
        or `latency` (Little's law).
        """
        name = metric or self.throughput_name()
        values = self.column(name)
        ok = np.isfinite(values)
        kind = self.columns.get(name, default_column_info(name)).kind
        if kind in ("time", "latency"):
            if np.any(values[ok] <= 0):
                bad = int(np.flatnonzero(ok & (values <= 0))[0])
                raise UserError(f"{self.label}: row {bad + 1}: column '{name}' must be > 0 to be "
                                f"turned into throughput (got {values[bad]:g})")
            if kind == "latency":
                return self.cores[ok], self.cores[ok] / values[ok], f"N/{name} (Little's law)"
            return self.cores[ok], 1.0 / values[ok], f"1/{name}"
        return self.cores[ok], values[ok], name

    # ------------------------------------------------------------ transformation
    def select(self, mask: np.ndarray) -> "Dataset":
        mask = np.asarray(mask, dtype=bool)
        return Dataset(
            cores=self.cores[mask],
            metrics={k: v[mask] for k, v in self.metrics.items()},
            repetition=None if self.repetition is None else self.repetition[mask],
            size=None if self.size is None else self.size[mask],
            columns=dict(self.columns), machine=self.machine, command=self.command,
            corecast_version=self.corecast_version, notes=dict(self.notes), path=self.path,
            tables=self._tables_of(mask))

    def _tables_of(self, mask: np.ndarray) -> dict[str, list[dict[str, Any]]]:
        """The side tables' rows of the runs `mask` keeps (by core count and repetition)."""
        if not self.tables:
            return {}
        if self.repetition is None:
            keep = {(float(c), None) for c in self.cores[mask]}
        else:
            keep = {(float(c), float(r)) for c, r in zip(self.cores[mask], self.repetition[mask])}

        def kept(row: dict[str, Any]) -> bool:
            rep = row.get("repetition") if self.repetition is not None else None
            return (float(row.get("cores", math.nan)), None if rep is None else float(rep)) in keep

        return {name: [r for r in rows if kept(r)] for name, rows in self.tables.items()}

    def with_column(self, name: str, values: Iterable[float], info: ColumnInfo | None = None) -> "Dataset":
        d = self.select(np.ones(len(self), dtype=bool))
        d.metrics[name] = np.asarray(list(values) if not isinstance(values, np.ndarray) else values, dtype=float)
        d.columns[name] = info or default_column_info(name)
        return d

    def rows(self) -> Iterator[dict[str, float]]:
        for i in range(len(self)):
            row: dict[str, float] = {"cores": _num(self.cores[i])}
            if self.repetition is not None:
                row["repetition"] = _num(self.repetition[i])
            if self.size is not None:
                row["size"] = _num(self.size[i])
            for k, v in self.metrics.items():
                row[k] = _num(v[i])
            yield row

    @classmethod
    def from_rows(cls, rows: Iterable[Mapping[str, Any]], **meta: Any) -> "Dataset":
        rows = list(rows)
        names: list[str] = []
        for r in rows:
            for k in r:
                if k not in KEY_COLUMNS and k not in names:
                    names.append(k)
        cores = [r["cores"] for r in rows]
        rep = [r.get("repetition", np.nan) for r in rows] if any("repetition" in r for r in rows) else None
        size = [r.get("size", np.nan) for r in rows] if any("size" in r for r in rows) else None
        metrics = {n: [np.nan if r.get(n) is None else r.get(n) for r in rows] for n in names}
        return cls(cores=cores, metrics=metrics, repetition=rep, size=size, **meta)

    def metadata(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"format": FORMAT_NAME, "version": FORMAT_VERSION}
        if self.machine.to_dict():
            meta["machine"] = self.machine.to_dict()
        if self.command:
            meta["command"] = self.command
        if self.corecast_version:
            meta["corecast_version"] = self.corecast_version
        meta["columns"] = {n: self.columns[n].to_dict() for n in self.metrics}
        if self.notes:
            meta["notes"] = self.notes
        if any(self.tables.values()):
            meta["tables"] = {k: v for k, v in self.tables.items() if v}
        return meta

    # ------------------------------------------------------------------ output
    def to_csv(self, path: str | Path | None = None, metadata: str = "sidecar", what: str = "") -> str:
        """A plain CSV (a header, then one line a row) that any CSV reader loads as it is.

        metadata: "sidecar" (written to path + ".meta.json" beside the CSV, which `read_csv`
        picks up; nothing when there is no path, or when the path is a device or a pipe),
        "inline" (a `# corecast: {json}` first line, which readers other than corecast must be
        told to skip), or "none". Files are written by `outputs` and named there (`what`)."""
        if metadata not in ("sidecar", "inline", "none"):
            raise ValueError(f"metadata: {metadata!r}")
        buf = io.StringIO()
        if metadata == "inline":
            buf.write(f"{CSV_META_PREFIX} {json.dumps(self.metadata(), sort_keys=True)}\n")
        header = ["cores"]
        if self.repetition is not None:
            header.append("repetition")
        if self.size is not None:
            header.append("size")
        header.extend(self.metrics)
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        for row in self.rows():
            w.writerow(["" if row[h] is None else _fmt(row[h]) for h in header])
        text = buf.getvalue()
        if path is not None:
            side = sidecar_path(path)
            if metadata == "sidecar" and outputs.check(path) in ("new", "regular"):
                outputs.check(side)         # a sidecar that cannot be written stops both, before either
            regular = outputs.write_text(path, text, what or f"{len(self.cores)} rows, CSV")
            if not regular:
                if metadata == "sidecar":
                    messages.note(f"{path} is not a regular file: no metadata sidecar is written beside it")
            elif metadata == "sidecar":
                outputs.write_text(side, json.dumps(self.metadata(), indent=1, sort_keys=True) + "\n",
                                   "its metadata")
            else:
                outputs.remove_stale(side)  # a stale sidecar would be read back with this CSV
        return text

    def to_records(self, path: str | Path | None = None, what: str = "") -> str:
        """The rows as a JSON array of objects (what `pandas.read_json` reads as a table)."""
        text = json.dumps(list(self.rows()), indent=1, allow_nan=False) + "\n"
        if path is not None:
            outputs.write_text(path, text, what or f"{len(self.cores)} rows, JSON records")
        return text

    def to_json(self, path: str | Path | None = None, what: str = "") -> str:
        doc = self.metadata()
        doc["rows"] = list(self.rows())
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
        if path is not None:
            outputs.write_text(path, text, what or f"{len(self.cores)} rows, JSON")
        return text

    def save(self, path: str | Path, what: str = "") -> None:
        """Write the Dataset as CSV (with its metadata beside it) or JSON, by the extension;
        each file written is named on standard error (`what`: said beside the main one)."""
        suffix = Path(path).suffix.lower()
        if outputs.check(path) in ("in place", "descriptor") and suffix != ".json":
            self.to_csv(path, metadata="none", what=what)     # a device, a pipe, /dev/stdout
        elif suffix == ".json":
            self.to_json(path, what)
        elif suffix == ".csv":
            self.to_csv(path, what=what)
        else:
            raise UserError(f"{path}: cannot tell the format from the extension (use .csv or .json)")


# ====================================================================== helpers
def _num(v: float) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    f = float(v)
    if math.isnan(f):
        return None
    return int(f) if f.is_integer() and abs(f) < 2**53 else f


def _fmt(v: Any) -> str:
    if isinstance(v, int):
        return str(v)
    return repr(float(v))



def _parse_number(text: str, path: object, line: int, column: str) -> float:
    return finite(text, where(path, line, column))


def _check_key(name: str, v: float, path: object, line: int | None, col: str, row_label: str | None = None) -> None:
    loc = where(path, line, col) if row_label is None else f"{path}: {row_label}: column '{col}'"
    if name == "cores" and v <= 0:
        raise UserError(f"{loc}: cores must be > 0 (got {v:g})")
    if name == "cores" and v > MAX_CORES:
        raise UserError(f"{loc}: cores must be at most {MAX_CORES:,} (got {v:g})")
    if name == "repetition" and (v < 0 or not float(v).is_integer()):
        raise UserError(f"{loc}: repetition must be a whole number >= 0 (got {v:g})")
    if name == "size" and v <= 0:
        raise UserError(f"{loc}: size must be > 0 (got {v:g})")


def _apply_meta(meta: Mapping[str, Any], names: list[str], path: object) -> dict[str, Any]:
    cols_meta = meta.get("columns") or {}
    if not isinstance(cols_meta, Mapping):
        raise UserError(f"{path}: metadata 'columns' must be an object")
    columns = {}
    for n in names:
        info = cols_meta.get(n)
        columns[n] = ColumnInfo.from_dict(n, info, path) if isinstance(info, Mapping) else default_column_info(n, source=f"file {Path(str(path)).name}")
    machine = meta.get("machine")
    if machine is not None and not isinstance(machine, Mapping):
        raise UserError(f"{path}: metadata 'machine' must be an object")
    for key in ("command", "corecast_version"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise UserError(f"{path}: metadata '{key}' is {_shown(meta[key])}, not a string")
    notes = meta.get("notes") or {}
    if not isinstance(notes, Mapping):
        raise UserError(f"{path}: metadata 'notes' must be an object")
    _campaign_notes(notes, path)
    return dict(columns=columns, machine=Machine.from_dict(machine, path), command=meta.get("command"),
                corecast_version=meta.get("corecast_version"), notes=dict(notes),
                tables=_side_tables(meta.get("tables"), path))


def _side_tables(doc: Any, path: object) -> dict[str, list[dict[str, Any]]]:
    """The metadata's side tables, checked: names to lists of flat objects with a `cores`,
    MAX_ROWS rows in all."""
    if doc is None:
        return {}
    if not isinstance(doc, Mapping):
        raise UserError(f"{path}: metadata 'tables' must be an object of tables (lists of rows)")
    out: dict[str, list[dict[str, Any]]] = {}
    total = 0
    for name, rows in doc.items():
        if not isinstance(rows, list):
            raise UserError(f"{path}: metadata table '{name}' must be a list of row objects")
        total += len(rows)
        if total > MAX_ROWS:
            raise UserError(f"{path}: metadata tables hold more than {MAX_ROWS:,} rows")
        numbers = ("repetition", *_TABLE_NUMBERS.get(str(name), ()))
        for i, r in enumerate(rows):
            if not isinstance(r, Mapping) or not isinstance(r.get("cores"), (int, float)) or isinstance(
                    r.get("cores"), bool) or any(isinstance(v, (dict, list)) for v in r.values()):
                raise UserError(f"{path}: metadata table '{name}', row {i + 1}: expected a flat object with a "
                                "'cores' number")
            for k in numbers:
                if r.get(k) is not None and not _finite_number(r[k]):
                    raise UserError(f"{path}: metadata table '{name}', row {i + 1}: '{k}' is {_shown(r[k])}, "
                                    "not a number")
        out[str(name)] = [dict(r) for r in rows]
    return out


#: The columns of a side table that its readers take as numbers (`collect.locks` writes the
#: `locks` table; `report.locks` and `model.mva` read it), checked where a file is read.
_TABLE_NUMBERS = {"locks": ("instances", "acquisitions", "contended", "trylock_failures", "wait_s", "max_wait_s",
                            "hold_s", "hold_mean_all_s", "hold_samples", "hold_outliers", "hold_max_s", "threads",
                            "wait_ticks", "site_line")}


def _finite_number(v: Any) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(float(v))
    except OverflowError:               # an integer past the largest float
        return False


def _campaign_notes(notes: Mapping[str, Any], path: object) -> None:
    """The part of a file's notes its readers compute with: `campaign` an object, and its
    `threads_per_core` a whole number from 1 to MAX_CORES (`report.locks`, `model.mva`)."""
    camp = notes.get("campaign")
    if camp is None:
        return
    if not isinstance(camp, Mapping):
        raise UserError(f"{path}: metadata 'notes': 'campaign' must be an object")
    tpc = camp.get("threads_per_core")
    if tpc is not None and not (_finite_number(tpc) and 1 <= tpc <= MAX_CORES):
        raise UserError(f"{path}: metadata 'notes': campaign 'threads_per_core' is {_shown(tpc)}, not a number "
                        f"from 1 to {MAX_CORES:,}")


# ====================================================================== readers
def read_csv(path: str | Path, text: str | None = None) -> Dataset:
    path = str(path)
    if text is None:
        text = _read_text(path)
    meta: dict[str, Any] = {}
    if text.count("\n") > MAX_ROWS + 1000:          # before splitting 50 MB into lines
        raise UserError(f"{path}: more than {MAX_ROWS:,} rows; a Dataset may have at most {MAX_ROWS:,} "
                        "(take the median of the repetitions, or fewer windows)")
    lines = text.splitlines()
    # Comments and metadata before the header; remember line numbers for messages.
    data_start = 0
    for i, line in enumerate(lines):
        s = line.strip()
        if s.startswith(CSV_META_PREFIX):
            try:
                meta = json_document(s[len(CSV_META_PREFIX):], f"{path}:{i + 1}: corecast metadata line")
            except json.JSONDecodeError as err:
                raise UserError(f"{path}:{i + 1}: corecast metadata line is not valid JSON ({err.msg})") from None
            if not isinstance(meta, dict):
                raise UserError(f"{path}:{i + 1}: corecast metadata line must hold a JSON object")
            data_start = i + 1
        elif s == "" or s.startswith("#"):
            data_start = i + 1
        else:
            break
    if not meta:
        side = sidecar_path(path)
        if side.is_file():
            _check_sidecar_owner(path, side)
            try:
                meta = json_document(_read_text(str(side)), str(side))
            except json.JSONDecodeError as err:
                raise UserError(f"{side}:{err.lineno}: metadata is not valid JSON ({err.msg})") from None
            if not isinstance(meta, dict):
                raise UserError(f"{side}: metadata must be a JSON object")
    body = lines[data_start:]
    if not body:
        raise UserError(f"{path}: empty file (expected a header such as 'cores,throughput')")
    # strict: an unterminated quote is an error, not a field that swallows the following lines
    reader = csv.reader(body, strict=True, delimiter=_delimiter(body[0]))
    try:
        header = [h.strip() for h in next(reader)]
    except csv.Error as err:
        raise UserError(f"{path}:{data_start + 1}: {err}") from None
    hline = data_start + 1
    # corecast's own files (with metadata) name their columns; other tools' tables may not
    reading = headers.Reading(list(header)) if meta else headers.canonical(header)
    if "cores" not in reading.names:
        also = reading.ambiguous.get("cores")
        raise UserError(f"{where(path, hline)}: no 'cores' column in the header "
                        f"(columns: {', '.join(h for h in header if h) or 'none'})"
                        + (f"; {' and '.join(also)} could each be the core count: name one 'cores'" if also else ""))
    raw, header = header, reading.names
    for j, h in enumerate(header):
        if h == "":
            raise UserError(f"{where(path, hline)}: column {j + 1} of the header has no name")
        if header.count(h) > 1:
            raise UserError(f"{where(path, hline)}: column '{h}' appears twice in the header")
    values: dict[str, list[float]] = {h: [] for h in header}
    nrows = 0
    for rec in _records(reader, path, data_start):
        lineno = data_start + reader.line_num
        if not rec or all(c.strip() == "" for c in rec):
            continue
        if rec[0].lstrip().startswith("#"):
            continue
        if len(rec) != len(header):
            raise UserError(f"{where(path, lineno)}: {len(rec)} fields, the header has {len(header)}")
        for h, col, cell in zip(header, raw, rec):       # corecast's name, the file's, the cell
            if cell.strip() == "":
                if h in KEY_COLUMNS:
                    raise UserError(f"{where(path, lineno, col)}: empty (every row needs a value here)")
                values[h].append(np.nan)
                continue
            v = _parse_number(cell, path, lineno, col) * reading.scale.get(h, 1.0)
            if h in KEY_COLUMNS:
                _check_key(h, v, path, lineno, col)
            values[h].append(v)
        nrows += 1
        if nrows > MAX_ROWS:
            raise UserError(f"{where(path, lineno)}: more than {MAX_ROWS:,} rows; a Dataset may have at most "
                            f"{MAX_ROWS:,}")
    if nrows == 0:
        raise UserError(f"{path}: no data rows after the header")
    names = [h for h in header if h not in KEY_COLUMNS]
    extra = _apply_meta(meta, names, path)
    _note_reading(reading, extra, path)
    return Dataset(cores=values["cores"], metrics={n: values[n] for n in names},
                   repetition=values.get("repetition"), size=values.get("size"), path=path, **extra)


def _delimiter(header_line: str) -> str:
    """Commas, or a tab or semicolon where the header has those and no comma (TSV, a
    spreadsheet's CSV in a locale with decimal commas)."""
    if "," not in header_line:
        for d in ("\t", ";"):
            if d in header_line:
                return d
    return ","


def _note_reading(reading: headers.Reading, extra: dict[str, Any], path: object) -> None:
    """Tell which of the file's columns were read under corecast's names, and keep it in the
    dataset's notes (so a saved copy says so too)."""
    if not reading.read_as:
        return
    messages.note(f"{path}: {reading.note}")
    extra["notes"]["columns_read_as"] = {new: old + (f" x {reading.scale[new]:g}" if new in reading.scale else "")
                                         for new, old in reading.read_as.items()}


def _records(reader: Any, path: object, data_start: int) -> Iterator[list[str]]:
    """The reader's records; its errors (an unterminated quote, a field past the csv module's
    limit) as one line naming where."""
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            msg = str(err)
            if "field larger than field limit" in msg:
                msg = f"a field longer than {csv.field_size_limit():,} characters (not a number)"
            elif "unexpected end of data" in msg or "newline inside string" in msg:
                msg = "a quote is opened and never closed"
            raise UserError(f"{path}:{data_start + reader.line_num}: {msg}") from None
        yield rec


def read_json(path: str | Path, text: str | None = None) -> Dataset:
    path = str(path)
    if text is None:
        text = _read_text(path)
    if not text.strip():
        raise UserError(f"{path}: empty file")
    try:
        doc = json_document(text, path)
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: not valid JSON ({err.msg}, column {err.colno})") from None
    if isinstance(doc, list):
        meta: dict[str, Any] = {}
        rows = doc
    elif isinstance(doc, dict):
        if "format" in doc and doc["format"] != FORMAT_NAME:
            raise UserError(f"{path}: format '{doc['format']}' is not a corecast dataset")
        version = doc.get("version", FORMAT_VERSION)
        if not isinstance(version, int) or isinstance(version, bool):
            raise UserError(f"{path}: \"version\" must be a whole number (got {json.dumps(version)})")
        if version > FORMAT_VERSION:
            raise UserError(f"{path}: dataset format version {version} is newer than this corecast understands")
        meta = doc
        rows = doc.get("rows")
        if rows is None:
            raise UserError(f"{path}: no 'rows' list in the JSON object")
    else:
        raise UserError(f"{path}: expected a JSON object or a list of rows")
    if not isinstance(rows, list) or not rows:
        raise UserError(f"{path}: 'rows' must be a non-empty list")
    if len(rows) > MAX_ROWS:
        raise UserError(f"{path}: {len(rows):,} rows; a Dataset may have at most {MAX_ROWS:,}")
    keys = list(dict.fromkeys(k for row in rows if isinstance(row, dict) for k in row))
    reading = headers.Reading(keys) if "format" in meta or "columns" in meta else headers.canonical(keys)
    rename = {old: new for new, old in reading.read_as.items()}
    names: list[str] = []
    parsed: list[dict[str, float]] = []
    for i, row in enumerate(rows):
        label = f"rows[{i}] (row {i + 1})"
        if not isinstance(row, dict):
            raise UserError(f"{path}: {label}: expected an object")
        if "cores" not in {rename.get(k, k) for k in row}:
            raise UserError(f"{path}: {label}: no 'cores' value")
        out: dict[str, float] = {}
        for col, v in row.items():
            k = rename.get(col, col)            # corecast's name; messages use the file's
            if v is None:
                if k in KEY_COLUMNS:
                    raise UserError(f"{path}: {label}: column '{col}': null (every row needs a value here)")
                out[k] = np.nan
            elif isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise UserError(f"{path}: {label}: column '{col}': {json.dumps(v)[:40]} is not a number")
            else:
                if isinstance(v, str):
                    try:
                        fv = _parse_number(v, path, None, col)
                    except UserError:
                        raise UserError(f"{path}: {label}: column '{col}': '{v.strip()[:40]}' is not a "
                                        "finite number") from None
                else:
                    try:
                        fv = float(v)
                    except OverflowError:            # an integer past the largest float
                        fv = math.inf
                if not math.isfinite(fv):
                    raise UserError(f"{path}: {label}: column '{col}': not a finite number")
                fv *= reading.scale.get(k, 1.0)
                if k in KEY_COLUMNS:
                    _check_key(k, fv, path, None, col, row_label=label)
                out[k] = fv
            if k not in KEY_COLUMNS and k not in names:
                names.append(k)
        parsed.append(out)
    extra = _apply_meta(meta, names, path)
    _note_reading(reading, extra, path)
    ds = Dataset.from_rows(parsed, path=path, **extra)
    return ds


def read_campaign(path: str | Path) -> Dataset:
    """A campaign file (`corecast measure`) as a Dataset: measured runs in plan order, warm-ups
    left out. A run that did not succeed stays a row -- its `exit_status` says how it ended --
    with every metric missing, so no model is fitted on a failed run's numbers."""
    p = Path(path)
    camp = store.Campaign.open(p, write=False)
    try:
        n = camp.run_count()
        if n > MAX_ROWS:
            raise UserError(f"{p}: {n:,} runs; a Dataset may have at most {MAX_ROWS:,} rows")
        meta = camp.meta()
        cols = camp.columns()
        runs = [r for r in camp.runs() if not r["warmup"]]
        notices = camp.notices()
        side: dict[str, list[dict[str, Any]]] = {}
        for name in camp.run_table_names():      # MAX_ROWS rows in all, as in a Dataset's JSON
            side[name] = camp.run_tables(name, MAX_ROWS - sum(map(len, side.values())))
    except sqlite3.DatabaseError as err:
        raise UserError(f"{p}: not a readable campaign file ({err})") from None
    finally:
        camp.close()
    if not runs:
        raise UserError(f"{p}: the campaign has no finished runs yet")
    for r in runs:                      # the runs table is a file too: its core counts are checked
        label = f"runs table, run {r['slot']}"
        for key in ("cores", "repetition"):
            v = r[key]
            if not _finite_number(v):
                raise UserError(f"{p}: {label}: column '{key}': {v!r} is not a number")
            _check_key(key, float(v), p, None, key, row_label=label)
    names = [n for n in cols if n != "exit_status"]
    metrics: dict[str, list[float]] = {n: [] for n in names}
    exit_status: list[float] = []
    failed = []
    for r in runs:
        ok = r["status"] == store.OK
        for n in names:
            v = r["values"].get(n) if ok else None
            metrics[n].append(np.nan if v is None else float(v))
        exit_status.append(np.nan if r["exit_status"] is None else float(r["exit_status"]))
        if not ok:
            failed.append({"cores": r["cores"], "repetition": r["repetition"], "status": r["status"],
                           "exit_status": r["exit_status"], "message": r["message"],
                           "stderr_tail": (r["stderr_tail"] or "")[-500:]})
    metrics["exit_status"] = exit_status
    columns = {n: ColumnInfo.from_dict(n, cols[n], f"{p}: damaged campaign file") for n in names}
    columns["exit_status"] = ColumnInfo(name="exit_status", kind="other", unit="", source="measured: wait4 status",
                                        status="ok", description="exit code (128 + signal when killed); "
                                        "runs with a non-zero status have no metric values")
    # Column status says how many runs gave a number.
    ok_runs = sum(1 for r in runs if r["status"] == store.OK)
    for n in names:
        c = columns[n]
        got = int(np.isfinite(np.asarray(metrics[n], dtype=float)).sum())
        if c.status == "ok" and got == 0:
            c.status = "unavailable"
        c.description = (c.description + "; " if c.description else "") + f"{got} of {ok_runs} successful runs"
    config = meta.get("config") or {}
    planned = config.get("planned_runs")
    measured_planned = config.get("measured_runs")
    notes: dict[str, Any] = {
        "campaign": {"file": str(p), "runs": len(runs), "successful": ok_runs, "failed": len(runs) - ok_runs,
                     "planned": measured_planned, "complete": measured_planned is not None and len(runs) >= measured_planned,
                     "order": config.get("order"), "reps": config.get("reps"), "warmup": config.get("warmup"),
                     "shim": config.get("shim")},
    }
    if planned is None:
        notes["campaign"].pop("planned")
    if failed:
        notes["failed_runs"] = failed
    if notices:
        notes["notices"] = notices
    if config.get("threads_per_core") is not None:
        notes["campaign"]["threads_per_core"] = config.get("threads_per_core")
    argv = meta.get("command") or []
    # the side tables' rows of the measured runs that succeeded, with their core count and repetition
    by_slot = {r["slot"]: r for r in runs if r["status"] == store.OK}
    tables = {name: [{"cores": by_slot[t["slot"]]["cores"], "repetition": by_slot[t["slot"]]["repetition"],
                      **{k: v for k, v in t.items() if k not in ("cores", "repetition")}}
                     for t in rows if t["slot"] in by_slot]
              for name, rows in side.items()}
    tables = _side_tables(tables, p)
    lock_table = _lock_table_losses(runs)
    if lock_table:
        notes["lock_table"] = lock_table
    _campaign_notes(notes, f"{p}: damaged campaign file")
    ds = Dataset(cores=[r["cores"] for r in runs], metrics=metrics,
                 repetition=[r["repetition"] for r in runs], columns=columns,
                 machine=Machine.from_dict(meta.get("machine"), f"{p}: damaged campaign file"),
                 command=shlex.join(argv) if argv else None,
                 corecast_version=meta.get("corecast_version"), notes=notes, path=str(p),
                 tables={k: v for k, v in tables.items() if v})
    return ds


def _lock_table_losses(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    """The successful runs whose per-lock table (`runs.details` "locks", docs/measure.md) missed
    acquisitions: those that found no room in their thread's table (`overflow`) or were in the
    rows past the busiest a run keeps (`left_out_acquisitions`), and the threads
    past the shim's table limit (`untracked_threads`), each with its core count and repetition,
    so that `corecast locks` and `predict` can say their rows undercount (a campaign's details
    are not otherwise in its Dataset)."""
    out = []
    for r in runs:
        summary = (r.get("details") or {}).get("locks") if r.get("status") == store.OK else None
        if not isinstance(summary, Mapping):
            continue
        over, untracked = summary.get("overflow"), summary.get("untracked_threads")
        left = summary.get("left_out_acquisitions")
        over = float(over) if _finite_number(over) and over > 0 else 0.0
        over += float(left) if _finite_number(left) and left > 0 else 0.0
        untracked = float(untracked) if _finite_number(untracked) and untracked > 0 else 0.0
        if over or untracked:
            out.append({"cores": float(r["cores"]), "repetition": float(r["repetition"]),
                        "overflow": over, "untracked_threads": untracked})
    return out


def sidecar_path(path: str | Path) -> Path:
    """Where a CSV's metadata lives: `data.csv` -> `data.csv.meta.json`."""
    p = Path(path)
    return p.with_name(p.name + ".meta.json")


def _check_sidecar_owner(path: str | Path, side: Path) -> None:
    """A CSV's sidecar is its metadata -- which column is a time, a throughput, in which unit --
    so it is read only when it is as much the CSV's as the CSV is: owned (the name, and what a
    link there leads to) by the CSV's owner, the user reading, or root. In a folder anyone can
    write to (/tmp) another user could put `data.csv.meta.json` beside someone's plain CSV and
    turn its throughput into a time; that is refused with one line, never read."""
    try:
        owner = os.stat(path).st_uid
        link, target = os.lstat(side).st_uid, os.stat(side).st_uid
    except OSError:
        return                              # gone meanwhile: the read says what is wrong
    trusted = {owner, os.geteuid(), 0}
    for uid in (link, target):
        if uid not in trusted:
            raise UserError(f"{side}: owned by uid {uid}, not by the owner of {path} (uid {owner}): "
                            "its metadata is not read (remove it; another user may have put it there)")


def _read_bytes(path: str | Path) -> tuple[bytes, bool]:
    """The whole file and whether it is a regular one (a FIFO never blocks: errors.read_input),
    at most MAX_DATASET_BYTES."""
    return read_input(path, limit=MAX_DATASET_BYTES)


def _decode(path: object, data: bytes) -> str:
    try:
        # utf-8-sig: a byte-order mark (as spreadsheets write it) is read as pandas reads it
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (CSV or JSON expected)") from None


def _read_text(path: str) -> str:
    return _decode(path, _read_bytes(path)[0])


SQLITE_MAGIC = b"SQLite format 3\x00"


def load(path: str | Path) -> Dataset:
    """Read a Dataset from a CSV, JSON or SQLite campaign file (chosen by content)."""
    p = Path(path)
    data, regular = _read_bytes(p)
    if data.startswith(SQLITE_MAGIC):
        if not regular:
            raise UserError(f"{path}: a campaign file must be read from a file, not a pipe")
        ds, kind = read_campaign(p), "campaign"
    else:
        text = _decode(p, data)
        stripped = text.lstrip()
        if p.suffix.lower() == ".json" or stripped.startswith(("{", "[")):
            ds, kind = read_json(p, text), "JSON"
        else:
            ds, kind = read_csv(p, text), "CSV"
    messages.detail(f"read {path} ({kind}): {len(ds)} rows, {len(ds.distinct_cores)} core counts, "
                    f"columns {', '.join(['cores', *ds.metric_names])}")
    return ds
