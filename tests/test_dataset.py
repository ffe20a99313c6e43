"""The Dataset: readers, writers, validation, aggregation."""
from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corecast import dataset as D
from corecast.errors import UserError


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_plain_header_is_enough(tmp_path):
    p = write(tmp_path, "x.csv", "cores,throughput\n1,10\n2,19.5\n4,35\n")
    ds = D.load(p)
    assert list(ds.cores) == [1, 2, 4]
    assert list(ds.column("throughput")) == [10, 19.5, 35]
    assert ds.columns["throughput"].kind == "throughput"
    assert ds.repetition is None and ds.size is None


def test_other_columns_are_stall_categories(tmp_path):
    p = write(tmp_path, "x.csv", "cores,time_s,lock_wait_cycles,rss_bytes,llc_stalls\n1,2,10,100,3\n")
    ds = D.load(p)
    assert ds.stall_names == ["lock_wait_cycles", "llc_stalls"]
    assert ds.columns["lock_wait_cycles"].unit == "cycles"
    assert ds.columns["rss_bytes"].kind == "memory"


def test_repetitions_aggregate_to_median_with_spread(tmp_path):
    p = write(tmp_path, "x.csv", "cores,repetition,time_s\n1,0,10\n1,1,12\n1,2,11\n2,0,6\n2,1,\n2,2,5\n")
    ds = D.load(p)
    agg = ds.aggregate("time_s")
    assert list(agg.cores) == [1, 2]
    assert list(agg.value) == [11, 5.5]
    assert list(agg.low) == [10, 5] and list(agg.high) == [12, 6]
    assert list(agg.count) == [3, 2]          # the empty cell is a missing value
    assert agg.std[0] == pytest.approx(1.0)


def test_time_becomes_throughput(tmp_path):
    p = write(tmp_path, "x.csv", "cores,time_s\n1,2\n2,1\n4,0.5\n")
    n, x, how = D.load(p).throughput()
    assert how == "1/time_s"
    assert list(x) == [0.5, 1.0, 2.0]


def test_zero_time_cannot_become_throughput(tmp_path):
    p = write(tmp_path, "x.csv", "cores,time_s\n1,2\n2,0\n")
    with pytest.raises(UserError, match=r"row 2: column 'time_s' must be > 0"):
        D.load(p).throughput()


def test_comments_and_blank_lines_are_skipped(tmp_path):
    p = write(tmp_path, "x.csv", "# measured on my laptop\n\ncores,throughput\n1,10\n\n# a comment\n2,20\n")
    assert list(D.load(p).cores) == [1, 2]


