"""The single-core kernel (native/sim/sim.c, run_fast*) against the general loop.

With one core the simulator runs a specialised kernel; `SimOptions(general_loop=True)` sends
every record through the general loop instead. Both must leave exactly the same counters,
for every replacement policy, associativity (including the > 16-way and stamp-LRU layouts the
kernel hands to the general code), hierarchy policy, write-allocate setting, line size,
TLBs, warm-up, stack hashing, markers, line-straddling and zero-size accesses, and however
the trace is cut into batches.
"""
from __future__ import annotations

import ctypes as C
import tomllib

import numpy as np
import pytest

from corecast.sim import native as N
from corecast.sim.engine import SimOptions, Simulator
from corecast.sim.machine import parse_machine

POLICIES = ["inclusive", "exclusive", "victim", "non-inclusive"]
STACK_LO, STACK_HI = 0x7FF000000, 0x7FF100000


def _cache(level, kind, line, rng, repl=None, policy=None, ways=None, sets=None):
    if ways is None:
        ways = int(rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 20, 32]))
    if repl is None:
        choices = ["lru", "fifo", "random"] + (["plru"] * 2 if ways & (ways - 1) == 0 else [])
        repl = str(rng.choice(choices))
    if sets is None:
        sets = int(rng.choice([1, 2, 4, 8, 16, 32][: 2 + 2 * level]))
    c = {"level": level, "kind": kind, "size": sets * ways * line, "line_size": line,
         "ways": ways, "replacement": repl,
         "write_allocate": bool(rng.random() < 0.8)}
    if level > 1:
        c["policy"] = policy or str(rng.choice(POLICIES))
    return c


def random_machine(seed: int) -> dict:
    rng = np.random.default_rng(seed)
    line = int(rng.choice([32, 64, 128]))
    levels = int(rng.integers(1, 4))
    caches = []
    if rng.random() < 0.2:
        caches.append(_cache(1, "unified", line, rng))
    else:
        caches.append(_cache(1, "instruction", line, rng))
        caches.append(_cache(1, "data", line, rng))
    for lvl in range(2, levels + 1):
        # sometimes a data-only level, so the two sides have different depths
        kind = "data" if (lvl == levels and rng.random() < 0.2 and caches[0]["kind"] != "unified"
                          and all(c["kind"] != "data" or c["level"] == 1 for c in caches)) \
            else "unified"
        caches.append(_cache(lvl, kind, line, rng))
    m = {"name": f"kernel-{seed}", "frequency_hz": 1e9, "cache": caches}
    if rng.random() < 0.5:
        m["tlb"] = [{"level": 1, "kind": "data", "entries": 8, "ways": "full"},
                    {"level": 2, "kind": "unified", "entries": 32, "ways": 4},
                    {"level": 1, "kind": "instruction", "entries": 4, "ways": 2}]
    if rng.random() < 0.5:
        m["branch"] = {"kind": "gshare", "history_bits": 6, "table_size": 256}
    return m


def uniform_machine(repl: str, levels: int, policy: str = "non-inclusive") -> dict:
    rng = np.random.default_rng(7)
    caches = [_cache(1, "instruction", 64, rng, repl, ways=8, sets=4),
              _cache(1, "data", 64, rng, repl, ways=4, sets=8)]
    for lvl in range(2, levels + 1):
        caches.append(_cache(lvl, "unified", 64, rng, repl, policy, ways=8 * (lvl - 1),
                             sets=8 << (lvl - 1)))
    return {"name": f"uniform-{repl}-{levels}", "frequency_hz": 1e9, "cache": caches}


