"""corecast meters running for real: mistakes at start-up, a crashed daemon's stale board, torn
reads under a writer as fast as it can, the advice obeyed by C (a pthread pool, OpenMP) and
Python workers."""
from __future__ import annotations

import ctypes
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from corecast.meters import Board, allowed_workers, attach, board as B, release, reset, throttle_point
from corecast.native import native_path
from corecast.errors import UserError

from conftest import board_name, start_daemon, stop, wait_running


# ============================================================================================
# mistakes: one line, exit status 2

@pytest.mark.parametrize("text, message", [
    ("[[trigger]\nmeter = 1", "not valid TOML"),
    ('[[trigger]]\nmeter = "cpu_bsy"\nlow = 0.1\nhigh = 0.5\n', "unknown meter 'cpu_bsy'"),
    ('[[trigger]]\nmeter = "cpu_busy"\nlow = 0.9\nhigh = 0.5\n', "low (0.9) is above high (0.5)"),
    ('[[trigger]]\nmeter = "cpu_busy"\nlow = 0.1\nhigh = 0.5\nsope = "node"\n', "unknown key 'sope'"),
    ('[[trigger]]\nmeter = "cpu_busy"\nlow = 0.1\nhigh = 0.5\nscope = "core77"\n', "no scope 'core77'"),
    ('[[trigger]]\nmeter = "cpu_busy"\nhigh = 0.5\n', "'low' is missing"),
    ('[[trigger]]\nmeter = "cpu_busy"\nlow = 0.1\nhigh = 0.5\ndwell = "soon"\n', "not a duration"),
    ('[[trigger]]\nmeter = "psi_cpu_some"\nlow = 0.1\nhigh = 0.5\nscope = "core"\n', "has no value at scope"),
    ('[advice]\npolicy = "fast"\n', "policy 'fast'"),
])
def test_malformed_trigger_file(cli, tmp_path, text, message):
    f = tmp_path / "t.toml"
    f.write_text(text)
    r = cli("meters", "--triggers", f, "--blackboard", board_name(), "--duration", "1")
    assert r.code == 2, r.err
    assert message in r.err and r.err.count("\n") == 1 and str(f) in r.err, r.err
    assert r.err.startswith("corecast meters: error: ")


@pytest.mark.parametrize("args, message", [
    (["--meters", "cpu_busy,nosuch"], "unknown meter 'nosuch'"),
    (["--meters", "thread_cpu"], "needs --pid"),
    (["--interval", "0.5ms"], "outside 1ms ... 1s"),
    (["--interval", "10ms", "--window", "5ms"], "shorter than --interval"),
    (["--pid", "999999999"], "no such process"),
    (["--blackboard", "../etc"], "not a blackboard name"),
    (["--record", "/tmp/x.parquet"], "give a .csv or .json file"),
    (["--listen", "localhost:http"], "'http' is not a port number"),
])
def test_bad_options(cli, args, message):
    if "--blackboard" not in args:
        args = args + ["--blackboard", board_name()]
    r = cli("meters", *args, "--duration", "1")
    assert r.code == 2 and message in r.err and r.err.count("\n") == 1, r.err


def test_port_in_use(cli):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    try:
        r = cli("meters", "--listen", f"127.0.0.1:{s.getsockname()[1]}", "--blackboard", board_name(),
                "--duration", "1")
    finally:
        s.close()
    assert r.code == 2 and "the port is in use" in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.slow
