"""Tables from other tools: their column names read under corecast's (corecast.headers)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from corecast import dataset as D
from corecast.errors import UserError
from corecast.headers import canonical, norm


@pytest.mark.parametrize("header, names, scale", [
    (["threads", "time_ms"], ["cores", "time_s"], {"time_s": 1e-3}),
    (["Processors", "Throughput"], ["cores", "throughput"], {}),          # the R usl package's examples
    (["N", "X"], ["cores", "throughput"], {}),                             # Gunther's notation
    (["clients", "tps"], ["cores", "throughput"], {}),
    (["Threads", "Time (s)"], ["cores", "time_s"], {}),
    (["nprocs", "wall_time_us"], ["cores", "time_s"], {"time_s": 1e-6}),
    (["workers", "runtime_min"], ["cores", "time_s"], {"time_s": 60.0}),
    (["p", "Speedup"], ["cores", "throughput"], {}),
    (["nproc", "speedup"], ["cores", "throughput"], {}),                   # `nproc`'s own name
    (["Parallelism", "Elapsed (ms)"], ["cores", "time_s"], {"time_s": 1e-3}),
    (["threads", "Throughput (ops/s)"], ["cores", "throughput"], {}),
])
def test_other_names_are_read_as_corecasts(header, names, scale):
    r = canonical(header)
    assert r.names == names
    assert r.scale == scale
    assert r.read_as == {n: h for n, h in zip(names, header)}


def test_a_file_that_names_its_metric_keeps_its_other_columns():
    # 'wall' beside time_s is a stall category, 'elapsed' beside throughput too; only the
    # missing core count is found.
    assert canonical(["cores", "time_s", "wall"]).names == ["cores", "time_s", "wall"]
    assert canonical(["threads", "throughput", "elapsed"]).names == ["cores", "throughput", "elapsed"]
    assert canonical(["cores", "throughput"]).read_as == {}


def test_two_candidates_rename_neither():
    r = canonical(["threads", "procs", "time"])
    assert r.names == ["threads", "procs", "time_s"]
    assert r.ambiguous == {"cores": ["threads", "procs"]}
    r = canonical(["cores", "time", "runtime"])
    assert r.names == ["cores", "time", "runtime"] and r.ambiguous == {"time_s": ["time", "runtime"]}


def test_norm_drops_case_and_punctuation():
    assert norm(" Time (ms) ") == "time_ms"
    assert norm("ops/s") == "ops_s"
    assert norm("#Threads") == "threads"


def test_an_unknown_name_is_not_guessed():
    r = canonical(["m", "value"])
    assert r.names == ["m", "value"] and not r.read_as and not r.ambiguous


def test_a_tsv_in_milliseconds_reads_and_predicts_as_the_plain_csv(tmp_path, cli):
    plain = tmp_path / "plain.csv"
    plain.write_text("cores,time_s\n1,10\n2,5.3\n4,2.9\n8,1.7\n16,1.2\n")
    other = tmp_path / "other.tsv"
    other.write_text("Threads\tTime (ms)\n1\t10000\n2\t5300\n4\t2900\n8\t1700\n16\t1200\n")
    ds = D.load(other)
    assert list(ds.cores) == [1, 2, 4, 8, 16]
    np.testing.assert_allclose(ds.column("time_s"), [10, 5.3, 2.9, 1.7, 1.2])
    assert ds.notes["columns_read_as"] == {"cores": "Threads", "time_s": "Time (ms) x 0.001"}
    a = cli("predict", plain, "--cores", "32,64", "--json")
    b = cli("predict", other, "--cores", "32,64", "--json")
    assert a.code == b.code == 0
    assert "read column 'Threads' as cores, 'Time (ms)' as time_s (x 0.001)" in b.err
    assert [p["time_s"] for p in a.json()["predictions"]] == pytest.approx(
        [p["time_s"] for p in b.json()["predictions"]], rel=1e-12)


def test_semicolons_and_a_bare_json_list(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("clients;tps\n1;100\n2;190\n4;350\n")
    ds = D.load(p)
    assert list(ds.column("throughput")) == [100, 190, 350]
    j = tmp_path / "x.json"
    j.write_text(json.dumps([{"threads": 1, "runtime_ms": 1000}, {"threads": 2, "runtime_ms": 520}]))
    ds = D.load(j)
    assert list(ds.cores) == [1, 2]
    np.testing.assert_allclose(ds.column("time_s"), [1.0, 0.52])
    # a saved copy keeps what was read as what
    assert json.loads(ds.to_json())["notes"]["columns_read_as"]["time_s"] == "runtime_ms x 0.001"


def test_errors_name_the_files_own_column(tmp_path, cli):
    p = tmp_path / "x.csv"
    p.write_text("threads,time_ms\n1,10\n2,abc\n")
    r = cli("predict", p, "--cores", "8")
    assert r.code == 2
    assert "x.csv:3: column 'time_ms': 'abc' is not a number" in r.err
    p.write_text("threads,procs,time\n1,1,10\n2,2,5\n")
    r = cli("predict", p, "--cores", "8")
    assert r.code == 2 and "threads and procs could each be the core count: name one 'cores'" in r.err
    assert "Traceback" not in r.err


def test_a_run_index_is_the_repetition_not_a_stall_category(tmp_path):
    p = tmp_path / "x.csv"
    p.write_text("threads,run,seconds\n1,0,10\n1,1,10.4\n2,0,5.2\n2,1,5.4\n")
    ds = D.load(p)
    assert list(ds.repetition) == [0, 1, 0, 1]
    assert ds.stall_names == []
    np.testing.assert_allclose(ds.aggregate("time_s").value, [10.2, 5.3])


def test_a_file_with_corecasts_metadata_is_read_as_written(tmp_path):
    # a meters recording names a column elapsed_s and has no time_s: it is not a run time
    p = tmp_path / "x.csv"
    p.write_text('# corecast: {"columns": {}}\ncores,elapsed_s\n1,0.5\n2,1.0\n')
    assert D.load(p).metric_names == ["elapsed_s"]
    p.write_text("cores,elapsed_s\n1,0.5\n2,1.0\n")
    assert D.load(p).metric_names == ["time_s"]
    j = tmp_path / "x.json"
    j.write_text(json.dumps({"format": "corecast-dataset", "version": 1, "rows": [{"threads": 1, "runtime": 2}]}))
    with pytest.raises(UserError, match="no 'cores' value"):
        D.load(j)