def random_trace(seed: int, n: int = 24_000) -> np.ndarray:
    """Fetches, loads, stores, read-modify-writes (hot lines, a working set, streams, the
    stack), some straddling a line or of size 0, with branches, uops and markers."""
    rng = np.random.default_rng(seed)
    r = np.zeros(n, dtype=N.RECORD_DTYPE)
    kind = rng.choice([N.KIND_FETCH, N.KIND_LOAD, N.KIND_STORE, N.KIND_MODIFY, N.KIND_BRANCH,
                       N.KIND_UOP, N.KIND_MARKER], size=n,
                      p=[0.38, 0.3, 0.14, 0.06, 0.06, 0.05, 0.01])
    r["kind"] = kind
    r["tid"] = rng.integers(0, 3, n)
    region = rng.integers(0, 4, n)
    hot = 0x10000000 + rng.integers(0, 16, n) * 8
    wide = 0x20000000 + rng.integers(0, 1 << 15, n) * 4
    stream = 0x30000000 + np.arange(n) * 12
    stack = STACK_LO + rng.integers(0, 1 << 12, n) * 8
    addr = np.choose(region, [hot, wide, stream, stack]).astype(np.uint64)
    size = rng.choice([0, 1, 2, 4, 8, 16, 64, 100, 200], size=n,
                      p=[0.02, 0.08, 0.1, 0.3, 0.34, 0.1, 0.03, 0.01, 0.02])
    odd = rng.random(n) < 0.1                 # unaligned: some straddle a line
    addr = addr + np.where(odd, rng.integers(1, 64, n), 0).astype(np.uint64)
    fetch = kind == N.KIND_FETCH
    pc = 0x400000 + (rng.integers(0, 600, n) * 4).astype(np.uint64)
    addr = np.where(fetch, pc, addr)
    size = np.where(fetch, rng.choice([1, 2, 4, 7, 15], size=n), size)
    branch = kind == N.KIND_BRANCH
    size = np.where(branch, rng.integers(0, 32, n), size)
    uop = kind == N.KIND_UOP
    addr = np.where(uop, rng.integers(0, 1 << 56, n, dtype=np.uint64)
                    | (np.uint64(1) << np.uint64(56)), addr)
    r["addr"] = addr
    r["size"] = size
    return r


def _stats(machine: dict, trace: np.ndarray, general: bool, cuts: list[int], **opts) -> N.Stats:
    sim = Simulator(parse_machine(machine), 1, SimOptions(general_loop=general, **opts))
    try:
        prev = 0
        for cut in [*cuts, len(trace)]:
            sim.feed(trace[prev:cut])
            prev = cut
        return sim.finish()
    finally:
        sim.close()


def _differences(a: N.Stats, b: N.Stats) -> list[str]:
    out = []

    def walk(x, y, name):
        if isinstance(x, C.Structure):
            for f, _ in x._fields_:
                walk(getattr(x, f), getattr(y, f), f"{name}.{f}")
        elif isinstance(x, C.Array):
            for i in range(len(x)):
                walk(x[i], y[i], f"{name}[{i}]")
        elif x != y:
            out.append(f"{name}: kernel {x}, general {y}")

    walk(a, b, "stats")
    return out


def _check(machine, trace, cuts, **opts):
    fast = _stats(machine, trace, False, cuts, **opts)
    gen = _stats(machine, trace, True, cuts, **opts)
    diff = _differences(fast, gen)
    assert not diff, f"{machine['name']} {opts}: " + "; ".join(diff[:8])
    return fast


@pytest.mark.parametrize("seed", range(48))
def test_kernel_matches_general_loop(seed):
    machine = random_machine(seed)
    trace = random_trace(1000 + seed)
    rng = np.random.default_rng(seed)
    cuts = sorted(set(int(x) for x in rng.integers(1, len(trace), int(rng.integers(0, 6)))))
    opts = {"issue": bool(seed % 3 == 0)}
    if seed % 4 == 1:
        opts["warmup_instructions"] = int(rng.integers(1, 5000))
    if seed % 5 == 2:
        opts["stack"] = (STACK_LO, STACK_HI)
        opts["stack_hash"] = True
    st = _check(machine, trace, cuts, **opts)
    fetches = int(np.sum(trace["kind"] == N.KIND_FETCH))
    assert st.warm == 1
    if "warmup_instructions" not in opts:
        assert st.instructions == fetches
    else:                                    # counting restarts after the warm-up
        assert st.instructions == fetches - opts["warmup_instructions"]
    assert sum(st.cache[i].miss[N.KIND_LOAD] for i in range(len(machine["cache"]))) > 0


@pytest.mark.parametrize("repl", ["lru", "plru"])
@pytest.mark.parametrize("levels", [1, 2, 3])
@pytest.mark.parametrize("policy", ["non-inclusive", "inclusive", "exclusive", "victim"])
def test_kernel_specialisations(repl, levels, policy):
    # the LRU-only and PLRU-only compilations of the kernel (and, with inclusive, exclusive
    # and victim levels, the per-level switch), over a trace with cold, warm and full sets
    machine = uniform_machine(repl, levels, policy)
    trace = random_trace(77 + levels)
    st = _check(machine, trace, [5, 6, 4000, 4001, 9000], warmup_instructions=500)
    assert st.cache[1].evictions > 0
    assert st.instructions == np.sum(trace["kind"] == N.KIND_FETCH) - 500


