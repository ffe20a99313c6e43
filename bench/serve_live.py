"""corecast serve under load: a live stat of 64 threads x 8 software events at 10 Hz, streamed
to a subscribed client; prints the server process's own CPU use (the stat child apart) and
whether the client kept up (lines received vs lines the stat wrote). With --browser, the live
page is open in headless chromium as well, and its rows and latest sample time are printed
each second (does the page keep up)."""
from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import header  # noqa: E402

SECONDS = 10.0
EVENTS = "task_clock,cpu_clock,context_switches,cpu_migrations,page_faults,minor_faults,major_faults,alignment_faults"


def cpu_s(pid: int) -> float:
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def browser_watch(url: str, seconds: float) -> list[tuple[float, int, float, int]] | str:
    """The live page in headless chromium, watching the newest session: every second, (wall
    time, rows the page holds, its latest sample time, plots drawn so far)."""
    import shutil
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        return "no chromium/chromedriver: the page was not measured"
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return "no selenium: the page was not measured"
    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        o.add_argument(a)
    o.binary_location = shutil.which("chromium")
    d = webdriver.Chrome(options=o, service=Service(shutil.which("chromedriver")))
    out = []
    try:
        d.get(url + "#live")
        d.execute_script("window.__draws = 0; const r = Plotly.react; Plotly.react = function() { window.__draws++; return r.apply(this, arguments); };")
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(1.0)
            v = d.execute_script("const v = window.corecast.views.live; return v ? [v.rows, v.tmax, window.__draws] : [0, 0, 0];")
            if not v[0]:
                d.get(url + "#live")      # the session was not there yet
                d.execute_script("window.__draws = 0; const r = Plotly.react; Plotly.react = function() { window.__draws++; return r.apply(this, arguments); };")
                continue
            out.append((time.monotonic() - t0, int(v[0]), float(v[1]), int(v[2])))
    finally:
        d.quit()
    return out


async def client(url: str) -> tuple[int, int, float]:
    import aiohttp
    async with aiohttp.ClientSession() as s:
        page = await (await s.get(url)).text()
        token = re.search(r'corecast-token" content="([^"]+)"', page).group(1)
        from corecast.native import native_path
        r = await s.post(url + "api/stat", headers={"X-Corecast-Token": token},
                         json={"events": [EVENTS], "interval": 0.1, "duration": SECONDS,
                               "command": f"{native_path('corecast-lockbench')} -t 64 -n 2000000000 --think 2000"})
        sid = (await r.json())["id"]
        received = samples = 0
        t0 = time.monotonic()
        async with s.get(url + f"api/sessions/{sid}/stream", timeout=aiohttp.ClientTimeout(total=SECONDS + 60)) as resp:
            buf = b""
            async for chunk in resp.content.iter_any():
                buf += chunk
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    if line.startswith(b"data: ["):
                        received += 1
                        samples += line.count(b'"type": "sample"')
        return received, samples, time.monotonic() - t0


def main() -> int:
    header("corecast serve: live stat of 64 threads x 8 events at 10 Hz")
    proc = subprocess.Popen([sys.executable, "-m", "corecast", "serve", "--listen", "127.0.0.1:0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        url = re.search(r"(http://\S+/)", proc.stderr.readline()).group(1)
        import concurrent.futures
        c0, w0 = cpu_s(proc.pid), time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            page = pool.submit(browser_watch, url, SECONDS + 6) if "--browser" in sys.argv else None
            batches, samples, wall = asyncio.run(client(url))
            c1, w1 = cpu_s(proc.pid), time.monotonic()
            page_result = page.result() if page else None
    finally:
        proc.terminate()
        proc.wait(30)
    share = 100 * (c1 - c0) / (w1 - w0)
    print(f"sample rows streamed: {samples} in {batches} batches over {wall:.1f} s "
          f"({samples / max(wall, 1e-9):.0f} rows/s)")
    print(f"server CPU: {c1 - c0:.2f} s over {w1 - w0:.1f} s = {share:.1f}% of one core (target < 5%)"
          + (" with the page open too" if page_result else ""))
    if isinstance(page_result, str):
        print(f"page: {page_result}")
    elif page_result:
        for t, rows, tmax, draws in page_result:
            print(f"page at {t:5.1f} s: {rows} rows held, latest sample t = {tmax:.2f} s, {draws} plot draws")
        last = page_result[-1]
        print(f"page: holds {last[1]} of {samples} rows streamed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
