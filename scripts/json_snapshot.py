#!/usr/bin/env python3
"""Snapshot the CLI's machine-readable outputs on the bundled datasets, or compare two snapshots.

A restructure that claims "behaviour unchanged" is checked with it:

    python scripts/json_snapshot.py write BEFORE_DIR      # on the old tree
    python scripts/json_snapshot.py write AFTER_DIR       # on the new tree
    python scripts/json_snapshot.py compare BEFORE_DIR AFTER_DIR

Each command runs as `python -m corecast ...` in a child process (so PYTHONPATH picks the tree);
its exit status, stdout and stderr are stored. Besides the --json outputs, the tables of the
commands whose renderers live in report/ (throughput, sim, sim machines, info, events) are kept,
and the campaign summary `corecast measure` prints is rendered from a fixed campaign (its runs
have fixed numbers, unlike a real measurement). `compare` reports every command whose exit status
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
    (tmp / "w.toml").write_text("baseline_cpi = 0.9\ninstructions = 9200\nlock_fraction = 0.13\n"
                                "[events]\nl2_hit = 8.1\ndram = 1.1\ndtlb_miss = 0.2\n")
    for args in (["random", "-n", "20000", "--working-set", "4MiB", "-o", str(tmp / "random.trace")],
                 ["pingpong", "-n", "2000", "-o", str(tmp / "pingpong.trace")]):
        subprocess.run([sys.executable, "-m", "corecast", "sim", "gen", *args], capture_output=True, cwd=ROOT)
    r = subprocess.run([sys.executable, "-m", "corecast", "sim", str(tmp / "random.trace"), "--machine",
                        "atom-n540", "--json"], capture_output=True, text=True, cwd=ROOT)
    (tmp / "sim-result.json").write_text(r.stdout)


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
    # the tables whose renderers live in report/
    for rel in ("usl/specsdm91.csv", "cisco/cisco.csv"):
        name = rel.replace("/", "_").removesuffix(".csv")
        cmds[f"info-{name}"] = ["info", str(D / rel)]
        cmds[f"info-json-{name}"] = ["info", str(D / rel), "--json"]
    cmds["info-stalls"] = ["info", stalls]
    cmds["sim-table-penryn"] = ["sim", str(tmp / "random.trace"), "--machine", "penryn-l5420"]
    cmds["sim-table-pingpong"] = ["sim", str(tmp / "pingpong.trace"), "--machine", "zen4-genoa", "--cores", "2"]
    cmds["sim-machines-table"] = ["sim", "machines"]
    cmds["sim-machine-penryn"] = ["sim", "machines", "penryn-l5420"]
    cmds["sim-machine-penryn-json"] = ["sim", "machines", "penryn-l5420", "--json"]
    mpki = str(tmp / "w.toml")
    for fmt in ([], ["--json"]):
        tag = "-json" if fmt else ""
        cmds[f"throughput-mpki{tag}"] = ["throughput", "--machine", "penryn-l5420", "--mpki", mpki,
                                         "--cores", "1,2,4", "--measured", "1:128000,2:174000,4:232000", *fmt]
        cmds[f"throughput-closed{tag}"] = ["throughput", "--machine", "atom-n540", "--mpki", mpki,
                                           "--clients", "8", "--think-time", "50us", "--target", "500us",
                                           "--percentile", "99", *fmt]
        cmds[f"throughput-sim{tag}"] = ["throughput", "--sim", str(tmp / "sim-result.json"),
                                        "--baseline-cpi", "0.8", "--instructions", "5000", *fmt]
    cmds["events-translate"] = ["events", "--translate", "instr,cycles,pmc3=0x2e,umask3=0x41", "--cpu", "haswell"]
    cmds["events-translate-json"] = ["events", "--translate", "backend_stalls", "--cpu", "skylake",
                                     "--format", "json"]
    cmds["events-here"] = ["events"]
    cmds["events-here-json"] = ["events", "--format", "json"]
    cmds["campaign-summary"] = ["-c", CAMPAIGN_SUMMARY, str(tmp / "campaign.db")]
    # every bundled machine through the command that reads it (docs/machines.md)
    spec = str(D / "usl" / "specsdm91.csv")
    for m in TARGETS:
        cmds[f"predict-target-{m}"] = ["predict", spec, "--method", "usl", "--cores", "32,64,128,256",
                                       "--target-machine", m, "--placement", "spread", "--json"]
    cmds["predict-target-stalls"] = ["predict", stalls, "--method", "estima", "--cores", "32,64", "--clock", "2.0",
                                     "--target-machine", "xeon-e5-2660-2s", "--json"]
    cmds["evaluate-target"] = ["evaluate", spec, "--train-max-cores", "48", "--target-machine", "epyc-9654-2s",
                               "--json"]
    for m in ("atom-n540", "zen4-genoa"):
        cmds[f"sim-machine-{m}-json"] = ["sim", "machines", m, "--json"]
    cmds["throughput-zen4"] = ["throughput", "--machine", "zen4-genoa", "--mpki", mpki, "--cores", "1,8,16",
                               "--json"]
    cmds["sched-machines"] = ["sched", "machines", "--json"]
    cmds["sched-machines-table"] = ["sched", "machines"]
    for wl, m in (("pmctrack-mix", "2b-2s"), ("hp-vs-st", "2b-10s"), ("pmctrack-mix", "quad-hybrid")):
        cmds[f"sched-sim-{wl}-{m}"] = ["sched", "sim", wl, "--machine", m, "--policy", "hsp,rr,acfs,energy",
                                       "--json"]
    return cmds


#: The bundled targets of `predict --target-machine` (by name: the list is what a restructure
#: of the machine files must keep).
TARGETS = ("epyc-9654-2s", "opteron-6272-4s", "xeon-e5-2660-2s", "xeon-e5-2683v3-2s", "xeon-e7-4830v3-4s",
           "xeon-e7-8880v4-4s", "xeon-silver-4314-1s")


#: The summary `corecast measure` prints, rendered from a campaign with fixed numbers. (The
#: renderer moved from collect.runner to report.campaign; both places are tried.)
CAMPAIGN_SUMMARY = """
import sys
from rich.console import Console
from corecast import dataset, store
from corecast.dataset import ColumnInfo, Machine
try:
    from corecast.report.campaign import render_summary
