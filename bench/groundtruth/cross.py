"""Measured on one machine, predicted for another: the kit's campaigns from a small machine
(fitted on its counts, 1-2 cores on a 2-vCPU VM) predicted at the counts a many-core machine's
campaigns of the same programs measured, with that machine given (--target-machine), and scored
on the shape: time relative to each machine's own 1-core time (the two machines' cores differ in
speed; the shape is what corecast predicts from the scaling alone).

    python3 bench/groundtruth/cross.py HERE THERE [--target-machine SPEC] [--json]

HERE and THERE are kit folders (their campaigns/); the default pair is data/groundtruth/vm2
(measured on the 2-vCPU VM) and data/groundtruth (the 16-core machine), with the machine as its
lscpu states it: sockets=1,cores=16,smt=1.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from corecast.dataset import read_campaign

ROOT = Path(__file__).resolve().parent.parent.parent
SPEC = "sockets=1,cores=16,smt=1"


def medians(db: Path) -> dict[float, float]:
    """The median time at each count."""
    ag = read_campaign(db).aggregate("time_s")
    return {float(c): float(v) for c, v in zip(ag.cores, ag.value)}


def cross(here: Path, there: Path, spec: str | None) -> dict[str, Any]:
    rows = []
    for db in sorted((here / "campaigns").glob("*.db")):
        other = there / "campaigns" / db.name
        if not other.exists():
            continue
        h, t = medians(db), medians(other)
        counts = [c for c in t if c > max(h)]
        cmd = [sys.executable, "-m", "corecast", "predict", str(db), "--cores", ",".join(f"{c:g}" for c in counts),
               "--json"] + (["--target-machine", spec] if spec else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            rows.append({"program": db.stem, "error": (p.stderr.strip().splitlines() or ["?"])[-1]})
            continue
        d = json.loads(p.stdout)
        pts = []
        for pr, c in zip(d["predictions"], counts):
            shape_pred, shape_true = pr["time_s"] / h[1.0], t[c] / t[1.0]
            pts.append({"cores": c, "predicted": shape_pred, "measured": shape_true,
                        "inside": pr["low"] / h[1.0] <= shape_true <= pr["high"] / h[1.0],
                        "error_pct": 100 * abs(shape_pred / shape_true - 1)})
        rows.append({"program": db.stem, "model": d["model"], "t1_here": h[1.0], "t1_there": t[1.0], "points": pts,
                     "mape": statistics.mean(p["error_pct"] for p in pts)})
    ok = [r for r in rows if "mape" in r]
    inside = sum(p["inside"] for r in ok for p in r["points"])
    total = sum(len(r["points"]) for r in ok)
    return {"here": str(here), "there": str(there), "target_machine": spec, "programs": rows,
            "median_mape": statistics.median(r["mape"] for r in ok) if ok else None,
            "band_coverage": inside / total if total else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("here", nargs="?", type=Path, default=ROOT / "data" / "groundtruth" / "vm2")
    ap.add_argument("there", nargs="?", type=Path, default=ROOT / "data" / "groundtruth")
    ap.add_argument("--target-machine", default=SPEC, help=f"the other machine (default {SPEC}; 'none': not given)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    doc = cross(a.here, a.there, None if a.target_machine == "none" else a.target_machine)
    if a.json:
        print(json.dumps(doc, indent=1))
        return 0
    print(f"measured in {doc['here']}, predicted for {doc['there']} (--target-machine {doc['target_machine']}); "
          "shape: time / the same machine's 1-core time")
    for r in doc["programs"]:
        if "error" in r:
            print(f"{r['program']:<12} could not predict: {r['error']}")
            continue
        inside = sum(p["inside"] for p in r["points"])
        print(f"{r['program']:<12} {r['mape']:6.1f}%  band {inside}/{len(r['points'])}  1 core: {r['t1_here']:.3g} s here, "
              f"{r['t1_there']:.3g} s there  {r['model'][:70]}")
    print(f"median {doc['median_mape']:.1f}%, 80% band held {100 * doc['band_coverage']:.0f}% of the points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
