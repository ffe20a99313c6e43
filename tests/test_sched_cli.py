"""`corecast sched` from the command line: the hand-computed case through --json, outputs, and
every user mistake in one line with exit status 2."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

MACHINE = """\
name = "1b1s"
[[core_type]]
name = "big"
count = 1
speed = 1.0
active_w = 20.0
idle_w = 5.0
[[core_type]]
name = "small"
count = 1
speed = 0.3333333333333333
active_w = 4.0
idle_w = 1.0
"""

WORKLOAD = """\
name = "two"
machine = "1b1s.toml"
[rules]
runs = 1
restart = false
[[app]]
name = "A"
work_s = 10.0
sf = 3.0
[[app]]
name = "B"
work_s = 10.0
sf = 1.2
"""


@pytest.fixture
def sched_files(tmp_path):
    (tmp_path / "1b1s.toml").write_text(MACHINE)
    (tmp_path / "two.toml").write_text(WORKLOAD)
    return tmp_path


def test_sim_json_equals_the_hand_computation(cli, sched_files):
    r = cli("sched", "sim", sched_files / "two.toml", "--machine", sched_files / "1b1s.toml", "--policy", "hsp",
            "--migration-cost", "0", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    m = doc["results"][0]
    ct_b = 10.0 + (10.0 - 10.0 / 1.2)
    assert [a["completion_time_s"] for a in m["apps"]] == pytest.approx([10.0, ct_b])
    assert m["asp"] == pytest.approx((30.0 / 10.0 - 1) + (12.0 / ct_b - 1))
    assert m["unfairness"] == pytest.approx(ct_b / 10.0)
    energy = 10.0 * 24.0 + (ct_b - 10.0) * 21.0
    assert m["energy_j"] == pytest.approx(energy)
    assert m["edp_js"] == pytest.approx(energy * ct_b)


def test_sim_table_and_plot(cli, sched_files, tmp_path):
    out = tmp_path / "bars.png"
    r = cli("sched", "sim", "pmctrack-mix", "--policy", "hsp,rr,acfs", "--runs", "1", "--plot", out)
    assert r.code == 0, r.err
    assert "Slowdown" in r.out and "ACFS" in r.out and "unfairness" in r.out
    assert out.stat().st_size > 10_000


def test_lists(cli):
    r = cli("sched", "machines")
    assert r.code == 0 and "2b-10s" in r.out and "2b-2s" in r.out
    r = cli("sched", "machines", "2b-2s")
    assert r.code == 0 and "Xeon" in r.out
    r = cli("sched", "workloads")
    assert r.code == 0 and "pmctrack-mix" in r.out
    r = cli("sched", "policies", "--json")
    assert set(r.json()) >= {"hsp", "rr", "adwrr", "eqp", "acfs", "energy", "cfs"}


def test_sfmodel_fit_then_simulate_with_the_model(cli, tmp_path):
    import numpy as np
    rng = np.random.default_rng(1)
    lines = ["app,window,sf,big_ipc,big_llc_mpki,small_ipc,small_llc_mpki"]
    for a in range(5):
        for w in range(30):
            ipc, mp = rng.uniform(0.3, 2.5), rng.uniform(0, 30)
            sf = 0.6 + 0.9 * ipc - 0.03 * mp
            lines.append(f"app{a},{w},{sf},{ipc},{mp},{ipc / sf},{mp}")
    (tmp_path / "w.csv").write_text("\n".join(lines) + "\n")
    r = cli("sched", "sfmodel", "fit", tmp_path / "w.csv", "-o", tmp_path / "m.json")
    assert r.code == 0, r.err
    assert "held-out" in r.out
    model = json.loads((tmp_path / "m.json").read_text())
    assert set(model["big"]["coef"]) == {"ipc", "llc_mpki"}
    wl = tmp_path / "wl.toml"
    wl.write_text('machine = "2b-2s"\n[[app]]\nname = "a"\nwork_s = 5\nsf = 2\n'
                  'metrics.big = { ipc = 2.0, llc_mpki = 1.0 }\nmetrics.small = { ipc = 1.0, llc_mpki = 1.0 }\n')
    r = cli("sched", "sim", wl, "--policy", "hsp", "--sf-source", "model", "--sf-model", tmp_path / "m.json", "--json")
    assert r.code == 0, r.err
    assert r.json()["results"][0]["sf_source"] == "model"


@pytest.mark.slow
def test_paper_figure_8(cli, tmp_path):
    r = cli("sched", "paper", "--figure", "8", "--json", "--plot", tmp_path / "f8.png")
    assert r.code == 0, r.err
    e = r.json()["experiments"][0]
    assert e["figure"] == "Figure 8" and len(e["workloads"]) == 9
    f = {x["statement"]: x for x in e["findings"]}
    assert f["ACFS's average unfairness is below EQP's"]["paper"] == "-13%"
    assert (tmp_path / "f8.png").exists()


def _many_threads(d: Path) -> Path:
    p = d / "many.toml"
    p.write_text('machine = "2b-2s"\n[[app]]\nname = "huge"\nthreads = 2000\nwork_s = 10\n')
    return p


def _neg(d: Path) -> Path:
    p = d / "neg.toml"
    p.write_text('name = "neg"\n[[core_type]]\nname = "big"\ncount = 1\nspeed = -2.0\n')
    return p


CASES = [
    (["sched", "sim", "pmctrack-mix", "--policy", "fastest"], "unknown policy 'fastest'"),
    (["sched", "sim", "{many}"], "no policy can place more than 256 per core"),
    (["sched", "sim", "pmctrack-mix", "--machine", "{neg}"], "core_type[0].speed: -2.0 must be positive"),
    (["sched", "sim", "nope"], "unknown workload 'nope'"),
    (["sched", "sim", "pmctrack-mix", "--quantum", "0"], "argument --quantum: '0' must be more than 0"),
    (["sched", "sim", "pmctrack-mix", "--sf-source", "model"], "needs --sf-model"),
    (["sched", "sim", "pmctrack-mix", "--plot", "x.txt"], "cannot tell the plot format"),
    (["sched", "sim", "pmctrack-mix", "--policy", "acfs", "--period", "1s"], "has no period of its own"),
    (["sched", "run", "--policy", "rr", "--big", "0-x", "--small", "1", "--", "true"], "'0-x' is not a CPU number or range"),
    (["sched", "run", "--policy", "rr", "--big", "0", "--small", "0", "--", "true"], "share CPUs"),
    (["sched", "run", "--policy", "rr", "--big", "0", "--", "true"], "--big and --small go together"),
    (["sched", "run", "--policy", "nope", "--", "true"], "unknown policy 'nope'"),
    (["sched", "run", "--policy", "rr", "--sf", "2,x", "--", "a", "b"], "is not a number"),
    (["sched", "run", "--policy", "rr"], "no programs"),
    (["sched", "sfmodel", "fit", "/nonexistent.csv"], "no such file"),
    (["sched", "paper", "--policies", "hsp,zz"], "unknown policy 'zz'"),
    (["sched", "machines", "nope"], "unknown machine 'nope'"),
]


@pytest.mark.parametrize("args,text", CASES, ids=[" ".join(c[0][:3]) + " " + c[1][:24] for c in CASES])
def test_mistakes_are_one_line(cli, tmp_path, args, text):
    subst = {"{many}": str(_many_threads(tmp_path)), "{neg}": str(_neg(tmp_path))}
    r = cli(*[subst.get(a, a) for a in args])
    assert r.code == 2, (r.out, r.err)
    lines = [line for line in r.err.splitlines() if line.strip()]
    assert len(lines) == 1, r.err
    assert text in lines[0]
    assert "Traceback" not in r.err


def test_run_unreadable_cpu_list_from_sysfs(tmp_path):
    from corecast.errors import UserError
    from corecast.sched.enforce.hybrid import detect
    d = tmp_path / "sys/devices/system/cpu"
    d.mkdir(parents=True)
    (d / "online").write_text("0-3,zz\n")
    with pytest.raises(UserError, match="'zz' is not a CPU number"):
        detect(tmp_path)


@pytest.mark.skipif(os.geteuid() != 0 or len(os.sched_getaffinity(0)) < 2, reason="needs root and two CPUs")
def test_run_says_it_is_emulated(cli):
    cpus = sorted(os.sched_getaffinity(0))
    r = cli("sched", "run", "--policy", "hsp", "--big", str(cpus[0]), "--small", str(cpus[1]), "--no-alone",
            "--quantum", "20ms", "--json", "--", "true", "sleep 0.2")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["emulation"].startswith("EMULATED AMP")
    assert [p["exit_status"] for p in doc["programs"]] == [0, 0]
