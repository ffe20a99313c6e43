"""Bounds on what a user or a file can name on the predict/usl/evaluate/export/info path, and the
numerics of the USL at the ends of the floats (issue 25): each mistake is one line and exit
status 2 naming the bound, never an internal error, a machine-sized allocation or a wrong result."""
from __future__ import annotations

import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from corecast import parsing
from corecast import target as T
from corecast.errors import UserError
from corecast.model import usl

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "data" / "usl" / "specsdm91.csv")
TARGET_DATA = ROOT / "tests" / "data" / "target"


def _one_line(r) -> str:
    lines = [line for line in r.err.strip().splitlines() if line]
    assert r.code == 2, (r.out, r.err)
    assert len(lines) == 1 and "internal error" not in r.err and "Traceback" not in r.err, r.err
    return lines[0]


# ------------------------------------------------------------------------- machine descriptions

ABSURD = {
    "inline": "sockets=1000000000,cores=1000000000,smt=1000000",
    "toml": "sockets = 1000000000\ncores_per_socket = 1000000000\nthreads_per_core = 1000000\n",
    "lscpu text": "Socket(s): 1000000000\nCore(s) per socket: 1000000000\nThread(s) per core: 1000000\n",
    "lscpu json": json.dumps({"lscpu": [{"field": "Socket(s):", "data": "1000000000"},
                                        {"field": "Core(s) per socket:", "data": "1000000000"},
                                        {"field": "Thread(s) per core:", "data": "1000000"}]}),
    "calibrate json": json.dumps({"kind": "corecast-target", "version": 1,
                                  "machine": {"sockets": 1e9, "cores_per_socket": 1e9, "threads_per_core": 1e6}}),
}


@pytest.mark.parametrize("form", list(ABSURD))
def test_absurd_machine_counts_are_refused_naming_the_bound(cli, tmp_path, form):
    """predict --target-machine sockets=1e9,... grew to 22.7 GB until the kernel killed it."""
    spec = ABSURD[form]
    if form != "inline":
        (tmp_path / "m.txt").write_text(spec)
        spec = str(tmp_path / "m.txt")
    r = cli("predict", SPEC, "--cores", "16,64", "--target-machine", spec)
    assert "sockets = 1,000,000,000 is above 64, the most corecast takes" in _one_line(r)


@pytest.mark.parametrize("spec, bound", [
    ("sockets=65,cores=1", "sockets = 65 is above 64"),
    ("sockets=1,cores=4097", "cores_per_socket = 4,097 is above 4,096"),
    ("cores=8,smt=17", "threads_per_core = 17 is above 16"),
    ("sockets=64,cores=2048,smt=2", "262,144 logical CPUs is above 65,536"),
    ("cpus=65537", "65,537 logical CPUs is above 65,536"),
    ("cores=8,numa=1025", "numa_nodes = 1,025 is above 1,024"),
])
def test_each_bound_is_stated(spec, bound):
    with pytest.raises(UserError, match=bound):
        T.parse_spec(spec)


def test_the_largest_machines_pass():
    assert T.parse_spec("sockets=64,cores=512,smt=2").cpus == 65536
    assert T.parse_spec("cpus=65536").cpus == 65536
    assert T.parse_spec("sockets=8,cores=4096,smt=2").cores_per_socket == 4096
    pos = T.placement(T.parse_spec("sockets=64,cores=512,smt=2"), 1 << 20, "spread")
    assert pos.oversubscribed and pos.runnable == 65536


def test_a_key_given_twice_an_empty_spec_and_a_placement_without_a_target(cli):
    r = cli("predict", SPEC, "--cores", "64", "--target-machine", "sockets=2,cores=32,cores=4")
    assert "cores= is given twice" in _one_line(r)          # the last one won
    r = cli("predict", SPEC, "--cores", "64", "--target-machine", "")
    assert "machine description: empty" in _one_line(r)     # was ignored
    r = cli("predict", SPEC, "--cores", "64", "--placement", "spread")
    assert "--placement is for --target-machine" in _one_line(r)     # was ignored
    r = cli("evaluate", SPEC, "--train-max-cores", "36", "--placement", "spread")
    assert "--placement is for --target-machine" in _one_line(r)
    r = cli("evaluate", SPEC, "--train-max-cores", "36", "--target-machine", "")
    assert "machine description: empty" in _one_line(r)
    r = cli("predict", SPEC, "--cores", "64", "--method", "usl", "--target-machine", "sockets=2,cores=32",
            "--placement", "spread", "--json")
    assert r.code == 0 and r.json()["target_machine"]["placement"] == "spread"


