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
    parsers["sim machines"] = sim._sub_parsers("corecast sim")["machines"]
    from corecast.cli import sched
    parsers["sched sim"] = sched._sub_parsers("corecast sched")["sim"]
    meters = next(a for a in parsers["meters"]._actions if isinstance(a, argparse._SubParsersAction))
    parsers["meters list"] = meters.choices["list"]
    for name in ("usl", "predict", "evaluate", "measure", "info", "events", "sim", "sim mrc", "throughput",
                 "export", "sim machines", "sched sim", "meters list", "chase"):
        fmt = next(a for a in parsers[name]._actions if "--format" in a.option_strings)
        assert {"csv", "records"} <= set(fmt.choices), name


# ------------------------------------------------------------------ issue 26: the commands that lacked them
def test_sched_sim(cli):
    doc, a, b = _both(cli, "sched", "sim", "pmctrack-mix", "--policy", "hsp,rr")
    assert len(a) == sum(len(r["apps"]) for r in doc["results"]) == 6
    assert a["policy"].tolist() == [r["policy"] for r in doc["results"] for _ in r["apps"]]
    assert a["application"].tolist() == [x["name"] for r in doc["results"] for x in r["apps"]]
    assert a["slowdown"].tolist() == pytest.approx([x["slowdown"] for r in doc["results"] for x in r["apps"]])
    assert a["asp"].tolist() == pytest.approx([r["asp"] for r in doc["results"] for _ in r["apps"]])
    assert a["slowdown"].dtype.kind == "f"


def test_chase(cli):
    args = ("chase", "--threads", "1", "--chains", "1,2", "--size", "1MiB", "--duration", "0.02", "--samples", "2")
    doc, a, b = _both(cli, *args)
    pts = doc["concurrency"]["points"]
    assert a["mode"].tolist() == ["concurrency"] * len(pts) and a["chains"].tolist() == [1, 2]
    assert set(a.columns) >= {"latency_ns", "latency_ns_low", "latency_ns_high", "bandwidth_bytes_s"}
    assert list(a.columns) == ["mode"] + [c for k in pts[0] for c in
                                          ([k.replace("_range", "") + "_low", k.replace("_range", "") + "_high"]
                                           if "_range" in k else [k])]
    assert ((a["latency_ns_low"] <= a["latency_ns"]) & (a["latency_ns"] <= a["latency_ns_high"])).all()
    assert a["cpus"].astype(str).tolist() == [";".join(map(str, p["cpus"])) for p in pts]   # a list: joined


def test_sim_machines(cli):
    doc, a, b = _both(cli, "sim", "machines")
    assert a["name"].tolist() == [m["name"] for m in doc] and "penryn-l5420" in a["name"].tolist()
    doc, a, b = _both(cli, "sim", "machines", "penryn-l5420")
    assert a["type"].tolist() == ["cache"] * len(doc["caches"]) + ["tlb"] * len(doc["tlbs"])
    assert a["size"].dropna().tolist() == [c["size"] for c in doc["caches"]]
    assert a["entries"].dropna().astype(int).tolist() == [t["entries"] for t in doc["tlbs"]]


def test_meters_list(cli):
    doc, a, b = _both(cli, "meters", "list")
    assert doc["kind"] == "corecast-meters-list"
    assert a["meter"].tolist() == [m["meter"] for m in doc["meters"]]
    assert set(a["status"]) <= {"measured", "derived", "unavailable"}
    assert "cpu_busy" in set(a["meter"]) and "node" in set(a["scope"])


def test_events_export_and_stat_take_json(cli, tmp_path):
    """They rejected the --json most commands take (issue 26)."""
    r = cli("events", "--json")
    assert r.code == 0 and json.loads(r.out) == json.loads(cli("events", "--format", "json").out)
    r = cli("export", SPEC, "--json")
    assert r.code == 0 and r.out == cli("export", SPEC, "--format", "json").out
    assert json.loads(r.out)["rows"]
    r = cli("export", SPEC, "--json", "--format", "csv")
    assert r.code == 2 and "two formats" in r.err
    lines = []
    for flag in ("--json", "-j", "--format=jsonl"):
        r = cli("stat", flag, "-c", "task_clock", "-o", tmp_path / "s.jsonl", "--", "true")
        assert r.code == 0, r.err
        lines.append([json.loads(x)["type"] for x in (tmp_path / "s.jsonl").read_text().splitlines()])
    assert lines[0] == lines[1] == lines[2] and lines[0][0] == "header" and lines[0][-1] == "summary"
    frame = pd.read_json(tmp_path / "s.jsonl", lines=True)
    assert frame["type"].tolist() == lines[0]
