"""Triggers on a real machine: a bundled workload (corecast-phases) idles, spins, idles; the
daemon watches it (--pid) and a trigger on its CPU use goes HIGH once and LOW once, each after
its dwell, while a trigger with a dwell longer than the busy phase never changes."""
from __future__ import annotations

import math
import os
import signal
import subprocess
import time

import pytest

from corecast.dataset import load
from corecast.native import native_path

from conftest import board_name, marked_pids, start_daemon, stop

DWELL = 0.3
WINDOW = 0.2


@pytest.mark.slow
def test_workload_drives_a_trigger_across_both_levels_once_each_way(tmp_path):
    # two spinning threads: even on a 2-CPU machine loaded by other work they use well over
    # high = 0.2 CPUs, and the idle process well under low = 0.05
    phases = subprocess.Popen([str(native_path("corecast-phases")), "-t", "2", "idle:6", "busy:2.5", "idle:3"],
                              stdout=subprocess.PIPE, text=True)
    actions = tmp_path / "actions.txt"
    trig = tmp_path / "t.toml"
    trig.write_text(f"""
[[trigger]]
name = "busy"
meter = "process_cpu"
scope = "process"
low = 0.05
high = 0.2
dwell = "{int(DWELL * 1000)}ms"
command = "echo $CORECAST_STATE $CORECAST_PREVIOUS_STATE $CORECAST_TIME $CORECAST_SCOPE >> {actions}"

[[trigger]]
name = "patient"
meter = "process_cpu"
scope = "process"
low = 0.05
high = 0.2
dwell = "6s"
""")
    rec = tmp_path / "rec.csv"
    name = board_name()
    d = start_daemon(name, "--pid", phases.pid, "--meters", "process_cpu,process_threads", "--interval", "10ms",
                     "--window", f"{int(WINDOW * 1000)}ms", "--triggers", trig, "--record", rec)
    started = time.time()
    out, _ = phases.communicate(timeout=60)
    rc, _, err = stop(d)
    assert rc == 0, err
    # the workload's lines: "phase N KIND REALTIME MONOTONIC"
    busy_start = [float(l.split()[3]) for l in out.splitlines() if " busy " in l][0]
    idle_again = [float(l.split()[3]) for l in out.splitlines() if l.startswith("phase 3 ")][0]
    assert started < busy_start, "the daemon started after the busy phase had begun (a very busy machine)"
    lines = actions.read_text().splitlines() if actions.exists() else []
    assert [l.split()[:2] for l in lines] == [["high", "low"], ["low", "high"]], (lines, err)
    assert all(l.split()[3] == f"pid{phases.pid}" for l in lines)
    t_high, t_low = float(lines[0].split()[2]), float(lines[1].split()[2])
    # dwell respected: each change comes at least DWELL after the phase that caused it began
    # (and the window average needs part of a window to cross), and well before the next phase
    assert busy_start + DWELL <= t_high < busy_start + 2.0, (busy_start, t_high)
    assert idle_again + DWELL <= t_low < idle_again + 2.5, (idle_again, t_low)
    assert err.count("trigger busy at") == 2 and "trigger patient" not in err
    ds = load(rec)
    col = ds.metrics[f"trigger:busy@pid{phases.pid}"]
    changes = [(a, b) for a, b in zip(col, col[1:]) if a != b]
    assert changes == [(0.0, 1.0), (1.0, 0.0)]
    assert set(ds.metrics[f"trigger:patient@pid{phases.pid}"]) == {0.0}
    cpu = ds.metrics[f"process_cpu@pid{phases.pid}"]
    assert max(v for v in cpu if not math.isnan(v)) > 0.2
    assert max(v for v in ds.metrics[f"process_threads@pid{phases.pid}"] if not math.isnan(v)) == 3


def _trigger_running_a_tree(tmp_path, mark):
    """A trigger that goes HIGH at once (the node is never completely idle) and whose command
    leaves a tree running: a child in the background and one that left with setsid."""
    trig = tmp_path / "tree.toml"
    trig.write_text(f"""
[[trigger]]
name = "tree"
meter = "cpu_busy"
scope = "node"
low = 0.0
high = 1e-9
command = "exec >/dev/null 2>&1; setsid sleep 300 & sleep 301 & echo started > {tmp_path / 'started'}; wait"
""")
    env = dict(os.environ, CORECAST_TEST_TRIGGER_MARK=mark)
    return trig, env


def _wait_for(what, cond, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = cond()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"waited {timeout:g} s for {what}")


def _left(mark, timeout=30.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end and marked_pids("CORECAST_TEST_TRIGGER_MARK", mark):
        time.sleep(0.1)
    left = marked_pids("CORECAST_TEST_TRIGGER_MARK", mark)
    for pid in left:                       # never left to the next test
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


@pytest.mark.slow
def test_trigger_commands_do_not_outlive_the_daemon_that_stops(tmp_path):
    """A trigger's command (and what it started) outlived the daemon: `setsid sleep` and the
    background `sleep` kept running after a clean stop (SIGTERM, or the --duration's end)."""
    mark = f"stop-{os.getpid()}-{time.monotonic_ns()}"
    trig, env = _trigger_running_a_tree(tmp_path, mark)
    name = board_name()
    p = start_daemon(name, "--interval", "10ms", "--triggers", trig, env=env)
    try:
        _wait_for("the trigger's command", lambda: (tmp_path / "started").exists())
        rc, _out, err = stop(p)
        assert rc == 0, err
        assert "trigger tree: its command was still running; stopped" in err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert _left(mark) == []


@pytest.mark.slow
def test_trigger_commands_die_with_a_daemon_killed_by_sigkill(tmp_path):
    """SIGKILL of the daemon left its trigger's command tree running (start_new_session, never
    waited for); now corecast-launch kills it when the daemon dies."""
    mark = f"kill-{os.getpid()}-{time.monotonic_ns()}"
    trig, env = _trigger_running_a_tree(tmp_path, mark)
    name = board_name()
    p = start_daemon(name, "--interval", "10ms", "--triggers", trig, env=env)
    try:
        _wait_for("the trigger's command", lambda: (tmp_path / "started").exists())
        p.send_signal(signal.SIGKILL)
        p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        from corecast.meters import board as B
        for f in (B.board_path(name), B.board_path(name).with_name(B.board_path(name).name + ".app")):
            try:
                f.unlink()                 # the stale board a killed daemon leaves (docs/meters.md)
            except FileNotFoundError:
                pass
    assert _left(mark) == []
