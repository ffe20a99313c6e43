"""Nothing left behind (issue 25): every command that starts a program -- `stat -- PROG`,
`sched run`, `measure` -- leaves no process, no cgroup and no temporary file, whether it ends
normally, on an error, or by SIGTERM, SIGINT or SIGKILL at any moment.

The kills at random moments use scripts/leftovers.py (the proof's 100-kill loop), 10 per
command here. Each trial's processes carry a marker in their environment, and its temporary
folder is private, so other tests running at the same time are never counted.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corecast.collect import procs
from corecast.native import native_path

ROOT = Path(__file__).resolve().parent.parent


def _leftovers():
    spec = importlib.util.spec_from_file_location("corecast_leftovers_script", ROOT / "scripts" / "leftovers.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod                 # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


L = _leftovers()


def _skip_unless_possible(kind: str) -> None:
    if kind == "sched" and L.sched_possible():
        pytest.skip(f"sched run --emulate cgroup {L.sched_possible()}")


# ---------------------------------------------------------------- SIGKILL at random moments
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["stat", "sched", "measure"])
def test_sigkill_at_random_moments_leaves_no_process_cgroup_or_file(kind, tmp_path):
    """SIGKILL of stat left the program, its child and grandchild running; of sched run, all
    three pinned to a CPU and the cgroup corecast-sched-PID with its quota; of measure, a
    /tmp/corecast-run-* folder every time (and once in 32 a corecast-launch blocked forever)."""
    _skip_unless_possible(kind)
    rng = random.Random(25)
    left = [L.trial(kind, rng.uniform(0.0, 1.5), signal.SIGKILL, tmp_path) for _ in range(10)]
    assert [str(x) for x in left if x] == []


@pytest.mark.parametrize("kind", ["stat", "sched", "measure"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_and_sigint_leave_nothing(kind, sig, tmp_path):
    """SIGTERM and SIGINT of `stat -- PROG` left the program's child and grandchild running."""
    _skip_unless_possible(kind)
    left = L.trial(kind, 1.2, sig, tmp_path)
    assert not left, str(left)


# ---------------------------------------------------------------- corecast-launch's start
def _marked_children(token: str, wait_s: float) -> list[int]:
    deadline = time.monotonic() + wait_s
    while True:
        found = L.marked(token)
        if not found or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["corecast-gone", "supervisor-killed"])
def test_launcher_child_never_outlives_a_supervisor_that_dies_at_its_start(how):
    """One SIGKILL of measure in 32 left a corecast-launch child blocked forever on its start
    pipe (parent 1): the supervisor died (SIGPIPE on its first report, corecast being gone)
    before the child had asked for its parent-death signal, and the child held the start
    pipe's write end itself. The child is held 300 ms after fork (a test-only delay) so that
    the supervisor always dies inside that window."""
    token = f"launch-{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, CORECAST_LAUNCH_TEST_CHILD_DELAY_MS="300", **{L.MARK: token})
    launcher = str(native_path("corecast-launch"))
    go_r, go_w = os.pipe()
    rep_r, rep_w = os.pipe()
    os.set_inheritable(go_r, True)
    os.set_inheritable(rep_w, True)
    sup = os.posix_spawn(launcher, [launcher, "--parent", str(os.getpid()), str(go_r), str(rep_w), "-", "0",
                                    "1", "--", "sleep", "60"], env,
                         setsigdef=[signal.SIGPIPE, signal.SIGINT, signal.SIGTERM], setsigmask=[])
    os.close(go_r)
    os.close(rep_w)
    try:
        if how == "corecast-gone":
            os.close(rep_r)              # nobody reads its report, nobody will start the run
            os.close(go_w)
        else:
            line = os.read(rep_r, 100)
            assert line.startswith(b"pid ")
            os.kill(sup, signal.SIGKILL)
        os.waitpid(sup, 0)
        assert _marked_children(token, 5.0) == []
    finally:
        for fd in (rep_r, go_w):
            try:
                os.close(fd)
            except OSError:
                pass
        for pid in L.marked(token):
            os.kill(pid, signal.SIGKILL)


