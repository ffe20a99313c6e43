"""The miss-rate curve feeds the CPI stack (model/misscurve.py, model/throughput.py, model/cpi.py,
`corecast throughput --mrc`): each core count gets the last-level misses of its share of a shared
last-level cache; checked against the simulator run with a last level of that size."""
from __future__ import annotations

import json

import numpy as np
import pytest

from corecast.errors import UserError
from corecast.model import cpi, misscurve
from corecast.model.throughput import curve_bytes, last_level, sharers
from corecast.sim import synth
from corecast.sim.machine import load_machine
from corecast.sim.trace import Trace, write_trace

pytestmark = pytest.mark.slow        # real programs and long runs: `make test`, not `make check`

MACHINE = """
name = "three-level"
frequency_hz = 2.0e9
cores = 8
[penalties]
l2_hit = 12
l3_hit = 40
dram = 200
misaligned_load = 1
coherence_miss = 100
[[cache]]
level = 1
kind = "data"
size = "32KiB"
ways = 8
line_size = 64
[[cache]]
level = 1
kind = "instruction"
size = "32KiB"
ways = 8
line_size = 64
[[cache]]
level = 2
kind = "unified"
size = "512KiB"
ways = 8
line_size = 64
[[cache]]
level = 3
kind = "unified"
size = "8MiB"
ways = 16
line_size = 64
shared = true
"""


@pytest.fixture(scope="module")
def share_files(tmp_path_factory):
    """A machine with an 8 MiB L3 shared by all cores and its copy with a 2 MiB L3; a trace of
    random loads over 6 MiB (it fits the whole L3, not a quarter of it); the simulator's result
    on both machines (one core), and the exposed-miss curve."""
    from corecast.cli import main
    d = tmp_path_factory.mktemp("share")
    (d / "m8.toml").write_text(MACHINE)
    (d / "m2.toml").write_text(MACHINE.replace('"8MiB"', '"2MiB"').replace('"three-level"', '"three-level-2m"'))
    write_trace(d / "t.cctrace", Trace(synth.random_accesses(1_500_000, 6 << 20, seed=3), {}))
    for args in (["sim", d / "t.cctrace", "--machine", d / "m8.toml", "--no-tlb", "-o", d / "r8.json"],
                 ["sim", d / "t.cctrace", "--machine", d / "m2.toml", "--no-tlb", "-o", d / "r2.json"],
                 ["sim", d / "t.cctrace", "--machine", d / "m8.toml", "--no-tlb", "--cores", "2",
                  "-o", d / "r8x2.json"]):
        assert main([str(a) for a in args]) == 0
    return d


@pytest.fixture(scope="module")
def curve(share_files):
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-m", "corecast", "sim", "mrc", str(share_files / "t.cctrace"),
                          "--count", "exposed", "--json"], capture_output=True, text=True, check=True)
    (share_files / "c.json").write_text(out.stdout)
    return share_files / "c.json"


def _run(cli, share_files, curve, *extra):
    r = cli("throughput", "--sim", share_files / "r8.json", "--machine", share_files / "m8.toml", "--mrc", curve,
            "--baseline-cpi", "1", "--instructions", "1000", "--json", *extra)
    assert r.code == 0, r.err
    return r.json()