except ImportError:
    from corecast.collect.runner import render_summary
path = sys.argv[1]
m = Machine(cpu_model="Test CPU", sockets=1, cores=4, threads_per_core=1, logical_cpus=4)
try:
    c = store.Campaign.create(path, command=["prog", "{cores}"], config={"reps": 2}, machine=m.to_dict())
except (AttributeError, TypeError):
    c = store.Campaign.create(path, command=["prog", "{cores}"], config={"reps": 2}, machine=m)
cols = [ColumnInfo("time_s", "time", "s", "wall"), ColumnInfo("throughput", "throughput", "1/s", "out"),
        ColumnInfo("rss_bytes", "memory", "bytes", "rusage"),
        ColumnInfo("lock_wait_cycles", "stall", "cycles", "shim")]
slot = 0
for rep in range(2):
    for n in (1, 2, 4):
        ok = not (n == 4 and rep == 1)
        c.record_run(store.RunRecord(slot=slot, cores=n, repetition=rep, warmup=False, cpus=list(range(n)),
                                     argv=["prog", str(n)], status="ok" if ok else "failed",
                                     exit_status=0 if ok else 3,
                                     values={"time_s": 2.0 / n + 0.01 * rep, "throughput": 100.0 * n ** 0.9,
                                             "rss_bytes": 2.0 ** 20 * (10 + n),
                                             "lock_wait_cycles": 1e6 * (n - 1) + rep}), cols)
        slot += 1
c.close()
try:
    ds = dataset.read_campaign(path)
except AttributeError:
    ds = store.load_dataset(path)
ds.path = "campaign.db"
render_summary(ds, Console(highlight=False, width=200))
"""


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "inputs"
    tmp.mkdir(exist_ok=True)
    make_inputs(tmp)
    for name, args in commands(tmp).items():
        argv = args if args[0] == "-c" else ["-m", "corecast", *args]
        r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=300)
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
