#!/usr/bin/env python3
"""Snapshot the CLI's machine-readable outputs on the bundled datasets, or compare two snapshots.

A restructure that claims "behaviour unchanged" is checked with it:

    python scripts/json_snapshot.py write BEFORE_DIR      # on the old tree
    python scripts/json_snapshot.py write AFTER_DIR       # on the new tree
    python scripts/json_snapshot.py compare BEFORE_DIR AFTER_DIR

Each command runs as `python -m corecast ...` in a child process (so PYTHONPATH picks the tree);
its exit status, stdout and stderr are stored. `compare` reports every command whose exit status
or stdout differs (JSON compared as data, floats to 1e-9 relative or 1e-12 absolute), and exits 1 if any does.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
D = ROOT / "data"

PREDICT_SETS = ["usl/specsdm91.csv", "usl/raytracer.csv", "usl/synthetic.csv", "cisco/cisco.csv",
                "postgres91/postgres91.csv", "wavetrisk/bbserv_640.csv"]


def make_inputs(tmp: Path) -> None:
    """A deterministic Dataset with stall categories, and two small generated traces."""
    rows = ["cores,time_s,lock_wait_cycles,runqueue_delay_cycles"]
    for n in (1, 2, 3, 4, 6, 8, 12, 16):
        work = 2.0e9 / n
        lock = 4.0e6 * (n - 1) ** 1.6
        rq = 1.0e6 * n
        rows.append(f"{n},{(work + lock + rq) / 2.0e9:.9g},{lock:.9g},{rq:.9g}")
    (tmp / "stalls.csv").write_text("\n".join(rows) + "\n")
    for args in (["random", "-n", "20000", "--working-set", "4MiB", "-o", str(tmp / "random.trace")],
                 ["pingpong", "-n", "2000", "-o", str(tmp / "pingpong.trace")]):
        subprocess.run([sys.executable, "-m", "corecast", "sim", "gen", *args], capture_output=True, cwd=ROOT)


def commands(tmp: Path) -> dict[str, list[str]]:
    cmds: dict[str, list[str]] = {}
    for rel in PREDICT_SETS:
        name = rel.replace("/", "_").removesuffix(".csv")
        f = str(D / rel)
        cmds[f"usl-{name}"] = ["usl", f, "--json", "--predict", "64,128"]
        for method in ("auto", "usl", "timex", "estima"):
            cmds[f"predict-{method}-{name}"] = ["predict", f, "--method", method, "--cores", "32,64,128",
                                                "--json"]
        cmds[f"evaluate-{name}"] = ["evaluate", f, "--train-max-cores", "8", "--json"]
        cmds[f"export-{name}"] = ["export", f, "--format", "json"]
    stalls = str(tmp / "stalls.csv")
    for method in ("auto", "estima", "timex"):
        cmds[f"predict-{method}-stalls"] = ["predict", stalls, "--method", method, "--cores", "32,64",
                                            "--clock", "2.0", "--json"]
    cmds["evaluate-stalls"] = ["evaluate", stalls, "--train-max-cores", "6", "--clock", "2.0", "--json"]
    cmds["sim-machines"] = ["sim", "machines", "--json"]
    for m in ("atom-n540", "penryn-l5420", "zen4-genoa"):
        cmds[f"sim-{m}"] = ["sim", str(tmp / "random.trace"), "--machine", m, "--json"]
    cmds["sim-pingpong"] = ["sim", str(tmp / "pingpong.trace"), "--machine", "penryn-l5420", "--cores", "2",
                            "--json"]
    cmds["events-list"] = ["events", "--cpu", "haswell"]
    return cmds


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "inputs"
    tmp.mkdir(exist_ok=True)
    make_inputs(tmp)
    for name, args in commands(tmp).items():
        r = subprocess.run([sys.executable, "-m", "corecast", *args], capture_output=True, text=True,
                           cwd=ROOT, timeout=300)
        (out / f"{name}.json").write_text(json.dumps(
            {"args": args, "code": r.returncode, "stdout": r.stdout, "stderr": r.stderr}, indent=1))
        print(f"{name}: exit {r.returncode}")


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return False
        if math.isnan(a) and math.isnan(b):
            return True
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def _parse(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def compare(before: Path, after: Path) -> int:
    bad = 0
    for f in sorted(before.glob("*.json")):
        g = after / f.name
        if not g.exists():
            print(f"{f.stem}: missing after")
            bad += 1
            continue
        a, b = json.loads(f.read_text()), json.loads(g.read_text())
        a["stdout"] = a["stdout"].replace(str(before), "DIR")
        b["stdout"] = b["stdout"].replace(str(after), "DIR")
        if a["code"] != b["code"]:
            print(f"{f.stem}: exit {a['code']} -> {b['code']}")
            bad += 1
        elif not _same(_parse(a["stdout"]), _parse(b["stdout"])):
            print(f"{f.stem}: stdout differs")
            bad += 1
    print(f"{bad} of {len(list(before.glob('*.json')))} outputs differ")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "write":
        write(Path(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
    else:
        sys.exit(__doc__)
