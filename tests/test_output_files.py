"""Every output goes through corecast.outputs (issue 25, item 1): a device or a pipe is written in
place and never replaced, a folder, a missing folder and a planted link are refused with one
line, a regular file is replaced by an atomic rename only, and the temporary file never stays.

The devices are private nodes made with os.mknod (the real /dev/null is only written by a few
commands, and its node is checked after them)."""
from __future__ import annotations

import csv
import errno
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import run_corecast

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "data" / "usl" / "specsdm91.csv")
OTHER_UID = 4242                       # the owner of a planted link: not root, not us


def _mknod(path: Path, minor: int) -> Path:
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
    except PermissionError:
        pytest.skip("needs CAP_MKNOD to make a private device node")
    return path


class FifoReader:
    """A thread that reads a FIFO to its end (its open waits for a writer, as `cat` does)."""

    def __init__(self, path: Path):
        self.path, self.data = path, b""
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        with open(self.path, "rb") as fh:
            self.data = fh.read()

    def finish(self) -> bytes:
        self.thread.join(timeout=0.5)
        if self.thread.is_alive():      # nothing opened it for writing: let the reader go
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            os.close(fd)
            self.thread.join(timeout=10)
        return self.data


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("outputs-in")
    from corecast.sim import synth
    from corecast.sim.trace import Trace, write_trace
    write_trace(d / "pp.cctrace", Trace(synth.pingpong(50, 2)))
    (d / "t.din").write_text("0 1000\n1 2000\n2 3000\n")
    import numpy as np
    rng = np.random.default_rng(1)
    lines = ["app,window,sf,big_ipc,big_llc_mpki,small_ipc,small_llc_mpki"]
    for a in range(4):
        for w in range(20):
            ipc, mp = rng.uniform(0.3, 2.5), rng.uniform(0, 30)
            sf = 0.6 + 0.9 * ipc - 0.03 * mp
            lines.append(f"app{a},{w},{sf},{ipc},{mp},{ipc / sf},{mp}")
    (d / "w.csv").write_text("\n".join(lines) + "\n")
    # a spinning child keeps a CPU busy while the meters record: on an idle machine a 0.3 s
    # recording can read cpu_busy 0 throughout, and the plot then notes a panel left out (a
    # second line of stderr that these tests do not expect)
    spin = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 30\n"
                             "while time.time() < end: pass"])
    try:
        r = run_corecast("meters", "-q", "--blackboard", f"outputs-{os.getpid()}-rec", "--meters", "cpu_busy",
                         "--interval", "50ms", "--duration", "0.3", "--record", d / "rec.csv")
    finally:
        spin.kill()
        spin.wait()
    assert r.returncode == 0, r.stderr
    with open(d / "rec.csv") as f:
        busy = [float(row["cpu_busy@node"]) for row in csv.DictReader(f) if row["cpu_busy@node"]]
    assert max(busy) > 0, busy
    return d


