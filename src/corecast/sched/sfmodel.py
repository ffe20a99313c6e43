"""Speedup-factor models from counter metrics: the PMCTrack case study's method.

Windows of a program's execution are measured on both core types; each window has an SF (its
speed on the big core over its speed on the small one) and metrics (IPC, cache misses per
kilo-instruction, ...) seen on each type. Two linear models are fitted: SF from the metrics
seen on a big core, and SF from those seen on a small core, so that a scheduler can estimate a
thread's SF from the core type it happens to run on. Features are chosen by forward selection
on the error of predicting applications held out (leave one application out), and each model
reports its correlation coefficient in sample and on held-out applications.

Input (`load_windows`), a CSV any collector can write, in one of two shapes:

- wide: `app`, `window` (optional), `sf` (or `big_ips` and `small_ips`), and metric columns
  named `big_<metric>` and `small_<metric>`;
- long: `app`, `window`, `core` (big or small), metric columns, and `ips` (or `instructions` and
  `time_s`): rows of the same app and window on both cores are paired, SF = ips big / ips small.

`from_stat` turns two `corecast stat --format csv` runs of one program (one pinned to each core
type, sampled every N instructions where counters exist) into the wide shape.

The phase rule (`sfsource.phase_changes`) is applied to each application's IPC series: it says
where a new sampling round would start, and `--per-phase` fits on the phases' means instead of
the windows.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from .. import outputs
from ..errors import UserError, opened
from ..parsing import finite, read_document
from .sfsource import phase_changes

IDS = {"app", "window", "core", "sf", "ips", "instructions", "time_s", "cycles", "nsample"}
SIDES = ("big", "small")


@dataclass
class Windows:
    apps: np.ndarray                          # (n,) application of each window
    window: np.ndarray                        # (n,) window number
    sf: np.ndarray                            # (n,)
    metrics: dict[str, dict[str, np.ndarray]]  # side -> metric -> (n,)
    source: str = ""

    def __len__(self) -> int:
        return len(self.sf)


@dataclass
class LinearSF:
    side: str
    intercept: float
    coef: dict[str, float]
    r: float                  # correlation of fitted and measured SF, in sample
    r_heldout: float          # the same for predictions of applications held out
    rmse: float
    rmse_heldout: float
    candidates: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)

    def predict(self, metrics: Mapping[str, float]) -> float:
        v = self.intercept
        for k, c in self.coef.items():
            if k not in metrics:
                raise UserError(f"the {self.side}-core SF model needs metric '{k}' (have: {', '.join(metrics) or 'none'})")
            v += c * float(metrics[k])
        return float(min(max(v, 0.05), 100.0))

    def to_dict(self) -> dict[str, Any]:
        return {"side": self.side, "intercept": self.intercept, "coef": self.coef, "r": self.r,
                "r_heldout": self.r_heldout, "rmse": self.rmse, "rmse_heldout": self.rmse_heldout,
                "candidates": self.candidates, "steps": self.steps}


@dataclass
class SFModel:
    big: LinearSF
    small: LinearSF
    windows: int = 0
    apps: list[str] = field(default_factory=list)
    phases: dict[str, int] = field(default_factory=dict)
    source: str = ""

    def predict(self, metrics: Mapping[str, float], side: str) -> float:
        return (self.big if side == "big" else self.small).predict(metrics)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "corecast-sfmodel", "version": 1, "source": self.source, "windows": self.windows,
                "apps": self.apps, "phases": self.phases, "big": self.big.to_dict(), "small": self.small.to_dict()}


# ------------------------------------------------------------------------ reading
def _read_csv(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    try:
        with opened(path, "r", "file", encoding="utf-8-sig") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file (windows are CSV)") from None
    rd = csv.DictReader(io.StringIO(text))
    if not rd.fieldnames:
        raise UserError(f"{path}: empty file")
    rows = list(rd)
    if not rows:
        raise UserError(f"{path}: a header and no windows")
    return [f.strip() for f in rd.fieldnames], rows


def _num(row: Mapping[str, str], key: str, where: str) -> float:
    return finite(row.get(key) or "", f"{where}: column '{key}'")


def load_windows(path: str | Path) -> Windows:
    """Windows from a wide or long CSV (see the module documentation)."""
    cols, rows = _read_csv(path)
    if "app" not in cols:
        raise UserError(f"{path}: no 'app' column (the application each window belongs to)")
    if "core" in cols:
        return _long(path, cols, rows)
    return _wide(path, cols, rows)


def _wide(path, cols, rows) -> Windows:
    mets = {s: sorted(c[len(s) + 1:] for c in cols if c.startswith(s + "_") and c[len(s) + 1:] not in IDS) for s in SIDES}
    if not mets["big"] or not mets["small"]:
        raise UserError(f"{path}: no metric columns big_<metric> and small_<metric> (or give a 'core' column: the long shape)")
    has_sf = "sf" in cols
    if not has_sf and not ("big_ips" in cols and "small_ips" in cols):
        raise UserError(f"{path}: no 'sf' column, nor big_ips and small_ips to compute it from")
    apps, win, sf = [], [], []
    met: dict[str, dict[str, list[float]]] = {s: {m: [] for m in mets[s]} for s in SIDES}
    for i, r in enumerate(rows):
        where = f"{path}:{i + 2}"
        apps.append(r["app"].strip())
        win.append(_num(r, "window", where) if "window" in cols else float(i))
        if has_sf:
            s = _num(r, "sf", where)
        else:
            b, sm = _num(r, "big_ips", where), _num(r, "small_ips", where)
            if sm <= 0:
                raise UserError(f"{where}: small_ips must be > 0")
            s = b / sm
        if s <= 0:
            raise UserError(f"{where}: an SF must be > 0 (got {s:g})")
        sf.append(s)
        for side in SIDES:
            for m in mets[side]:
                met[side][m].append(_num(r, f"{side}_{m}", where))
    return Windows(np.array(apps), np.array(win), np.array(sf),
                   {s: {m: np.array(v) for m, v in met[s].items()} for s in SIDES}, str(path))


def _long(path, cols, rows) -> Windows:
    if "window" not in cols:
        raise UserError(f"{path}: the long shape needs a 'window' column to pair the two cores' rows")
    names = [c for c in cols if c not in IDS]
    if not names:
        raise UserError(f"{path}: no metric columns")
    if "ips" not in cols and not ("instructions" in cols and "time_s" in cols):
        raise UserError(f"{path}: no 'ips' column, nor instructions and time_s to compute it from")
    seen: dict[tuple[str, float], dict[str, dict[str, float]]] = {}
    for i, r in enumerate(rows):
        where = f"{path}:{i + 2}"
        core = (r.get("core") or "").strip().lower()
        if core not in SIDES:
            raise UserError(f"{where}: core '{r.get('core')}': big or small")
        key = (r["app"].strip(), _num(r, "window", where))
        ips = _num(r, "ips", where) if "ips" in cols else _num(r, "instructions", where) / max(_num(r, "time_s", where), 1e-300)
        d = {m: _num(r, m, where) for m in names}
        d["__ips"] = ips
        slot = seen.setdefault(key, {})
        if core in slot:
            raise UserError(f"{where}: app {key[0]} window {key[1]:g} on the {core} core twice")
        slot[core] = d
    apps, win, sf = [], [], []
    met: dict[str, dict[str, list[float]]] = {s: {m: [] for m in names} for s in SIDES}
    for (app, w), slot in seen.items():
        if len(slot) < 2:
            continue
        if slot["small"]["__ips"] <= 0:
            raise UserError(f"{path}: app {app} window {w:g}: the small core's ips must be > 0")
        apps.append(app)
        win.append(w)
        sf.append(slot["big"]["__ips"] / slot["small"]["__ips"])
        for side in SIDES:
            for m in names:
                met[side][m].append(slot[side][m])
    if not sf:
        raise UserError(f"{path}: no window was measured on both core types")
    return Windows(np.array(apps), np.array(win), np.array(sf),
                   {s: {m: np.array(v) for m, v in met[s].items()} for s in SIDES}, str(path))


def from_stat(big_csv: str | Path, small_csv: str | Path, app: str) -> Windows:
    """Pair the windows of two `corecast stat --format csv` runs of one program, one on each core
    type (windows in order; sampling every N instructions keeps them aligned). Each counter
    becomes a per-kilo-instruction metric (<name>_pki), cycles give `ipc`, and SF is the ratio of
    the windows' instruction rates."""
    sides = {}
    for side, path in (("big", big_csv), ("small", small_csv)):
        cols, rows = _read_csv(path)
        need = {"nsample", "time_s", "name", "value", "status"}
        if not need <= set(cols):
            raise UserError(f"{path}: not a `corecast stat --format csv` file (columns {', '.join(sorted(need))} expected)")
        win: dict[int, dict[str, float]] = {}
        for i, r in enumerate(rows):
            if r["status"] != "ok" or r.get("sample_type") == "exit":
                continue
            n = int(_num(r, "nsample", f"{path}:{i + 2}"))
            w = win.setdefault(n, {"__t": _num(r, "time_s", f"{path}:{i + 2}")})
            w[r["name"]] = _num(r, "value", f"{path}:{i + 2}")
        order = sorted(win)
        if not order or not all("instructions" in win[n] for n in order):
            raise UserError(f"{path}: every window needs an 'instructions' count (stat -c instructions)")
        sides[side] = [win[n] for n in order]
    n = min(len(sides["big"]), len(sides["small"]))
    if n < 2:
        raise UserError(f"{big_csv}, {small_csv}: fewer than 2 windows in common")
    names = sorted(set.intersection(*(set(w) for s in SIDES for w in sides[s][:n])) - {"__t", "instructions"})
    apps, win_ix, sf = [], [], []
    met: dict[str, dict[str, list[float]]] = {s: {} for s in SIDES}
    for i in range(n):
        ips = {}
        for side in SIDES:
            w = sides[side][i]
            dt = w["__t"] - (sides[side][i - 1]["__t"] if i else 0.0)
            ins = w["instructions"]
            ips[side] = ins / dt if dt > 0 else math.nan
            for k in names:
                key = "ipc" if k == "cycles" else f"{k}_pki"
                val = ins / w[k] if k == "cycles" and w[k] > 0 else 1000.0 * w[k] / ins if ins > 0 else math.nan
                met[side].setdefault(key, []).append(val)
        apps.append(app)
        win_ix.append(float(i))
        sf.append(ips["big"] / ips["small"] if ips["small"] > 0 else math.nan)
    sf_a = np.array(sf)
    ok = np.isfinite(sf_a) & (sf_a > 0)
    for side in SIDES:
        for k in met[side]:
            ok &= np.isfinite(np.array(met[side][k]))
    if ok.sum() < 2:
        raise UserError(f"{big_csv}, {small_csv}: fewer than 2 usable windows")
    return Windows(np.array(apps)[ok], np.array(win_ix)[ok], sf_a[ok],
                   {s: {k: np.array(v)[ok] for k, v in met[s].items()} for s in SIDES},
                   f"{big_csv} + {small_csv}")


