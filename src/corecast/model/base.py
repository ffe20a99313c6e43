"""The face every predictor shows.

A fit function takes a Dataset and returns a small fitted object, a `Fitted`: its
`predict(cores, level)` returns a `Prediction` (values at the requested core counts, low/high
bounds at a stated level, the model and parameters used, and warnings), its `models(horizon)`
says what was fitted. `evaluate`, `auto`, plots and reports work on this face only, so a new
method plugs in without touching them (`corecast.model.methods` holds the registry).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

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

    def as_time(self) -> np.ndarray:
        return self.value if self.metric == "time_s" else 1.0 / self.value


class Fitted(ABC):
    """What every method's fit function returns.

    `method` is the name it was fitted as ("usl", "auto", ...); `warnings` what the fit noticed
    (they are repeated in every prediction). Subclasses are dataclasses that declare both as
    fields.
    """

    method: str
    warnings: list[str]

    @abstractmethod
    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        """The input metric at `cores`, with its band at `level`."""

    @abstractmethod
    def models(self, horizon: float) -> dict[str, Any]:
        """What was fitted, per series, for predictions up to `horizon` cores (JSON-ready)."""

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Any]:
        """Stall categories ranked by their growth up to `cores`; none for a method without stalls."""
        return []
