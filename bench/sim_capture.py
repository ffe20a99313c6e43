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
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

from corecast.sim.capture import capture  # noqa: E402
from corecast.sim.engine import SimOptions, simulate  # noqa: E402
from corecast.sim.machine import parse_machine  # noqa: E402

ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
CFG = ((32768, 8, 64), (32768, 8, 64), (1048576, 16, 64))


def cachegrind(cmd: list[str], tmp: Path) -> dict[str, int]:
    out = tmp / "cg.out"
    (i1, d1, ll) = CFG
    subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--branch-sim=no",
                    f"--I1={i1[0]},{i1[1]},{i1[2]}", f"--D1={d1[0]},{d1[1]},{d1[2]}",
                    f"--LL={ll[0]},{ll[1]},{ll[2]}", f"--cachegrind-out-file={out}", *cmd],
                   check=True, capture_output=True, env=ENV)
    ev = sm = None
    for line in out.read_text().splitlines():
        if line.startswith("events:"):
            ev = line.split()[1:]
        elif line.startswith("summary:"):
            sm = [int(x) for x in line.split()[1:]]
    return dict(zip(ev, sm))


def misses(trace: Path) -> dict[str, int]:
    """The simulator's counts on a trace, under cachegrind's names and rules."""
    (i1, d1, ll) = CFG
    m = parse_machine({"name": "cg", "frequency_hz": 1e9, "cache": [
        {"level": 1, "kind": "instruction", "size": i1[0], "ways": i1[1], "line_size": i1[2]},
        {"level": 1, "kind": "data", "size": d1[0], "ways": d1[1], "line_size": d1[2]},
        {"level": 2, "kind": "unified", "size": ll[0], "ways": ll[1], "line_size": ll[2],
         "policy": "non-inclusive"}]})
    res = simulate(trace, m, options=SimOptions(tlb=False, straddle_all=True))
    li, ld, l2 = res.cache("L1I"), res.cache("L1D"), res.cache("L2")
    return {"Ir": li["accesses"]["fetch"], "I1mr": li["misses"]["fetch"], "ILmr": l2["misses"]["fetch"],
            "Dr": ld["accesses"]["load"] + ld["accesses"]["modify"],
            "D1mr": ld["misses"]["load"] + ld["misses"]["modify"],
            "DLmr": l2["misses"]["load"] + l2["misses"]["modify"],
            "Dw": ld["accesses"]["store"], "D1mw": ld["misses"]["store"], "DLmw": l2["misses"]["store"]}


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
        cg = cachegrind(cmd, t)
        print(f"(cachegrind itself: {time.monotonic() - t0:.2f} s)")
        cg["misses"] = sum(cg[k] for k in MISSES)
        keys = list(cg)
        print(f"{'':>9}" + "".join(f"{k:>12}" for k in keys))
        print(f"{'cachegr.':>9}" + "".join(f"{cg[k]:>12,}" for k in keys))
        for be in ("qemu", "lackey"):
            m = misses(t / f"{be}.cctrace")
            m["misses"] = sum(m[k] for k in MISSES)
            print(f"{be:>9}" + "".join(f"{m[k]:>12,}" for k in keys))
            print(f"{'':>9}" + "".join(f"{m[k] / cg[k] - 1:>+12.2%}" if cg[k] else f"{'-':>12}" for k in keys))
        print("(target: within 1% of cachegrind; 'misses' is all six miss counters together)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
