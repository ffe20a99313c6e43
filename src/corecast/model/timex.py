"""`timex`: direct time extrapolation, ESTIMA's baseline.

The same kernels and the same checkpoint selection as the stall method, applied to the time
series itself (the median time per core count, or 1/throughput when the dataset has only a
throughput column; `corecast.model.series`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from .base import Fitted, Prediction
from .kernels import Kernel
from .select import Selection, SelectionError, select
from .series import TimeSeries, prepare, to_prediction


@dataclass
class TimexFit(Fitted):
    """Kernels fitted to the time series directly."""

    series: TimeSeries
    kernels: Sequence[Kernel] | None = None
    checkpoints: int | None = None
    use: str = "prefix"
    freq_ratio: float = 1.0
    size_ratio: float = 1.0
    method: str = "timex"
    warnings: list[str] = field(default_factory=list)
    _cache: dict[float, Selection] = field(default_factory=dict, repr=False)

    def selection(self, horizon: float) -> Selection:
        h = float(max(horizon, self.series.cores.max()))
        if h not in self._cache:
            try:
                self._cache[h] = select(self.series.cores, self.series.time, h, kernels=self.kernels,
                                        checkpoints=self.checkpoints, positive=True, use=self.use,
                                        name=self.series.source)
            except SelectionError as err:
                raise UserError(f"{self.series.dataset.label}: timex: {err}") from None
        return self._cache[h]

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        sel = self.selection(float(cores.max()) if cores.size else 0.0)
        t, lo, hi = sel.band(cores, level)
        scale = self.freq_ratio * self.size_ratio
        warns = list(self.series.warnings) + list(self.warnings) + list(sel.warnings)
        return to_prediction(cores, t * scale, lo * scale, hi * scale, self.series.metric, level=level,
                             method=self.method, model=sel.kernel,
                             params={"time_s": sel.to_dict(), "source": self.series.source},
                             warnings=warns)

    def models(self, horizon: float) -> dict[str, Any]:
        sel = self.selection(horizon)
        return {"time_s" if self.series.metric == "time_s" else "1/throughput": sel.to_dict()}


def fit_dataset(ds: Dataset, kernels: Sequence[Kernel] | None = None, checkpoints: int | None = None,
                use: str = "prefix", size: float | None = None, freq_ratio: float = 1.0,
                size_ratio: float = 1.0) -> TimexFit:
    """Direct time extrapolation of a Dataset: fit, then `.predict(cores, level)`."""
    ts = prepare(ds, "timex", size, freq_ratio, size_ratio).series
    warn = []
    if size_ratio != 1.0:
        warn.append(f"timex scales time linearly with the problem size (×{size_ratio:g}); only the "
                    "stall method extrapolates where the time goes")
    return TimexFit(ts, kernels=kernels, checkpoints=checkpoints, use=use, freq_ratio=freq_ratio,
                    size_ratio=size_ratio, warnings=warn)
