"""The `Source` seam of `measure` (issue 27): every stall or metric source of a run is one class
behind one protocol, listed in one registry; a new source is one class and one registry line,
and its column, its provenance, its side table and its option reach the campaign file."""
from __future__ import annotations

import importlib
import inspect
import sys

import pytest

from corecast import dataset, store
from corecast.collect import runner, runsources
from corecast.collect.source import Option, Source

TOY = '''
"""A toy stall source: counts the lines "wait" the program prints, times --toy-scale."""
from corecast.collect.runsources import register
from corecast.collect.source import Collected, Option, Source
from corecast.dataset import ColumnInfo


class ToyStall(Source):
    name = "toy"
    options = (Option("toy_scale", "--toy-scale", 1.0, (int, float), metavar="X", convert=float,
                      help="cycles per 'wait' line"),)

    def __init__(self, scale):
        self.scale = scale
        self.pid = None

    @classmethod
    def create(cls, cfg, host):
        return cls(cfg.option("toy_scale"))

    def prepare(self, run):
        run.env["TOY_PREPARED"] = "yes"

    def start(self, run):
        self.pid = run.pid

    def collect(self, run):
        n = run.stdout.count("wait")
        return Collected(
            {"toy_wait_cycles": n * self.scale},
            [ColumnInfo(name="toy_wait_cycles", kind="stall", unit="cycles", source="measured: the toy source",
                        status="ok", description="cycles the toy says the program waited")],
            provenance={"toy": {"pid": self.pid, "lines": n}},
            tables={"toy_locks": [{"lock": "a", "waits": n}, {"lock": "b", "waits": 2 * n}]})


register(ToyStall)
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toy_source.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("toy_source")
    try:
        yield mod.ToyStall
    finally:
        runsources.unregister(mod.ToyStall)
        sys.modules.pop("toy_source", None)


def test_a_toy_source_reaches_the_campaign_file_end_to_end(cli, tmp_path, toy):
    assert toy in runsources.SOURCES
    out = tmp_path / "toy.db"
    r = cli("measure", "-q", "--cores", "1", "--reps", "2", "--warmup", "0", "--no-shim", "--toy-scale", "10",
            "-o", out, "--", "sh", "-c", 'test "$TOY_PREPARED" = yes && echo wait && echo wait')
    assert r.code == 0, r.err
    ds = dataset.read_campaign(out)
    assert ds.metrics["toy_wait_cycles"].tolist() == [20.0, 20.0]        # 2 lines x --toy-scale 10
    assert ds.columns["toy_wait_cycles"].kind == "stall" and "toy_wait_cycles" in ds.stall_names
    with store.Campaign.open(out, write=False) as c:
        runs = c.runs()
        assert [x["details"]["toy"]["lines"] for x in runs] == [2, 2]
        assert all(x["details"]["toy"]["pid"] > 0 for x in runs)          # start() saw the program's pid
        rows = c.run_tables("toy_locks")
        assert rows == [{"slot": s, "lock": k, "waits": w} for s in (0, 1) for k, w in (("a", 2), ("b", 4))]
        assert c.meta()["config"]["toy_scale"] == 10.0                  # the option is a stored setting
        assert list(c.columns())[-1] == "toy_wait_cycles"               # after the built-in sources


def test_a_source_s_setting_is_used_again_on_resume(cli, tmp_path, toy):
    out = tmp_path / "toy.db"
    r = cli("measure", "-q", "--cores", "1", "--reps", "2", "--warmup", "0", "--no-shim", "--toy-scale", "3",
            "-o", out, "--", "sh", "-c", "echo wait")
    assert r.code == 0, r.err
    import sqlite3
    con = sqlite3.connect(out)
    con.execute("DELETE FROM run_values WHERE slot = 1")
    con.execute("DELETE FROM run_tables WHERE slot = 1")
    con.execute("DELETE FROM runs WHERE slot = 1")
    con.commit()
    con.close()
    r = cli("measure", "-q", "--resume", "-o", out)
    assert r.code == 0, r.err
    assert dataset.read_campaign(out).metrics["toy_wait_cycles"].tolist() == [3.0, 3.0]
    r = cli("measure", "-q", "--resume", "--toy-scale", "4", "-o", out)
    assert r.code == 2 and "drop --toy-scale" in r.err


def test_a_damaged_source_setting_is_refused_on_resume(cli, tmp_path, toy):
    out = tmp_path / "toy.db"
    r = cli("measure", "-q", "--cores", "1", "--reps", "1", "--warmup", "0", "--no-shim", "-o", out, "--", "true")
    assert r.code == 0, r.err
    import json
    import sqlite3
    con = sqlite3.connect(out)
    cfg = json.loads(con.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])
    cfg["toy_scale"] = "lots"
    con.execute("UPDATE meta SET value = ? WHERE key = 'config'", (json.dumps(cfg),))
    con.commit()
    con.close()
    r = cli("measure", "-q", "--resume", "-o", out)
    assert r.code == 2 and "toy_scale" in r.err and len(r.err.strip().splitlines()) == 1


def test_every_registered_source_follows_the_protocol():
    """The registry is the one list: each entry a Source with a name, options whose setting
    keys and flags are unique, and hooks a runner can call."""
    assert len({cls.name for cls in runsources.SOURCES}) == len(runsources.SOURCES)
    opts = runsources.options()
    assert len({o.key for o in opts}) == len(opts) and len({o.flag for o in opts}) == len(opts)
    core = set(runner.CampaignConfig.__dataclass_fields__)
    for cls in runsources.SOURCES:
        assert issubclass(cls, Source) and cls.name
        for hook in ("validate", "create", "prepare", "start", "sample", "stop", "collect"):
            assert callable(getattr(cls, hook))
        for o in cls.options:
            assert isinstance(o, Option) and o.key not in core and o.flag.startswith("--")


def test_the_runner_keeps_launch_wait_and_status_plus_one_loop():
    """Runner._execute: launch, wait, exit status, and the loops over the sources -- no source's
    own code (it was 234 lines with a block per source)."""
    src = inspect.getsource(runner.Runner._execute)
    assert len(src.splitlines()) < 120
    for word in ("psi", "shim", "throughput", "plugin", "schedstat", "counters"):
        assert word not in src.lower()


def test_side_tables_of_a_campaign_made_before_them(tmp_path):
    """A campaign file without run_tables reads as having none, and gets the table when it is
    opened to be continued."""
    import sqlite3
    p = tmp_path / "old.db"
    c = store.Campaign.create(p, command=["true"], config={"command": ["true"], "cores": [1]}, machine={})
    c.close()
    con = sqlite3.connect(p)
    con.execute("DROP TABLE run_tables")
    con.commit()
    con.close()
    with store.Campaign.open(p, write=False) as c:
        assert c.run_tables("x") == []
    with store.Campaign.open(p) as c:
        c.record_run(store.RunRecord(slot=0, cores=1, repetition=0, warmup=False, cpus=[0], argv=["true"],
                                     status="ok", tables={"x": [{"k": 1}]}))
        assert c.run_tables("x") == [{"slot": 0, "k": 1}]
