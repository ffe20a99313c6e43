"""`corecast serve` in a real browser: headless Debian chromium driven by Selenium.

What a person sees: the page loads with plotly from the package (offline), a live stat shows
its task_clock series growing and is stopped from the page, a campaign being measured gains
its second core count without a reload, a prediction shows its band, the numbers equal the
CLI's --json, and bad input is one line on the page. Screenshots are saved as test artefacts
(CORECAST_ARTEFACTS, default out/test-artefacts/serve).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, run_corecast
from fakes import stalls_csv
from browserkit import CHROMEDRIVER, CHROMIUM, Server, js, lockbench, shot, wait  # noqa: F401

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install '.[test]')")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER),
    reason="Debian chromium and chromium-driver are not installed (setup/debian-packages.txt)")]


def series_points(browser, name: str) -> tuple[int, float]:
    """(points, largest time) in the live plot of `name`, as plotly holds them."""
    return tuple(js(browser, """
        const d = document.querySelector(`div.plot[data-series="${arguments[0]}"]`);
        if (!d || !d.data) return [0, 0];
        let n = 0, t = 0;
        for (const tr of d.data) { n += tr.x.length; for (const x of tr.x) t = Math.max(t, x); }
        return [n, t];""", name))


def errors_shown(browser) -> list[str]:
    return [e.text for e in browser.find_elements("css selector", ".error")]


# ------------------------------------------------------------------------------------------
def test_live_stat_grows_and_stops_from_the_page(browser, tmp_path):
    srv = Server()
    try:
        browser.get(srv.login + "#live")
        wait(lambda: js(browser, "return typeof Plotly === 'object' && !!document.querySelector('#stat-events input')"),
             what="the page and this machine's catalogue")
        # the secret left the address bar, and the page's script cannot read the cookie (HttpOnly)
        assert browser.current_url == srv.url + "/#live"
        assert srv.secret not in js(browser, "return document.cookie + document.documentElement.outerHTML")
        # every resource came from this server (plotly included): the page works offline
        urls = js(browser, "return performance.getEntriesByType('resource').map(e => e.name)")
        assert urls and all(u.startswith(srv.url) for u in urls), urls
        # unavailable events are shown as such, with the reason
        unavailable = browser.find_elements("css selector", "#stat-events label.unavailable")
        if unavailable:
            assert unavailable[0].find_element("css selector", ".why").text
        cmd = browser.find_element("id", "stat-command")
        cmd.clear()
        cmd.send_keys(f"{lockbench()} -t 2 -n 200000000")
        interval = browser.find_element("id", "stat-interval")
        interval.clear()
        interval.send_keys("0.25")
        box = browser.find_element("css selector", '#stat-events input[value="task_clock"]')
        if not box.is_selected():
            box.click()
        browser.find_element("id", "stat-start").click()
        n1, t1 = wait(lambda: (lambda p: p if p[0] >= 2 else None)(series_points(browser, "task_clock")),
                      what="the first task_clock points")
        # the plot goes on as the ticks come (waited for: a loaded machine's browser may lag)
        n2, t2 = wait(lambda: (lambda p: p if p[0] > n1 and p[1] >= t1 + 2.0 else None)(
            series_points(browser, "task_clock")), 60, "task_clock points 2 s on")
        assert n2 > n1 and t2 >= t1 + 2.0, (n1, t1, n2, t2)
        shot(browser, "live")
        browser.find_element("css selector", "button[data-stop]").click()
        wait(lambda: browser.find_element("id", "stat-status").text.startswith("ended"), 30, "the stat to end")
        wait(lambda: browser.find_element("id", "stat-totals").text, 10, "the totals")
        assert "task_clock" in browser.find_element("id", "stat-totals").text
        # a live stat's values are the stat command's JSON lines
        y = js(browser, "return document.querySelector('div.plot[data-series=\"task_clock\"]').data.flatMap(t => t.y)")
        assert any(v and v > 0 for v in y)
        assert not errors_shown(browser)

        # an unknown event chosen: one line by the form, and the server keeps serving
        extra = browser.find_element("id", "stat-extra")
        extra.send_keys("no_such_event_xyz")
        browser.find_element("id", "stat-start").click()
        msg = wait(lambda: [e for e in errors_shown(browser) if "no_such_event_xyz" in e], 30, "the error line")[0]
        assert msg.startswith("event spec '") and "unknown event 'no_such_event_xyz'" in msg and "Traceback" not in msg
        shot(browser, "live-unknown-event")
        # a metric stat refuses: its one line on the session's view
        extra.clear()
        browser.find_element("id", "stat-metrics").send_keys("x=nosuch/task_clock")
        browser.find_element("id", "stat-start").click()
        msg = wait(lambda: [e for e in errors_shown(browser) if "nosuch" in e], 30, "stat's error line")[0]
        assert msg.startswith("corecast stat: error: -m x=nosuch/task_clock") and "Traceback" not in msg
        js(browser, "window.scrollTo(0, 0)")
        shot(browser, "live-bad-metric")
        browser.find_element("id", "stat-metrics").clear()
        # a pid that exits: the stat ends by itself and the page says so
        sleeper = subprocess.Popen(["sleep", "1.5"])
        browser.find_element("css selector", "#stat-target option[value=pid]").click()
        browser.find_element("id", "stat-pid").send_keys(str(sleeper.pid))
        browser.find_element("id", "stat-start").click()
        wait(lambda: browser.find_element("id", "stat-status").text.startswith("ended"), 30, "the pid's stat to end")
        sleeper.wait(10)
        assert js(browser, "return fetch('/api/state').then(r => r.status)") == 200
    finally:
        log = srv.stop()
    assert "Traceback" not in log
    assert "no_such_event_xyz" in log and "nosuch" in log     # the errors are in the server log too


def test_campaign_gains_its_second_core_count_without_a_reload(browser, tmp_path):
    camp = tmp_path / "live.db"
    # each run takes ~1 s on this machine, so the page sees 1 core before 2
    measure = subprocess.Popen([sys.executable, "-m", "corecast", "measure", "--cores", "1,2", "--reps", "1",
                                "--warmup", "0", "-q", "--json", "-o", str(camp), "--", lockbench(),
                                "-t", "{threads}", "-n", "3000000"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    srv = None
    try:
        wait(lambda: camp.exists(), 60, "the campaign file")
        srv = Server(tmp_path)
        browser.get(srv.login + "#campaigns")
        js(browser, "window.__marker = 'same page'")
        rows = lambda: browser.find_elements("css selector", "table.campaign-summary tbody tr")  # noqa: E731
        # the page starts before the first run is recorded, or with one core count
        wait(lambda: len(rows()) <= 1, 30, "the page")
        first = len(rows())
        wait(lambda: len(rows()) == 2, 120, "the second core count")
        assert js(browser, "return window.__marker") == "same page"   # no reload
        assert first <= 1
        assert [r.find_elements("css selector", "td")[0].text for r in rows()] == ["1", "2"]
        out, err = measure.communicate(timeout=120)
        assert measure.returncode == 0, err
        # wait for the page to show the last write, then compare with `measure --json`
        want = json.loads(out)
        wait(lambda: js(browser, "return window.corecast.docs.campaign.measure.runs") == want["runs"], 30, "the last run")
        doc = js(browser, "return window.corecast.docs.campaign.measure")
        assert doc == json.loads(json.dumps(want, default=str))
        cells = [r.find_elements("css selector", "td")[2].text for r in rows()]
        assert cells == [js(browser, "return fmt(arguments[0])", s["time_s"][0]) for s in want["summary"]]
        points = js(browser, "return document.getElementById('campaign-time').data[1].y")
        assert points == [s["time_s"][0] for s in want["summary"]]
        # the spread of the repetitions (min, max) and the stall categories per core count
        spread = [[td.text for td in r.find_elements("css selector", "td")][3:5] for r in rows()]
        assert spread == [[js(browser, "return fmt(arguments[0])", v) for v in s["time_s"][1:]] for s in want["summary"]]
        stalls = js(browser, "return document.getElementById('campaign-stalls').data.map(t => [t.name, t.y])")
        assert stalls and stalls == [[n, [s["stalls"][n] for s in want["summary"]]] for n in want["summary"][0]["stalls"]]
        shot(browser, "campaign")
        # the campaign file damaged while served: one line on the page, the server goes on
        camp.write_bytes(b"SQLite format 3\x00" + b"\x07" * 8192)
        Path(str(camp) + "-wal").unlink(missing_ok=True)
        line = wait(lambda: errors_shown(browser), 30, "the error line")[0]
        assert "live.db" in line and "Traceback" not in line
        shot(browser, "campaign-damaged")
        assert js(browser, "return fetch('/api/state').then(r => r.status)") == 200
    finally:
        if measure.poll() is None:
            measure.kill()
            measure.communicate()
        if srv:
            log = srv.stop()
            assert "Traceback" not in log


def test_prediction_and_usl_pages_show_the_cli_numbers(browser, tmp_path):
    stalls = stalls_csv(tmp_path / "stalls.csv")
    ray = tmp_path / "raytracer.csv"
    shutil.copy(DATA / "usl" / "raytracer.csv", ray)
    trace = tmp_path / "trace.jsonl"
    r = run_corecast("stat", "-c", "task_clock,context_switches", "-m", "utilization", "-T", "0.1", "--format", "json",
                     "-o", trace, "--", lockbench(), "-t", "2", "-n", "2000000", timeout=120)
    assert r.returncode == 0, r.stderr
    srv = Server(stalls, ray, trace)
    try:
        state = json.loads(js_fetch(browser, srv, "/api/state"))
        ids = {f["name"]: f["id"] for f in state["files"]}
        browser.get(f"{srv.url}/#predict?file={ids['stalls.csv']}&cores=16,32&method=estima")
        wait(lambda: js(browser, "return !!(window.corecast.docs.predict)"), 120, "the prediction")
        want = json.loads(run_corecast("predict", stalls, "--cores", "16,32", "--method", "estima", "--json").stdout)
        assert js(browser, "return window.corecast.docs.predict.doc") == want
        band = js(browser, """const d = document.getElementById('predict-plot').data;
                              const t = d.find(t => /band/.test(t.name)); return [t.y, d[0].y];""")
        assert band[0] and all(v is not None for v in band[0]) and band[1]
        cells = [[td.text for td in tr.find_elements("css selector", "td")]
                 for tr in browser.find_elements("css selector", "table.predictions tbody tr")]
        assert [c[0] for c in cells] == ["16", "32"]
        assert [c[1] for c in cells] == [js(browser, "return fmt(arguments[0])", p["time_s"]) for p in want["predictions"]]
        assert browser.find_elements("css selector", "table.bottlenecks tbody tr")
        assert js(browser, "return document.getElementById('predict-stalls-plot').data.length") > 0
        shot(browser, "predict")
        # the methods offered are the registry's (through /api/registry)
        from corecast.model.predictors import METHODS
        assert js(browser, "return [...document.querySelectorAll('#predict-method option')].map(o => o.value)") == \
            list(METHODS)
        # another machine, chosen on the page: the CLI's --target-machine document
        assert "epyc-9654-2s" in js(browser, "return [...document.querySelectorAll('#predict-machines option')].map(o => o.value)")
        browser.find_element("id", "predict-machine").send_keys("epyc-9654-2s")
        browser.find_element("css selector", "#predict-placement option[value=spread]").click()
        js(browser, "window.corecast.docs.predict = null")
        browser.find_element("id", "predict-go").click()
        wait(lambda: js(browser, "return !!(window.corecast.docs.predict)"), 120, "the prediction for the target")
        want = json.loads(run_corecast("predict", stalls, "--cores", "16,32", "--method", "estima", "--target-machine",
                                       "epyc-9654-2s", "--placement", "spread", "--json").stdout)
        assert js(browser, "return window.corecast.docs.predict.doc") == want
        assert "384 CPUs (epyc-9654-2s), placement spread" in browser.find_element("id", "predict-target").text
        cells = [[td.text for td in tr.find_elements("css selector", "td")]
                 for tr in browser.find_elements("css selector", "table.predictions tbody tr")]
        assert [c[5:7] for c in cells] == [[str(p["sockets_used"]), "yes" if p["smt_shared"] else "no"]
                                           for p in want["predictions"]]
        shot(browser, "predict-target")

        browser.get(f"{srv.url}/#usl?file={ids['raytracer.csv']}&predict=64")
        wait(lambda: js(browser, "return !!(window.corecast.docs.usl)"), 60, "the USL fit")
        want = json.loads(run_corecast("usl", ray, "--predict", "64", "--json").stdout)
        assert js(browser, "return window.corecast.docs.usl.doc") == want
        alpha = browser.find_elements("css selector", "table.usl-params tbody tr td")[1].text
        assert alpha == js(browser, "return fmt(arguments[0])", want["alpha"])
        shot(browser, "usl")

        browser.get(f"{srv.url}/#replay?file={ids['trace.jsonl']}")
        wait(lambda: series_points(browser, "task_clock")[0] > 0, 30, "the replayed trace")
        n_all = series_points(browser, "task_clock")[0]
        recorded = [json.loads(x) for x in trace.read_text().splitlines()]
        want_n = sum(1 for x in recorded if x["type"] == "sample" for c in x["counters"] if c["name"] == "task_clock")
        assert n_all == want_n
        slider = browser.find_element("id", "replay-slider")
        js(browser, "arguments[0].value = arguments[0].min; arguments[0].dispatchEvent(new Event('input'))", slider)
        wait(lambda: 0 < series_points(browser, "task_clock")[0] < n_all, 10, "the slider to go back")
        shot(browser, "replay")
    finally:
        log = srv.stop()
    assert "Traceback" not in log


def js_fetch(browser, srv: Server, path: str) -> str:
    browser.get(srv.login)
    return browser.execute_async_script(
        "const done = arguments[arguments.length - 1]; fetch(arguments[0]).then(r => r.text()).then(done);", path)


# ------------------------------------------------------------------------------------------ meters
TRIGGERS = """
[[trigger]]
name = "busy-core"          # a core whose CPU is busy: the spinner's core goes HIGH
meter = "cpu_busy"
scope = "core"
low = 0.4
high = 0.6