def concat(parts: list[Windows]) -> Windows:
    if len(parts) == 1:
        return parts[0]
    names = {s: sorted(set.intersection(*(set(p.metrics[s]) for p in parts))) for s in SIDES}
    return Windows(np.concatenate([p.apps for p in parts]), np.concatenate([p.window for p in parts]),
                   np.concatenate([p.sf for p in parts]),
                   {s: {m: np.concatenate([p.metrics[s][m] for p in parts]) for m in names[s]} for s in SIDES},
                   " + ".join(p.source for p in parts))


# ------------------------------------------------------------------------ phases
def phases(w: Windows, threshold: float = 0.25, metric: str = "ipc") -> np.ndarray:
    """Phase number of every window: the phase rule on each application's `metric` series on the
    big core (windows in order)."""
    ph = np.zeros(len(w), dtype=np.int64)
    series = w.metrics["big"].get(metric)
    if series is None:
        return ph
    nxt = 0
    for app in dict.fromkeys(w.apps.tolist()):
        idx = np.flatnonzero(w.apps == app)
        idx = idx[np.argsort(w.window[idx], kind="stable")]
        starts = phase_changes(series[idx], threshold)
        starts[0] = True
        ph[idx] = nxt + np.cumsum(starts) - 1
        nxt = int(ph[idx].max()) + 1
    return ph


