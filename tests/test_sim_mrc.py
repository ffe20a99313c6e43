"""Miss-rate curves in one pass (corecast.sim.mrc, native/mrc/mrc.c): exact against LRU caches
simulated one size at a time, equal to the simulator's own caches, SHARDS within its error."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from corecast.errors import UserError
from corecast.sim import mrc
from corecast.sim import native as N
from corecast.sim.engine import SimOptions, Simulator
from corecast.sim.machine import parse_machine

HERE = Path(__file__).resolve().parent


def lru_misses(lines, size: int) -> int:
    """Misses of a fully associative LRU cache of `size` lines, simulated the slow, plain way."""
    cache: OrderedDict[int, None] = OrderedDict()
    misses = 0
    for ln in lines:
        if ln in cache:
            cache.move_to_end(ln)
        else:
            misses += 1
            cache[ln] = None
            if len(cache) > size:
                cache.popitem(last=False)
    return misses


def records(addr, kind=N.KIND_LOAD, size=8, tid=0) -> np.ndarray:
    r = np.zeros(len(addr), dtype=N.RECORD_DTYPE)
    r["addr"] = np.asarray(addr, dtype=np.uint64)
    r["kind"], r["size"], r["tid"] = kind, size, tid
    return r


def test_stack_distances_of_a_small_sequence():
    s = mrc.StackDistances(64)
    s.feed_lines([1, 2, 3, 1, 2, 3, 4, 1])
    h = s.histogram()
    assert (h.offered, h.cold, h.lines) == (8, 4, 4)
    assert list(h.counts) == [0, 0, 3, 1]
    assert list(h.misses([64, 128, 192, 256, 320])) == [8, 8, 5, 4, 4]


def test_vector_pick_takes_the_records_the_scalar_one_does():
    """The sampled pass's pick with AVX-512 (where the CPU has it) against the scalar loop, on
    records of every kind (and a foreign one), several threads, line-straddling accesses, sizes
    0 to 255 and lengths that leave a tail: identical histograms and counts, all threads and one,
    fixed-rate and fixed-size."""
    L = mrc.lib()
    if not L.cc_mrc_simd(-1):
        pytest.skip("this CPU has no AVX-512: the scalar pick is the only one")
    rng = np.random.default_rng(11)
    n = 200_003
    r = np.zeros(n, dtype=N.RECORD_DTYPE)
    r["addr"] = rng.integers(0, 1 << 22, n, dtype=np.uint64) * np.uint64(8) + rng.integers(0, 8, n).astype(np.uint64)
    r["addr"][::97] = np.uint64((1 << 64) - 64)                # near the top of the address space
    r["kind"] = rng.choice([0, 1, 2, 3, 4, 5, 6], n)
    r["size"] = rng.integers(0, 256, n)
    r["tid"] = rng.integers(0, 3, n)

    def run(simd, **kw):
        L.cc_mrc_simd(simd)
        try:
            return [(c.misses, c.accesses, c.instructions) for c in mrc.analyse([r], **kw).curves]
        finally:
            L.cc_mrc_simd(1)
    sizes = [1 << k for k in range(10, 24, 2)]
    for kw in ({"rate": 0.05}, {"rate": 0.3, "accesses": "data", "per_thread": True},
               {"rate": 0.2, "count": "exposed"}, {"rate": 0.5, "sample_max": 500, "per_thread": True}):
        assert run(1, sizes=sizes, **kw) == run(0, sizes=sizes, **kw), kw
    bad = r.copy()
    bad["kind"][150_001] = 9
    for simd in (0, 1):
        L.cc_mrc_simd(simd)
        with pytest.raises(UserError, match="record 150001: kind 9"):
            mrc.analyse([bad], rate=0.1)
    L.cc_mrc_simd(1)


def test_fixed_size_shards_without_eviction_is_exact():
    """Fixed-size SHARDS at rate 1 with room for every line tracks all of them: the curve is
    the exact one, in the weighted histogram (estimated accesses by distance in lines)."""
    rng = np.random.default_rng(5)
    lines = rng.integers(0, 3000, 60_000)
    recs = records(lines * 64)
    sizes = [64 * k for k in (1, 16, 256, 1024, 2048, 4096)]
    exact = mrc.analyse([recs], sizes=sizes)
    fixed = mrc.analyse([recs], sizes=sizes, sample_max=4096)
    assert fixed.sample_rate == 1.0 and fixed.curves[0].histogram.weighted
    assert fixed.curves[0].misses == pytest.approx(exact.curves[0].misses, abs=1e-6)
    assert fixed.curves[0].footprint_bytes == exact.curves[0].footprint_bytes


def test_fixed_size_shards_bounds_its_sample_and_follows_the_exact_curve():
    """A footprint of 200,000 lines through a sample of at most 2,000: the rate falls to about
    2,000/200,000, no more than 2,000 lines are ever tracked, the estimated footprint is within
    10% and the curve within 0.02 of the exact one (mean absolute error, from the sample's
    resolution up); with more room, closer."""
    rng = np.random.default_rng(7)
    parts = []
    for _ in range(4):                                     # a hot loop, a warm set, a cold scan
        parts += [rng.integers(0, 500, 100_000), rng.integers(0, 20_000, 100_000),
                  rng.integers(0, 200_000, 100_000)]
    lines = np.concatenate(parts).astype(np.uint64)
    recs = records(lines * np.uint64(64))
    exact = mrc.analyse([recs])
    fixed = mrc.analyse([recs], sample_max=2000, sizes=None)
    h = fixed.curves[0].histogram
    assert h.weighted and h.lines <= 2000
    assert 0.002 < fixed.sample_rate < 0.05
    assert fixed.curves[0].footprint_bytes == pytest.approx(exact.curves[0].footprint_bytes, rel=0.1)
    sizes = fixed.curves[0].sizes_bytes
    assert sizes[0] >= mrc.resolution_bytes(64, fixed.sample_rate)
    ref = mrc.analyse([recs], sizes=sizes)
    err = np.mean(np.abs(np.array(ref.curves[0].miss_ratio) - np.array(fixed.curves[0].miss_ratio)))
    assert err < 0.02, err
    roomier = mrc.analyse([recs], sample_max=20_000, sizes=sizes)
    err2 = np.mean(np.abs(np.array(ref.curves[0].miss_ratio) - np.array(roomier.curves[0].miss_ratio)))
    assert err2 < err and roomier.sample_rate > fixed.sample_rate
    with pytest.raises(UserError, match="--sample-max 0"):
        mrc.analyse([recs], sample_max=0)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_pass_equals_each_size_simulated(seed):
    rng = np.random.default_rng(seed)
    # a mixture of a hot set, a loop and random lines; 150,000 accesses force the time axis
    # to be compacted (it starts at 64 Ki positions) several times
    n = 150_000
    kind = rng.integers(0, 3, n)
    lines = np.where(kind == 0, rng.integers(0, 40, n),
                     np.where(kind == 1, 1000 + np.arange(n) % 700, rng.integers(5000, 5600, n)))
    s = mrc.StackDistances(64)
    s.feed_lines(lines.astype(np.uint64))
    h = s.histogram()
    for size in (1, 7, 40, 41, 300, 700, 1000, 1400, 2000):
        assert h.misses([size * 64])[0] == lru_misses(lines.tolist(), size), size


def one_level(size: int, ways: int, line: int = 64) -> dict:
    return {"name": "one-level", "frequency_hz": 1e9,
            "cache": [{"level": 1, "kind": "unified", "size": size, "line_size": line, "ways": ways,
                       "replacement": "lru", "write_allocate": True}]}


def sim_misses(machine: dict, trace: np.ndarray) -> int:
    sim = Simulator(parse_machine(machine), 1, SimOptions())
    try:
        sim.feed(trace)
        st = sim.finish()
    finally:
        sim.close()
    return int(sum(st.cache[0].miss))


def mixed_trace(seed: int, n: int = 60_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = 0x10000000
    addr = np.where(rng.random(n) < 0.5, base + rng.integers(0, 1 << 16, n) * 8,
                    base + (np.arange(n) * 24) % (1 << 18))
    addr = addr + np.where(rng.random(n) < 0.05, rng.integers(1, 64, n), 0)    # some straddle
    kind = rng.choice([N.KIND_LOAD, N.KIND_STORE, N.KIND_MODIFY, N.KIND_FETCH], size=n)
    return records(addr, kind=kind, size=rng.choice([1, 4, 8, 16], size=n))


@pytest.mark.parametrize("seed", [4, 5])
def test_fully_associative_points_equal_the_simulator(seed):
    trace = mixed_trace(seed)
    res = mrc.analyse([trace[:20_000], trace[20_000:]], sizes=[4096, 16384, 65536], accesses="all")
    for size, misses in zip(res.curves[0].sizes_bytes, res.curves[0].misses):
        assert misses == sim_misses(one_level(size, size // 64), trace), size


@pytest.mark.parametrize("ways", [1, 4, 8])
def test_set_associative_points_equal_the_simulator(ways):
    trace = mixed_trace(6)
    sizes = [4096, 16384, 65536]
    res = mrc.analyse([trace], sizes=sizes, assoc=ways)
    sa = res.curves[0].set_associative
    assert sa["ways"] == ways
    for size, misses in zip(sizes, sa["misses"]):
        assert misses == sim_misses(one_level(size, ways), trace), size


def sim_exposed_misses(machine: dict, trace: np.ndarray) -> tuple[int, int]:
    """(exposed accesses, exposed misses) of the one level: fetches, loads, read-modify-writes."""
    from corecast.sim.engine import simulate
    from corecast.sim.trace import Trace
    res = simulate(Trace(trace, {}), parse_machine(machine), options=SimOptions(tlb=False))
    level = res.caches[0]
    kinds = ("fetch", "load", "modify")
    return sum(level["accesses"][k] for k in kinds), sum(level["misses"][k] for k in kinds)


@pytest.mark.parametrize("seed", [7, 8])
def test_exposed_misses_equal_the_simulator(seed):
    """count="exposed": stores move their lines in the stack but only fetches, loads and
    read-modify-writes are counted -- the simulator's exposed misses, which the CPI stack's
    events are; and the instructions give misses per 1K instructions."""
    trace = mixed_trace(seed)
    sizes = [4096, 16384, 65536]
    res = mrc.analyse([trace], sizes=sizes, count="exposed", assoc=4)
    c = res.curves[0]
    n_instr = int(np.count_nonzero(trace["kind"] == N.KIND_FETCH))
    assert res.counted == "exposed" and c.instructions == n_instr
    for i, size in enumerate(sizes):
        acc, miss = sim_exposed_misses(one_level(size, size // 64), trace)
        assert (c.accesses, c.misses[i]) == (acc, miss), size
        assert c.mpki[i] == pytest.approx(1000 * miss / n_instr)
        acc4, miss4 = sim_exposed_misses(one_level(size, 4), trace)
        assert (c.set_associative["accesses"][i], c.set_associative["misses"][i]) == (acc4, miss4)
    everything = mrc.analyse([trace], sizes=sizes).curves[0]
    assert everything.accesses == len(trace) > c.accesses and everything.misses[0] > c.misses[0]
    # a store brings its line in: the load after it hits, and only the load counts
    two = records([0x1000, 0x1000], kind=np.array([N.KIND_STORE, N.KIND_LOAD]))
    one = mrc.analyse([two], sizes=[64], count="exposed").curves[0]
    assert (one.accesses, one.misses) == (1, [0.0])
    # the sampled pass counts the same accesses and instructions
    sampled = mrc.analyse([trace], sizes=sizes, count="exposed", rate=0.5).curves[0]
    assert sampled.accesses == c.accesses and sampled.instructions == n_instr


def test_per_thread_and_shared_curves():
    a = records(0x1000 + (np.arange(4000) % 100) * 64, tid=0)       # 100 lines, looped
    b = records(0x900000 + (np.arange(4000) % 300) * 64, tid=1)     # 300 other lines
    trace = np.empty(8000, dtype=N.RECORD_DTYPE)
    trace[0::2], trace[1::2] = a, b
    res = mrc.analyse([trace], sizes=[64 * 100, 64 * 300, 64 * 400], per_thread=True)
    shared, t0, t1 = res.curves
    assert (shared.scope, t0.scope, t1.scope) == ("shared", "thread 0", "thread 1")
    assert t0.misses == [100, 100, 100]          # each thread alone: cold misses only, once it fits
    assert t1.misses[1:] == [300, 300] and t1.misses[0] == 4000
    # together: thread 0 reuses after 199 distinct lines (hits at 300), thread 1 after 399
    assert shared.misses[2] == 400 and shared.misses[1] == 100 + 4000 and shared.misses[0] == 8000


def test_knee_and_working_sets_of_two_loops():
    # 64 lines looped 50 times, then 4096 lines looped 5 times: working sets of 4 KiB and 256 KiB
    small = np.tile(np.arange(64), 50)
    big = 10_000 + np.tile(np.arange(4096), 5)
    trace = records(np.concatenate([small, big]) * 64)
    res = mrc.analyse([trace])
    c = res.curves[0]
    assert any(4096 <= w <= 4096 * 1.2 for w in c.working_sets_bytes), c.working_sets_bytes
    assert any(262144 <= w <= 262144 * 1.2 for w in c.working_sets_bytes), c.working_sets_bytes
    assert c.knee_bytes is not None and 4096 <= c.knee_bytes <= 262144
    assert c.miss_ratio == sorted(c.miss_ratio, reverse=True)       # never rises with size


def test_access_at_the_top_of_the_address_space_ends():
    """An access whose last byte would be past 2^64 - 1 is clamped, not looped over forever."""
    trace = records([0xFFFFFFFFFFFFFFFC, 0xFFFFFFFFFFFFFFC0, 0x1000], size=8)
    code = ("import numpy as np; from corecast.sim import mrc, native as N;"
            "r = np.zeros(3, dtype=N.RECORD_DTYPE);"
            f"r['addr'] = np.array({[int(a) for a in trace['addr']]}, dtype=np.uint64);"
            "r['kind'] = N.KIND_LOAD; r['size'] = 8;"
            "res = mrc.analyse([r], sizes=[128, 256], assoc=2);"
            "print(res.curves[0].misses, res.curves[0].set_associative['misses'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    # the first two touch the last line of the address space (the second hits), the third misses
    assert out.stdout.strip() == "[2.0, 2.0] [2, 2]"


def test_user_mistakes():
    with pytest.raises(UserError, match="power of two"):
        mrc.analyse([records([0])], line=48)
    with pytest.raises(UserError, match="sampling rate"):
        mrc.StackDistances(64, rate=0)
    with pytest.raises(UserError, match="power of two"):
        mrc.analyse([records([0])], sizes=[3 * 4096], assoc=4)
    with pytest.raises(UserError, match="no memory accesses"):
        mrc.analyse([records([0], kind=N.KIND_BRANCH)])
    with pytest.raises(UserError, match="--assoc needs --sizes"):
        mrc.analyse([records([0])], assoc=4)


# ------------------------------------------------------------------ a captured real program

BIG_PROG = r"""
#include <stdlib.h>
#include <stdio.h>
/* A pointer chase over a 4 MiB random cycle of 64-byte nodes, mixed with a hot table and a
 * streaming pass: a footprint of ~70,000 lines, so that a 1% sample still holds hundreds. */
