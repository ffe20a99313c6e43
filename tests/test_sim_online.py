"""`corecast sim --online` and `sim mrc --online`: a program simulated as it runs, through the QEMU
plugin's shared-memory ring, against capture-then-simulate; the decoding done as instructions
turn up against the pass after the run; nothing left behind when corecast is killed."""
from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from corecast.native import native_path

pytestmark = pytest.mark.slow

if shutil.which("qemu-x86_64") is None or os.uname().machine != "x86_64":
    pytest.skip("needs qemu-x86_64 on x86-64 (setup/debian-packages.txt)", allow_module_level=True)

ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}


def cc(*args, timeout=600, **kw):
    return subprocess.run([sys.executable, "-m", "corecast", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **ENV}, **kw)


def counts(doc: dict) -> dict:
    """A result without its trace's description (path, source): every count."""
    return {k: v for k, v in doc.items() if k != "trace"}


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    d = tmp_path_factory.mktemp("online")
    rows = [f"{i}\n" for i in range(3000)]
    random.Random(5).shuffle(rows)
    (d / "in.txt").write_text("".join(rows))
    return d / "in.txt"


def test_online_counts_are_those_of_its_trace_simulated_after_threads_included(tmp_path):
    """The bundled lock benchmark, three threads on two simulated cores with a full machine
    (caches, TLBs, branch predictor, issue model; decoded as it runs): `sim --online` with
    --save-trace, then `sim` of that trace: every count the same (a threaded run interleaves
    differently each time, so the one run's own trace is the capture to compare with); the
    trace is compressed, under a fifth of 16 bytes a record."""
    prog = native_path("corecast-lockbench")
    trace, res = tmp_path / "lb.cctrace", tmp_path / "online.json"
    r = cc("sim", "--online", "--machine", "penryn-l5420", "--cores", "2", "--json", "-o", res,
           "--save-trace", trace, "--", prog, "-t", "3", "-n", "1500")
    assert r.returncode == 0, r.stderr
    online = json.loads(r.stdout)
    assert json.loads(res.read_text()) == online
    assert "ops: " in r.stderr                    # the program's output went to stderr, not into the JSON
    after = cc("sim", trace, "--machine", "penryn-l5420", "--cores", "2", "--json")
    assert after.returncode == 0, after.stderr
    offline = json.loads(after.stdout)
    assert counts(online) == counts(offline)
    assert online["trace"]["threads"] == offline["trace"]["threads"] == 4 and online["trace"]["path"] is None
    assert all(c["instructions"] > 100_000 for c in online["per_core"])
    assert online["branch"]["branches"] > 0 and online["issue"]["uops"] > 0
    assert trace.stat().st_size * 5 < 16 * offline["trace"]["records"]


def test_online_equals_capture_then_simulate_of_a_deterministic_program(tmp_path, lines):
    """coreutils' sort runs the same instructions at the same addresses every time under QEMU:
    `sim capture` then `sim TRACE` in one run, `sim --online` in another, the same counts; and
    `sim mrc --online` the same curve as `sim mrc TRACE`."""
    sort = shutil.which("sort")
    trace = tmp_path / "s.cctrace"
    r = cc("sim", "capture", "-o", trace, "--", sort, "-o", tmp_path / "out1", lines)
    assert r.returncode == 0, r.stderr
    off = cc("sim", trace, "--machine", "penryn-l5420", "--json")
    on = cc("sim", "--online", "--machine", "penryn-l5420", "--json", "--", sort, "-o", tmp_path / "out2", lines)
    assert off.returncode == 0 and on.returncode == 0, (off.stderr, on.stderr)
    assert counts(json.loads(on.stdout)) == counts(json.loads(off.stdout))
    assert (tmp_path / "out1").read_text() == (tmp_path / "out2").read_text()
    m_off = cc("sim", "mrc", trace, "--sizes", "4KiB,64KiB,1MiB", "--json")
    m_on = cc("sim", "mrc", "--online", "--sizes", "4KiB,64KiB,1MiB", "--json", "--", sort, "-o",
              tmp_path / "out3", lines)
    assert m_off.returncode == 0 and m_on.returncode == 0, (m_off.stderr, m_on.stderr)
    a, b = json.loads(m_off.stdout)["curves"][0], json.loads(m_on.stdout)["curves"][0]
    assert a["misses"] == b["misses"] and a["accesses"] == b["accesses"] > 1_000_000


def test_decoding_as_instructions_turn_up_equals_the_pass_after_the_run(lines):
    """The records of a run without decoding, annotated the way capture did before it was
    online (every executed instruction known, then objdump and the native pass) and the way
    the online run does (instructions looked up as they turn up, in slices): the same records."""
    from corecast.sim import native as N
    from corecast.sim import x86
    from corecast.sim.online import OnlineAnnotator, OnlineRun
    with OnlineRun([shutil.which("sort"), str(lines)], annotate=False, env=ENV, stdout=subprocess.DEVNULL) as run:
        raw = np.concatenate([r.copy() for r in run.records()])
        maps = run._saved_maps()
    objs = run.info["objects"]
    assert {os.path.basename(o.path) for o in objs} >= {"sort", "libc.so.6"}
    seen = np.unique(raw["addr"][raw["kind"] == N.KIND_FETCH])
    after = x86.Annotator(x86.build_annotation(objs, seen)).run(raw, final=True)
    ann = OnlineAnnotator(lambda: maps, (run.qemu, run.plugin))
    online = np.concatenate([ann.run(raw[i:i + 40_000]) for i in range(0, len(raw), 40_000)])
    assert len(after) > 2 * len(raw) and np.array_equal(after, online)
    found, missing = ann.counts()
    assert found == len(seen) or found + missing == int(np.count_nonzero(raw["kind"] == N.KIND_FETCH))


