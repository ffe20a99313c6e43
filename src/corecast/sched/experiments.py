"""Experiment sets: a machine, applications by category, workload mixes, the policies compared
and what the paper found -- the PMCTrack case study's Figures 8 and 9 as data
(`corecast/sched/studies/*.toml`, see pmctrack-2b2s.toml for the format).

`run(experiment)` simulates every workload under every policy and `findings(result)` checks the
paper's statements against the simulation: each with whether it holds and by how much.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import UserError
from . import _toml as T
from .engine import Options
from .machine import Machine, load_machine
from .metrics import Metrics, References, evaluate
from .policies import POLICIES
from .workload import Workload, parse_workload


@dataclass
class Experiment:
    name: str
    machine: Machine
    workloads: list[Workload]
    policies: list[str]
    figure: str = ""
    description: str = ""
    source: str = ""
    categories: dict[str, dict[str, Any]] = field(default_factory=dict)
    paper: dict[str, Any] = field(default_factory=dict)


@dataclass
class ExperimentResult:
    experiment: Experiment
    metrics: dict[str, dict[str, Metrics]]          # workload -> policy -> metrics
    sources: dict[str, str]                         # policy -> SF source used

    def table(self, what: str) -> dict[str, dict[str, float]]:
        return {w: {p: getattr(m, what) for p, m in row.items()} for w, row in self.metrics.items()}


def bundled_experiments() -> list[str]:
    return T.bundled("studies")


def load_experiment(name_or_path: str | Path) -> Experiment:
    data, where = T.read(name_or_path, "studies", "experiment")
    return parse_experiment(data, where)


def parse_experiment(data: Mapping[str, Any], where: str) -> Experiment:
    T.unknown_keys(data, {"name", "machine", "figure", "description", "source", "policies", "rules",
                          "category", "workload", "paper"}, where)
    if "machine" not in data:
        raise UserError(f"{where}: 'machine' is missing (a bundled machine name or a TOML file)")
    mpath = str(data["machine"])
    if mpath.endswith(".toml") and not Path(mpath).is_absolute():
        mpath = str(Path(where).parent / mpath)
    machine = load_machine(mpath)
    pols = data.get("policies", list(POLICIES))
    if not isinstance(pols, list) or not pols:
        raise UserError(f"{where}: 'policies' must be a list of policy names")
    for p in pols:
        if p not in POLICIES:
            raise UserError(f"{where}: unknown policy '{p}' (choose {', '.join(POLICIES)})")
    cats = data.get("category", {})
    if not isinstance(cats, dict) or not cats:
        raise UserError(f"{where}: no [category.NAME] tables")
    rules = data.get("rules", {})
    wls = data.get("workload")
    if not isinstance(wls, list) or not wls:
        raise UserError(f"{where}: no [[workload]] tables")
    workloads = []
    for i, w in enumerate(wls):
        ww = f"{where}: workload {i + 1}"
        if not isinstance(w, dict) or not isinstance(w.get("apps"), list) or not w["apps"]:
            raise UserError(f"{ww}: give apps = [\"CATEGORY\", \"CATEGORY*SCALE\", ...]")
        name = str(w.get("name", f"W{i + 1}"))
        apps = []
        seen: dict[str, int] = {}
        for entry in w["apps"]:
            cat, _, sc = str(entry).partition("*")
            if cat not in cats:
                raise UserError(f"{ww} ({name}): unknown category '{cat}' (known: {', '.join(cats)})")
            try:
                scale = float(sc) if sc else 1.0
            except ValueError:
                raise UserError(f"{ww} ({name}): '{entry}': the scale after * must be a number") from None
            if not (scale > 0 and math.isfinite(scale)):
                raise UserError(f"{ww} ({name}): '{entry}': the scale must be > 0")
            seen[cat] = seen.get(cat, 0) + 1
            app = dict(cats[cat])
            app["phase"] = [dict(p, work_s=p.get("work_s", 0) * scale) if isinstance(p, dict) else p
                            for p in app.get("phase", [])]
            app["name"] = f"{cat}.{seen[cat]}"
            app["category"] = cat
            apps.append(app)
        workloads.append(parse_workload({"name": name, "rules": rules, "app": apps}, f"{where}: {name}"))
    paper = data.get("paper", {})
    return Experiment(T.text(data, "name", where) or Path(where).stem, machine, workloads, list(pols),
                      T.text(data, "figure", where), T.text(data, "description", where),
                      T.text(data, "source", where), dict(cats), dict(paper) if isinstance(paper, dict) else {})


def run(exp: Experiment, options: Options | None = None, sf_source: str | None = None,
        policies: list[str] | None = None, progress: Callable[[str], None] | None = None) -> ExperimentResult:
    """Every workload under every policy (EQP samples IPC unless `sf_source` names one source for all)."""
    o = options or Options()
    pols = policies or exp.policies
    out: dict[str, dict[str, Metrics]] = {}
    sources: dict[str, str] = {}
    for wl in exp.workloads:
        refs = References(wl, exp.machine, o)
        row = {}
        for p in pols:
            if progress:
                progress(f"{wl.name} {p}")
            po = Options(**{**o.__dict__, "sf_source": sf_source or o.sf_source})
            res, met = evaluate(wl, exp.machine, p, po, refs)
            sources[p] = res.sf_source
            row[p] = met
        out[wl.name] = row
    return ExperimentResult(exp, out, sources)


@dataclass
class Finding:
    statement: str
    holds: bool
    detail: str
    paper: str = ""


def _mean(result: ExperimentResult, what: str, p: str) -> float:
    return float(np.mean([row[p].__dict__[what] for row in result.metrics.values() if p in row]))


def findings(result: ExperimentResult) -> list[Finding]:
    """The paper's statements, checked on the simulation."""
    pols = list(next(iter(result.metrics.values())).keys())
    wls = list(result.metrics)
    out: list[Finding] = []
    asp = result.table("asp")
    unf = result.table("unfairness")
    if "hsp" in pols:
        best = [w for w in wls if max(asp[w], key=asp[w].get) == "hsp"]
        out.append(Finding("HSP achieves the best ASP on most workloads", len(best) > len(wls) / 2,
                           f"best on {len(best)} of {len(wls)} workloads", "most workloads"))
        worst = [w for w in wls if max(unf[w], key=unf[w].get) == "hsp"]
        means = {p: _mean(result, "unfairness", p) for p in pols}
        out.append(Finding("HSP is the most unfair policy", max(means, key=means.get) == "hsp",
                           f"highest mean unfairness ({means['hsp']:.3f}); the most unfair on "
                           f"{len(worst)} of {len(wls)} workloads", "the most unfair"))
    if "acfs" in pols:
        best = [w for w in wls if min(unf[w], key=unf[w].get) == "acfs"]
        ties = [w for w in wls if w not in best and unf[w]["acfs"] <= min(unf[w].values()) * 1.01]
        out.append(Finding("ACFS achieves the best unfairness across the board", len(best) == len(wls),
                           f"the fairest on {len(best)} of {len(wls)} workloads"
                           + (f" (within 1% of the fairest on {len(ties)} more)" if ties else ""),
                           "every workload"))
        change = result.experiment.paper.get("acfs_unfairness_change", {})
        a = _mean(result, "unfairness", "acfs")
        for p, paper_v in change.items():
            if p not in pols:
                continue
            b = _mean(result, "unfairness", p)
            rel = a / b - 1.0
            out.append(Finding(f"ACFS's average unfairness is below {p.upper()}'s", rel < 0,
                               f"{100 * rel:+.1f}% ({a:.3f} against {b:.3f})", f"{100 * float(paper_v):+.0f}%"))
    return out
