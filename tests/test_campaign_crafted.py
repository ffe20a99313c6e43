"""Crafted campaign files: another local user hands root a small `.db` (or drops it in a folder
root's `corecast serve` shows) whose tables are not what corecast made -- a view over an endless
recursive CTE (a count that never returns and ignores Ctrl-C: SQLite runs without the GIL), a
view or a generated column that makes gigabyte-sized values, a trigger, a virtual table. Every
way in (`Campaign.open`, `corecast info`, `corecast predict`) refuses such a file in one line
and exit status 2 within seconds, before reading any of its data; a value over the bound and a
read past its budget of SQLite work are one line too; every campaign corecast wrote still opens.

Each command runs in a child with a time limit and an address-space limit, so that a regression
fails here instead of hanging the suite or filling the machine's memory."""
from __future__ import annotations

import resource
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corecast import dataset, store
from corecast.dataset import ColumnInfo
from corecast.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = sorted([*(ROOT / "data" / "readme").glob("*.db"),
                  *(ROOT / "data" / "groundtruth" / "campaigns").glob("*.db")])
LIMIT_S = 30            # a refusal takes well under a second; a regression hangs (killed here)
MEMORY = 4 << 30        # a regression that builds gigabyte values fails instead of swapping

#: The columns of `runs`, as a view that stands in for it must give them.
RUN_COLUMNS = ("x AS slot, 1 AS cores, 0 AS repetition, 0 AS warmup, '[0]' AS cpus, '[\"p\"]' AS argv, 'ok' AS status, "
               "0 AS exit_status, NULL AS signal, NULL AS message, {tail} AS stdout_tail, '' AS stderr_tail, "
               "0.0 AS started_at, 0.0 AS finished_at, '{{}}' AS details")

#: What each crafted file does to a genuine campaign (SQL run on it afterwards).
CRAFTS = {
    "endless view": "DROP TABLE runs; CREATE VIEW runs AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT "
                    "x + 1 FROM c) SELECT " + RUN_COLUMNS.format(tail="''") + " FROM c;",
    "huge view": "DROP TABLE runs; CREATE VIEW runs AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 "
                 "FROM c WHERE x < 5000) SELECT " + RUN_COLUMNS.format(tail="printf('%.*c', 1000000, 'x')") +
                 " FROM c;",
    "generated column": "CREATE TABLE r2(slot INTEGER PRIMARY KEY, cores INTEGER NOT NULL, repetition INTEGER "
                        "NOT NULL, warmup INTEGER NOT NULL DEFAULT 0, cpus TEXT NOT NULL, argv TEXT NOT NULL, "
                        "status TEXT NOT NULL, exit_status INTEGER, signal INTEGER, message TEXT, stdout_tail TEXT "
                        "GENERATED ALWAYS AS (printf('%.*c', 200000000, 'x')) VIRTUAL, stderr_tail TEXT, "
                        "started_at REAL, finished_at REAL, details TEXT); "
                        "INSERT INTO r2(slot, cores, repetition, warmup, cpus, argv, status) "
                        "SELECT slot, cores, repetition, warmup, cpus, argv, status FROM runs; DROP TABLE runs; "
                        "ALTER TABLE r2 RENAME TO runs;",
    "stored generated column": "ALTER TABLE notices RENAME TO n0; CREATE TABLE notices(id INTEGER PRIMARY KEY, at REAL "
                               "NOT NULL, text TEXT AS ('said ' || at) STORED); DROP TABLE n0;",
    "trigger": "CREATE TRIGGER t AFTER INSERT ON runs BEGIN DELETE FROM run_values; END;",
    "fts5 virtual table": "DROP TABLE notices; CREATE VIRTUAL TABLE notices USING fts5(id, at, text);",
    "rtree virtual table": "CREATE VIRTUAL TABLE shapes USING rtree(id, x0, x1);",
    "index named as a table": "DROP TABLE notices; CREATE INDEX notices ON runs(cores);",
}
SAID = {"endless view": "a view 'runs'", "huge view": "a view 'runs'",
        "generated column": "a generated column in table 'runs'",
        "stored generated column": "a generated column in table 'notices'", "trigger": "a trigger 't'",
        "fts5 virtual table": "a virtual table 'notices'", "rtree virtual table": "a virtual table 'shapes'",
        "index named as a table": "an index 'notices'"}


def _genuine(path: Path, runs: int = 4) -> Path:
    """A campaign as `corecast measure` leaves it, settled into one file (~45 KB)."""
    with store.Campaign.create(path, command=["prog"], config={"cores": [1, 2]}, machine={}) as c:
        for s in range(runs):
            c.record_run(store.RunRecord(slot=s, cores=1 + s % 2, repetition=s // 2, warmup=False, cpus=[0],
                                         argv=["prog"], status="ok", exit_status=0,
                                         values={"time_s": 4.0 / (1 + s % 2)}),
                         [ColumnInfo("time_s", "time", "s", "measured: wall clock", "ok")] if s == 0 else [])
    _settle(path)
    return path


def _settle(path: Path) -> None:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=DELETE")
    con.close()


def _crafted(tmp_path: Path, craft: str) -> Path:
    path = _genuine(tmp_path / f"{craft.replace(' ', '-')}.db")
    con = sqlite3.connect(path)
    try:
        con.executescript(CRAFTS[craft])
    except sqlite3.OperationalError as err:
        if "no such module" in str(err):
            pytest.skip(f"this SQLite has no {craft.split()[0]} ({err})")
        raise
    finally:
        con.close()
    return path


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _child(*argv: str) -> tuple[subprocess.CompletedProcess, float]:
    t = time.monotonic()
    r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=LIMIT_S,
                       stdin=subprocess.DEVNULL, preexec_fn=_limited)
    return r, time.monotonic() - t