def test_launcher_refuses_to_start_for_a_parent_that_is_not_its_own():
    """--parent PID: a supervisor whose parent is not PID (corecast died before it asked for
    its parent-death signal; it was reparented) starts nothing."""
    launcher = str(native_path("corecast-launch"))
    r = subprocess.run([launcher, "--parent", "1", "0", "1", "-", "0", "1", "--", "true"], capture_output=True)
    assert r.returncode == 125


# ---------------------------------------------------------------- the sentinel
def _sentinel_test(tmp_path: Path):
    """A fresh sentinel for this test (ended, and everything it cleans removed, by the caller)."""
    procs.close_sentinel()
    return procs.sentinel()


def test_sentinel_removes_what_it_was_told_when_corecast_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    _sentinel_test(tmp_path)
    d = procs.temp_dir("corecast-t-")
    (d / "sub").mkdir()
    (d / "sub" / "f").write_text("x")
    f = procs.temp_file("corecast-t-", ".jsonl")
    kept = procs.temp_dir("corecast-t-")
    procs.remove(kept)                   # removed by corecast itself: forgotten
    kept.mkdir()                         # the same name made again is not the sentinel's
    assert d.is_dir() and f.is_file()
    assert oct(d.stat().st_mode & 0o777) == "0o700" and oct(f.stat().st_mode & 0o777) == "0o600"
    procs.close_sentinel()               # as when corecast exits (or dies: the pipe closes)
    assert not d.exists() and not f.exists() and kept.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_sentinel_never_follows_a_planted_link_nor_removes_another_users_folder(tmp_path):
    s = _sentinel_test(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "precious").write_text("x")
    link = tmp_path / "corecast-run-link"
    link.symlink_to(victim)
    s.tell("dir", link)
    other = tmp_path / "corecast-run-other"
    other.mkdir()
    (other / "theirs").write_text("x")
    os.chown(other, 65534, 65534)
    s.tell("dir", other)
    inner = tmp_path / "corecast-run-mine"
    inner.mkdir()
    (inner / "link").symlink_to(victim)          # a link inside a folder is removed, not followed
    s.tell("dir", inner)
    procs.close_sentinel()
    assert (victim / "precious").exists()
    assert (other / "theirs").exists()
    assert not inner.exists()


def _v2_mount() -> Path | None:
    for m in L.cgroup_mounts():
        if (m / "cgroup.procs").exists() and (m / "cgroup.subtree_control").exists():
            return m
    return None


@pytest.mark.skipif(os.geteuid() != 0 or _v2_mount() is None, reason="needs root and a cgroup v2 hierarchy")
def test_sentinel_kills_what_is_left_in_a_cgroup_and_removes_it(tmp_path):
    s = _sentinel_test(tmp_path)
    cg = _v2_mount() / f"corecast-test-leftovers-{os.getpid()}"
    s.tell("cgroup", cg)
    cg.mkdir()
    (cg / "child").mkdir()
    p = subprocess.Popen(["sleep", "60"])
    try:
        (cg / "child" / "cgroup.procs").write_text(str(p.pid))
        # a folder that looks like a cgroup but is not one: what it lists is never killed
        fake = tmp_path / "fake"
        fake.mkdir()
        q = subprocess.Popen(["sleep", "60"])
        (fake / "cgroup.procs").write_text(str(q.pid))
        s.tell("cgroup", fake)
        procs.close_sentinel()
        assert p.wait(timeout=10) == -signal.SIGKILL
        assert not cg.exists()
        assert q.poll() is None
    finally:
        for x in (p, locals().get("q")):
            if x is not None and x.poll() is None:
                x.kill()
                x.wait()
        for d in (cg / "child", cg):
            if d.exists():
                d.rmdir()