[[trigger]]
name = "cpu-pressure"       # stays LOW (PSI's share of time stalled never exceeds 1)
meter = "psi_cpu_some"
low = 1.5
high = 2.0
"""


def spinner(cpu: int = 0) -> subprocess.Popen:
    """A process that keeps one CPU busy (so that a cpu_busy trigger there goes HIGH)."""
    return subprocess.Popen([sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])


def board_name(tag: str) -> str:
    return f"serve-{tag}-{os.getpid()}"


def remove_board(name: str) -> None:
    for p in (Path(f"/dev/shm/corecast-{name}"), Path(f"/dev/shm/corecast-{name}.app")):
        p.unlink(missing_ok=True)


def start_daemon(name: str, log: Path, *args) -> subprocess.Popen:
    """A meters daemon writing its log (a line per trigger change) to `log`, not to a pipe
    nobody reads while the test runs."""
    from corecast.errors import UserError
    from corecast.meters import Board
    with open(log, "w") as fh:
        p = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", name, *map(str, args)],
                             stdout=subprocess.DEVNULL, stderr=fh)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise AssertionError(f"the meters daemon ended: {log.read_text()}")
        try:
            with Board.open(name) as b:
                if b.state == "running" and b.header.ticks >= 2 and b.pid == p.pid:
                    return p
        except UserError:
            pass
        time.sleep(0.05)
    p.kill()
    raise AssertionError("the meters daemon did not start")


def meter_points(browser, name: str) -> tuple[int, float]:
    """(points with a value, largest time) in the meters plot of `name` (its scopes' lines, not
    the red underlines of a trigger's HIGH spans)."""
    return tuple(js(browser, """
        const d = document.querySelector(`#meters-plots div.plot[data-meter="${arguments[0]}"]`);
        if (!d || !d.data) return [0, 0];
        let n = 0, t = 0;
        for (const tr of d.data.filter(tr => tr.meta !== 'trigger-high'))
          tr.x.forEach((x, i) => { if (tr.y[i] !== null) { n++; t = Math.max(t, x); } });
        return [n, t];""", name))


def high_spans(browser, name: str) -> dict[str, int]:
    """Points underlined as HIGH in the meters plot of `name`, per trigger and scope."""
    return js(browser, """
        const d = document.querySelector(`#meters-plots div.plot[data-meter="${arguments[0]}"]`);
        const out = {};
        for (const tr of (d && d.data || []).filter(tr => tr.meta === 'trigger-high'))
          out[tr.name] = tr.y.filter(v => v !== null).length;
        return out;""", name)


def table_rows(browser, css: str) -> list[list[str]]:
    """The cells' text of a table the page redraws as it updates (read in one go)."""
    return js(browser, """return [...document.querySelectorAll(arguments[0] + ' tbody tr')]
                          .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))""", css)


def test_live_meters_update_show_triggers_and_a_stale_board(browser, tmp_path):
    name = board_name("live")
    trig = tmp_path / "triggers.toml"
    trig.write_text(TRIGGERS)
    spin = spinner(0)
    daemon = start_daemon(name, tmp_path / "meters.log", "--triggers", trig, "--duration", 120)
    srv = None
    try:
        srv = Server()
        browser.get(srv.login + "#live")
        board = wait(lambda: browser.find_element("id", "meters-board"), what="the meters panel")
        assert board.get_attribute("value") == (os.environ.get("CORECAST_METERS") or "default")
        # the boards on this machine are listed, this one live
        found = wait(lambda: browser.find_element("css selector", f'#meters-boards a[data-board="{name}"]'), 10)
        assert found.find_elements("css selector", "span")[1].text == "live"
        found.click()
        assert board.get_attribute("value") == name
        period = browser.find_element("id", "meters-period")
        period.clear()
        period.send_keys("0.25")
        browser.find_element("id", "meters-watch").click()
        n1, t1 = wait(lambda: (lambda p: p if p[0] >= 2 else None)(meter_points(browser, "cpu_busy")), 30,
                      "the first cpu_busy points")
        n2, t2 = wait(lambda: (lambda p: p if p[0] > n1 and p[1] >= t1 + 2.0 else None)(
            meter_points(browser, "cpu_busy")), 60, "cpu_busy points 2 s on")
        assert n2 > n1 and t2 >= t1 + 2.0, (n1, t1, n2, t2)     # the plot scrolls on as the board ticks
        status = browser.find_element("id", "meters-status").text
        assert status.startswith(f"blackboard {name} · daemon pid {daemon.pid}") and "stale" not in status
        # the spinner's core: its trigger HIGH on the page; the levels drawn on cpu_busy's plot
        wait(lambda: any(r[0] == "busy-core" and r[1] == "core0" and r[3] == "HIGH"
                         for r in table_rows(browser, "table.meters-triggers")), 30, "busy-core at core0 HIGH")
        rows = table_rows(browser, "table.meters-triggers")
        assert any(r[0] == "cpu-pressure" and r[3] == "LOW" for r in rows), rows
        assert high_spans(browser, "cpu_busy").get("busy-core@core0 HIGH", 0) > 0
        levels = js(browser, """return document.querySelector('#meters-plots div.plot[data-meter="cpu_busy"]')
                                .layout.shapes.filter(s => s.type === 'line').map(s => s.y0)""")
        assert 0.4 in levels and 0.6 in levels
        advice = table_rows(browser, "table.meters-advice")
        assert [r[0] for r in advice][:1] == ["node"] and all(r[1].isdigit() for r in advice)
        # unavailable meters: listed with their reason, never plotted
        doc = js(browser, "return window.corecast.docs.meters")
        gone = {m["name"] for m in doc["meters"] if m["quality"] == "unavailable"}
        live = {m["name"] for m in doc["meters"] if m["quality"] != "unavailable"}
        listed = {e.get_attribute("data-meter"): e.text for e in
                  browser.find_elements("css selector", "#meters-unavailable li")}
        assert set(listed) == gone - live or set(listed) >= gone - live
        for m in gone - live:
            assert listed[m] and ": " in listed[m]
            assert not browser.find_elements("css selector", f'#meters-plots div.plot[data-meter="{m}"]')
        shot(browser, "meters-live")

        # the daemon dies without closing its board: the page says it is stale, and why
        daemon.kill()
        daemon.wait(10)
        stale = wait(lambda: browser.find_element("id", "meters-stale").text, 30, "the stale message")
        assert f"the daemon (pid {daemon.pid}) is gone" in stale and "Traceback" not in stale
        assert "stale" in browser.find_element("id", "meters-status").text
        # the page's document is the one `corecast meters show --json` prints (a dead board stands still)
        time.sleep(1.5)
        want = json.loads(run_corecast("meters", "show", "--blackboard", name, "--json", timeout=60).stdout)
        assert js(browser, "return window.corecast.docs.meters") == want
        cells = {(r[0], r[1]): r for r in table_rows(browser, "table.meters-triggers")}
        for t in want["triggers"]:
            r = cells[(t["name"], t["scope"])]
            assert r[3] == t["state"].upper() and r[4] == js(browser, "return fmt(arguments[0])", t["value"])
        js(browser, "window.scrollTo(0, 0)")
        shot(browser, "meters-stale")

        # a board that does not exist: one line by the form and in the server log; the server goes on
        board.clear()
        board.send_keys("no-such-board-xyz")
        browser.find_element("id", "meters-watch").click()
        msg = wait(lambda: [e for e in errors_shown(browser) if "no-such-board-xyz" in e], 30, "the error line")[0]
        assert msg.startswith("no blackboard 'no-such-board-xyz'") and "\n" not in msg
        # the board list was read again: the dead daemon's board is there, stale
        found = browser.find_element("css selector", f'#meters-boards a[data-board="{name}"]')
        assert found.find_elements("css selector", "span")[1].text == "stale"
        assert f"the daemon (pid {daemon.pid}) is gone" in found.get_attribute("title")
        shot(browser, "meters-no-board")
        assert js(browser, "return fetch('/api/state').then(r => r.status)") == 200
    finally:
        spin.kill()
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait(10)
        remove_board(name)
        log = srv.stop() if srv else ""
    assert "Traceback" not in log
    assert sum("no-such-board-xyz" in line for line in log.splitlines()) == 1


def test_meters_recording_replays_with_the_slider(browser, tmp_path):
    name = board_name("rec")
    trig = tmp_path / "triggers.toml"
    trig.write_text(TRIGGERS)
    rec = tmp_path / "meters.csv"
    spin = spinner(0)
    try:
        r = run_corecast("meters", "--blackboard", name, "--triggers", trig, "--record", rec, "--duration", "3",
                         timeout=120)
    finally:
        spin.kill()
        remove_board(name)
    assert r.returncode == 0, r.stderr
    # a copy with a garbled cell: a corrupt recording
    bad = tmp_path / "broken.csv"
    lines = rec.read_text().splitlines()
    lines[5] = lines[5].replace(",", ",x", 1)
    bad.write_text("\n".join(lines) + "\n")
    shutil.copy(rec.with_name("meters.csv.meta.json"), tmp_path / "broken.csv.meta.json")
    srv = Server(rec, bad)
    try:
        state = json.loads(js_fetch(browser, srv, "/api/state"))
        kinds = {f["name"]: f["kind"] for f in state["files"]}
        assert kinds == {"meters.csv": "meters-recording", "broken.csv": "meters-recording"}
        ids = {f["name"]: f["id"] for f in state["files"]}
        browser.get(f"{srv.url}/#replay?file={ids['meters.csv']}")
        wait(lambda: meter_points(browser, "cpu_busy")[0] > 0, 30, "the replayed recording")
        want = json.loads(run_corecast("meters", "replay", rec, "--json", timeout=60).stdout)
        assert js(browser, "return window.corecast.docs.replay.replay") == want
        rows = json.loads(run_corecast("export", rec, "--format", "json", timeout=60).stdout)
        assert js(browser, "return window.corecast.docs.replay.dataset") == rows
        # every window of each scope is a point; the statistics are the CLI's
        n_all = meter_points(browser, "cpu_busy")[0]
        scopes = [s for s in want["meters"] if s["meter"] == "cpu_busy"]
        assert n_all == sum(1 for row in rows["rows"] for s in scopes if row[s["column"]] is not None)
        stats = {(c[0], c[1]): c for c in table_rows(browser, "table.meters-replay")}
        for s in want["meters"]:
            assert stats[(s["meter"], s["scope"])][2] == js(browser, "return fmt(arguments[0])", s["mean"])
        assert browser.find_elements("css selector", "table.meters-triggers tbody tr")
        shot(browser, "meters-replay")
        # the slider back to the start: fewer points, and the triggers as they were then
        slider = browser.find_element("id", "replay-slider")
        half = (want["span_s"]) / 2
        js(browser, "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))", slider, half)
        wait(lambda: 0 < meter_points(browser, "cpu_busy")[0] < n_all, 10, "the slider to go back")
        assert meter_points(browser, "cpu_busy")[1] <= half
        t = [row["elapsed_s"] for row in rows["rows"]]
        i = max(k for k, x in enumerate(t) if x <= half)
        cells = {(r[0], r[1]): r[3] for r in table_rows(browser, "table.meters-triggers")}
        for tr in want["triggers"]:
            v = rows["rows"][i][tr["column"]]
            assert cells[(tr["trigger"], tr["scope"])] == ("HIGH" if v else "LOW")
        spans = high_spans(browser, "cpu_busy")
        for tr in want["triggers"]:
            if tr["meter"] == "cpu_busy":
                high = sum(1 for row in rows["rows"][:i + 1] if row[tr["column"]] and row[f"cpu_busy@{tr['scope']}"] is not None)
                assert spans[f"{tr['trigger']}@{tr['scope']} HIGH"] == high
        shot(browser, "meters-replay-half")
        # a corrupt recording: one line on the page, and the server goes on
        browser.get(f"{srv.url}/#replay?file={ids['broken.csv']}")
        line = wait(lambda: errors_shown(browser), 30, "the error line")[0]
        assert line.startswith(f"{bad}:6: column 'elapsed_s'") and "is not a number" in line and "\n" not in line
        shot(browser, "meters-replay-corrupt")
        assert js(browser, "return fetch('/api/state').then(r => r.status)") == 200
    finally:
        log = srv.stop()
    assert "Traceback" not in log
    assert sum(f"{bad}:6:" in line for line in log.splitlines()) == 1      # one line in the server log


def test_text_from_files_reaches_plotly_as_text(browser, tmp_path):
    """Plotly reads a little HTML in titles, legend names and hover labels: a trace or a column
    named by another user's file put a working link (and restyled text) on the owner's page.
    Names go through ptext(): shown as written, no element made of them."""
    ray = tmp_path / "raytracer.csv"
    shutil.copy(DATA / "usl" / "raytracer.csv", ray)
    srv = Server(ray)
    try:
        browser.get(srv.login + "#usl")
        wait(lambda: js(browser, "return typeof plot === 'function' && typeof Plotly === 'object'"), 60, "the page")
        bad = '<a href="https://example.invalid/" target="_top">click</a><span style="font-size:40px">BIG</span>'
        got = js(browser, """const div = document.createElement('div'); document.body.append(div);
            plot(div, [{x: [1, 2], y: [1, 2], name: arguments[0]}, {x: [1, 2], y: [2, 3], name: 'other'}],
                 {title: {text: `X(N) from ${ptext(arguments[0])}`}});
            const svg = div.querySelector('svg.main-svg').parentNode;
            return [svg.querySelectorAll('a').length, div.textContent.includes('<a href='),
                    [...svg.querySelectorAll('[style*="font-size: 40px"]')].length];""", bad)
        assert got == [0, True, 0], got
        # and the page runs only its own scripts: an inline one is refused, the page works on
        head = js(browser, "return fetch('/').then(r => r.headers.get('Content-Security-Policy'))")
        assert "script-src 'self'" in head and "unsafe-eval" not in head
        js(browser, "const s = document.createElement('script'); s.textContent = 'window.__inline = 1';"
                    "document.body.append(s)")
        assert js(browser, "return window.__inline === undefined")
        browser.get(srv.login + "#usl")
        wait(lambda: js(browser, "return !!document.querySelector('nav a')"), 30, "the page again")
        refused = [e["message"] for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
        assert all("__inline" in m or "inline script" in m.lower() for m in refused), refused
    finally:
        log = srv.stop()
    assert "Traceback" not in log