def test_name_taken_by_a_live_daemon_then_stale_after_a_crash(cli, tmp_path):
    name = board_name()
    p = start_daemon(name, "--interval", "10ms")
    try:
        r = cli("meters", "--blackboard", name, "--duration", "1")
        assert r.code == 2 and r.err.count("\n") == 1, r.err
        assert f"blackboard '{name}' is taken by a live daemon (pid {p.pid}," in r.err
        with Board.open(name) as b:
            assert b.stale() is None
        p.send_signal(signal.SIGKILL)                   # a crash: the board stays behind
        p.wait()
        assert B.board_path(name).exists()
        with Board.open(name) as b:
            why = b.stale()
            assert why and f"the daemon (pid {p.pid}) is gone" in why
        r = cli("meters", "show", "--blackboard", name)
        assert r.code == 0 and "stale" in r.out and "is gone" in r.out
        r = cli("meters", "show", "--blackboard", name, "--json")
        assert r.json()["stale"].startswith(f"the daemon (pid {p.pid}) is gone")
        # a new daemon takes the name and says what it replaced
        q = start_daemon(name, "--interval", "10ms")
        rc, out, err = stop(q)
        assert rc == 0 and f"replaced a stale blackboard {B.board_path(name)} (pid {p.pid}" in err
        assert not B.board_path(name).exists()           # a clean exit removes it
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_stopped_daemon_board_is_stale_for_a_reader_that_kept_it():
    name = board_name()
    p = start_daemon(name, "--interval", "10ms")
    b = Board.open(name)
    try:
        assert b.stale() is None
        rc, _, _ = stop(p)
        assert rc == 0
        assert b.stale() == f"the daemon (pid {p.pid}) stopped"
    finally:
        b.close()


# ============================================================================================
# torn reads

@pytest.mark.slow
def test_no_torn_reads_under_a_writer_as_fast_as_it_can():
    """A writer rewriting 64 records as fast as it can and 4 readers checking each record's
    invariant (all fields from one write) for 4 s: not one torn read through the seqlock of
    corecast_meters.h, while a reader copying without it (the control, reading at the same
    time) does see torn records. A Python reader (the library's copy) checks the same invariant
    meanwhile. The writer runs until the readers are done (SIGTERM), however late a loaded
    machine starts them."""
    stress = str(native_path("corecast-meters-stress"))
    name = board_name()
    seconds = 4
    w = subprocess.Popen([stress, "write", name, "600", "64"], stdout=subprocess.PIPE, text=True)
    try:
        wait_running(name, timeout=60, ticks=0)        # the stress writer counts no ticks
        readers = [subprocess.Popen([stress, "read", name, str(seconds)], stdout=subprocess.PIPE, text=True)
                   for _ in range(4)]
        control = subprocess.Popen([stress, "read-unlocked", name, str(seconds)], stdout=subprocess.PIPE,
                                   text=True)
        py_reads = py_torn = 0
        with Board.open(name) as b:
            end = time.monotonic() + 1.0
            while time.monotonic() < end:
                for i in range(64):
                    r = b.reading(i)
                    k = r.t_ns
                    py_reads += 1
                    py_torn += not (r.current == k and r.avg == k + 0.5 and r.min == k - 1 and r.max == k + 1
                                    and r.total == 2 * k and r.count == k % 2**32
                                    and r.aux == ((k * 2654435761) ^ i) % 2**64)
        outs = [r.communicate(timeout=120)[0] for r in readers]
        control_out = control.communicate(timeout=120)[0]
    finally:
        w.terminate()
        wout = w.communicate(timeout=30)[0]
        if B.board_path(name).exists():          # the stress writer leaves its board behind
            B.board_path(name).unlink()
    for o in outs:
        m = re.fullmatch(r"reads (\d+) torn (\d+) busy (\d+) seconds ([\d.]+)\n", o)
        assert m, o
        assert int(m.group(1)) > 100_000 and int(m.group(2)) == 0, o
        assert float(m.group(4)) >= seconds - 0.5
    assert int(re.search(r"writes (\d+)", wout).group(1)) > 10_000_000
    assert py_reads > 1000 and py_torn == 0
    m = re.fullmatch(r"reads (\d+) torn (\d+) busy 0 seconds [\d.]+\n", control_out)
    assert m and int(m.group(2)) > 0, control_out           # the invariant does catch torn copies


