"""corecast serve under load: a live stat of 64 threads x 8 software events at 10 Hz, streamed
to a subscribed client; prints the server process's own CPU use (the stat child apart) and
whether the client kept up (lines received vs lines the stat wrote)."""
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
            async for line in resp.content:
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
        c0, w0 = cpu_s(proc.pid), time.monotonic()
        batches, samples, wall = asyncio.run(client(url))
        c1, w1 = cpu_s(proc.pid), time.monotonic()
    finally:
        proc.terminate()
        proc.wait(30)
    share = 100 * (c1 - c0) / (w1 - w0)
    print(f"sample rows streamed: {samples} in {batches} batches over {wall:.1f} s "
          f"({samples / max(wall, 1e-9):.0f} rows/s)")
    print(f"server CPU: {c1 - c0:.2f} s over {w1 - w0:.1f} s = {share:.1f}% of one core (target < 5%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
