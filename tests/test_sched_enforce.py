"""The enforcing mode: hybrid machines from a fake sysfs, the emulation's cgroup writes, and real
runs on this machine's emulated AMP (relations between measured values, no wall-clock bound)."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corecast.errors import UserError
from corecast.sched.enforce import emulate as E
from corecast.sched.enforce.hybrid import detect, format_cpus, parse_cpus
from corecast.sched.enforce.runner import enforce, prepare

pytestmark = pytest.mark.slow        # real programs and long runs: `make test`, not `make check`


def _cpu_tree(root: Path, n: int, online: str | None = None) -> Path:
    d = root / "sys/devices/system/cpu"
    for c in range(n):
        (d / f"cpu{c}" / "cpufreq").mkdir(parents=True)
    (d / "online").write_text(online or f"0-{n - 1}\n")
    return d


def test_parse_and_format_cpu_lists():
    assert parse_cpus("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpus([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
    for bad in ("0-x", "3-1", "-1", "", "a", "1,,2"):
        with pytest.raises(UserError, match="not a CPU number|empty"):
            parse_cpus(bad, "--big")


def test_hybrid_from_the_pmus(tmp_path):
    d = _cpu_tree(tmp_path, 12)
    pmu = tmp_path / "sys/bus/event_source/devices"
    (pmu / "cpu_core").mkdir(parents=True)
    (pmu / "cpu_atom").mkdir(parents=True)
    (pmu / "cpu_core/cpus").write_text("0-3\n")
    (pmu / "cpu_atom/cpus").write_text("4-11\n")
    for c in range(12):
        (d / f"cpu{c}/cpufreq/cpuinfo_max_freq").write_text("5000000" if c < 4 else "3800000")
    h = detect(tmp_path)
    assert h.source == "pmu" and h.hybrid
    assert h.groups[0].cpus == [0, 1, 2, 3] and h.groups[1].cpus == list(range(4, 12))
    assert h.groups[1].speed == pytest.approx(0.76)


def test_hybrid_from_capacity_and_from_frequency(tmp_path):
    d = _cpu_tree(tmp_path / "a", 8)
    for c in range(8):
        (d / f"cpu{c}/cpu_capacity").write_text("1024" if c >= 6 else "446")
    h = detect(tmp_path / "a")
    assert h.source == "cpu_capacity" and h.groups[0].cpus == [6, 7] and h.groups[1].cpus == list(range(6))
    assert h.groups[1].speed == pytest.approx(446 / 1024)
    d = _cpu_tree(tmp_path / "b", 4)
    for c in range(4):
        (d / f"cpu{c}/cpufreq/cpuinfo_max_freq").write_text("2100000" if c < 2 else "800000")
    h = detect(tmp_path / "b")
    assert h.source == "cpuinfo_max_freq" and h.groups[0].cpus == [0, 1]
    d = _cpu_tree(tmp_path / "c", 4)
    for c in range(4):
        (d / f"cpu{c}/cpu_capacity").write_text("1024")
    assert not detect(tmp_path / "c").hybrid
    (d / "cpu2/cpu_capacity").write_text("lots")
    with pytest.raises(UserError, match="is not a number"):
        detect(tmp_path / "c")
    # a hybrid machine chooses its own CPUs and needs no emulation
    s = prepare(None, None, "auto", None, 0.05, sysfs_root=tmp_path / "a")
    assert s.big == [6, 7] and s.small == list(range(6)) and s.emulation.kind == "none"


def test_cgroup_v2_writes(tmp_path):
    (tmp_path / "proc/self").mkdir(parents=True)
    mnt = tmp_path / "sys/fs/cgroup"
    mnt.mkdir(parents=True)
    (mnt / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (tmp_path / "proc/self/mounts").write_text(f"cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0\n")
    assert E.cgroup_mount(tmp_path) == ("v2", mnt)
    em = E.CgroupV2(mnt, [2, 3], 0.25)
    base = mnt / f"corecast-sched-{os.getpid()}"
    assert (base / "small/cpu.max").read_text() == "5000 10000"     # 0.25 x 10 ms x 2 CPUs
    assert (base / "small/cgroup.type").read_text() == "threaded"
    assert (base / "cgroup.subtree_control").read_text() == "+cpu"
    em.adopt(4242)
    em.place(4243, True)
    assert (base / "cgroup.procs").read_text() == "4242"
    assert (base / "small/cgroup.threads").read_text() == "4243"
    assert "EMULATED AMP" in em.describe() and "cpu.max" in em.describe()
    em.close()


# ---------------------------------------------------------------- the root's cpu controller (v2)
# A fake cgroup v2 root: plain folders and files. A write replaces a file's text (the kernel
# would add or remove the controller named), so the last write is what the test reads, and the
# test then puts there what the kernel would show (`_kernel_shows`); a fake cgroup is removed
# with its files (the kernel's rmdir of an empty cgroup).

def _fake_v2_root(tmp_path: Path, subtree: str) -> Path:
    mnt = tmp_path / "cgroup"
    mnt.mkdir()
    (mnt / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (mnt / "cgroup.subtree_control").write_text(subtree + "\n")
    return mnt


def _subtree(mnt: Path) -> str:
    return (mnt / "cgroup.subtree_control").read_text().strip()


def _kernel_shows(mnt: Path, written: str, now: str) -> None:
    """The run wrote `written` into the root's subtree_control: the kernel shows `now` there."""
    assert _subtree(mnt) == written
    (mnt / "cgroup.subtree_control").write_text(now + "\n")