@pytest.mark.parametrize("text, message", [
    ("", r"x\.csv: empty file"),
    ("# only a comment\n", r"x\.csv: empty file"),
    ("cores,throughput\n", r"x\.csv: no data rows"),
    ("m,throughput\n1,2\n", r"x\.csv:1: no 'cores' column in the header \(columns: m, throughput\)"),
    ("threads,procs,throughput\n1,1,2\n", r"x\.csv:1: no 'cores' column .*threads and procs could each be the core count: name one 'cores'"),
    ("cores,throughput\n1,2\n2,abc\n", r"x\.csv:3: column 'throughput': 'abc' is not a number"),
    ("cores,throughput\n1,2\n2,nan\n", r"x\.csv:3: column 'throughput': 'nan' is not a finite number"),
    ("cores,throughput\n1,2\n2,inf\n", r"x\.csv:3: column 'throughput': 'inf' is not a finite number"),
    ("cores,throughput\n0,2\n", r"x\.csv:2: column 'cores': cores must be > 0"),
    ("cores,throughput\n-4,2\n", r"x\.csv:2: column 'cores': cores must be > 0"),
    ("cores,throughput\n,2\n", r"x\.csv:2: column 'cores': empty"),
    ("cores,throughput\n1,2,3\n", r"x\.csv:2: 3 fields, the header has 2"),
    ("cores,throughput,throughput\n1,2,3\n", r"x\.csv:1: column 'throughput' appears twice"),
    ("# c\ncores,x\n1,2\n\n2,y\n", r"x\.csv:5: column 'x': 'y' is not a number"),
    ("cores,repetition,x\n1,0.5,2\n", r"x\.csv:2: column 'repetition': repetition must be a whole number"),
    ("cores,size,x\n1,0,2\n", r"x\.csv:2: column 'size': size must be > 0"),
])
def test_bad_csv_names_file_line_and_column(tmp_path, text, message):
    p = write(tmp_path, "x.csv", text)
    with pytest.raises(UserError, match=message) as info:
        D.load(p)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("doc, message", [
    ("{", r"x\.json:1: not valid JSON"),
    ('{"rows": []}', r"'rows' must be a non-empty list"),
    ('{"format": "other", "rows": [{"cores": 1}]}', r"format 'other' is not a corecast dataset"),
    ('{"rows": [{"cores": 1, "x": 2}, {"x": 3}]}', r"rows\[1\] \(row 2\): no 'cores' value"),
    ('{"rows": [{"cores": 1, "x": "abc"}]}', r"rows\[0\] \(row 1\): column 'x': 'abc' is not a finite number"),
    ('{"rows": [{"cores": 1, "x": [1]}]}', r"column 'x': \[1\] is not a number"),
    ('{"rows": [{"cores": 0, "x": 1}]}', r"rows\[0\] \(row 1\): column 'cores': cores must be > 0"),
    ('{"rows": [{"cores": null, "x": 1}]}', r"column 'cores': null"),
    ('[{"cores": 1, "x": true}]', r"column 'x': true is not a number"),
    ('"hello"', r"expected a JSON object or a list of rows"),
])
def test_bad_json_names_row_and_column(tmp_path, doc, message):
    p = write(tmp_path, "x.json", doc)
    with pytest.raises(UserError, match=message):
        D.load(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        D.load(tmp_path / "absent.csv")
    with pytest.raises(UserError, match="is a directory"):
        D.load(tmp_path)


def test_unknown_metric_lists_what_there_is(tmp_path):
    ds = D.load(write(tmp_path, "x.csv", "cores,throughput,lock_s\n1,2,3\n"))
    with pytest.raises(UserError, match=r"unknown metric 'time' \(metrics in this file: throughput, lock_s\)"):
        ds.column("time")


def test_json_detected_by_content(tmp_path):
    p = write(tmp_path, "data.txt", '[{"cores": 1, "throughput": 5}, {"cores": 2, "throughput": 9}]')
    assert list(D.load(p).column("throughput")) == [5, 9]


def test_metadata_round_trips_through_csv_and_json(tmp_path):
    ds = D.Dataset(
        cores=[1, 1, 2, 2], repetition=[0, 1, 0, 1], size=[100, 100, 100, 100],
        metrics={"time_s": [2.0, 2.1, 1.1, np.nan], "lock_wait_cycles": [0, 0, 5e6, 6e6]},
        columns={"lock_wait_cycles": D.ColumnInfo("lock_wait_cycles", kind="stall", unit="cycles",
                                                  source="shim: pthread_mutex_lock")},
        machine=D.Machine(cpu_model="Test CPU", sockets=1, cores=2, threads_per_core=1, nominal_freq_hz=2.5e9),
        command="./bench -t {threads}", corecast_version="0.1.0", notes={"provenance": "unit test"})
    for name in ("d.csv", "d.json"):
        p = tmp_path / name
        ds.save(p)
        back = D.load(p)
        assert list(back.cores) == [1, 1, 2, 2]
        assert list(back.repetition) == [0, 1, 0, 1]
        assert list(back.size) == [100] * 4
        t = back.column("time_s")
        assert list(t[:3]) == [2.0, 2.1, 1.1] and math.isnan(t[3])
        info = back.columns["lock_wait_cycles"]
        assert (info.kind, info.unit, info.source) == ("stall", "cycles", "shim: pthread_mutex_lock")
        assert back.machine.cpu_model == "Test CPU" and back.machine.nominal_freq_hz == 2.5e9
        assert back.command == "./bench -t {threads}"
        assert back.notes == {"provenance": "unit test"}


def test_json_output_has_no_nan(tmp_path):
    ds = D.Dataset(cores=[1, 2], metrics={"x": [1.0, np.nan]})
    doc = json.loads(ds.to_json())
    assert doc["rows"][1]["x"] is None
    assert doc["format"] == "corecast-dataset"


def test_select_keeps_metadata():
    ds = D.Dataset(cores=[1, 2, 4], metrics={"x": [1, 2, 3]}, machine=D.Machine(cpu_model="M"))
    sub = ds.select(ds.cores <= 2)
    assert list(sub.column("x")) == [1, 2]
    assert sub.machine.cpu_model == "M"


finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 512), finite, st.one_of(st.none(), finite)), min_size=1, max_size=30))
def test_any_dataset_round_trips_exactly(tmp_path_factory, rows):
    tmp = tmp_path_factory.mktemp("rt")
    ds = D.Dataset(cores=[r[0] for r in rows],
                   metrics={"throughput": [r[1] for r in rows],
                            "stall_a": [np.nan if r[2] is None else r[2] for r in rows]})
    for name in ("a.csv", "a.json"):
        ds.save(tmp / name)
        back = D.load(tmp / name)
        assert np.array_equal(back.cores, ds.cores)
        for k in ds.metrics:
            assert np.array_equal(back.column(k), ds.column(k), equal_nan=True)


