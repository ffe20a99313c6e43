"""Cross-machine prediction on the corpus of real many-core curves (issue 10), scored honestly.

1. Leave-one-source-out: for every source of data/corpus, auto's priors are learned from the
   other sources only (corecast.model.learn), then every series of the source is fitted on the
   cores up to a quarter of its largest count and predicted beyond. Per source: the median over
   its series of each series' median absolute % error, for auto, the USL, timex and Extra-P
   (where installed: `make bench` runs this in .venv-bench, which has it), and the coverage of
   the 80% bands (auto's: the conformal band learned from the other sources' held-out scores,
   nested). Once without the machines, once with each source's machine and placement given
   (`--target-machine source`).
2. The 4-socket SMT hash-map series (conc-map-bench, 4 x 22-core Xeon E7-8880 v4, 176
   threads) fitted on one socket (<= 22 threads) and predicted to 176 threads: auto with the
   target machine, with priors learned without that source, against a plain USL fit.

    .venv-bench/bin/python bench/cross_machine.py [--quick]     (--quick: part 2 only)
"""
from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.model import corpus, extrap, learn, predictors, scorecard  # noqa: E402
from corecast.model.series import convert  # noqa: E402
from corecast.model.topo import fit_for_target  # noqa: E402
from corecast.model.trials import default_jobs  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def table(ev: scorecard.CorpusEvaluation) -> None:
    ms = ev.methods
    print(f"{'source':20s} {'series':>6s} " + " ".join(f"{m:>15s}" for m in ms))
    for s in ev.sources:
        cells = []
        for m in ms:
            if m not in s.median_error:
                cells.append(f"{'failed':>15s}")
                continue
            c = s.coverage.get(m)
            cells.append(f"{s.median_error[m]:7.1f}%" + (f" [{100 * c:3.0f}%]" if c is not None else "       "))
        print(f"{s.source:20s} {s.series:6d} " + " ".join(cells))
    o = ev.overall()
    print(f"{'median of sources':20s} {sum(s.series for s in ev.sources):6d} " +
          " ".join(f"{o[m]:7.1f}%       " if math.isfinite(o[m]) else f"{'-':>15s}" for m in ms))
    oc = ev.overall_common()
    n = len(ev.common_sources())
    print(f"{'median, common':20s} {n:6d} " +
          " ".join(f"{oc[m]:7.1f}%       " if math.isfinite(oc[m]) else f"{'-':>15s}" for m in ms) +
          "  (the sources where every method predicted)")
    gm = ev.geomean_common()
    print(f"{'geo. mean, common':20s} {n:6d} " +
          " ".join(f"{gm[m]:7.1f}%       " if math.isfinite(gm[m]) else f"{'-':>15s}" for m in ms))
    for peer in ("usl", "extrap"):
        if peer in ms:
            h = ev.head_to_head("auto", peer)
            print(f"auto below {peer} in {h['below']} of the {h['sources']} sources where both predicted "
                  f"(equal to the decimal in {h['equal']})")
    for m in ms:
        c = ev.coverage_summary(m)
        if c:
            print(f"{m}'s 80% band: {100 * c['points']:.1f}% of the held-out points, {100 * c['mean_over_sources']:.1f}% "
                  f"averaged over the sources; within 65-95% in {c['within_65_95']} of {c['sources']} sources, "
                  f"within 75-85% in {c['within_75_85']}")


def one_socket(series: list[corpus.Series]) -> None:
    cm = [s for s in series if s.source == "concmap"]
    others = [s for s in series if s.source != "concmap"]
    y = learn.smt_yield(others)[0]
    pri = learn.learn(learn.make_trials(others), learn.make_trials(others, target=True, smt_yield=y), others,
                      origin="learned without concmap")
    err: dict[str, list[float]] = {"auto + target": [], "usl": [], "usl + target": [], "auto": []}
    for s in cm:
        ds = s.dataset()
        tr = ds.select(ds.cores <= s.machine.cores_per_socket)
        te = s.cores > s.machine.cores_per_socket
        fits = {
            "auto + target": fit_for_target(lambda d: predictors.REGISTRY["auto"].fit(d, priors=pri), tr, s.machine,
                                            s.order, measured=s.machine, measured_order=s.order, priors=pri),
            "usl": predictors.fit("usl", tr),
            "usl + target": fit_for_target(lambda d: predictors.fit("usl", d), tr, s.machine, s.order,
                                           measured=s.machine, measured_order=s.order, priors=pri),
            "auto": predictors.REGISTRY["auto"].fit(tr, priors=pri),
        }
        for k, f in fits.items():
            p = convert(f.predict(s.cores[te]), "throughput").value
            err[k].append(float(np.median(np.abs(p / s.throughput[te] - 1))) * 100)
    med = {k: float(np.median(v)) for k, v in err.items()}
    print(f"conc-map-bench, {len(cm)} series fitted on one socket (<= 22 threads), predicted to 176 threads "
          f"(priors learned without this source: SMT yield {pri.smt_yield:.2f}):")
    for k, v in med.items():
        print(f"  {k:14s} median error {v:5.1f}%")
    gain = 1 - med["auto + target"] / med["usl"]
    print(f"  auto with the target machine is {100 * gain:.0f}% below the USL's median error "
          f"(target: at least a third): {'met' if gain >= 1 / 3 else 'NOT met'}")


def main() -> int:
    _machine.header("cross_machine: leave-one-source-out on data/corpus, with and without the machines")
    warnings.simplefilter("ignore")
    series = corpus.load_corpus(ROOT / "data" / "corpus")
    print(f"corpus: {len(series)} series from {len({s.source for s in series})} sources; Extra-P "
          f"{'installed' if extrap.available() else 'not installed (its column is left out)'}")
    if "--quick" not in sys.argv:
        for target in (False, True):
            print()
            print("== " + ("with each source's machine and placement (--target-machine source)" if target
                           else "without the machines") + ", leave-one-source-out ==")
            table(scorecard.evaluate_corpus(series, train_frac=0.25, target=target, leave_one_source_out=True,
                                            jobs=default_jobs()))
    print()
    one_socket(series)
    return 0


if __name__ == "__main__":
    sys.exit(main())
