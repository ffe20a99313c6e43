"""The face every predictor shows.

A fit function takes a Dataset (or arrays) and returns a small fitted object whose
`predict(cores, level)` returns a `Prediction`: values at the requested core counts, low/high
bounds at a stated level, the model and parameters used, and warnings. `evaluate`, `auto`,
plots and reports work on this face only, so a new method plugs in without touching them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np


@dataclass
class Prediction:
    """Predicted values of one metric at some core counts.

    `metric` is what `value`, `low` and `high` measure: "throughput" (higher is better) or
    "time_s" (lower is better). `low`/`high` are the bounds of that metric at `level`
    (e.g. 0.8 for an 80% band); None when the method cannot give them.
    """

    cores: np.ndarray
    value: np.ndarray
    metric: str = "throughput"
    low: np.ndarray | None = None
    high: np.ndarray | None = None
    level: float | None = None
    method: str = ""
    model: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.cores = np.asarray(self.cores, dtype=float)
        self.value = np.asarray(self.value, dtype=float)
        if self.low is not None:
            self.low = np.asarray(self.low, dtype=float)
        if self.high is not None:
            self.high = np.asarray(self.high, dtype=float)

    def as_throughput(self) -> np.ndarray:
        return self.value if self.metric == "throughput" else 1.0 / self.value

    def as_time(self) -> np.ndarray:
        return self.value if self.metric == "time_s" else 1.0 / self.value


@runtime_checkable
class Fitted(Protocol):
    """What a fit function returns."""

    method: str

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        ...