# ------------------------------------------------------------------------------ core counts

@pytest.mark.parametrize("args", [
    ["usl", SPEC, "--predict", "1e18"], ["usl", SPEC, "--predict", "1e308"],
    ["predict", SPEC, "--cores", "1e308"], ["predict", SPEC, "--cores", "64,1e18"],
    ["predict", SPEC, "--cores", "1-10000000000:2x"],
])
def test_typed_core_counts_above_the_bound_are_refused(cli, args):
    assert "is above 1,048,576, the most corecast takes" in _one_line(cli(*args))


def test_core_counts_in_files_are_bounded(cli, tmp_path):
    (tmp_path / "c.csv").write_text("cores,throughput\n1,10\n2,19\n1e18,20\n")
    assert "c.csv:4: column 'cores': cores must be at most 1,048,576 (got 1e+18)" in _one_line(
        cli("usl", tmp_path / "c.csv"))
    (tmp_path / "c.json").write_text(json.dumps([{"cores": 1, "throughput": 1}, {"cores": 1e308, "throughput": 2}]))
    assert "rows[1] (row 2): column 'cores': cores must be at most 1,048,576" in _one_line(
        cli("predict", tmp_path / "c.json", "--cores", "64"))
    (tmp_path / "ok.csv").write_text("cores,throughput\n1,10\n2,19\n4,36\n1048576,40\n")
    assert cli("info", tmp_path / "ok.csv").code == 0


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    from conftest import run_corecast
    d = tmp_path_factory.mktemp("bounds-campaign")
    r = run_corecast("measure", "-q", "--cores", "1", "--reps", "2", "--warmup", "0", "--no-shim", "-o",
                     d / "good.db", "--", "true")
    assert r.returncode == 0, r.stderr
    return d / "good.db"


@pytest.mark.parametrize("value, message", [(-4, "cores must be > 0 (got -4)"), (0, "cores must be > 0 (got 0)"),
                                            (1e18, "cores must be at most 1,048,576"),
                                            ("x", "'x' is not a number")])
def test_bad_core_counts_in_a_campaign_are_refused_alike(cli, tmp_path, campaign, value, message):
    """predict raised ValueError on a negative core count in the runs table; info and export took it."""
    db = tmp_path / "bad.db"
    db.write_bytes(campaign.read_bytes())
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET cores = ? WHERE slot = (SELECT MAX(slot) FROM runs)", (value,))
    con.commit()
    con.close()
    for args in (["predict", db, "--cores", "4"], ["info", db], ["export", db], ["usl", db]):
        line = _one_line(cli(*args))
        assert f"{db}: runs table, run " in line and message in line


# --------------------------------------------------------------------------------- JSON nesting

