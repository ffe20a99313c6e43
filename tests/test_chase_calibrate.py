"""corecast calibrate: the core-to-core latency against an independent ping-pong, the file's
shape, and predict reading it back."""
from __future__ import annotations

import json
import statistics
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from corecast import memprofile
from corecast import target as T
from corecast.collect import topology
from corecast.collect.chase import c2c

pytestmark = pytest.mark.slow        # real programs and long runs: `make test`, not `make check`

CPUS = sorted(os.sched_getaffinity(0))

# An independent ping-pong: a flag on its own 128-byte block toggled 0 -> 1 by one thread and
# 1 -> 0 by the other (a round trip is two transfers), timed on the wall clock by the first.
REF_PINGPONG = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 100
#define SAMPLES 1001
static struct { _Alignas(128) atomic_int flag; char pad[124]; } line;
static atomic_int started;

static void pin(int cpu) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu, &s); pthread_setaffinity_np(pthread_self(), sizeof s, &s); }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
static int cmp(const void *a, const void *b) { double x = *(double *)a, y = *(double *)b; return (x > y) - (x < y); }

static void *other(void *arg) {
    pin(*(int *)arg);
    atomic_fetch_add(&started, 1);
    for (long i = 0; i < (long)ROUNDS * (SAMPLES + 1); i++) {
        while (atomic_load_explicit(&line.flag, memory_order_acquire) != 1) ;
        atomic_store_explicit(&line.flag, 0, memory_order_release);
    }
    return 0;
}

