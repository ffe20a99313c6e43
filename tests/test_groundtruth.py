"""The ground-truth kit (bench/groundtruth) end to end at 1-2 cores, on a simulated bare machine:
a Python with NumPy and SciPy only (this environment's interpreter started with -S -s and
nothing but those two on its path: no rich, matplotlib, aiohttp, no corecast installed), gcc and
ninja, no meson, no pip. Its campaigns load in `predict`. And the evaluation script's table.

What this cannot simulate: the target's own Python 3.12 and its distribution's NumPy (another
BLAS), and 16 cores (the counts 4 to 16 and the 8-minute budget are only met on such a machine)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy
import pytest
import scipy

import fakes
from corecast import dataset
from corecast.model import predictors

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "bench" / "groundtruth"
NCPU = len(os.sched_getaffinity(0))
CORES = "1,2" if NCPU >= 2 else "1"

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("ninja") is None,
                                 reason="needs gcc and ninja")]


def bare_machine(tmp: Path) -> dict[str, str]:
    """PATH and PYTHONPATH of a bare machine: `python3` is this interpreter without its
    site-packages (-S -s), NumPy and SciPy alone on its path; the system's tools after it."""
    bin_ = tmp / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text(f"#!/bin/sh\nexec {sys.executable} -S -s \"$@\"\n")
    (bin_ / "python3").chmod(0o755)
    site = tmp / "site"
    site.mkdir()
    for mod in (numpy, scipy):
        where = Path(mod.__file__).resolve().parent
        for p in where.parent.iterdir():         # the package, its .libs, its dist-info
            if p.name.startswith((mod.__name__ + "-", mod.__name__ + ".", )) or p.name == mod.__name__:
                (site / p.name).symlink_to(p)
    tools = {Path(shutil.which(t)).parent for t in ("gcc", "ninja", "sort", "xz", "sh") if shutil.which(t)}
    path = os.pathsep.join([str(bin_), *sorted(str(t) for t in tools if ".venv" not in str(t)), "/usr/bin", "/bin"])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LD_PRELOAD", "VIRTUAL_ENV")}
    env.update(PATH=path, PYTHONPATH=str(site))
    return env


