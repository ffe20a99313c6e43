"""The audit of user mistakes (issue 15): each ends in one line naming what is wrong and exit
status 2 -- never "internal error", never a traceback, never a silent acceptance."""
from __future__ import annotations

import os
import shutil
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
    # JSON documents that are a scalar: json_document's depth check iterated them (TypeError)
    (d / "null.json").write_text("null")
    (d / "five.json").write_text("5")
    (d / "side.csv").write_text("cores,throughput\n1,1\n2,2\n3,3\n")
    (d / "side.csv.meta.json").write_text("null")
    (d / "noexec.sh").write_text("#!/bin/sh\nexit 0\n")
    (d / "noexec.sh").chmod(0o644)
    # lscpu's text cut short before its topology lines (read as TOML: "not valid TOML")
    (d / "lscpu.txt").write_text("Architecture:        x86_64\nCPU op-mode(s):      32-bit, 64-bit\nCPU(s):   8\n")
    for name, body in (("raises", "    def decide(self, view):\n        raise KeyError('oops')\n"),
                       ("setup", "    def setup(self, view):\n        1 / 0\n    def decide(self, view):\n"
                                 "        return None\n"),
                       ("shape", "    def decide(self, view):\n        return [[5, 5, 5]]\n")):
        (d / f"{name}.py").write_text(f"from corecast.sched import Policy\nclass P(Policy):\n    name = 'mine'\n{body}")
    (d / "exits.py").write_text("import sys\nsys.exit(3)\n")
    (d / "mpki.toml").write_text("baseline_cpi = 1\ninstructions = 1000\n[events]\ndram = 2\n")
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
    # a JSON document that is a scalar (internal errors before: TypeError in the depth check)
    (["usl", "{d}/null.json"], "expected a JSON object or a list of rows"),
    (["info", "{d}/side.csv"], "side.csv.meta.json: metadata must be a JSON object"),
    (["throughput", "--machine", "penryn-l5420", "--mpki", "{d}/five.json"], "expected a table of keys"),
    (["predict", SPEC, "--cores", "8", "--target-machine", "{d}/null.json"], "a JSON file, but neither"),
    # lscpu's text cut short: the missing line named (it said "not valid TOML")
    (["predict", SPEC, "--cores", "8", "--target-machine", "{d}/lscpu.txt"], "lscpu output without 'Socket(s):'"),
    # a program that cannot be run: every run was recorded as `not run`, exit status 1
    (["measure", "-o", "{d}/noexec.db", "--", "{d}/noexec.sh"], "noexec.sh' is not executable"),
    (["measure", "-o", "{d}/adir.db", "--", "{d}/adir"], "adir' is a directory, not a program"),
    # an empty --cores measured the default counts; a huge --reps took every byte of memory
    (["measure", "--cores", "", "-o", "{d}/empty.db", "--", "true"], "--cores: empty"),
    (["measure", "--reps", "100000000", "-o", "{d}/reps.db", "--", "true"], "a campaign holds at most 1,000,000"),
    (["meters", "--meters", "", "--duration", "1"], "--meters: empty"),
    (["meters", "list", "--meters", ""], "--meters: empty"),
    # options of the other mode were ignored without a word
    (["evaluate", SPEC, "--train-max-cores", "24", "--train-frac", "0.5"], "--train-frac goes with --corpus DIR"),
    (["evaluate", "--corpus", str(ROOT / "data" / "corpus"), "--train-max-cores", "4"],
     "--train-max-cores goes with a file"),
    # a penalty no event of the input has (a typo) was ignored without a word
    (["throughput", "--machine", "penryn-l5420", "--mpki", "{d}/mpki.toml", "--penalty", "dram_miss=200"],
     "--penalty dram_miss: no such event"),
    # a user's policy that raises, or exits as it is loaded (an internal error, or a silent exit 3)
    (["sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--policy", "{d}/raises.py:P"],
     "policy mine: decide() raised KeyError: 'oops'"),
    (["sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--policy", "{d}/setup.py:P"],
     "policy mine: setup() raised ZeroDivisionError"),
    (["sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--policy", "{d}/exits.py:P"], "called sys.exit(3)"),
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


def test_the_right_penalty_name_is_taken(cli, bad_files):
    """The refusal above is of a name no stack has, not of a valid one the input lacks."""
    r = cli("throughput", "--machine", "penryn-l5420", "--mpki", bad_files / "mpki.toml", "--penalty", "dram=300",
            "--penalty", "l3_hit=40", "--json")
    assert r.code == 0, r.err
    assert "dram" in r.out


def test_a_measure_refused_makes_no_file(cli, bad_files):
    """A program that cannot be run is refused before the campaign file is made."""
    r = cli("measure", "-o", bad_files / "never.db", "--", bad_files / "noexec.sh")
    assert r.code == 2
    assert not (bad_files / "never.db").exists()


def test_a_malformed_campaign_leaves_no_journal(cli, tmp_path):
    """Reading a campaign SQLite calls malformed left the empty journal corecast made beside it
    (`c.db-journal`) in the user's folder, after every read-only command."""
    from conftest import run_corecast
    good = tmp_path / "good.db"
    r = run_corecast("measure", "-q", "--cores", "1", "--reps", "1", "--warmup", "0", "--no-shim", "-o", good,
                     "--", "true")
    assert r.returncode == 0, r.stderr
    data = good.read_bytes()
    cut = tmp_path / "cut.db"
    cut.write_bytes(data[:len(data) // 2])
    for args in (["info", cut], ["usl", cut], ["measure", "--resume", "-o", cut]):
        r = cli(*args)
        assert r.code == 2 and "not a readable campaign file" in r.err, r.err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.db", "good.db"]


@pytest.mark.skipif(os.geteuid() == 0 and not shutil.which("setpriv"), reason="root needs setpriv to drop its rights")
def test_a_file_one_may_not_write_is_not_replaced(tmp_path):
    """An output file the user may not write (chmod 444) was replaced by a rename, which needs
    only the folder's permission. Root, whose rights would let it, runs without its capabilities."""
    out = tmp_path / "out.csv"
    out.write_text("kept\n")
    out.chmod(0o444)
    cmd = [sys.executable, "-m", "corecast", "export", SPEC, "-o", str(out)]
    if os.geteuid() == 0:
        cmd = ["setpriv", "--bounding-set=-all", "--", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().endswith("out.csv: permission denied (a file you may not write is not replaced)")
    assert out.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


@pytest.mark.slow
@pytest.mark.parametrize("policy, text", [("raises", "policy mine: decide() raised KeyError: 'oops'"),
                                          ("shape", "policy mine: placement of shape (1, 3)")])
def test_a_users_policy_fails_in_one_line_when_enforced(bad_files, policy, text):
    """`sched run` with a user's policy that raises (an internal error, exit status 1) or places
    threads in an array of the wrong shape (taken as it was): one line, exit status 2."""
    r = subprocess.run([sys.executable, "-m", "corecast", "sched", "run", "--policy", f"{bad_files}/{policy}.py:P",
                        "--no-alone", "--", "sleep 5"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.strip().splitlines()[-1].startswith(f"corecast sched: error: {text}"), r.stderr
    assert "internal error" not in r.stderr
