"""How long the corpus scorecard takes: `corecast evaluate --corpus data/corpus
--leave-one-source-out` (and `--target-machine source`), as the command runs it, with --jobs
set to the CPUs this process may use. Target (issue 23): under 2 minutes on the project's
2-core machine. Prints, per run, the wall time, the CPU time of this process and its workers
together (what a busier machine stretches, not what it costs), and the stages' times.

    .venv-bench/bin/python bench/loso_speed.py [--target-only | --plain-only] [--jobs N]
"""
from __future__ import annotations

import os

for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = "1"

import resource  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.model import corpus, extrap, scorecard  # noqa: E402
from corecast.model.trials import default_jobs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def one(series: list[corpus.Series], target: bool, jobs: int) -> float:
    stages: dict[str, float] = {}
    t0, c0 = time.monotonic(), cpu()

    def progress(what: str, done: int, total: int) -> None:
        if done == total:
            stages[what] = time.monotonic() - t0

    ev = scorecard.evaluate_corpus(series, train_frac=0.25, target=target, leave_one_source_out=True,
                                   progress=progress, jobs=jobs)
    wall, used = time.monotonic() - t0, cpu() - c0
    w, n = ev.wins("auto", "usl")
    print(f"{'with the machines' if target else 'without the machines':22s}: {wall:6.1f} s wall, {used:6.1f} s CPU "
          f"({jobs} processes); stages done at " + ", ".join(f"{k} {v:.1f} s" for k, v in stages.items()) +
          f"; methods {', '.join(ev.methods)}; auto below the USL in {w} of {n} sources")
    return wall


def main() -> int:
    warnings.simplefilter("ignore")
    jobs = int(sys.argv[sys.argv.index("--jobs") + 1]) if "--jobs" in sys.argv else default_jobs()
    _machine.header("loso_speed: evaluate --corpus data/corpus --leave-one-source-out, timed")
    series = corpus.load_corpus(ROOT / "data" / "corpus")
    print(f"corpus: {len(series)} series from {len({s.source for s in series})} sources; Extra-P "
          f"{'installed (scored too)' if extrap.available() else 'not installed'}")
    modes = [False, True]
    if "--target-only" in sys.argv:
        modes = [True]
    if "--plain-only" in sys.argv:
        modes = [False]
    worst = max(one(series, t, jobs) for t in modes)
    print(f"slowest run {worst:.1f} s: {'under' if worst < 120 else 'NOT under'} the 2-minute target")
    return 0


if __name__ == "__main__":
    sys.exit(main())
