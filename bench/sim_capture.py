"""Capture speed: corecast's QEMU user-mode plugin against valgrind lackey, on a real program.

Target (issue 17): the new back end records the same trace format at least 10x faster than
lackey on the same program; `corecast sim` on its trace gives cache misses within 1% of
cachegrind's for the same program and hierarchy. The program is Debian's `sort` (coreutils) on
N random lines (default 20,000, as in the issue). Wall seconds of each capture (the machine is
otherwise idle when the figures are taken; the load average is printed), then the simulator on
both traces against cachegrind's own counts for a 32 KiB/8 L1I, 32 KiB/8 L1D, 1 MiB/16 LL, all
nine of cachegrind's counters (Ir, I1mr, ILmr, Dr, D1mr, DLmr, Dw, D1mw, DLmw) and the six miss
counters together.

    .venv/bin/python bench/sim_capture.py [--lines 20000] [--quick]
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

from corecast.sim.capture import capture  # noqa: E402

# cachegrind's runner and the simulator under its rules: the same code the tests hold it to
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import cgref  # noqa: E402

ENV = cgref.ENV
CFG = ((32768, 8, 64), (32768, 8, 64), (1048576, 16, 64))


MISSES = ("I1mr", "ILmr", "D1mr", "D1mw", "DLmr", "DLmw")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=20_000)
    ap.add_argument("--quick", action="store_true", help="2,000 lines")
    args = ap.parse_args()
    n = 2_000 if args.quick else args.lines
    _machine.header("corecast sim capture: QEMU plugin against valgrind lackey")
    print(f"# load average {os.getloadavg()[0]:.2f}; sort of {n:,} random lines; wall seconds")
    if not shutil.which("valgrind") or not shutil.which("qemu-x86_64"):
        print("valgrind and qemu-x86_64 are both needed")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        rng = random.Random(1)
        (t / "in.txt").write_text("".join(f"{rng.randrange(10**12):012d} line\n" for _ in range(n)))
        cmd = [shutil.which("sort"), "-o", str(t / "out.txt"), str(t / "in.txt")]
        times, infos = {}, {}
        for be in ("qemu", "lackey"):
            t0 = time.monotonic()
            infos[be] = capture(cmd, t / f"{be}.cctrace", annotate=False, env=ENV, backend=be)
            times[be] = time.monotonic() - t0
            print(f"{be:>7}: {times[be]:8.2f} s  {infos[be].instructions:,} instructions "
                  f"({infos[be].instructions / times[be] / 1e6:.1f} M/s)")
        print(f"qemu is {times['lackey'] / times['qemu']:.1f}x faster than lackey (target >= 10x)")
        t0 = time.monotonic()
        cg = cgref.cachegrind(cmd, CFG, t)
        print(f"(cachegrind itself: {time.monotonic() - t0:.2f} s)")
        cg["misses"] = sum(cg[k] for k in MISSES)
        keys = list(cg)
        print(f"{'':>9}" + "".join(f"{k:>12}" for k in keys))
        print(f"{'cachegr.':>9}" + "".join(f"{cg[k]:>12,}" for k in keys))
        for be in ("qemu", "lackey"):
            m = cgref.ours(cgref.simulate_like_cachegrind(t / f"{be}.cctrace", CFG))
            m["misses"] = sum(m[k] for k in MISSES)
            print(f"{be:>9}" + "".join(f"{m[k]:>12,}" for k in keys))
            print(f"{'':>9}" + "".join(f"{m[k] / cg[k] - 1:>+12.2%}" if cg[k] else f"{'-':>12}" for k in keys))
        print("(target: within 1% of cachegrind; 'misses' is all six miss counters together)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
