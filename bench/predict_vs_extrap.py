"""corecast's predictors against Extra-P (PyPI `extrap`) on the same train/test splits.

For every dataset (the project's USL reference data in data/usl/, and synthetic programs with
known laws from corecast.model.synth) and every split "fit on the first k core counts, predict
the rest", each method is fitted on the training rows and predicts the held-out core counts
in the dataset's input metric (time_s, else throughput). Extra-P models the same metric with
its default single-parameter modeler (PMNF hypotheses, all repetitions given). Prints the
MAPE per split and method, the median MAPE per method, and by how much corecast's `auto`
beats Extra-P's median error. Extra-P's hypotheses (n^i log^j n with i >= 0) model growing
costs, so it is given the throughput (1/time where the data have times), its favourable side.

    .venv/bin/pip install -e '.[bench]'     # installs extrap
    .venv/bin/python bench/predict_vs_extrap.py
"""
from __future__ import annotations

import glob
import math
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.dataset import Dataset, load  # noqa: E402
from corecast.model import predictors, synth  # noqa: E402
from corecast.model.base import Prediction  # noqa: E402
from corecast.model.evaluate import evaluate_predictor  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
METHODS = ["auto", "estima", "timex", "usl"]


class ExtraPFit:
    """Extra-P's model of the input metric as a function of the core count."""

    method = "extrap"

    def __init__(self, ds: Dataset):
        from extrap.fileio.file_reader.text_file_reader import TextFileReader
        from extrap.modelers.model_generator import ModelGenerator

        # Extra-P's hypotheses (PMNF terms n^i log^j n, i >= 0) describe growing costs: it models
        # the throughput (rising with the cores), which favours it; predictions are converted to
        # the input metric.
        self.metric = predictors.input_metric(ds)
        y = ds.column(self.metric)
        if self.metric == "time_s":
            y = 1.0 / y
        cores = np.unique(ds.cores)
        lines = ["PARAMETER p", "POINTS " + " ".join(f"{c:g}" for c in cores), "REGION main", "METRIC m"]
        for c in cores:
            v = y[(ds.cores == c) & np.isfinite(y)]
            lines.append("DATA " + " ".join(f"{x:.12g}" for x in v))
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as fh:
            fh.write("\n".join(lines) + "\n")
            path = fh.name
        try:
            exp = TextFileReader().read_experiment(path)
            gen = ModelGenerator(exp)
            gen.model_all()
        finally:
            os.unlink(path)
        self.function = next(iter(gen.models.values())).hypothesis.function
        self.model = self.function.to_string()

    def predict(self, cores, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        v = np.broadcast_to(np.asarray(self.function.evaluate(cores), dtype=float), cores.shape)
        if self.metric == "time_s":
            v = 1.0 / v
        return Prediction(cores=cores, value=v.copy(),
                          metric=self.metric, method="extrap", model=self.model)


def datasets() -> list[tuple[str, Dataset]]:
    out = []
    for f in sorted(glob.glob(str(ROOT / "data" / "usl" / "*.csv"))):
        out.append((f"usl/{Path(f).stem}", load(f)))
    for law in synth.LAWS:
        for seed in (0, 1):
            ds, _, _ = synth.scaling_dataset(law, seed=seed, cores=list(range(1, 13)) + [16, 20, 24, 32, 48])
            out.append((f"synth/{law}#{seed}", ds))
    return out


def splits(ds: Dataset) -> list[float]:
    c = np.unique(ds.cores)
    m = len(c)
    ks = range(max(4, math.ceil(m / 2)), m)
    return [float(c[k - 1]) for k in ks]


def main() -> int:
    _machine.header("predict_vs_extrap: corecast methods and Extra-P, MAPE % on held-out core counts")
    try:
        import extrap  # noqa: F401
    except ImportError:
        print("extrap is not installed: pip install -e '.[bench]'")
        return 1
    cols = ["extrap"] + METHODS
    print(f"{'dataset':24s} {'fit on ≤':>8s} {'test':>5s} " + " ".join(f"{c:>8s}" for c in cols))
    table: dict[str, list[float]] = {c: [] for c in cols}
    paired: list[tuple[float, float]] = []
    inside: dict[str, list[bool]] = {}
    for name, ds in datasets():
        for K in splits(ds):
            row = {}
            fits = {"extrap": ExtraPFit}
            for m in METHODS:
                fits[m] = (lambda d, m=m: predictors.fit(m, d))
            for m, fn in fits.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ev = evaluate_predictor(ds, K, m, fn)
                row[m] = ev.mape if ev.ok else math.nan
                if ev.ok and math.isfinite(ev.coverage):
                    inside.setdefault(m, []).extend(bool(p.inside) for p in ev.points if p.inside is not None)
            ntest = int((np.unique(ds.cores) > K).sum())
            print(f"{name:24s} {K:8g} {ntest:5d} " + " ".join(
                f"{row[c]:8.1f}" if math.isfinite(row[c]) else f"{'-':>8s}" for c in cols))
            for c in cols:
                if math.isfinite(row[c]):
                    table[c].append(row[c])
            if math.isfinite(row["extrap"]) and math.isfinite(row["auto"]):
                paired.append((row["extrap"], row["auto"]))
    print()
    print(f"{'median MAPE %':40s} " + " ".join(
        f"{np.median(table[c]):8.1f}" if table[c] else f"{'-':>8s}" for c in cols))
    print(f"{'mean MAPE %':40s} " + " ".join(
        f"{np.mean(table[c]):8.1f}" if table[c] else f"{'-':>8s}" for c in cols))
    print(f"{'splits':40s} " + " ".join(f"{len(table[c]):8d}" for c in cols))
    print(f"{'80% band coverage (measured)':40s} " + " ".join(
        f"{np.mean(inside[c]):8.2f}" if inside.get(c) else f"{'-':>8s}" for c in cols))
    ex = np.array([p[0] for p in paired])
    au = np.array([p[1] for p in paired])
    med_x, med_a = float(np.median(ex)), float(np.median(au))
    wins = int(np.sum(au < ex))
    print()
    print(f"on the {len(paired)} splits both ran: Extra-P median MAPE {med_x:.2f}%, corecast auto {med_a:.2f}%: "
          f"auto's median error is {med_x / med_a:.2f}x smaller ({med_x - med_a:.2f} points); "
          f"auto is more accurate on {wins} of {len(paired)} splits")
    return 0 if med_a < med_x else 2


if __name__ == "__main__":
    sys.exit(main())
