"""MESI coherence: synthetic ping-pong traces give exactly the invalidations, coherence
misses, upgrades and interventions the protocol dictates; stack hashing removes the false
sharing of a split single-thread trace."""
from __future__ import annotations

import numpy as np
import pytest

from corecast.sim import synth
from corecast.sim.engine import SimOptions, guess_stack, simulate
from corecast.sim.machine import parse_machine
from corecast.sim.trace import Trace

L1 = [{"level": 1, "kind": "instruction", "size": "32KiB", "ways": 8},
      {"level": 1, "kind": "data", "size": "32KiB", "ways": 8}]
SHARED_L2 = parse_machine({"name": "shared-l2", "frequency_hz": 1e9, "cache": L1 + [
    {"level": 2, "kind": "unified", "size": "1MiB", "ways": 16, "shared": True}]})
PRIVATE_L2 = parse_machine({"name": "private-l2", "frequency_hz": 1e9, "cache": L1 + [
    {"level": 2, "kind": "unified", "size": "256KiB", "ways": 8, "policy": "inclusive"},
    {"level": 3, "kind": "unified", "size": "4MiB", "ways": 16, "shared": True}]})
PAIRS = parse_machine({"name": "pairs", "frequency_hz": 1e9, "cache": L1 + [
    {"level": 2, "kind": "unified", "size": "1MiB", "ways": 16, "shared": 2}]})

R = 50


@pytest.mark.parametrize("machine", [SHARED_L2, PRIVATE_L2], ids=lambda m: m.name)
def test_write_write_pingpong(machine):
    # t0 W, t1 W, t0 W, ...: every write after the first finds the line modified in the other
    # core: one invalidation and one intervention each; every write after each core's first
    # is a coherence miss. A core's private L1+L2 count as one copy.
    r = simulate(synth.pingpong(R, 2, "write"), machine, cores=2)
    c = r.coherence
    assert c["invalidations"] == 2 * R - 1
    assert c["interventions"] == 2 * R - 1
    assert c["coherence_misses"] == 2 * R - 2
    assert c["upgrades"] == 0
    assert r.cache("L1D")["coherence_misses"] == 2 * R - 2
    assert r.cache("L1D")["coherence_invalidations"] == 2 * R - 1


@pytest.mark.parametrize("machine", [SHARED_L2, PRIVATE_L2], ids=lambda m: m.name)
def test_write_read_pingpong(machine):
    # t0 W, t1 R per round: the read finds the line modified (intervention, M -> S); the next
    # write hits a shared copy (an upgrade) and invalidates the reader's copy; the reader's
    # next read is a coherence miss.
    r = simulate(synth.pingpong(R, 2, "read"), machine, cores=2)
    c = r.coherence
    assert c["interventions"] == R
    assert c["invalidations"] == R - 1
    assert c["upgrades"] == R - 1
    assert c["coherence_misses"] == R - 1
    assert c["exposed_coherence_misses"] == R - 1      # reads are exposed
    assert r.events_per_kilo_instruction["coherence_miss"] > 0


def test_one_writer_two_readers():
    r = simulate(synth.pingpong(R, 3, "read"), SHARED_L2, cores=3)
    c = r.coherence
    assert c["invalidations"] == 2 * (R - 1)           # both readers lose the line
    assert c["upgrades"] == R - 1
    assert c["interventions"] == R                     # only the first reader finds it dirty
    assert c["coherence_misses"] == 2 * (R - 1)


def test_three_writers_round_robin():
    r = simulate(synth.pingpong(R, 3, "write"), SHARED_L2, cores=3)
    assert r.coherence["invalidations"] == 3 * R - 1
    assert r.coherence["coherence_misses"] == 3 * R - 3


def test_false_sharing_is_sharing():
    true = simulate(synth.pingpong(R, 2, "write"), SHARED_L2, cores=2).coherence
    false = simulate(synth.pingpong(R, 2, "write", false_sharing=True), SHARED_L2, cores=2).coherence
    assert true == false


def test_separate_lines_no_coherence():
    a = synth.stream(200, stride=8, kind="store", tid=0)
    b = synth.stream(200, stride=8, kind="store", tid=1, base=synth.HEAP_BASE + (1 << 20))
    recs = np.empty(len(a) + len(b), dtype=a.dtype)
    recs[0::2], recs[1::2] = a, b
    r = simulate(recs, SHARED_L2, cores=2)
    assert r.coherence["invalidations"] == 0
    assert r.coherence["coherence_misses"] == 0


def test_single_core_has_no_coherence():
    r = simulate(synth.pingpong(R, 2, "write"), SHARED_L2, cores=1)
    assert r.coherence["invalidations"] == 0
    assert r.cache("L1D")["misses"]["store"] == 1


def test_core_pairs_count_each_copy_holder():
    # Cores 0 and 2 sit under different L2s: a write invalidates the other core's L1 and the
    # other pair's L2 -- two copy holders per write.
    recs = synth.pingpong(R, 2, "write")
    recs["tid"][recs["tid"] == 1] = 2
    r = simulate(recs, PAIRS, cores=4)
    assert r.coherence["invalidations"] == 2 * (2 * R - 1)
    # cores 0 and 1 share an L2: only the L1 copies are invalidated
    r2 = simulate(synth.pingpong(R, 2, "write"), PAIRS, cores=4)
    assert r2.coherence["invalidations"] == 2 * R - 1


def test_stack_hashing_removes_false_stack_sharing():
    recs = synth.transactions(40, per_tx=150)
    tr = Trace(recs, {"threads": 1})
    stack = guess_stack(tr)
    assert stack is not None and stack[0] < synth.STACK_TOP <= stack[1]
    hashed = simulate(tr, SHARED_L2, cores=4, options=SimOptions(split="transactions"))
    plain = simulate(tr, SHARED_L2, cores=4,
                     options=SimOptions(split="transactions", stack_hash=False))
    assert hashed.split == "transactions" and hashed.transactions == 40
    assert [c["instructions"] for c in hashed.per_core] == [10 * 150] * 4
    # the transactions write only their stacks and private buffers, and read shared data
    assert hashed.coherence["invalidations"] == 0
    assert plain.coherence["invalidations"] > 100
    assert plain.coherence["coherence_misses"] > 100


def test_chunk_split_round_robin():
    recs = synth.stream(1000, stride=64)
    r = simulate(recs, SHARED_L2, cores=4, options=SimOptions(split="chunks",
                                                               chunk_instructions=100))
    assert [c["instructions"] for c in r.per_core] == [300, 300, 200, 200]