def test_cgroup_v2_gives_back_the_cpu_controller_it_enabled(tmp_path, monkeypatch):
    monkeypatch.setattr(E, "_rmdir", shutil.rmtree, raising=False)
    mnt = _fake_v2_root(tmp_path, "memory pids")
    term = signal.getsignal(signal.SIGTERM)
    em = E.CgroupV2(mnt, [1], 0.5)
    _kernel_shows(mnt, "+cpu", "cpu memory pids")        # enabled: it was not
    assert signal.getsignal(signal.SIGTERM) is not term  # SIGTERM ends the run through its clean-up
    em.close()
    assert _subtree(mnt) == "-cpu"                       # given back (nothing else uses it)
    assert not em.base.exists() and em.left_on is None
    assert signal.getsignal(signal.SIGTERM) is term
    em.close()                                           # twice (atexit): nothing more written
    assert _subtree(mnt) == "-cpu"


def test_cgroup_v2_never_touches_a_cpu_controller_that_was_on(tmp_path, monkeypatch):
    monkeypatch.setattr(E, "_rmdir", shutil.rmtree, raising=False)
    mnt = _fake_v2_root(tmp_path, "cpu memory")
    em = E.CgroupV2(mnt, [1], 0.5)
    assert _subtree(mnt) == "cpu memory"                 # not even written
    em.close()
    assert _subtree(mnt) == "cpu memory"


def test_cgroup_v2_gives_back_the_controller_after_a_failed_set_up(tmp_path, monkeypatch):
    monkeypatch.setattr(E, "_rmdir", shutil.rmtree, raising=False)
    mnt = _fake_v2_root(tmp_path, "memory")
    (mnt / f"corecast-sched-{os.getpid()}/small/cpu.max").mkdir(parents=True)    # the last write fails
    real = E._Cgroup._write

    def write(self, path, text):                         # the kernel shows what the run enabled
        real(self, path, text)
        if path == mnt / "cgroup.subtree_control" and text == "+cpu":
            path.write_text("cpu memory\n")
    monkeypatch.setattr(E._Cgroup, "_write", write)
    with pytest.raises(UserError, match="cpu.max"):
        E.CgroupV2(mnt, [1], 0.5)
    assert _subtree(mnt) == "-cpu"
    assert not (mnt / f"corecast-sched-{os.getpid()}").exists()


def test_cgroup_v2_gives_back_the_controller_when_interrupted_just_after_enabling_it(tmp_path, monkeypatch):
    """SIGTERM (KeyboardInterrupt, as Ctrl-C) arriving once the "+cpu" write is done but before
    the run noted that it enabled the controller: the clean-up still gives it back (it left it
    enabled, and dismissed the keeper that would have disabled it)."""
    monkeypatch.setattr(E, "_rmdir", shutil.rmtree, raising=False)
    mnt = _fake_v2_root(tmp_path, "memory")
    real = E._Cgroup._write

    def write(self, path, text):
        real(self, path, text)
        if path == mnt / "cgroup.subtree_control" and text == "+cpu":
            path.write_text("cpu memory\n")            # the kernel shows it enabled
            raise KeyboardInterrupt()                   # the signal, right after the write
    monkeypatch.setattr(E._Cgroup, "_write", write)
    with pytest.raises(KeyboardInterrupt):
        E.CgroupV2(mnt, [1], 0.5)
    assert _subtree(mnt) == "-cpu"
    assert not (mnt / f"corecast-sched-{os.getpid()}").exists()