def test_the_kit_runs_on_a_bare_machine_and_its_campaigns_load_in_predict(tmp_path):
    env = bare_machine(tmp_path)
    # the simulation is bare: NumPy and SciPy import, rich, matplotlib and corecast do not
    probe = subprocess.run(["python3", "-c", "import numpy, scipy, importlib.util as u; "
                            "print([m for m in ('rich', 'matplotlib', 'aiohttp', 'corecast') if u.find_spec(m)])"],
                           env=env, capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "[]", probe.stdout
    out = tmp_path / "out"
    progs = "lockbench,sort,numpy-blas,ninja-build"
    p = subprocess.run([str(KIT / "run.sh"), str(out), "--quick", "--cores", CORES, "--reps", "1",
                        "--programs", progs], env=env, capture_output=True, text=True, timeout=1500)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    doc = json.loads((out / "summary.json").read_text())
    assert doc["environment"]["rich"] is False and any(f.startswith("rich not installed") for f in
                                                       doc["environment"]["fallbacks"])
    assert sorted(r["name"] for r in doc["programs"]) == sorted(progs.split(","))
    cores = [int(c) for c in CORES.split(",")]
    for r in doc["programs"]:
        if r.get("skipped"):
            assert r["name"] != "lockbench" and "not on this machine" in r["skipped"]
            continue
        assert r["exit_status"] == 0, r
        assert [s["cores"] for s in r["measure"]["summary"]] == cores
        chk = r["check"]["predict_auto"]
        assert "error" not in chk and chk["time_s"] > 0 and chk["cores"] == 2 * max(cores)
        # the campaign file loads here too, in the full environment, and predicts
        ds = dataset.load(out / r["campaign"])
        assert sorted(set(ds.cores.tolist())) == cores
        assert predictors.fit("auto", ds).predict([8]).value[0] > 0
    lb = next(r for r in doc["programs"] if r["name"] == "lockbench")
    assert lb["check"]["locks"][0]["call"] == "pthread_mutex_lock(&g_mutex)"
    assert lb["check"]["locks"][0]["site"].startswith("worker")
    assert "error" not in lb["check"]["predict_mva"]
    text = (out / "summary.txt").read_text()
    assert "lockbench" in text and "fallback: rich not installed" in text
    # corecast's terminal output without rich and matplotlib: plain tables, a report without a plot
    benv = dict(env, PYTHONPATH=env["PYTHONPATH"] + os.pathsep + str(out / "corecast"))
    db = str(out / lb["campaign"])

    def bare(*args):
        r = subprocess.run(["python3", "-m", "corecast", *args], env=benv, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0 and "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
        return r
    r = bare("predict", db, "--cores", "8,16", "--method", "mva")
    assert "cores" in r.stdout and "time_s" in r.stdout and "[bold]" not in r.stdout
    assert "pthread_mutex_lock(&g_mutex)" in r.stdout and "% at 16 (predicted)" in r.stdout
    r = bare("locks", db)
    assert "&g_mutex" in r.stdout and "wait @" in r.stdout
    r = bare("info", db)
    assert "side table locks" in r.stdout
    r = bare("predict", db, "--cores", "8", "--report", str(tmp_path / "r.html"))
    assert "matplotlib is not installed" in r.stderr and "<h2>Locks</h2>" in (tmp_path / "r.html").read_text()


def test_the_evaluation_table(tmp_path):
    """evaluate.py on a kit's folder: every campaign fitted on <= 2 and on <= 4 cores, predicted
    beyond, a column per method (mva where the campaign has demands), the median per method."""
    (tmp_path / "campaigns").mkdir()
    fakes.lock_demands(cores=(1, 2, 4, 6, 8, 12, 16)).to_json(tmp_path / "campaigns" / "lockish.json")
    fakes.amdahl_time(cores=(1, 2, 4, 6, 8, 12, 16)).to_json(tmp_path / "campaigns" / "amdahl.json")
    p = subprocess.run([sys.executable, str(KIT / "evaluate.py"), str(tmp_path)], capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    two, doc = json.loads((tmp_path / "evaluate.json").read_text())
    # fitted on 1-2 cores: auto's two-point prediction and mva; the others need three counts
    assert two["train_max_cores"] == 2
    by2 = {r["program"]: r for r in two["programs"]}
    assert by2["amdahl"]["test_cores"] == [4, 6, 8, 12, 16]
    assert by2["amdahl"]["methods"]["auto"]["mape"] is not None and by2["amdahl"]["methods"]["usl"]["mape"] is None
    by = {r["program"]: r for r in doc["programs"]}
    assert by["lockish"]["test_cores"] == [6, 8, 12, 16]
    assert 0 <= doc["band_coverage"]["auto"] <= 1
    assert set(by["lockish"]["methods"]) == {"mva", "estima", "timex", "usl", "auto"}
    assert by["lockish"]["methods"]["mva"]["mape"] < 5            # its demands are the truth here
    assert by["amdahl"]["methods"]["mva"]["mape"] is None            # no demands in a plain series
    assert by["amdahl"]["methods"]["usl"]["mape"] is not None        # its open band is JSON (null)
    assert "median" in p.stdout and "mva" in p.stdout.splitlines()[1]
    p = subprocess.run([sys.executable, str(KIT / "evaluate.py"), str(tmp_path / "nothing")], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "no campaigns/ folder" in p.stderr


def test_pack_runs_the_kit_and_brings_back_five_files(tmp_path):
    """bench/groundtruth/pack.sh, the kit in one command for a machine lent for minutes: the
    machine described, the kit and its evaluation run, five files back (the campaigns in the
    tarball), and no work folder left behind."""
    env = bare_machine(tmp_path)
    env["TMPDIR"] = str(tmp_path / "tmp")
    (tmp_path / "tmp").mkdir()
    res = tmp_path / "res"
    p = subprocess.run([str(KIT / "pack.sh"), str(res), "60", "--quick", "--cores", "1", "--reps", "1",
                        "--programs", "lockbench"], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert sorted(f.name for f in res.iterdir()) == ["console.log", "evaluate.txt", "groundtruth.tar.gz",
                                                      "kit.log", "summary.txt"]
    import tarfile
    with tarfile.open(res / "groundtruth.tar.gz") as tf:
        names = tf.getnames()
    assert "campaigns/lockbench.db" in names and "summary.json" in names
    log = (res / "console.log").read_text()
    assert "CPUs:" in log and "kit exit status 0" in log and "CPU affinity" in log
    assert list((tmp_path / "tmp").iterdir()) == []
