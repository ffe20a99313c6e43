"""The ground-truth kit's evaluation: every campaign of a kit's OUTDIR fitted on its core counts
up to 2 (what a 2-core machine measures: auto's two-point prediction) and up to 4, and predicted
at the larger ones (to 16 on a 16-core machine), by each method, with `corecast evaluate`; a
table per split of the absolute % errors (MAPE over the predicted counts) and the 80% band's
coverage per program and method, and the median per method.

    python3 bench/groundtruth/evaluate.py OUTDIR [--train-max-cores 2,4] [--methods mva,estima,timex,usl,auto]

Writes OUTDIR/evaluate.json (one document per split) and OUTDIR/evaluate.txt. corecast is the kit's (OUTDIR/corecast),
or the one this Python imports when the kit's is not there.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

METHODS = "mva,estima,timex,usl,auto"


def evaluate(out: Path, train_max: int, methods: str) -> dict[str, Any]:
    env = dict(os.environ)
    site = out / "corecast"
    if (site / "corecast").is_dir():
        env["PYTHONPATH"] = str(site) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    files = sorted(p for p in (out / "campaigns").iterdir() if p.suffix in (".db", ".json"))
    rows = []
    for f in files:
        p = subprocess.run([sys.executable, "-m", "corecast", "evaluate", str(f), "--train-max-cores", str(train_max),
                            "--methods", methods, "--json"], capture_output=True, text=True, env=env)
        row: dict[str, Any] = {"program": f.stem}
        if p.returncode != 0:
            row["error"] = (p.stderr.strip().splitlines() or ["?"])[-1]
        else:
            doc = json.loads(p.stdout)
            row["train_cores"], row["test_cores"] = doc["train_cores"], doc["test_cores"]
            row["methods"] = {m["method"]: {"mape": m.get("mape"), "max_error": m.get("max_error"),
                                            "coverage": m.get("coverage"), "model": m.get("model"),
                                            "error": m.get("error")} for m in doc["methods"]}
        rows.append(row)
    names = methods.split(",")
    med, cov = {}, {}
    for m in names:
        got = [r["methods"][m] for r in rows if r.get("methods", {}).get(m, {}).get("mape") is not None]
        med[m] = statistics.median(x["mape"] for x in got) if got else None
        # the band's coverage over every held-out point of every program (each program's share
        # weighted by its number of points)
        pts = [(x["coverage"], len(r["test_cores"])) for r in rows
               if (x := r.get("methods", {}).get(m, {})).get("coverage") is not None]
        cov[m] = sum(c * n for c, n in pts) / sum(n for _, n in pts) if pts else None
    return {"train_max_cores": train_max, "methods": names, "programs": rows, "median_mape": med,
            "band_coverage": cov}


def text(doc: dict[str, Any]) -> str:
    names = doc["methods"]
    head = f"{'program':<14}" + "".join(f"{m:>10}" for m in names) + "   predicted cores"
    out = [f"fitted on cores <= {doc['train_max_cores']}; mean absolute % error at the larger counts", head,
           "-" * len(head)]
    for r in doc["programs"]:
        if "error" in r:
            out.append(f"{r['program']:<14}  could not evaluate: {r['error']}")
            continue
        cells = []
        for m in names:
            x = r["methods"].get(m, {})
            cells.append(f"{x['mape']:>9.1f}%" if x.get("mape") is not None else f"{'n/a':>10}")
        out.append(f"{r['program']:<14}" + "".join(cells) + "   " + ",".join(f"{c:g}" for c in r["test_cores"]))
    out.append(f"{'median':<14}" + "".join(f"{doc['median_mape'][m]:>9.1f}%" if doc["median_mape"][m] is not None
                                           else f"{'n/a':>10}" for m in names))
    out.append(f"{'80% band':<14}" + "".join(f"{100 * doc['band_coverage'][m]:>9.0f}%"
                                             if doc["band_coverage"].get(m) is not None else f"{'n/a':>10}"
                                             for m in names) + "   of the held-out points inside the band")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--train-max-cores", default="2,4", help="splits: fit on the counts up to each (default 2,4)")
    ap.add_argument("--methods", default=METHODS)
    a = ap.parse_args(argv)
    if not (a.out / "campaigns").is_dir():
        print(f"evaluate: {a.out} has no campaigns/ folder (run bench/groundtruth/run.sh {a.out} first)",
              file=sys.stderr)
        return 2
    docs = [evaluate(a.out, int(k), a.methods) for k in a.train_max_cores.split(",")]
    (a.out / "evaluate.json").write_text(json.dumps(docs, indent=1) + "\n")
    t = "\n".join(text(d) for d in docs)
    (a.out / "evaluate.txt").write_text(t)
    print(t, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
