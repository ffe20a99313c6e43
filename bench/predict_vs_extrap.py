"""corecast's predictors against Extra-P (PyPI `extrap`) on the same train/test splits.

Datasets, in two groups reported apart (the headline is on the real ones):

- real: published measurements (data/usl/ raytracer, specsdm91, clients_without_n1;
  data/cisco/; data/postgres91/; data/wavetrisk/, four series; see each README);
- synthetic: data/usl/synthetic.csv (generated from the USL) and programs with known laws
  from corecast.model.synth (with stall categories).

For every dataset and every split "fit on the first k core counts, predict the rest" (k from
half to all but one, at least 4), each method is fitted on the training rows and predicts the
held-out core counts in the dataset's input metric (time_s, else throughput). Extra-P models
the same metric with its default single-parameter modeler (PMNF hypotheses, all repetitions
given); its hypotheses (n^i log^j n, i >= 0) model growing costs, so it is given the throughput
(1/time where the data have times), its favourable side.

Prints the MAPE per split and method; per group the median and mean MAPE over splits, the
median of the per-dataset medians (every dataset weighing the same), the measured coverage of
the 80% bands, and by how much corecast's `auto` beats Extra-P's median error. What `auto`
learned from the corpus is scored honestly, source by source, in bench/cross_machine.py.

    make bench        # the benchmarks, in .venv-bench (Extra-P needs numpy < 2)
"""
from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _machine  # noqa: E402

from corecast.dataset import Dataset, load  # noqa: E402
from corecast.model import predictors, synth  # noqa: E402
from corecast.model.evaluate import evaluate_predictor  # noqa: E402
from corecast.model.extrap import ExtraPFit  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
METHODS = ["auto", "estima", "timex", "usl", "amdahl", "power", "pmnf"]
REAL = ["usl/raytracer", "usl/specsdm91", "usl/clients_without_n1", "cisco/cisco", "postgres91/postgres91",
        "wavetrisk/niagara_2560", "wavetrisk/niagara_640", "wavetrisk/bbserv_2560", "wavetrisk/bbserv_640"]


def datasets() -> list[tuple[str, str, Dataset]]:
    """(group, name, dataset)."""
    out = [("real", name, load(str(ROOT / "data" / f"{name}.csv"))) for name in REAL]
    out.append(("synthetic", "usl/synthetic", load(str(ROOT / "data" / "usl" / "synthetic.csv"))))
    for law in synth.LAWS:
        for seed in (0, 1):
            ds, _, _ = synth.scaling_dataset(law, seed=seed, cores=list(range(1, 13)) + [16, 20, 24, 32, 48])
            out.append(("synthetic", f"synth/{law}#{seed}", ds))
    return out


def splits(ds: Dataset) -> list[float]:
    c = np.unique(ds.cores)
    m = len(c)
    ks = range(max(4, math.ceil(m / 2)), m)
    return [float(c[k - 1]) for k in ks]


def _fmt(v: float, w: int = 8, d: int = 1) -> str:
    return f"{v:{w}.{d}f}" if math.isfinite(v) else f"{'-':>{w}s}"


def main() -> int:
    _machine.header("predict_vs_extrap: corecast methods and Extra-P, MAPE % on held-out core counts")
    try:
        import extrap  # noqa: F401
    except ImportError:
        print("extrap is not installed: pip install -e '.[bench]'")
        return 1
    cols = ["extrap"] + METHODS
    print(f"{'dataset':26s} {'fit on ≤':>8s} {'test':>5s} " + " ".join(f"{c:>8s}" for c in cols))
    rows: list[tuple[str, str, float, dict[str, float]]] = []
    inside: dict[tuple[str, str], list[bool]] = {}
    for group, name, ds in datasets():
        for K in splits(ds):
            row: dict[str, float] = {}
            fits = {"extrap": ExtraPFit}
            for m in METHODS:
                fits[m] = (lambda d, m=m: predictors.fit(m, d, calibrate=True))
            for m, fn in fits.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ev = evaluate_predictor(ds, K, m, fn)
                row[m] = ev.mape if ev.ok else math.nan
                if ev.ok:
                    inside.setdefault((group, m), []).extend(bool(p.inside) for p in ev.points
                                                             if p.inside is not None)
            ntest = int((np.unique(ds.cores) > K).sum())
            print(f"{name:26s} {K:8g} {ntest:5d} " + " ".join(_fmt(row[c]) for c in cols))
            rows.append((group, name, K, row))

    status = 0
    for group in ("real", "synthetic"):
        grows = [r for r in rows if r[0] == group]
        names = list(dict.fromkeys(r[1] for r in grows))
        print()
        print(f"== {group} datasets: {len(names)} datasets, {len(grows)} splits ==")
        vals = {c: [r[3][c] for r in grows if math.isfinite(r[3][c])] for c in cols}
        print(f"{'':40s} " + " ".join(f"{c:>8s}" for c in cols))
        print(f"{'median MAPE % (over splits)':40s} " + " ".join(
            _fmt(float(np.median(vals[c])) if vals[c] else math.nan) for c in cols))
        print(f"{'mean MAPE %':40s} " + " ".join(_fmt(float(np.mean(vals[c])) if vals[c] else math.nan) for c in cols))
        per_ds = {c: [float(np.median([r[3][c] for r in grows if r[1] == nm and math.isfinite(r[3][c])]))
                      for nm in names if any(r[1] == nm and math.isfinite(r[3][c]) for r in grows)] for c in cols}
        print(f"{'median of per-dataset medians %':40s} " + " ".join(
            _fmt(float(np.median(per_ds[c])) if per_ds[c] else math.nan) for c in cols))
        print(f"{'splits':40s} " + " ".join(f"{len(vals[c]):8d}" for c in cols))
        print(f"{'80% band coverage (measured)':40s} " + " ".join(
            _fmt(float(np.mean(inside[(group, c)])), 8, 2) if inside.get((group, c)) else f"{'-':>8s}" for c in cols))
        print(f"{'  points with a band':40s} " + " ".join(f"{len(inside.get((group, c), [])):8d}" for c in cols))
        print("per-dataset median MAPE %:")
        for nm in names:
            print(f"  {nm:38s} " + " ".join(
                _fmt(float(np.median(v)) if (v := [r[3][c] for r in grows if r[1] == nm and math.isfinite(r[3][c])])
                     else math.nan) for c in cols))
        paired = [(r[3]["extrap"], r[3]["auto"]) for r in grows
                  if math.isfinite(r[3]["extrap"]) and math.isfinite(r[3]["auto"])]
        ex = np.array([p[0] for p in paired])
        au = np.array([p[1] for p in paired])
        med_x, med_a = float(np.median(ex)), float(np.median(au))
        wins = int(np.sum(au < ex))
        print(f"{group}: on the {len(paired)} splits both ran: Extra-P median MAPE {med_x:.2f}%, corecast auto "
              f"{med_a:.2f}%: auto's median error is {med_x / med_a:.2f}x smaller ({med_x - med_a:.2f} points); "
              f"auto is more accurate on {wins} of {len(paired)} splits")
        if group == "real" and not med_a < med_x:
            status = 2

    return status


if __name__ == "__main__":
    sys.exit(main())