# ---------------------------------------------------------------- sched run's own errors
def test_sched_run_removes_its_cgroup_after_its_own_error(cli):
    """An exit-2 error after the emulation was set up (here: a command that cannot be read)
    left corecast-sched-PID with its CPU quota."""
    _skip_unless_possible("sched")
    cpus = sorted(os.sched_getaffinity(0))
    r = cli("sched", "run", "--policy", "rr", "--big", cpus[0], "--small", cpus[1], "--emulate", "cgroup",
            "--", "sh -c 'unterminated")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert L.sched_cgroups(os.getpid()) == []


def test_sched_run_refuses_a_progress_file_it_cannot_have(cli, tmp_path):
    """`sched run --progress-file /nonexistent/p` was ignored in silence."""
    for bad, why in ((tmp_path / "no" / "p", "does not exist"), (tmp_path, "a folder")):
        r = cli("sched", "run", "--policy", "rr", "--emulate", "none", "--progress-file", bad, "--", "true")
        assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and why in r.err, r.err
        assert "--progress-file" in r.err


# ---------------------------------------------------------------- measure --resume
def test_resume_refuses_a_campaign_whose_metadata_and_settings_disagree(cli, tmp_path):
    """A tampered campaign showed its metadata's command and ran its settings' command."""
    out = tmp_path / "t.db"
    r = cli("measure", "-q", "--cores", "1", "--reps", "2", "--warmup", "0", "--no-shim", "-o", out, "--",
            "sh", "-c", "exit 0")
    assert r.code == 0, r.err
    con = sqlite3.connect(out)
    con.execute("DELETE FROM run_values WHERE slot = 1")
    con.execute("DELETE FROM runs WHERE slot = 1")
    con.execute("UPDATE meta SET value = ? WHERE key = 'command'", (json.dumps(["echo", "harmless"]),))
    con.commit()
    con.close()
    r = cli("measure", "-q", "--resume", "-o", out)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1, r.err
    assert "disagree" in r.err and "echo harmless" in r.err and "sh -c exit 0" in r.err


def test_resume_runs_no_command_from_a_campaign_another_user_could_have_written(cli, tmp_path):
    """--resume runs the command (and environment) a campaign records: root resuming a file
    another user owns, or one others may write, ran whatever they put in it."""
    out = tmp_path / "t.db"
    marker = tmp_path / "ran"
    r = cli("measure", "-q", "--cores", "1", "--reps", "2", "--warmup", "0", "--no-shim", "-o", out, "--",
            "sh", "-c", f"echo x >> {marker}")
    assert r.code == 0, r.err
    con = sqlite3.connect(out)
    con.execute("DELETE FROM run_values WHERE slot = 1")
    con.execute("DELETE FROM runs WHERE slot = 1")
    con.commit()
    con.close()
    before = marker.read_text()
    os.chown(out, 4242, 4242)                       # another user's file
    r = cli("measure", "-q", "--resume", "-o", out)
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1 and "another user (uid 4242)" in r.err, r.err
    os.chown(out, os.geteuid(), os.getegid())
    out.chmod(0o664)                                # the group may write it
    r = cli("measure", "-q", "--resume", "-o", out)
    assert r.code == 2 and "its group may write" in r.err and "chmod go-w" in r.err, r.err
    assert marker.read_text() == before             # nothing was run
    out.chmod(0o644)
    r = cli("measure", "-q", "--resume", "-o", out)
    assert r.code == 0, r.err
    assert marker.read_text().count("x") == before.count("x") + 1


def test_carrying_finds_the_marked_processes_and_only_those():
    token = f"{os.getpid()}-{random.getrandbits(32):x}"
    env = dict(os.environ, CORECAST_CARRY_TEST=token)
    marked = subprocess.Popen(["sleep", "30"], env=env)
    # a child that left the session keeps its environment, and with it the marker
    away = subprocess.Popen(["setsid", "sleep", "30"], env=env)
    other = subprocess.Popen(["sleep", "30"], env=dict(os.environ, CORECAST_CARRY_TEST=token + "x"))
    try:
        time.sleep(0.2)
        found = set(procs.carrying("CORECAST_CARRY_TEST", token))
        assert marked.pid in found and other.pid not in found and os.getpid() not in found
        assert any(p != marked.pid for p in found)      # setsid's sleep (setsid may exec in place)
    finally:
        for p in (marked, away, other):
            p.kill()
            p.wait()
    assert procs.carrying("CORECAST_CARRY_TEST", token) == []


