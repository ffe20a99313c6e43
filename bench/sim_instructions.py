"""Host instructions per simulated access of corecast's simulator, counted with callgrind.

Timings on a shared machine move by tens of percent; instruction counts do not. This builds
bench/sim_driver.c against native/sim/ (with the library's own flags), runs it under
`valgrind --tool=callgrind --toggle-collect=cc_sim_run` (only the batch entry point is
counted, not the making of the trace) at two trace lengths, and prints the difference per
access: the steady-state cost, cold misses excluded. Rows as in bench/sim_speed.py.

    .venv/bin/python bench/sim_instructions.py [--general] [--replacement lru|plru|fifo|random]

--general counts the general loop (every record through the multi-core code path) instead
of the single-core kernel.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "native" / "sim"
KiB, MiB = 1 << 10, 1 << 20
ROWS = [("3-level, random loads, 256 KiB working set", 3, 256 * KiB, "random"),
        ("3-level, random loads, 8 MiB working set", 3, 8 * MiB, "random"),
        ("3-level, random loads, 256 MiB working set", 3, 256 * MiB, "random"),
        ("L1 only, sequential loads", 1, 0, "seq")]


def build(outdir: Path) -> Path:
    sys.path.insert(0, str(ROOT / "native"))
    import build as nb  # native/build.py: the flags every native target gets

    with open(SIM / "build.toml", "rb") as fh:
        target = next(t for t in tomllib.load(fh)["target"] if t["name"] == "libcorecast_sim.so")
    exe = outdir / "sim_driver"
    cmd = [nb.compiler(), *nb.DEFAULT_CFLAGS, *target.get("cflags", []), f"-I{SIM}",
           "-o", str(exe), str(ROOT / "bench" / "sim_driver.c"),
           *(str(SIM / s) for s in target["sources"])]
    subprocess.run(cmd, check=True)
    return exe


def count(exe: Path, args: list[str], outdir: Path) -> int:
    out = outdir / "callgrind.out"
    res = subprocess.run(["valgrind", "--tool=callgrind", "--toggle-collect=cc_sim_run",
                          f"--callgrind-out-file={out}", str(exe), *args],
                         capture_output=True, text=True)
    m = re.search(r"Collected : (\d+)", res.stderr)
    if res.returncode != 0 or not m:
        raise SystemExit(f"callgrind failed: {res.stderr[-2000:]}")
    return int(m.group(1))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--general", action="store_true", help="count the general loop")
    ap.add_argument("--replacement", default="lru", choices=["lru", "plru", "fifo", "random"])
    ap.add_argument("-n", type=int, default=1_000_000, help="accesses in the shorter run")
    args = ap.parse_args()
    _machine.header("corecast sim: host instructions per simulated access (callgrind)")
    if not shutil.which("valgrind"):
        print("valgrind is not installed: nothing to count")
        return 1
    n1, n2 = args.n, 3 * args.n
    extra = [args.replacement] + (["general"] if args.general else [])
    print(f"# {'general loop' if args.general else 'single-core kernel'}, "
          f"{args.replacement}; instructions of cc_sim_run per access between {n1:,} and "
          f"{n2:,} accesses")
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        for name, levels, ws, pattern in ROWS:
            a = count(exe, [str(levels), str(ws), str(n1), pattern, *extra], Path(tmp))
            b = count(exe, [str(levels), str(ws), str(n2), pattern, *extra], Path(tmp))
            print(f"{name:>44}: {(b - a) / (n2 - n1):7.1f} instructions per access")
    return 0


if __name__ == "__main__":
    sys.exit(main())
