"""The native cache model: replacement policies against hand-worked sequences and a Python
reference, hierarchy policies, write-allocate, straddling, warm-up, TLBs, branch predictors."""
from __future__ import annotations

import numpy as np
import pytest

from corecast.sim import synth
from corecast.sim.engine import SimOptions, simulate
from corecast.sim.machine import parse_machine
from corecast.sim.native import (KIND_BRANCH, KIND_FETCH, KIND_LOAD, KIND_STORE, BR_COND,
                                 BR_TAKEN, RECORD_DTYPE, ReplacementArray)

A, B, C, D, E, F = (ord(x) for x in "ABCDEF")


# ----------------------------------------------------------------------------------------
# replacement policies, hand-worked (one set of 4 ways)

def _run(policy, seq, ways=4, sets=1):
    arr = ReplacementArray(sets, ways, policy)
    return [arr.access(x) for x in seq]


def test_lru_hand_worked():
    # A B C D fill the set; A is touched, so E evicts the least recently used: B.
    r = _run("lru", [A, B, C, D, A, E, B])
    assert [h for h, _ in r] == [False, False, False, False, True, False, False]
    assert r[5][1] == B
    assert r[6][1] == C          # B comes back and evicts C, now the oldest


def test_fifo_hand_worked():
    # FIFO ignores the hit on A: E evicts the first in, A; then B comes in over B? no: B hits.
    r = _run("fifo", [A, B, C, D, A, E, B, A])
    assert [h for h, _ in r] == [False, False, False, False, True, False, True, False]
    assert r[5][1] == A
    assert r[7][1] == B          # A returns and evicts the oldest insertion left, B


def test_plru_hand_worked():
    # Tree bits after filling ways 0-3 with A-D: root -> left, left node -> way 0.
    # Touching A (way 0) turns the root to the right subtree, whose node points at way 2 (C).
    r = _run("plru", [A, B, C, D, A, E])
    assert r[5] == (False, C)
    # Now E sits in way 2; the root points left again and the left node at way 1 (B).
    r2 = _run("plru", [A, B, C, D, A, E, F])
    assert r2[6] == (False, B)


def test_random_is_seeded_and_valid():
    seq = list(np.random.default_rng(3).integers(0, 12, 500))
    a = _run("random", seq)
    b = _run("random", seq)
    assert a == b
    resident = set()
    for x, (hit, victim) in zip(seq, a):
        assert hit == (x in resident)
        if not hit:
            if victim is not None:
                assert victim in resident
                resident.discard(victim)
            resident.add(x)
        assert len(resident) <= 4


class RefCache:
    """A plain Python set-associative cache (the reference for the native one)."""

    def __init__(self, sets, ways, policy):
        self.sets, self.ways, self.policy = sets, ways, policy
        self.lines = [[None] * ways for _ in range(sets)]
        self.stamp = [[0] * ways for _ in range(sets)]
        self.bits = [0] * sets
        self.clock = 0

    def _plru_touch(self, s, w):
        node, lo, span = 1, 0, self.ways
        while span > 1:
            span //= 2
            if w < lo + span:
                self.bits[s] |= 1 << node
                node = 2 * node
            else:
                self.bits[s] &= ~(1 << node)
                node, lo = 2 * node + 1, lo + span

    def _plru_victim(self, s):
        node, lo, span = 1, 0, self.ways
        while span > 1:
            span //= 2
            if (self.bits[s] >> node) & 1:
                node, lo = 2 * node + 1, lo + span
            else:
                node = 2 * node
        return lo

    def access(self, x):
        s = x % self.sets
        row = self.lines[s]
        self.clock += 1
        if x in row:
            w = row.index(x)
            if self.policy == "lru":
                self.stamp[s][w] = self.clock
            elif self.policy == "plru":
                self._plru_touch(s, w)
            return True, None
        if None in row:
            w, victim = row.index(None), None
        else:
            if self.policy in ("lru", "fifo"):
                w = min(range(self.ways), key=lambda i: self.stamp[s][i])
            else:
                w = self._plru_victim(s)
            victim = row[w]
        row[w] = x
        self.stamp[s][w] = self.clock
        if self.policy == "plru":
            self._plru_touch(s, w)
        return False, victim


