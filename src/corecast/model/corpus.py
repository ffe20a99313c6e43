"""A corpus of real scaling curves: what it holds and how a series is split.

A corpus is a folder of sources, one sub-folder each: `source.toml` (`name`, `machine`: a
machine description `corecast.target.parse_spec` reads, `placement`, provenance) and CSV series
(`cores,throughput`, or `cores,time_s` for the run time of a fixed amount of work: its
throughput is 1 / the median time). `data/corpus/` is the bundled one (its README says where each came from).
A series is fitted on its first part (`train_max`: the cores up to `train_frac` of its largest
count, never fewer than its two smallest counts) and predicted beyond, as a user with a small
machine would meet it. `corecast.model.learn` learns priors from it and
`corecast.model.scorecard` scores the methods on it, source by source.

Placement `os` (the source left thread placement to the operating system) is read as `spread`:
Linux balances threads over the sockets and fills physical cores before SMT siblings. A source
that states its machine but no placement is placed as `predict` places threads it is not told
about (`spread`, target.DEFAULT_PLACEMENT): `evaluate --corpus` on such a source scores what a
user of `predict --target-machine` would get.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..dataset import Dataset, read_csv
from ..errors import UserError
from ..parsing import read_document
from ..target import DEFAULT_PLACEMENT, ORDERS, MachineSpec, parse_spec


#: How sources name their placement, in corecast's orders: the operating system's (threads not
#: pinned) is read as `spread`, as are OpenMP's `spread` and Intel's `scatter`/`balanced`
#: (round-robin over sockets); OpenMP's `close` and Intel's `compact` pack a socket first. A
#: placement not named here is read as DEFAULT_PLACEMENT.
PLACEMENT_WORDS = {"os": "spread", "none": "spread", "unpinned": "spread", "default": "spread",
                   "scatter": "spread", "balanced": "spread", "round-robin": "spread",
                   "close": "compact", "packed": "compact"}


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

    @property
    def order(self) -> str:
        """The placement as one of corecast's orders: `os` read as `spread`, none (a source that
        states its machine but not where its threads ran) as `predict`'s default,
        target.DEFAULT_PLACEMENT, the one chosen by leave-one-source-out for that case."""
        p = (self.placement or DEFAULT_PLACEMENT).strip().lower()
        p = PLACEMENT_WORDS.get(p, p)
        return p if p in ORDERS else DEFAULT_PLACEMENT


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
            # read as any file a user gives: a folder or a FIFO by that name is one line
            meta = read_document(spec, "source description", "toml", limit=1 << 20)
        machine = parse_spec(str(meta["machine"])) if meta.get("machine") else None
        for csv in sorted(src.glob("*.csv")):
            ds = read_csv(csv)
            if "throughput" in ds.metrics:
                ag = ds.aggregate("throughput")
                x = ag.value
            elif "time_s" in ds.metrics:
                # A strong-scaling run time: the throughput is one run per second (median time).
                ag = ds.aggregate("time_s")
                if np.any(ag.value <= 0):
                    raise UserError(f"{csv}: time_s must be > 0 at every core count")
                x = 1.0 / ag.value
            else:
                raise UserError(f"{csv}: a corpus series needs a throughput or a time_s column")
            out.append(Series(str(meta.get("name", src.name)), csv.stem, ag.cores, x, machine,
                              str(meta.get("placement", ""))))
    if not out:
        raise UserError(f"{root}: no series (expected folders of cores,throughput or cores,time_s CSV files)")
    return out


def train_max(cores: np.ndarray, frac: float) -> float:
    """The largest count within `frac` of the series' largest, and at least the second smallest."""
    c = np.sort(np.unique(cores))
    inside = c[c <= frac * c[-1] + 1e-9]
    return float(inside[-1]) if len(inside) >= 2 else float(c[min(1, len(c) - 1)])
