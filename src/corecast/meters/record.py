"""`--record FILE` and `corecast meters replay FILE`: the meter series as a Dataset.

A recording is a Dataset (`corecast info` and `Dataset.load` read it; pandas reads the CSV as it
is): one row per window, `cores` the CPUs watched, `elapsed_s` the seconds since the daemon
started, one column per meter and scope (`cpu_busy@node`, `psi_cpu_some@node`, ...) holding
the window's average, `trigger:NAME@SCOPE` (0 low, 1 high) and `allowed_workers@SCOPE`.
An unavailable meter has no column; its reason is in the metadata (notes.meters.unavailable).

A `.csv` file is written row by row (flushed: a crash loses at most the row being written), its
metadata in FILE.meta.json beside it from the start; a `.json` file is rewritten whole every
few seconds and at the end. Both go through corecast.outputs (a new file made with O_EXCL and
renamed only over a regular file; a device or a pipe written in place, without a sidecar); the
files are named on standard error when the recording ends.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .. import __version__, outputs
from ..dataset import ColumnInfo, Dataset, Machine, load, sidecar_path
from ..errors import UserError
from .board import Snapshot

JSON_EVERY_S = 5.0


class Recorder:
    def __init__(self, path: str | Path, snap: Snapshot, machine: Machine, command: str, cpus: int):
        self.path = Path(path)
        suffix = self.path.suffix.lower()
        # a device or a pipe: CSV unless named .json, and a JSON document once, at the end
        self.in_place = outputs.check(path) in ("in place", "descriptor")
        if suffix not in (".csv", ".json") and not self.in_place:
            raise UserError(f"--record {path}: give a .csv or .json file")
        self.json = suffix == ".json"
        self.cpus = cpus
        self.columns: list[tuple[str, str, Any]] = []      # (column, what, index)
        infos: dict[str, ColumnInfo] = {"elapsed_s": ColumnInfo("elapsed_s", "other", "s",
                                                                "measured: CLOCK_MONOTONIC since the daemon started")}
        unavailable = {}
        for m, _r in snap.meters:
            if m.quality == "unavailable":
                unavailable[f"{m.name}@{m.scope}"] = m.source
                continue
            col = f"{m.name}@{m.scope}"
            self.columns.append((col, "meter", m.index))
            infos[col] = ColumnInfo(col, "other", m.unit, m.source, "derived" if m.quality == "derived" else "ok",
                                    f"window average of {m.name} at {m.scope}")
            if m.scope_kind == "thread":
                self.columns.append((f"tid@{m.scope}", "tid", m.index))
                infos[f"tid@{m.scope}"] = ColumnInfo(f"tid@{m.scope}", "other", "", "the thread the slot follows")
        watched = {}
        for t, _s in snap.triggers:
            col = f"trigger:{t.name}@{t.scope}"
            watched[col] = t.meter
            self.columns.append((col, "trigger", t.index))
            infos[col] = ColumnInfo(col, "other", "", f"trigger state, 0 low, 1 high ({t.meter} low {t.low:g} "
                                    f"high {t.high:g} dwell {t.dwell_s:g} s)")
        for a, _s in snap.advice:
            col = f"allowed_workers@{a.scope}"
            self.columns.append((col, "advice", a.index))
            infos[col] = ColumnInfo(col, "other", "workers", f"concurrency advice, policy {a.policy}")
        seen = set()
        self.columns = [c for c in self.columns if not (c[0] in seen or seen.add(c[0]))]
        names = ["elapsed_s"] + [c[0] for c in self.columns]
        notes = {"meters": {"blackboard": snap.name, "interval_s": snap.interval_s, "window_s": snap.window_s,
                            "started_unix_s": snap.started_real_s, "unavailable": unavailable,
                            "triggers": watched}}
        self.template = Dataset(cores=[], metrics={n: [] for n in names}, columns={n: infos[n] for n in names},
                                machine=machine, command=command, corecast_version=__version__, notes=notes)
        self.rows: list[list[float | None]] = []
        self._out: outputs.Output | None = None
        self._fh: Any = None
        self._last_json = 0.0
        if self.json:
            if not self.in_place:
                self._write_json()
        else:
            if outputs.check(self.path) in ("new", "regular"):
                outputs.check(sidecar_path(self.path))     # refused before the series is begun
            self._out = outputs.Output(self.path, what="the meter series", live=True)
            self._fh = self._out.open()
            try:
                self._write_sidecar(announce=False)
                self._fh.write(",".join(["cores"] + names) + "\n")
                self._fh.flush()
            except BaseException:
                self._out.abort()
                raise

    def add(self, elapsed_s: float, snap: Snapshot) -> None:
        meters = {m.index: r for m, r in snap.meters}
        trig = {t.index: s for t, s in snap.triggers}
        adv = {a.index: s for a, s in snap.advice}
        row: list[float | None] = [elapsed_s]
        for _col, what, i in self.columns:
            if what == "meter":
                row.append(meters[i].avg)
            elif what == "tid":
                row.append(float(meters[i].aux) if meters[i].aux else None)
            elif what == "trigger":
                row.append(1.0 if trig[i].state == "high" else 0.0)
            else:
                row.append(float(adv[i].allowed))
        if self._fh is not None:
            self._fh.write(",".join([str(self.cpus)] + ["" if v is None else repr(float(v)) for v in row]) + "\n")
            self._fh.flush()
        else:
            self.rows.append(row)
            if time.monotonic() - self._last_json >= JSON_EVERY_S and not self.in_place:
                self._write_json()

    def _write_json(self, final: bool = False) -> None:
        names = ["elapsed_s"] + [c[0] for c in self.columns]
        arr = np.array([[np.nan if v is None else v for v in r] for r in self.rows], dtype=float).reshape(-1, len(names))
        ds = Dataset(cores=[self.cpus] * len(self.rows), metrics={n: arr[:, j] for j, n in enumerate(names)},
                     columns=dict(self.template.columns), machine=self.template.machine,
                     command=self.template.command, corecast_version=__version__, notes=self.template.notes)
        outputs.write_text(self.path, ds.to_json(), f"the meter series, {len(self.rows)} rows", announce=final)
        self._last_json = time.monotonic()

    def _write_sidecar(self, announce: bool) -> None:
        if self._out is not None and self._out.regular:
            outputs.write_text(sidecar_path(self.path), json.dumps(self.template.metadata(), indent=1, sort_keys=True)
                               + "\n", "its metadata", announce=announce)

    def close(self) -> None:
        if self._out is not None:
            self._fh = None
            self._out.commit()
            self._write_sidecar(announce=True)
            self._out = None
        elif self.json:
            self._write_json(final=True)


# ============================================================================================
# replay

@dataclass
class Series:
    column: str
    meter: str
    scope: str
    unit: str
    values: np.ndarray
    watches: str = ""       # a trigger's meter

    def stats(self) -> dict[str, float | None]:
        v = self.values[np.isfinite(self.values)]
        if not len(v):
            return {"mean": None, "min": None, "max": None, "p95": None}
        return {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()),
                "p95": float(np.percentile(v, 95))}


@dataclass
class Recording:
    path: str
    dataset: Dataset
    elapsed_s: np.ndarray
    meters: list[Series] = field(default_factory=list)
    triggers: list[Series] = field(default_factory=list)
    advice: list[Series] = field(default_factory=list)
    unavailable: dict[str, str] = field(default_factory=dict)
    interval_s: float | None = None
    window_s: float | None = None

    def transitions(self, s: Series) -> list[tuple[float, str]]:
        """(elapsed_s, 'low->high' | 'high->low') of a trigger series."""
        out = []
        v = s.values
        for i in range(1, len(v)):
            if np.isfinite(v[i]) and np.isfinite(v[i - 1]) and v[i] != v[i - 1]:
                out.append((float(self.elapsed_s[i]), "low->high" if v[i] > v[i - 1] else "high->low"))
        return out


def read(path: str | Path, meters: Sequence[str] | None = None, scopes: Sequence[str] | None = None) -> Recording:
    ds = load(path)
    info = (ds.notes or {}).get("meters")
    side = sidecar_path(path)
    if not isinstance(info, dict) and str(path).lower().endswith(".csv") and not side.exists():
        # a recording copied without its sidecar: its elapsed_s column is there (read as
        # time_s), so "no elapsed_s column" misled
        raise UserError(f"{path}: not a recording of `corecast meters --record`, or one without its metadata: "
                        f"{side} is not beside it (copy or move the two files together)")
    if not isinstance(info, dict) or "elapsed_s" not in ds.metrics:
        raise UserError(f"{path}: not a recording of `corecast meters --record` (no elapsed_s column or "
                        "notes.meters in its metadata)")
    rec = Recording(str(path), ds, ds.metrics["elapsed_s"], unavailable=dict(info.get("unavailable") or {}),
                    interval_s=info.get("interval_s"), window_s=info.get("window_s"))
    known, known_scopes = set(), set()
    for name, values in ds.metrics.items():
        if "@" not in name or name.startswith("tid@"):
            continue
        what, scope = name.rsplit("@", 1)
        unit = ds.columns[name].unit or ""
        if what.startswith("trigger:"):
            watches = (info.get("triggers") or {}).get(name, "")
            rec.triggers.append(Series(name, what[len("trigger:"):], scope, "", values, str(watches)))
            continue
        if what == "allowed_workers":
            rec.advice.append(Series(name, what, scope, "workers", values))
            continue
        known.add(what)
        known_scopes.add(scope)
        if (meters and what not in meters) or (scopes and scope not in scopes):
            continue
        rec.meters.append(Series(name, what, scope, unit, values))
    for m in meters or ():
        if m not in known:
            raise UserError(f"--meters: '{m}' is not in {path} (it has: {', '.join(sorted(known)) or 'none'})")
    for sc in scopes or ():
        if sc not in known_scopes:
            raise UserError(f"--scope: '{sc}' is not in {path} (it has: {', '.join(sorted(known_scopes)) or 'none'})")
    return rec
