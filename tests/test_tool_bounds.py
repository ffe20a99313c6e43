"""Bounded inputs in sched, sim, chase and stat (issue 25): every number a user types or a file
gives that could make a command run forever, fill memory, overflow or be silently replaced is
refused above a stated bound, in one line with exit status 2. Each case runs in a child with a
time limit, so that one that runs away again fails instead of hanging the suite."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def corecast(*args: str, cwd: Path | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "corecast", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)


def one_line(r: subprocess.CompletedProcess, text: str) -> None:
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert text in lines[0], lines[0]
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    d = tmp_path_factory.mktemp("bounds")
    (d / "huge-work.toml").write_text('name = "huge"\nmachine = "2b-2s"\n[[app]]\nname = "a"\nthreads = 2\n'
                                      'work_s = 1e308\n')
    # within every per-value bound, but 1e8 quanta of 10 ms: ran for hours under RR or EQP
    (d / "long.toml").write_text('name = "long"\nmachine = "2b-2s"\n[[app]]\nname = "a"\nthreads = 1\n'
                                 'work_s = 1e6\n[[app]]\nname = "b"\nthreads = 1\nwork_s = 1e6\n')
    (d / "many-copies.toml").write_text('name = "many"\nmachine = "2b-10s"\n[[app]]\nname = "a"\ncopies = 2000\n'
                                        'work_s = 1\n')
    (d / "many-apps.toml").write_text('name = "many"\nmachine = "2b-10s"\n' + "".join(
        f'[[app]]\nname = "a{i}"\ncopies = 600\nwork_s = 1\n' for i in range(2)))
    return d


# ---------------------------------------------------------------------------------- sched
@pytest.mark.parametrize("args, text", [
    (["{d}/huge-work.toml", "--policy", "rr"], "'work_s' must be <= 1e+06 (got 1e+308)"),
    (["{d}/long.toml", "--policy", "rr"], "at most 10,000,000 quanta"),
    (["{d}/many-copies.toml", "--policy", "rr"], "'copies' must be between 1 and 1024 (got 2000)"),
    (["{d}/many-apps.toml", "--policy", "rr"], "1200 applications so far; a workload has at most 1024"),
    (["pmctrack-mix", "--runs", "1000000000"], "--runs 1000000000: at most 1000"),
    (["pmctrack-mix", "--runs", "1e9"], "--runs 1000000000: at most 1000"),
    (["pmctrack-mix", "--quantum", "1e308"], "argument --quantum: '1e308' is out of bounds: at most 10 s"),
    (["pmctrack-mix", "--quantum", "1ns"], "argument --quantum: '1ns' is out of bounds: at least 1us"),
    (["pmctrack-mix", "--quantum", "2us"], "quanta of 2us; at most 10,000,000 quanta"),
    (["pmctrack-mix", "--seed", "-1"], "argument --seed: '-1' is out of bounds: at least 0"),
    (["pmctrack-mix", "--sf-noise", "1e308"], "argument --sf-noise: '1e308' is out of bounds: at most 1"),
    (["pmctrack-mix", "--migration-cost", "1e308"], "argument --migration-cost: '1e308' is out of bounds: at most 1 s"),
    (["pmctrack-mix", "--period", "1e308", "--policy", "rr"], "argument --period: '1e308' is out of bounds: at most 1h"),
], ids=lambda x: x if isinstance(x, str) else " ".join(x[:3]))
def test_sched_sim_refuses_above_its_bounds(d, args, text):
    one_line(corecast("sched", "sim", *[a.replace("{d}", str(d)) for a in args]), text)


def test_sched_paper_has_the_same_bounds():
    one_line(corecast("sched", "paper", "--seed", "-1"), "argument --seed: '-1' is out of bounds: at least 0")
    one_line(corecast("sched", "paper", "--quantum", "1e308"), "at most 10 s")


def test_sched_quanta_bound_is_checked_before_any_run():
    """The bound is a lower bound of the simulated time (every application's runs at their
    fastest, and all the work over every core), so a run it lets through really spans fewer
    quanta; the all-small reference is checked as well, before the first policy runs."""
    from corecast.sched.engine import MAX_QUANTA, Options, check_quanta, least_time, simulate
    from corecast.sched.machine import load_machine
    from corecast.sched.policies import make_policy
    from corecast.sched.workload import load_workload

    wl, m = load_workload("pmctrack-mix"), load_machine("2b-2s")
    for machine in (m, m.all_of(-1)):
        res = simulate(wl, machine, make_policy("rr"))
        assert least_time(wl, machine) <= res.end_time
    check_quanta(wl, m, Options())                               # the bundled workload passes
    q = least_time(wl, m.all_of(-1)) / (MAX_QUANTA * 1.01)       # a quantum just too short for the reference
    from corecast.errors import UserError
    with pytest.raises(UserError, match="all small"):
        from corecast.sched.metrics import References
        References(wl, m, Options(quantum=q))


def test_sched_policies_refuses_an_unknown_name_and_shows_a_known_one():
    r = corecast("sched", "policies", "bogus")
    one_line(r, "unknown policy 'bogus' (choose hsp, rr, adwrr, eqp, acfs, energy, cfs, acfs-big)")
    r = corecast("sched", "policies", "rr", "--json")
    assert r.returncode == 0 and list(__import__("json").loads(r.stdout)) == ["rr"]


# ---------------------------------------------------------------------------------- sim
@pytest.mark.parametrize("args, text", [
    (["chains", "--width", "100000", "-n", "1000"], "--width 100000: at most 255 chains"),
    (["stream", "-n", "1e10"], "-n 10000000000: 20,000,000,000 records; a generated trace has at most 1,073,741,824"),
    (["stream", "-n", "10000000000"], "a generated trace has at most 1,073,741,824 (16GiB)"),
    (["transactions", "-n", "10000000"], "4,010,000,000 records"),
    (["pingpong", "-n", "100000000", "--threads", "64"], "12,800,000,000 records"),
    (["stream", "-n", "1e8", "--stride", "1TiB"], "would pass the top of the address space"),
    (["random", "--seed", "-1"], "argument --seed: '-1' is out of bounds: at least 0"),
], ids=lambda x: x if isinstance(x, str) else " ".join(x[:3]))
def test_sim_gen_is_bounded(tmp_path, args, text):
    one_line(corecast("sim", "gen", *args, "-o", tmp_path / "x.cctrace"), text)
    assert not (tmp_path / "x.cctrace").exists()


def test_sim_gen_streams_every_kind_in_slices():
    """stream, random and chains are made a slice at a time (they were made whole: -n 1e10
    asked numpy for 149 GiB); the slices are the records of the whole, so a trace is the same
    however it is made."""
    from corecast.sim import synth

    for make, sliced in ((lambda n: synth.stream(n, 24), lambda n, c: synth.stream_chunks(n, 24, chunk=c)),
                         (lambda n: synth.chains(n, 7), lambda n, c: synth.chains_chunks(n, 7, chunk=c))):
        whole = make(1000)
        parts = list(sliced(1000, 64))
        assert len(parts) == 16 and max(len(p) for p in parts) == 128
        assert np.array_equal(np.concatenate(parts), whole)
    one = synth.random_accesses(1000, 1 << 20, write_fraction=0.3, seed=5)     # a single slice: as before
    rng = np.random.default_rng(5)
    addr = np.uint64(synth.HEAP_BASE) + rng.integers(0, (1 << 20) // 8, 1000, dtype=np.uint64) * np.uint64(8)
    stores = rng.random(1000) < 0.3
    assert np.array_equal(one["addr"][1::2], addr) and np.array_equal(one["kind"][1::2] == 2, stores)
    assert len(list(synth.random_chunks(1000, 1 << 20, chunk=256))) == 4


def test_an_access_wrapping_past_2_64_is_refused_not_counted_as_within_a_line(tmp_path):
    """`load,0xfffffffffffffffc,8` was simulated clamped and reported as "0 straddle a line";
    it is refused with the record named, in both of the kernel's loops; an access ending at
    exactly 2^64 - 1 is an ordinary one."""
    (tmp_path / "wrap.csv").write_text("kind,addr,size\nload,0x1000,8\nload,0xfffffffffffffffc,8\n")
    (tmp_path / "top.csv").write_text("kind,addr,size\nload,0x1000,8\nload,0xfffffffffffffff8,8\n"
                                      "store,0xffffffffffffffc0,64\n")
    (tmp_path / "fetch.csv").write_text("tid,kind,addr,size\n0,fetch,0x1000,4\n1,fetch,0xfffffffffffffffe,4\n")
    for cores in ("1", "2"):
        r = corecast("sim", tmp_path / "wrap.csv", "--machine", "penryn-l5420", "--cores", cores)
        one_line(r, "wrap.csv: record 1: a load of 8 bytes at 0xfffffffffffffffc passes the top of the address space")
        r = corecast("sim", tmp_path / "top.csv", "--machine", "penryn-l5420", "--cores", cores, "--json")
        assert r.returncode == 0, r.stderr
    one_line(corecast("sim", tmp_path / "fetch.csv", "--machine", "penryn-l5420", "--cores", "2"),
             "record 1: a fetch of 4 bytes at 0xfffffffffffffffe passes the top")


# ---------------------------------------------------------------------------------- chase
# The old code ran these (a tiny sweep, so that it ends in a second and fails the assertion).
TINY = ["--threads", "1", "--chains", "1", "--size", "64KiB", "--samples", "1"]


@pytest.mark.parametrize("args, text", [
    (["--duration", "0", *TINY], "argument --duration: '0' must be more than 0"),
    (["--duration", "2min", *TINY], "argument --duration: '2min' is out of bounds: at most 1min"),
    (["--sizes", "16KiB,1MiB", "--duration", "0.01", *TINY], "--sizes is for --sweep-size or --profile"),
    (["--delays", "0,100", "--duration", "0.01", *TINY], "--delays is for --loaded"),
    (["--loaders", "1", "--duration", "0.01", *TINY], "--loaders is for --loaded"),
    (["--sweep-size", "--threads", "1", "--sizes", "16KiB", "--duration", "0.01"], "--threads is for the concurrency sweep"),
    (["--samples", "1000000", "--duration", "0.01", "--threads", "1", "--chains", "1", "--size", "64KiB"],
     "argument --samples: '1000000' is out of bounds: at most 1,000"),
    (["--seed", "-1", *TINY], "argument --seed: '-1' is out of bounds: at least 0"),
], ids=lambda x: x if isinstance(x, str) else " ".join(x[:2]))
def test_chase_refuses_what_it_used_to_ignore_or_replace(tmp_path, args, text):
    one_line(corecast("chase", *args, cwd=tmp_path), text)


def test_chase_duration_zero_is_refused_by_the_api_too():
    """calibrate and serve build a Request themselves: 0 s was turned into the default there."""
    from corecast.collect.chase import Request, Settings, measure
    from corecast.errors import UserError

    with pytest.raises(UserError, match="--duration 0: a measured time above 0"):
        measure(Request(Settings(), duration_s=0.0))


# ---------------------------------------------------------------------------------- stat
@pytest.mark.parametrize("args, text", [
    (["-T", "1e308"], "argument -T/--interval: '1e308' is out of bounds: at most 720h"),
    (["--interval-print", "1e308"], "argument --interval-print: '1e308' is out of bounds: at most 720h"),
    (["--duration", "1e308"], "argument --duration: '1e308' is out of bounds: at most 720h"),
    (["-T", "500ns"], "argument -T/--interval: '500ns' is out of bounds: at least 10ms"),
], ids=lambda x: x if isinstance(x, str) else " ".join(x))
def test_stat_times_are_bounded(args, text):
    one_line(corecast("stat", "-c", "task_clock", *args, "--", "true"), text)
