"""Extra-P (PyPI `extrap`), the peer the evaluations compare with, behind corecast's predictor face.

Extra-P is optional: it pins numpy below 2, which the test environment's pandas does not
accept, so it lives in the benchmark environment (`make bench`). `available()` says whether it
can be imported; `ExtraPFit` models one metric against the core count with Extra-P's default
single-parameter modeler (PMNF hypotheses, every repetition given).

Extra-P's hypotheses (n^i log^j n, i >= 0) describe growing costs, so it is given the throughput
(1/time where the data have times), its favourable side; predictions come back in the input
metric.
"""
from __future__ import annotations

import os
import tempfile
import warnings
from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from .base import Fitted, Prediction
from .series import input_metric


def available() -> bool:
    try:
        import extrap  # noqa: F401
    except ImportError:
        return False
    return True


class ExtraPFit(Fitted):
    """Extra-P's model of the throughput as a function of the core count."""

    method = "extrap"

    def __init__(self, ds: Dataset):
        try:
            from extrap.fileio.file_reader.text_file_reader import TextFileReader
            from extrap.modelers.model_generator import ModelGenerator
        except ImportError:
            raise UserError("Extra-P is not installed (pip install extrap, in an environment of its own: "
                            "it needs numpy < 2)") from None
        self.warnings: list[str] = []
        self.metric = input_metric(ds)
        y = ds.column(self.metric)
        if self.metric == "time_s":
            y = 1.0 / y
        cores = np.unique(ds.cores)
        if len(cores) < 2:
            raise UserError(f"{ds.label}: Extra-P needs 2 or more core counts")
        lines = ["PARAMETER p", "POINTS " + " ".join(f"{c:g}" for c in cores), "REGION main", "METRIC m"]
        for c in cores:
            v = y[(ds.cores == c) & np.isfinite(y)]
            lines.append("DATA " + " ".join(f"{x:.12g}" for x in v))
        fd, path = tempfile.mkstemp(suffix=".txt")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write("\n".join(lines) + "\n")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                exp = TextFileReader().read_experiment(path)
                gen = ModelGenerator(exp)
                gen.model_all()
        finally:
            os.unlink(path)
        self.function = next(iter(gen.models.values())).hypothesis.function
        self.model = self.function.to_string()

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        v = np.broadcast_to(np.asarray(self.function.evaluate(cores), dtype=float), cores.shape).copy()
        if self.metric == "time_s":
            v = 1.0 / v
        return Prediction(cores=cores, value=v, metric=self.metric, method="extrap", model=self.model)

    def models(self, horizon: float = 0.0) -> dict[str, Any]:
        return {"throughput": {"kernel": "Extra-P (PMNF, default single-parameter modeler)", "formula": self.model}}


def fit_dataset(ds: Dataset) -> ExtraPFit:
    return ExtraPFit(ds)
