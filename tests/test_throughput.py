"""`corecast throughput`: the command end to end, through --mpki and --sim."""
from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from corecast.model.queueing import machine_repairman, max_arrival_rate

ROOT = Path(__file__).resolve().parent.parent
PAPER = tomllib.loads((ROOT / "data" / "hart2012" / "paper.toml").read_text())


def _paper_total(tmp_path: Path, machine: str) -> Path:
    """An --mpki file holding only the paper's total CPI (its Table 2/4 rows are not available,
    data/hart2012/README.md): the stack is one baseline row equal to the total."""
    cpi = next(m["cpi"] for m in PAPER["machine"] if m["name"] == machine)
    p = tmp_path / f"{machine}.toml"
    p.write_text(f"# the paper's total CPI only\nbaseline_cpi = {cpi}\n"
                 f"instructions = {PAPER['workload']['instructions_per_transaction']}\n")
    return p


def test_paper_through_the_command(cli, tmp_path):
    meas = {m["cores"]: m["throughput"] for m in PAPER["measured"] if m["machine"] == "penryn-l5420"}
    r = cli("throughput", "--machine", "penryn-l5420", "--mpki", _paper_total(tmp_path, "penryn-l5420"),
            "--instructions", "9200", "--lock-fraction", "0.13", "--cores", "1,2,4",
            "--measured", ",".join(f"{c}:{x}" for c, x in meas.items()), "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["frequency_hz"] == 2.5e9                     # from the bundled machine
    assert out["stack"]["cpi"] == pytest.approx(2.499)
    rows = {c["cores"]: c for c in out["cores"]}
    assert rows[1]["transaction_time_s"] == pytest.approx(9.1963e-6, rel=1e-4)
    assert rows[2]["lock_penalty"] == pytest.approx(0.13) and rows[4]["lock_penalty"] == pytest.approx(0.39)
    for c, err in ((1, -0.150), (2, 0.087), (4, 0.144)):
        assert rows[c]["measured"] == meas[c]
        assert rows[c]["error"] == pytest.approx(err, abs=1e-3)
        assert 0.08 <= abs(rows[c]["error"]) <= 0.17

    r = cli("throughput", "--machine", "atom-n540", "--mpki", _paper_total(tmp_path, "atom-n540"),
            "--cores", "1", "--measured", "1:51000", "--json")
    assert r.code == 0, r.err
    row = r.json()["cores"][0]
    assert row["transaction_time_s"] == pytest.approx(21.642e-6, rel=1e-4)
    assert row["capacity"] == pytest.approx(46_206, rel=1e-4)
    assert row["error"] == pytest.approx(-0.094, abs=1e-3)


def test_table_prints_the_stack_and_the_models(cli, tmp_path):
    f = tmp_path / "w.toml"
    f.write_text('baseline_cpi = 0.9\ninstructions = 9200\n[events]\nl2_hit = 20.0\ndram = 2.0\n'
                 'branch_mispredict = 6.0\n')
    r = cli("throughput", "--machine", "penryn-l5420", "--mpki", f, "--cores", "1,2",
            "--lock-fraction", "0.1", "--clients", "16", "--measured", "1:100000")
    assert r.code == 0, r.err
    # the stack: component, per 1K, penalty, cycles per 1K (20 x 15, 2 x 250, 6 x 16), total
    for text in ("baseline (issue)", "900.0", "L1 miss, L2 hit", "20.000", "300.0",
                 "last-level miss (DRAM)", "500.0", "branch mispredict", "96.0", "1,796.0",
                 "total (CPI 1.796)"):
        assert text in r.out, text
    # the formula-derived mispredict penalty says where it came from
    assert "branch_mispredict penalty 16 cycles" in r.out and "formula" in r.out
    for text in ("saturation", "M/M/1", "M/M/c", "closed N=16", "measured", "error"):
        assert text in r.out, text
    # saturation at 1 core: 2.5 GHz / (1.796 x 9200) = 151,302 RPS
    assert "151,302" in r.out


def test_json_models_agree_with_the_library(cli, tmp_path):
    f = tmp_path / "w.json"
    f.write_text(json.dumps({"baseline_cpi": 1.0, "events": {"dram": 1.0}}))
    r = cli("throughput", "--frequency", "2GHz", "--penalty", "dram=100", "--mpki", f,
            "--instructions", "10000", "--cores", "1,4", "--target", "50us", "--percentile", "99",
            "--clients", "8", "--think-time", "20us", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["machine"] is None and out["stack"]["cpi"] == pytest.approx(1.1)
    assert out["target"] == {"seconds": pytest.approx(50e-6), "statistic": "p99"}
    for row in out["cores"]:
        t = 1.1 * 10000 / 2e9
        assert row["transaction_time_s"] == pytest.approx(t)
        c = row["cores"]
        assert row["mmc"]["arrival_rate"] == pytest.approx(
            max_arrival_rate(1 / t, c, 50e-6, 0.99).arrival_rate, rel=1e-9)
        assert row["mm1"]["arrival_rate"] == pytest.approx(
            c * max_arrival_rate(1 / t, 1, 50e-6, 0.99).arrival_rate, rel=1e-9)
        ref = machine_repairman(8, 20e-6, t, c)
        assert row["closed"]["throughput"] == pytest.approx(ref.throughput, rel=1e-9)
        assert row["closed"]["response_time_s"] == pytest.approx(ref.response_time, rel=1e-9)
    assert out["stack"]["components"][0]["penalty_source"] == "--penalty"


SIM = {
    "format": "corecast-sim-result", "version": 1,
    "machine": {"name": "penryn-l5420", "frequency_hz": 2.5e9, "path": "/gone/penryn.toml"},
    "cores": 2, "instructions": 100000, "transactions": 10, "instructions_per_transaction": 9200.0,
    "issue": {"uops": 130000, "cycles": 61000, "baseline_cpi": 0.61, "annotated_instructions": 100000},
    "events_per_kilo_instruction": {"l2_hit": 8.1, "dram": 1.1, "stlb_hit": 1.0, "dtlb_miss": 0.2,
                                    "itlb_miss": 0.0, "misaligned_load": 0.4, "coherence_miss": 0.5},
    "unavailable": {"branch": "the trace has no branch records"},
}


def test_sim_result_input(cli, tmp_path):
    f = tmp_path / "result.json"
    f.write_text(json.dumps(SIM))
    # no --machine: the machine the result was simulated on; no --instructions: the result's
    r = cli("throughput", "--sim", f, "--cores", "1,2", "--json")
    assert r.code == 0, r.err
    out = r.json()
    assert out["machine"]["name"] == "penryn-l5420" and out["instructions"] == 9200
    expected = 0.61 + (8.1 * 15 + 1.1 * 250 + 1.0 * 2 + 0.2 * 30 + 0.4 * 10 + 0.5 * 120) / 1000
    assert out["stack"]["cpi"] == pytest.approx(expected)
    assert any("branch" in n and "no branch records" in n for n in out["notes"])
    assert any("2 cores" in n for n in out["notes"])
    # another machine's penalties on these events is allowed, with a note
    r = cli("throughput", "--sim", f, "--machine", "atom-n540", "--penalty", "coherence_miss=100", "--json")
    assert r.code == 0, r.err
    assert any("simulated on 'penryn-l5420'" in n for n in r.json()["notes"])


def test_sim_result_without_baseline_cpi(cli, tmp_path):
    doc = dict(SIM, issue={}, unavailable={"baseline_cpi": "the trace has no register dependencies"})
    f = tmp_path / "result.json"
    f.write_text(json.dumps(doc))
    r = cli("throughput", "--sim", f)
    assert r.code == 2 and "no register dependencies" in r.err and "--baseline-cpi" in r.err
    r = cli("throughput", "--sim", f, "--baseline-cpi", "0.8", "--json")
    assert r.code == 0, r.err
    assert r.json()["stack"]["baseline_cpi"] == 0.8


@pytest.mark.parametrize("args,match", [
    (["--mpki", "{missing}", "--machine", "atom-n540"], "no such file"),
    (["--mpki", "{ok}", "--machine", "no-such-cpu"], "unknown machine"),
    (["--mpki", "{ok}"], "give --machine"),
    (["--mpki", "{noinstr}", "--machine", "atom-n540"], "instructions per transaction unknown"),
    (["--mpki", "{ok}", "--machine", "atom-n540", "--target", "fast"], "not a time"),
    (["--mpki", "{ok}", "--machine", "atom-n540", "--cores", "0,2"], "core"),
    (["--mpki", "{ok}", "--machine", "atom-n540", "--lock-fraction", "1.2"], "fraction"),
    (["--mpki", "{ok}", "--machine", "atom-n540", "--percentile", "100"], "percentile"),
    (["--mpki", "{ok}", "--machine", "atom-n540", "--measured", "two:5"], "measured"),
    (["--mpki", "{unknown_event}", "--machine", "atom-n540"], "no penalty for event"),
    (["--sim", "{notsim}", "--machine", "atom-n540"], "not a `corecast sim --json` result"),
    (["--sim", "{badjson}"], "not valid JSON"),
    (["--mpki", "{ok}", "--sim", "{ok}"], "not allowed with"),
    (["--mpki", "{huge}", "--machine", "atom-n540"], "must be a finite number"),
    (["--sim", "{simpath}"], "machine.path must be text"),
])
def test_user_errors_are_one_line_exit_2(cli, tmp_path, args, match):
    files = {
        "missing": tmp_path / "missing.toml",
        "ok": tmp_path / "ok.toml",
        "noinstr": tmp_path / "noinstr.toml",
        "unknown_event": tmp_path / "unknown.toml",
        "notsim": tmp_path / "notsim.json",
        "badjson": tmp_path / "bad.json",
        "huge": tmp_path / "huge.json",
        "simpath": tmp_path / "simpath.json",
    }
    # an integer past the largest float (OverflowError), and a result naming a machine file `true`
    files["huge"].write_text('{"baseline_cpi": 1, "instructions": 1000, "events": {"l2_hit": 1' + "0" * 400 + '}}')
    files["simpath"].write_text(json.dumps(dict(SIM, machine={"name": "penryn-l5420", "path": True})))
    files["ok"].write_text("baseline_cpi = 1\ninstructions = 1000\n[events]\nl2_hit = 3\n")
    files["noinstr"].write_text("baseline_cpi = 1\n")
    files["unknown_event"].write_text("baseline_cpi = 1\ninstructions = 10\n[events]\nfrobs = 3\n")
    files["notsim"].write_text('{"hello": 1}')
    files["badjson"].write_text('{"format": ')
    argv = [a.format(**{k: str(v) for k, v in files.items()}) for a in args]
    r = cli("throughput", *argv)
    assert r.code == 2, (r.out, r.err)
    assert match in r.err
    assert "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1


def test_wait_share_breakdown_is_reported_not_zero(cli, tmp_path):
    f = tmp_path / "w.toml"
    f.write_text("baseline_cpi = 1\ninstructions = 1000\n")
    r = cli("throughput", "--frequency", "1GHz", "--mpki", f, "--cores", "1,8,12", "--lock-fraction", "0.1",
            "--json")
    assert r.code == 0, r.err
    rows = {c["cores"]: c for c in r.json()["cores"]}
    assert rows[12]["valid"] is False and rows[12]["capacity"] is None
    assert "110%" in rows[12]["note"]
    r = cli("throughput", "--frequency", "1GHz", "--mpki", f, "--cores", "12", "--lock-fraction", "0.1",
            "--lock-model", "amdahl", "--json")
    row = r.json()["cores"][0]
    assert row["capacity"] == pytest.approx(12 / (1 + 0.1 * 11) / 1e-6)


@pytest.mark.slow
def test_subprocess_entry_point(tmp_path):
    from conftest import run_corecast
    f = tmp_path / "w.toml"
    f.write_text("baseline_cpi = 2\ninstructions = 1000\n")
    p = run_corecast("throughput", "--frequency", "1e9", "--mpki", f, "--cores", "1", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["cores"][0]["capacity"] == pytest.approx(5e5)
    p = run_corecast("throughput", "--frequency", "1e9", "--mpki", tmp_path / "nope.toml")
    assert p.returncode == 2 and p.stderr.startswith("corecast throughput: error:")


def test_the_command_prints_what_the_api_returns(cli, tmp_path):
    """`throughput --json` is model.throughput.analyse's document; the API refuses what the
    command's options cannot express (no input, or two)."""
    from corecast.errors import UserError
    from corecast.model.throughput import analyse

    f = tmp_path / "w.toml"
    f.write_text("baseline_cpi = 0.9\ninstructions = 9200\n[events]\nl2_hit = 20.0\ndram = 2.0\n")
    r = cli("throughput", "--machine", "atom-n540", "--mpki", f, "--cores", "1,2", "--lock-fraction", "0.1",
            "--penalty", "dram=180", "--clients", "4", "--json")
    assert r.code == 0, r.err
    doc = analyse(mpki=f, machine="atom-n540", cores=[1, 2], lock_fraction=0.1, penalties=[("dram", 180.0)],
                  clients=4)
    assert r.json() == json.loads(json.dumps(doc))
    assert doc["stack"]["components"][1]["penalty_source"] == "--penalty"
    with pytest.raises(UserError, match="one input"):
        analyse(machine="atom-n540")
    with pytest.raises(UserError, match="one input"):
        analyse(mpki=f, sim=f, machine="atom-n540")


def test_a_measured_throughput_of_nought_is_one_line(cli, tmp_path):
    # the error against a measurement is relative to it: nought cannot be compared with
    f = tmp_path / "w.toml"
    f.write_text("baseline_cpi = 0.9\ninstructions = 9200\n")
    r = cli("throughput", "--machine", "penryn-l5420", "--mpki", f, "--cores", "1,2", "--measured", "1:0,2:0")
    assert r.code == 2
    assert "'1:0'" in r.err and "more than 0" in r.err and "Traceback" not in r.err and "internal" not in r.err
