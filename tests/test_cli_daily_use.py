"""What a user reads in daily use of measure, info and predict: counts that agree with each
other, a resumed campaign that wrote nothing saying so, sources that do not claim a measurement
no run made, an option typo named by its command, shares written as percentages."""
from __future__ import annotations

import json
import re

from corecast import dataset
from corecast.report import documents, info, terminal


def _measure(cli, path, *args):
    return cli("measure", "--cores", "1", "--reps", "1", "--no-shim", "-o", path, *args)


def test_failed_runs_count_warmups_apart_from_the_recorded_runs(cli, tmp_path):
    # `measure --cores 1,2 --reps 1 -- false` said "4 run(s) failed in this session" and
    # "wrote f.db: 2 run(s) recorded": the warm-ups were counted in one and not the other.
    p = tmp_path / "f.db"
    r = _measure(cli, p, "--warmup", "1", "--", "false")
    assert r.code == 1
    assert "1 run(s) and 1 warm-up run(s) failed in this session" in r.out
    assert "2 run(s) failed" not in r.out
    assert "1 run(s) recorded" in r.err


def test_failed_runs_without_warmups_say_no_warmups(cli, tmp_path):
    r = _measure(cli, tmp_path / "g.db", "--warmup", "0", "--", "false")
    assert r.code == 1
    assert "1 run(s) failed in this session" in r.out and "warm-up" not in r.out


def test_resume_with_nothing_left_says_so_and_names_no_file_written(cli, tmp_path):
    p = tmp_path / "done.db"
    r = _measure(cli, p, "--warmup", "0", "--", "true")
    assert r.code == 0, r.err
    r = cli("measure", "--resume", "-o", p)
    assert r.code == 0, r.err
    assert "nothing left to run" in r.err and "1 run(s) were already recorded" in r.err
    assert "wrote" not in r.err
    assert "nothing left" not in cli("measure", "--resume", "-q", "-o", p).err   # -q: no notes


def _json_dataset(tmp_path):
    doc = {"format": "corecast-dataset", "version": 1,
           "columns": {"time_s": {"kind": "time", "unit": "s", "source": "measured: wall clock"},
                       "stall_x": {"kind": "stall", "unit": "cycles", "status": "not supported",
                                   "source": "measured: perf backend-stall event stall_x [event=0xae,umask=0x1]"}},
           "rows": [{"cores": 1, "time_s": 2.0, "stall_x": None},
                    {"cores": 2, "time_s": 1.1, "stall_x": None}]}
    p = tmp_path / "d.json"
    p.write_text(json.dumps(doc))
    return p


def test_info_does_not_call_an_unsupported_column_measured(cli, tmp_path):
    r = cli("info", _json_dataset(tmp_path))
    assert r.code == 0, r.err
    line = next(x for x in r.out.splitlines() if x.strip().startswith("stall_x:"))
    assert "measured" not in line
    assert line.strip() == ("stall_x: not supported, no value: perf backend-stall event stall_x "
                            "[event=0xae,umask=0x1]")
    assert "time_s: measured: wall clock" in r.out          # a column with values keeps its source


def test_info_names_one_core_in_the_singular(tmp_path):
    data = dataset.load(_json_dataset(tmp_path))
    s = documents.dataset_summary(data)
    s["tables"] = {"locks": {"rows": 1, "busiest": [
        {"site": "pool.c:41 worker", "call": "pthread_mutex_lock", "per_cores": [{"cores": 1, "wait_share": 0.25}]}]}}
    con = terminal.console()
    with con.capture() as cap:
        info.render_terminal(s, data, con)
    out = cap.get()
    assert "waits 25.0% of thread time at 1 core" in out and "1 cores" not in out


def test_an_unknown_option_is_named_by_its_command(cli, tmp_path):
    # It said "corecast: error: unrecognized arguments: --cors" of `corecast measure --cors 1,2`.
    r = cli("measure", "--cors", "1,2", "-o", tmp_path / "x.db", "--", "true")
    assert r.code == 2
    assert r.err.strip() == "corecast measure: error: unrecognized arguments: --cors"
    assert not (tmp_path / "x.db").exists()
    r = cli("predict", tmp_path / "x.db", "--cores", "4", "--targt-machine", "cpus=64")
    assert r.code == 2
    assert r.err.strip() == "corecast predict: error: unrecognized arguments: --targt-machine cpus=64"
    r = cli("--bogus")
    assert r.code == 2 and r.err.strip() == "corecast: error: unrecognized arguments: --bogus"
    # the program's own options, after --, are the program's
    r = cli("measure", "--cores", "1", "--reps", "1", "--warmup", "0", "--no-shim", "-q",
            "-o", tmp_path / "y.db", "--", "echo", "--cors")
    assert r.code == 0, r.err


def test_bottleneck_shares_are_percentages(cli, tmp_path):
    # The shares were printed raw: "1" beside "6.421e-06" in the same column.
    p = tmp_path / "s.csv"
    rows = ["cores,time_s,lock_wait,tiny_stall"]
    for n in range(1, 11):
        rows.append(f"{n},{100.0 / n + 0.2 * n:.6g},{0.2 * n * n * 1e9:.6g},{1e3 * n:.6g}")
    p.write_text("\n".join(rows) + "\n")
    r = cli("predict", p, "--cores", "20,40", "--method", "estima")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("Bottlenecks"))
    body = [x for x in lines[start + 3:] if re.match(r"\s*\d+ │", x)]
    assert body
    for row in body:
        cells = [c.strip() for c in row.split("│")]
        share_now, share_at = cells[4], cells[5]
        for v in (share_now, share_at):
            assert re.fullmatch(r"(<1|\d+)%|-", v), row
    tiny = next(row for row in body if "tiny_stall" in row)
    assert "<1%" in tiny


def test_a_campaign_records_an_event_that_gave_no_value_as_asked_for(cli, tmp_path):
    # the column's source in the campaign (info --json, export) said "measured: perf ..." of an
    # event that counted nothing; on a machine with a PMU some events still fail (a model
    # without them): the one with a value says measured, the one without says asked for
    r = cli("measure", "--cores", "1", "--reps", "1", "--no-shim", "--events", "task-clock,cycles",
            "-o", tmp_path / "t.db", "--", "true")
    assert r.code == 0, r.err
    cols = {c["name"]: c for c in json.loads(cli("info", tmp_path / "t.db", "--json").out)["columns"]}
    assert cols, cols
    for c in cols.values():
        if c.get("status") in ("not supported", "unavailable", "denied"):
            assert not c["source"].startswith("measured"), c
    assert any((c.get("source") or "").startswith("measured: perf") for c in cols.values()), cols


def test_the_time_range_is_not_joined_by_a_hyphen():
    # "9.538e-04-9.538e-04": a hyphen between numbers in scientific notation reads as a minus
    from corecast.report import campaign
    ds = dataset.Dataset(cores=[1.0, 1.0, 2.0], metrics={"time_s": [9.538e-4, 1.2e-3, 5e-4]})
    con = terminal.console()
    with con.capture() as cap:
        campaign.render_summary(ds, con)
    out = cap.get()
    assert "9.538e-04 – 0.0012" in out or "9.538e-04 – 1.2e-03" in out, out
    assert not re.search(r"e-0\d-\d", out), out
