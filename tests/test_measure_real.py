"""Proof on real programs nobody here wrote (Debian packages, see setup/debian-packages.txt):
each measured at 1 and 2 cores with the sync shim and software sources, and the stall
categories checked for sense -- a mutex stressor waits on locks, a lock-free one does not."""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from corecast import dataset, store

pytestmark = pytest.mark.slow        # real programs and long runs: `make test`, not `make check`

NCPU = len(os.sched_getaffinity(0))
CORES = "1,2" if NCPU >= 2 else "1"


def need(*progs: str):
    missing = [p for p in progs if shutil.which(p) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {', '.join(missing)} "
                              "(scripts/setup.sh installs setup/debian-packages.txt)")


def campaign(cli, tmp_path: Path, *args: str, reps: int = 1, tolerate: str | None = None):
    """Measure; every run must succeed, except runs whose stderr matches `tolerate` (a program's
    own refusal under load), as long as each core count keeps a successful run. The Dataset
    returned holds the successful runs only."""
    out = tmp_path / "c.db"
    r = cli("measure", "-q", "--warmup", "0", "--reps", str(reps), "--cores", CORES, "--timeout", "60",
            "-o", out, *args)
    if r.code != 0:
        with store.Campaign.open(out, write=False) as c:
            bad = [(x["cores"], x["status"], x["message"], x["stderr_tail"][-500:]) for x in c.runs() if x["status"] != "ok"]
        if tolerate is None or not all(re.search(tolerate, b[3]) for b in bad):
            pytest.fail(f"runs failed: {bad}\n{r.err}")
    ds = dataset.read_campaign(out)
    assert len(ds) == reps * len(CORES.split(","))
    ds = ds.select(ds.metrics["exit_status"] == 0)
    assert sorted(set(ds.cores.astype(int))) == [int(c) for c in CORES.split(",")]
    assert np.all(ds.metrics["time_s"] > 0) and np.all(ds.metrics["rss_bytes"] > 0)
    assert np.all(np.isfinite(ds.metrics["voluntary_ctxsw"]))
    assert np.all(np.isfinite(ds.metrics["runqueue_delay_cycles"]))
    assert np.all(ds.metrics["threads_seen"] >= 1)          # the shim was in every run
    return ds


def at(ds, name: str, cores: int) -> float:
    return float(ds.metrics[name][ds.cores == cores][0])


#: The most lock wait a program whose threads share no lock while they work shows, as a share of
#: its core-time (`lock_wait_share`): their start-up barrier and report locks, met now and then on
#: a busy machine with the holder preempted (sysbench memory's two workers once waited 0.15% of
#: an 80 ms run in CI; 0 on a quiet machine; one time slice of a preempted holder, ~3 ms counted
#: at 1 GHz from a 2.5-3 GHz time-stamp counter, would be ~5% of that run's 160 ms of core-time).
#: A program that serializes on a lock shows ~1 (the tests ask over 0.1 of it).
LOCK_FREE = 0.08


def lock_wait_share(ds) -> np.ndarray:
    """Each run's lock wait as a share of its core-time, counted at 1 GHz (the shim counts in
    time-stamp ticks, a few GHz on any machine, so this over-states the share): a program whose
    threads only meet at start-up (a barrier's mutex) waits for microseconds in a run of
    hundreds of milliseconds -- some 1e-4 -- while one that serializes on a lock waits for a
    large part of it."""
    return ds.metrics["lock_wait_cycles"] / (ds.metrics["time_s"] * ds.cores * 1e9)


STRESS_RATE = r"metrc: \[\d+\] {name}\s+\d+\s+\S+\s+\S+\s+\S+\s+([0-9.]+)"


@need("stress-ng")
def test_stress_ng_mutex_waits_on_locks(cli, tmp_path):
    # stress-ng's mutex stressor runs SCHED_FIFO threads; on a loaded 2-core machine it now and
    # then gives up ("out of system resources", exit 3): such a run is recorded as failed and
    # left out, which is what the campaign is for
    ds = campaign(cli, tmp_path, "--throughput", STRESS_RATE.format(name="mutex"), "--",
                  "stress-ng", "--mutex", "{threads}", "-t", "1", "--metrics-brief",
                  reps=2, tolerate="out of system resources")
    assert np.all(ds.metrics["throughput"] > 0)
    # each mutex stressor runs several threads on one pthread mutex: they wait for it
    assert np.all(ds.metrics["lock_wait_cycles"] > 0)
    assert np.all(ds.metrics["lock_contended"] > 0)
    assert np.all(ds.metrics["barrier_wait_cycles"] == 0)


@need("stress-ng")
@pytest.mark.parametrize("stressor", ["futex", "cache"])
def test_stress_ng_lock_free_stressors_have_no_lock_wait(cli, tmp_path, stressor):
    ds = campaign(cli, tmp_path, "--", "stress-ng", f"--{stressor}", "{threads}", "-t", "1", "--metrics-brief")
    # futex uses raw futex system calls, cache touches memory: no pthread lock is contended
    assert np.all(ds.metrics["lock_wait_cycles"] == 0)
    assert np.all(ds.metrics["lock_contended"] == 0)
    assert np.all(ds.metrics["trylock_spin_cycles"] == 0)


