"""corecast serve under load. Prints the server process's own CPU use (its children apart) in
each phase, and whether the client kept up:

  stat            a live stat of 64 threads x 8 software events at 10 Hz, streamed to a client
                  (the issue's target: the server under 5% of one core)
  meters          a `corecast meters` daemon at its default interval (10 ms, every meter this
                  machine gives) watched at the page's default period (0.5 s)
  meters 0.1 s    the same board read every 0.1 s
  meters --pid    the daemon also following the 64 threads of a running program (thread slots:
                  ~3x the meters), default period
  stat + meters   the stat and the default meters session at once, two clients

With --browser, the live page is open in headless chromium on the stat session of the first
phase, and its rows and latest sample time are printed each second (does the page keep up);
with --meters-only the stat phases are left out.
"""
from __future__ import annotations

import asyncio
import os
import re
import signal
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


def lockbench() -> str:
    from corecast.native import native_path
    return str(native_path("corecast-lockbench"))


STAT_VIEW = "const v = window.corecast.views.live; return v && v.rows ? [v.rows, v.tmax, window.__draws] : [0, 0, 0];"
METERS_VIEW = ("const v = window.corecast.views.live; return v && v.frames ? [v.frames, v.t[v.t.length - 1], "
               "window.__draws] : [0, 0, 0];")


SECRET = [""]         # the server's secret, from the address it prints


def browser_watch(url: str, seconds: float, view: str = STAT_VIEW) -> list[tuple[float, int, float, int]] | str:
    """The live page in headless chromium, watching the newest session: every second, (wall
    time, rows (stat) or polls (meters) the page holds, its latest time, plots drawn so far)."""
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
    count = ("window.__draws = 0; const r = Plotly.react; "
             "Plotly.react = function() { window.__draws++; return r.apply(this, arguments); };")
    out = []
    try:
        d.get(f"{url}?token={SECRET[0]}#live")      # the address the server printed: then its cookie
        d.execute_script(count)
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            time.sleep(1.0)
            v = d.execute_script(view)
            if not v[0]:
                d.get(url + "#live")      # the session was not there yet
                d.execute_script(count)
                continue
            out.append((time.monotonic() - t0, int(v[0]), float(v[1]), int(v[2])))
    finally:
        d.quit()
    return out


async def _stream(s, url: str, sid: str, seconds: float) -> tuple[int, int, int]:
    """Read a session's stream for `seconds` (or to its end): (batches, lines, bytes)."""
    import aiohttp
    batches = lines = size = 0
    try:
        async with s.get(url + f"api/sessions/{sid}/stream", timeout=aiohttp.ClientTimeout(total=seconds + 60)) as resp:
            buf = b""
            t0 = time.monotonic()
            async for chunk in resp.content.iter_any():
                size += len(chunk)
                buf += chunk
                *got, buf = buf.split(b"\n")
                for line in got:
                    if line.startswith(b"data: ["):
                        batches += 1
                        lines += line.count(b'{"type": "')
                if time.monotonic() - t0 > seconds:
                    break
    except asyncio.TimeoutError:
        pass
    return batches, lines, size


async def _session(url: str, path: str, body: dict) -> tuple[object, str, str]:
    import aiohttp
    s = aiohttp.ClientSession(headers={"Authorization": f"token {SECRET[0]}"})     # the owner's secret
    page = await (await s.get(url)).text()
    token = re.search(r'corecast-token" content="([^"]+)"', page).group(1)
    r = await s.post(url + path, headers={"X-Corecast-Token": token}, json=body)
    doc = await r.json()
    if r.status != 200:
        await s.close()
        raise SystemExit(f"{path}: {doc.get('error')}")
    return s, doc["id"], token


async def stat_client(url: str) -> tuple[int, int, float]:
    s, sid, _ = await _session(url, "api/stat", {
        "events": [EVENTS], "interval": 0.1, "duration": SECONDS,
        "command": f"{lockbench()} -t 64 -n 2000000000 --think 2000"})
    try:
        t0 = time.monotonic()
        batches, lines, _ = await _stream(s, url, sid, SECONDS + 30)
        return batches, lines, time.monotonic() - t0
    finally:
        await s.close()


async def meters_client(url: str, board: str, period: float | None) -> tuple[int, int, int, float]:
    body = {"blackboard": board, **({"period": period} if period else {})}
    s, sid, token = await _session(url, "api/meters", body)
    try:
        t0 = time.monotonic()
        batches, lines, size = await _stream(s, url, sid, SECONDS)
        await s.post(url + f"api/sessions/{sid}/stop", headers={"X-Corecast-Token": token})
        return batches, lines, size, time.monotonic() - t0
    finally:
        await s.close()


