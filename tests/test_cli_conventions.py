"""Everyday conventions of every command (issue 15): -q and -v everywhere, every written file
named once on standard error, progress for long work on a terminal, output to a pipe never
wrapped, one number format in a table."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from corecast import messages
from corecast.cli import build_parser

from conftest import stderr_on_a_terminal

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "data" / "usl" / "specsdm91.csv")


def _sub_parsers(parser):
    import argparse
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices


def test_every_command_and_sim_action_takes_q_and_v():
    from corecast.cli import sched, sim
    parsers = dict(_sub_parsers(build_parser(None)))
    parsers.update({f"sim {k}": v for k, v in sim._sub_parsers("corecast sim").items()})
    parsers.update({f"sched {k}": v for k, v in sched._sub_parsers("corecast sched").items()})
    parsers.update({f"meters {k}": v for k, v in _sub_parsers(parsers["meters"]).items()})
    parsers.update({f"sched sfmodel {k}": v for k, v in _sub_parsers(parsers["sched sfmodel"]).items()})
    assert {"usl", "predict", "measure", "stat", "sim", "sim gen", "sim capture", "meters replay",
            "sched sim", "sched sfmodel fit"} <= set(parsers)
    for name, p in parsers.items():
        options = {s for a in p._actions for s in a.option_strings}
        assert {"-q", "--quiet", "-v", "--verbose"} <= options, name


@pytest.fixture(scope="module")
def pp(tmp_path_factory):
    from corecast.sim import synth
    from corecast.sim.trace import Trace, write_trace
    d = tmp_path_factory.mktemp("conv")
    write_trace(d / "pp.cctrace", Trace(synth.pingpong(50, 2)))
    return d / "pp.cctrace"


# (arguments with {d} for a fresh folder and {pp} for a small trace, the files written)
WRITERS = [
    (["export", SPEC, "-o", "{d}/x.csv"], ["x.csv", "x.csv.meta.json"]),
    (["export", SPEC, "-o", "{d}/x.json"], ["x.json"]),
    (["usl", SPEC, "--plot", "{d}/u.png", "--report", "{d}/u.html"], ["u.png", "u.html"]),
    (["predict", SPEC, "--cores", "64", "--method", "usl", "--plot", "{d}/p.svg"], ["p.svg"]),
    (["sim", "gen", "stream", "-n", "1000", "-o", "{d}/s.cctrace"], ["s.cctrace"]),
    (["sim", "gen", "transactions", "-n", "20", "-o", "{d}/t.cctrace"], ["t.cctrace"]),
    (["sim", "{pp}", "-m", "penryn-l5420", "--cores", "2", "-o", "{d}/r.json"], ["r.json"]),
    (["sim", "mrc", "{pp}", "-o", "{d}/m.csv", "--plot", "{d}/m.png"], ["m.csv", "m.csv.meta.json", "m.png"]),
    (["sim", "convert", "{pp}", "--to-csv", "-o", "{d}/c.csv"], ["c.csv"]),
    (["stat", "-c", "task_clock", "-o", "{d}/st.csv", "--format", "csv", "--", "true"], ["st.csv"]),
    (["measure", "--cores", "1", "--reps", "1", "--warmup", "0", "--no-shim", "-o", "{d}/c.db", "--",
      "true"], ["c.db"]),
]


def _args(args, d, pp):
    return [a.replace("{d}", str(d)).replace("{pp}", str(pp)) for a in args]


@pytest.mark.parametrize("args, files", WRITERS, ids=[f"{a[0]} {files[0]}" for a, files in WRITERS])
def test_each_written_file_is_named_once_and_q_says_nothing(cli, tmp_path, pp, args, files):
    d = tmp_path / "normal"
    d.mkdir()
    r = cli(*_args(args, d, pp))
    assert r.code == 0, r.err
    for f in files:
        assert (d / f).is_file(), f
        lines = [line for line in r.err.splitlines()
                 if line == f"wrote {d / f}" or line.startswith(f"wrote {d / f}: ")]
        assert len(lines) == 1, (f, r.err)
    assert sum(line.startswith("wrote ") for line in r.err.splitlines()) == len(files), r.err

    q = tmp_path / "quiet"
    q.mkdir()
    r = cli(*_args(args, q, pp), "-q") if "--" not in args else cli(*_args(args[:1] + ["-q"] + args[1:], q, pp))
    assert r.code == 0, r.err
    assert all((q / f).is_file() for f in files)
    assert r.err == "", r.err


def test_q_before_or_after_an_action_is_the_same(cli, tmp_path):
    """A -q given before a sub-command's action is not undone by the action's own default."""
    import argparse
    p = build_parser(["meters", "-q", "list"])
    assert p.parse_args(["meters", "-q", "list"]).verbosity == messages.QUIET
    assert p.parse_args(["meters", "list", "-q"]).verbosity == messages.QUIET
    assert p.parse_args(["meters", "list"]).verbosity == messages.NORMAL
    assert isinstance(p, argparse.ArgumentParser)


def test_v_says_what_was_read_and_how_long_it_took(cli):
    r = cli("usl", SPEC, "-v")
    assert r.code == 0
    assert f"corecast usl: read {SPEC} (CSV): " in r.err and "rows" in r.err
    assert "corecast usl: done in " in r.err and "exit status 0" in r.err
    assert cli("usl", SPEC).err == ""


def test_q_silences_notes_but_not_warnings(cli, capsys):
    messages.configure(messages.QUIET, "x")
    try:
        messages.note("a note")
        messages.step("a step")
        messages.wrote("/tmp/f")
        messages.detail("a detail")
        messages.warning("a warning")
    finally:
        messages.configure()
    err = capsys.readouterr().err
    assert err == "corecast x: warning: a warning\n"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_drawn_on_a_terminal_only_and_cleared():
    tty = _Tty()
    with messages.Progress("simulating", total=1000, unit="records", stream=tty) as bar:
        bar.update(250)
    text = tty.getvalue()
    assert "\rsimulating: 25% (250/1,000 records)" in text.replace("\x1b[K", "")
    assert text.endswith("\r\x1b[K")                         # the line is cleared at the end
    pipe = io.StringIO()
    with messages.Progress("simulating", total=1000, stream=pipe) as bar:
        bar.update(500)
    assert pipe.getvalue() == ""
    messages.configure(messages.QUIET)
    try:
        tty = _Tty()
        with messages.Progress("simulating", total=1000, stream=tty) as bar:
            bar.update(500)
        assert tty.getvalue() == ""
    finally:
        messages.configure()


def test_progress_line_says_what_is_left():
    p = messages.Progress("generating", total=400, unit="records")
    p.done = 100
    assert p.line(p.start + 10) == "generating: 25% (100/400 records), 10 s, about 30 s left"
    p = messages.Progress("capturing", unit="instructions")
    p.done = 12345
    assert p.line(p.start + 2) == "capturing: 12,345 instructions, 2 s"


@pytest.mark.slow
def test_long_work_shows_progress_on_a_terminal(tmp_path, pp):
    """sim gen, sim and sim capture were silent for 30 s, 48 s and the whole capture."""
    code, err = stderr_on_a_terminal(["sim", "gen", "transactions", "-n", "3000", "-o", "t.cctrace"], tmp_path)
    assert code == 0 and "generating: " in err and "records" in err
    code, err = stderr_on_a_terminal(["sim", "t.cctrace", "-m", "penryn-l5420", "--cores", "2", "--json"], tmp_path)
    assert code == 0 and "simulating: " in err and "% (" in err
    code, err = stderr_on_a_terminal(["sim", "mrc", str(pp)], tmp_path)
    assert code == 0 and "stack distances: " in err
    code, err = stderr_on_a_terminal(["sim", "-q", "t.cctrace", "-m", "penryn-l5420", "--json"], tmp_path)
    assert code == 0 and err == ""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None and shutil.which("qemu-x86_64") is None,
                    reason="needs valgrind or qemu-x86_64")
def test_capture_shows_progress_on_a_terminal(tmp_path):
    """The run, then (lackey) the disassembly pass (objdump), which was silent; QEMU decodes each
    instruction as it turns up (sim/online.py), so there is no pass after its run to show. The
    run's progress is a whole line after a second and then every ten (the program writes to the
    same terminal: tests/test_progress.py); a run of 1.5 s has one."""
    code, err = stderr_on_a_terminal(["sim", "capture", "-o", "c.cctrace", "--", "sh", "-c", "sleep 1.5"], tmp_path)
    assert code == 0, err
    assert "capturing: " in err and "instructions" in err
    if shutil.which("qemu-x86_64") and os.uname().machine == "x86_64":
        assert "decoding: " not in err
        if shutil.which("objdump"):
            assert "100.0% of instructions decoded" in err
    elif shutil.which("objdump"):
        assert "decoding: " in err and "100% (" in err
    assert "wrote c.cctrace: " in err


def test_predict_names_the_registry_methods():
    """cli/predict writes the methods' names so that `predict -h` does not import the models."""
    from corecast.cli.predict import METHODS
    from corecast.model.predictors import METHODS as REGISTERED
    assert METHODS == REGISTERED