def test_a_quarter_of_the_cache_is_the_simulation_of_a_quarter(cli, share_files, curve):
    """On 4 cores each has 2 MiB of the 8 MiB L3: the stack's memory and L3-hit events there are
    the simulator's with a 2 MiB L3 (within 1%), and 1 core keeps the input's own stack."""
    out = _run(cli, share_files, curve, "--cores", "1,2,4,8")
    rows = {r["cores"]: r for r in out["cores"]}
    ev8 = json.loads((share_files / "r8.json").read_text())["events_per_kilo_instruction"]
    ev2 = json.loads((share_files / "r2.json").read_text())["events_per_kilo_instruction"]
    assert ev2["dram"] > 10 * ev8["dram"]                        # the quarter cache misses a lot more
    assert rows[1]["llc_share_bytes"] == 8 << 20 and rows[4]["llc_share_bytes"] == 2 << 20
    assert rows[1]["llc_events"] == pytest.approx({"dram": ev8["dram"], "l3_hit": ev8["l3_hit"]})
    assert rows[1]["stack_cpi"] == pytest.approx(out["stack"]["cpi"])
    for k in ("dram", "l3_hit"):
        assert rows[4]["llc_events"][k] == pytest.approx(ev2[k], rel=0.01), k
    # the L2 misses are what they were: the curve moves them between L3 and memory
    for c in (2, 4, 8):
        assert sum(rows[c]["llc_events"].values()) == pytest.approx(ev8["dram"] + ev8["l3_hit"])
    cpis = [rows[c]["stack_cpi"] for c in (1, 2, 4, 8)]
    assert cpis == sorted(cpis) and cpis[-1] > 2 * cpis[0]
    # the throughput of a core count is its own CPI's (no lock here): X = c f / (CPI I)
    for c in (1, 4):
        assert rows[c]["capacity"] == pytest.approx(c * 2e9 / (rows[c]["stack_cpi"] * 1000))
    assert out["llc"]["name"] == "L3" and out["llc"]["events_at_bytes"] == 8 << 20
    assert not any("counts the misses of every access" in n for n in out["notes"])


def test_a_chosen_cache_size(cli, share_files, curve):
    """--cache-size: the stack at that size for every core count; at 2 MiB it is the 4-core one."""
    out = _run(cli, share_files, curve, "--cores", "1,4", "--cache-size", "2MiB")
    per = _run(cli, share_files, curve, "--cores", "4")["cores"][0]
    rows = {r["cores"]: r for r in out["cores"]}
    assert rows[1]["stack_cpi"] == pytest.approx(per["stack_cpi"]) == pytest.approx(rows[4]["stack_cpi"])
    assert out["stack"]["cpi"] == pytest.approx(per["stack_cpi"])
    assert out["llc"]["cache_size"] == 2 << 20


def test_a_multicore_simulation_is_taken_at_its_own_share(cli, share_files, curve):
    """A result simulated on 2 cores saw 4 MiB each: at 2 cores the stack is its own."""
    r = cli("throughput", "--sim", share_files / "r8x2.json", "--machine", share_files / "m8.toml", "--mrc", curve,
            "--baseline-cpi", "1", "--instructions", "1000", "--cores", "2,4", "--json")
    assert r.code == 0, r.err
    out = r.json()
    ev = json.loads((share_files / "r8x2.json").read_text())["events_per_kilo_instruction"]
    assert out["llc"]["events_at_bytes"] == 4 << 20
    assert out["cores"][0]["llc_events"]["dram"] == pytest.approx(ev["dram"])
    assert out["cores"][1]["llc_events"]["dram"] > ev["dram"]


def test_the_table(cli, share_files, curve):
    r = cli("throughput", "--sim", share_files / "r8.json", "--machine", share_files / "m8.toml", "--mrc", curve,
            "--baseline-cpi", "1", "--instructions", "1000", "--cores", "1,4")
    assert r.code == 0, r.err
    assert "L3/core" in r.out and "2 MiB" in r.out and "stack CPI" in r.out and "miss-rate curve" in r.out


def test_shares_of_the_bundled_machines():
    zen4, penryn = load_machine("zen4-genoa"), load_machine("penryn-l5420")
    l3, l2 = last_level(zen4), last_level(penryn)
    assert (l3.name, l2.name) == ("L3", "L2")
    assert [sharers(l3, c) for c in (1, 4, 8, 16)] == [1, 4, 8, 8]       # 32 MiB per 8 cores
    assert [sharers(l2, c) for c in (1, 2, 4)] == [1, 2, 2]              # 6 MiB per core pair
    # Zen 4's L3 is a victim cache: it holds what L1D and L2 do not, so the curve is read at the
    # share plus those two
    assert curve_bytes(zen4, l3, 4 << 20, 8) == (4 << 20) + (1 << 20) + (32 << 10)
    assert curve_bytes(penryn, l2, 3 << 20, 2) == 3 << 20


