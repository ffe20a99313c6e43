"""The audit of user mistakes (issue 15): each ends in one line naming what is wrong and exit
status 2 -- never "internal error", never a traceback, never a silent acceptance."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPEC = str(ROOT / "data" / "usl" / "specsdm91.csv")


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("mistakes")
    (d / "adir").mkdir()
    (d / "binary.toml").write_bytes(bytes(range(256)) * 4)
    (d / "bigfield.csv").write_text("cores,throughput\n1,\"" + "x" * 140_000 + "\"\n")
    (d / "quote.csv").write_text('cores,throughput\n1,"10\n2,20\n')
    (d / "version.json").write_text('{"format": "corecast-dataset", "version": "abc", "rows": [{"cores": 1, "time_s": 1}]}')
    (d / "nothing.toml").write_text('name = "x"\nfrequency_hz = 1e9\n')
    (d / "bad.csv").write_text("cores,throughput\n1,10\n2,19\n4,0\n8,-1\n16,70\n")
    os.mkfifo(d / "fifo")
    from conftest import run_corecast
    good = d / "good.db"
    r = run_corecast("measure", "-q", "--cores", "1", "--reps", "1", "--warmup", "0", "--no-shim", "-o", good,
                     "--", "true")
    assert r.returncode == 0, r.stderr
    for name, key, value in (("meta-json", "machine", "{garbage"), ("meta-version", "version", "null"),
                             ("meta-command", "command", "[1]"), ("meta-config", "config", '{"command": ["true"]}'),
                             ("meta-reps", "config", '{"command": ["true"], "cores": [1], "reps": "x"}')):
        (d / f"{name}.db").write_bytes(good.read_bytes())
        con = sqlite3.connect(d / f"{name}.db")
        con.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))
        con.commit()
        con.close()
    (d / "run-json.db").write_bytes(good.read_bytes())
    con = sqlite3.connect(d / "run-json.db")
    con.execute("UPDATE runs SET cpus = '[0,'")
    con.commit()
    con.close()
    from corecast.sim import synth
    from corecast.sim.trace import Trace, write_trace
    write_trace(d / "pp.cctrace", Trace(synth.pingpong(10, 2)))
    return d


CASES = [
    # (arguments, with {d} for the folder of `bad_files` above, text the one line must hold)
    (["stat", "-c", "task_clock", "-o", "/nonexistent/x.csv", "--", "true"], "no such folder /nonexistent"),
    (["stat", "-T", "nan", "-c", "task_clock", "--", "true"], "is not an interval"),
    (["stat", "-e", "cycles", "--", "true"], "did you mean -c"),
    (["sim", "{d}/adir", "--machine", "penryn-l5420"], "is a directory"),
    (["sim", "{d}/adir", "--machine", "{d}/binary.toml"], "not a text file"),
    (["sim", "{d}/adir", "--machine", "{d}/nothing.toml"], "nothing to simulate"),
    (["usl", "{d}/bigfield.csv"], "a field longer than"),
    (["usl", "{d}/quote.csv"], "a quote is opened and never closed"),
    (["usl", "{d}/version.json"], '"version" must be a whole number'),
    (["usl", "{d}/fifo"], "empty file"),
    (["sim", "gen", "stream", "--stride", "-64", "-o", "{d}/s.cctrace"], "argument --stride: '-64'"),
    (["sim", "gen", "random", "--write-fraction", "2", "-o", "{d}/w.cctrace"], "argument --write-fraction: '2'"),
    (["sim", "gen", "pingpong", "--threads", "70000", "-o", "{d}/p.cctrace"], "2 to 65,536 threads"),
    (["predict", SPEC, "--cores", "64", "--size-ratio", "0"], "--size-ratio must be a number > 0"),
    (["predict", SPEC, "--cores", "64", "--freq-ratio", "-1"], "--freq-ratio must be a number > 0"),
    (["evaluate", "{d}/bad.csv", "--train-max-cores", "4", "--methods", "usl,timex"], "no method could be evaluated"),
    (["measure", "--warmup", "-1", "-o", "{d}/x.db", "--", "true"], "--warmup must be 0 or more"),
    (["measure", "--cores", "1-100000000", "-o", "{d}/y.db", "--", "true"], "cores asked for"),
    (["usl", SPEC, "--predict", "1-1000000"], "core counts; at most"),
    (["predict", SPEC, "--cores", "16", "--target-machine", "sockets=2"], "cores= (per socket) is needed"),
    (["export", SPEC, "--format", "records", "--metadata", "inline"], "--metadata is for CSV output"),
    # sim's own zero and negative counts (accepted without a word before)
    (["sim", "{d}/pp.cctrace", "--machine", "penryn-l5420", "--chunk", "0"], "--chunk 0"),
    (["sim", "{d}/pp.cctrace", "--machine", "penryn-l5420", "--warmup", "-1"], "--warmup -1"),
    # corrupt campaign metadata: damaged JSON or values of the wrong kind (internal errors before)
    (["info", "{d}/meta-json.db"], "damaged campaign file: metadata 'machine' is not valid JSON"),
    (["predict", "{d}/meta-version.db", "--cores", "4"], "damaged campaign file: metadata 'version'"),
    (["export", "{d}/meta-command.db"], "damaged campaign file: metadata 'command'"),
    (["measure", "--resume", "-o", "{d}/meta-config.db"], "its settings (metadata 'config') have no 'cores'"),
    (["measure", "--resume", "-o", "{d}/meta-reps.db"], "give 'reps' as \"x\""),
    (["info", "{d}/run-json.db"], "damaged campaign file: run 0's cpus is not valid JSON"),
]


@pytest.mark.parametrize("args, text", CASES, ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _) in enumerate(CASES)])
def test_one_line_and_exit_2(cli, bad_files, args, text):
    r = cli(*[a.replace("{d}", str(bad_files)) for a in args])
    assert r.code == 2, (r.out, r.err)
    assert text in r.err
    assert "internal error" not in r.err and "Traceback" not in r.err
    assert len([line for line in r.err.splitlines() if "error" in line]) == 1


# A FIFO given as an input file blocked every reader but the Dataset's: each is now read
# without waiting for a writer (empty when none writes), or refused where a file is needed.
# Run in a child with a time limit, so that a reader that blocks again fails instead of hanging.
FIFO_CASES = [
    (["sim", "{d}/fifo", "--machine", "penryn-l5420"], "not a regular file"),
    (["sim", "mrc", "{d}/fifo"], "not a regular file"),
    (["sim", "convert", "{d}/fifo", "-o", "{d}/c.cctrace"], "not a regular file"),
    (["sim", "{d}/pp.cctrace", "--machine", "{d}/fifo"], "fifo"),
    (["sim", "machines", "{d}/fifo"], "fifo"),
    (["predict", SPEC, "--cores", "64", "--target-machine", "{d}/fifo"], "fifo"),
    (["throughput", "--machine", "penryn-l5420", "--mpki", "{d}/fifo"], "fifo"),
    (["throughput", "--machine", "penryn-l5420", "--sim", "{d}/fifo", "--baseline-cpi", "1"], "not valid JSON"),
    (["measure", "--cores", "1", "--plugin", "{d}/fifo", "-o", "{d}/p.db", "--", "true"], "fifo"),
    (["measure", "--resume", "-o", "{d}/fifo"], "not a campaign file"),
    (["info", "{d}/fifo"], "empty file"),
]


@pytest.mark.slow
@pytest.mark.parametrize("args, text", FIFO_CASES,
                         ids=[" ".join(a[:2]) + f" #{i}" for i, (a, _) in enumerate(FIFO_CASES)])
def test_a_fifo_never_blocks_a_reader(bad_files, args, text):
    r = subprocess.run([sys.executable, "-m", "corecast", *[a.replace("{d}", str(bad_files)) for a in args]],
                       capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert text in r.stderr and "internal error" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