def test_deeply_nested_json_is_one_line(cli, tmp_path):
    deep = "[" * 100_000 + "]" * 100_000
    (tmp_path / "deep.json").write_text(deep)
    (tmp_path / "rows.json").write_text('{"rows": ' + deep + "}")
    for args in (["usl", "{d}/deep.json"], ["predict", "{d}/deep.json", "--cores", "64"],
                 ["evaluate", "{d}/deep.json", "--train-max-cores", "4"], ["export", "{d}/deep.json"],
                 ["info", "{d}/deep.json"], ["info", "{d}/rows.json"]):
        r = cli(*[str(a).replace("{d}", str(tmp_path)) for a in args])
        assert "JSON nested deeper than 64 levels" in _one_line(r), args
    # the metadata of a CSV (inline or beside it) and a machine description are JSON too
    (tmp_path / "m.csv").write_text("# corecast: {\"notes\": " + deep + "}\ncores,throughput\n1,1\n2,2\n")
    assert "JSON nested deeper than 64 levels" in _one_line(cli("info", tmp_path / "m.csv"))
    (tmp_path / "s.csv").write_text("cores,throughput\n1,1\n2,2\n")
    (tmp_path / "s.csv.meta.json").write_text('{"notes": ' + deep + "}")
    assert "JSON nested deeper than 64 levels" in _one_line(cli("export", tmp_path / "s.csv"))
    (tmp_path / "t.json").write_text('{"lscpu": ' + deep + "}")
    r = cli("predict", SPEC, "--cores", "64", "--target-machine", tmp_path / "t.json")
    assert "JSON nested deeper than 64 levels" in _one_line(r)
    (tmp_path / "t.toml").write_text("sockets = " + deep + "\n")
    r = cli("predict", SPEC, "--cores", "64", "--target-machine", tmp_path / "t.toml")
    assert "TOML nested deeper than 64 levels" in _one_line(r)


def test_json_depth_bound_is_exact():
    ok = "[" * parsing.MAX_JSON_DEPTH + "]" * parsing.MAX_JSON_DEPTH
    assert parsing.json_document(ok, "x") is not None
    with pytest.raises(UserError, match="x: JSON nested deeper than 64 levels"):
        parsing.json_document("[" + ok + "]", "x")


# ------------------------------------------------------------------------------ size of a file