#define NODES (1 << 16)
struct node { struct node *next; char pad[56]; };
int main(void) {
    struct node *v = malloc(sizeof(struct node) * NODES);
    unsigned *perm = malloc(sizeof(unsigned) * NODES), hot[512] = {0};
    unsigned long long x = 88172645463325252ULL;
    for (unsigned i = 0; i < NODES; i++) perm[i] = i;
    for (unsigned i = NODES - 1; i > 0; i--) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        unsigned j = x % (i + 1), t = perm[i]; perm[i] = perm[j]; perm[j] = t;
    }
    for (unsigned i = 0; i < NODES; i++) v[perm[i]].next = &v[perm[(i + 1) % NODES]];
    struct node *p = &v[perm[0]];
    unsigned long s = 0;
    for (int round = 0; round < 3; round++)
        for (unsigned i = 0; i < NODES; i++) {
            p = p->next;
            hot[(i * 7) & 511] += (unsigned)(unsigned long)p;
            if ((i & 3) == 0) s += ((unsigned char *)v)[(i * 64 + round) % (sizeof(struct node) * NODES)];
        }
    printf("%lu %u\n", s, hot[3]);
    return 0;
}
"""


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory):
    if shutil.which("valgrind") is None or shutil.which("gcc") is None:
        pytest.skip("needs valgrind and gcc (setup/debian-packages.txt installs them)")
    d = tmp_path_factory.mktemp("mrcprog")
    (d / "p.c").write_text(BIG_PROG)
    subprocess.run(["gcc", "-O1", "-o", str(d / "p"), str(d / "p.c")], check=True)
    out = d / "p.cctrace"
    # lackey: the trace these tests' figures were taken on (a QEMU capture places the stack
    # elsewhere, and SHARDS then samples two of the hot table's lines: see docs/sim.md)
    r = subprocess.run([sys.executable, "-m", "corecast", "sim", "capture", "--backend", "lackey", "-o", str(out),
                        "--", str(d / "p")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    from corecast.sim.trace import load
    return load(out)


@pytest.mark.slow
def test_real_program_one_pass_equals_each_size(real_trace):
    """Up to 2 MiB against the simulator (it takes at most 65,535 ways); 4 MiB against the
    plain LRU above, on the program's data accesses that stay within one line."""
    sizes = [32 << 10, 256 << 10, 1 << 20, 2 << 20]
    res = mrc.analyse(real_trace.chunks(1 << 20), sizes=sizes + [4 << 20], accesses="data")
    trace = np.concatenate(list(real_trace.chunks(1 << 22)))
    data = trace[np.isin(trace["kind"], [N.KIND_LOAD, N.KIND_STORE, N.KIND_MODIFY])]
    assert len(data) > 500_000
    for size, misses in zip(sizes, res.curves[0].misses):
        assert misses == sim_misses(one_level(size, size // 64), data), size
    size = np.maximum(data["size"].astype(np.uint64), 1)
    one_line = (data["addr"] >> 6) == ((data["addr"] + size - 1) >> 6)
    plain = data[one_line]
    res1 = mrc.analyse([plain], sizes=[4 << 20])
    assert res1.curves[0].misses[0] == lru_misses((plain["addr"] >> 6).tolist(), (4 << 20) // 64)


@pytest.mark.slow
def test_shards_at_one_percent_is_within_two_hundredths(real_trace):
    """Over the sizes a 1% sample speaks for (from 1/rate lines = 8 KiB up to the footprint)."""
    sampled = mrc.analyse(real_trace.chunks(1 << 20), accesses="data", rate=0.01)
    assert sampled.sample_rate == pytest.approx(0.01, rel=1e-3)
    assert sampled.curves[0].sizes_bytes[0] == 8192
    exact = mrc.analyse(real_trace.chunks(1 << 20), accesses="data", sizes=sampled.curves[0].sizes_bytes)
    a, b = np.array(exact.curves[0].miss_ratio), np.array(sampled.curves[0].miss_ratio)
    assert exact.curves[0].footprint_bytes > 2 << 20
    assert np.mean(np.abs(a - b)) < 0.02, (a, b)
    assert sampled.sample_error and "SHARDS" in sampled.sample_error and "rough" not in sampled.sample_error
    json.dumps(sampled.to_dict())
    rough = mrc.analyse(real_trace.chunks(1 << 20), accesses="data", rate=0.01, sizes=[1024, 65536])
    assert "1 asked" in rough.sample_error


# ------------------------------------------------------------------ a Debian tool, captured by QEMU
@pytest.fixture(scope="module")
def sort_trace(tmp_path_factory):
    """coreutils' sort of 20,000 random lines, captured with the QEMU back end (10 M data
    accesses, a footprint of 1.4 MiB)."""
    from corecast.sim.capture import capture, qemu_path
    from corecast.sim.trace import load
    if qemu_path() is None:
        pytest.skip("needs qemu-x86_64 (setup/debian-packages.txt)")
    import random
    d = tmp_path_factory.mktemp("mrcsort")
    rng = random.Random(1)
    (d / "in.txt").write_text("".join(f"{rng.randrange(10**12):012d} line\n" for _ in range(20_000)))
    info = capture([shutil.which("sort"), "-o", str(d / "out.txt"), str(d / "in.txt")], d / "sort.cctrace",
                   annotate=False, env={"PATH": "/usr/bin:/bin", "LC_ALL": "C"}, backend="qemu")
    assert info.exit_status == 0
    return load(info.path)


@pytest.mark.slow
def test_debian_tool_one_pass_equals_each_size(sort_trace):
    """The one-pass curve of sort's data accesses, size by size, against the simulator run once
    per size with a fully associative LRU cache of that size."""
    sizes = [8 << 10, 64 << 10, 512 << 10, 2 << 20]
    res = mrc.analyse(sort_trace, sizes=sizes, accesses="data")
    data = np.concatenate([c[np.isin(c["kind"], [N.KIND_LOAD, N.KIND_STORE, N.KIND_MODIFY])]
                           for c in sort_trace.chunks(1 << 22)])
    assert res.curves[0].accesses == len(data) > 5_000_000
    assert res.curves[0].misses[0] > res.curves[0].misses[-1] > 0
    for size, misses in zip(sizes, res.curves[0].misses):
        assert misses == sim_misses(one_level(size, size // 64), data), size


@pytest.mark.slow
def test_debian_tool_set_associative_points_equal_the_simulator(sort_trace):
    """Three 8-way sizes simulated together in the one pass, each equal to the simulator alone."""
    sizes = [16 << 10, 128 << 10, 1 << 20]
    res = mrc.analyse(sort_trace, sizes=sizes, accesses="all", assoc=8)
    trace = np.concatenate(list(sort_trace.chunks(1 << 22)))
    for size, misses in zip(sizes, res.curves[0].set_associative["misses"]):
        assert misses == sim_misses(one_level(size, 8), trace), size


@pytest.mark.slow
def test_debian_tool_shards_at_one_percent(sort_trace):
    """SHARDS at rate 0.01 against the exact curve of the same trace, from 8 KiB (1/rate lines)
    to the footprint: mean absolute error under 0.02, for data accesses and for all."""
    for accesses in ("data", "all"):
        sampled = mrc.analyse(sort_trace, accesses=accesses, rate=0.01)
        sizes = sampled.curves[0].sizes_bytes
        exact = mrc.analyse(sort_trace, accesses=accesses, sizes=sizes)
        assert sizes[0] == 8192 and sizes[-1] >= exact.curves[0].footprint_bytes
        a, b = np.array(exact.curves[0].miss_ratio), np.array(sampled.curves[0].miss_ratio)
        assert np.mean(np.abs(a - b)) < 0.02, (accesses, a, b)
        assert sampled.curves[0].accesses == exact.curves[0].accesses


@pytest.mark.slow
def test_debian_tool_fixed_size_shards(sort_trace):
    """Fixed-size SHARDS with 2,048 lines from rate 1 on sort's accesses (a footprint of about
    23,000 lines, so the rate falls to about a tenth): the sample stays within it and the curve
    within 0.02 of the exact one from its resolution up."""
    for accesses in ("data", "all"):
        fixed = mrc.analyse(sort_trace, accesses=accesses, sample_max=2048)
        assert fixed.curves[0].histogram.lines <= 2048 and 0.02 < fixed.sample_rate < 0.2
        sizes = fixed.curves[0].sizes_bytes
        exact = mrc.analyse(sort_trace, accesses=accesses, sizes=sizes)
        a, b = np.array(exact.curves[0].miss_ratio), np.array(fixed.curves[0].miss_ratio)
        assert np.mean(np.abs(a - b)) < 0.02, (accesses, a, b)


# ------------------------------------------------------------------ the command
@pytest.mark.slow
def test_cli_json_dataset_and_plot(cli, tmp_path):
    from corecast import dataset
    from corecast.sim.trace import Trace, write_trace
    small = np.tile(np.arange(64), 50)
    big = 10_000 + np.tile(np.arange(4096), 5)
    t = write_trace(tmp_path / "t.cctrace", Trace(records(np.concatenate([small, big]) * 64), {}))
    r = cli("sim", "mrc", t, "--sizes", "4KiB,64KiB,256KiB,512KiB", "--assoc", "4", "--json")
    assert r.code == 0, r.err
    d = r.json()
    c = d["curves"][0]
    assert c["sizes_bytes"] == [4096, 65536, 262144, 524288]
    assert c["misses"][-1] == 64 + 4096                 # cold misses only once both loops fit
    assert c["set_associative"]["ways"] == 4
    out, png = tmp_path / "curve.csv", tmp_path / "curve.png"
    r = cli("sim", "mrc", t, "-o", out, "--plot", png)
    assert r.code == 0, r.err
    ds = dataset.load(out)
    assert list(ds.column("cache_bytes"))[0] == 1024 and "miss_ratio" in ds.metric_names
    assert png.stat().st_size > 10_000
    assert "knee" in r.out and "working sets" in r.out


@pytest.mark.slow
@pytest.mark.parametrize("args", [[], ["--sample", "0.5"], ["--sizes", "4KiB", "--assoc", "2"]])
def test_cli_damaged_trace(cli, tmp_path, args):
    """The kinds are checked by the passes themselves (the trace is not read twice): a record of
    no known kind is named, whichever pass meets it first."""
    from corecast.sim.trace import HEADER_RESERVE, Trace, write_trace
    t = write_trace(tmp_path / "t.cctrace", Trace(records(np.arange(3_000_000) * 64 % (1 << 22)), {}),
                    compress=False)                             # version 1: its bytes are its records
    raw = bytearray(t.read_bytes())
    raw[HEADER_RESERVE + 2_500_000 * 16 + 14] = 9              # record 2,500,000's kind byte
    t.write_bytes(bytes(raw))
    r = cli("sim", "mrc", t, *args)
    assert r.code == 2 and "record 2500000: kind 9 is not a record kind" in r.err, r.err


@pytest.mark.parametrize("args, message", [
    (["--sizes", "12KiB", "--assoc", "4"], "power of two"),
    (["--sizes", "lots"], "is not a size"),
    (["--assoc", "many"], "give full or a number of ways"),
    (["--sample", "2"], "sampling rate"),
    (["--line", "48"], "power of two"),
    # a tag and a stamp per line of 1024 TiB: an "internal error: MemoryError" (exit 1) before
    (["--sizes", "64KiB,1024TiB", "--assoc", "16"], "need 2.62e+05 GiB (16 bytes a line), more than this machine's"),
])
def test_cli_mistakes(cli, tmp_path, args, message):
    from corecast.sim.trace import Trace, write_trace
    t = write_trace(tmp_path / "t.cctrace", Trace(records(np.arange(100) * 64), {}))
    r = cli("sim", "mrc", t, *args)
    assert r.code == 2 and message in r.err and "Traceback" not in r.err
