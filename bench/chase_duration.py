"""How long `corecast chase` (the default sweep) and `corecast calibrate` take, end to end
(a child process each, as a user runs them).

Targets (issues 11 and 10): the full default sweep under 60 s on 2 cores; calibrate under
60 s. The load average is printed before and after each.

    .venv/bin/python bench/chase_duration.py [--skip-calibrate]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402


def load() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def timed(args: list[str]) -> tuple[float, str]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "corecast", *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"corecast {' '.join(args)} failed: {out.stderr.strip()}")
    return time.monotonic() - t0, out.stdout


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-calibrate", action="store_true")
    a = ap.parse_args()
    _machine.header("corecast chase: the default sweep's duration; corecast calibrate's")
    print(f"# before: {load()}")
    secs, out = timed(["chase", "--json"])
    doc = json.loads(out)["concurrency"]
    pts = doc["points"]
    print(f"corecast chase (defaults: {len({p['threads'] for p in pts})} thread counts x "
          f"{len({p['chains'] for p in pts})} chain counts = {len(pts)} points): {secs:.1f} s "
          f"(target < 60 s: {'met' if secs < 60 else 'NOT met'}); idle latency "
          f"{doc['analysis']['idle_latency_ns']:.1f} ns, peak {doc['analysis']['peak_bandwidth_bytes_s'] / 1e9:.1f} GB/s")
    print(f"# after: {load()}")
    if not a.skip_calibrate:
        with tempfile.TemporaryDirectory() as tmp:
            secs, _ = timed(["calibrate", "-q", "-o", os.path.join(tmp, "t.json")])
        print(f"corecast calibrate: {secs:.1f} s (target < 60 s: {'met' if secs < 60 else 'NOT met'})")
        print(f"# after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
