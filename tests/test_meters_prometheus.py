"""`--listen`: a real Prometheus server (Debian's) scrapes the endpoint on loopback and its
query API returns the meters; promtool accepts the exposition text; no endpoint changes
anything."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from corecast.meters import Board
from corecast.meters.catalog import BY_NAME

from conftest import board_name, start_daemon, stop

pytestmark = pytest.mark.skipif(not shutil.which("prometheus") or not shutil.which("promtool"),
                                reason="needs Debian's prometheus (setup/debian-packages.txt)")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url: str, method: str = "GET") -> tuple[int, bytes, dict]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read(), dict(r.headers)
    except urllib.error.HTTPError as err:
        return err.code, err.read(), dict(err.headers)


@pytest.fixture
def daemon(tmp_path):
    name = board_name()
    port = free_port()
    trig = tmp_path / "t.toml"
    trig.write_text('[[trigger]]\nname = "cpu"\nmeter = "cpu_busy"\nlow = 0.1\nhigh = 0.99\n')
    p = start_daemon(name, "--listen", str(port), "--interval", "10ms", "--triggers", trig)
    yield name, port
    stop(p)


@pytest.mark.slow
def test_endpoint_exposition_and_read_only(daemon, tmp_path):
    name, port = daemon
    code, body, headers = get(f"http://127.0.0.1:{port}/metrics")
    assert code == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    text = body.decode()
    (tmp_path / "m.txt").write_text(text)
    r = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '# TYPE corecast_cpu_busy_ratio gauge' in text
    assert '# TYPE corecast_cpu_busy_seconds_total counter' in text
    assert 'corecast_cpu_busy_ratio{scope="node",level="node",stat="avg"}' in text
    assert 'corecast_trigger_state{trigger="cpu",meter="cpu_busy",scope="node",state="low"}' in text
    assert 'corecast_allowed_workers{scope="node"}' in text
    # an unavailable meter is described, never given a value
    with Board.open(name) as b:
        gone = [m for m in b.meters() if m.quality == "unavailable"]
        live = [m for m in b.meters() if m.quality != "unavailable"]
    samples = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert gone and live
    for m in gone:
        assert f'corecast_meter_info{{meter="{m.name}",scope="{m.scope}",unit="{m.unit}",quality="unavailable"' in text
        family = BY_NAME[m.name].prom
        assert not [s for s in samples if s.startswith(family + "{") and f'scope="{m.scope}"' in s]
    # /meters.json is the board
    code, body, _ = get(f"http://127.0.0.1:{port}/meters.json")
    doc = json.loads(body)
    assert code == 200 and doc["blackboard"] == name and doc["stale"] is None
    assert {(m["name"], m["scope"]) for m in doc["meters"]} == {(m.name, m.scope) for m in live + gone}
    # nothing changes state: other methods refused, HEAD answered, unknown paths 404
    for method in ("POST", "PUT", "DELETE"):
        assert get(f"http://127.0.0.1:{port}/metrics", method)[0] == 405
    assert get(f"http://127.0.0.1:{port}/metrics", "HEAD")[0] == 200
    assert get(f"http://127.0.0.1:{port}/admin")[0] == 404
    # loopback by default: nothing answers on the machine's other addresses
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    assert s.getpeername()[0] == "127.0.0.1"
    s.close()
    others = [a for a in {i[4][0] for i in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
              if not a.startswith("127.")]
    for addr in others:
        with pytest.raises(OSError):
            socket.create_connection((addr, port), timeout=2).close()


@pytest.mark.slow
def test_real_prometheus_scrapes_and_queries(daemon, tmp_path):
    name, port = daemon
    prom_port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(f"""
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: corecast
    static_configs:
      - targets: ["127.0.0.1:{port}"]
""")
    prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{prom_port}"
    try:
        def query(q):
            code, body, _ = get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": q}))
            assert code == 200, body
            return json.loads(body)["data"]["result"]

        end = time.monotonic() + 60
        result = []
        while time.monotonic() < end and not result:
            time.sleep(0.5)
            try:
                result = query('corecast_cpu_busy_ratio{scope="node",stat="avg"}')
            except (urllib.error.URLError, ConnectionError, AssertionError):
                result = []
        assert result, prom.stderr.read() if prom.poll() is not None else "no sample scraped in 60 s"
        v = float(result[0]["value"][1])
        assert 0.0 <= v <= 1.0 and result[0]["metric"]["job"] == "corecast"
        def until(fn, what, seconds=30.0):
            # a loaded machine can make one scrape miss its 1 s timeout: the next one counts
            end = time.monotonic() + seconds
            while True:
                v = fn()
                if v or time.monotonic() > end:
                    assert v, f"{what} within {seconds:.0f} s"
                    return v
                time.sleep(0.5)

        until(lambda: [r for r in query('up{job="corecast"}') if r["value"][1] == "1"], "up = 1")
        info = query('corecast_meter_info{quality="measured"}')
        assert {r["metric"]["meter"] for r in info} >= {"cpu_busy", "cpu_steal"}
        # counters grow between scrapes: Prometheus computes a rate from them
        # (a rate from the first two scrapes is extrapolated from one second: wait for four)
        until(lambda: [r for r in query('count_over_time(corecast_meters_ticks_total[5s])')
                       if float(r["value"][1]) >= 4], "four scrapes in 5 s")
        rate = query('rate(corecast_meters_ticks_total[5s])')
        assert 50 <= float(rate[0]["value"][1]) <= 150       # 10 ms ticks: ~100 per second
        targets = until(lambda: [t for t in json.loads(get(f"{base}/api/v1/targets")[1])["data"]["activeTargets"]
                                 if t["health"] == "up" and t["lastError"] == ""], "a healthy scrape")
        assert targets[0]["scrapeUrl"].startswith("http://127.0.0.1:")
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