def test_events_at_cache_size_by_hand():
    curve = misscurve.MissCurve((1 << 20, 2 << 20, 4 << 20), (10.0, 6.0, 1.0))
    assert curve.at(2 << 20) == 6.0 and curve.at(3 << 20) == pytest.approx(6.0 - 5.0 * (np.log2(3) - 1))
    assert curve.at(64 << 10) == 10.0 and curve.at(1 << 30) == 1.0        # the ends beyond
    ev = {"l2_hit": 50.0, "l3_hit": 8.0, "dram": 2.0, "branch_mispredict": 3.0}
    # from 4 MiB to 2 MiB: 5 more misses per 1K instructions go to memory instead of the L3
    out = misscurve.events_at_cache_size(ev, curve, 4 << 20, 2 << 20, "l3_hit")
    assert out == {"l2_hit": 50.0, "l3_hit": 3.0, "dram": 7.0, "branch_mispredict": 3.0}
    # memory accesses never exceed the misses of the level above (10 here), nor go below zero
    assert misscurve.events_at_cache_size(ev, curve, 4 << 20, 1 << 20, "l3_hit")["dram"] == 10.0
    assert misscurve.events_at_cache_size(ev, curve, 1 << 20, 4 << 20, "l3_hit")["dram"] == 0.0
    # a two-level machine's last-level hits are l2_hit; with no hit event only dram moves
    assert misscurve.events_at_cache_size({"l2_hit": 8.0, "dram": 2.0}, curve, 4 << 20, 2 << 20, "l2_hit") == \
        {"l2_hit": 3.0, "dram": 7.0}
    assert misscurve.events_at_cache_size({"dram": 2.0}, curve, 4 << 20, 2 << 20, None) == {"dram": 7.0}
    with pytest.raises(UserError, match="no 'dram' event"):
        misscurve.events_at_cache_size({"l2_hit": 1.0}, curve, 1, 2, "l3_hit")


def test_the_cpi_predictor_follows_the_share():
    """CPIModel's predictor face: a CPI per core count gives each its own throughput."""
    m = cpi.CPIModel(cpi=2.0, instructions=1000, frequency_hz=1e9, cpi_by_cores={4: 4.0})
    p = m.predict([1, 4, 8])
    assert list(p.value) == pytest.approx([1e9 / 2000, 4 * 1e9 / 4000, 8 * 1e9 / 2000])
    assert p.params["cpi_by_cores"] == {4: 4.0}


@pytest.mark.parametrize("extra, message", [
    (["--cache-size", "2MiB"], "--cache-size needs --mrc"),
    (["--mrc", "NOFILE"], "no such file"),
    (["--mrc", "BAD"], "not a miss-rate curve"),
    (["--mrc", "NOINSTR"], "has no instructions"),
    (["--mrc", "CURVE", "--cache-size", "lots"], "--cache-size"),
])
def test_mistakes(cli, share_files, curve, tmp_path, extra, message):
    (tmp_path / "bad.json").write_text('{"curves": []}')
    doc = json.loads(curve.read_text())
    doc["curves"][0]["instructions"] = 0
    (tmp_path / "noinstr.json").write_text(json.dumps(doc))
    subst = {"NOFILE": tmp_path / "none.json", "BAD": tmp_path / "bad.json",
             "NOINSTR": tmp_path / "noinstr.json", "CURVE": curve}
    r = cli("throughput", "--sim", share_files / "r8.json", "--machine", share_files / "m8.toml", "--baseline-cpi", "1",
            "--instructions", "1000", *[subst.get(a, a) for a in extra])
    assert r.code == 2 and message in r.err and "Traceback" not in r.err, r.err
