"""Tables never cut a number (issue 26): at 100 columns `sched sim ... --policy hsp,rr,adwrr,eqp,acfs`
printed `1.51e+…` and `6.418…`, at 80 `predict` cut `lock_wait_…`. Every table corecast prints is
fitted first (report/terminal.fit_table): numbers keep their width, text wraps, and columns that
cannot fit are left out, with a line saying which."""
from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from corecast.report import terminal as T
from conftest import DATA, ROOT

SPEC = str(DATA / "usl" / "specsdm91.csv")


def _render(table, width: int) -> str:
    import io

    buf = io.StringIO()
    con = T._fitting_console()(file=buf, width=width, highlight=False, color_system=None)
    con.print(table)
    return buf.getvalue()


def test_numbers_keep_their_width_and_text_wraps():
    t = T.make_table("Workload", ["policy", "what it did", "energy (J)", "EDP (J·s)"],
                     [["HSP", "ran the fastest threads on the big cores all along", 15102.15, 4861997.72],
                      ["ACFS", "equal slowdowns", 14200.0, 1.23456e-7]])
    out = _render(t, 44)
    assert "…" not in out
    for number in ("1.51e+04", "4.862e+06", "1.42e+04", "1.235e-07"):
        assert number in out                                      # whole, on one line
    assert max(len(line) for line in out.splitlines()) <= 44 and "left out" not in out
    tokens = {w for line in out.splitlines() for w in line.split()}
    assert set("ran the fastest threads on the big cores all along".split()) <= tokens    # wrapped, not cut


def test_columns_that_cannot_fit_are_left_out_and_named():
    cols = [f"metric {i}" for i in range(12)]
    t = T.make_table("Wide", ["name", *cols], [["x", *[123456.789 * (i + 1) for i in range(12)]]])
    out = _render(t, 60)
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 60
    m = re.search(r"\((\d+) columns left out to fit 60 columns: ([^;]+); a wider terminal shows them\)",
                  " ".join(out.split()))
    assert m, out
    left_out = m.group(2).split(", ")
    assert int(m.group(1)) == len(left_out) and left_out == cols[-len(left_out):]
    assert all(c not in out.split("(")[0] for c in left_out)     # not in the table itself
    assert "1.235e+05" in out


def test_a_table_that_fits_is_left_as_it_was():
    t = T.make_table("Small", ["cores", "time_s"], [[1, 2.5], [2, 1.3]])
    assert T.fit_table(t, 80) == []
    assert [c.width for c in t.columns] == [5, 6]


# ------------------------------------------------------------------ every table-printing command
def _on_a_terminal(args: list[str], width: int, cwd: Path) -> tuple[int, str]:
    """corecast with standard output and error on a pseudo-terminal `width` columns wide."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, width, 0, 0))
    env = dict(os.environ, COLUMNS=str(width), TERM="xterm")
    p = subprocess.Popen([sys.executable, "-m", "corecast", *args], stdin=subprocess.DEVNULL, stdout=slave,
                         stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    out = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        out.append(data)
    os.close(master)
    return p.wait(timeout=600), b"".join(out).decode(errors="replace")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A trace, its simulation, a Dataset with long stall names, a small campaign, a meters recording."""
    sys.path.insert(0, str(ROOT / "tests"))
    import fakes
    from corecast.cli import main
    from corecast.dataset import ColumnInfo

    d = tmp_path_factory.mktemp("tables")
    ds = fakes.lock_stalls()
    names = {"mem_stall_cycles": "memory_bandwidth_stall_cycles", "lock_wait_cycles": "lock_wait_futex_contended_cycles"}
    ds.metrics = {names.get(k, k): v for k, v in ds.metrics.items()}
    ds.columns = {names.get(k, k): ColumnInfo(name=names.get(k, k), kind=c.kind, unit=c.unit, source=c.source)
                  for k, c in ds.columns.items()}
    ds.save(d / "stalls.csv")
    assert main(["sim", "gen", "transactions", "-q", "-n", "2000", "-o", str(d / "t.cctrace")]) == 0
    assert main(["sim", "-q", str(d / "t.cctrace"), "-m", "penryn-l5420", "--cores", "2", "-o", str(d / "sim.json"),
                 "--json"]) == 0
    assert main(["measure", "-q", "--cores", "1-2", "--reps", "1", "--warmup", "0", "--no-shim", "-o",
                 str(d / "m.db"), "--", "true"]) == 0
    assert main(["meters", "-q", "--blackboard", f"tables-test-{os.getpid()}", "--meters", "software",
                 "--record", str(d / "rec.csv"), "--duration", "1"]) == 0
    return d


COMMANDS = {
    "sched sim": ["sched", "sim", "pmctrack-mix", "--policy", "hsp,rr,adwrr,eqp,acfs"],
    "sched paper": ["sched", "paper", "--figure", "8"],
    "sched run": ["sched", "run", "--policy", "rr", "--", "sleep 0.2", "sleep 0.2"],
    "predict": ["predict", "{d}/stalls.csv", "--cores", "16,32"],
    "evaluate": ["evaluate", "{d}/stalls.csv", "--train-max-cores", "6"],
    "usl": ["usl", SPEC, "--predict", "64,128"],
    "info": ["info", "{d}/stalls.csv"],
    "measure": ["measure", "--resume", "-o", "{d}/m.db"],
    "events": ["events"],
    "sim": ["sim", "{d}/t.cctrace", "-m", "penryn-l5420", "--cores", "2"],
    "sim mrc": ["sim", "mrc", "{d}/t.cctrace"],
    "sim machines": ["sim", "machines"],
    "throughput": ["throughput", "--machine", "penryn-l5420", "--sim", "{d}/sim.json", "--baseline-cpi", "0.8", "--cores", "1,2,4",
                   "--lock-fraction", "0.13"],
    "chase": ["chase", "--threads", "1,2", "--chains", "1,2", "--size", "1MiB", "--duration", "0.02", "--samples", "2"],
    "meters list": ["meters", "list"],
    "meters replay": ["meters", "replay", "{d}/rec.csv"],
}


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 100])
@pytest.mark.parametrize("name", list(COMMANDS))
def test_no_table_cuts_anything_at_80_or_100_columns(files, name, width):
    args = [a.replace("{d}", str(files)) for a in COMMANDS[name]]
    code, out = _on_a_terminal(args, width, files)
    assert code == 0, out[-2000:]
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out)
    assert "…" not in text, "\n".join(line for line in text.splitlines() if "…" in line)
    rows = [line for line in text.replace("\r\n", "\n").split("\n") if "┃" in line or "│" in line]
    assert rows or name in ("events", "sim machines"), text[-1500:]                         # it printed a table
    assert max((len(line.split("\r")[-1]) for line in rows), default=0) <= width
