"""The dashboard's plots read well (issue 26), in headless chromium: Plotly's toolbar never
covers a panel's title, axis titles never collide with the legend or the tick labels, and a
chart with zeros in it is not on a log axis (the zeros vanished). The page's geometry is read
from the browser (getBoundingClientRect of Plotly's SVG parts) after each page is drawn."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import DATA
from browserkit import CHROMEDRIVER, CHROMIUM, Server, js, lockbench, shot, wait  # noqa: F401

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                                   reason="Debian chromium and chromium-driver are not installed")]

# Boxes of a plot's parts, and the pairs that must not overlap (1 px of slack).
GEOMETRY = r"""
const div = document.getElementById(arguments[0]);
const box = (el) => { const r = el.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
const all = (sel) => [...div.querySelectorAll(sel)].filter((e) => e.getBoundingClientRect().width > 0).map(box);
return {
  title: all(".g-gtitle text"), modebar: all(".modebar-container .modebar"), legend: all(".legend .bg"),
  xtitle: all(".g-xtitle text"), ytitle: all(".g-ytitle text"),
  xticks: all(".xaxislayer-above .xtick text"), yticks: all(".yaxislayer-above .ytick text"),
  yaxis: div._fullLayout.yaxis.type, plot: box(div),
};
"""
PAIRS = [("modebar", "title"), ("legend", "xtitle"), ("legend", "xticks"), ("xtitle", "xticks"), ("ytitle", "yticks"),
         ("legend", "title"), ("legend", "ytitle"), ("modebar", "legend")]


def _overlap(a, b) -> bool:
    return a[0] < b[2] - 1 and b[0] < a[2] - 1 and a[1] < b[3] - 1 and b[1] < a[3] - 1


def problems(browser, div_id: str) -> list[str]:
    g = js(browser, GEOMETRY, div_id)
    out = []
    for a, b in PAIRS:
        for x in g[a]:
            for y in g[b]:
                if _overlap(x, y):
                    out.append(f"{div_id}: {a} {x} overlaps {b} {y}")
    for part in ("title", "legend", "xtitle", "xticks"):          # inside the panel
        for x in g[part]:
            if x[0] < g["plot"][0] - 1 or x[2] > g["plot"][2] + 1 or x[3] > g["plot"][3] + 1:
                out.append(f"{div_id}: {part} {x} outside the panel {g['plot']}")
    return out


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    """A finished campaign whose stall categories are zero at one core (no lock waits alone)."""
    d = tmp_path_factory.mktemp("layout")
    r = subprocess.run([sys.executable, "-m", "corecast", "measure", "-q", "--json", "--cores", "1,2", "--reps", "1",
                        "--warmup", "0", "-o", str(d / "c.db"), "--", lockbench(), "-t", "{threads}", "-n", "400000"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return d / "c.db", json.loads(r.stdout)


def test_campaign_plots_are_laid_out_and_zeros_are_not_on_a_log_axis(browser, campaign):
    path, doc = campaign
    stalls = doc["summary"][0]["stalls"]
    assert stalls and any(s["stalls"].get(n) == 0 for s in doc["summary"] for n in stalls), doc["summary"]
    srv = Server(path)
    try:
        browser.get(srv.login + "#campaigns")
        wait(lambda: js(browser, "return !!(document.getElementById('campaign-stalls') || {}).data"), 60, "the stall chart")
        js(browser, "window.scrollTo(0, 0)")
        for div in ("campaign-time", "campaign-throughput", "campaign-stalls"):
            assert not problems(browser, div), problems(browser, div)
        g = js(browser, GEOMETRY, "campaign-stalls")
        assert g["yaxis"] == "linear"                     # zeros in it: a log axis dropped them
        assert g["legend"] and g["title"] and g["modebar"]
        shot(browser, "layout-campaign")
    finally:
        srv.stop()


def test_predict_and_usl_plots_are_laid_out(browser, tmp_path):
    rows = ["cores,time_s,lock_wait_futex_contended_cycles,runqueue_delay_cycles"]
    for n in (1, 2, 3, 4, 6, 8):
        work, lock, rq = 2.0e9 / n, 4.0e6 * (n - 1) ** 1.6, 1.0e6 * n
        rows.append(f"{n},{(work + lock + rq) / 2.0e9:.9g},{lock:.9g},{rq:.9g}")
    stalls = tmp_path / "stalls.csv"
    stalls.write_text("\n".join(rows) + "\n")
    srv = Server(stalls, DATA / "usl" / "specsdm91.csv")
    try:
        browser.get(srv.login)
        state = browser.execute_async_script(
            "const done = arguments[arguments.length - 1]; fetch('/api/state').then(r => r.json()).then(done);")
        ids = {f["name"]: f["id"] for f in state["files"]}
        browser.get(f"{srv.url}/#predict?file={ids['stalls.csv']}&cores=16,32&method=estima")
        wait(lambda: js(browser, "return !!(document.getElementById('predict-stalls-plot') || {}).data"), 120, "the prediction")
        for div in ("predict-plot", "predict-stalls-plot"):
            assert not problems(browser, div), problems(browser, div)
        # the lock waits are zero at one core: the stall panel is linear
        assert js(browser, GEOMETRY, "predict-stalls-plot")["yaxis"] == "linear"
        shot(browser, "layout-predict")
        browser.get(f"{srv.url}/#usl?file={ids['specsdm91.csv']}&predict=256")
        wait(lambda: js(browser, "return !!(window.corecast.docs.usl)"), 60, "the USL fit")
        div = js(browser, "return document.querySelector('div.plot').id")
        assert not problems(browser, div), problems(browser, div)
        shot(browser, "layout-usl")
    finally:
        srv.stop()