@pytest.mark.parametrize("policy", ["lru", "fifo", "plru"])
@pytest.mark.parametrize("sets,ways", [(1, 8), (4, 4), (16, 2), (2, 16), (2, 32)])
def test_against_reference(policy, sets, ways):
    rng = np.random.default_rng(sets * 100 + ways)
    seq = rng.integers(0, sets * ways * 3, 4000).tolist()
    native = ReplacementArray(sets, ways, policy)
    ref = RefCache(sets, ways, policy)
    for x in seq:
        assert native.access(x) == ref.access(x)


@pytest.mark.parametrize("policy", ["lru", "fifo"])
def test_stamp_renumbering_keeps_order(policy):
    # Push the 32-bit clock to its end: the stamps are renumbered and the order survives.
    rng = np.random.default_rng(7)
    seq = rng.integers(0, 40, 3000).tolist()
    native = ReplacementArray(4, 4, policy)
    ref = RefCache(4, 4, policy)
    for i, x in enumerate(seq):
        if i in (500, 1500):
            native.set_clock(2**32 - 10)
        assert native.access(x) == ref.access(x)


# ----------------------------------------------------------------------------------------
# hierarchies

def _machine(l1, l2=None, l3=None, tlb=None, branch=None):
    caches = [{"level": 1, "kind": "instruction", "size": 4096, "ways": 4}, {"level": 1, "kind": "data", **l1}]
    if l2:
        caches.append({"level": 2, "kind": "unified", **l2})
    if l3:
        caches.append({"level": 3, "kind": "unified", **l3})
    d = {"name": "t", "frequency_hz": 1e9, "cache": caches}
    if tlb:
        d["tlb"] = tlb
    if branch:
        d["branch"] = branch
    return parse_machine(d)


def _loads(lines, kind=KIND_LOAD, size=8, offsets=None, line=64):
    d = np.zeros(len(lines), dtype=RECORD_DTYPE)
    d["addr"] = np.array(lines, dtype=np.uint64) * line + (0 if offsets is None else np.array(offsets, dtype=np.uint64))
    d["kind"] = kind
    d["size"] = size
    return d


def _sim(m, recs, **kw):
    return simulate(recs, m, options=SimOptions(tlb=False, **kw))


ONE_SET_2WAY = {"size": 128, "ways": 2}


def test_inclusive_back_invalidates():
    # L1 and L2 both 2-way, one set. A B, then A again (an L1 hit the L2 does not see), then
    # C: the L2 evicts its LRU line A and, being inclusive, takes A out of L1 too; the last A
    # misses in L1 (and its refill evicts B from L2, and so from L1: a second
    # back-invalidation). Non-inclusive keeps A in L1.
    seq = _loads([1, 2, 1, 3, 1])
    inc = _sim(_machine(ONE_SET_2WAY, {**ONE_SET_2WAY, "policy": "inclusive"}), seq)
    nine = _sim(_machine(ONE_SET_2WAY, {**ONE_SET_2WAY, "policy": "non-inclusive"}), seq)
    assert inc.cache("L1D")["misses"]["load"] == 4
    assert inc.cache("L2")["back_invalidations"] == 2
    assert nine.cache("L1D")["misses"]["load"] == 3
    assert nine.cache("L2")["back_invalidations"] == 0


def test_exclusive_and_victim_capacity():
    # Cycling over 4 lines with 2-way L1 and 2-way L2: the L1 always misses. An exclusive L2
    # holds the two lines L1 evicted last, so from the second round on every access hits the
    # L2; a non-inclusive L2 duplicates L1 and every access goes to memory.
    seq = _loads([1, 2, 3, 4] * 3)
    res = {}
    for pol in ("exclusive", "victim", "non-inclusive", "inclusive"):
        r = _sim(_machine(ONE_SET_2WAY, {**ONE_SET_2WAY, "policy": pol}), seq)
        res[pol] = r.served["load"]
        assert r.cache("L1D")["misses"]["load"] == 12
    assert res["exclusive"] == {"L2": 8, "memory": 4}
    assert res["non-inclusive"] == {"memory": 12}
    assert res["inclusive"] == {"memory": 12}
    # victim: a hit leaves the line in L2 too, which then holds a duplicate of an L1 line;
    # worked by hand, rounds 2 and 3 alternate L2 hit / memory.
    assert res["victim"] == {"L2": 4, "memory": 8}


