"""The JSON documents the commands print with `--json`, built in one place so that the command
line and `corecast serve` show the same numbers: `corecast predict --json`, `usl --json`,
`info --json` and `measure --json` call these, and so does the web dashboard.

Each function takes a loaded Dataset (`corecast.dataset.load`) or a model's result and returns
a dict ready for `json.dumps(..., allow_nan=False)` (and, where the command needs it for a plot,
the fitted object beside it). Predictions are made by the model layer's use case
(`model.usecase.predict`); this module only renders them.

Each function imports the models (and the campaign summary) it calls, for start-up time: the
predicting methods load scipy and take about a second to import, which `info` never needs.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..dataset import IDLE_PART_SUFFIX, Dataset
from ..errors import UserError


# ============================================================================ predict
def predict_doc(result: Any, label: str, cores: Sequence[float], level: float) -> dict[str, Any]:
    """`corecast predict --json` of a `model.usecase.PredictResult` (the prediction is made by
    `model.usecase.predict`; this only renders it)."""
    from . import prediction as R

    from . import locks as L

    doc = R.prediction_doc(label, result.method, result.fitted, cores, level, work=result.work)
    # the hot locks with their call sites and the demand model's share of thread time at each
    # target count, where the data have demands, whatever the method
    outlook = result.lock_outlook(cores)
    if outlook is not None:
        block = L.predicted_locks(result.data, cores, outlook)
        if block:
            doc["locks"] = block
    return doc


# ============================================================================ usl
def usl_doc(analysis: Any, label: str, predict_at: Sequence[float] | None = None) -> dict[str, Any]:
    """`corecast usl --json` of a `model.usl` analysis (`usl.analyze_dataset`)."""
    doc = analysis.to_dict(predict_at=predict_at)
    doc["file"] = label
    return doc


# ============================================================================ info / measure
def dataset_summary(data: Dataset) -> dict[str, Any]:
    """`corecast info --json`: what a Dataset or campaign file holds."""
    cols = []
    for name in data.metrics:
        info = data.columns[name]
        v = data.metrics[name]
        ok = np.isfinite(v)
        cols.append({"name": name, "kind": info.kind, "unit": info.unit, "source": info.source,
                     "status": info.status, "values": int(ok.sum()), "missing": int((~ok).sum()),
                     "min": float(v[ok].min()) if ok.any() else None,
                     "max": float(v[ok].max()) if ok.any() else None})
    cores = [{"cores": int(c) if float(c).is_integer() else float(c), "runs": int((data.cores == c).sum())}
             for c in data.distinct_cores]
    return {"file": data.label, "rows": len(data), "machine": data.machine.to_dict(), "command": data.command,
            "corecast_version": data.corecast_version, "notes": data.notes, "columns": cols, "cores": cores,
            "stall_categories": data.stall_names, "waits": wait_split(data),
            "tables": _tables_summary(data)}


def wait_split(data: Dataset) -> list[dict[str, Any]]:
    """Each stall category that has its idle part beside it (`X_idle_cycles`, the sync shim's
    split): per core count the median wait, the part during which cores stood idle, and the rest,
    which overlapped other threads' running."""
    out = []
    for name in data.stall_names:
        idle = name[: -len("_cycles")] + IDLE_PART_SUFFIX if name.endswith("_cycles") else None
        if idle is None or idle not in data.metrics or not np.isfinite(data.metrics[idle]).any():
            continue
        tot, part = data.aggregate(name), data.aggregate(idle)
        rows = []
        for c, v in zip(tot.cores, tot.value):
            i = part.value[part.cores == c]
            iv = float(i[0]) if len(i) else None
            rows.append({"cores": int(c) if float(c).is_integer() else float(c), "wait_cycles": float(v),
                         "idle_cycles": iv, "overlap_cycles": None if iv is None else max(float(v) - iv, 0.0)})
        out.append({"category": name, "idle_column": idle, "per_count": rows})
    return out


def _tables_summary(data: Dataset) -> dict[str, Any]:
    """The side tables: rows of each, and for the per-lock table its busiest locks
    (`corecast locks` ranks them all)."""
    from . import locks as L

    out: dict[str, Any] = {name: {"rows": len(rows)} for name, rows in data.tables.items()}
    if data.tables.get(L.TABLE):
        try:
            doc = L.locks_doc(data, top=3)
        except UserError:
            return out
        out[L.TABLE]["busiest"] = [{"lock": g["lock"], "site": g["site"], "call": g["call"],
                                    "per_cores": g["per_cores"]} for g in doc["locks"]]
    return out


def campaign_summary(data: Dataset, path: str) -> dict[str, Any]:
    """`corecast measure --json`: the campaign's summary per core count."""
    from .campaign import summary_rows

    return {"campaign": path, "command": data.command, "runs": len(data),
            "failed": len([f for f in data.notes.get("failed_runs", [])]),
            "summary": summary_rows(data)}
