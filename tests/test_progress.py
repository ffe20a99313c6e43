"""Progress of long work (issue 26): one helper (corecast.messages.Progress) for every long job,
drawn on a terminal only, never into a redirected standard error, cleared before results, and
never in the way of a traced program's own output."""
from __future__ import annotations

import io
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from corecast import messages
from conftest import DATA, stderr_on_a_terminal

SPEC = str(DATA / "usl" / "specsdm91.csv")


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_note_said_during_long_work_goes_above_the_progress_line(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    messages.configure()                     # no command name left by an earlier test
    with messages.Progress("simulating", total=10, unit="runs") as bar:
        bar.update(3, "Figure 8: W1 hsp")
        messages.note("something to know")
        bar.update(10)
    text = tty.getvalue()
    first = "\r\x1b[Ksimulating: 30% (3/10 runs), 0 s; Figure 8: W1 hsp"
    assert text.startswith(first)
    # the line is taken off, the note printed, the line drawn again, then the end, then cleared
    rest = text[len(first):]
    assert rest.startswith("\r\x1b[Kcorecast: note: something to know\n\r\x1b[Ksimulating: 30%")
    assert "simulating: 100% (10/10 runs)" in rest and text.endswith("\r\x1b[K")


def test_a_long_line_is_cut_to_the_terminal_never_wrapped(monkeypatch):
    tty = _Tty()
    monkeypatch.setenv("COLUMNS", "40")
    with messages.Progress("measuring", total=100, unit="runs", stream=tty) as bar:
        bar.update(1, "x" * 200)
    drawn = tty.getvalue().split("\r\x1b[K")[1]
    assert len(drawn) == 39 and drawn.startswith("measuring: 1% (1/100 runs)")


def test_lines_mode_prints_whole_lines_and_never_redraws_in_place():
    tty = _Tty()
    p = messages.Progress("capturing", unit="records", stream=tty, lines=True)
    p.LINE_FIRST_S = p.LINE_EVERY_S = 0.0
    with p:
        p.update(100, "50 instructions")
        p.update(200, "90 instructions")
    text = tty.getvalue()
    assert "\r" not in text and "\x1b" not in text
    assert text.splitlines() == ["capturing: 100 records, 0 s; 50 instructions",
                                 "capturing: 200 records, 0 s; 90 instructions"]


def test_the_time_left_reads_in_minutes_past_ninety_seconds():
    p = messages.Progress("simulating", total=100, unit="runs")
    p.done = 10
    assert p.line(p.start + 100) == "simulating: 10% (10/100 runs), 1 min 40 s, about 15 min 00 s left"


# ------------------------------------------------------------------ commands
def _measure(tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "corecast", "measure", "--cores", "1-2", "--reps", "2", "--warmup", "0",
            "--no-shim", "-o", str(tmp_path / "c.db"), *extra, "--", "sh", "-c", "sleep 0.3"]


def test_measure_draws_no_progress_into_a_redirected_stderr(tmp_path):
    """`measure ... 2>err` got rich's progress bar in err: rich's Live prints its last render at
    stop on a console that is not a terminal."""
    with open(tmp_path / "err", "w") as err:
        r = subprocess.run(_measure(tmp_path), stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
    assert r.returncode == 0
    text = (tmp_path / "err").read_text()
    assert "measuring" not in text and "\r" not in text and "\x1b" not in text and "━" not in text
    assert "wrote " in text                                         # what stderr is for is still there


def test_measure_shows_its_progress_on_a_terminal_and_nothing_when_resumed_finished(tmp_path):
    code, err = stderr_on_a_terminal(_measure(tmp_path)[3:], tmp_path)
    assert code == 0
    assert re.search(r"measuring: \d+% \(\d/4 runs\), \d+ s.*; [12] cores?, rep [12]", err), err
    code, err = stderr_on_a_terminal(["measure", "--resume", "-o", str(tmp_path / "c.db")], tmp_path)
    assert code == 0
    assert "measuring:" not in err and "4/4" not in err and "\x1b" not in err, err   # no spinner "8/8"


def test_sched_paper_counts_its_runs_and_plots(tmp_path):
    code, err = stderr_on_a_terminal(["sched", "paper", "--figure", "8", "--policies", "hsp,rr",
                                       "--plot", str(tmp_path / "f.png")], tmp_path)
    assert code == 0, err
    assert re.search(r"simulating: \d+% \(\d+/18 runs\).*; Figure 8: \S+ (hsp|rr)", err), err
    assert "plotting: 100% (1/1 figures)" in err


def test_predict_says_what_it_is_doing_and_clears_the_line_before_the_results(tmp_path):
    master, slave = os.openpty()
    p = subprocess.Popen([sys.executable, "-m", "corecast", "predict", SPEC, "--cores", "64", "--plot",
                          str(tmp_path / "p.png"), "--report", str(tmp_path / "p.html")],
                         stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=tmp_path)
    os.close(slave)
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    os.close(master)
    assert p.wait(timeout=300) == 0
    text = out.decode(errors="replace").replace("\r\n", "\n")
    assert re.search(r"predict: \d+% \(\d/4 steps\), \d+ s; fitting auto", text), text[:500]
    # every progress line is taken off before anything else is written: nothing follows one on
    # its line (the table, the notes and the names of the files written start on a line of their own)
    drawn = [seg for seg in text.split("\r\x1b[K") if seg.startswith("predict: ")]
    assert drawn and all("\n" not in seg for seg in drawn), [seg for seg in drawn if "\n" in seg][:2]
    assert any("drawing the figure" in seg for seg in drawn) and any("writing " in seg for seg in drawn)
    assert "cores" in text


def test_chase_sweep_shows_its_points(tmp_path):
    code, err = stderr_on_a_terminal(["chase", "--threads", "1", "--chains", "1,2,4", "--size", "1MiB",
                                       "--duration", "0.05", "--samples", "2"], tmp_path)
    assert code == 0, err
    assert re.search(r"concurrency sweep: \d+% \(\d/3 points\).*; 1 thread x \d+ chains", err), err


# ------------------------------------------------------------------ sim capture
capture_tools = pytest.mark.skipif(shutil.which("valgrind") is None and shutil.which("qemu-x86_64") is None,
                                   reason="needs valgrind or qemu-x86_64")


@capture_tools
def test_capture_progress_never_lands_in_the_programs_output(tmp_path):
    """The traced program writes to the same terminal: a line redrawn in place took its output
    ("capturing: 1,234 instructions, 1 shello"). Now: whole lines, each ended."""
    master, slave = os.openpty()
    p = subprocess.Popen([sys.executable, "-m", "corecast", "sim", "capture", "--no-annotate", "-o",
                          "c.cctrace", "--", "sh", "-c", "sleep 2; echo program-says-hi"],
                         stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=tmp_path)
    os.close(slave)
    out = b""
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    os.close(master)
    assert p.wait(timeout=300) == 0
    text = out.decode(errors="replace").replace("\r\n", "\n")
    before = text[:text.index("program-says-hi")]
    assert "\r" not in before and "\x1b" not in before, repr(before)
    assert re.search(r"^capturing: [\d,]+ records, \d+ s; [\d,]+ instructions, [\d.]+ [kMG]?B written\n", before,
                     re.M), repr(before)
    assert before.endswith("\n")


@capture_tools
def test_capture_says_when_its_trace_passes_a_size(cli, tmp_path, monkeypatch):
    """A capture writes ~16 bytes a record, two records an instruction: 2 GB went by without a
    word. The note comes as the trace passes the size (1 GB), and again at each doubling."""
    from corecast.cli import sim
    monkeypatch.setattr(sim, "LARGE_TRACE_BYTES", 1e6)
    r = cli("sim", "capture", "--no-annotate", "-o", tmp_path / "t.cctrace", "--", "/bin/true")
    assert r.code == 0, r.err
    notes = re.findall(r"note: the trace has passed ([\d.]+ [kMG]?B) of records \(.* instructions\)", r.err)
    records = int(re.search(r"wrote \S+: ([\d,]+) records", r.err).group(1).replace(",", ""))
    size = 16 * records
    assert size > 2e6 and notes[:2] == ["1 MB", "2 MB"]
    assert len(notes) == int(math.log2(size / 1e6)) + 1           # every doubling passed, once


def test_a_resumed_campaign_s_time_left_counts_only_the_runs_of_this_session():
    p = messages.Progress("measuring", unit="runs")
    p.begin(10, done=6)                     # 6 runs recorded before --resume
    p.done = 8                              # 2 in 20 s now: 2 left take 20 s more
    assert p.line(p.start + 20) == "measuring: 80% (8/10 runs), 20 s, about 20 s left"