@pytest.mark.slow
def test_a_writer_preempted_in_the_middle_of_a_write_is_waited_for_a_dead_one_is_not():
    """A busy machine can keep a live writer off its CPU for longer than the C read's 50 ms while
    a record is half written: the Python reader waits for it (the board is live); once the
    writer is dead the same half-written record is a stale board at once."""
    stress = str(native_path("corecast-meters-stress"))
    name = board_name()
    w = subprocess.Popen([stress, "write", name, "600", "1"], stdout=subprocess.PIPE, text=True)
    try:
        wait_running(name, timeout=60, ticks=0)
        with Board.open(name) as b:
            seq = ctypes.c_uint32.from_address(b._base + b.header.meter_rec_off)
            for _ in range(1000):                       # stopped in the middle of a write
                os.kill(w.pid, signal.SIGSTOP)
                time.sleep(0.001)
                if seq.value & 1:
                    break
                os.kill(w.pid, signal.SIGCONT)
            assert seq.value & 1
            resumed = threading.Event()

            def resume():
                resumed.set()
                os.kill(w.pid, signal.SIGCONT)

            timer = threading.Timer(0.3, resume)
            timer.start()
            r = b.reading(0)
            # the reading came only once the writer had been let go, whole
            assert resumed.is_set() and r.current == r.t_ns and r.total == 2 * r.t_ns
            timer.join()
            for _ in range(1000):
                os.kill(w.pid, signal.SIGSTOP)
                time.sleep(0.001)
                if seq.value & 1:
                    break
                os.kill(w.pid, signal.SIGCONT)
            w.kill()
            w.wait()
            with pytest.raises(UserError, match="middle of a write"):
                b.reading(0)
    finally:
        if w.poll() is None:
            w.kill()
        w.communicate(timeout=30)
        if B.board_path(name).exists():
            B.board_path(name).unlink()


# ============================================================================================
# advice obeyed

def test_pool_and_openmp_obey_the_advice_and_end():
    name = board_name()
    p = start_daemon(name, "--interval", "10ms", "--meters", "cpu_busy")
    env = dict(os.environ, CORECAST_METERS=name)
    try:
        with Board.open(name) as b:
            allowed = b.allowed_workers("node")
        assert allowed == b.advice_scopes()[0].max_workers >= 1
        r = subprocess.run([str(native_path("corecast-pool")), "-t", str(allowed + 4), "-n", "20000", "--throttle"],
                           capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr
        assert f"allowed_workers: {allowed}\n" in r.stdout
        assert int(re.search(r"slept: (\d+)", r.stdout).group(1)) > 0      # the extra workers slept
        try:
            omp = native_path("corecast-meters-openmp")
        except UserError:
            omp = None
        if omp is not None:
            r = subprocess.run([str(omp), "20000000"], capture_output=True, text=True, timeout=120,
                               env=dict(env, OMP_NUM_THREADS=str(allowed + 2)))
            assert r.returncode == 0, r.stderr
            assert "pi: 3.14159" in r.stdout and f"allowed_workers: {allowed}" in r.stdout
    finally:
        stop(p)


def test_python_throttle_point():
    name = board_name()
    p = start_daemon(name, "--interval", "10ms", "--meters", "cpu_busy")
    try:
        assert attach(name, "node")
        n = allowed_workers()
        assert n is not None and n >= 1
        progress = [0] * (n + 2)
        done = threading.Event()

        def worker(i):
            while not done.is_set():
                throttle_point(i)
                progress[i] += 1
                time.sleep(0.001)

        ts = [threading.Thread(target=worker, args=(i,)) for i in range(n + 2)]
        for t in ts:
            t.start()
        time.sleep(0.5)
        seen = list(progress)
        assert all(seen[i] > 10 for i in range(n))          # the allowed workers ran
        assert seen[n] == 0 and seen[n + 1] == 0            # the others slept in throttle_point
        done.set()
        release()                                           # wake them: the work is over
        for t in ts:
            t.join(5)
        assert not any(t.is_alive() for t in ts)
        reset()
    finally:
        stop(p)


def test_show_and_list(cli):
    r = cli("meters", "list")
    assert r.code == 0 and "cpu_busy" in r.out and "mem_latency" in r.out
    name = board_name()
    p = start_daemon(name, "--interval", "10ms", "--meters", "cpu_busy,psi_cpu_some")
    try:
        r = cli("meters", "show", "--blackboard", name)
        assert r.code == 0 and "live" in r.out and "cpu_busy" in r.out and "Advice" in r.out
        doc = cli("meters", "show", "--blackboard", name, "--json").json()
        assert doc["stale"] is None and {m["name"] for m in doc["meters"]} == {"cpu_busy", "psi_cpu_some"}
    finally:
        stop(p)
    r = cli("meters", "show", "--blackboard", name)
    assert r.code == 2 and "no blackboard" in r.err