@pytest.mark.parametrize("command", ["usl", "predict", "evaluate", "throughput", "stat", "sim", "events", "export",
                                     "info", "measure", "serve", "calibrate", "chase", "meters", "sched"])
def test_help_loads_no_numerical_library(command):
    """The cost of starting is proportional to what is asked: `-h` never loads numpy or scipy
    (usl/predict/evaluate -h loaded scipy through the models: 0.7 s of CPU)."""
    code = ("import sys\nfrom corecast.cli import main\n"
            f"try:\n    main([{command!r}, '-h'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in ('numpy', 'scipy', 'matplotlib', 'pandas', 'rich') if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "[]", r.stdout[-300:]


def test_stat_start_loads_no_module_a_count_does_not_use():
    """`corecast stat -c task_clock -- true` (issue 28: start-up against perf stat's) imports
    neither importlib.resources (with zipfile, bz2, lzma: the event catalogues and the compiled
    parts are plain paths), secrets (hmac, hashlib: a temporary name is os.urandom's), nor csv
    (a table is not CSV)."""
    heavy = ("importlib.resources", "zipfile", "secrets", "hmac", "csv", "numpy", "_corecast_editable_loader")
    code = ("import sys\nfrom corecast.cli import main\n"
            "code = main(['stat', '-c', 'task_clock', '--', 'true'])\n"
            f"print(code, sorted(m for m in {heavy!r} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "task_clock" in r.stderr                       # it counted (the report is on stderr)
    assert r.stdout.strip().splitlines()[-1] == "0 []", r.stdout[-300:]


@pytest.mark.parametrize("args", [["usl", "data/usl/specsdm91.csv"], ["sched", "machines"]])
def test_a_reader_that_went_away_is_exit_0_and_no_message(args, tmp_path, monkeypatch):
    """`corecast usl F | head -1`: the reader closed the pipe. rich's console answered with
    SystemExit(1), so every table-printing command exited 1 there; cli.main stops quietly, 0."""
    shutil.copytree(Path(__file__).resolve().parent.parent / "data" / "usl", tmp_path / "data" / "usl")
    monkeypatch.chdir(tmp_path)
    r, w = os.pipe()
    os.close(r)                                   # closed before the first write: EPIPE, always
    try:
        p = subprocess.run([sys.executable, "-m", "corecast", *args], stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
