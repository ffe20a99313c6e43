"""Speed of the one-pass miss-rate curve (corecast.sim.mrc), exact and sampled.

Targets (issue 17): the exact curve over 100 M accesses in under 30 s on one core; SHARDS at rate
0.01 on a captured real-program trace at least 20x faster than the exact pass, with a mean
absolute error under 0.02 against it.

1. Synthetic: 100 M 8-byte loads, half uniformly random over a 64 MiB working set, a quarter
   looping over 1 MiB, a quarter to a hot 16 KiB table (made before the clocks start). The peer
   is what a user would do without a curve: `corecast sim` once per cache size (a fully
   associative LRU level of that size), timed on a slice at two sizes and scaled.
2. Real programs, captured with the QEMU back end (Debian tools, not bundled): coreutils' `sort`
   of N random lines, and mawk building an associative array of N keys and walking it twice
   (a footprint of tens of MiB). Exact and SHARDS curves of the data accesses and of all of them,
   the time of each, their ratio and the mean absolute error from 1/rate lines (8 KiB) up.

CPU seconds of this process (time.process_time), on one core (OpenBLAS's threads are held to one:
they spin and would be counted). The load average is printed before and after.

    .venv/bin/python bench/sim_mrc.py [--accesses 100000000] [--programs sort,mawk]
                                      [--lines 100000] [--keys 200000] [--quick]
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import random  # noqa: E402
import shutil  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

from corecast.sim import mrc  # noqa: E402
from corecast.sim import native as N  # noqa: E402
from corecast.sim.capture import capture, qemu_path  # noqa: E402
from corecast.sim.engine import SimOptions, Simulator  # noqa: E402
from corecast.sim.machine import parse_machine  # noqa: E402
from corecast.sim.trace import load  # noqa: E402

CHUNK = 1 << 20
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def chunks(total: int, seed: int = 1):
    rng = np.random.default_rng(seed)
    done = 0
    while done < total:
        n = min(CHUNK, total - done)
        r = np.zeros(n, dtype=N.RECORD_DTYPE)
        part = rng.random(n)
        rand = rng.integers(0, (64 << 20) // 8, n, dtype=np.uint64) * np.uint64(8)
        loop = (np.arange(done, done + n, dtype=np.uint64) * np.uint64(8)) % np.uint64(1 << 20)
        hot = rng.integers(0, (16 << 10) // 8, n, dtype=np.uint64) * np.uint64(8)
        r["addr"] = np.where(part < 0.5, np.uint64(1 << 32) + rand,
                             np.where(part < 0.75, np.uint64(2 << 32) + loop, np.uint64(3 << 32) + hot))
        r["kind"], r["size"] = N.KIND_LOAD, 8
        yield r
        done += n


def timed(fn):
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def floor_pass(tr) -> float:
    """CPU seconds of reading every record of the trace once (cc_scan: a sum over the records),
    sliced and mapped as the passes read it: what any pass over the file pays at least."""
    lib = mrc.lib()
    t0 = time.process_time()
    for part in tr.chunks(1 << 20, checked=False):
        lib.cc_scan(np.ascontiguousarray(part).ctypes.data, len(part))
    return time.process_time() - t0


def mae(exact: mrc.MrcResult, sampled: mrc.MrcResult, rate: float = 0.01) -> float:
    sizes = np.array(exact.curves[0].sizes_bytes)
    ok = sizes >= mrc.resolution_bytes(exact.line, rate)
    a, b = np.array(exact.curves[0].miss_ratio), np.array(sampled.curves[0].miss_ratio)
    return float(np.mean(np.abs(a - b)[ok]))


def synthetic(n: int) -> None:
    print(f"## synthetic: {n:,} 8-byte loads (64 MiB random, 1 MiB loop, 16 KiB hot)")
    trace = list(chunks(n))
    exact, t_exact = timed(lambda: mrc.analyse(trace))
    c = exact.curves[0]
    print(f"exact, fully associative: {t_exact:7.2f} s  ({n / t_exact / 1e6:.1f} M accesses/s; "
          f"{len(c.sizes_bytes)} sizes from {mrc.fmt_bytes(c.sizes_bytes[0])} to "
          f"{mrc.fmt_bytes(c.sizes_bytes[-1])}; target < 30 s for 100 M)")
    sampled, t_shards = timed(lambda: mrc.analyse(trace, rate=0.01, sizes=c.sizes_bytes))
    print(f"SHARDS rate 0.01:         {t_shards:7.2f} s  ({t_exact / t_shards:.1f}x faster than exact; "
          f"mean absolute error {mae(exact, sampled):.4f} from 8 KiB up)")
    # the peer: the simulator, one fully associative size at a time, on a slice, scaled
    m = min(n, 2_000_000)
    sl = np.concatenate(trace)[:m]
    per_size = []
    for size in (64 << 10, 1 << 20):
        machine = {"name": "fa", "frequency_hz": 1e9,
                   "cache": [{"level": 1, "kind": "unified", "size": size, "line_size": 64,
                              "ways": size // 64, "replacement": "lru", "write_allocate": True}]}
        sim = Simulator(parse_machine(machine), 1, SimOptions(issue=False, branch=False, tlb=False))
        _, t = timed(lambda: (sim.feed(sl), sim.finish()))
        sim.close()
        per_size.append(t * n / m)
    est = float(np.mean(per_size)) * len(c.sizes_bytes)
    print(f"corecast sim, one size at a time (fully associative LRU, scaled from {m:,} accesses "
          f"at 64 KiB and 1 MiB): {np.mean(per_size):.2f} s per size, {est:.1f} s for the curve's "
          f"{len(c.sizes_bytes)} sizes ({est / t_exact:.1f}x the one-pass time)")


def real(name: str, cmd: list[str], tmp: Path) -> None:
    t0 = time.monotonic()
    info = capture(cmd, tmp / f"{name}.cctrace", annotate=False, env=ENV, backend="qemu")
    tr = load(info.path)
    print(f"## {name}: {' '.join(Path(c).name if c.startswith('/') else c for c in cmd)}")
    print(f"captured with QEMU in {time.monotonic() - t0:.1f} s wall: {info.instructions:,} instructions, "
          f"{len(tr):,} records")
    t_floor = min(floor_pass(tr) for _ in range(3))
    print(f"reading every record once (the floor of any pass over the file; best of 3): {t_floor:.2f} s "
          f"({t_floor / len(tr) * 1e9:.2f} ns/record)")
    for accesses in ("data", "all"):
        # (the lambdas run at once, before `del tr` below: ruff takes them for later calls)
        exact, t_exact = timed(lambda: mrc.analyse(tr, accesses=accesses))  # noqa: F821
        c = exact.curves[0]
        sampled, t_shards = timed(lambda: mrc.analyse(tr, accesses=accesses, rate=0.01,  # noqa: F821
                                                      sizes=c.sizes_bytes))
        fixed, t_fixed = timed(lambda: mrc.analyse(tr, accesses=accesses, rate=0.1,  # noqa: F821
                                                   sample_max=8192, sizes=c.sizes_bytes))
        print(f"{accesses:>4} accesses: {c.accesses:>12,}  footprint {mrc.fmt_bytes(c.footprint_bytes):>9}  "
              f"exact {t_exact:6.2f} s ({t_exact / c.accesses * 1e9:5.1f} ns/access)  "
              f"SHARDS 0.01 {t_shards:5.2f} s ({t_shards / len(tr) * 1e9:4.2f} ns/record)  "
              f"{t_exact / t_shards:5.1f}x faster (target >= 20x; at the floor it would be "
              f"{t_exact / t_floor:.1f}x)  MAE {mae(exact, sampled):.4f} (target < 0.02)")
        print(f"      fixed-size SHARDS, 8,192 lines from rate 0.1: {t_fixed:5.2f} s ({t_exact / t_fixed:5.1f}x "
              f"faster), rate at the end {fixed.sample_rate:.4g}, MAE {mae(exact, fixed, fixed.sample_rate):.4f}")
    del tr
    os.unlink(info.path)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--accesses", type=int, default=100_000_000)
    ap.add_argument("--programs", default="sort,mawk", help="real programs to capture (sort, mawk; "
                    "'none' for the synthetic part only)")
    ap.add_argument("--lines", type=int, default=100_000, help="sort: lines")
    ap.add_argument("--keys", type=int, default=200_000, help="mawk: keys")
    ap.add_argument("--quick", action="store_true", help="10 M accesses; 20,000 lines and keys")
    args = ap.parse_args()
    n = 10_000_000 if args.quick else args.accesses
    lines = keys = 20_000 if args.quick else None
    _machine.header("corecast sim mrc: one-pass miss-rate curves")
    print("# CPU seconds, one core")
    synthetic(n)
    programs = [p for p in args.programs.split(",") if p and p != "none"]
    if programs and qemu_path() is None:
        print("qemu-x86_64 is not installed: no real programs")
        programs = []
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        rng = random.Random(1)
        (t / "lines.txt").write_text("".join(f"{rng.randrange(10**12):012d} line\n"
                                             for _ in range(lines or max(args.lines, args.keys))))
        for p in programs:
            if p == "sort":
                src = t / "sort.txt"
                src.write_text("".join((t / "lines.txt").read_text().splitlines(True)[:lines or args.lines]))
                real("sort", [shutil.which("sort"), "-o", str(t / "out"), str(src)], t)
            elif p == "mawk" and shutil.which("mawk"):
                src = t / "keys.txt"
                src.write_text("".join((t / "lines.txt").read_text().splitlines(True)[:keys or args.keys]))
                real("mawk", [shutil.which("mawk"), "{a[$1]=NR} END {s=0; for (r=0; r<2; r++) for (k in a) "
                              "s+=a[k]; print s}", str(src)], t)
            else:
                print(f"## {p}: not available")
    print(f"# load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