def test_cgroup_v2_a_refused_enable_is_not_given_back(tmp_path, monkeypatch):
    """The kernel refused "+cpu": the run enabled nothing, so it disables nothing at the end
    (someone who enabled cpu meanwhile keeps it)."""
    monkeypatch.setattr(E, "_rmdir", shutil.rmtree, raising=False)
    mnt = _fake_v2_root(tmp_path, "memory")
    real = E._Cgroup._write

    def write(self, path, text):
        if path == mnt / "cgroup.subtree_control" and text == "+cpu":
            path.write_text("cpu memory\n")            # someone else's, at that moment
            raise UserError(f"{path}: cannot write '+cpu': Device or resource busy")
        real(self, path, text)
    monkeypatch.setattr(E._Cgroup, "_write", write)
    with pytest.raises(UserError, match="busy"):
        E.CgroupV2(mnt, [1], 0.5)
    assert _subtree(mnt) == "cpu memory"


@pytest.mark.parametrize("other", ["run", "below", "setting"])
def test_cgroup_v2_leaves_the_controller_when_another_uses_it(tmp_path, monkeypatch, other):
    monkeypatch.setattr(E, "_rmdir", shutil.rmtree, raising=False)
    mnt = _fake_v2_root(tmp_path, "memory")
    em = E.CgroupV2(mnt, [1], 0.5)
    _kernel_shows(mnt, "+cpu", "cpu memory")
    if other == "run":                                   # another corecast sched run came meanwhile
        (mnt / "corecast-sched-1").mkdir()
    elif other == "below":                               # someone enabled cpu below a child
        (mnt / "system.slice").mkdir()
        (mnt / "system.slice/cgroup.subtree_control").write_text("cpu memory\n")
    else:                                                # someone set a child's cpu limit
        (mnt / "user.slice").mkdir()
        (mnt / "user.slice/cpu.max").write_text("50000 100000\n")
        (mnt / "user.slice/cpu.weight").write_text("100\n")
    em.close()
    assert _subtree(mnt) == "cpu memory" and not em.base.exists()
    assert em.left_on and "in use" in em.left_on


# A process that sets the emulation up on a fake root and waits; the keeper's pid on its line.
HOLDER = r"""
import os, shutil, signal, sys, time
from pathlib import Path
# Ctrl-C as at a terminal: a test session started in the background (nohup, `cmd &` in a
# script) inherits SIGINT ignored, and Python then leaves it so
signal.signal(signal.SIGINT, signal.default_int_handler)
from corecast.sched.enforce import emulate as E
E._rmdir = shutil.rmtree
em = E.CgroupV2(Path(sys.argv[1]), [1], 0.5)
keeper = getattr(em, "_keeper", None)
print("ready", keeper.proc.pid if keeper else 0, flush=True)
time.sleep(120)
"""


def _wait_for(cond, timeout=60.0):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        time.sleep(0.02)
    return cond()


