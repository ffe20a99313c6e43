"""The sync shim, preloaded into scenarios with known waiting (tests/data/shim/shimtest.c)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from corecast.collect import shim

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "tests" / "data" / "shim" / "shimtest.c"

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


@pytest.fixture(scope="module")
def shimtest(tmp_path_factory) -> Path:
    exe = tmp_path_factory.mktemp("shimtest") / "shimtest"
    subprocess.run(["gcc", "-O1", "-pthread", "-o", str(exe), str(SRC)], check=True)
    return exe


def run(exe: Path, scenario: str, tmp_path: Path, *, report: bool = True, check: bool = True):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if report:
        env.update(shim.shim_env(tmp_path, env))
    else:
        env["LD_PRELOAD"] = str(shim.library_path())
    p = subprocess.run([str(exe), scenario], env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert p.returncode == 0, p.stderr
    return p, shim.read_reports(tmp_path)


def secs(summary: shim.ShimSummary, prim: str) -> float:
    return summary.prims[prim].wait / summary.ticks_per_s


def test_uncontended_mutex_counts_calls_but_no_wait(shimtest, tmp_path):
    _, s = run(shimtest, "uncontended", tmp_path)
    st = s.prims["mutex_lock"]
    assert st.calls == 100000
    assert st.contended == 0 and st.wait == 0
    cats = shim.stall_categories(s)
    assert cats["lock_wait_cycles"] == 0.0
    assert not s.incomplete


@pytest.mark.parametrize("scenario,prim,category", [
    ("mutex", "mutex_lock", "lock_wait_cycles"),
    ("timedlock", "mutex_timedlock", "lock_wait_cycles"),
    ("rwlock", "rwlock_rdlock", "lock_wait_cycles"),
    ("spin", "spin_lock", "lock_wait_cycles"),
    ("cond", "cond_wait", "cond_wait_cycles"),
    ("barrier", "barrier_wait", "barrier_wait_cycles"),
    ("sem", "sem_wait", "cond_wait_cycles"),
    ("trylock", "mutex_trylock", "trylock_spin_cycles"),
])
def test_contended_wait_is_measured(shimtest, tmp_path, scenario, prim, category):
    # Another thread holds the object (or signals) 200 ms after the wait starts: the waiter's
    # measured wait is at least most of that, whatever else the machine is doing.
    _, s = run(shimtest, scenario, tmp_path)
    assert s.ticks_per_s and s.ticks_per_s > 1e6
    st = s.prims[prim]
    assert st.contended >= 1
    assert secs(s, prim) >= 0.1
    assert st.max <= st.wait
    cats = shim.stall_categories(s)
    assert cats[category] >= 0.1 * s.ticks_per_s
    # nothing leaks into categories it does not belong to
    for other, v in cats.items():
        if other not in (category, "runqueue_delay_cycles"):
            assert v < 0.05 * s.ticks_per_s, (other, v)


def test_failed_trylocks_are_counted(shimtest, tmp_path):
    _, s = run(shimtest, "trylock", tmp_path)
    st = s.prims["mutex_trylock"]
    assert st.calls == st.contended + 1          # every call failed but the last
    assert shim.counters(s)["trylock_failures"] == st.contended


def test_semaphore_fast_path_keeps_errno(shimtest, tmp_path):
    _, s = run(shimtest, "sem_uncontended", tmp_path)
    assert s.prims["sem_wait"].calls == 1000 and s.prims["sem_wait"].contended == 0


def test_exited_threads_keep_their_schedstat(shimtest, tmp_path):
    _, s = run(shimtest, "threads", tmp_path)
    (proc,) = s.processes
    exited = [t for t in proc.threads if t.exited]
    assert len(exited) == 3
    # each spun for 100 ms: its run time was recorded when it exited
    assert all(t.run_ns > 0 for t in exited), exited
    # it was running or waiting for a CPU all that time (but for what a VM's host took: the
    # guest's steal time is neither; half of it is a loose floor a lost schedstat still breaks)
    assert all(t.run_ns + t.delay_ns >= 50_000_000 for t in exited), exited
    assert s.threads == 4


def test_exit_from_another_thread_writes_the_report(shimtest, tmp_path):
    p, s = run(shimtest, "thread_exit", tmp_path, check=False)
    assert p.returncode == 3
    (proc,) = s.processes
    assert proc.end == "exit"
    assert s.prims["mutex_lock"].calls == 1


def test_fatal_signal_writes_the_report_and_still_kills(shimtest, tmp_path):
    p, s = run(shimtest, "segv", tmp_path, check=False)
    assert p.returncode == -signal.SIGSEGV
    (proc,) = s.processes
    assert proc.end == f"signal {int(signal.SIGSEGV)}"
    assert secs(s, "mutex_lock") >= 0.1
    assert not list(tmp_path.glob("*.tmp"))


def test_forked_child_reports_separately(shimtest, tmp_path):
    _, s = run(shimtest, "fork", tmp_path)
    assert len(s.processes) == 2
    by_pid = {p.pid: p for p in s.processes}
    child = next(p for p in s.processes if p.ppid in by_pid)
    parent = by_pid[child.ppid]
    calls = lambda pr: sum(st.calls for t in pr.threads for n, st in t.stats.items() if n == "mutex_lock")  # noqa: E731
    assert calls(parent) == 10                  # the child's calls are not counted twice
    assert calls(child) == 2
    assert sum(t.stats["mutex_lock"].wait for t in child.threads if "mutex_lock" in t.stats) > 0


def test_vfork_child_does_not_take_the_parents_report(shimtest, tmp_path):
    _, s = run(shimtest, "vfork", tmp_path)
    (proc,) = s.processes
    assert s.prims["mutex_lock"].calls == 1


def test_no_report_without_the_variable(shimtest, tmp_path):
    p, s = run(shimtest, "mutex", tmp_path, report=False)
    assert s.processes == [] and list(tmp_path.iterdir()) == []


def test_parse_report_rejects_truncated():
    text = "corecast-shim 1\npid 5\nclock tsc\nticks 10\nns 10\nend exit\n"
    with pytest.raises(ValueError, match="truncated"):
        shim.parse_report(text)
    r = shim.parse_report(text + "thread 5 exited 0 run_ns 1 delay_ns 2 slices 3\n"
                          "stat 5 mutex_lock calls 4 contended 1 wait 99 max 99\ndone\n")
    assert r.threads[0].delay_ns == 2 and r.threads[0].stats["mutex_lock"].wait == 99


def test_truncated_report_is_listed_not_counted(tmp_path):
    (tmp_path / "shim.1").write_text("corecast-shim 1\npid 1\n")
    (tmp_path / "shim.2.tmp").write_text("corecast-shim 1\n")
    s = shim.read_reports(tmp_path)
    assert s.processes == [] and len(s.incomplete) == 2


def test_stall_categories_convert_non_tsc_clocks():
    s = shim.ShimSummary(processes=[], prims={"barrier_wait": shim.PrimStat(1, 1, 1000, 1000)}, threads=1,
                         run_ns=0, delay_ns=2000, ticks_per_s=1e9, clock="ns")
    cats = shim.stall_categories(s, nominal_hz=2e9)
    assert cats["barrier_wait_cycles"] == pytest.approx(2000.0)     # 1000 ns at 2 GHz
    assert cats["runqueue_delay_cycles"] == pytest.approx(4000.0)


def test_shim_env_keeps_existing_preload(tmp_path):
    env = shim.shim_env(tmp_path, {"LD_PRELOAD": "/x/libother.so"})
    parts = env["LD_PRELOAD"].split()
    assert parts[0].endswith("libcorecast_shim.so") and parts[1] == "/x/libother.so"
    assert env[shim.ENV_REPORT].endswith("shim.%p")
