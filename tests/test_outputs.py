"""Every tidy table (`--format csv|records`, docs/outputs.md) loads with pandas' default
arguments into the shape the command's JSON document implies (issue 15: pd.read_json failed on
the JSON of sim, evaluate, throughput, info and events, and loaded measure's and mrc's as one
wrong row)."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas")

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "data" / "usl" / "specsdm91.csv")


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    from corecast.sim import synth
    from corecast.sim.trace import Trace, write_trace
    d = tmp_path_factory.mktemp("outputs")
    write_trace(d / "pp.cctrace", Trace(synth.pingpong(200, 2)))
    return d


def _read(text: str, fmt: str):
    return pd.read_csv(io.StringIO(text)) if fmt == "csv" else pd.read_json(io.StringIO(text))


def _both(cli, *args):
    """The command's JSON document and its tidy table in both forms, loaded by pandas."""
    r = cli(*args, "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    frames = {}
    for fmt in ("csv", "records"):
        r = cli(*args, "--format", fmt)
        assert r.code == 0, r.err
        frames[fmt] = _read(r.out, fmt)
    a, b = frames["csv"], frames["records"]
    assert list(a.columns) == list(b.columns) and a.shape == b.shape
    return doc, a, b


def test_sim(cli, trace_dir):
    doc, a, b = _both(cli, "sim", trace_dir / "pp.cctrace", "-m", "penryn-l5420", "--cores", "2")
    with pytest.raises(ValueError):
        pd.read_json(io.StringIO(json.dumps(doc)))           # why the tidy form exists
    assert len(a) == len(doc["caches"]) + len(doc["tlbs"])
    assert a["type"].tolist() == ["cache"] * len(doc["caches"]) + ["tlb"] * len(doc["tlbs"])
    assert a["name"].tolist() == [c["name"] for c in doc["caches"]] + [t["name"] for t in doc["tlbs"]]
    assert a["mpki"].tolist() == pytest.approx([c["mpki"] for c in doc["caches"]] + [t["mpki"] for t in doc["tlbs"]])
    assert a["accesses_fetch"].iloc[0] == doc["caches"][0]["accesses"]["fetch"]
    assert (a["cores"] == 2).all() and (a["machine"] == "penryn-l5420").all()
    assert b["misses_total"].iloc[1] == doc["caches"][1]["misses_total"]


def test_sim_mrc(cli, trace_dir):
    doc, a, b = _both(cli, "sim", "mrc", trace_dir / "pp.cctrace", "--sizes", "1KiB,8KiB,64KiB", "--per-thread")
    assert len(a) == sum(len(c["sizes_bytes"]) for c in doc["curves"]) == 3 * len(doc["curves"])
    assert a["scope"].tolist() == [c["scope"] for c in doc["curves"] for _ in c["sizes_bytes"]]
    assert a["size_bytes"].tolist()[:3] == [1024, 8192, 65536]
    assert a["miss_ratio"].tolist() == pytest.approx([r for c in doc["curves"] for r in c["miss_ratio"]])


def test_evaluate(cli):
    doc, a, b = _both(cli, "evaluate", SPEC, "--train-max-cores", "64", "--methods", "usl,timex")
    assert len(a) == sum(len(m["points"]) for m in doc["methods"])
    assert set(a["method"]) == {m["method"] for m in doc["methods"]}
    first = doc["methods"][0]["points"][0]
    row = a[(a["method"] == doc["methods"][0]["method"]) & (a["cores"] == first["cores"])].iloc[0]
    assert row["predicted"] == pytest.approx(first["predicted"]) and row["measured"] == first["measured"]


def test_throughput(cli, tmp_path):
    f = tmp_path / "w.toml"
    f.write_text('baseline_cpi = 0.9\ninstructions = 9200\n[events]\nl2_hit = 20.0\ndram = 2.0\n')
    doc, a, b = _both(cli, "throughput", "--machine", "penryn-l5420", "--mpki", f, "--cores", "1,2,4")
    assert a["cores"].tolist() == [1, 2, 4] == [c["cores"] for c in doc["cores"]]
    assert a["capacity"].tolist() == pytest.approx([c["capacity"] for c in doc["cores"]])
    assert a["mm1_utilization"].tolist() == pytest.approx([c["mm1"]["utilization"] for c in doc["cores"]])


def test_info(cli):
    doc, a, b = _both(cli, "info", SPEC)
    assert a["name"].tolist() == [c["name"] for c in doc["columns"]]
    assert a["max"].tolist() == pytest.approx([c["max"] for c in doc["columns"]])


def test_events(cli):
    r = cli("events", "--format", "json")
    doc = json.loads(r.out)
    for fmt in ("csv", "records"):
        r = cli("events", "--format", fmt)
        frame = _read(r.out, fmt)
        assert frame["name"].tolist() == [e["name"] for e in doc["events"]]
        assert frame["status"].tolist() == [e["status"] for e in doc["events"]]


@pytest.mark.slow
def test_measure(cli, tmp_path):
    out = {}
    for fmt in ("json", "csv", "records"):
        r = cli("measure", "-q", "--cores", "1-2", "--reps", "2", "--warmup", "0", "--no-shim",
                "-o", tmp_path / f"{fmt}.db", "--format", fmt, "--", "sh", "-c", "exit 0")
        assert r.code == 0, r.err
        out[fmt] = r.out
    doc = json.loads(out["json"])
    for fmt in ("csv", "records"):
        frame = _read(out[fmt], fmt)
        assert frame["cores"].tolist() == [s["cores"] for s in doc["summary"]] == [1, 2]
        assert frame["runs"].tolist() == [2, 2]
        assert (frame["time_s_min"] <= frame["time_s"]).all() and (frame["time_s"] <= frame["time_s_max"]).all()
        assert frame["time_s"].dtype.kind == "f"


def test_every_command_with_a_document_offers_the_tidy_forms():
    """The commands whose natural shape is a table: --format takes csv and records."""
    import argparse

    from corecast.cli import build_parser, sim
    parsers = {k: v for k, v in next(a for a in build_parser(None)._actions
                                     if isinstance(a, argparse._SubParsersAction)).choices.items()}
    parsers["sim mrc"] = sim._sub_parsers("corecast sim")["mrc"]
    for name in ("usl", "predict", "evaluate", "measure", "info", "events", "sim", "sim mrc", "throughput",
                 "export"):
        fmt = next(a for a in parsers[name]._actions if "--format" in a.option_strings)
        assert {"csv", "records"} <= set(fmt.choices), name
