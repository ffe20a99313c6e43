"""Overhead of the sync shim.

1. An uncontended pthread_mutex_lock/unlock pair, with and without the shim preloaded, in the
   same run (corecast-shim-bench lockpair). Target: at most 15 ns more per pair with the shim.
2. A program that uses no synchronisation at all (corecast-shim-bench compute), with and
   without the shim: it must be unaffected (ratio ~1).
3. The slow path (corecast-shim-bench slowpath): a read lock on a rwlock the thread holds for
   writing fails its try, so the shim times the real call (two clock reads and, since issue 29,
   the idle-core accounting), which returns EDEADLK at once without a system call: the slow
   path's own cost per call, with and without the shim (no target: the blocking call it wraps
   on a real wait costs microseconds).

Each configuration is measured in alternation ROUNDS times; the figures are the medians of
the per-round best-of-TRIALS values. Usage: python bench/shim_overhead.py [--rounds N]
[--compare-lib OLD.so]: with --compare-lib, another build of the shim (say the previous commit's,
built with the same flags) is measured in the same alternation, so a change to the shim is
judged against the code it replaces on the same machine at the same time.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.collect import shim  # noqa: E402
from corecast.native import native_path  # noqa: E402

TARGET_NS = 15.0


def run(mode: str, n: int, trials: int, preload: bool | str, report_dir: str) -> float:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop(shim.ENV_REPORT, None)
    if preload:
        env.update(shim.shim_env(report_dir, env))
        if isinstance(preload, str):
            env["LD_PRELOAD"] = preload
    out = subprocess.run([str(native_path("corecast-shim-bench")), mode, str(n), str(trials)], env=env,
                         capture_output=True, text=True, check=True).stdout
    vals = dict(line.split() for line in out.splitlines())
    return float(vals["best_ns"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--pairs", type=int, default=5_000_000)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--compare-lib", default=None, metavar="SO", help="another shim build, measured alongside")
    a = ap.parse_args()
    _machine.header("sync shim overhead (bench/shim_overhead.py)")
    results: dict[tuple[str, bool | str], list[float]] = {}
    configs: list[bool | str] = [False, True] + ([a.compare_lib] if a.compare_lib else [])
    with tempfile.TemporaryDirectory() as d:
        for _ in range(a.rounds):
            for mode, n in (("lockpair", a.pairs), ("compute", a.pairs), ("slowpath", a.pairs // 5)):
                for pre in configs:
                    results.setdefault((mode, pre), []).append(run(mode, n, a.trials, pre, d))
    med = {k: statistics.median(v) for k, v in results.items()}
    base, with_shim = med[("lockpair", False)], med[("lockpair", True)]
    extra = with_shim - base
    print(f"uncontended lock/unlock pair: {base:.2f} ns without the shim, {with_shim:.2f} ns with it: "
          f"+{extra:.2f} ns per pair (target <= {TARGET_NS:g} ns), ratio {with_shim / base:.2f}")
    cb, cs = med[("compute", False)], med[("compute", True)]
    print(f"no synchronisation at all: {cb:.3f} ns/iteration without, {cs:.3f} with: ratio {cs / cb:.3f}")
    sb, ss = med[("slowpath", False)], med[("slowpath", True)]
    print(f"slow path (a failed try, then a real call that returns at once): {sb:.1f} ns without the shim, {ss:.1f} ns with "
          f"it: +{ss - sb:.1f} ns per wait")
    if a.compare_lib:
        so = med[("slowpath", a.compare_lib)]
        print(f"compared build, slow path: {so:.1f} ns (+{so - sb:.1f} ns); this build {ss - so:+.1f} ns against it")
        old = med[("lockpair", a.compare_lib)]
        print(f"compared build {a.compare_lib}: {old:.2f} ns per pair (+{old - base:.2f} ns); this build "
              f"{with_shim - old:+.2f} ns against it")
    print(f"rounds {a.rounds}, {a.pairs} pairs per trial, best of {a.trials} trials per round, median over rounds")
    ok = extra <= TARGET_NS
    print("PASS" if ok else "FAIL", f"lock/unlock overhead {extra:.2f} ns vs target {TARGET_NS:g} ns")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
