"""Host instructions per simulated access of corecast's simulator, counted with callgrind.

Timings on a shared machine move by tens of percent; instruction counts do not. This builds
bench/sim_driver.c against native/sim/ at each --opt level (meson.build builds at -O2), runs it under
`valgrind --tool=callgrind --toggle-collect=cc_sim_run` (only the batch entry point is
counted, not the making of the trace) at two trace lengths, and prints the difference per
access: the steady-state cost, cold misses excluded. Rows as in bench/sim_speed.py.

    .venv/bin/python bench/sim_instructions.py [--general] [--replacement lru|plru|fifo|random] [--opt 2,3]

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


def build(outdir: Path, opt: str) -> Path:
    """bench/sim_driver.c with native/sim's sources, at -O{opt}, otherwise with the flags
    meson.build gives every C part (C11 with GNU extensions, NDEBUG, no debug info)."""
    exe = outdir / f"sim_driver_O{opt}"
    cmd = [os.environ.get("CC", "cc"), "-std=gnu11", f"-O{opt}", "-DNDEBUG", f"-I{SIM}",
           "-o", str(exe), str(ROOT / "bench" / "sim_driver.c"), str(SIM / "sim.c"), str(SIM / "lackey.c")]
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
    ap.add_argument("--opt", default="2,3",
                    help="optimisation levels to compare (meson.build uses 2; default 2,3)")
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
    opts = [o.strip() for o in args.opt.split(",") if o.strip()]
    with tempfile.TemporaryDirectory() as tmp:
        exes = {o: build(Path(tmp), o) for o in opts}
        print(f"{'':>44}  " + "  ".join(f"{'-O' + o:>8}" for o in opts))
        for name, levels, ws, pattern in ROWS:
            cells = []
            for o in opts:
                a = count(exes[o], [str(levels), str(ws), str(n1), pattern, *extra], Path(tmp))
                b = count(exes[o], [str(levels), str(ws), str(n2), pattern, *extra], Path(tmp))
                cells.append(f"{(b - a) / (n2 - n1):8.1f}")
            print(f"{name:>44}: " + "  ".join(cells) + "  instructions per access")
    return 0


if __name__ == "__main__":
    sys.exit(main())