@need("sysbench")
def test_sysbench_threads_one_lock(cli, tmp_path):
    ds = campaign(cli, tmp_path, "--throughput", r"total number of events:\s*([0-9]+)", "--",
                  "sysbench", "threads", "--threads={threads}", "--thread-locks=1", "--time=1", "run")
    assert np.all(ds.metrics["throughput"] > 0)
    # one worker: nobody to wait for but the main thread at the start-up barrier; two workers on
    # one lock with sched_yield inside it: they wait for most of the run (a share near 1 here)
    share = lock_wait_share(ds)
    assert share[ds.cores == 1][0] < LOCK_FREE, share
    assert at(ds, "lock_contended", 1) <= 2
    if NCPU >= 2:
        assert share[ds.cores == 2][0] > 0.1, share
        assert at(ds, "lock_contended", 2) > 100


@need("sysbench")
def test_sysbench_mutex(cli, tmp_path):
    ds = campaign(cli, tmp_path, "--", "sysbench", "mutex", "--threads={threads}", "--mutex-num=1",
                  "--mutex-locks=20000", "run")
    # sysbench's mutex test takes the mutex mutex-locks times per thread
    assert at(ds, "lock_acquisitions", 1) >= 20000
    assert lock_wait_share(ds)[ds.cores == 1][0] < LOCK_FREE    # one worker (and the start-up barrier)
    if NCPU >= 2:
        assert at(ds, "lock_acquisitions", 2) >= 40000


@need("sysbench")
def test_sysbench_memory_is_lock_free(cli, tmp_path):
    ds = campaign(cli, tmp_path, "--throughput", r"([0-9.]+) MiB/sec", "--",
                  "sysbench", "memory", "--threads={threads}", "--memory-total-size=512M", "run")
    assert np.all(ds.metrics["throughput"] > 0)
    # its workers share no lock while they run, but they start together on a barrier (a mutex
    # and a condition variable) and report through a histogram's lock, which two threads now and
    # then meet with the holder preempted: lock-free means a wait that is no part of the run
    assert np.all(lock_wait_share(ds) < LOCK_FREE), lock_wait_share(ds)
    # ... and it takes some 36 locks a run outside its work (barrier, histogram, its own start-up)
    assert np.all(ds.metrics["lock_acquisitions"] < 200), ds.metrics["lock_acquisitions"]


@need("sqlite3")
def test_sqlite3(cli, tmp_path):
    sql = tmp_path / "load.sql"
    sql.write_text(
        "CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT);\n"
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x < 100000)\n"
        "  INSERT INTO t SELECT x, hex(randomblob(8)) FROM c;\n"
        "SELECT count(*) FROM t WHERE b LIKE '%AB%';\n")
    ds = campaign(cli, tmp_path, "--", "sqlite3", str(tmp_path / "db{cores}.sqlite"), f".read {sql}")
    # single-threaded, but built thread-safe: its mutexes are taken and never contended
    assert np.all(ds.metrics["lock_acquisitions"] > 1000)
    assert np.all(ds.metrics["lock_wait_cycles"] == 0)
    assert np.all(ds.metrics["lock_contended"] == 0)
    assert (tmp_path / "db1.sqlite").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen) -> None:
    deadline = time.time() + 10
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"memcached exited: {proc.stderr.read()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("memcached did not start listening")


@pytest.fixture
def memcached_port():
    """A memcached on a loopback port for the duration of one test."""
    port = _free_port()
    cmd = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "2", "-m", "64"]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _wait_port(port, proc)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@need("memcached", "memcslap")
def test_memcached_load_generator(cli, tmp_path, memcached_port):
    # memcslap's "Time to set N keys by T threads: S seconds" as a plugin category
    plugin = tmp_path / "memcslap.toml"
    plugin.write_text("[category.set_time_s]\nsource = 'stdout'\n"
                      "regex = 'Time to set\\s+\\d+ keys by\\s+\\d+ threads:\\s+([0-9.]+) seconds'\n"
                      "aggregate = 'last'\nunit = 's'\nkind = 'time'\n")
    ds = campaign(cli, tmp_path, "--plugin", str(plugin), "--", "memcslap",
                  f"--servers=127.0.0.1:{memcached_port}", "--concurrency={threads}",
                  "--execute-number=3000", "--test=set")
    assert np.all(ds.metrics["set_time_s"] > 0)
    assert np.all(lock_wait_share(ds) < LOCK_FREE), lock_wait_share(ds)     # the client's threads share nothing


@need("memcached", "memcslap")
def test_memcached_server_inside_the_campaign(cli, tmp_path):
    """memcached itself measured: started by the run (pinned with it, under the shim) with
    {threads} worker threads, loaded by memcslap, stopped at the end of the run."""
    port = _free_port()
    user = "-u root" if os.geteuid() == 0 else ""
    script = (f"memcached -l 127.0.0.1 -p {port} -U 0 -t {{threads}} -m 64 {user} & srv=$!; "
              f"for i in $(seq 1 100); do memcstat --servers=127.0.0.1:{port} >/dev/null 2>&1 && break; sleep 0.05; done; "
              f"memcslap --servers=127.0.0.1:{port} --concurrency=4 --execute-number=3000 --test=set; "
              f"memcslap --servers=127.0.0.1:{port} --concurrency=4 --execute-number=3000 --test=get; "
              "kill $srv; wait $srv")
    ds = campaign(cli, tmp_path, "--", "sh", "-c", script)
    # the server's worker threads take item and stats mutexes for every request
    assert np.all(ds.metrics["lock_acquisitions"] > 10000)
    # its background threads (LRU maintainer, crawler) sleep on condition variables
    assert np.all(ds.metrics["cond_wait_cycles"] > 0)
    assert np.all(ds.metrics["threads_seen"] >= 4)
