"""`corecast serve` without a browser: its API documents equal the commands' --json, user
mistakes end in one line (exit 2 at start, an error document while serving), the guards hold,
and a live stat session streams the stat command's own JSON lines."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

aiohttp = pytest.importorskip("aiohttp")

from corecast.serve.app import Dashboard  # noqa: E402
from corecast.serve.server import parse_listen  # noqa: E402
from corecast.errors import UserError  # noqa: E402

from conftest import DATA, board_name, run_api, run_corecast, start_daemon, stop  # noqa: E402
from fakes import stalls_csv  # noqa: E402

RAYTRACER = DATA / "usl" / "raytracer.csv"


def lockbench() -> str:
    from corecast.native import native_path
    return str(native_path("corecast-lockbench"))


def fid(dash: Dashboard, name: str) -> str:
    dash.registry.scan()
    return next(e.id for e in dash.registry.files.values() if e.path.name == name)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    shutil.copy(RAYTRACER, tmp_path / "raytracer.csv")
    stalls_csv(tmp_path / "stalls.csv")
    return tmp_path


# ------------------------------------------------------------------ parsing and start-up errors
def test_parse_listen():
    assert parse_listen("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_listen(":9000") == ("127.0.0.1", 9000)
    assert parse_listen("9000") == ("127.0.0.1", 9000)
    assert parse_listen("[::1]:80") == ("::1", 80)
    for bad in ("host:port", "1.2.3.4:70000", "[::1]80"):
        with pytest.raises(UserError):
            parse_listen(bad)


def test_port_in_use_is_one_line_exit_2():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = run_corecast("serve", "--listen", f"127.0.0.1:{port}", timeout=60)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert lines[-1] == f"corecast serve: error: --listen 127.0.0.1:{port}: the port is in use (choose another with --listen)"
    assert "Traceback" not in r.stderr


def test_bad_files_are_one_line_exit_2(tmp_path):
    r = run_corecast("serve", "--listen", "127.0.0.1:0", str(tmp_path / "nope.db"), timeout=60)
    assert r.returncode == 2 and r.stderr.strip() == f"corecast serve: error: {tmp_path / 'nope.db'}: no such file or folder"
    (tmp_path / "x.bin").write_bytes(b"\x00\x01\x02binary")
    r = run_corecast("serve", "--listen", "127.0.0.1:0", str(tmp_path / "x.bin"), timeout=60)
    assert r.returncode == 2 and "binary data" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------ documents equal the CLI's
def test_predict_and_usl_documents_equal_the_cli(files, cli):
    dash = Dashboard([str(files)], "127.0.0.1", 0)

    async def fetch(client):
        s = await client.get("/api/state")
        st = await s.json()
        assert {f["name"] for f in st["files"]} == {"raytracer.csv", "stalls.csv"}
        p = await client.get("/api/predict", params={"file": fid(dash, "stalls.csv"), "cores": "16,32",
                                                     "method": "estima", "level": "0.9"})
        u = await client.get("/api/usl", params={"file": fid(dash, "raytracer.csv"), "predict": "64"})
        i = await client.get("/api/dataset", params={"file": fid(dash, "raytracer.csv")})
        return await p.json(), await u.json(), await i.json()

    pred, usl, info = run_api(dash, fetch)
    r = cli("predict", files / "stalls.csv", "--cores", "16,32", "--method", "estima", "--level", "0.9", "--json")
    assert r.code == 0
    want = r.json()
    assert pred["doc"] == json.loads(json.dumps(want))
    assert pred["curve"]["predictions"] and all(p["low"] is not None for p in pred["curve"]["predictions"])
    r = cli("usl", files / "raytracer.csv", "--predict", "64", "--json")
    assert usl["doc"] == r.json()
    assert len(usl["curve"]) == 100
    r = cli("info", files / "raytracer.csv", "--json")
    assert info["info"] == r.json()


def test_prediction_for_another_machine_equals_the_cli(files, cli):
    dash = Dashboard([str(files)], "127.0.0.1", 0)
    base = {"cores": "16,64", "method": "estima"}

    async def fetch(client):
        f = fid(dash, "stalls.csv")
        st = await (await client.get("/api/state")).json()
        out = {}
        for name, extra in [("ok", {"target_machine": "epyc-9654-2s", "placement": "spread", "smt_yield": "0.3",
                                    "measured_machine": "sockets=1,cores=8,smt=1"}),
                            ("inline", {"target_machine": "sockets=2,cores=16,smt=2"}),
                            ("path", {"target_machine": "/etc/hostname"}),
                            ("bad", {"target_machine": "sockets=two"}),
                            ("placement", {"target_machine": "cpus=64", "placement": "diagonal"}),
                            ("alone", {"smt_yield": "0.3"})]:
            resp = await client.get("/api/predict", params={"file": f, **base, **extra})
            out[name] = (resp.status, await resp.json())
        return st["machines"], out

    machines, out = run_api(dash, fetch)
    from corecast.target import bundled
    assert machines == bundled() and "epyc-9654-2s" in machines
    for name, args in [("ok", ["--target-machine", "epyc-9654-2s", "--placement", "spread", "--smt-yield", "0.3",
                               "--measured-machine", "sockets=1,cores=8,smt=1"]),
                       ("inline", ["--target-machine", "sockets=2,cores=16,smt=2"])]:
        status, doc = out[name]
        assert status == 200, doc
        want = cli("predict", files / "stalls.csv", "--cores", "16,64", "--method", "estima", *args, "--json").json()
        assert doc["doc"] == want
        # the curve is the same prediction over a grid, for the same machine
        assert doc["curve"]["target_machine"] == want["target_machine"]
        at = {p["cores"]: p for p in doc["curve"]["predictions"]}
        assert at[64]["time_s"] == pytest.approx(want["predictions"][1]["time_s"], rel=1e-9)
        assert all(p["low"] is not None and "effective_cores" in p for p in doc["curve"]["predictions"])
    assert out["ok"][1]["doc"]["target_machine"]["placement"] == "spread"
    for name, start in [("path", "target machine '/etc/hostname': give a bundled name ("),
                        ("bad", "machine description 'sockets=two': "),
                        ("placement", "placement 'diagonal': choose from compact, spread, smt-last"),
                        ("alone", "the SMT yield and the measured machine are for a target machine")]:
        status, doc = out[name]
        assert status == 400 and doc["error"].startswith(start), (name, doc)


def test_campaign_document_equals_info_and_measure_summary(tmp_path, cli):
    camp = tmp_path / "c.db"
    r = run_corecast("measure", "--cores", "1,2", "--reps", "1", "--warmup", "0", "-q", "--json", "-o", camp,
                     "--", lockbench(), "-t", "{threads}", "-n", "20000", timeout=120)
    assert r.returncode == 0, r.stderr
    measured = json.loads(r.stdout)
    dash = Dashboard([str(camp)], "127.0.0.1", 0)

    async def fetch(client):
        resp = await client.get("/api/campaign", params={"file": fid(dash, "c.db")})
        return await resp.json()

    doc = run_api(dash, fetch)
    assert doc["measure"] == json.loads(json.dumps(measured, default=str))
    assert doc["info"] == cli("info", camp, "--json").json()
    assert [row["cores"] for row in doc["dataset"]["rows"]] == [1, 2]


# ------------------------------------------------------------------ bad input while serving
def test_bad_input_is_an_error_document_and_the_server_keeps_serving(files, caplog):
    camp = files / "broken.db"
    camp.write_bytes(b"SQLite format 3\x00" + b"\x07" * 4000)     # a damaged campaign file
    trace = files / "t.jsonl"
    trace.write_text('{"type": "header", "format": "corecast-stat", "version": 1}\n{"type": "sample", "time_s": 0.1}\n'
                     "{not json\n" + '{"type": "sample", "time_s": 0.2}\n')
    dash = Dashboard([str(files)], "127.0.0.1", 0)

    async def fetch(client):
        out = {}
        for name, path, params in [("campaign", "/api/campaign", {"file": fid(dash, "broken.db")}),
                                   ("predict", "/api/predict", {"file": fid(dash, "raytracer.csv"), "cores": "x"}),
                                   ("method", "/api/predict", {"file": fid(dash, "raytracer.csv"), "cores": "64",
                                                               "method": "magic"}),
                                   ("replay", "/api/replay", {"file": fid(dash, "t.jsonl")}),
                                   ("nofile", "/api/usl", {"file": "nothing"})]:
            resp = await client.get(path, params=params)
            out[name] = (resp.status, await resp.json())
        out["state"] = (await client.get("/api/state")).status
        return out

    out = run_api(dash, fetch)
    for name in ("campaign", "predict", "method", "replay", "nofile"):
        status, doc = out[name]
        assert status == 400, (name, doc)
        assert "\n" not in doc["error"] and "Traceback" not in doc["error"], doc
    assert "broken.db" in out["campaign"][1]["error"]
    assert "line 3: not JSON" in out["replay"][1]["error"]
    assert "cores:" in out["predict"][1]["error"]
    assert out["state"] == 200
    assert any("broken.db" in r.getMessage() for r in caplog.records)      # and in the server log


def test_the_names_the_page_offers_come_from_the_registries(files):
    """/api/registry: the methods, policies and meters as their registries list them; the page
    builds its method list from it (it holds no list of its own)."""
    from corecast.meters.catalog import METERS
    from corecast.model.predictors import METHODS
    from corecast.sched.policies import POLICIES, VARIANTS
    dash = Dashboard([str(files)], "127.0.0.1", 0)

    async def fetch(client):
        resp = await client.get("/api/registry")
        return resp.status, await resp.json()

    status, doc = run_api(dash, fetch)
    assert status == 200
    assert doc == {"methods": list(METHODS), "policies": [*POLICIES, *VARIANTS], "meters": list(METERS)}
    assert doc["methods"][0] == "auto" and "energy" in doc["policies"] and "cpu_busy" in doc["meters"]
    from corecast.serve.app import STATIC
    js = (STATIC / "app.js").read_text()
    assert '"/api/registry"' in js and not re.search(r'\[\s*"auto",\s*"estima"', js)


def test_guards_host_and_token(files):
    dash = Dashboard([str(files)], "127.0.0.1", 0)

    async def fetch(client):
        a = await client.get("/api/state", headers={"Host": "attacker.example:80"})
        b = await client.post("/api/stat", json={"events": ["task_clock"], "command": "true"})
        c = await client.get("/")
        page = await c.text()
        token = re.search(r'name="corecast-token" content="([^"]+)"', page).group(1)
        d = await client.post("/api/stat", json={"events": []}, headers={"X-Corecast-Token": token})
        js = await client.get("/static/plotly.min.js")
        return a.status, b.status, d.status, (await d.json())["error"], js.status, len(await js.read())

    a, b, d, err, js, size = run_api(dash, fetch)
    assert a == 421 and b == 403
    assert d == 400 and err == "choose at least one event or virtual counter"
    assert js == 200 and size > 1_000_000          # plotly.min.js from the installed package


def test_non_loopback_listen_turns_commands_off(files):
    dash = Dashboard([str(files)], "0.0.0.0", 0)
    assert not dash.allow_commands
    assert Dashboard([str(files)], "0.0.0.0", 0, allow_commands=True).allow_commands


# ------------------------------------------------------------------ live stat and replay
def test_live_stat_streams_the_commands_json_lines(tmp_path):
    dash = Dashboard([], "127.0.0.1", 0)

    async def go(client):
        page = await (await client.get("/")).text()
        token = re.search(r'content="([^"]+)"', page.split("corecast-token", 1)[1]).group(1)
        r = await client.post("/api/stat", headers={"X-Corecast-Token": token},
                              json={"events": ["task_clock,context_switches"], "virtual": ["runq_delay"],
                                    "metrics": ["utilization"], "interval": 0.1,
                                    "command": f"{lockbench()} -t 2 -n 400000"})
        assert r.status == 200, await r.text()
        sid = (await r.json())["id"]
        lines: list[dict] = []
        events = []
        async with client.get(f"/api/sessions/{sid}/stream") as resp:
            body = await resp.text()            # the stream ends after its `end` event
        for block in body.replace("\r\n", "\n").split("\n\n"):
            fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
            if "event" in fields:
                events.append(fields["event"])
                if fields["event"] == "lines":
                    lines.extend(json.loads(fields["data"]))
        unknown = await client.post("/api/stat", headers={"X-Corecast-Token": token},
                                    json={"events": ["no_such_event"], "command": "true"})
        bad = await client.post("/api/stat", headers={"X-Corecast-Token": token},
                                json={"events": ["task_clock"], "metrics": ["x=nosuch/task_clock"], "command": "true"})
        bsid = (await bad.json())["id"]
        await asyncio.wait_for(dash.sessions[bsid].task, 60)
        return lines, events, (unknown.status, await unknown.json()), list(dash.sessions[bsid].history)

    lines, events, unknown, bad = run_api(dash, go)
    types = [x["type"] for x in lines if x["type"] != "output"]     # the program's own output: any time
    assert types[0] == "header" and "sample" in types and "summary" in types and types[-1] == "end"
    assert next(x for x in lines if x["type"] == "header")["format"] == "corecast-stat"
    assert any(x["type"] == "output" and x["message"].startswith("throughput:") for x in lines)
    samples = [x for x in lines if x["type"] == "sample"]
    assert any(c["name"] == "task_clock" and c["value"] for s in samples for c in s["counters"])
    assert events[0] == "session" and events[-1] == "end"
    assert unknown[0] == 400 and unknown[1]["error"].startswith("event spec 'no_such_event': unknown event")
    errors = [json.loads(x) for x in bad if '"error"' in x]
    assert errors and errors[0]["message"].startswith("corecast stat: error: -m x=nosuch/task_clock")


def test_replay_window(tmp_path):
    trace = tmp_path / "trace.jsonl"
    r = run_corecast("stat", "-c", "task_clock", "-T", "0.05", "--format", "json", "-o", trace, "--",
                     lockbench(), "-t", "2", "-n", "300000", timeout=120)
    assert r.returncode == 0, r.stderr
    recorded = [json.loads(x) for x in trace.read_text().splitlines()]
    dash = Dashboard([str(trace)], "127.0.0.1", 0)

    async def fetch(client):
        all_ = await (await client.get("/api/replay", params={"file": fid(dash, "trace.jsonl")})).json()
        t = all_["info"]["start_s"]
        part = await (await client.get("/api/replay", params={"file": fid(dash, "trace.jsonl"), "from": "0",
                                                              "to": str(t)})).json()
        return all_, part

    all_, part = run_api(dash, fetch)
    assert all_["header"] == recorded[0]
    assert all_["samples"] == [x for x in recorded if x["type"] == "sample"]
    assert all_["summary"] == next(x for x in recorded if x["type"] == "summary")
    assert part["samples"] and all(s["time_s"] <= all_["info"]["start_s"] for s in part["samples"])


# ------------------------------------------------------------------ meters: live and replayed
TRIGGERS = """
[[trigger]]
name = "never"
meter = "psi_cpu_some"
low = 1.5
high = 2.0
"""


def _token(page: str) -> str:
    return re.search(r'name="corecast-token" content="([^"]+)"', page).group(1)


def _sse_lines(body: str) -> list[dict]:
    out = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if fields.get("event") == "lines":
            out.extend(json.loads(fields["data"]))
    return out


def _remove_board(name: str) -> None:
    for p in (Path(f"/dev/shm/corecast-{name}"), Path(f"/dev/shm/corecast-{name}.app")):
        p.unlink(missing_ok=True)


def test_meters_split_and_join_give_the_document_back():
    from corecast.serve import meters as M
    from corecast.meters import Board
    from corecast.meters.exporter import to_json
    name = board_name()
    sleeper = subprocess.Popen(["sleep", "30"])
    p = start_daemon(name, "--pid", sleeper.pid, "--max-threads", 2, "--duration", 30)
    try:
        with Board.open(name) as b:
            b.publish("phase", 3)
            doc = to_json(b.snapshot())
    finally:
        stop(p)
        sleeper.kill()
        sleeper.wait()
    assert {m["level"] for m in doc["meters"]} >= {"node", "process", "thread"} and doc["apps"]
    desc, values = M.split(doc)
    assert M.join(desc, values) == doc
    # the description has no value, the values no description
    assert all("avg" not in m and "source" in m for m in desc["meters"])
    assert all("source" not in v for v in values["meters"]) and "apps" in values and "scopes" not in values


@pytest.mark.slow
def test_live_meters_stream_is_the_show_json_document_and_follows_a_new_daemon(tmp_path, caplog):
    from corecast.serve import meters as M
    name = board_name()
    trig = tmp_path / "t.toml"
    trig.write_text(TRIGGERS)
    p = start_daemon(name, "--triggers", trig, "--duration", 60)
    p2 = None
    dash = Dashboard([], "127.0.0.1", 0)

    async def go(client):
        nonlocal p2
        token = _token(await (await client.get("/")).text())
        st = await (await client.get("/api/state")).json()
        listed = {b["name"]: b for b in st["meters"]["boards"]}
        assert listed[name]["stale"] is None and listed[name]["pid"] == p.pid and listed[name]["triggers"] == 1
        assert st["meters"]["available"] and st["meters"]["default"]
        bad = [await client.post("/api/meters", json=body, headers={"X-Corecast-Token": token})
               for body in ({"blackboard": "no-such-board-q"}, {"blackboard": "../x"},
                            {"blackboard": name, "period": "fast"}, {"blackboard": name, "period": 0})]
        bad = [(r.status, (await r.json())["error"]) for r in bad]
        r = await client.post("/api/meters", json={"blackboard": name, "period": 0.1},
                              headers={"X-Corecast-Token": token})
        assert r.status == 200, await r.text()
        sid = (await r.json())["id"]
        session = dash.sessions[sid]
        for _ in range(300):               # watched while it ticks: five values lines at least
            await asyncio.sleep(0.1)
            if sum('"ticks"' in x for x in session.history) >= 6:
                break
        p.kill()                           # dies without closing its board: stale
        p.wait()
        for _ in range(100):
            await asyncio.sleep(0.1)
            if '"stale": "the daemon' in session.history[-1]:
                break
        n_stale = len(session.history)
        await asyncio.sleep(1.5)           # a stale board's polls are the same: not sent again
        n_later = len(session.history)
        shown = await asyncio.to_thread(run_corecast, "meters", "show", "--blackboard", name, "--json", timeout=60)
        # a new daemon under that name replaces the stale board: the session follows it
        p2 = await asyncio.to_thread(start_daemon, name, "--triggers", trig, "--duration", 60)
        for _ in range(100):
            await asyncio.sleep(0.1)
            if len(session.head) == 2:
                break
        await client.post(f"/api/sessions/{sid}/stop", headers={"X-Corecast-Token": token})
        async with client.get(f"/api/sessions/{sid}/stream") as resp:
            body = await resp.text()
        return bad, n_stale, n_later, json.loads(shown.stdout), _sse_lines(body)

    try:
        bad, n_stale, n_later, shown, lines = run_api(dash, go)
    finally:
        for q in (p, p2):
            if q is not None:
                stop(q)
        _remove_board(name)
    assert bad[0] == (400, f"no blackboard 'no-such-board-q' ({'/dev/shm/corecast-no-such-board-q'} does not exist: "
                           "is `corecast meters --blackboard no-such-board-q` running?)")
    assert bad[1][0] == 400 and "not a blackboard name" in bad[1][1]
    assert bad[2] == (400, "period 'fast' is not a number of seconds") and bad[3] == (400, "period 0: give 0.05 to 10 seconds")
    assert sum("no-such-board-q" in r.getMessage() for r in caplog.records) == 1       # one line in the log
    assert n_later == n_stale
    # the lines put together are the documents `meters show --json` prints
    headers = {x["desc"]: x for x in lines if x["type"] == "header"}
    assert sorted(headers) == [1, 2] and all(h["format"] == "corecast-meters" for h in headers.values())
    docs = [(x["desc"], M.join(headers[x["desc"]]["description"], x["values"])) for x in lines
            if x["type"] in ("header", "meters")]
    first = [d for k, d in docs if k == 1]
    assert first[-1] == shown                       # the dead board, as the CLI reads it
    assert shown["stale"].startswith(f"the daemon (pid {p.pid}) is gone")
    assert len({d["ticks"] for d in first}) >= 5     # it ticked while watched
    assert [t["name"] for t in first[-1]["triggers"]] == ["never"] and first[-1]["triggers"][0]["state"] == "low"
    second = [d for k, d in docs if k == 2]
    assert second and second[-1]["pid"] == p2.pid and second[-1]["stale"] is None
    assert lines[-1]["type"] == "end"
    assert len(json.dumps(lines[-2])) < len(json.dumps(headers[1])) / 2     # the values alone


def _recording(tmp_path: Path, name: str, suffix: str = ".csv") -> Path:
    trig = tmp_path / "t.toml"
    trig.write_text(TRIGGERS)
    rec = tmp_path / f"{name}{suffix}"
    board = board_name()
    try:
        r = run_corecast("meters", "--blackboard", board, "--triggers", trig, "--record", rec, "--duration", "1.5",
                         timeout=120)
    finally:
        _remove_board(board)
    assert r.returncode == 0, r.stderr
    return rec


@pytest.mark.slow
def test_meters_recording_replay_equals_the_cli(tmp_path, cli):
    rec = _recording(tmp_path, "m")
    jrec = _recording(tmp_path, "j", ".json")
    (tmp_path / "t.toml").unlink()
    (tmp_path / "cut.json").write_text(jrec.read_text()[:-200])          # a JSON recording cut short
    dash = Dashboard([str(tmp_path)], "127.0.0.1", 0)

    async def fetch(client):
        st = await (await client.get("/api/state")).json()
        out = {}
        for n in ("m.csv", "j.json", "cut.json"):
            resp = await client.get("/api/replay", params={"file": fid(dash, n)})
            out[n] = (resp.status, await resp.json())
        out["usl"] = (await client.get("/api/usl", params={"file": fid(dash, "m.csv")})).status
        return {f["name"]: f["kind"] for f in st["files"]}, out

    kinds, out = run_api(dash, fetch)
    # the sidecar m.csv.meta.json is not a file of its own; a cut JSON file is a plain (bad) Dataset
    assert kinds == {"m.csv": "meters-recording", "j.json": "meters-recording", "cut.json": "dataset"}
    for f in (rec, jrec):
        status, doc = out[f.name]
        assert status == 200
        assert doc["replay"] == cli("meters", "replay", f, "--json").json()
        assert doc["dataset"] == cli("export", f, "--format", "json").json()
        assert doc["info"]["kind"] == "meters-recording" and doc["info"]["samples_total"] == len(doc["dataset"]["rows"])
        trig = doc["replay"]["triggers"][0]
        assert (trig["trigger"], trig["meter"], trig["low"], trig["high"], trig["dwell_s"]) == \
            ("never", "psi_cpu_some", 1.5, 2.0, 0.0)
        assert {f"{u['meter']}@{u['scope']}": u["reason"] for u in doc["replay"]["unavailable"]} == \
            doc["dataset"]["notes"]["meters"]["unavailable"]
    status, doc = out["cut.json"]
    assert status == 400 and "cut.json" in doc["error"] and "\n" not in doc["error"]
    assert out["usl"] == 400          # a recording is for replay, not for the models


@pytest.mark.slow
def test_meters_replay_json_is_the_recording_summarised(tmp_path, cli):
    """`corecast meters replay --json` (the page's statistics): each series' mean, min, p95 and
    max from the recording's own column, the trigger changes from its 0/1 column."""
    import numpy as np
    from corecast.dataset import load
    rec = _recording(tmp_path, "m")
    doc = cli("meters", "replay", rec, "--json").json()
    text = cli("meters", "replay", rec).out
    ds = load(rec)
    assert doc["windows"] == len(ds) and doc["span_s"] == ds.metrics["elapsed_s"][-1]
    assert doc["interval_s"] == 0.01 and doc["window_s"] == 0.1
    for s in doc["meters"]:
        v = ds.metrics[s["column"]]
        v = v[np.isfinite(v)]
        assert s["meter"] in text
        if not len(v):               # a meter that gave no reading in the windows (a loaded machine): no numbers
            assert s["mean"] is s["min"] is s["max"] is s["p95"] is None, s
            continue
        assert s["mean"] == float(v.mean()) and s["min"] == float(v.min()) and s["max"] == float(v.max())
        assert s["p95"] == float(np.percentile(v, 95))
    (t,) = doc["triggers"]
    assert t["column"] == "trigger:never@node" and t["transitions"] == [] and "no change" in text
    assert not any(np.nan_to_num(ds.metrics[t["column"]]))
    assert {a["scope"] for a in doc["advice"]} >= {"node"}


# ---------------------------------------------------------------- a killed server's live stat
@pytest.mark.slow
def test_live_stat_ends_with_a_server_killed_by_sigkill(tmp_path):
    """SIGKILL of `serve` left its live `corecast stat` (a session of its own) running with its
    command until stat's next row found the pipe gone: a whole interval later (here 60 s, and
    the page allows any). The stat now gets SIGTERM from the kernel when the server dies, and
    ends as it does on SIGTERM: its command and everything else it started go with it."""
    import os
    import signal
    import sys
    import time
    import urllib.request
    from conftest import marked_pids

    mark = f"serve-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, CORECAST_TEST_SERVE_MARK=mark, TMPDIR=str(tmp_path))
    server = subprocess.Popen([sys.executable, "-m", "corecast", "serve", "--listen", "127.0.0.1:0"], env=env,
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = token = None
        end = time.monotonic() + 120
        while time.monotonic() < end and url is None:
            line = server.stdout.readline()
            assert line, "the server ended before it printed its address"
            m = re.search(r"(http://127\.0\.0\.1:\d+)/\?token=(\S+)", line)
            if m:
                url, token = m.group(1), m.group(2)
        assert url, "no address printed"
        auth = {"Authorization": f"token {token}"}
        page = urllib.request.urlopen(urllib.request.Request(url + "/", headers=auth), timeout=60).read().decode()
        page_token = re.search(r'name="corecast-token" content="([^"]+)"', page).group(1)
        body = {"events": ["task_clock"], "interval": 60, "command": ["sleep", "300"]}
        req = urllib.request.Request(url + "/api/stat", data=json.dumps(body).encode(), method="POST",
                                     headers={**auth, "X-Corecast-Token": page_token,
                                              "Content-Type": "application/json"})
        assert urllib.request.urlopen(req, timeout=60).status == 200
        # the stat and its command run
        end = time.monotonic() + 60
        while time.monotonic() < end:
            names = [Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")[0] for p in marked_pids(
                "CORECAST_TEST_SERVE_MARK", mark) if Path(f"/proc/{p}/cmdline").exists()]
            if any(n.rsplit(b"/", 1)[-1] == b"sleep" for n in names):
                break
            time.sleep(0.1)
        else:
            raise AssertionError("the live stat's command never started")
        server.send_signal(signal.SIGKILL)
        server.wait()
        end = time.monotonic() + 30
        while time.monotonic() < end and marked_pids("CORECAST_TEST_SERVE_MARK", mark):
            time.sleep(0.1)
        left = marked_pids("CORECAST_TEST_SERVE_MARK", mark)
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert left == []
        end = time.monotonic() + 30            # stat's sentinel removes its region file
        while time.monotonic() < end and list(tmp_path.iterdir()):
            time.sleep(0.1)
        assert list(tmp_path.iterdir()) == []
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