def test_exclusive_hit_moves_line_up():
    m = _machine(ONE_SET_2WAY, {**ONE_SET_2WAY, "policy": "exclusive"})
    r = _sim(m, _loads([1, 2, 3, 1]))
    # A B C A: C pushes A into L2; A comes back from L2 (an L2 hit), pushing B down.
    assert r.served["load"] == {"memory": 3, "L2": 1}
    assert r.cache("L2")["fills"] == 2        # A, then B: victims only
    assert r.cache("L2")["accesses"]["load"] == 4


def test_write_allocate():
    l1_nowa = {"size": 4096, "ways": 4, "write_allocate": False}
    l1_wa = {"size": 4096, "ways": 4}
    l2 = {"size": 65536, "ways": 8}
    seq = np.concatenate([_loads([5], KIND_STORE), _loads([5])])
    nowa = _sim(_machine(l1_nowa, l2), seq)
    wa = _sim(_machine(l1_wa, l2), seq)
    # no write-allocate: the store miss fills only L2; the load then misses L1, hits L2
    assert nowa.cache("L1D")["misses"] == {"fetch": 0, "load": 1, "store": 1, "modify": 0}
    assert nowa.served["load"] == {"L2": 1}
    assert wa.cache("L1D")["misses"]["load"] == 0
    assert wa.served["load"] == {"L1": 1}
    # the dirty line lives where the store allocated: evicting it from L2 writes it back
    flush = np.concatenate([seq, _loads([5 + 1024 * k for k in range(1, 10)])])
    assert _sim(_machine(l1_nowa, {"size": 512, "ways": 8}), flush).cache("L2")["writebacks"] == 1


def test_dirty_writeback_counts():
    m = _machine({"size": 128, "ways": 2}, {"size": 4096, "ways": 4})
    r = _sim(m, np.concatenate([_loads([1, 2], KIND_STORE), _loads([3, 4])]))
    # two dirty lines evicted from L1 by two loads
    assert r.cache("L1D")["writebacks"] == 2
    assert r.cache("L1D")["evictions"] == 2


def test_straddling_access_counting():
    m = _machine({"size": 4096, "ways": 8}, {"size": 64, "ways": 1})
    # line 0, then line 5 (the 1-line L2 now holds only 5), then a load at byte 56 of 16
    # bytes: it straddles lines 0 (an L1 hit) and 1 (a miss).
    seq = np.concatenate([_loads([0]), _loads([5]), _loads([0], size=16, offsets=[56])])
    line = _sim(m, seq)
    whole = _sim(m, seq, straddle_all=True)
    for r in (line, whole):
        assert r.accesses["split_loads"] == 1
        assert r.cache("L1D")["accesses"]["load"] == 3      # one access, two lines
        assert r.cache("L1D")["misses"]["load"] == 3
        assert r.cache("L2")["misses"]["load"] == 3
    # the line rule asks L2 for line 1 only; cachegrind's rule asks for lines 0 and 1
    assert line.cache("L2")["fills"] == 3
    assert whole.cache("L2")["fills"] == 4


def test_warmup_excludes_first_instructions():
    m = _machine({"size": 4096, "ways": 4}, {"size": 65536, "ways": 8})
    recs = synth.stream(1000, stride=64)      # each load touches a new line
    cold = simulate(recs, m, options=SimOptions(tlb=False))
    warm = simulate(np.concatenate([recs, recs]), m,
                    options=SimOptions(tlb=False, warmup_instructions=1000))
    assert cold.instructions == 1000 and warm.instructions == 1000
    assert cold.cache("L2")["misses"]["load"] == 1000
    # the second pass finds the 64 KiB in L2 (L1 holds 4 KiB)
    assert warm.cache("L2")["misses"]["load"] == 0
    assert warm.served["load"] == {"L2": 1000}


def test_mpki_and_events():
    m = _machine({"size": 4096, "ways": 4}, {"size": 65536, "ways": 8})
    recs = synth.stream(1000, stride=64)
    r = simulate(recs, m, options=SimOptions(tlb=False))
    assert r.instructions == 1000
    assert r.cache("L1D")["mpki"] == pytest.approx(1000.0)
    # 1000 load misses and the one miss of the loop's instruction line
    assert r.events_per_kilo_instruction["dram"] == pytest.approx(1001.0)
    assert r.events_per_kilo_instruction["l2_hit"] == 0.0
    assert "l3_hit" not in r.events_per_kilo_instruction