def by_phase(w: Windows, ph: np.ndarray) -> Windows:
    """The windows of each phase averaged into one."""
    ids = np.unique(ph)
    first = np.array([np.flatnonzero(ph == i)[0] for i in ids])

    def mean(x: np.ndarray) -> np.ndarray:
        return np.array([x[ph == i].mean() for i in ids])
    return Windows(w.apps[first], w.window[first], mean(w.sf),
                   {s: {m: mean(v) for m, v in w.metrics[s].items()} for s in SIDES}, w.source)


# ------------------------------------------------------------------------ fitting
def _ols(X: np.ndarray, y: np.ndarray) -> np.ndarray:
    A = np.column_stack([np.ones(len(y)), X])
    beta, *_ = np.linalg.lstsq(A, y, rcond=None)
    return beta


def _heldout(X: np.ndarray, y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Predictions of each group's windows from a model fitted on the other groups (leave one
    application out); with a single application, leave one window out."""
    pred = np.empty(len(y))
    keys = np.unique(groups)
    if len(keys) < 2:
        keys = np.arange(len(y))
        groups = keys
    for g in keys:
        test = groups == g
        if test.all():
            pred[test] = y.mean()
            continue
        beta = _ols(X[~test], y[~test])
        pred[test] = beta[0] + X[test] @ beta[1:]
    return pred


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.std(a) == 0 or np.std(b) == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def fit_side(w: Windows, side: str, max_features: int = 4, min_gain: float = 0.01) -> LinearSF:
    names = sorted(w.metrics[side])
    cand = [m for m in names if np.std(w.metrics[side][m]) > 0]
    y = w.sf
    chosen: list[str] = []
    steps: list[dict[str, Any]] = []
    best_err = float(np.sqrt(np.mean((_heldout(np.zeros((len(y), 0)), y, w.apps) - y) ** 2)))
    while len(chosen) < max_features:
        trial = None
        for m in cand:
            if m in chosen:
                continue
            X = np.column_stack([w.metrics[side][c] for c in chosen + [m]])
            err = float(np.sqrt(np.mean((_heldout(X, y, w.apps) - y) ** 2)))
            if trial is None or err < trial[1]:
                trial = (m, err)
        if trial is None or trial[1] > best_err * (1 - min_gain):
            break
        chosen.append(trial[0])
        steps.append({"added": trial[0], "rmse_heldout": trial[1]})
        best_err = trial[1]
    X = np.column_stack([w.metrics[side][c] for c in chosen]) if chosen else np.zeros((len(y), 0))
    beta = _ols(X, y)
    fitted = beta[0] + X @ beta[1:]
    held = _heldout(X, y, w.apps)
    return LinearSF(side, float(beta[0]), {c: float(b) for c, b in zip(chosen, beta[1:])},
                    _corr(fitted, y), _corr(held, y), float(np.sqrt(np.mean((fitted - y) ** 2))),
                    float(np.sqrt(np.mean((held - y) ** 2))), cand, steps)


def fit(w: Windows, max_features: int = 4, per_phase: bool = False, threshold: float = 0.25) -> SFModel:
    """The big-core and small-core SF models of a set of windows."""
    if len(w) < 3:
        raise UserError(f"{w.source}: {len(w)} windows; at least 3 are needed to fit a model")
    if max_features < 1:
        raise UserError(f"--max-features {max_features}: at least 1")
    ph = phases(w, threshold)
    counts = {a: int(len(np.unique(ph[w.apps == a]))) for a in dict.fromkeys(w.apps.tolist())}
    data = by_phase(w, ph) if per_phase else w
    if len(data) < 3:
        raise UserError(f"{w.source}: {len(data)} phases; at least 3 are needed to fit a model per phase")
    return SFModel(fit_side(data, "big", max_features), fit_side(data, "small", max_features),
                   len(w), list(counts), counts, w.source)


# ------------------------------------------------------------------------ model files
def save(model: SFModel, path: str | Path) -> None:
    """Write the model through corecast.outputs (which names the file on standard error)."""
    try:
        text = json.dumps(model.to_dict(), indent=2, allow_nan=False) + "\n"
    except ValueError as err:
        raise UserError(f"{path}: cannot write the model: {err}") from None
    outputs.write_text(path, text, "the SF model")


def load_model(path: str | Path) -> SFModel:
    d = read_document(Path(path), "SF model file", "json",
                      expected="an SF model (JSON written by `corecast sched sfmodel fit -o`)")
    if not isinstance(d, dict) or d.get("kind") != "corecast-sfmodel":
        raise UserError(f"{path}: not an SF model (JSON written by `corecast sched sfmodel fit -o`)")

    def side(s: str) -> LinearSF:
        x = d.get(s)
        try:
            return LinearSF(s, float(x["intercept"]), {str(k): float(v) for k, v in x["coef"].items()},
                            float(x.get("r", math.nan)), float(x.get("r_heldout", math.nan)),
                            float(x.get("rmse", math.nan)), float(x.get("rmse_heldout", math.nan)))
        except (TypeError, KeyError, ValueError, AttributeError):
            raise UserError(f"{path}: the {s}-core model is malformed (intercept and coef expected)") from None
    return SFModel(side("big"), side("small"), int(d.get("windows", 0)), list(d.get("apps", [])),
                   dict(d.get("phases", {})), str(d.get("source", path)))
