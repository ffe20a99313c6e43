"""Machine descriptions for prediction (corecast.target) and the corpus (corecast.model.corpus)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from corecast import target as T
from corecast.errors import UserError

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "target"
ROOT = HERE.parent

TWO_SOCKET_SMT_XML = """<?xml version="1.0" encoding="UTF-8"?>
<topology version="2.0"><object type="Machine">""" + "".join(
    f'<object type="Package" os_index="{p}"><info name="CPUModel" value="Test Xeon"/>'
    f'<object type="NUMANode" os_index="{p}"/>'
    + "".join(f'<object type="Core"><object type="PU" os_index="{p * 8 + c * 2}"/>'
              f'<object type="PU" os_index="{p * 8 + c * 2 + 1}"/></object>' for c in range(4))
    + "</object>" for p in range(2)) + "</object></topology>"


@pytest.mark.parametrize("name", ["vm-lstopo.xml", "vm-lscpu.json", "vm-lscpu.txt"])
def test_this_machine_captured_three_ways(name):
    m = T.parse_spec(str(DATA / name))
    assert (m.sockets, m.cores_per_socket, m.threads_per_core, m.cpus) == (1, 2, 1, 2)
    assert "EPYC" in m.model


def test_hwloc_xml_of_a_two_socket_smt_machine(tmp_path):
    p = tmp_path / "t.xml"
    p.write_text(TWO_SOCKET_SMT_XML)
    m = T.parse_spec(str(p))
    assert (m.sockets, m.cores_per_socket, m.threads_per_core, m.numa_nodes, m.model) == (2, 4, 2, 2, "Test Xeon")


def test_inline_and_bundled_forms():
    m = T.parse_spec("sockets=2,cores=32,smt=2,ghz=2.4")
    assert (m.cores, m.cpus, m.ghz) == (64, 128, 2.4)
    c = T.parse_spec("cpus=64")
    assert c.cpus == 64 and c.known == "cpus" and "topology unknown" in c.describe()
    assert {"xeon-e7-8880v4-4s", "epyc-9654-2s"} <= set(T.bundled())
    x = T.parse_spec("xeon-e7-8880v4-4s")
    assert (x.sockets, x.cores_per_socket, x.threads_per_core, x.ghz) == (4, 22, 2, 2.2)


def test_inline_keys_as_the_machine_description_and_lscpu_name_them():
    want = T.parse_spec("sockets=2,cores=12,smt=2,numa=2")
    for text in ("sockets=2,cores_per_socket=12,threads_per_core=2,numa_nodes=2",
                 "Socket(s)=2,Core(s) per socket=12,Thread(s) per core=2,NUMA node(s)=2",
                 "Sockets=2, Cores=12, SMT=2, NUMA=2"):
        m = T.parse_spec(text)
        assert (m.sockets, m.cores_per_socket, m.threads_per_core, m.numa_nodes, m.known) == \
            (2, 12, 2, 2, want.known), text
    assert T.parse_spec("logical_cpus=48").cpus == 48 and T.parse_spec("logical_cpus=48").known == "cpus"
    with pytest.raises(UserError, match="threads= is ambiguous: smt= .threads per core. or cpus= .logical CPUs."):
        T.parse_spec("threads=48")
    with pytest.raises(UserError, match="cores_per_socket= is given twice|cores= is given twice"):
        T.parse_spec("cores=12,cores_per_socket=12")


def test_cpus_with_the_part_of_the_topology_a_source_states():
    # "80 logical CPUs, 2-way SMT" and "2 sockets, 128 CPUs": the cores are what the CPUs leave
    cases = {"cpus=80,smt=2": (1, 40, 2, None), "cpus=128,sockets=2": (2, 64, 1, None),
             "cpus=80,sockets=2,smt=2,numa=2": (2, 20, 2, 2), "cpus=80,sockets=2,cores=20,smt=2": (2, 20, 2, None),
             "cpus=64,numa=4": (1, 64, 1, 4)}
    for text, want in cases.items():
        m = T.parse_spec(text)
        assert (m.sockets, m.cores_per_socket, m.threads_per_core, m.numa_nodes) == want, text
        assert m.known == "topology" and m.cpus == m.sockets * m.cores_per_socket * m.threads_per_core
    assert T.parse_spec("cpus=64,ghz=2.5").known == "cpus"        # the clock says nothing of the topology


def test_calibration_json(tmp_path):
    p = tmp_path / "target.json"
    p.write_text('{"kind": "corecast-target", "version": 1, "machine": {"sockets": 2, "cores_per_socket": 8, '
                 '"threads_per_core": 2, "numa_nodes": 2, "cpus": 32, "ghz": null, "model": "M"}, '
                 '"core_to_core_ns": {"smt": 12.0, "same_socket": 40.0, "cross_socket": 110.0, "pairs": []}, '
                 '"memory": null}')
    m = T.parse_spec(str(p))
    assert m.cpus == 32 and m.calibration["core_to_core_ns"]["cross_socket"] == 110.0


@pytest.mark.parametrize("spec, message", [
    ("sockets=2,smt=2", "cores= .per socket. is needed"),
    ("cores=8,wings=2", "unknown key 'wings'"),
    ("cores=eight", "not a whole number"),
    ("cpus=65,smt=2", "cpus=65 is not a whole number of cores for 1 socket.s. × 2 thread.s. per core"),
    ("cpus=80,cores=10,smt=2", "1 socket.s. × 10 cores × 2 thread.s. is 20 CPUs, not cpus=80"),
    ("cpus=0", "cpus= must be a whole number of at least 1"),
    ("no-such-machine", "no such file, bundled name"),
    ("sockets=0,cores=8", "sockets must be a whole number of at least 1"),
])
def test_mistakes_are_one_line(spec, message):
    with pytest.raises(UserError, match=message):
        T.parse_spec(spec)


def test_bad_files(tmp_path):
    for body, message in (("<nope/>", "not hwloc's"), ("{\"a\": 1}", "neither `lscpu -J`"),
                          ("sockets = 2\n", "'cores_per_socket' is missing"), ("= =", "not a machine description")):
        p = tmp_path / "m.txt"
        p.write_text(body)
        with pytest.raises(UserError, match=message):
            T.parse_spec(str(p))


def test_placement_orders_on_two_sockets_with_smt():
    m = T.parse_spec("sockets=2,cores=4,smt=2")
    compact = [T.placement(m, n, "compact") for n in (4, 5, 8, 9, 16, 20)]
    assert [(p.sockets_used, p.smt_shared, p.oversubscribed) for p in compact] == [
        (1, False, False), (1, True, False), (1, True, False), (2, True, False), (2, True, False), (2, True, True)]
    assert compact[-1].runnable == 16 and compact[2].per_socket == [8, 0]
    spread = [T.placement(m, n, "spread") for n in (2, 8, 9)]
    assert [(p.sockets_used, p.smt_shared, p.cores_used) for p in spread] == [(2, False, 2), (2, False, 8), (2, True, 8)]
    smt_last = [T.placement(m, n, "smt-last") for n in (5, 8, 9)]
    assert [(p.sockets_used, p.smt_shared) for p in smt_last] == [(2, False), (2, False), (2, True)]
    assert T.placement(m, 5, "socket") == T.placement(m, 5, "compact")    # measure's name for it
    with pytest.raises(UserError, match="choose compact, spread, smt-last"):
        T.placement(m, 4, "random")


# ------------------------------------------------------------------ the corpus
def test_bundled_corpus_loads_with_its_machines():
    from corecast.model import corpus as C
    series = C.load_corpus(ROOT / "data" / "corpus")
    by = {}
    for s in series:
        by.setdefault(s.source, []).append(s)
    assert {k: len(v) for k, v in by.items()} == {
        "concmap": 15, "litl-a64": 45, "litl-i48": 37, "folly-sharedmutex": 38, "wiredtiger-read": 2,
        "concmap-xeon4314": 22, "mysql-sysbench-ro": 2, "percona-xeon6230": 17, "percona-meltdown-e5v3": 6,
        "uob-grace": 14, "uob-vera": 14, "uob-turin": 14, "uob-gnr": 14,
        "lfric-matvec-skl": 6, "julia-a64fx-bwbench": 7, "cpufun-tx2-minibude": 1,
        "usl-raytracer": 1, "usl-specsdm91": 1, "usl-clients-without-n1": 1, "cisco": 1, "postgres91": 1,
        "wavetrisk": 4, "atomicqueue-5950x": 11, "spice-c4": 4, "sandmark-navajo": 12, "sandmark-turing": 12,
        "xsync-c6g": 12, "jsonexp-9950x3d": 6, "berkeleydb-e5v2": 3,
        "ascylib-xeon20": 29, "ascylib-opteron48": 29, "ascylib-t44": 27,
        "rapidgzip-epyc7702": 11, "bowtie-scaling-knl": 18}
    assert by["cisco"][0].machine is None and by["wavetrisk"][0].machine is None
    assert by["concmap"][0].machine.cpus == 176 and by["litl-a64"][0].machine.cores == 64
    assert by["folly-sharedmutex"][0].machine.cpus == 32 and by["mysql-sysbench-ro"][0].machine.cpus == 56
    assert by["uob-gnr"][0].machine.cores == 96 and by["uob-gnr"][0].machine.threads_per_core == 2
    assert by["percona-xeon6230"][0].machine.cpus == 80 and by["percona-meltdown-e5v3"][0].machine.cpus == 48
    assert by["ascylib-t44"][0].machine.cpus == 256 and by["ascylib-t44"][0].machine.threads_per_core == 8
    assert by["ascylib-xeon20"][0].machine.cpus == 40 and by["ascylib-opteron48"][0].machine.cpus == 48
    assert C.train_max(np.array([8, 16, 24, 32, 40, 48, 56, 64.0]), 0.25) == 16
    assert C.train_max(np.array([12, 24, 36, 48.0]), 0.25) == 24      # never fewer than two points
    assert C.train_max(np.arange(1, 177.0), 0.25) == 44


def test_corpus_evaluation_scores_what_it_says(tmp_path):
    """The per-source figure is the median of each series' median error, computed here again
    from a plain USL fit of the same points."""
    from corecast.model import corpus as C
    from corecast.model import scorecard, usl
    src = tmp_path / "c" / "s1"
    src.mkdir(parents=True)
    (src / "source.toml").write_text('name = "s1"\nmachine = "sockets=1,cores=64"\n')
    rng = np.random.default_rng(5)
    n = np.arange(1, 33, dtype=float)
    expect = []
    for i, (a, b) in enumerate([(0.02, 0.0005), (0.05, 0.0), (0.01, 0.001)]):
        x = usl.usl(n, a, b, 100.0) * rng.normal(1, 0.02, len(n))
        (src / f"s{i}.csv").write_text("cores,throughput\n" + "".join(f"{c:g},{v:.6g}\n" for c, v in zip(n, x)))
        xr = np.array([float(f"{v:.6g}") for v in x])
        f = usl.fit(n[n <= 8], xr[n <= 8])
        expect.append(np.median(np.abs(usl.usl(n[n > 8], *f.params) / xr[n > 8] - 1) * 100))
    ev = scorecard.evaluate_corpus(C.load_corpus(tmp_path / "c"), ["usl", "auto"], train_frac=0.25)
    assert ev.sources[0].series == 3
    assert ev.sources[0].median_error["usl"] == pytest.approx(np.median(expect), rel=1e-6)
    assert 0 <= ev.sources[0].coverage["auto"] <= 1
    assert math.isfinite(ev.overall()["auto"])
    d = ev.to_dict()
    assert d["sources"][0]["source"] == "s1" and set(d["overall_median_abs_pct_error"]) == {"usl", "auto"}


def test_a_corpus_series_may_give_run_times(tmp_path, cli):
    """Strong-scaling run times (cores,time_s, repetitions allowed) are read as one run per
    second of the median time; a series with neither column is one line and status 2."""
    from corecast.model import corpus as C
    src = tmp_path / "c" / "t"
    src.mkdir(parents=True)
    (src / "a.csv").write_text("cores,time_s\n1,10\n1,12\n1,11\n2,5.5\n4,3\n8,2\n")
    s = C.load_corpus(tmp_path / "c")[0]
    assert list(s.cores) == [1, 2, 4, 8] and s.throughput == pytest.approx([1 / 11, 1 / 5.5, 1 / 3, 1 / 2])
    (src / "b.csv").write_text("cores,memory_bytes\n1,10\n2,20\n")
    r = cli("evaluate", "--corpus", tmp_path / "c")
    assert r.code == 2 and "needs a throughput or a time_s column" in r.err and len(r.err.strip().splitlines()) == 1


def test_corpus_cli(cli, tmp_path):
    r = cli("evaluate", "--corpus", tmp_path)
    assert r.code == 2 and "no series" in r.err
    r = cli("evaluate", "--corpus", ROOT / "data" / "corpus", "--train-frac", "1.5")
    assert r.code == 2 and "between 0 and 1" in r.err
    r = cli("evaluate", ROOT / "data" / "usl" / "specsdm91.csv")
    assert r.code == 2 and "--train-max-cores K is needed" in r.err
    r = cli("evaluate", "--corpus", ROOT / "data" / "corpus", "--target-machine", "cpus=4")
    assert r.code == 2 and "takes 'source'" in r.err
    r = cli("evaluate", ROOT / "data" / "usl" / "specsdm91.csv", "--train-max-cores", "72", "--leave-one-source-out")
    assert r.code == 2 and "goes with --corpus" in r.err
    r = cli("evaluate", "--corpus", ROOT / "data" / "corpus", "--methods", "auto,nosuch")
    assert r.code == 2 and "unknown method 'nosuch'" in r.err


def _two_sources(folder):
    """A corpus of two sources: 'up' scales on (the USL fits it), 'flat' saturates."""
    for name, rows in (("up", [(1, 100), (2, 198), (4, 390), (8, 760), (16, 1450), (32, 2700)]),
                       ("flat", [(1, 50), (2, 95), (4, 170), (8, 260), (16, 300), (32, 280)])):
        d = folder / name
        d.mkdir()
        (d / "s.csv").write_text("cores,throughput\n" + "".join(f"{c},{x}\n" for c, x in rows))


def test_corpus_cli_table_ends_with_the_geometric_mean_and_the_wins(cli, tmp_path):
    _two_sources(tmp_path)
    r = cli("evaluate", "--corpus", tmp_path, "--methods", "auto,usl", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    errs = {s["source"]: s["median_abs_pct_error"] for s in doc["sources"]}
    for m in ("auto", "usl"):
        want = float(np.sqrt(errs["up"][m] * errs["flat"][m]))
        assert doc["geometric_mean_on_common_sources"][m] == pytest.approx(want, rel=1e-3)
    r = cli("evaluate", "--corpus", tmp_path, "--methods", "auto,usl")
    assert "geometric mean, 2 sources" in r.out
    m = re.search(r"auto below usl in (\d) of the 2 sources both predicted, equal to the decimal in (\d), "
                  r"above in (\d)", r.out)
    # a win is below by more than half the table's last decimal (the JSON rounds to 0.001 points)
    clear = sum(errs[s]["auto"] < errs[s]["usl"] - 0.051 for s in errs)
    close = sum(errs[s]["auto"] < errs[s]["usl"] - 0.049 for s in errs)
    assert m and clear <= int(m.group(1)) <= close and sum(map(int, m.groups())) == 2, r.out
    h = doc["auto_against"]["usl"]
    assert (h["below"], h["equal"], h["above"]) == tuple(map(int, m.groups())) and h["sources"] == 2


def test_a_method_that_is_the_usl_ties_it_it_does_not_win():
    """Two methods that give the same curve differ by rounding: that is a tie. A win is below by
    more than half the printed decimal."""
    from corecast.model.scorecard import CorpusEvaluation, SourceScore
    errs = {"same": (17.70000001, 17.7), "close": (17.66, 17.7), "clear": (17.6, 17.7), "worse": (18.0, 17.7),
            "auto only": (5.0, None)}
    ev = CorpusEvaluation(methods=["auto", "usl"], train_frac=0.25, level=0.8, sources=[
        SourceScore(source=k, series=1, median_error={"auto": a} | ({"usl": u} if u is not None else {}),
                    coverage={}) for k, (a, u) in errs.items()])
    assert ev.wins("auto", "usl") == (1, 4)
    assert ev.head_to_head("auto", "usl") == {"below": 1, "equal": 2, "above": 1, "sources": 4, "margin_points": 0.05}


def test_corpus_cli_jobs_and_its_mistakes(cli, tmp_path):
    _two_sources(tmp_path)
    one = cli("evaluate", "--corpus", tmp_path, "--methods", "auto,usl", "--json", "--jobs", "1").json()
    two = cli("evaluate", "--corpus", tmp_path, "--methods", "auto,usl", "--json", "--jobs", "2").json()
    assert one == two                                  # workers change the time, never the figures
    assert set(one["coverage"]["auto"]) >= {"points", "mean_over_sources", "within_65_95", "within_75_85"}
    for bad, say in (("0", "between 1 and 256"), ("x", "whole number")):
        r = cli("evaluate", "--corpus", tmp_path, "--jobs", bad)
        assert r.code == 2 and say in r.err
    r = cli("evaluate", ROOT / "data" / "usl" / "specsdm91.csv", "--train-max-cores", "72", "--jobs", "2")
    assert r.code == 2 and "--jobs goes with --corpus" in r.err


@pytest.mark.parametrize("columns", ["120", "80"])
def test_the_corpus_progress_draws_a_bar_with_a_count_and_what_is_left(monkeypatch, columns):
    import io
    from corecast import messages

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", columns)
    tty = Tty()
    with messages.Progress("learning without each source", total=34, stream=tty, bar=True) as p:
        p.start -= 10                                   # ten seconds in
        p.update(17)
    line = tty.getvalue().replace("\x1b[K", "").split("\r")[1]
    if columns == "120":
        assert line.startswith("learning without each source: [############............] 50% (17/34)")
    else:                       # too narrow for the bar: the count and the time left are kept
        assert line.startswith("learning without each source: 50% (17/34)") and "#" not in line
    assert line.endswith("about 10 s left")


def test_without_files_no_file_is_read(tmp_path, monkeypatch):
    """What a server takes from a request (`files=False`): the inline form even where a file of
    that name exists, and nothing that would be a file."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cores=8").write_text("[topology]\nsockets = 4\ncores_per_socket = 2\n")
    (tmp_path / "m.toml").write_text("[topology]\nsockets = 4\ncores_per_socket = 2\n")
    assert T.parse_spec("cores=8").sockets == 4                   # the command line reads the file
    assert (T.parse_spec("cores=8", files=False).sockets, T.parse_spec("cores=8", files=False).cores_per_socket) == (1, 8)
    assert T.parse_spec("m.toml").sockets == 4
    with pytest.raises(UserError, match="'m.toml': neither a bundled name"):
        T.parse_spec("m.toml", files=False)
    assert T.parse_spec("epyc-9654-2s", files=False).sockets == 2
