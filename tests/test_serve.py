"""`corecast serve` without a browser: its API documents equal the commands' --json, user
mistakes end in one line (exit 2 at start, an error document while serving), the guards hold,
and a live stat session streams the stat command's own JSON lines."""
from __future__ import annotations

import asyncio
import json
import re
import shutil
import socket
from pathlib import Path

import pytest

aiohttp = pytest.importorskip("aiohttp")
from aiohttp.test_utils import TestClient, TestServer  # noqa: E402

from corecast.serve.app import Dashboard  # noqa: E402
from corecast.serve.server import parse_listen  # noqa: E402
from corecast.errors import UserError  # noqa: E402

from conftest import DATA, run_corecast  # noqa: E402

RAYTRACER = DATA / "usl" / "raytracer.csv"


def lockbench() -> str:
    from corecast.native import native_path
    return str(native_path("corecast-lockbench"))


def run_api(dash: Dashboard, fn):
    """Run `fn(client)` against the dashboard's app on a test server (127.0.0.1)."""
    async def go():
        server = TestServer(dash.app(), host="127.0.0.1", port=0)
        async with TestClient(server) as client:
            dash.port = server.port
            return await fn(client)
    return asyncio.run(asyncio.wait_for(go(), 120))


def fid(dash: Dashboard, name: str) -> str:
    dash.registry.scan()
    return next(e.id for e in dash.registry.files.values() if e.path.name == name)


@pytest.fixture
def files(tmp_path: Path) -> Path:
    shutil.copy(RAYTRACER, tmp_path / "raytracer.csv")
    rows = ["cores,time_s,lock_wait_cycles,runqueue_delay_cycles"]
    for n in (1, 2, 3, 4, 6, 8):
        work, lock, rq = 2.0e9 / n, 4.0e6 * (n - 1) ** 1.6, 1.0e6 * n
        rows.append(f"{n},{(work + lock + rq) / 2.0e9:.9g},{lock:.9g},{rq:.9g}")
    (tmp_path / "stalls.csv").write_text("\n".join(rows) + "\n")
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
