"""The campaign file: atomic runs, resume, locking, and the Dataset it gives."""
from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from corecast import dataset, store
from corecast.dataset import ColumnInfo, Machine
from corecast.errors import UserError

MACHINE = Machine(cpu_model="Test CPU", sockets=1, cores=2, threads_per_core=1, logical_cpus=2,
                  nominal_freq_hz=2.5e9, kernel="Linux 6", hostname="h")
CONFIG = {"cores": [1, 2], "reps": 2, "warmup": 1, "planned_runs": 6, "measured_runs": 4, "order": "socket"}


def rec(slot, cores, rep, warmup=False, status="ok", **values):
    r = store.RunRecord(slot=slot, cores=cores, repetition=rep, warmup=warmup, cpus=list(range(cores)),
                        argv=["prog", str(cores)], status=status, started_at=time.time(), finished_at=time.time())
    r.values = values
    if status != "ok":
        r.exit_status = 139 if status == "crashed" else 1
        r.signal = 11 if status == "crashed" else None
        r.message = "killed by SIGSEGV" if status == "crashed" else "exit status 1"
        r.stderr_tail = "boom"
    else:
        r.exit_status = 0
    return r


COLS = [ColumnInfo("time_s", "time", "s", "measured: wall clock", "ok"),
        ColumnInfo("lock_wait_cycles", "stall", "cycles", "measured: shim", "ok"),
        ColumnInfo("cycles", "counter", "count", "perf: cycles", "not supported")]


def make(tmp_path) -> Path:
    path = tmp_path / "c.db"
    with store.Campaign.create(path, command=["prog", "{cores}"], config=CONFIG, machine=MACHINE.to_dict(),
                               topology={"pus": []}) as c:
        c.record_run(rec(0, 1, 0, warmup=True, time_s=9.0), COLS)
        c.record_run(rec(1, 2, 0, warmup=True, time_s=9.0))
        c.record_run(rec(2, 1, 0, time_s=2.0, lock_wait_cycles=0.0, cycles=None))
        c.record_run(rec(3, 2, 0, time_s=1.1, lock_wait_cycles=5e6, cycles=None))
        c.record_run(rec(4, 2, 1, status="crashed", time_s=0.3, lock_wait_cycles=1.0))
        c.add_notice("no hardware PMU")
    return path


def test_dataset_from_campaign(tmp_path):
    ds = dataset.load(make(tmp_path))       # dispatched by content to store.load_dataset
    assert list(ds.cores) == [1, 2, 2]      # warm-ups left out, plan order
    assert list(ds.repetition) == [0, 0, 1]
    assert ds.metrics["time_s"][:2].tolist() == [2.0, 1.1]
    # the failed run stays a row, with its exit status and no metric values
    assert np.isnan(ds.metrics["time_s"][2]) and np.isnan(ds.metrics["lock_wait_cycles"][2])
    assert ds.metrics["exit_status"].tolist() == [0, 0, 139]
    assert ds.columns["time_s"].kind == "time" and ds.columns["time_s"].unit == "s"
    assert ds.columns["lock_wait_cycles"].kind == "stall" and ds.columns["lock_wait_cycles"].source == "measured: shim"
    assert ds.columns["cycles"].status == "not supported"
    assert ds.columns["exit_status"].kind == "other"
    assert ds.stall_names == ["lock_wait_cycles"]
    assert ds.machine.cpu_model == "Test CPU" and ds.machine.nominal_freq_hz == 2.5e9
    assert ds.command == "prog '{cores}'"
    assert ds.corecast_version
    assert ds.notes["failed_runs"][0]["status"] == "crashed"
    assert ds.notes["notices"] == ["no hardware PMU"]
    assert ds.notes["campaign"]["complete"] is False and ds.notes["campaign"]["planned"] == 4


def test_failed_run_does_not_poison_aggregates(tmp_path):
    ds = dataset.read_campaign(make(tmp_path))
    agg = ds.aggregate("time_s")
    assert agg.value.tolist() == [2.0, 1.1] and agg.count.tolist() == [1, 1]
    cores, x, how = ds.throughput()
    assert cores.tolist() == [1, 2] and how == "1/time_s"


def test_export_round_trip_keeps_failed_rows(tmp_path):
    ds = dataset.read_campaign(make(tmp_path))
    csv_path = tmp_path / "d.csv"
    ds.to_csv(csv_path)
    text = csv_path.read_text()
    assert "exit_status" in text.splitlines()[0]              # a plain CSV: the header first
    assert dataset.sidecar_path(csv_path).exists()            # the metadata beside it
    back = dataset.load(csv_path)
    assert len(back) == 3 and back.metrics["exit_status"][2] == 139 and np.isnan(back.metrics["time_s"][2])
    assert back.columns["lock_wait_cycles"].kind == "stall" and back.machine.cores == 2
    js = json.loads(ds.to_json())
    assert js["rows"][2]["time_s"] is None


def test_slot_is_recorded_once(tmp_path):
    path = make(tmp_path)
    with store.Campaign.open(path) as c:
        with pytest.raises(UserError, match="already in the campaign"):
            c.record_run(rec(2, 1, 0, time_s=5.0))
        assert c.done_slots() == {0, 1, 2, 3, 4}
    assert dataset.read_campaign(path).metrics["time_s"][0] == 2.0


def test_one_writer_at_a_time(tmp_path):
    path = make(tmp_path)
    with store.Campaign.open(path):
        with pytest.raises(UserError, match="another corecast measure"):
            store.Campaign.open(path)
        dataset.read_campaign(path)             # readers are fine


