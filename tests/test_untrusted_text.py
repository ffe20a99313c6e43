"""Text from other people's data never acts as markup or as control characters: rich markup
in a CSV's column name ([link=...] made a hidden hyperlink on the owner's terminal, a stray
closing tag ended `info` with an internal error), mathtext in a plot's label ($...$), escape
sequences and non-UTF-8 bytes in a thread's name (`stat`), in a machine file (`sim machines`)
and in CSV text written to a terminal."""
from __future__ import annotations

import io
import sys

import pytest

from conftest import run_corecast

LINK = "[link=https://evil.example]click[/link]_cycles"


def _csv(path, *names):
    rows = ["1,10" + ",1" * len(names), "2,6" + ",2" * len(names), "4,4" + ",3" * len(names),
            "8,3.5" + ",4" * len(names), "16,3.3" + ",5" * len(names), "32,3.2" + ",6" * len(names)]
    path.write_text(",".join(["cores", "time_s", *(f'"{n}"' for n in names)]) + "\n" + "\n".join(rows) + "\n")
    return path


def test_markup_in_a_column_name_is_shown_as_written_on_a_terminal():
    from rich.table import Table
    from corecast.report import terminal
    out = io.StringIO()
    con = terminal._fitting_console()(file=out, force_terminal=True, color_system="standard", width=200)
    t = Table(title="t")
    t.add_column("name")
    t.add_row(LINK)
    t.add_row("[/bold]x_cycles")
    con.print(t)
    con.print(f"[bold]columns[/bold]: {LINK}")
    text = out.getvalue()
    assert "\x1b]8" not in text                                   # no OSC 8 hyperlink
    assert LINK in text and "[/bold]x_cycles" in text
    assert "\x1b[1m" in text                                      # corecast's own style is kept


def test_info_and_predict_show_markup_names_and_do_not_fail(tmp_path):
    f = _csv(tmp_path / "mk.csv", "[/bold]x_cycles", LINK)
    for cmd in (["info", str(f)], ["predict", str(f), "--cores", "64"]):
        r = run_corecast(*cmd)
        assert r.returncode == 0, r.stderr
        assert "[/bold]x_cycles" in r.stdout and "click[/link]_cycles" in r.stdout


@pytest.mark.parametrize("what", ["plot", "report"])
def test_mathtext_in_a_column_name_is_drawn_as_written(tmp_path, what):
    pytest.importorskip("matplotlib")
    f = _csv(tmp_path / "mt.csv", "a$\\frac{$_cycles")
    out = tmp_path / ("p.png" if what == "plot" else "r.html")
    r = run_corecast("predict", str(f), "--cores", "64", f"--{what}", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0


def test_literal_dollar_is_not_mathtext():
    pytest.importorskip("matplotlib")
    from matplotlib.text import Text
    from corecast.report.plots import literal
    t = Text(text=literal("a$\\frac{$b"))
    assert t._preprocess_math(t.get_text()) == ("a$\\frac{$b", False)
    assert literal("plain name") == "plain name"


def test_a_thread_name_with_escapes_or_bad_bytes_is_one_visible_field(tmp_path):
    from corecast.collect import sources
    task = tmp_path / "1" / "task"
    for tid, raw in ((2, b"\x1b]0;pwned\x07\x1b[2J\n"), (3, b"a\xffb\n"), (4, b'x\ny,"z\n'), (5, b"worker-1\n")):
        (task / str(tid)).mkdir(parents=True)
        (task / str(tid) / "comm").write_bytes(raw)
    assert sources.thread_name(1, 2, tmp_path) == "\\x1b]0;pwned\\x07\\x1b[2J"
    assert sources.thread_name(1, 3, tmp_path) == "a\\xffb"       # was UnicodeDecodeError: an internal error
    assert sources.thread_name(1, 4, tmp_path) == 'x\\x0ay,"z'
    assert sources.thread_name(1, 5, tmp_path) == "worker-1"


def test_sim_machines_shows_a_machine_file_s_escapes(tmp_path):
    from corecast.machines import __file__ as mdir
    from pathlib import Path
    src = (Path(mdir).parent / "atom-n540.toml").read_text().splitlines()
    src = [('name = "ev\\u001b]0;T\\u0007il"' if line.startswith("name =") else
            'description = "d\\u001b[2Jx"' if line.startswith("description =") else line) for line in src]
    (tmp_path / "m.toml").write_text("\n".join(src) + "\n")
    r = run_corecast("sim", "machines", str(tmp_path / "m.toml"))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "ev\\x1b]0;T\\x07il" in r.stdout and "d\\x1b[2Jx" in r.stdout


def test_csv_on_a_terminal_shows_escapes_and_a_pipe_gets_the_bytes(monkeypatch):
    from corecast.cli import _output

    class Tty(io.StringIO):
        def isatty(self):
            return True
    text = "cores,time\x1b]52;c;SGk=\x1b\\_s\n1,2\n"
    for stream, want in ((Tty(), "cores,time\\x1b]52;c;SGk=\\x1b\\_s\n1,2\n"), (io.StringIO(), text)):
        monkeypatch.setattr(sys, "stdout", stream)
        _output.write_stdout(text)
        assert stream.getvalue() == want


def test_a_progress_label_from_data_sends_no_escape():
    from corecast.messages import Progress
    p = Progress("measuring", total=4, unit="runs")
    p.update(1, label="prog\x1b]0;T\x07")
    assert "\x1b" not in p.line() and "prog\\x1b]0;T\\x07" in p.line()


def test_mathtext_in_a_trace_name_is_drawn_as_written_in_the_miss_rate_plot(tmp_path):
    """`sim mrc --plot` titles its figure with the trace's file name: '$\\frac{$' in it was read
    as mathtext and ended the command with a ParseException at the save."""
    pytest.importorskip("matplotlib")
    trace = tmp_path / "a$\\frac{$.cctrace"
    r = run_corecast("sim", "gen", "random", "-n", "2000", "-o", str(trace), "-q")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "m.png"
    r = run_corecast("sim", "mrc", str(trace), "--plot", str(out), "-q")
    assert r.returncode == 0, r.stderr
    assert out.stat().st_size > 0