def _holder(mnt):
    p = subprocess.Popen([sys.executable, "-c", HOLDER, str(mnt)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = p.stdout.readline().split()
    assert line and line[0] == "ready", p.stderr.read()
    return p, int(line[1])


def _end_keeper(pid):
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cgroup_v2_gives_the_controller_back_on_sigterm_and_sigint(tmp_path, sig):
    mnt = _fake_v2_root(tmp_path, "memory")
    p, keeper = _holder(mnt)
    try:
        _kernel_shows(mnt, "+cpu", "cpu memory")
        p.send_signal(sig)
        p.wait(60)
        assert _subtree(mnt) == "-cpu", p.stderr.read()
        assert not any(mnt.glob("corecast-sched-*"))
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        _end_keeper(keeper)


@pytest.mark.slow
def test_cgroup_v2_keeper_gives_the_controller_back_after_sigkill(tmp_path):
    mnt = _fake_v2_root(tmp_path, "memory")
    p, keeper = _holder(mnt)
    try:
        _kernel_shows(mnt, "+cpu", "cpu memory")
        p.kill()
        p.wait()
        assert _subtree(mnt) == "cpu memory"     # nothing ran in corecast's process
        # the sentinel removes the emulation's cgroup (on a real root; it leaves this fake one alone)
        shutil.rmtree(mnt / f"corecast-sched-{p.pid}")
        assert _wait_for(lambda: _subtree(mnt) == "-cpu"), _subtree(mnt)
    finally:
        _end_keeper(keeper)


def _can_emulate() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs two CPUs"
    if E.cgroup_mount() is None:
        return "no cgroup cpu controller"
    return None


# A CPU-bound program, at a high priority so that the other work of a shared test machine
# disturbs it little (its slowdown is the scheduler's, not the neighbours').
CPU_BOUND = "nice -n -15 sh -c 'i=0; while [ $i -lt 2000000 ]; do i=$((i+1)); done'"


@pytest.fixture
def setup():
    why = _can_emulate()
    if why:
        pytest.skip(why)
    cpus = sorted(os.sched_getaffinity(0))
    return lambda quantum=0.05: prepare(str(cpus[0]), str(cpus[1]), "cgroup", 0.5, quantum)


def test_rr_two_cpu_bound_programs_finish_alike(setup):
    # short RR periods: each program meets the machine's other load on both CPUs alike. The
    # other load's bursts land on one program or the other at random: their difference grows
    # as the square root of the run while the run grows linearly, so the programs run nine
    # times CPU_BOUND's work (at 2M turns a loaded 2-CPU machine split them by 10.6%, at 6M
    # by 10.2% in a full test run beside stress-ng --cpu 2; without the swaps one would run at
    # the small CPU's half speed throughout, about 2x the other's slowdown)
    long = CPU_BOUND.replace("2000000", "18000000")
    res = enforce([long, long], "rr", setup(0.005), period=0.01)
    sd = [p.slowdown for p in res.programs]
    assert max(sd) / min(sd) < 1.25, sd
    # both had their turns on the big CPU (measured where they ran)
    assert all(0.2 < p.big_share < 0.9 for p in res.programs)
    assert res.migrations >= 4 and "EMULATED AMP" in res.emulation


def test_hsp_gives_the_big_cpu_to_the_declared_high_sf(setup):
    res = enforce([CPU_BOUND, CPU_BOUND], "hsp", setup(), sfs=[1.2, 3.0], alone=False)
    low, high = res.programs
    # where each ran, sampled every quantum (the CPU it last ran on): the big CPU for the high SF
    assert high.big_share > 0.9
    assert low.big_share < 0.5            # on the small CPU until the other one ended
    # (which one ends first is not asserted: on this VM the host's share of each vCPU varies)


def test_a_progress_file_is_read(setup, tmp_path):
    f = tmp_path / "progress"
    prog = (f"sh -c 'i=0; while [ $i -lt 200000 ]; do i=$((i+1)); "
            f"if [ $((i % 20000)) -eq 0 ]; then echo $i > {f}; fi; done'")
    res = enforce([prog], "acfs", setup(0.02), alone=False, progress_files=[str(f)])
    assert res.programs[0].progress == 200000
    assert "progress files" in res.progress_source


def test_the_small_cpu_is_slowed(setup, tmp_path):
    pol = tmp_path / "small.py"
    pol.write_text("import numpy as np\nfrom corecast.sched import Policy\n"
                   "class Small(Policy):\n    period = None\n    def decide(self, v):\n"
                   "        S = np.zeros((v.threads, v.types)); S[v.runnable, 1] = 1.0; return S\n")
    res = enforce([CPU_BOUND], f"{pol}:Small", setup(), alone=False)
    p = res.programs[0]
    assert p.big_share < 0.1              # where it ran before the first decision pinned it
    assert p.cpu_s / p.wall_s < 0.5 + 0.08        # the 50% quota caps it (other load only lowers it)


def test_the_small_cgroup_weighs_what_its_threads_would(tmp_path):
    """cgroup v1: the small CPUs' cgroup competes with the machine's other work with the weight
    its threads have at their nice values (by default a cgroup weighs one nice-0 task: a program
    at nice -15 lost to any neighbour while it was on a small CPU and not on a big one)."""
    mount = tmp_path / "cpu"
    mount.mkdir()
    p = subprocess.Popen(["nice", "-n", "5", "sleep", "30"])
    q = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while os.getpriority(os.PRIO_PROCESS, p.pid) != 5 and time.monotonic() < deadline:
            pass                                          # nice has set its priority and exec'd sleep
        emu = E.CgroupV1(mount, [1], 0.5)
        small = emu.base / "small"
        emu.place(p.pid, True)
        assert (small / "cpu.shares").read_text() == str(E.nice_weight(p.pid)) == str(round(1024 / 1.25 ** 5))
        emu.place(q.pid, True)
        assert int((small / "cpu.shares").read_text()) == round(1024 / 1.25 ** 5) + 1024
        assert (emu.base / "cpu.shares").read_text() == (small / "cpu.shares").read_text()
        emu.place(p.pid, False)
        emu.place(q.pid, False)
        assert (small / "cpu.shares").read_text() == "2"           # empty: the least weight
        emu.close()
    finally:
        p.kill()
        q.kill()
        p.wait()
        q.wait()


# ---------------------------------------------------------------- a cgroup an earlier run left
def _emulation_parent() -> Path:
    """Where this machine's cgroup emulation makes its cgroups (v1: this process's own cgroup)."""
    kind, mnt = E.cgroup_mount()
    return E._own_cgroup(mnt) if kind == "v1" else mnt


def test_sweep_removes_a_dead_runs_empty_cgroup_and_never_a_live_ones():
    """On the machine's real cgroup tree: `corecast-sched-PID` of a pid that is there is left,
    of one that is gone is removed (with its `small` child, a quota set in it)."""
    why = _can_emulate()
    if why:
        pytest.skip(why)
    parent = _emulation_parent()
    live = subprocess.Popen(["sleep", "300"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    made = [parent / f"corecast-sched-{live.pid}", parent / f"corecast-sched-{dead.pid}"]
    try:
        for d in made:
            (d / "small").mkdir(parents=True)
        E.sweep(parent)
        assert made[0].exists() and not made[1].exists()
        live.kill()
        live.wait()
        E.sweep(parent)
        assert not made[0].exists()
    finally:
        live.kill()
        for d in made:
            for sub in (d / "small", d):
                try:
                    sub.rmdir()
                except OSError:
                    pass


def _children(pid: int) -> dict[int, str]:
    out = {}
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            for c in (t / "children").read_text().split():
                out[int(c)] = Path(f"/proc/{c}/comm").read_text().strip()
        except OSError:
            pass
    return out


def _threads_in(cgroup: Path) -> list[str]:
    f = cgroup / "tasks" if (cgroup / "tasks").exists() else cgroup / "cgroup.threads"
    return f.read_text().split()


def test_a_cgroup_left_by_a_run_killed_with_its_sentinel_is_removed_by_the_next_run():
    """`pkill -9 -f corecast` kills corecast and its sentinel at once: the emulation's cgroup
    `corecast-sched-PID` stayed (its programs died with corecast, the cgroup was left empty,
    its quota set), and no later run removed it. The next run with a cgroup emulation removes it
    and says so."""
    why = _can_emulate()
    if why:
        pytest.skip(why)
    cpus = sorted(os.sched_getaffinity(0))
    spin = "sh -c 'while :; do :; done'"
    args = [sys.executable, "-m", "corecast", "sched", "run", "--policy", "rr", "--big", str(cpus[0]),
            "--small", str(cpus[1]), "--emulate", "cgroup", "--no-alone", "--"]
    first = subprocess.Popen([*args, spin, spin], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             start_new_session=True)
    left = _emulation_parent() / f"corecast-sched-{first.pid}"
    try:
        assert _wait_for(lambda: (left / "small").exists() and "corecast-sentin" in _children(first.pid).values())
        sentinel = next(c for c, comm in _children(first.pid).items() if comm == "corecast-sentin")
        os.kill(sentinel, signal.SIGKILL)
        first.kill()
        first.wait()
        assert _wait_for(lambda: not _threads_in(left / "small") and not _threads_in(left))   # its programs are gone
        assert left.exists()
        r = subprocess.run([*args, "true", "true"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert not left.exists()
        assert f"removed {left}, the cgroup an earlier run (pid {first.pid}) left when it was killed" in r.stderr
    finally:
        if first.poll() is None:
            first.kill()
        for sub in (left / "small", left):
            try:
                sub.rmdir()
            except OSError:
                pass
