"""The JSON documents the commands print with `--json`, built in one place so that the command
line and `corecast serve` show the same numbers: `corecast predict --json`, `usl --json`,
`info --json` and `measure --json` call these, and so does the web dashboard.

Each function takes a loaded Dataset (`corecast.dataset.load`) and the command's options as
plain values, and returns a dict ready for `json.dumps(..., allow_nan=False)` (and, where the
command needs it for a plot, the fitted object beside it).

Each function imports the models (and the campaign summary) it calls, for start-up time: the
predicting methods load scipy and take about a second to import, which `info` never needs.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..dataset import IDLE_PART_SUFFIX, Dataset
from ..errors import UserError

#: ESTIMA's six kernels, chosen with `--kernels paper`.
PAPER_KERNELS = ["Rat22", "Rat23", "Rat33", "CubicLn", "ExpRat", "Poly25"]


# ============================================================================ predict / evaluate
def fit_options(data: Dataset, *, kernels: str | None = None, checkpoints: int | None = None,
                refit: bool = False, size: float | None = None, freq_ratio: float = 1.0,
                size_ratio: float | None = None, target_size: float | None = None,
                clock: float | None = None, stalls: str | None = None) -> dict[str, Any]:
    """The fit options of `predict` and `evaluate` from their command-line values (`kernels`
    and `stalls` comma-separated, as typed). `clock` (GHz) is recorded into `data.machine`."""
    from ..model import estima
    from ..model.kernels import kernels as kernel_set

    if kernels:
        names = [k.strip() for k in kernels.split(",") if k.strip()]
        try:
            ks = kernel_set(PAPER_KERNELS if names == ["paper"] else names)
        except KeyError as err:
            raise UserError(f"--kernels: {err.args[0]}") from None
    else:
        ks = None
    if checkpoints is not None and checkpoints < 1:
        # 0 left nothing to validate on, and the in-sample error was reported as "validated at"
        raise UserError(f"--checkpoints {checkpoints}: at least 1 (leave it out for the default, which "
                        "grows with the number of points)")
    if clock is not None:
        if not (math.isfinite(clock) and 0.01 <= clock <= 100):
            raise UserError(f"--clock {clock:g}: give the clock frequency in GHz (e.g. 2.5)")
        data.machine.nominal_freq_hz = clock * 1e9
    for value, option in ((freq_ratio, "--freq-ratio"), (size_ratio, "--size-ratio")):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise UserError(f"{option} must be a number > 0 (got {value:g})")
    if target_size is not None:
        if size_ratio is not None:
            raise UserError("give --size-ratio or --target-size, not both")
        size_ratio = estima.size_ratio_for(data, target_size)
    opts: dict[str, Any] = dict(kernels=ks, checkpoints=checkpoints, use="all" if refit else "prefix",
                                size=size, freq_ratio=freq_ratio, size_ratio=1.0 if size_ratio is None else size_ratio)
    if stalls:
        opts["categories"] = [s.strip() for s in stalls.split(",") if s.strip()]
    return opts


def predict_doc(data: Dataset, label: str, method: str, cores: Sequence[float], level: float,
                opts: dict[str, Any], others: Sequence[str] = (),
                target: tuple[Any, str, float | None] | None = None,
                measured: tuple[Any, str | None] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """`corecast predict --json`: (the document, the fits by method name: `method`'s, and those
    of `others` fitted beside it for a plot, an exception in place of one that could not be).
    `target`: (MachineSpec, placement, SMT yield or None) to predict for another machine;
    `measured`: (MachineSpec or None, placement or None) of the machine measured, where the data
    do not record it (--measured-machine)."""
    from ..model import predictors
    from ..model import topo
    from . import prediction as R

    if method not in predictors.METHODS:
        raise UserError(f"unknown method '{method}' (choose from {', '.join(predictors.METHODS)})")
    names = [method] + [m for m in others if m != method]
    if target is None:
        fits = predictors.fit_many(names, data, calibrate=True, **opts)
        fitted = fits[method]
        if isinstance(fitted, Exception):
            raise fitted
    else:
        # The method fitted once, on the effective cores of the measured machine; the plot's
        # curves are that fit's and the others' along the measured axis.
        spec, placement, smt_yield = target
        m_spec, m_order = topo.measured_machine(data, *(measured or (None, None)))
        fitted = topo.fit_for_target(lambda d: predictors.fit(method, d, calibrate=True, **opts), data, spec,
                                     placement, measured=m_spec, measured_order=m_order, smt_yield=smt_yield)
        fits = {method: fitted.base, **predictors.fit_many(names[1:], data, calibrate=True, **opts)}
    doc = R.prediction_doc(label, method, fitted, cores, level, work=predictors.work_per_run(data))
    return doc, fits


# ============================================================================ usl
def usl_doc(data: Dataset, label: str, metric: str | None = None, level: float = 0.95,
            predict_at: Sequence[float] | None = None) -> tuple[dict[str, Any], Any]:
    """`corecast usl --json`: (the document, the analysis)."""
    from ..model import usl

    analysis = usl.analyze_dataset(data, metric=metric, level=level)
    doc = analysis.to_dict(predict_at=predict_at)
    doc["file"] = label
    return doc, analysis


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
            "stall_categories": data.stall_names, "waits": wait_split(data)}


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


def campaign_summary(data: Dataset, path: str) -> dict[str, Any]:
    """`corecast measure --json`: the campaign's summary per core count."""
    from .campaign import summary_rows

    return {"campaign": path, "command": data.command, "runs": len(data),
            "failed": len([f for f in data.notes.get("failed_runs", [])]),
            "summary": summary_rows(data)}
