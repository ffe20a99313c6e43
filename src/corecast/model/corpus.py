"""A corpus of real scaling curves, and how well each method predicts them, source by source.

A corpus is a folder of sources, one sub-folder each: `source.toml` (`name`, `machine`: a
machine description `corecast.target.parse_spec` reads, `placement`, provenance) and CSV series
(`cores,throughput`). `data/corpus/` is the bundled one (its README says where each came from).

`evaluate_corpus` fits every method on the first part of each series (the cores up to
`train_frac` of the series' largest count, and never fewer than the two smallest counts) and
predicts the rest, as a user with a small machine would. Per source it reports the median over
the series of each series' median absolute percentage error, and the share of held-out points
inside the method's band (coverage, at the stated level); overall, the median of the sources'
medians -- every source weighs the same, however many series it has.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset, read_csv
from ..errors import UserError
from ..target import MachineSpec, parse_spec
from . import predictors
from .evaluate import MethodEvaluation, evaluate_predictor


@dataclass
class Series:
    source: str
    name: str
    cores: np.ndarray
    throughput: np.ndarray
    machine: MachineSpec | None = None
    placement: str = ""

    def dataset(self) -> Dataset:
        return Dataset(cores=self.cores, metrics={"throughput": self.throughput}, path=f"{self.source}/{self.name}")


def load_corpus(folder: str | Path) -> list[Series]:
    """Every series of every source under `folder` (sources in name order)."""
    root = Path(folder)
    if not root.is_dir():
        raise UserError(f"{root}: not a folder (a corpus is a folder of source folders)")
    out: list[Series] = []
    for src in sorted(p for p in root.iterdir() if p.is_dir()):
        meta: dict[str, Any] = {}
        spec = src / "source.toml"
        if spec.exists():
            try:
                meta = tomllib.loads(spec.read_text(encoding="utf-8"))
            except tomllib.TOMLDecodeError as err:
                raise UserError(f"{spec}: not valid TOML ({err})") from None
        machine = parse_spec(str(meta["machine"])) if meta.get("machine") else None
        for csv in sorted(src.glob("*.csv")):
            ds = read_csv(csv)
            if "throughput" not in ds.metrics:
                raise UserError(f"{csv}: a corpus series needs a throughput column")
            ag = ds.aggregate("throughput")
            out.append(Series(str(meta.get("name", src.name)), csv.stem, ag.cores, ag.value, machine,
                              str(meta.get("placement", ""))))
    if not out:
        raise UserError(f"{root}: no series (expected folders of cores,throughput CSV files)")
    return out


def train_max(cores: np.ndarray, frac: float) -> float:
    """The largest count within `frac` of the series' largest, and at least the second smallest."""
    c = np.sort(np.unique(cores))
    inside = c[c <= frac * c[-1] + 1e-9]
    return float(inside[-1]) if len(inside) >= 2 else float(c[min(1, len(c) - 1)])


@dataclass
class SourceScore:
    source: str
    series: int
    median_error: dict[str, float] = field(default_factory=dict)      # method -> % (median of series medians)
    coverage: dict[str, float] = field(default_factory=dict)          # method -> share of held-out points in band
    failed: dict[str, int] = field(default_factory=dict)              # method -> series it could not predict


@dataclass
class CorpusEvaluation:
    methods: list[str]
    train_frac: float
    level: float
    sources: list[SourceScore]
    per_series: list[tuple[Series, dict[str, MethodEvaluation]]] = field(default_factory=list, repr=False)

    def overall(self) -> dict[str, float]:
        """Median over the sources of each method's median error."""
        out = {}
        for m in self.methods:
            v = [s.median_error[m] for s in self.sources if m in s.median_error]
            out[m] = float(np.median(v)) if v else math.nan
        return out

    def to_dict(self) -> dict[str, Any]:
        def num(v: float) -> float | None:
            return None if v is None or not math.isfinite(v) else round(float(v), 3)
        return {"train_frac": self.train_frac, "level": self.level, "methods": self.methods,
                "sources": [{"source": s.source, "series": s.series,
                             "median_abs_pct_error": {m: num(v) for m, v in s.median_error.items()},
                             "coverage": {m: num(v) for m, v in s.coverage.items()},
                             "failed": s.failed} for s in self.sources],
                "overall_median_abs_pct_error": {m: num(v) for m, v in self.overall().items()}}


def evaluate_corpus(series: Sequence[Series], methods: Sequence[str] | None = None, train_frac: float = 0.25,
                    level: float = 0.8) -> CorpusEvaluation:
    """Every method on every series (see the module doc)."""
    if not 0 < train_frac < 1:
        raise UserError(f"--train-frac {train_frac}: between 0 and 1")
    methods = list(methods or ["auto", "usl", "timex", "pmnf"])
    for m in methods:
        if m not in predictors.REGISTRY:
            raise UserError(f"unknown method '{m}' (choose from {', '.join(predictors.REGISTRY)})")
    rows: list[tuple[Series, dict[str, MethodEvaluation]]] = []
    for s in series:
        ds = s.dataset()
        k = train_max(s.cores, train_frac)
        res = {m: evaluate_predictor(ds, k, m, lambda d, m=m: predictors.fit(m, d, calibrate=True), level)
               for m in methods}
        rows.append((s, res))
    scores = []
    for src in sorted({s.source for s, _ in rows}):
        mine = [r for s, r in rows if s.source == src]
        sc = SourceScore(src, len(mine))
        for m in methods:
            ok = [r[m] for r in mine if r[m].ok]
            sc.failed[m] = len(mine) - len(ok)
            if ok:
                sc.median_error[m] = float(np.median([np.median([p.abs_pct_error for p in e.points]) for e in ok]))
                inside = [p.inside for e in ok for p in e.points if p.inside is not None]
                if inside:
                    sc.coverage[m] = float(np.mean(inside))
        scores.append(sc)
    return CorpusEvaluation(methods, train_frac, level, scores, rows)