# (name, arguments with {out} for the output and {in} for the inputs' folder, the output's extension,
#  how: "cli" in-process, "sub" in a child process)
COMMANDS = [
    ("export", ["export", SPEC, "-o", "{out}"], ".csv", "cli"),
    ("export json", ["export", SPEC, "--format", "json", "-o", "{out}"], ".json", "cli"),
    ("usl plot", ["usl", SPEC, "-q", "--plot", "{out}"], ".png", "cli"),
    ("usl report", ["usl", SPEC, "-q", "--report", "{out}"], ".html", "cli"),
    ("predict plot", ["predict", SPEC, "-q", "--cores", "64", "--method", "usl", "--plot", "{out}"], ".svg", "cli"),
    ("predict report", ["predict", SPEC, "-q", "--cores", "64", "--method", "usl", "--report", "{out}"], ".html",
     "cli"),
    ("sim -o", ["sim", "{in}/pp.cctrace", "-m", "penryn-l5420", "--cores", "2", "--json", "-o", "{out}"], ".json",
     "cli"),
    ("sim gen", ["sim", "gen", "stream", "-n", "1000", "-o", "{out}"], ".cctrace", "cli"),
    ("sim convert", ["sim", "convert", "{in}/t.din", "-o", "{out}"], ".cctrace", "cli"),
    ("sim convert csv", ["sim", "convert", "{in}/pp.cctrace", "--to-csv", "-o", "{out}"], ".csv", "cli"),
    ("sim mrc -o", ["sim", "mrc", "{in}/pp.cctrace", "--json", "-o", "{out}"], ".csv", "cli"),
    ("sim mrc plot", ["sim", "mrc", "{in}/pp.cctrace", "--json", "--plot", "{out}"], ".png", "cli"),
    ("sim capture", ["sim", "capture", "--backend", "lackey", "--no-annotate", "-o", "{out}", "--", "/bin/true"],
     ".cctrace", "valgrind"),
    ("stat -o", ["stat", "-c", "task_clock", "--format", "csv", "-o", "{out}", "--", "true"], ".csv", "cli"),
    ("chase -o", ["chase", "--threads", "1", "--chains", "1", "--size", "1MiB", "--duration", "0.05", "--json",
                  "-o", "{out}"], ".csv", "cli"),
    ("chase plot", ["chase", "--threads", "1", "--chains", "1", "--size", "1MiB", "--duration", "0.05", "--json",
                    "--plot", "{out}"], ".png", "cli"),
    ("calibrate", ["calibrate", "--no-memory", "--json", "-o", "{out}"], ".json", "cli"),
    ("sched sfmodel", ["sched", "sfmodel", "fit", "{in}/w.csv", "--json", "-o", "{out}"], ".json", "cli"),
    ("sched sim plot", ["sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--policy", "hsp", "--json",
                        "--plot", "{out}"], ".png", "cli"),
    ("sched paper plot", ["sched", "paper", "--figure", "8", "--policies", "hsp", "--json", "--plot", "{out}"],
     ".png", "cli"),
    ("meters record", ["meters", "--blackboard", "outputs-{pid}-{n}", "--meters", "cpu_busy", "--interval", "50ms",
                       "--duration", "0.3", "--record", "{out}"], ".csv", "sub"),
    ("meters replay plot", ["meters", "replay", "{in}/rec.csv", "--json", "--plot", "{out}"], ".png", "cli"),
]
_count = iter(range(10**6))


def _run(cli, how, args, out, inputs):
    if how == "valgrind" and not _which("valgrind"):
        pytest.skip("needs valgrind")
    argv = [a.replace("{out}", str(out)).replace("{in}", str(inputs)).replace("{pid}", str(os.getpid()))
            .replace("{n}", str(next(_count))) for a in args]
    if how == "sub":
        r = run_corecast(*argv, timeout=120)
        return r.returncode, r.stdout, r.stderr
    r = cli(*argv)
    return r.code, r.out, r.err


def _which(name):
    import shutil
    return shutil.which(name)


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err
    return lines[0]


IDS = [c[0] for c in COMMANDS]


@pytest.mark.parametrize("name, args, ext, how", COMMANDS, ids=IDS)
def test_a_full_device_is_one_line_and_stays_a_device(cli, tmp_path, inputs, name, args, ext, how):
    dev = _mknod(tmp_path / f"full{ext}", 7)
    before = os.lstat(dev)
    code, _out, err = _run(cli, how, args, dev, inputs)
    assert code == 2, err
    assert "No space left on device" in _one_line(err)
    after = os.lstat(dev)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == [dev.name]       # no temporary file beside it


@pytest.mark.parametrize("name, args, ext, how", COMMANDS, ids=IDS)
def test_a_null_device_is_written_in_place_and_not_announced(cli, tmp_path, inputs, name, args, ext, how):
    dev = _mknod(tmp_path / f"null{ext}", 3)
    before = os.lstat(dev)
    code, _out, err = _run(cli, how, args, dev, inputs)
    assert code == 0, err
    after = os.lstat(dev)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert f"wrote {dev}" not in err                       # nothing was made there
    assert sorted(p.name for p in tmp_path.iterdir()) == [dev.name]       # no sidecar beside a device


@pytest.mark.parametrize("name, args, ext, how", COMMANDS, ids=IDS)
def test_a_fifo_is_written_in_place(cli, tmp_path, inputs, name, args, ext, how):
    fifo = tmp_path / f"pipe{ext}"
    os.mkfifo(fifo)
    reader = FifoReader(fifo)
    code, _out, err = _run(cli, how, args, fifo, inputs)
    data = reader.finish()
    assert code == 0, err
    assert data, "nothing came through the pipe"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    if ext == ".png":
        assert data.startswith(b"\x89PNG")
    elif ext == ".cctrace":
        assert data.startswith(b"CCTRACE1")