def test_killing_corecast_leaves_no_program_and_no_file(tmp_path):
    """SIGKILL to corecast while it simulates online: QEMU (and the program under it) die with
    it (the plugin's parent-death signal), and the ring was never a file."""
    shm_before = set(os.listdir("/dev/shm"))
    p = subprocess.Popen([sys.executable, "-m", "corecast", "sim", "--online", "--machine", "penryn-l5420", "--",
                          "/bin/sh", "-c", "i=0; while [ $i -lt 100000000 ]; do i=$((i+1)); done"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, **ENV})
    qemu = None
    end = time.monotonic() + 120
    while qemu is None and time.monotonic() < end:
        out = subprocess.run(["pgrep", "-f", "^/usr/bin/qemu-x86_64 -plugin .*ring="], capture_output=True,
                             text=True).stdout         # QEMU itself, under corecast-launch
        qemu = int(out.split()[0]) if out.split() else None
        time.sleep(0.1)
    assert qemu is not None, "qemu never started"
    time.sleep(1.0)                                   # running, the ring filling
    p.send_signal(signal.SIGKILL)
    p.wait()
    end = time.monotonic() + 20
    while os.path.exists(f"/proc/{qemu}") and time.monotonic() < end:
        st = open(f"/proc/{qemu}/stat").read().split(")")[-1].split()[0] if os.path.exists(f"/proc/{qemu}") else "X"
        if st == "Z":                                 # gone, waiting for its reaper
            break
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{qemu}") or open(f"/proc/{qemu}/stat").read().split(")")[-1].split()[0] == "Z"
    assert not {n for n in set(os.listdir("/dev/shm")) - shm_before if "ring" in n or "corecast-maps" in n}


def _alive_with(word: str) -> list[int]:
    """Processes (not zombies) whose command line starts with `word` (corecast's, the launcher's
    and QEMU's hold the whole script)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
            state = open(f"/proc/{d}/stat").read().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if cmd.startswith(word) and state != "Z":
            out.append(int(d))
    return out


@pytest.mark.parametrize("how", ["killed", "ends"])
def test_what_the_program_started_in_the_background_does_not_outlive_the_simulation(how):
    """QEMU runs under corecast-launch: what the program leaves running in the background is
    killed when the program ends, and when corecast is killed (SIGKILL) while it runs. (QEMU had
    the plugin's parent-death signal, but a child the program started outlived both.)"""
    tag = "61.4242" if how == "killed" else "61.4243"
    script = f"/bin/sleep {tag} & /bin/sleep {tag} & " + ("/bin/sleep 60" if how == "killed" else "true")
    p = subprocess.Popen([sys.executable, "-m", "corecast", "sim", "--online", "--machine", "penryn-l5420", "--",
                          "/bin/sh", "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env={**os.environ, **ENV})
    try:
        if how == "killed":
            end = time.monotonic() + 120
            while len(_alive_with(f"/bin/sleep {tag}")) < 2 and time.monotonic() < end:
                time.sleep(0.1)
            assert len(_alive_with(f"/bin/sleep {tag}")) == 2, "the background sleeps never started"
            p.send_signal(signal.SIGKILL)
        assert p.wait(timeout=120) in (-signal.SIGKILL, 0)
        end = time.monotonic() + 20
        while _alive_with(f"/bin/sleep {tag}") and time.monotonic() < end:
            time.sleep(0.1)
        assert _alive_with(f"/bin/sleep {tag}") == []
    finally:
        for pid in _alive_with(f"/bin/sleep {tag}"):
            os.kill(pid, signal.SIGKILL)


def test_online_mistakes_are_one_line(tmp_path):
    r = cc("sim", "--online", "--", "true")
    assert r.returncode == 2 and "--machine is required" in r.stderr and "Traceback" not in r.stderr
    r = cc("sim", "--online", "--machine", "penryn-l5420", "--", tmp_path / "nope")
    assert r.returncode == 2 and "no such program" in r.stderr
    r = cc("sim", "--online", "--machine", "penryn-l5420")
    assert r.returncode == 2 and "no program given" in r.stderr
    r = cc("sim", "--online", "--machine", "penryn-l5420", "--split", "chunks", "--", "true")
    assert r.returncode == 2 and "invalid choice: 'chunks'" in r.stderr
    r = cc("sim", "mrc", "--online")
    assert r.returncode == 2 and "no program given" in r.stderr


def test_reader_is_woken_once_a_read_not_at_every_block(tmp_path):
    """corecast waits for a whole read of the ring (2 MiB) and the plugin wakes it once that is
    there, not at each of its 128 KiB blocks (it slept and woke about 15 times a read, 0.15 s of
    CPU for sort's 87 M records): at most about one sleep a read, and reads of whole size."""
    import resource
    from corecast.sim.online import TAKE_BYTES, OnlineRun
    rows = [f"{i}\n" for i in range(20_000)]
    random.Random(6).shuffle(rows)
    (tmp_path / "in.txt").write_text("".join(rows))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
    reads, full = 0, 0
    with OnlineRun(["/usr/bin/sort", str(tmp_path / "in.txt")], annotate=False, env=ENV, stdout=subprocess.DEVNULL) as run:
        for r in run.records():
            reads += 1
            full += r.nbytes == TAKE_BYTES
    sleeps = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before
    assert reads > 50 and full >= reads - 5                 # whole reads, but for the end and timeouts
    assert sleeps <= 2 * reads + 50, (sleeps, reads)
