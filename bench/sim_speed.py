"""Speed of corecast's trace-driven simulator, side by side with PyPI pycachesim.

Targets (issue 6): >= 50 M simulated accesses/s for a 3-level hierarchy on a random trace,
>= 150 M/s for an L1 alone on a sequential trace, >= 10 M lines/s parsing lackey text.

The hierarchy is Zen-4-like (L1D 32 KiB 8-way, L2 1 MiB 8-way, L3 32 MiB 16-way, 64-byte
lines), LRU and non-inclusive in both simulators so that their miss counts must agree (they
are printed and checked). "Random" traces are 8-byte loads at uniformly random addresses in
a working set; the figure is given for several working sets because the cost of an access
depends on how deep it goes: 256 KiB (L1 misses, L2 hits), 8 MiB (L1 and L2 miss, L3 hits)
and 256 MiB (misses at every level). pycachesim is driven through its fastest interface
(`loadstore` over a prepared list), on a shorter slice of the same trace; the ratio compares
accesses per second. Times are CPU seconds of this process (time.process_time), which is
less disturbed by other programs than wall time; still, take figures from a quiet machine
(the load average is printed; bench/sim_instructions.py counts host instructions per
access, which noise does not move).

For reference (no target), the bundled machines as described -- their own replacement and
inclusion policies, with and without their TLBs -- on the 8 MiB random trace.

    .venv/bin/python bench/sim_speed.py [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402

from corecast.sim.engine import SimOptions, Simulator  # noqa: E402
from corecast.sim.machine import load_machine, parse_machine  # noqa: E402
from corecast.sim.native import KIND_LOAD, RECORD_DTYPE  # noqa: E402
from corecast.sim.trace import LackeyParser  # noqa: E402

KiB, MiB = 1 << 10, 1 << 20
LEVELS = [(1, "data", 32 * KiB, 8), (2, "unified", 1 * MiB, 8), (3, "unified", 32 * MiB, 16)]


def machine(levels: int):
    caches = [{"level": 1, "kind": "instruction", "size": 32 * KiB, "ways": 8}]
    for lvl, kind, size, ways in LEVELS[:levels]:
        caches.append({"level": lvl, "kind": kind, "size": size, "ways": ways,
                       "replacement": "lru", "policy": "non-inclusive"})
    return parse_machine({"name": f"bench-{levels}", "frequency_hz": 1e9, "cache": caches})


def loads(addrs: np.ndarray) -> np.ndarray:
    r = np.zeros(len(addrs), dtype=RECORD_DTYPE)
    r["addr"] = addrs
    r["kind"] = KIND_LOAD
    r["size"] = 8
    return r


def ours(levels: int, recs: np.ndarray, repeat: int = 3) -> tuple[float, list[int]]:
    best = float("inf")
    misses: list[int] = []
    for _ in range(repeat):
        sim = Simulator(machine(levels), 1, SimOptions(tlb=False, branch=False, issue=False))
        t = time.process_time()
        sim.feed(recs)
        dt = time.process_time() - t
        best = min(best, dt)
        st = sim.stats()
        misses = [int(st.cache[i + 1].miss[KIND_LOAD]) for i in range(levels)]
        sim.close()
    return len(recs) / best, misses


def pycachesim(levels: int, addrs: np.ndarray) -> tuple[float, list[int]] | None:
    try:
        from cachesim import Cache, CacheSimulator, MainMemory
    except ImportError:
        return None
    mem = MainMemory()
    built = []
    for lvl, _kind, size, ways in reversed(LEVELS[:levels]):
        sets = size // (64 * ways)
        nxt = built[-1] if built else None
        c = Cache(f"L{lvl}", sets, ways, 64, "LRU", store_to=nxt, load_from=nxt)
        built.append(c)
    mem.load_to(built[0])
    mem.store_from(built[0])
    sim = CacheSimulator(built[-1], mem)
    work = [((int(a),), ()) for a in addrs]          # prepared outside the timed region
    t = time.process_time()
    sim.loadstore(work, length=8)
    dt = time.process_time() - t
    stats = {s["name"]: s for s in sim.stats()}
    misses = [int(stats[f"L{lvl}"]["MISS_count"]) for lvl in range(1, levels + 1)]
    return len(addrs) / dt, misses


def lackey_text(lines: int) -> bytes:
    rng = np.random.default_rng(5)
    block = []
    pc = 0x401000
    for i in range(200_000):
        pc += int(rng.integers(1, 8))
        block.append(f"I  {pc:08x},{int(rng.integers(1, 12))}\n")
        r = rng.random()
        if r < 0.30:
            block.append(f" L {0x1ffefff000 + int(rng.integers(0, 4096)) * 8:x},8\n")
        elif r < 0.42:
            block.append(f" S {0x04a2b000 + int(rng.integers(0, 1 << 16)) * 4:08x},4\n")
        elif r < 0.45:
            block.append(f" M {0x04a2b000 + int(rng.integers(0, 1 << 16)) * 4:08x},4\n")
    text = "".join(block).encode()
    per = text.count(b"\n")
    return text * max(1, lines // per)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="smaller traces")
    args = ap.parse_args()
    _machine.header("corecast sim: simulator and lackey-parser speed vs pycachesim")
    print("# load average at start: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    n = 4_000_000 if args.quick else 20_000_000
    n_peer = 300_000 if args.quick else 2_000_000
    rng = np.random.default_rng(1)
    results = {}

    print("\n## 3-level hierarchy, random 8-byte loads (target >= 50 M accesses/s)")
    print(f"{'working set':>12} {'corecast M/s':>13} {'pycachesim M/s':>15} {'ratio':>7}  "
          "misses L1/L2/L3 (corecast = pycachesim on the peer slice)")
    for ws in (256 * KiB, 8 * MiB, 256 * MiB):
        addrs = (rng.integers(0, ws // 8, n, dtype=np.uint64) * np.uint64(8)
                 + np.uint64(0x10000000))
        rate, _ = ours(3, loads(addrs))
        peer = pycachesim(3, addrs[:n_peer])
        _, mine_small = ours(3, loads(addrs[:n_peer]), repeat=1)
        if peer:
            prate, pmiss = peer
            agree = "agree" if pmiss == mine_small else f"DIFFER {mine_small} vs {pmiss}"
            print(f"{ws // KiB:>9} KiB {rate / 1e6:>13.1f} {prate / 1e6:>15.2f} "
                  f"{rate / prate:>6.0f}x  {'/'.join(map(str, mine_small))} ({agree})")
        else:
            print(f"{ws // KiB:>9} KiB {rate / 1e6:>13.1f} {'(not installed)':>15}")
        results[f"random-{ws // KiB}KiB"] = rate

    print("\n## L1 only, sequential 8-byte loads (target >= 150 M accesses/s)")
    addrs = np.arange(n, dtype=np.uint64) * np.uint64(8) + np.uint64(0x10000000)
    rate, miss = ours(1, loads(addrs))
    peer = pycachesim(1, addrs[:n_peer])
    line = f"corecast {rate / 1e6:.1f} M/s (L1 misses {miss[0]:,} of {n:,})"
    if peer:
        line += f"; pycachesim {peer[0] / 1e6:.2f} M/s; ratio {rate / peer[0]:.0f}x"
    print(line)
    results["sequential-L1"] = rate

    print("\n## lackey --trace-mem text parsing (target >= 10 M lines/s)")
    text = lackey_text(2_000_000 if args.quick else 20_000_000)
    lines = text.count(b"\n")
    best = float("inf")
    for _ in range(3):
        p = LackeyParser()
        t = time.process_time()
        chunk = 16 << 20
        for i in range(0, len(text), chunk):
            p.feed(text[i:i + chunk])
        p.feed(b"", final=True)
        best = min(best, time.process_time() - t)
        assert p.stats().trace_lines == lines
    lrate = lines / best
    print(f"{lines:,} lines ({len(text) / MiB:.0f} MiB) in {best:.2f} s: "
          f"{lrate / 1e6:.1f} M lines/s ({len(text) / best / MiB:.0f} MiB/s)")
    results["lackey-lines"] = lrate

    print("\n## for reference: bundled machines, one core, 8 MiB random loads (no target)")
    addrs = (np.random.default_rng(2).integers(0, (8 * MiB) // 8, n // 4, dtype=np.uint64)
             * np.uint64(8) + np.uint64(0x10000000))
    recs = loads(addrs)
    for name in ("zen4-genoa", "penryn-l5420", "atom-n540"):
        m = load_machine(name)
        rates = []
        for tlb in (False, True):
            best = float("inf")
            for _ in range(2):
                sim = Simulator(m, 1, SimOptions(tlb=tlb, branch=False, issue=False))
                t = time.process_time()
                sim.feed(recs)
                best = min(best, time.process_time() - t)
                sim.close()
            rates.append(len(recs) / best)
        path = ", ".join(f"{c.name} {c.ways}-way {c.replacement}"
                         + (f" {c.policy}" if c.level > 1 else "") for c in m.data_path())
        print(f"{name:>14}: {rates[0] / 1e6:6.1f} M/s caches only, {rates[1] / 1e6:6.1f} M/s "
              f"with TLBs  ({path}; {len(m.tlbs)} TLBs)")

    print("\n## against the targets")
    for key, target in (("random-8192KiB", 50e6), ("sequential-L1", 150e6),
                        ("lackey-lines", 10e6)):
        got = results[key]
        print(f"{key:>16}: {got / 1e6:8.1f} M/s  target {target / 1e6:.0f} M/s  "
              f"{'met' if got >= target else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