# ---------------------------------------------------------------- the tracefs mount
_NS_SCRIPT = r"""
umount /sys/kernel/debug 2>/dev/null; umount /sys/kernel/tracing 2>/dev/null
mounted() { awk '$2 == "/sys/kernel/tracing" || $2 == "/sys/kernel/debug" {found=1} END {exit !found}' /proc/mounts; }
mounted && { echo "cannot unmount tracefs here"; exit 90; }
"$@"
echo "rc $?"
i=0
while mounted && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
mounted && echo LEFT MOUNTED
exit 0
"""


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/sys/kernel/tracing").is_dir() or not shutil.which("unshare"),
                    reason="needs root, /sys/kernel/tracing and unshare (a private mount namespace)")
@pytest.mark.parametrize("how", ["events", "sigkill"])
def test_tracefs_mounted_for_tracepoints_is_unmounted_however_corecast_ends(how):
    """`corecast events` (and a tracepoint counter) mounted tracefs at /sys/kernel/tracing when it
    was not mounted, and left it mounted on every exit. Run in a private mount namespace, so
    the machine's own mounts are never touched."""
    if how == "events":
        cmd = [sys.executable, "-m", "corecast", "events", "--format", "json"]
    else:                                  # corecast killed while its mount is there
        cmd = [sys.executable, "-c", "import os, signal\nfrom corecast.collect.events import tracefs_dir\n"
               "print('tracefs', tracefs_dir(), flush=True)\nos.kill(os.getpid(), signal.SIGKILL)"]
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", _NS_SCRIPT, "sh", *cmd],
                       capture_output=True, text=True, timeout=120)
    if "cannot unmount tracefs here" in r.stdout or "unshare: " in r.stderr:
        pytest.skip(f"no private mount namespace with tracefs unmounted here: {r.stdout}{r.stderr}")
    if how == "events":
        assert "rc 0" in r.stdout, r.stderr
        doc = json.loads(r.stdout[:r.stdout.rindex("rc 0")])
        assert doc["tracefs"] == "/sys/kernel/tracing"          # it was mounted, and used
    else:
        assert "tracefs /sys/kernel/tracing" in r.stdout and "rc 137" in r.stdout, r.stdout + r.stderr
    assert "LEFT MOUNTED" not in r.stdout


# ---------------------------------------------------------------- sim capture's valgrind
def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")     # utime + stime