int main(int argc, char **argv) {
    int a = atoi(argv[1]), b = atoi(argv[2]);
    pthread_t t;
    pthread_create(&t, 0, other, &b);
    pin(a);
    while (atomic_load(&started) < 1) ;
    static double ns[SAMPLES + 1];
    for (int s = 0; s <= SAMPLES; s++) {
        double t0 = now();
        for (int r = 0; r < ROUNDS; r++) {
            atomic_store_explicit(&line.flag, 1, memory_order_release);
            while (atomic_load_explicit(&line.flag, memory_order_acquire) != 0) ;
        }
        ns[s] = (now() - t0) / (2.0 * ROUNDS);
    }
    pthread_join(t, 0);
    qsort(ns + 1, SAMPLES, sizeof ns[0], cmp);          /* the first sample is a warm-up */
    /* a sample during which either thread was switched out lasted at least a time slice
       (~1 ms against ~10 us): one more than 10 times the least timed the other programs */
    int kept = 0;
    while (kept < SAMPLES && ns[1 + kept] <= 10.0 * ns[1]) kept++;
    printf("%.3f\n", ns[1 + kept / 2]);
    return 0;
}
"""

two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="needs two CPUs")


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    from corecast.cli import main

    out = tmp_path_factory.mktemp("cal") / "target.json"
    assert main(["calibrate", "-q", "-o", str(out)]) == 0
    return out


def test_the_file_has_the_shape_parse_spec_reads(calibration):
    doc = json.loads(calibration.read_text())
    assert doc["kind"] == "corecast-machine" and doc["version"] == 1      # the schema (docs/machines.md)
    topo = topology.read_topology()
    m = doc["topology"]
    assert (m["sockets"], m["threads_per_core"], m["sockets"] * m["cores_per_socket"] * m["threads_per_core"]) == (
        topo.sockets, topo.threads_per_core, len(topo.pus))
    c = doc["costs"]["core_to_core_ns"]
    assert set(c) >= {"smt", "same_socket", "cross_socket", "pairs", "not_measured", "method"}
    for kind in ("smt", "same_socket", "cross_socket"):
        assert (c[kind] is None) == (kind in c["not_measured"])   # measured, or said why not
    mem = memprofile.read_profile(calibration)                   # the memory block is a profile
    assert mem.caches and mem.idle_latency_ns and mem.peak_bandwidth_bytes_s_per_socket
    spec = T.parse_spec(str(calibration))
    assert spec.cpus == len(topo.pus)
    assert spec.memory_bandwidth_gbs_per_socket == pytest.approx(mem.peak_bandwidth_bytes_s_per_socket / 1e9)
    assert spec.calibration["core_to_core_ns"]["pairs"]
    assert doc["provenance"]["elapsed_s"] > 0                    # the benchmark states the time


@two_cpus
@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_core_to_core_agrees_with_an_independent_pingpong(calibration, tmp_path):
    """calibrate's core-to-core figure (what c2c.core_to_core measures for it) against an
    independent ping-pong, run alternately: on this VM the figure for one pair moves between
    ~35 and ~200 ns as the host moves the virtual CPUs, so the two are run alternately, a few
    milliseconds apart, and compared round by round: the median over 100 rounds of the ratio of
    a round's two figures (a median of five ratios failed when the host was slow during three of
    five of corecast's runs and none of the reference's; the least figures of each, 30% apart
    beside stress-ng, came from different placements). Both leave out the samples during
    which the scheduler switched a thread out (corecast by the threads' context switches, the
    reference by their length): with other programs on both CPUs (stress-ng) a median of all
    samples timed them too, 49 ns against corecast's 36."""
    src, exe = tmp_path / "pp.c", tmp_path / "pp"
    src.write_text(REF_PINGPONG)
    subprocess.run(["gcc", "-O2", "-std=gnu11", "-pthread", "-o", str(exe), str(src)], check=True)
    pair = json.loads(calibration.read_text())["costs"]["core_to_core_ns"]["pairs"][0]
    a, b = pair["cpus"]
    topo = topology.read_topology()
    def reference() -> float:
        return float(subprocess.run([str(exe), str(a), str(b)], capture_output=True, text=True, check=True).stdout)

    def batch() -> list[tuple[float, float]]:
        seen = []
        for k in range(100):      # about 2 s: many pairs of runs a few milliseconds apart
            # which of the two goes first alternates: neither always runs just after the other's
            # process start or exit (one CI run found corecast's figure 26% above the reference's
            # in nearly every round, with corecast always second)
            if k % 2:
                ours = c2c.core_to_core(topo, per_kind=1)
                ref = reference()
            else:
                ref = reference()
                ours = c2c.core_to_core(topo, per_kind=1)
            ns = next(p["ns"] for p in ours["pairs"] if p["cpus"] == [a, b])
            assert ours[pair["kind"]] == ns                               # one pair: the kind's figure
            seen.append((ns, ref))
        assert min(r for _, r in seen) > 5                                 # a real transfer, not a cached read
        return seen

    # each round's two figures see the same placement of the virtual CPUs (the host moves them
    # over seconds: 27 to 190 ns within a minute under stress-ng); the median over the rounds of
    # their ratio held within 10% in most runs here, idle and beside stress-ng --cpu 2. But in two
    # clean-clone CI runs of one day it was 1.30 (corecast ~60 ns, the reference ~41) and then
    # 0.69-0.73 (~44 against ~59), each program's figure the same over 100-200 rounds while the
    # other's differed, with opposite signs: something fixed for each program over a batch --
    # most likely where its line lies in the host's memory, which neither chooses -- moves the
    # figure by a third on this VM. So the test holds the two within a factor of 1/0.6 either way -- an
    # error of a factor of 2 (a round trip counted as one transfer, or half of one) still fails
    # -- and runs a second batch of rounds where the first is off.
    def off(seen: list[tuple[float, float]]) -> bool:
        return not 0.6 < statistics.median(n / r for n, r in seen) < 1 / 0.6

    batches = [batch()]
    if off(batches[0]):
        batches.append(batch())
    assert not off(batches[-1]), [(statistics.median(n / r for n, r in s), s[:10]) for s in batches]


