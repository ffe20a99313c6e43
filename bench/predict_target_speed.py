"""Speed of a prediction for a target machine with the corpus priors, on one core. Target: under
300 ms (issue 10). What is timed is what `corecast predict FILE --cores LIST --target-machine SPEC
--measured-machine SPEC --json` computes after reading the file: `auto` fitted on effective
cores of the measured machine (every member, rolling-origin validation, the blend and band from
the priors), asked about the target's thread counts (placement, SMT yield, cross-node cost), and
the JSON document built. Three corpus series: a dense one (conc-map-bench, 176 counts, fitted on
its first 44), a mid-size one (MySQL sysbench, 15 counts) and a two-point one (LiTL A64).

For reference the same run times a plain USL fit and prediction of the same points (Amdahl's law
for the two-point series, which the USL cannot fit), as a ratio.
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

from corecast.model import corpus, usecase, usl  # noqa: E402
from corecast.model.priors import load as load_priors  # noqa: E402
from corecast.report import documents as D  # noqa: E402
from corecast.target import parse_spec  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CASES = [("concmap", "readheavy_dashmap", "epyc-9654-2s", [64, 128, 192, 256, 384]),
         ("mysql-sysbench-ro", "mysql57", "epyc-9654-2s", [32, 64, 96, 192]),
         ("litl-a64", "barnes", "sockets=8,cores=16,smt=2", [32, 64, 128, 256])]
REPS = 15


def main() -> int:
    _machine.header("predict_target_speed: auto with the corpus priors on a target machine (one core)")
    series = {(s.source, s.name): s for s in corpus.load_corpus(ROOT / "data" / "corpus")}
    load_priors()                           # read once, as a running corecast has
    print(f"{'series':34s} {'fitted':>6s} {'predict ms':>10s} {'usl ms':>7s} {'ratio':>6s}")
    worst = 0.0
    for src, name, target, cores in CASES:
        s = series[(src, name)]
        k = corpus.train_max(s.cores, 0.25)
        ds = s.dataset().select(s.cores <= k)
        spec = parse_spec(target)
        tgt = usecase.Target(spec, "compact", None, s.machine, s.order)
        times, usl_times = [], []
        for _ in range(REPS):
            t0 = time.perf_counter()
            doc = D.predict_doc(usecase.predict(ds, usecase.PredictOptions(), tgt), name, cores, 0.8)
            times.append(time.perf_counter() - t0)
            assert doc["target_machine"] and len(doc["predictions"]) == len(cores)
            t0 = time.perf_counter()
            usl.fit(ds.cores, ds.metrics["throughput"], amdahl=len(set(ds.cores)) < 3).predict(cores)
            usl_times.append(time.perf_counter() - t0)
        med, umed = statistics.median(times), statistics.median(usl_times)
        worst = max(worst, med)
        print(f"{src + '/' + name:34s} {len(set(ds.cores)):6d} {1000 * med:10.1f} {1000 * umed:7.2f} "
              f"{med / umed:6.0f}x")
    print(f"slowest median: {1000 * worst:.1f} ms (target < 300 ms): {'met' if worst < 0.3 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