def _kill_left(p: subprocess.Popen, token: str) -> None:
    """A test's end, however it ends: corecast and every process it marked killed."""
    if p.poll() is None:
        p.kill()
        p.wait()
    for q in L.marked(token):
        os.kill(q, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind (setup/debian-packages.txt)")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_a_lackey_capture_ended_early_leaves_no_valgrind_fifo(sig, tmp_path):
    """`sim capture --backend lackey` ran valgrind with its gdbserver on (valgrind's default),
    which makes vgdb-pipe-* FIFOs and a file in $TMPDIR at its start; a valgrind killed by
    corecast-launch (corecast SIGKILLed) or by the capture's own end (Ctrl-C) left them there."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    env = dict(os.environ, TMPDIR=str(tmp), **{L.MARK: token})
    p = subprocess.Popen([sys.executable, "-m", "corecast", "sim", "capture", "--backend", "lackey", "--no-annotate",
                          "-o", str(tmp_path / "t.cctrace"), "--", "sh", "-c",
                          "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done"],
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         # a shell that started the tests in the background ignores SIGINT, and
                         # the capture would inherit that: the SIGINT case then never ended it
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 120          # valgrind started and tracing the program
        while time.monotonic() < deadline:
            # valgrind's own process is named after its tool (corecast-launch's line names valgrind too)
            vg = [q for q in L.marked(token) if _comm(q).startswith(("lackey", "valgrind"))]
            if vg and _cpu_seconds(vg[0]) >= 0.5:
                break
            assert p.poll() is None, "the capture ended before valgrind ran"
            time.sleep(0.05)
        else:
            pytest.fail("valgrind never ran for half a second of CPU")
        p.send_signal(sig)
        p.wait(timeout=60)
        deadline = time.monotonic() + 20
        while L.marked(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert L.marked(token) == []
        assert sorted(x.name for x in tmp.iterdir()) == []
    finally:
        _kill_left(p, token)


# ---------------------------------------------------------------- corecast-launch killed on its own
@contextlib.contextmanager
def _supervisor_killed(args: list[str], ready, what: str, env: dict[str, str] | None = None):
    """Run corecast `args` (its processes marked), wait until `ready({pid: comm})`, SIGKILL its
    corecast-launch alone; yield (returncode, stderr, token), then kill whatever is left."""
    token = f"{os.getpid()}-{time.monotonic_ns()}"
    p = subprocess.Popen([sys.executable, "-m", "corecast", *args], env=dict(env or os.environ, **{L.MARK: token}),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = {q: _comm(q) for q in L.marked(token)}
            if ready(found):
                break
            assert p.poll() is None, p.stderr.read()
            time.sleep(0.05)
        else:
            pytest.fail(f"{what} never ran: {found}")
        [launch] = [q for q, name in found.items() if name == "corecast-launch"]
        os.kill(launch, signal.SIGKILL)
        _, err = p.communicate(timeout=60)
        yield p.returncode, err, token
    finally:
        _kill_left(p, token)


def test_a_supervisor_killed_on_its_own_leaves_no_program_of_measure(tmp_path):
    """corecast-launch kills the program's tree as it ends; SIGKILLed by itself (not through
    corecast) it could not: the program's first process went (its parent-death signal), its
    children ran on under init after `measure` had ended with its one-line error."""
    with _supervisor_killed(
            ["measure", "-q", "--no-shim", "--cores", "1", "--reps", "1", "--warmup", "0", "-o", str(tmp_path / "c.db"),
             "--", "sh", "-c", "sleep 60 & sleep 60; wait"],
            lambda found: list(found.values()).count("sleep") == 2, "the program's two sleeps") as (rc, err, token):
        assert rc == 2 and "ended without reporting" in err, err
        deadline = time.monotonic() + 10
        while L.marked(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [f"{q} {L._cmdline(q)}" for q in L.marked(token)] == []


def test_stat_whose_supervisor_is_killed_on_its_own_ends_in_one_line(tmp_path):
    """`stat -- PROG` whose corecast-launch was SIGKILLed on its own ran on for ever, at full CPU
    (its command's status never came, which read as "still running"); it ends with one line."""
    with _supervisor_killed(["stat", "-c", "task_clock", "--", "sleep", "60"],
                            lambda found: "sleep" in found.values(), "the program",
                            env=dict(os.environ, CORECAST_FRONT="python")) as (rc, err, _):
        assert rc == 2 and "ended without reporting" in err and "Traceback" not in err, err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("qemu-x86_64") is None, reason="needs qemu-x86_64 (setup/debian-packages.txt)")
def test_a_qemu_capture_whose_supervisor_is_killed_on_its_own_ends_in_one_line(tmp_path):
    """`sim capture` (QEMU) whose corecast-launch was SIGKILLed on its own waited for ever on
    its ring: QEMU died with the supervisor, and the ring is never marked done."""
    with _supervisor_killed(
            ["sim", "capture", "--backend", "qemu", "--no-annotate", "-o", str(tmp_path / "t.cctrace"), "--",
             "sh", "-c", "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done"],
            lambda found: any(n.startswith("qemu") and _cpu_seconds(q) >= 0.3 for q, n in found.items()), "QEMU") as (rc, err, _):
        assert rc == 2 and "ended without reporting" in err and "Traceback" not in err, err
        assert sorted(x.name for x in tmp_path.iterdir()) == []
