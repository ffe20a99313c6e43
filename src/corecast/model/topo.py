"""Predicting for the machine the program will run on (`predict --target-machine`).

Any fitted method predicts along one axis: more cores like the ones measured. On a target
machine a thread count is also a *position* (`corecast.target.placement`): how many physical
cores the threads occupy, whether some share a core with an SMT sibling, how many sockets they
span, and whether there are more threads than logical CPUs. `OnTarget` turns that position into
the number of effective cores the fitted method is asked about:

    effective(N) = cores used + yield x (threads that run - cores used)

- threads beyond the target's logical CPUs cannot run at the same time (oversubscription): they
  add nothing, so N is capped at the CPU count (and a warning says so);
- a thread on a core's second hardware thread adds `yield` of a core; the yield is a prior
  learned from the corpus (`priors.toml`, scripts/learn_priors.py: the median over the series
  measured on an SMT machine of the gain of the SMT doubling over the gain of the last doubling
  of physical cores), unless the user gives one (`--smt-yield`);
- crossing sockets is not modelled beyond what the measurements show: when the threads span more
  sockets than were measured, a warning says that the prediction carries the measured scaling
  across the boundary unchanged (no cross-socket cost from calibration yet).

Every prediction says which of these were used (`params["target"]`).
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Sequence

import numpy as np

from ..errors import UserError
from ..target import MachineSpec, Position, placement
from .base import Fitted, Prediction


def smt_prior() -> tuple[float, str]:
    """The SMT yield learned from the corpus, and where it came from."""
    d = tomllib.loads((resources.files("corecast.model") / "priors.toml").read_text(encoding="utf-8"))
    s = d["smt"]
    return float(s["yield"]), (f"prior: median of {s['series']} series measured with SMT in "
                               f"{', '.join(s['sources'])} (data/corpus; quartiles "
                               f"{s['quartiles'][0]:.2f}-{s['quartiles'][1]:.2f})")


@dataclass
class OnTarget(Fitted):
    """A fitted method asked about the effective cores of each thread count on a target."""

    base: Fitted
    target: MachineSpec
    order: str = "compact"
    smt_yield: float | None = None          # None: the corpus prior
    measured_sockets: int | None = None
    method: str = ""
    warnings: list[str] = field(default_factory=list)
    smt_source: str = ""

    def __post_init__(self) -> None:
        if not self.method:
            self.method = self.base.method
        if self.smt_yield is None:
            self.smt_yield, self.smt_source = smt_prior()
        else:
            if not (0.0 <= self.smt_yield <= 1.0) or not math.isfinite(self.smt_yield):
                raise UserError(f"--smt-yield {self.smt_yield}: between 0 and 1")
            self.smt_source = "given (--smt-yield)"

    def positions(self, cores: Sequence[float] | np.ndarray) -> list[Position]:
        out = []
        for c in np.asarray(cores, dtype=float):
            if c < 1 or c != int(c):
                raise UserError(f"--cores {c:g}: a target machine runs whole threads (1 or more)")
            out.append(placement(self.target, int(c), self.order))
        return out

    def effective(self, cores: Sequence[float] | np.ndarray) -> np.ndarray:
        pos = self.positions(cores)
        return np.array([p.cores_used + self.smt_yield * (p.runnable - p.cores_used) for p in pos], dtype=float)

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        pos = self.positions(cores)
        eff = self.effective(cores)
        p = self.base.predict(eff, level)
        warns = list(p.warnings) + list(self.warnings)
        over = [int(c) for c, q in zip(cores, pos) if q.oversubscribed]
        if over:
            warns.append(f"{', '.join(map(str, over))} threads: more than the target's {self.target.cpus} logical "
                         "CPUs; the threads beyond them wait and add nothing (predicted as at "
                         f"{self.target.cpus})")
        smt = [int(c) for c, q in zip(cores, pos) if q.smt_shared]
        if smt:
            warns.append(f"SMT siblings share cores from {smt[0]} threads on: each adds {self.smt_yield:.2f} of a core "
                         f"({self.smt_source})")
        wide = max(q.sockets_used for q in pos)
        if self.measured_sockets is not None and wide > self.measured_sockets:
            warns.append(f"the threads span {wide} sockets, the measurements {self.measured_sockets}: no cross-socket "
                         "cost is modelled (the measured scaling is carried across the boundary)")
        params = dict(p.params)
        params["target"] = {"machine": self.target.to_dict(), "placement": self.order,
                            "smt_yield": self.smt_yield, "smt_yield_source": self.smt_source,
                            "effective_cores": [float(e) for e in eff],
                            "positions": [{"sockets_used": q.sockets_used, "smt_shared": q.smt_shared,
                                           "oversubscribed": q.oversubscribed, "cores_used": q.cores_used}
                                          for q in pos]}
        return Prediction(cores=cores, value=p.value, metric=p.metric, low=p.low, high=p.high, level=p.level,
                          method=p.method, model=p.model + f" on {self.target.name or 'the target'}",
                          params=params, warnings=list(dict.fromkeys(warns)))

    def models(self, horizon: float) -> dict[str, Any]:
        return self.base.models(float(self.effective([max(1.0, math.floor(horizon))])[0]))

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Any]:
        return self.base.bottlenecks(self.effective(cores))

    def __getattr__(self, name: str) -> Any:
        # what a report asks of the method (auto's choice and reason, estima's solve) is the base's
        if name.startswith("__") or name in ("base",):
            raise AttributeError(name)
        return getattr(self.base, name)