def test_a_dataset_past_the_row_bound_is_refused(cli, tmp_path):
    """3.4 million rows (a 50 MB CSV) took predict 264 s and 3.2 GB; the bound is a million."""
    n = parsing.MAX_ROWS + 1
    cores = np.tile(np.array([1, 2, 4, 8], dtype=np.int64), n // 4 + 1)[:n]
    body = "\n".join(f"{c},{10 * c}" for c in cores.tolist())
    (tmp_path / "big.csv").write_text("cores,throughput\n" + body + "\n")
    assert f"more than {parsing.MAX_ROWS:,} rows" in _one_line(cli("predict", tmp_path / "big.csv", "--cores", "64"))


def test_the_row_bound_holds_in_every_reader(cli, tmp_path, monkeypatch, campaign):
    from corecast import dataset
    monkeypatch.setattr(dataset, "MAX_ROWS", 3)
    (tmp_path / "r.json").write_text(json.dumps([{"cores": c, "throughput": c} for c in (1, 2, 4, 8)]))
    assert "4 rows; a Dataset may have at most 3" in _one_line(cli("info", tmp_path / "r.json"))
    (tmp_path / "r.csv").write_text("cores,throughput\n1,1\n2,2\n# a comment\n4,4\n8,8\n")
    assert "r.csv:6: more than 3 rows" in _one_line(cli("info", tmp_path / "r.csv"))
    monkeypatch.setattr(dataset, "MAX_ROWS", 1)
    assert "2 runs; a Dataset may have at most 1 rows" in _one_line(cli("info", campaign))


def test_a_dataset_past_the_size_bound_is_refused_unread(cli, tmp_path):
    big = tmp_path / "sparse.csv"
    with open(big, "wb") as fh:             # sparse: no disk, the size is what is checked
        fh.write(b"cores,throughput\n")
        fh.truncate(parsing.MAX_DATASET_BYTES + 1)
    line = _one_line(cli("usl", big))
    assert f"{parsing.MAX_DATASET_BYTES + 1:,} bytes, more than the {parsing.MAX_DATASET_BYTES:,}" in line


# ----------------------------------------------------------------------------- usl numerics

def _analysis(scale: float):
    n = np.array([1, 18, 36, 72, 108, 144, 216], float)
    x = np.array([64.9, 995.9, 1652.4, 1853.2, 1828.9, 1775.0, 1702.2])
    return usl.analyze(n, x * scale)


@pytest.mark.parametrize("scale", [1e300, 1e-300, 1e-310])
def test_usl_statistics_do_not_depend_on_the_unit(scale):
    """At 1e-310 the RSS underflowed to 0 ('beta is not needed', F = 0) and gamma's interval began
    at the solver's bound 1e-300, above gamma; at 1e300 the standard errors were unknown."""
    ref, a = _analysis(1.0), _analysis(scale)
    rtol = 1e-6 if scale >= 1e-300 else 1e-3           # a subnormal keeps fewer digits
    for attr in ("alpha", "beta"):
        assert getattr(a.fit, attr) == pytest.approx(getattr(ref.fit, attr), rel=rtol)
    assert a.fit.gamma == pytest.approx(ref.fit.gamma * scale, rel=rtol)
    assert a.fit.se[:2] == pytest.approx(ref.fit.se[:2], rel=rtol)
    assert a.fit.se[2] == pytest.approx(ref.fit.se[2] * scale, rel=rtol)
    assert a.fit.r2 == pytest.approx(ref.fit.r2, rel=rtol)
    assert a.fit.sigma == pytest.approx(ref.fit.sigma * scale, rel=rtol)
    assert a.nested.beta_needed == ref.nested.beta_needed is True
    assert a.nested.p_value == pytest.approx(ref.nested.p_value, rel=1e-2)
    lo, hi = a.fit.confint(0.95)[2]
    assert lo <= a.fit.gamma <= hi and lo > 0
    assert lo == pytest.approx(ref.fit.confint(0.95)[2][0] * scale, rel=rtol)
    y, blo, bhi = a.fit.band([300.0], 0.9)
    ry, rlo, rhi = ref.fit.band([300.0], 0.9)
    assert (y[0], blo[0], bhi[0]) == pytest.approx((ry[0] * scale, rlo[0] * scale, rhi[0] * scale), rel=rtol)
    assert [p.efficiency for p in a.points] == pytest.approx([p.efficiency for p in ref.points], rel=rtol)


def test_usl_efficiency_near_the_largest_float(cli, tmp_path):
    """gamma N overflowed: an efficiency of 0.5 at N = 32 was printed 0."""
    g, a = 1e307, 1.0 / 31.0
    rows = [(n, g * (n / (1 + a * (n - 1)))) for n in (1, 2, 4, 8, 16, 32)]
    (tmp_path / "huge.csv").write_text("cores,throughput\n" + "".join(f"{n},{x!r}\n" for n, x in rows))
    r = cli("usl", tmp_path / "huge.csv", "--json", "--predict", "32")
    assert r.code == 0, r.err
    doc = r.json()
    eff = {p["cores"]: p["efficiency"] for p in doc["points"]}
    assert eff[32] == pytest.approx(0.5, rel=1e-6) and eff[1] == pytest.approx(1.0, rel=1e-6)
    assert doc["predictions"][0]["efficiency"] == pytest.approx(0.5, rel=1e-6)
    assert doc["sigma"] is not None and math.isfinite(doc["gamma_se"])


# ------------------------------------------------------------------------ predict and evaluate

def test_zero_checkpoints_are_refused(cli):
    assert "--checkpoints 0: at least 1" in _one_line(cli("predict", SPEC, "--cores", "64", "--checkpoints", "0"))
    assert "--checkpoints 0: at least 1" in _one_line(
        cli("evaluate", SPEC, "--train-max-cores", "72", "--checkpoints", "0"))


def test_evaluate_corpus_mistakes(cli, tmp_path):
    corp = tmp_path / "corp"
    (corp / "src" / "source.toml").mkdir(parents=True)
    (corp / "src" / "a.csv").write_text("cores,throughput\n1,10\n2,19\n4,36\n8,60\n")
    assert "source.toml: is a directory" in _one_line(cli("evaluate", "--corpus", corp))
    two = tmp_path / "two"                  # two points: no method can hold one out and predict it
    (two / "s").mkdir(parents=True)
    (two / "s" / "a.csv").write_text("cores,throughput\n1,10\n2,19\n")
    r = cli("evaluate", "--corpus", two)
    assert r.code == 2 and "no method could predict any series" in r.err and "failed" in r.out