def test_store_misses_not_exposed():
    m = _machine({"size": 4096, "ways": 4}, {"size": 65536, "ways": 8})
    r = simulate(synth.stream(500, stride=64, kind="store"), m, options=SimOptions(tlb=False))
    assert r.cache("L1D")["store_mpki"] == pytest.approx(1000.0)
    assert r.cache("L1D")["exposed_mpki"] == 0.0
    # only the instruction line's miss is exposed: 1 per 500 instructions
    assert r.events_per_kilo_instruction["dram"] == pytest.approx(2.0)


# ----------------------------------------------------------------------------------------
# TLBs

def test_tlb_two_levels():
    tlb = [{"level": 1, "kind": "data", "entries": 4, "ways": "full"},
           {"level": 1, "kind": "instruction", "entries": 2, "ways": "full"},
           {"level": 2, "kind": "unified", "entries": 16, "ways": 4}]
    m = _machine({"size": 4096, "ways": 4}, tlb=tlb)
    # 8 pages cycled 3 times: the 4-entry L1 TLB always misses; the 16-entry STLB holds all
    pages = [p for _ in range(3) for p in range(8)]
    d = _loads(pages, line=4096)
    d = synth._interleave_fetch(d)
    r = simulate(d, m)
    l1 = [t for t in r.tlbs if t["name"] == "L1 DTLB"][0]
    assert l1["misses"] == 24
    ev = r.events_per_kilo_instruction
    walks_data = ev["dtlb_miss"] * r.instructions / 1000
    stlb = ev["stlb_hit"] * r.instructions / 1000
    # fetches: one code page: one ITLB miss, one instruction-side page walk
    assert round(walks_data) == 8
    assert round(stlb) == 16
    assert ev["itlb_miss"] * r.instructions / 1000 == pytest.approx(1)


# ----------------------------------------------------------------------------------------
# branch predictors

def _branches(outcomes, pcs):
    d = np.zeros(2 * len(outcomes), dtype=RECORD_DTYPE)
    d["kind"][0::2] = KIND_FETCH
    d["size"][0::2] = 2
    d["addr"][0::2] = pcs
    d["kind"][1::2] = KIND_BRANCH
    d["addr"][1::2] = pcs
    d["size"][1::2] = BR_COND | (np.array(outcomes, dtype=np.uint8) * BR_TAKEN)
    return d


def ref_predictor(kind, table, hist_bits, outcomes, pcs):
    ctr = [1] * table
    ghr = 0
    miss = 0
    for t, pc in zip(outcomes, pcs):
        idx = ((pc ^ (ghr & ((1 << hist_bits) - 1))) if kind == "gshare" else pc) & (table - 1)
        if (ctr[idx] >= 2) != bool(t):
            miss += 1
        ctr[idx] = min(3, ctr[idx] + 1) if t else max(0, ctr[idx] - 1)
        ghr = (ghr << 1) | int(t)
    return miss


@pytest.mark.parametrize("kind,table,hist", [("bimodal", 64, 0), ("gshare", 64, 6),
                                             ("gshare", 1024, 4)])
def test_predictor_matches_reference(kind, table, hist):
    rng = np.random.default_rng(table + hist)
    n = 3000
    pcs = (0x400000 + 16 * rng.integers(0, 8, n)).tolist()
    # biased and patterned outcomes
    outcomes = [(i % 3 != 0) if pc % 32 == 0 else bool(rng.random() < 0.8)
                for i, pc in enumerate(pcs)]
    m = _machine({"size": 4096, "ways": 4},
                 branch={"kind": kind, "table_size": table, "history_bits": hist})
    r = simulate(_branches(outcomes, pcs), m, options=SimOptions(tlb=False))
    assert r.branch["conditional"] == n
    assert r.branch["mispredicts"] == ref_predictor(kind, table, hist, outcomes, pcs)


def test_gshare_learns_alternation_bimodal_does_not():
    n = 400
    outcomes = [i % 2 for i in range(n)]
    pcs = [0x400100] * n
    res = {}
    for kind, hist in (("bimodal", 0), ("gshare", 4)):
        m = _machine({"size": 4096, "ways": 4},
                     branch={"kind": kind, "table_size": 256, "history_bits": hist})
        res[kind] = simulate(_branches(outcomes, pcs), m,
                             options=SimOptions(tlb=False)).branch["mispredicts"]
    assert res["bimodal"] >= n // 2
    assert res["gshare"] <= 6