def start_meters(board: str, *args: str) -> subprocess.Popen:
    from corecast.errors import UserError
    from corecast.meters import Board
    p = subprocess.Popen([sys.executable, "-m", "corecast", "meters", "--blackboard", board, *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(600):
        try:
            with Board.open(board) as b:
                if b.state == "running" and b.pid == p.pid and b.header.ticks > 100:
                    return p
        except UserError:
            pass
        time.sleep(0.05)
    p.kill()
    raise SystemExit("the meters daemon did not start")


def stop(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def measured(pid: int, run, *others: int) -> tuple[object, float, list[float], float]:
    """Run `run()`; (its result, the server's share of one core, the others' shares, wall s)."""
    c0, o0, w0 = cpu_s(pid), [cpu_s(o) for o in others], time.monotonic()
    result = run()
    c1, o1, w1 = cpu_s(pid), [cpu_s(o) for o in others], time.monotonic()
    wall = w1 - w0
    return result, 100 * (c1 - c0) / wall, [100 * (b - a) / wall for a, b in zip(o0, o1)], wall


def main() -> int:
    header("corecast serve: a live stat of 64 threads x 8 events at 10 Hz; the meters blackboard")
    meters_only = "--meters-only" in sys.argv
    proc = subprocess.Popen([sys.executable, "-m", "corecast", "serve", "--listen", "127.0.0.1:0"],
                            stderr=subprocess.PIPE, text=True)
    board = f"bench-serve-{os.getpid()}"
    daemon = None
    try:
        url, SECRET[0] = re.search(r"(http://\S+/)\?token=(\S+)", proc.stderr.readline()).groups()
        if not meters_only:
            import concurrent.futures
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                page = pool.submit(browser_watch, url, SECONDS + 6) if "--browser" in sys.argv else None
                (batches, samples, wall), share, _, _ = measured(proc.pid, lambda: asyncio.run(stat_client(url)))
                page_result = page.result() if page else None
            print(f"stat: sample rows streamed: {samples} in {batches} batches over {wall:.1f} s "
                  f"({samples / max(wall, 1e-9):.0f} rows/s)")
            print(f"stat: server CPU {share:.1f}% of one core (target < 5%)"
                  + (" with the page open too" if page_result else ""))
            if isinstance(page_result, str):
                print(f"stat: page: {page_result}")
            elif page_result:
                for t, rows, tmax, draws in page_result:
                    print(f"stat: page at {t:5.1f} s: {rows} rows held, latest sample t = {tmax:.2f} s, {draws} plot draws")
                print(f"stat: page holds {page_result[-1][1]} of {samples} rows streamed")

        daemon = start_meters(board)                      # every default: --interval 10ms, all meters
        from corecast.meters import Board
        with Board.open(board) as b:
            n_meters = len(b.meters())
        for label, period in (("meters (default period 0.5 s)", None), ("meters, period 0.1 s", 0.1)):
            (batches, lines, size, wall), share, (dshare,), _ = measured(
                proc.pid, lambda: asyncio.run(meters_client(url, board, period)), daemon.pid)
            print(f"{label}: {n_meters} meters; {lines} polls streamed in {batches} batches, {size / wall / 1e3:.1f} kB/s; "
                  f"server CPU {share:.2f}% of one core; the daemon {dshare:.2f}%")
        if "--browser" in sys.argv:
            import concurrent.futures
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                page = pool.submit(browser_watch, url, SECONDS, METERS_VIEW)
                (batches, lines, size, wall), share, _, _ = measured(
                    proc.pid, lambda: asyncio.run(meters_client(url, board, 0.1)))
                page_result = page.result()
            print(f"meters, period 0.1 s, the page open: server CPU {share:.2f}% of one core")
            if isinstance(page_result, str):
                print(f"meters: page: {page_result}")
            else:
                for t, frames, tmax, draws in page_result:
                    print(f"meters: page at {t:5.1f} s: {frames} polls held, board time {tmax:.2f} s, {draws} plot draws")
                if page_result:
                    print(f"meters: the page holds {page_result[-1][1]} polls; {lines} were streamed to the other client")
        stop(daemon)

        prog = subprocess.Popen([lockbench(), "-t", "64", "-n", "2000000000", "--think", "2000"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(0.5)
            daemon = start_meters(board, "--pid", str(prog.pid))
            with Board.open(board) as b:
                n_pid = len(b.meters())
            (batches, lines, size, wall), share, (dshare,), _ = measured(
                proc.pid, lambda: asyncio.run(meters_client(url, board, None)), daemon.pid)
            print(f"meters --pid (64 threads): {n_pid} meters; {lines} polls in {batches} batches, "
                  f"{size / wall / 1e3:.1f} kB/s; server CPU {share:.2f}% of one core; the daemon {dshare:.2f}%")
            stop(daemon)
        finally:
            prog.kill()
            prog.wait()

        if not meters_only:
            daemon = start_meters(board)

            async def both():
                return await asyncio.gather(stat_client(url), meters_client(url, board, None))
            ((sb, samples, swall), (mb, polls, size, mwall)), share, _, wall = measured(proc.pid, lambda: asyncio.run(both()))
            print(f"stat + meters: {samples} sample rows and {polls} meters polls streamed over {wall:.1f} s; "
                  f"server CPU {share:.1f}% of one core (target < 5%)")
            stop(daemon)
    finally:
        if daemon is not None:
            stop(daemon)
        proc.terminate()
        proc.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