OPEN = ("-c", "import sys\nfrom corecast import store\nfrom corecast.errors import UserError\n"
              "try:\n    c = store.Campaign.open(sys.argv[1], write=sys.argv[2] == 'w')\nexcept UserError as e:\n"
              "    print(e, file=sys.stderr); sys.exit(2)\nc.run_count(); c.runs(); c.close()")


@pytest.mark.parametrize("craft", list(CRAFTS))
def test_a_crafted_campaign_is_one_line_and_exit_2(tmp_path, craft):
    path = _crafted(tmp_path, craft)
    assert path.stat().st_size < 100_000
    for argv in ((*OPEN, str(path), "r"), (*OPEN, str(path), "w"), ("-m", "corecast", "info", str(path)),
                 ("-m", "corecast", "predict", str(path), "--cores", "4")):
        r, took = _child(*argv)
        lines = r.stderr.strip().splitlines()
        assert (r.returncode, len(lines)) == (2, 1), (argv[-2:], r.returncode, r.stderr[-2000:])
        assert f"{path}: not a corecast campaign: it holds {SAID[craft]}, which corecast never makes" in lines[0]
        assert r.stdout == "" and took < LIMIT_S


def test_a_crafted_campaign_is_refused_before_its_data_is_read(tmp_path):
    """In-process too: the schema is checked before any query of the data (a crafted file is
    neither half-made, to be replaced, nor read)."""
    path = _crafted(tmp_path, "endless view")
    assert not store.half_created(path)
    with pytest.raises(UserError, match="it holds a view 'runs'"):
        store.Campaign.open(path, write=False)
    with pytest.raises(UserError, match="it holds a view 'runs'"):
        dataset.read_campaign(path)
    with pytest.raises(UserError, match="already exists"):
        store.Campaign.create(path, command=["x"], config={}, machine={})


def test_a_genuine_campaign_still_opens_and_reads(tmp_path):
    path = _genuine(tmp_path / "c.db")
    for argv in ((*OPEN, str(path), "r"), ("-m", "corecast", "info", str(path)),
                 ("-m", "corecast", "predict", str(path), "--cores", "4")):
        r, _ = _child(*argv)
        assert r.returncode == 0, r.stderr
    with store.Campaign.open(path) as c:                   # and is written to as before
        c.record_run(store.RunRecord(slot=9, cores=2, repetition=9, warmup=False, cpus=[0], argv=["prog"],
                                     status="ok", values={"time_s": 2.0}))
    assert len(dataset.read_campaign(path)) == 5


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_bundled_campaign_still_opens(path, tmp_path):
    with store.Campaign.open(path, write=False) as c:
        assert c.run_count() > 0 and c.meta()["format"] == store.FORMAT
    assert len(dataset.read_campaign(path)) > 0


def test_a_campaign_from_before_side_tables_still_opens(tmp_path):
    path = _genuine(tmp_path / "old.db")
    con = sqlite3.connect(path)
    con.execute("DROP TABLE run_tables")
    con.close()
    assert len(dataset.read_campaign(path)) == 4
    with store.Campaign.open(path):                        # the side tables are made, as before
        pass


def test_a_value_over_the_bound_is_one_line(tmp_path, monkeypatch):
    path = _genuine(tmp_path / "c.db")
    con = sqlite3.connect(path)
    con.execute("UPDATE runs SET stdout_tail = ? WHERE slot = 1", ("x" * (2 << 20),))
    con.commit()
    con.close()
    assert len(dataset.read_campaign(path)) == 4           # 2 MiB: under the real bound
    monkeypatch.setattr(store, "MAX_VALUE", 1 << 20)
    with pytest.raises(UserError, match=r"c.db: not a readable campaign file: it holds a value over 1 MiB"):
        dataset.read_campaign(path)


@pytest.fixture(scope="module")
def many_side_tables(tmp_path_factory) -> Path:
    """Plain tables only, so the schema checks pass, but 30,000 side tables of one row: the
    reader scans run_tables once for each (46 s for this 1 MB file without a budget)."""
    path = _genuine(tmp_path_factory.mktemp("quad") / "quad.db", runs=1)
    con = sqlite3.connect(path)
    con.executemany("INSERT INTO run_tables(slot, name, row, data) VALUES (0, ?, 0, '{}')",
                    [(f"t{i}",) for i in range(30_000)])
    con.commit()
    con.close()
    return path


def test_a_read_past_its_budget_is_one_line(many_side_tables):
    r, took = _child("-m", "corecast", "info", str(many_side_tables))
    lines = r.stderr.strip().splitlines()
    assert (r.returncode, len(lines)) == (2, 1), r.stderr[-2000:]
    assert "not a readable campaign file: reading it took over" in lines[0] and took < LIMIT_S


def test_ctrl_c_stops_a_long_read(many_side_tables, monkeypatch):
    """SQLite holds no GIL, so SIGINT used to wait for the query's end; the budget's progress
    handler runs Python, where the signal's KeyboardInterrupt is raised again."""
    monkeypatch.setattr(store, "READ_STEPS_MIN", 10 ** 15)
    old = signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    t = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            dataset.read_campaign(many_side_tables)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert time.monotonic() - t < 10