@pytest.mark.parametrize("name, args, ext, how", COMMANDS, ids=IDS)
def test_a_folder_a_missing_folder_and_a_planted_link_are_refused(cli, tmp_path, inputs, name, args, ext, how):
    (tmp_path / f"adir{ext}").mkdir()
    code, _out, err = _run(cli, how, args, tmp_path / f"adir{ext}", inputs)
    assert code == 2 and "is a directory" in _one_line(err)

    code, _out, err = _run(cli, how, args, tmp_path / "nowhere" / "deeper" / f"x{ext}", inputs)
    assert code == 2 and "no such folder" in _one_line(err)
    assert not (tmp_path / "nowhere").exists()                     # never created

    shared = tmp_path / "shared"                # a world-writable sticky folder, as /tmp
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.write_text("root's file\n")
    link = shared / f"out{ext}"
    link.symlink_to(victim)
    os.lchown(link, OTHER_UID, OTHER_UID)       # planted by another user
    code, _out, err = _run(cli, how, args, link, inputs)
    assert code == 2 and "owned by another user" in _one_line(err)
    assert victim.read_text() == "root's file\n" and link.is_symlink()
    assert sorted(p.name for p in shared.iterdir()) == [link.name]


def test_measure_refuses_anything_but_a_file(cli, tmp_path):
    """A campaign is an SQLite file: a device or a pipe is refused (and left as it is)."""
    base = ["measure", "--cores", "1", "--reps", "1", "--warmup", "0", "--no-shim", "-o"]
    for dev in (_mknod(tmp_path / "null.db", 3), _mknod(tmp_path / "full.db", 7)):
        r = cli(*base, dev, "--", "true")
        assert r.code == 2 and "not a regular file" in _one_line(r.err)
        assert stat.S_ISCHR(os.lstat(dev).st_mode)
    os.mkfifo(tmp_path / "p.db")
    r = cli(*base, tmp_path / "p.db", "--", "true")
    assert r.code == 2 and "not a regular file" in _one_line(r.err)
    r = cli(*base, tmp_path / "no" / "c.db", "--", "true")
    assert r.code == 2 and "no such folder" in _one_line(r.err) and not (tmp_path / "no").exists()
    r = cli(*base, tmp_path / "c.db", "--", "true")
    assert r.code == 0, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db", "full.db", "null.db", "p.db"]


def _restore_dev_null() -> None:
    """Put /dev/null back (a corecast that replaced it breaks every process on the machine)."""
    st = os.lstat("/dev/null")
    if not (stat.S_ISCHR(st.st_mode) and st.st_rdev == os.makedev(1, 3)):
        os.unlink("/dev/null")
        os.mknod("/dev/null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        os.chmod("/dev/null", 0o666)


def test_the_real_dev_null_stays_a_device():
    before = os.stat("/dev/null")
    try:
        for args in (["export", SPEC, "-o", "/dev/null"], ["sim", "gen", "stream", "-n", "100", "-o", "/dev/null"],
                     ["usl", SPEC, "-q", "--plot", "/dev/null"]):
            r = run_corecast(*args)
            after = os.lstat("/dev/null")
            assert stat.S_ISCHR(after.st_mode) and (after.st_rdev, after.st_ino) == (before.st_rdev, before.st_ino)
            assert r.returncode == 0, r.stderr
            assert "wrote" not in r.stderr
    finally:
        _restore_dev_null()


# ----------------------------------------------------------------------------- the helper itself

def test_a_link_to_a_file_is_refused_and_a_trusted_link_to_a_device_is_followed(tmp_path, capsys):
    from corecast import outputs
    from corecast.errors import UserError
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "l.csv").symlink_to(victim)
    with pytest.raises(UserError, match="is a symbolic link"):
        outputs.write_text(tmp_path / "l.csv", "x\n")
    assert victim.read_text() == "keep\n"
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "nothing")
    with pytest.raises(UserError, match="is a symbolic link"):
        outputs.write_text(tmp_path / "dangling.csv", "x\n")
    assert not (tmp_path / "nothing").exists()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "to-fifo").symlink_to(fifo)     # ours: followed, written in place
    reader = FifoReader(fifo)
    assert outputs.write_text(tmp_path / "to-fifo", "through\n") is False
    assert reader.finish() == b"through\n" and (tmp_path / "to-fifo").is_symlink()
    # a planted link on the way (a folder link in a sticky world-writable folder) is refused too
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (tmp_path / "elsewhere").mkdir()
    (shared / "d").symlink_to(tmp_path / "elsewhere")
    os.lchown(shared / "d", OTHER_UID, OTHER_UID)
    with pytest.raises(UserError, match="owned by another user"):
        outputs.write_text(shared / "d" / "x.csv", "x\n")
    assert list((tmp_path / "elsewhere").iterdir()) == []
    os.lchown(shared / "d", os.geteuid(), os.getegid())     # our own link: followed
    outputs.write_text(shared / "d" / "x.csv", "x\n")
    assert (tmp_path / "elsewhere" / "x.csv").read_text() == "x\n"