def test_predict_accepts_the_file(calibration, cli):
    r = cli("predict", str(Path(__file__).resolve().parent.parent / "data" / "usl" / "specsdm91.csv"),
            "--cores", "1,2", "--target-machine", str(calibration), "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["target_machine"]["calibrated"] is True
    assert [p["cores"] for p in doc["predictions"]] == [1, 2]


def test_pairs_of_each_kind_on_a_two_socket_smt_machine():
    pu = topology.PU
    topo = topology.Topology(pus=[pu(c, c // 4, c // 2, c % 2, c // 4) for c in range(8)])
    pairs = c2c.representative_pairs(topo, per_kind=2)
    assert pairs["smt"] == [(0, 1), (2, 3)]
    assert all(topo.pu(a).package == topo.pu(b).package and topo.pu(a).core != topo.pu(b).core
               for a, b in pairs["same_socket"])
    assert all(topo.pu(a).package != topo.pu(b).package for a, b in pairs["cross_socket"])
    assert c2c.not_measurable(topo, pairs) == {}
    one = topology.Topology(pus=[pu(0, 0, 0, 0, 0), pu(1, 0, 1, 0, 0)])
    why = c2c.not_measurable(one, c2c.representative_pairs(one))
    assert set(why) == {"smt", "cross_socket"}


def test_a_pinning_failure_is_one_line():
    from corecast.errors import UserError
    with pytest.raises(UserError, match="cannot pin a thread to CPU"):
        c2c.native.pingpong(CPUS[0], 4095, 10, 2)


@two_cpus
def test_pingpong_leaves_out_the_samples_a_competing_program_cut(monkeypatch):
    """Issue 26: under load, calibrate's figure was 50% above an independent ping-pong's. A
    sample during which the scheduler switched a thread out timed the other program, not the
    line: the kernel marks those (each thread's context switches between samples), and a pair's
    figure is the median of the others."""
    a, b = CPUS[0], CPUS[1]
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"],
                           preexec_fn=lambda: os.sched_setaffinity(0, {b}))
    try:
        ns, disturbed = c2c.native.pingpong(a, b, 100, 1001)
    finally:
        hog.kill()
        hog.wait()
    assert disturbed.dtype == bool and len(ns) == len(disturbed) == 1001
    assert 0 < disturbed.sum() < 1001                      # B shared its CPU: some samples were cut
    clean, cut = ns[~disturbed], ns[disturbed]
    # The marks are conservative: a switch anywhere between two samples marks the sample, also
    # one that came outside its timed window (a CI run marked 3 samples: 291, 40,784 and 46 ns).
    # What must hold is that the hog's slices are among the marked: the longest of them is one.
    assert np.max(cut) > 10 * np.median(clean)             # a cut sample timed the hog's time slice
    # What calibrate makes of these very samples, replayed: the figure, its least and its most
    # are the clean samples' (not a bound on the clean ones: a VM's vCPU can be stopped by its
    # host, unseen by this kernel -- a CI run's clean samples reached 10.8x their median).
    monkeypatch.setattr(c2c.native, "pingpong", lambda *_: (ns, disturbed))
    pair = c2c.core_to_core(topology.read_topology(), per_kind=1)["pairs"][0]
    assert pair["samples"] == 1001 and pair["disturbed"] == int(disturbed.sum())
    if len(clean) >= c2c.MIN_CLEAN:
        assert (pair["ns"], pair["min_ns"], pair["max_ns"]) == (
            float(np.median(clean)), float(clean.min()), float(clean.max()))
    else:
        assert pair["max_ns"] == float(ns.max())


def test_a_pair_with_few_clean_samples_takes_the_median_of_all(monkeypatch):
    """Half the samples cut by a long switch: the clean ones' median is the line's; and where
    fewer than MIN_CLEAN are clean the figure is every sample's median (and 'disturbed' says so)."""
    rng = np.random.default_rng(7)
    ns = rng.normal(70.0, 3.0, 1001)
    disturbed = np.zeros(1001, dtype=bool)
    disturbed[::2] = True
    ns[disturbed] = 40_000.0
    monkeypatch.setattr(c2c.native, "pingpong", lambda *_: (ns, disturbed))
    topo = topology.Topology(pus=[topology.PU(0, 0, 0, 0, 0), topology.PU(1, 0, 1, 0, 0)])
    pair = c2c.core_to_core(topo, per_kind=1)["pairs"][0]
    assert pair["ns"] == pytest.approx(float(np.median(ns[~disturbed]))) and pair["ns"] < 100
    assert pair["max_ns"] < 100 and pair["disturbed"] == 501
    few = np.ones(1001, dtype=bool)
    few[: c2c.MIN_CLEAN - 1] = False                        # one clean sample fewer than the least
    ns = np.where(few, 40_000.0, ns)
    monkeypatch.setattr(c2c.native, "pingpong", lambda *_: (ns, few))
    pair = c2c.core_to_core(topo, per_kind=1)["pairs"][0]
    assert pair["disturbed"] == 1001 - c2c.MIN_CLEAN + 1
    assert pair["ns"] == 40_000.0 and pair["max_ns"] == 40_000.0
