"""Speed of the one-pass miss-rate curve (corecast.sim.mrc) against simulating each size.

Target (issue 17): the exact curve over 100 M accesses in under 30 s on one core; SHARDS at rate
0.01 at least 20x faster than the exact pass. The peer is what a user would do without a curve:
`corecast sim` once per cache size (a fully associative LRU level of that size); it is timed on a
slice of the trace at a few sizes and scaled to the whole trace and to the curve's sizes.

The trace is synthetic and made before the clocks start (16 bytes a record: 1.6 GB for 100 M):
8-byte loads, half uniformly random over a 64 MiB working set, a quarter looping over 1 MiB, a
quarter to a hot 16 KiB table. CPU seconds of this process (time.process_time) are reported.

    .venv/bin/python bench/sim_mrc.py [--accesses 100000000] [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

from corecast.sim import mrc  # noqa: E402
from corecast.sim import native as N  # noqa: E402
from corecast.sim.engine import SimOptions, Simulator  # noqa: E402
from corecast.sim.machine import parse_machine  # noqa: E402

CHUNK = 1 << 20


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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--accesses", type=int, default=100_000_000)
    ap.add_argument("--quick", action="store_true", help="10 M accesses")
    args = ap.parse_args()
    n = 10_000_000 if args.quick else args.accesses
    _machine.header("corecast sim mrc: one-pass miss-rate curves")
    print(f"# {n:,} synthetic 8-byte loads (64 MiB random, 1 MiB loop, 16 KiB hot); CPU seconds")
    trace = list(chunks(n))
    exact, t_exact = timed(lambda: mrc.analyse(trace))
    c = exact.curves[0]
    print(f"exact, fully associative: {t_exact:7.2f} s  ({n / t_exact / 1e6:.1f} M accesses/s; "
          f"{len(c.sizes_bytes)} sizes from {mrc.fmt_bytes(c.sizes_bytes[0])} to "
          f"{mrc.fmt_bytes(c.sizes_bytes[-1])}; target < 30 s for 100 M)")
    sampled, t_shards = timed(lambda: mrc.analyse(trace, rate=0.01, sizes=c.sizes_bytes))
    ok = [i for i, s in enumerate(c.sizes_bytes) if s >= mrc.resolution_bytes(64, 0.01)]
    err = np.mean(np.abs(np.array(c.miss_ratio)[ok] - np.array(sampled.curves[0].miss_ratio)[ok]))
    print(f"SHARDS rate 0.01:         {t_shards:7.2f} s  ({t_exact / t_shards:.1f}x faster than exact; "
          f"target >= 20x; mean absolute error {err:.4f} from 8 KiB up)")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