def test_kernel_bench_hierarchy_counts():
    # the benchmark's hierarchy (8/8/16 ways, LRU, non-inclusive) on loads: every access
    # misses, is served below or hits, and the per-level counts add up
    caches = [{"level": 1, "kind": "instruction", "size": 32768, "ways": 8}]
    for lvl, kind, size, ways in [(1, "data", 32768, 8), (2, "unified", 1 << 20, 8),
                                  (3, "unified", 32 << 20, 16)]:
        caches.append({"level": lvl, "kind": kind, "size": size, "ways": ways,
                       "replacement": "lru", "policy": "non-inclusive"})
    machine = {"name": "bench", "frequency_hz": 1e9, "cache": caches}
    rng = np.random.default_rng(3)
    n = 200_000
    trace = np.zeros(n, dtype=N.RECORD_DTYPE)
    trace["addr"] = 0x10000000 + rng.integers(0, (8 << 20) // 8, n, dtype=np.uint64) * 8
    trace["kind"] = N.KIND_LOAD
    trace["size"] = 8
    st = _check(machine, trace, [100_000], tlb=False, branch=False, issue=False)
    l1, l2, l3 = (st.cache[i] for i in (1, 2, 3))
    assert l1.access[N.KIND_LOAD] == n
    assert l2.access[N.KIND_LOAD] == l1.miss[N.KIND_LOAD]
    assert l3.access[N.KIND_LOAD] == l2.miss[N.KIND_LOAD]
    # the 32 MiB L3 holds the whole 8 MiB working set: it misses once per distinct line
    distinct = len(np.unique(trace["addr"] >> np.uint64(6)))
    assert st.served[N.KIND_LOAD][4] == l3.miss[N.KIND_LOAD] == distinct
    assert l1.fills == l1.miss[N.KIND_LOAD]
    assert l1.evictions == l1.fills - 32768 // 64        # every fill after the first 512


# ----------------------------------------------------------------------------------------
# wide sets (more than 16 ways: fully associative TLBs, a 24-way L2) keep their LRU/FIFO
# order in a linked list per set

def _ref_lru_fifo(seq, sets, ways, policy):
    """A plain reference: per set, resident lines oldest first (by last use for LRU, by
    insertion for FIFO); returns (hit, victim) per access."""
    order = [[] for _ in range(sets)]
    out = []
    for x in seq:
        row = order[x % sets]
        if x in row:
            if policy == "lru":
                row.remove(x)
                row.append(x)
            out.append((True, None))
            continue
        victim = row.pop(0) if len(row) == ways else None
        row.append(x)
        out.append((False, victim))
    return out


@pytest.mark.parametrize("policy", ["lru", "fifo"])
@pytest.mark.parametrize("sets,ways", [(1, 17), (2, 24), (1, 72), (4, 32), (1, 300)])
def test_wide_sets_against_reference(policy, sets, ways):
    rng = np.random.default_rng(ways)
    # a skewed stream: hits and misses at every position of the order
    seq = (rng.zipf(1.3, 6000) % (sets * ways * 2)).tolist()
    native = N.ReplacementArray(sets, ways, policy)
    got = [native.access(x) for x in seq]
    want = _ref_lru_fifo(seq, sets, ways, policy)
    assert got == want
    assert sum(1 for h, v in got if v is not None) > 100


# ----------------------------------------------------------------------------------------
# the bundled machines' own hierarchies: Zen 4 (PLRU everywhere, 1 MiB inclusive L2 that
# back-invalidates both L1s, 32 MiB victim L3 filled by L2 victims, a 72-entry fully
# associative L1 DTLB and a 24-way L2 DTLB) and Penryn (LRU, 24-way non-inclusive L2, a
# 16-entry fully associative DTLB0), exactly as described and scaled down (the same ways,
# policies and replacement, fewer sets, so that every set fills and evicts many times)

def bundled_machine(name: str, shrink: int = 1) -> dict:
    from corecast.machines import schema
    with open(schema.bundled_path(name), "rb") as fh:
        m = tomllib.load(fh)
    if shrink > 1:
        m["name"] = f"{name}/{shrink}"
        for c in m["cache"]:
            c["size"] = _bytes(c["size"]) // shrink
        for t in m.get("tlb", []):
            ways = t["entries"] if t["ways"] == "full" else t["ways"]
            t["entries"] = max(ways, t["entries"] // shrink)
    return m


def _bytes(size) -> int:
    if isinstance(size, int):
        return size
    units = {"KiB": 1 << 10, "MiB": 1 << 20}
    return int(size[:-3]) * units[size[-3:]]


def bundled_trace(pattern: str, n: int, ws: int, seed: int, hot: int = 4096) -> np.ndarray:
    """Data accesses (and a fetch stream): `random` 8-byte loads over a working set of ws
    bytes, `sequential` 8-byte loads and stores walking it 32 bytes a step, or `mixed`:
    loads, stores and read-modify-writes, random and sequential and to a hot region of `hot`
    bytes (lines that stay in the L1 while the levels below forget them: back-invalidated,
    often dirty), some straddling a line, with instruction fetches."""
    rng = np.random.default_rng(seed)
    base = np.uint64(0x10000000)
    r = np.zeros(n, dtype=N.RECORD_DTYPE)
    r["size"] = 8
    if pattern == "random":
        r["addr"] = base + rng.integers(0, ws // 8, n, dtype=np.uint64) * np.uint64(8)
        r["kind"] = N.KIND_LOAD
    elif pattern == "sequential":
        r["addr"] = base + (np.arange(n, dtype=np.uint64) * np.uint64(32)) % np.uint64(ws)
        r["kind"] = np.where(rng.random(n) < 0.3, N.KIND_STORE, N.KIND_LOAD)
    else:
        region = rng.integers(0, 3, n)
        rand = base + rng.integers(0, ws // 8, n, dtype=np.uint64) * np.uint64(8)
        seq = base + (np.arange(n, dtype=np.uint64) * np.uint64(24)) % np.uint64(ws)
        hot = base + np.uint64(ws) + rng.integers(0, hot // 8, n, dtype=np.uint64) * np.uint64(8)
        addr = np.choose(region, [rand, seq, hot]).astype(np.uint64)
        odd = rng.random(n) < 0.05
        r["addr"] = addr + np.where(odd, rng.integers(1, 64, n), 0).astype(np.uint64)
        r["kind"] = rng.choice([N.KIND_LOAD, N.KIND_STORE, N.KIND_MODIFY, N.KIND_FETCH], size=n,
                               p=[0.5, 0.25, 0.1, 0.15])
        fetch = r["kind"] == N.KIND_FETCH
        r["addr"] = np.where(fetch, 0x400000 + rng.integers(0, 1 << 16, n) * 4, r["addr"])
        r["size"] = np.where(fetch, 4, rng.choice([1, 4, 8, 16], size=n))
    return r


def _levels(machine: dict) -> dict[int, int]:
    """Cache index (as the stats number them) of the data side's level 1, 2, 3."""
    return {c["level"]: i for i, c in enumerate(machine["cache"])
            if c["kind"] in ("data", "unified")}


@pytest.mark.slow
@pytest.mark.parametrize("shrink", [1, 64])
@pytest.mark.parametrize("pattern", ["random", "sequential", "mixed"])
def test_kernel_zen4_exact_hierarchy(pattern, shrink):
    machine = bundled_machine("zen4-genoa", shrink)
    # the L3 (32 MiB full size; victims of the L2 only) must fill and evict: more distinct
    # lines than it holds
    n = {1: 1_400_000, 64: 120_000}[shrink]
    ws = (96 << 20) // shrink
    trace = bundled_trace(pattern, n, ws, seed=5 + shrink, hot=(32 << 10) // shrink // 8)
    st = _check(machine, trace, [n // 3, n // 3 + 1], branch=False, issue=False)
    lv = _levels(machine)
    l1, l2, l3 = (st.cache[lv[k]] for k in (1, 2, 3))
    # what the specialised paths do happened: L2 victims filled into the L3 and found there
    # again, L3 evictions, TLB misses (and, with stores, dirty victims and back-invalidations
    # of lines the L1 kept)
    assert l2.evictions > 0 and l3.fills > 0 and l3.evictions > 0
    if pattern != "sequential":                       # (one pass: nothing comes back)
        assert sum(l3.access) > sum(l3.miss) > 0
    assert st.tlb[0].miss[1] > 0 and st.stlb_hit[1] + st.tlb_walk[1] == st.tlb[0].miss[1]
    if pattern != "random":
        assert l1.writebacks > 0 and l2.writebacks > 0 and st.mem_writebacks > 0
    if pattern == "mixed":
        assert l2.back_invalidations > 20


@pytest.mark.parametrize("shrink", [1, 32])
@pytest.mark.parametrize("pattern", ["random", "sequential", "mixed"])
def test_kernel_penryn_exact_hierarchy(pattern, shrink):
    machine = bundled_machine("penryn-l5420", shrink)
    n = {1: 400_000, 32: 120_000}[shrink]
    ws = (24 << 20) // shrink
    trace = bundled_trace(pattern, n, ws, seed=9 + shrink, hot=(32 << 10) // shrink // 8)
    st = _check(machine, trace, [n // 2], branch=False, issue=False)
    lv = _levels(machine)
    l1, l2 = st.cache[lv[1]], st.cache[lv[2]]
    assert l1.evictions > 0 and l2.evictions > 0
    if pattern != "sequential":
        assert sum(l2.access) > sum(l2.miss) > 0
    assert st.tlb[0].miss[1] > 0 and st.stlb_hit[1] + st.tlb_walk[1] == st.tlb[0].miss[1]
    if pattern != "random":
        assert l1.writebacks > 0 and l2.writebacks > 0 and st.mem_writebacks > 0
    if pattern != "sequential":
        assert st.stlb_hit[1] > 0


@pytest.mark.parametrize("general", [False, True])
def test_access_at_the_top_of_the_address_space_ends(general):
    """`load,0xfffffffffffffffc,8` wrapped addr+size-1 to 3 and the TLB page walk never ended
    (deaf to Ctrl-C). The kernel clamps such an access to the last bytes of the address space
    and says so, and the batch is refused naming the record (it was counted as within one line,
    "0 straddle", issue 25); one that ends exactly at 2^64 - 1 is a plain access."""
    import subprocess
    import sys
    code = ("import numpy as np; from corecast.sim import native as N;"
            "from corecast.errors import UserError;"
            "from corecast.sim.engine import SimOptions, Simulator;"
            "from corecast.sim.machine import load_machine;"
            "r = np.zeros(3, dtype=N.RECORD_DTYPE);"
            "r['addr'] = np.array([0xFFFFFFFFFFFFFFF8, 0x1000, 0xFFFFFFFFFFFFFFFC], dtype=np.uint64);"
            "r['kind'] = N.KIND_LOAD; r['size'] = 8;"
            f"sim = Simulator(load_machine('zen4-genoa'), 1, SimOptions(general_loop={general}));"
            "sim.feed(r[:2]); st = sim.stats();"
            "print(st.records, st.access[N.KIND_LOAD], st.split[N.KIND_LOAD]);"
            "exec('try: sim.feed(r)\\nexcept UserError as e: print(e)')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.splitlines()
    assert first.split() == ["2", "2", "0"]         # ends at 2^64 - 1: one line, not split
    assert second == ("record 4: a load of 8 bytes at 0xfffffffffffffffc passes the top of the address space "
                      "(its last byte would wrap to address 0)")


@pytest.mark.parametrize("sets", [1, 4])
@pytest.mark.parametrize("straddle_all", [False, True])
def test_kernel_two_line_accesses_that_hit(sets, straddle_all):
    """The kernel's own path for an access over two lines that both hit an LRU L1 (sort's
    instruction fetches across a line): the same counters as the general walk, with loads,
    stores and read-modify-writes that mark both lines dirty (then written back), accesses
    that hit one line of the two and miss the other, and a one-set L1 (both lines in one set)."""
    rng = np.random.default_rng(sets * 2 + straddle_all)
    machine = {"name": f"split2-{sets}", "frequency_hz": 1e9, "cache": [
        {"level": 1, "kind": "instruction", "size": sets * 4 * 64, "line_size": 64, "ways": 4, "replacement": "lru"},
        {"level": 1, "kind": "data", "size": sets * 4 * 64, "line_size": 64, "ways": 4, "replacement": "lru"},
        {"level": 2, "kind": "unified", "size": 16 * 8 * 64, "line_size": 64, "ways": 8, "replacement": "lru",
         "policy": "non-inclusive", "write_allocate": True}]}
    n = 30_000
    r = np.zeros(n, dtype=N.RECORD_DTYPE)
    kind = rng.choice([N.KIND_FETCH, N.KIND_LOAD, N.KIND_STORE, N.KIND_MODIFY], size=n, p=[0.5, 0.25, 0.15, 0.1])
    lines = rng.integers(0, 3 * sets, n)                                   # mostly a few hot lines
    lines = np.where(rng.random(n) < 0.05, rng.integers(0, 64 * sets, n), lines)   # some far ones: misses
    base = np.where(kind == N.KIND_FETCH, 0x400000, 0x10000000).astype(np.uint64)
    r["addr"] = base + lines.astype(np.uint64) * 64 + rng.integers(50, 64, n).astype(np.uint64)
    r["size"] = np.where(kind == N.KIND_FETCH, rng.choice([7, 15], n), rng.choice([8, 16], n))
    r["kind"] = kind
    cross = (r["addr"] & np.uint64(63)) + r["size"] > 64
    assert cross.mean() > 0.3
    st = _check(machine, r, [7, 20_000], straddle_all=straddle_all)
    assert st.split[N.KIND_FETCH] > 1000 and st.split[N.KIND_STORE] > 100 and st.split[N.KIND_MODIFY] > 100
    assert st.cache[2].miss[N.KIND_LOAD] > 0 and st.cache[1].writebacks > 0