def test_create_refuses_existing_file(tmp_path):
    path = make(tmp_path)
    with pytest.raises(UserError, match="already exists.*--resume"):
        store.Campaign.create(path, command=["x"], config={}, machine=MACHINE.to_dict())


def test_not_a_campaign(tmp_path):
    p = tmp_path / "other.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t(x)")
    con.commit()
    con.close()
    with pytest.raises(UserError, match="not a corecast campaign|not a readable"):
        dataset.load(p)
    q = tmp_path / "text.db"
    q.write_text("hello")
    with pytest.raises(UserError, match="not SQLite"):
        dataset.read_campaign(q)
    with pytest.raises(UserError, match="no such campaign"):
        dataset.read_campaign(tmp_path / "missing.db")


def test_empty_campaign(tmp_path):
    path = tmp_path / "e.db"
    store.Campaign.create(path, command=["x"], config={}, machine=MACHINE.to_dict()).close()
    with pytest.raises(UserError, match="no finished runs"):
        dataset.read_campaign(path)


def _slots(path: Path) -> list[tuple]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT slot, started_at, finished_at, status FROM runs ORDER BY slot").fetchall()
    except sqlite3.Error:
        return []
    finally:
        con.close()


@pytest.mark.slow
def test_sigkill_mid_campaign_then_resume(tmp_path):
    """SIGKILL the runner while runs are going on: every run finished before the kill is there
    once and unchanged after --resume, and the campaign ends complete, no slot repeated."""
    path = tmp_path / "k.db"
    cmd = [sys.executable, "-m", "corecast", "measure", "--cores", "1,2", "--reps", "4", "--warmup", "1", "-q",
           "--no-shim", "-o", str(path), "--", "sh", "-c", "sleep 0.15; echo done {cores}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=tmp_path)
    deadline = time.time() + 60
    before: list[tuple] = []
    while time.time() < deadline:
        before = _slots(path) if path.exists() else []
        if len(before) >= 4:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(before) >= 4, proc.stderr.read().decode()
    killed_at = _slots(path)
    assert len(killed_at) < 10, "the campaign finished before it could be killed"
    # resume: the command may be left out
    res = subprocess.run([sys.executable, "-m", "corecast", "measure", "--resume", "-q", "-o", str(path)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert res.returncode == 0, res.stderr
    after = _slots(path)
    assert [r[0] for r in after] == list(range(10))           # 2 warm-ups + 8 measured, each once
    by_slot = {r[0]: r for r in after}
    for r in killed_at:
        assert by_slot[r[0]] == r                              # finished runs kept, not repeated
    assert all(r[3] == "ok" for r in after)
    ds = dataset.read_campaign(path)
    assert len(ds) == 8 and ds.notes["campaign"]["complete"]
    assert sorted(zip(ds.cores.tolist(), ds.repetition.tolist())) == [(c, r) for c in (1, 2) for r in range(4)]


def test_resume_refuses_other_command_or_options(tmp_path, cli):
    path = tmp_path / "r.db"
    r = cli("measure", "--cores", "1", "--reps", "1", "--warmup", "0", "-q", "--no-shim", "-o", path, "--", "true")
    assert r.code == 0, r.err
    r = cli("measure", "--resume", "-q", "-o", path, "--", "false")
    assert r.code == 2 and "measures `true`, not `false`" in r.err
    r = cli("measure", "--resume", "--reps", "5", "-o", path)
    assert r.code == 2 and "drop --reps" in r.err
    r = cli("measure", "--resume", "-q", "-o", path)     # nothing left to do: fine
    assert r.code == 0
    assert len(dataset.read_campaign(path)) == 1


# ---------------------------------------------------------------- half-made files (issue 15)
def _create(path):
    return store.Campaign.create(path, command=["prog"], config=CONFIG, machine=MACHINE.to_dict())


@pytest.mark.parametrize("kind", ["empty", "schema only"])
def test_half_created_campaign_is_recognised_and_replaced(tmp_path, kind):
    path = tmp_path / "h.db"
    if kind == "empty":
        path.write_bytes(b"")
    else:                                   # what a SIGKILL between schema and metadata left
        con = sqlite3.connect(path)
        con.executescript(store.SCHEMA)
        con.close()
    assert store.half_created(path)
    with pytest.raises(UserError, match="creation never finished.*without --resume"):
        store.Campaign.open(path)
    with _create(path) as c:
        c.record_run(rec(0, 1, 0, time_s=1.0), COLS)
    assert not store.half_created(path)
    assert len(dataset.load(path)) == 1


def test_other_files_are_never_taken_for_half_created(tmp_path):
    foreign = tmp_path / "other.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE accounts(id INTEGER)")
    con.close()
    text = tmp_path / "notes.csv"
    text.write_text("cores,time_s\n1,2\n")
    for p in (foreign, text, make(tmp_path)):
        assert not store.half_created(p)
        with pytest.raises(UserError, match="already exists"):
            _create(p)


def test_failed_creation_leaves_nothing(tmp_path, monkeypatch):
    import errno

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.os, "link", full)
    with pytest.raises(UserError, match="cannot create the campaign file.*No space left"):
        _create(tmp_path / "n.db")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_file_locked_by_another_program_is_announced_not_waited_for_in_silence(tmp_path, monkeypatch, capsys):
    path = make(tmp_path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA journal_mode=DELETE")
    other.execute("BEGIN EXCLUSIVE")
    monkeypatch.setattr(store, "LOCK_WAIT_S", 0.5)
    try:
        with pytest.raises(UserError, match="still locked by another program after 0.5 s"):
            dataset.read_campaign(path)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert "is locked by another program" in capsys.readouterr().err
    assert len(dataset.read_campaign(path)) == 3                # and read once the lock is gone
