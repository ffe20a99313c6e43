"""The C front end (native/stat/front.c): `corecast stat -c SOFTWARE_EVENTS -- CMD` counted
without Python prints what the Python path prints (the same sections, rows, columns and exit
status; the numbers are another run's), and every other command reaches Python unchanged.

Each test runs the front end as `corecast` from a folder of its own, beside a `python3` that
notes each start (its arguments) in a file and then runs this interpreter: the C path is known
to have counted when no Python started, and a command handed over is seen with its arguments.
CORECAST_FRONT=python makes the same binary hand everything over: the reference run."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NATIVE = ROOT / "src" / "corecast" / "_native"
FRONT = NATIVE / "corecast-front"

pytestmark = pytest.mark.skipif(not FRONT.exists(), reason="the C front end is not built (make setup)")


@pytest.fixture
def front(tmp_path):
    """run(*args, python_only=False, **kw) -> (CompletedProcess, [argv of each Python start])."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "corecast").symlink_to(FRONT)
    starts = tmp_path / "python-starts"
    py = bin_dir / "python3"
    py.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$*\" >> {starts}\nexec {sys.executable} \"$@\"\n")
    py.chmod(0o755)

    def run(*args: str, python_only: bool = False, **kw):
        if starts.exists():
            starts.unlink()
        env = dict(os.environ, PATH=f"{NATIVE}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
        env.pop("CORECAST_FRONT", None)
        if python_only:
            env["CORECAST_FRONT"] = "python"
        kw.setdefault("stdin", subprocess.DEVNULL)
        r = subprocess.run([str(bin_dir / "corecast"), *args], capture_output=True, text=True, env=env,
                           timeout=60, **kw)
        return r, (starts.read_text().splitlines() if starts.exists() else [])

    return run


def shape(text: str) -> list[str]:
    """The lines with every number replaced by N and runs of blanks by one (the names, labels and
    the order of the columns stay; their widths are compared by same_layout)."""
    return [" ".join(re.sub(r"\d+(\.\d+)?", "N", line).split()) for line in text.splitlines()]


def rows(text: str) -> list[tuple[str, str]]:
    """(tid, event label) of each row of [Event counts]."""
    out = []
    inside = False
    for line in text.splitlines():
        if line.startswith("["):
            inside = line == "[Event counts]"
            continue
        f = line.split()
        if inside and f and f[0].isdigit():
            out.append((f[3], f[4]))
    return out


def both(front, *args: str):
    """The C path's run and the Python path's, each checked to be the path it claims."""
    c, c_starts = front(*args)
    p, p_starts = front(*args, python_only=True)
    assert p_starts, "CORECAST_FRONT=python did not hand over"
    return c, c_starts, p


def without_ticks(text: str) -> str:
    """The text less the tick rows of [Event counts] (how many ticks a short command lives to see
    depends on how loaded the machine is: a run 20 ms late has one more)."""
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("["):
            inside = line == "[Event counts]"
        f = line.split()
        if not (inside and len(f) > 4 and f[0].isdigit() and f[4] == "tick"):
            out.append(line)
    return "\n".join(out)


def same_layout(c: str, p: str) -> None:
    """Same lines modulo numbers; a row and a totals line as wide as Python's (fixed columns)."""
    assert shape(c) == shape(p), f"C path:\n{c}\nPython path:\n{p}"
    for a, b in zip(c.splitlines(), p.splitlines()):
        if not a.startswith("note:"):
            assert len(a) == len(b), (a, b)


def test_counts_true_itself_with_python_s_output(front):
    c, c_starts, p = both(front, "stat", "-c", "task_clock", "--", "true")
    assert c_starts == [], c_starts          # no Python: the front end counted
    assert c.returncode == p.returncode == 0
    same_layout(c.stderr, p.stderr)
    assert rows(c.stderr) == [(rows(c.stderr)[0][0], "exit")]
    assert "[Process totals]" in c.stderr and c.stdout == p.stdout == ""


def test_a_threaded_workload_has_a_row_per_thread_as_in_python(front):
    args = ("stat", "--events", "task_clock,context_switches,cpu_migrations,page_faults", "--",
            "corecast-lockbench", "--threads", "3", "--ops", "20000")
    c, c_starts, p = both(front, *args)
    assert c_starts == []
    assert c.returncode == p.returncode == 0
    same_layout(c.stderr, p.stderr)
    labels = [label for _, label in rows(c.stderr)]
    assert labels == ["exit"] * 4, c.stderr          # the main thread and 3 workers, each its exit row
    assert len({tid for tid, _ in rows(c.stderr)}) == 4
    assert "throughput" in c.stdout and "throughput" in p.stdout   # the program's own output, untouched


def test_a_run_past_a_tick_has_tick_rows_and_child_processes(front):
    script = "sleep 1.3 & sleep 0.1; sleep 1.5; wait"
    c, c_starts, p = both(front, "stat", "-c", "page_faults", "--", "sh", "-c", script)
    assert c_starts == []
    assert c.returncode == p.returncode == 0
    cl, pl = [label for _, label in rows(c.stderr)], [label for _, label in rows(p.stderr)]
    assert "tick" in cl and cl.count("exit") == len({tid for tid, _ in rows(c.stderr)}), c.stderr
    # the same tasks: sh and its three sleeps, each with its exit row (the tick rows may differ by timing)
    assert cl.count("exit") == pl.count("exit") == 4, (c.stderr, p.stderr)


@pytest.mark.parametrize("cmd, status, note", [
    (["false"], 1, "'false' exited with status 1"),
    (["sh", "-c", "kill -9 $$"], 137, "'sh' was ended by SIGKILL"),
])
def test_a_failing_command_gives_its_status_and_the_note(front, cmd, status, note):
    c, c_starts, p = both(front, "stat", "-c", "task_clock", "--", *cmd)
    assert c_starts == []
    assert c.returncode == p.returncode == status
    same_layout(c.stderr, p.stderr)
    assert c.stderr.splitlines()[-1] == f"corecast stat: note: {note}"


def test_a_program_that_cannot_run_is_one_line_and_status_2(front, tmp_path):
    script = tmp_path / "not-executable.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    c, c_starts, p = both(front, "stat", "-c", "task_clock", "--", str(script))
    assert c_starts == []
    assert c.returncode == p.returncode == 2
    assert c.stderr == p.stderr == f"corecast stat: error: cannot run '{script}': Permission denied\n"


@pytest.mark.parametrize("args", [
    ["stat", "-c", "no_such_event", "--", "true"],           # unknown event: Python says so
    ["stat", "-c", "task_clock", "--", "no-such-program-xyz"],
    ["stat", "-c", "task_clock"],                              # no command
])
def test_a_mistake_is_handed_to_python_and_ends_in_one_line(front, args):
    c, c_starts, p = both(front, *args)
    assert c_starts == [f"-P -m corecast {' '.join(args)}"]
    assert c.returncode == p.returncode == 2
    assert c.stderr == p.stderr and len(c.stderr.splitlines()) == 1, c.stderr


@pytest.mark.parametrize("args", [
    ["stat", "--threads", "poll", "-c", "task_clock", "--", "true"],   # an option the C path does not take
    ["stat", "-T", "0.02", "-c", "task_clock", "--", "true"],  # ticks that look for records at the ticks only
    ["stat", "-T", "1e-1", "-c", "task_clock", "--", "true"],  # a number spelt otherwise
    ["stat", "-c", "task_clock", "-c", "page_faults", "--", "true"],   # round-robin sets
    ["stat", "--", "true"],                                    # the default set (hardware events)
    ["stat", "-c", "task-clock", "--", "true"],                # perf's spelling
    ["usl", "-h"],
    ["no-such-command"],
])
def test_every_other_command_reaches_python_unchanged(front, args):
    c, c_starts, p = both(front, *args)
    assert c_starts == [f"-P -m corecast {' '.join(args)}"]
    assert c.returncode == p.returncode
    assert shape(c.stdout) == shape(p.stdout)
    assert shape(without_ticks(c.stderr)) == shape(without_ticks(p.stderr)), (c.stderr, p.stderr)


@pytest.mark.parametrize("python", [False, True])
def test_the_command_gets_standard_input_and_output(front, python):
    """Through the C path and through Python (--format csv is handed over)."""
    fmt = ["--format", "csv"] if python else []
    r, starts = front("stat", *fmt, "-c", "task_clock", "--", "cat", input="through cat\n", stdin=None)
    assert bool(starts) == python and r.returncode == 0
    assert r.stdout == "through cat\n"


@pytest.mark.parametrize("opts", [
    ["-A"], ["--totals"],
    ["-T", "0.3"], ["-T0.3"], ["--interval=300ms"], ["--interval-print", "300"], ["-A", "-T", "0.25s"],
])
def test_totals_only_and_intervals_are_counted_as_in_python(front, opts):
    """-A: the totals of the whole tree (threads included) and nothing else; -T: the ticks at
    that interval (sh and the sleep it starts: a tick row each at 0.3 and 0.6 s where the
    interval is 0.3 s, then their exit rows), as Python prints them."""
    if "-A" in opts or "--totals" in opts:
        cmd = ["corecast-lockbench", "--threads", "2", "--ops", "20000"]
    else:
        cmd = ["sh", "-c", "sleep 0.75; true"]
    c, c_starts, p = both(front, "stat", *opts, "-c", "task_clock,page_faults", "--", *cmd)
    assert c_starts == []
    assert c.returncode == p.returncode == 0
    if "-A" in opts or "--totals" in opts:
        same_layout(c.stderr, p.stderr)
        assert c.stderr.splitlines()[0] == "[Event totals]" and len(c.stderr.splitlines()) == 3, c.stderr
        return
    # the ticks a 0.75 s command sees: 0.3 and 0.6 s, and 0.9 s where a loaded machine made it late
    same_layout(without_ticks(c.stderr), without_ticks(p.stderr))
    for err in (c.stderr, p.stderr):
        labels = [label for _, label in rows(err)]
        assert labels[-2:] == ["exit"] * 2 and set(labels[:-2]) == {"tick"}, err
        assert len(labels) - 2 in (4, 6) and labels.count("tick") % 2 == 0, err
    if [lb for _, lb in rows(c.stderr)] == [lb for _, lb in rows(p.stderr)]:
        same_layout(c.stderr, p.stderr)                   # as many ticks: the whole layout too
    ticks = [line.split() for line in c.stderr.splitlines() if line.split()[4:5] == ["tick"]]
    times = sorted({float(f[1]) for f in ticks if f[0].isdigit()})
    # each tick read at or after its deadline (never early), and soon after it
    assert len(times) * 2 == len(ticks) and all(0.3 * k - 1e-3 <= t < 0.3 * k + 0.25 for k, t in enumerate(times, start=1)), times


def test_version_is_python_s(front):
    c, c_starts = front("--version")
    p, _ = front("--version", python_only=True)
    assert c_starts == [] and c.returncode == p.returncode == 0
    assert c.stdout == p.stdout and c.stdout.startswith("corecast ")


def test_regions_the_program_marks_are_printed_as_python_prints_them(front, tmp_path):
    """The program writes its region totals to CORECAST_REGION_OUT (here by hand, in the
    format of corecast_region.h); the [Regions] table comes after the totals in both paths."""
    line = '{"source": "c", "pid": 1, "region": "solve", "calls": 3, "wall_ns": 1000, "task_clock_ns": 900}'
    cmd = ["sh", "-c", f"printf '%s\\n' '{line}' >> \"$CORECAST_REGION_OUT\""]
    c, c_starts, p = both(front, "stat", "-c", "task_clock", "--", *cmd)
    assert c.returncode == p.returncode == 0
    assert c_starts and c_starts[0] == "-P -c import sys"           # Python only to print the regions
    same_layout(c.stderr, p.stderr)
    assert "[Regions]" in c.stderr and "solve" in c.stderr


def test_development_install_links_the_command_to_the_front_end(tmp_path):
    """dev_install.front: bin/corecast becomes a link to _native/corecast-front; pip's script
    there is replaced, not written through (the front end is untouched)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import dev_install
    native, bin_dir = tmp_path / "_native", tmp_path / "bin"
    native.mkdir()
    bin_dir.mkdir()
    (native / "corecast-front").write_bytes(b"\x7fELF front end")
    (bin_dir / "corecast").write_text("#!/usr/bin/python3\nfrom corecast.cli import main\n")
    assert dev_install.front(bin_dir, native) == ["linked bin/corecast to corecast-front"]
    assert os.readlink(bin_dir / "corecast") == str(native / "corecast-front")
    assert (native / "corecast-front").read_bytes() == b"\x7fELF front end"
    assert dev_install.front(bin_dir, native) == []                 # a second run changes nothing
    assert dev_install.front(tmp_path / "bin", tmp_path / "empty") == []   # no front end built: left alone


def test_the_development_environment_s_corecast_is_the_front_end():
    cmd = Path(sys.executable).with_name("corecast")
    if not cmd.is_symlink():
        pytest.skip("not the development install of `make setup`")
    assert Path(os.readlink(cmd)) == FRONT
    r = subprocess.run([str(cmd), "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("corecast ")


@pytest.mark.parametrize("sig, label, note", [
    ("SIGINT", "interrupt", "interrupted"),
    ("SIGTERM", "stop", "stopped by SIGTERM (passed on to the command)"),
])
def test_a_signal_ends_the_run_with_its_rows_and_totals_as_in_python(front, tmp_path, sig, label, note):
    """SIGINT to corecast alone (not the command's group): the last row is labelled
    `interrupt`, and the command, still running, is stopped after its grace; SIGTERM is passed
    on to the command. Both paths, the same lines and status."""
    import signal
    import time
    bin_dir = tmp_path / "bin"
    results = {}
    for mode in ("c", "python"):
        env = dict(os.environ, PATH=f"{NATIVE}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
        env.pop("CORECAST_FRONT", None)
        if mode == "python":
            env["CORECAST_FRONT"] = "python"
        p = subprocess.Popen([str(bin_dir / "corecast"), "stat", "-c", "task_clock", "--", "sleep", "4"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env, start_new_session=True)
        time.sleep(1.5 if mode == "python" else 0.5)       # counting has started (Python starts slower)
        p.send_signal(getattr(signal, sig))
        out, err = p.communicate(timeout=30)
        results[mode] = (p.returncode, err)
    (c_rc, c_err), (p_rc, p_err) = results["c"], results["python"]
    assert c_rc == p_rc, (c_err, p_err)
    # SIGTERM reaches the command too, which may end before the last row is made: `exit` then
    ok = {label, "exit"} if sig == "SIGTERM" else {label}
    assert rows(c_err)[-1][1] in ok and rows(p_err)[-1][1] in ok, (c_err, p_err)
    assert f"note: {note}" in c_err.splitlines() and f"note: {note}" in p_err.splitlines()
    # (the rows' sum against the process total is a race here: the last row is read while the
    # command may still be ending, the totals after; either path may note the difference)
    def totals(err: str) -> list[str]:
        return [s for s in shape(err.split("[Totals]")[1]) if "add up to" not in s]
    assert totals(c_err) == totals(p_err)


def test_a_killed_front_end_leaves_no_process_behind(front, tmp_path):
    """SIGKILL of corecast while it counts: corecast-launch (asked to be told when its parent
    dies) kills the command's tree; no file is left (the regions file is a memfd)."""
    import signal
    import time
    mark = f"{31 + os.getpid() % 1000 / 1000:.3f}"       # a sleep of this length is ours
    bin_dir = tmp_path / "bin"
    env = dict(os.environ, PATH=f"{NATIVE}{os.pathsep}{os.environ.get('PATH', os.defpath)}")
    env.pop("CORECAST_FRONT", None)
    before = set(os.listdir("/tmp"))
    p = subprocess.Popen([str(bin_dir / "corecast"), "stat", "-c", "task_clock", "--", "sh", "-c",
                          f"sleep {mark} & sleep {mark}"], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)

    def ours() -> list[int]:
        found = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    cmd = Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if cmd[:2] == [b"sleep", mark.encode()]:
                    found.append(int(d))
        return found

    deadline = time.monotonic() + 10
    while len(ours()) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(ours()) == 2
    p.send_signal(signal.SIGKILL)
    p.wait(timeout=10)
    deadline = time.monotonic() + 10
    while ours() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ours() == []
    assert not [n for n in set(os.listdir("/tmp")) - before if n.startswith("corecast")]


def test_a_module_planted_in_the_current_folder_is_never_imported(front, tmp_path):
    """`python3 -m corecast` put the current folder first on sys.path: a numpy.py (or a
    corecast/ package) planted where root runs corecast (/tmp, a shared project) ran as root.
    The front end hands over with -P; `python -m corecast` itself drops the folder before it
    imports anything else."""
    work = tmp_path / "shared"
    (work / "corecast").mkdir(parents=True)
    marker = tmp_path / "ran"
    for plant in (work / "numpy.py", work / "corecast" / "__main__.py", work / "corecast" / "__init__.py"):
        plant.write_text(f"open({str(marker)!r}, 'a').write({plant.name!r} + '\\n')\n")
    (work / "d.csv").write_text("cores,time_s\n1,10\n2,6\n4,4\n")
    r, starts = front("info", "d.csv", cwd=work)
    assert r.returncode == 0, r.stderr
    assert starts and all(s.split()[:1] == ["-P"] for s in starts), starts
    (work / "corecast").rename(work / "not-corecast")     # python -m corecast: only numpy.py can be met
    p = subprocess.run([sys.executable, "-m", "corecast", "info", "d.csv"], cwd=work, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert not marker.exists(), marker.read_text()
