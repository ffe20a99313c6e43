"""Speed of a full `estima` prediction: 12 measured core counts × 8 stall categories (3
repetitions each), on one core. Target: under 200 ms. A full prediction is fitting every
category's kernels on every prefix, checkpoint selection with realism checks, the scaling
factor, predicted times with their band, and the bottleneck ranking.

For reference, the same run times Extra-P (when installed) modelling the same 9 series
(8 categories and the time) with its default modeler, as a ratio.
"""
from __future__ import annotations

import os

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

import numpy as np  # noqa: E402

from corecast.model import estima, synth  # noqa: E402

TARGETS = [16, 24, 32, 48, 64]


def one(ds) -> float:
    t0 = time.perf_counter()
    f = estima.fit_dataset(ds)
    p = f.predict(TARGETS, 0.8)
    f.bottlenecks(TARGETS)
    dt = time.perf_counter() - t0
    assert np.all(np.isfinite(p.value))
    return dt


def main() -> int:
    try:
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        pinned = "pinned to one CPU"
    except (AttributeError, OSError):
        pinned = "not pinned"
    _machine.header(f"estima_speed: full estima prediction, 12 core counts x 8 stall categories ({pinned})")
    sets = [synth.scaling_dataset(law, seed=s, extra_categories=8 - len(synth._law(law, 1.0)[0]))[0]
            for law in ("lock", "lock_hidden", "memory") for s in range(3)]
    assert all(len(d.stall_names) == 8 and len(np.unique(d.cores)) == 12 for d in sets)
    one(sets[0])  # warm-up (imports, caches)
    times = []
    for _ in range(5):
        for ds in sets:
            times.append(one(ds))
    med, best, worst = statistics.median(times), min(times), max(times)
    print(f"runs: {len(times)}; median {1e3 * med:.1f} ms, min {1e3 * best:.1f} ms, max {1e3 * worst:.1f} ms "
          f"(target < 200 ms: {'met' if med < 0.2 else 'NOT met'})")
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from predict_vs_extrap import ExtraPFit
        from corecast.dataset import Dataset
        ds = sets[0]
        xt = []
        for _ in range(3):
            t0 = time.perf_counter()
            for col in ds.stall_names + ["time_s"]:
                sub = Dataset(cores=ds.cores, metrics={"time_s": ds.metrics[col]})
                ExtraPFit(sub)
            xt.append(time.perf_counter() - t0)
        xm = statistics.median(xt)
        print(f"Extra-P modelling the same 9 series: median {1e3 * xm:.1f} ms; estima / Extra-P = {med / xm:.2f}")
    except ImportError:
        print("Extra-P not installed: no reference timing (pip install -e '.[bench]')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