# ---------------------------------------------------------------- outputs other tools read (issue 15)
def test_exported_csv_loads_in_pandas_and_round_trips(cli, tmp_path):
    pd = pytest.importorskip("pandas")
    src = tmp_path / "in.json"
    src.write_text(json.dumps({"format": "corecast-dataset", "version": 1,
                               "machine": {"cpu_model": "X", "cores": 8},
                               "columns": {"lock_wait_cycles": {"kind": "stall", "unit": "cycles", "source": "shim"}},
                               "rows": [{"cores": c, "repetition": r, "time_s": 10 / c, "lock_wait_cycles": c * 1e6}
                                        for c in (1, 2, 4) for r in (0, 1)]}))
    out = tmp_path / "x.csv"
    r = cli("export", src, "-o", out)
    assert r.code == 0, r.err
    frame = pd.read_csv(out)
    assert frame.shape == (6, 4) and list(frame.columns) == ["cores", "repetition", "time_s", "lock_wait_cycles"]
    back = D.load(out)                                        # the sidecar brings the metadata back
    assert back.machine.cpu_model == "X" and back.columns["lock_wait_cycles"].unit == "cycles"
    r = cli("export", src, "--format", "records")
    assert pd.read_json(io.StringIO(r.out)).shape == (6, 4)
    r = cli("export", src, "--metadata", "inline")
    assert r.out.startswith("# corecast:")
    inline = tmp_path / "inline.csv"
    inline.write_text(r.out)
    assert D.load(inline).machine.cpu_model == "X"            # the old form is still read


@pytest.mark.parametrize("fmt", ["csv", "records"])
def test_usl_and_predict_tidy_tables_load_in_pandas(cli, fmt):
    pd = pytest.importorskip("pandas")
    data = Path(__file__).resolve().parent.parent / "data" / "usl" / "specsdm91.csv"
    read = (lambda t: pd.read_csv(io.StringIO(t))) if fmt == "csv" else (lambda t: pd.read_json(io.StringIO(t)))
    r = cli("usl", data, "--predict", "128,256", "--format", fmt)
    assert r.code == 0, r.err
    frame = read(r.out)
    doc = json.loads(cli("usl", data, "--predict", "128,256", "--json").out)
    assert len(frame) == len(doc["points"]) + 2                    # one row a measured point and a prediction
    assert list(frame["kind"]) == ["measured"] * len(doc["points"]) + ["predicted"] * 2
    assert frame["cores"].tolist()[-2:] == [128, 256]
    assert frame["throughput"].iloc[0] == pytest.approx(doc["points"][0]["throughput"])
    r = cli("predict", data, "--cores", "128,256", "--format", fmt)
    assert r.code == 0, r.err
    frame = read(r.out)
    doc = json.loads(cli("predict", data, "--cores", "128,256", "--json").out)
    assert frame.shape == (2, 7) and frame["cores"].tolist() == [128, 256]
    assert frame["throughput"].tolist() == pytest.approx([p["throughput"] for p in doc["predictions"]])
    assert (frame["low"] <= frame["throughput"]).all() and (frame["throughput"] <= frame["high"]).all()


def test_csv_with_a_byte_order_mark(tmp_path):
    p = tmp_path / "bom.csv"
    p.write_bytes("\ufeffcores,throughput\n1,10\n2,19\n".encode("utf-8"))
    d = D.load(p)
    assert list(d.cores) == [1, 2] and "throughput" in d.metrics


def test_a_fifo_without_a_writer_does_not_hang(tmp_path):
    import os
    f = tmp_path / "fifo"
    os.mkfifo(f)
    with pytest.raises(UserError, match="empty file"):
        D.load(f)


PLANTED_META = json.dumps({"format": "corecast-dataset", "version": 1,
                           "columns": {"throughput": {"kind": "time", "unit": "s", "status": "ok"}}})


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: gives the sidecar to another uid (chown)")
def test_a_sidecar_of_another_user_beside_a_csv_is_refused_not_read(tmp_path):
    """In /tmp another user could put `d.csv.meta.json` beside root's plain CSV and make its
    throughput a time (`usl` then fitted 1/throughput); the sidecar is read only when owned by
    the CSV's owner, the reader or root -- the name and what a link there leads to."""
    csv_ = write(tmp_path, "d.csv", "cores,throughput\n1,100\n2,190\n4,350\n")
    side = write(tmp_path, "d.csv.meta.json", PLANTED_META)
    assert D.load(csv_).columns["throughput"].kind == "time"         # the CSV's owner's own: read
    os.chown(side, 54321, 54321)
    with pytest.raises(UserError, match=r"d\.csv\.meta\.json: owned by uid 54321, not by the owner of .*d\.csv "
                                        r"\(uid 0\): its metadata is not read"):
        D.load(csv_)
    os.chown(csv_, 54321, 54321)                                        # the CSV's owner's own again
    assert D.load(csv_).columns["throughput"].kind == "time"
    os.chown(csv_, 0, 0)
    side.unlink()
    target = write(tmp_path, "root.json", PLANTED_META)                 # a link of another user's to root's file
    side.symlink_to(target)
    os.lchown(side, 54321, 54321)
    with pytest.raises(UserError, match="owned by uid 54321"):
        D.load(csv_)
    side.unlink()
    assert D.load(csv_).columns["throughput"].kind == "throughput"      # no sidecar: the header's names