def test_a_pipe_another_user_planted_in_a_shared_folder_is_not_written(tmp_path):
    # `mkfifo /tmp/report.json` by another user, who reads it: root's report went into it (the
    # kernel's fs.protected_fifos guards only opens that create); and without a reader the open
    # waited for ever
    from corecast import outputs
    from corecast.errors import UserError
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    fifo = shared / "report.json"
    os.mkfifo(fifo)
    os.chown(fifo, OTHER_UID, OTHER_UID)
    reader = FifoReader(fifo)
    with pytest.raises(UserError, match="named pipe of another user"):
        outputs.write_text(fifo, "SECRET\n")
    assert reader.finish() == b""           # it got nothing of ours
    # through a link of our own, too: what the name leads to is judged
    (tmp_path / "to-it").symlink_to(fifo)
    with pytest.raises(UserError, match="named pipe of another user"):
        outputs.write_text(tmp_path / "to-it", "SECRET\n")
    # our own pipe there is written, as before
    os.chown(fifo, os.geteuid(), os.getegid())
    reader = FifoReader(fifo)
    assert outputs.write_text(fifo, "ours\n") is False
    assert reader.finish() == b"ours\n"


def test_a_writer_killed_mid_file_leaves_no_temporary_file(tmp_path):
    """The content goes to an unnamed file (O_TMPFILE) until it is whole: SIGKILL while a report
    is written left `.NAME.XXXX.tmp` beside it (nothing can clean up after a SIGKILL)."""
    code = ("import os, sys, time\n"
            "from corecast import outputs\n"
            "o = outputs.Output(sys.argv[1])\n"
            "fh = o.open()\n"
            "fh.write('x' * 100000)\n"
            "fh.flush()\n"
            "print('writing', flush=True)\n"
            "time.sleep(60)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "r.json")], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "writing"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    assert list(tmp_path.iterdir()) == []
    # the same finished: only the file, with its content
    from corecast import outputs
    o = outputs.Output(tmp_path / "r.json")
    fh = o.open()
    fh.write("done\n")
    assert list(tmp_path.iterdir()) == []              # nothing named until it is whole
    o.commit()
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"] and (tmp_path / "r.json").read_text() == "done\n"


def test_the_name_is_looked_at_again_before_the_rename(tmp_path):
    """A link planted while the file was written is refused, not replaced or followed."""
    from corecast import outputs
    from corecast.errors import UserError
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    out = outputs.Output(tmp_path / "r.csv")
    fh = out.open()
    fh.write("data\n")
    (tmp_path / "r.csv").symlink_to(victim)
    with pytest.raises(UserError, match="became something other than a regular file"):
        out.commit()
    assert victim.read_text() == "keep\n" and (tmp_path / "r.csv").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.csv", "victim"]    # the temporary file went


def test_a_replaced_file_keeps_its_mode_and_an_error_keeps_the_old_content(tmp_path):
    from corecast import outputs
    p = tmp_path / "r.csv"
    p.write_text("old\n")
    p.chmod(0o640)
    outputs.write_text(p, "new\n")
    assert p.read_text() == "new\n" and stat.S_IMODE(p.stat().st_mode) == 0o640
    with pytest.raises(RuntimeError):
        with outputs.writing(p) as fh:
            fh.write("half")
            raise RuntimeError("stop")
    assert p.read_text() == "new\n" and sorted(x.name for x in tmp_path.iterdir()) == ["r.csv"]


def _fsize_limit():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


def test_a_file_too_large_is_one_line_and_leaves_no_temporary_file(tmp_path):
    """A write that fails half way (EFBIG under RLIMIT_FSIZE, as ENOSPC on a full disk) removes
    the temporary file and leaves the old file as it was."""
    big = tmp_path / "big.csv"
    big.write_text("cores,throughput\n" + "".join(f"{1 + i % 64},{100 + i}\n" for i in range(5000)))
    out = tmp_path / "out" / "x.csv"
    out.parent.mkdir()
    out.write_text("old\n")
    r = subprocess.run([sys.executable, "-m", "corecast", "export", big, "-o", out, "--metadata", "none"],
                       capture_output=True, text=True, preexec_fn=_fsize_limit)
    assert r.returncode == 2, r.stderr
    assert "File too large" in _one_line(r.stderr) and os.strerror(errno.EFBIG) in r.stderr
    assert out.read_text() == "old\n" and sorted(p.name for p in out.parent.iterdir()) == ["x.csv"]


def test_a_descriptor_is_written_as_it_is_and_not_announced(tmp_path):
    """/dev/stdout and /dev/fd/N are the descriptor itself: its offset (an appending redirection
    keeps what was there), no "wrote" line."""
    out = tmp_path / "out.txt"
    out.write_text("before\n")
    with open(out, "a") as fh:
        r = subprocess.run([sys.executable, "-m", "corecast", "export", SPEC, "-o", "/dev/stdout"],
                           stdout=fh, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 0 and "wrote" not in r.stderr, r.stderr
    text = out.read_text()
    assert text.startswith("before\ncores,throughput\n") and text.count("\n") == 9
    rfd, wfd = os.pipe()
    try:
        p = subprocess.Popen([sys.executable, "-m", "corecast", "export", SPEC, "-o", f"/dev/fd/{wfd}"],
                             pass_fds=(wfd,), stderr=subprocess.PIPE, text=True)
        os.close(wfd)
        with os.fdopen(rfd, "rb") as fh:
            data = fh.read()
        err = p.communicate(timeout=60)[1]
    finally:
        try:
            os.close(wfd)
        except OSError:
            pass
    assert p.returncode == 0 and "wrote" not in err, err
    assert data.startswith(b"cores,throughput\n")
    r = run_corecast("export", SPEC, "-o", "/dev/fd/57")
    assert r.returncode == 2 and "descriptor 57 is not open" in _one_line(r.stderr)


# ----------------------------------------------------------------------------- naming each file

def test_each_file_is_named_on_stderr_and_never_on_stdout(cli, tmp_path, inputs):
    r = cli("calibrate", "--no-memory", "-o", tmp_path / "t.json")
    assert r.code == 0, r.err
    assert "wrote" not in r.out and f"wrote {tmp_path / 't.json'}: " in r.err
    r = cli("sched", "sfmodel", "fit", inputs / "w.csv", "-o", tmp_path / "m.json")
    assert r.code == 0, r.err
    assert str(tmp_path / "m.json") not in r.out and f"wrote {tmp_path / 'm.json'}: " in r.err
    r = cli("sched", "paper", "--figure", "all", "--policies", "hsp", "--json", "--plot", tmp_path / "p.png")
    assert r.code == 0, r.err
    for fig in ("p-fig8.png", "p-fig9.png"):
        assert (tmp_path / fig).is_file()
        assert sum(line.startswith(f"wrote {tmp_path / fig}") for line in r.err.splitlines()) == 1, r.err
    rec = tmp_path / "m.csv"
    r = run_corecast("meters", "--blackboard", f"outputs-{os.getpid()}-named", "--meters", "cpu_busy",
                     "--interval", "50ms", "--duration", "0.3", "--record", rec, timeout=120)
    assert r.returncode == 0, r.stderr
    assert f"wrote {rec}: " in r.stderr and f"wrote {rec}.meta.json: " in r.stderr and "wrote" not in r.stdout
