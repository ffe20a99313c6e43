"""Escape sequences in another user's data never reach the owner's terminal as they are: a
column name, a cell, a command or a machine's name may carry OSC 52 (a write to the owner's
clipboard), a title set or a screen clear. They are shown as \\xNN in one-line errors, notes
and warnings (corecast.messages.visible), in rich's tables and text, and in serve's log."""
from __future__ import annotations

import io
import logging

from conftest import run_corecast

OSC52 = "\x1b]52;c;SGk=\x1b\\"


def test_visible_shows_control_characters_and_keeps_lines_and_tabs():
    from corecast.messages import visible
    assert visible(f"a{OSC52}b\tc\nd\x07\x9b\x7fe") == "a\\x1b]52;c;SGk=\\x1b\\b\tc\nd\\x07\\x9b\\x7fe"
    assert visible("plain é ✓ text") == "plain é ✓ text"


def test_info_and_an_error_line_send_no_escape_from_the_file(tmp_path):
    (tmp_path / "esc.csv").write_text(f"cores,time{OSC52}_s\n1,10\n2,6\n4,4\n")
    r = run_corecast("info", str(tmp_path / "esc.csv"))
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout + r.stderr and "time\\x1b]52;c;SGk=" in r.stdout
    (tmp_path / "bad.csv").write_text("cores,time_s\n1,10\n2,ab\x1b]0;T\x07c\n")
    r = run_corecast("predict", str(tmp_path / "bad.csv"), "--cores", "4")
    assert r.returncode == 2 and "\x1b" not in r.stderr and "\x07" not in r.stderr
    assert "'ab\\x1b]0;T\\x07c' is not a number" in r.stderr


def test_a_terminal_gets_rich_s_styles_but_not_the_data_s_escapes():
    from rich.table import Table
    from corecast.report import terminal
    out = io.StringIO()
    con = terminal._fitting_console()(file=out, force_terminal=True, color_system="standard", width=120)
    t = Table(title="t")
    t.add_column("name", style="bold")
    t.add_row(f"x{OSC52}y")
    con.print(t)
    text = out.getvalue()
    assert "\x1b[1m" in text                      # rich's own style is kept
    assert "\x1b]52" not in text and "x\\x1b]52;c;SGk=" in text


def test_serve_s_log_line_shows_the_escape():
    from corecast.serve.server import OneLine
    rec = logging.LogRecord("corecast.serve", logging.WARNING, __file__, 1, "GET /api/x: %s", (f"bad{OSC52}",), None)
    line = OneLine("corecast serve: %(message)s").format(rec)
    assert "\x1b" not in line and "bad\\x1b]52" in line
