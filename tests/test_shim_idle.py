"""The sync shim's idle-core accounting (tests/data/shim/idletest.c): a wait is charged by the CPUs
left idle while it lasts, so a coordinator waiting for a busy worker costs nothing while a thread
blocked on a lock with a core to spare does. Each scenario is pinned to the CPUs it needs; the
shim's counts, not the machine's load, decide, so the shares are checked tightly."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from corecast.collect import shim

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "tests" / "data" / "shim" / "idletest.c"
CPUS = sorted(os.sched_getaffinity(0))

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
two_cpus = pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs")


@pytest.fixture(scope="module")
def idletest(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("idletest") / "idletest"
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(SRC)], check=True)
    return exe


def run(exe: Path, scenario: str, tmp_path: Path, ncpu: int) -> shim.ShimSummary:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(shim.shim_env(tmp_path, env))
    cpus = set(CPUS[:ncpu])
    p = subprocess.run([str(exe), scenario], env=env, capture_output=True, text=True, timeout=60,
                       preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    assert p.returncode == 0, p.stderr
    s = shim.read_reports(tmp_path)
    assert [pr.cpus for pr in s.processes] == [ncpu]
    return s


def idle_share(s: shim.ShimSummary, prim: str) -> float:
    st = s.prims[prim]
    assert st.idle_known and st.wait > 0.1 * s.ticks_per_s, st     # at least 100 ms of waiting
    assert 0 <= st.idle <= st.wait
    return st.idle / st.wait


def test_a_coordinator_waiting_for_a_busy_worker_leaves_no_core_idle(idletest, tmp_path):
    s = run(idletest, "overlap", tmp_path, 1)
    assert idle_share(s, "cond_wait") < 0.1
    parts = shim.idle_parts(s)
    assert parts["cond_wait_idle_cycles"] < 0.1 * shim.stall_categories(s)["cond_wait_cycles"]


@two_cpus
def test_a_lock_wait_with_a_core_to_spare_is_idle_time(idletest, tmp_path):
    s = run(idletest, "critical", tmp_path, 2)
    assert idle_share(s, "mutex_lock") > 0.9
    assert shim.idle_parts(s)["lock_wait_idle_cycles"] > 0.9 * shim.stall_categories(s)["lock_wait_cycles"]


def test_the_same_lock_wait_on_one_cpu_costs_nothing(idletest, tmp_path):
    # the holder runs on the only CPU: the waiter had nothing to run on anyway
    s = run(idletest, "critical", tmp_path, 1)
    assert idle_share(s, "mutex_lock") < 0.1


def test_a_sleeping_thread_does_not_count_as_running(idletest, tmp_path):
    s = run(idletest, "sleeper", tmp_path, 1)
    assert idle_share(s, "cond_wait") > 0.9
    assert s.prims["sleep"].calls >= 1 and s.prims["sleep"].wait > 0.2 * s.ticks_per_s


@two_cpus
def test_a_thread_in_pthread_join_does_not_count_as_running(idletest, tmp_path):
    # one spinner, one waiter, the main thread joining: one of the two CPUs is idle
    s = run(idletest, "join", tmp_path, 2)
    assert idle_share(s, "cond_wait") > 0.9
    assert s.prims["join"].calls == 2


@two_cpus
def test_idle_cpus_are_shared_among_the_waiters(idletest, tmp_path):
    # three waiters, nobody running, two CPUs: each gets two thirds of its wait
    s = run(idletest, "fair", tmp_path, 2)
    assert idle_share(s, "cond_wait") == pytest.approx(2 / 3, abs=0.08)


def test_an_older_report_without_idle_counts_gives_no_idle_part(tmp_path):
    text = ("corecast-shim 1\npid 10\nppid 1\nclock tsc\nticks 3000000000\nns 1000000000\nend exit\n"
            "thread 10 exited 0 run_ns 1 delay_ns 0 slices 1\n"
            "stat 10 cond_wait calls 3 contended 3 wait 900000000 max 500000000\ndone\n")
    (tmp_path / "shim.10").write_text(text)
    s = shim.read_reports(tmp_path)
    assert s.processes[0].cpus is None
    assert shim.idle_parts(s)["cond_wait_idle_cycles"] is None
    assert shim.idle_parts(s)["lock_wait_idle_cycles"] == 0.0          # no waits of that kind
    assert shim.stall_categories(s)["cond_wait_cycles"] == 900000000.0


def test_the_shim_s_idle_suffix_is_the_dataset_s():
    from corecast import dataset
    from corecast.collect import shim
    assert shim.IDLE_PART_SUFFIX == dataset.IDLE_PART_SUFFIX
