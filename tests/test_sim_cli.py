"""`corecast sim` from the command line: simulate, capture, convert, gen, machines, errors."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from corecast.sim import synth
from corecast.sim.result import SimResult
from corecast.sim.trace import Trace, read_trace, write_trace

HERE = Path(__file__).resolve().parent
SRC = HERE / "data" / "sim" / "cgprog.c"
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}


@pytest.fixture
def pp_trace(tmp_path, capsys):
    p = write_trace(tmp_path / "pp.cctrace", Trace(synth.pingpong(20, 2, "read")))
    capsys.readouterr()         # write_trace names the file on stderr, as every writer does
    return p


def test_simulate_json(cli, pp_trace, tmp_path):
    out = tmp_path / "r.json"
    r = cli("sim", pp_trace, "--machine", "penryn-l5420", "--cores", "2", "--json", "-o", out)
    assert r.code == 0, r.err
    d = r.json()
    assert d["format"] == "corecast-sim-result" and d["cores"] == 2
    assert d["coherence"]["invalidations"] == 19 and d["coherence"]["upgrades"] == 19
    assert {c["name"] for c in d["caches"]} == {"L1I", "L1D", "L2"}
    assert d["caches"][0]["mpki"] is not None
    assert "branch_mispredict" in d["unavailable"]
    res = SimResult.load(out)
    assert res.coherence == d["coherence"] and res.instructions == 40


def test_simulate_table(cli, pp_trace):
    r = cli("sim", pp_trace, "--machine", "zen4-genoa", "--cores", "2")
    assert r.code == 0, r.err
    for text in ("L1D", "L3", "coherence:", "invalidations", "per 1,000 instructions",
                 "branch_mispredict: unavailable"):
        assert text in r.out


def test_gen_and_machines(cli, tmp_path):
    for kind in ("stream", "random", "pingpong", "transactions", "chains"):
        p = tmp_path / f"{kind}.cctrace"
        r = cli("sim", "gen", kind, "-o", p, "-n", "50")
        assert r.code == 0, r.err
        assert len(read_trace(p)) > 0
    r = cli("sim", tmp_path / "chains.cctrace", "-m", "atom-n540", "--json")
    assert r.json()["issue"]["baseline_cpi"] == pytest.approx(1.0)
    r = cli("sim", tmp_path / "transactions.cctrace", "-m", "penryn-l5420", "--cores", "2",
            "--json")
    d = r.json()
    assert d["split"] == "transactions" and d["transactions"] == 50
    assert d["coherence"]["invalidations"] == 0          # the stack is hashed per core
    r = cli("sim", "machines")
    assert r.code == 0 and "atom-n540" in r.out and "zen4-genoa" in r.out
    r = cli("sim", "machines", "atom-n540")
    assert "formula" in r.out and "L1D: 24 KiB, 6-way" in r.out
    r = cli("sim", "machines", "penryn-l5420", "--json")
    assert json.loads(r.out)["penalties"]["branch_mispredict"] == 16.0


def test_convert_and_csv(cli, tmp_path):
    lk = tmp_path / "t.lackey"
    lk.write_text("I  0400000,4\n L 1000,8\nI  0400004,4\n S 1008,8\n")
    r = cli("sim", "convert", lk, "-o", tmp_path / "t.cctrace")
    assert r.code == 0, r.err
    r = cli("sim", "convert", tmp_path / "t.cctrace", "-o", tmp_path / "t.csv", "--to-csv")
    assert r.code == 0
    assert (tmp_path / "t.csv").read_text().splitlines()[1] == "0,fetch,0x400000,4,,"
    r = cli("sim", tmp_path / "t.csv", "-m", "atom-n540", "--json")
    assert r.json()["instructions"] == 2


@pytest.mark.parametrize("args, needle", [
    (["sim", "missing.cctrace", "-m", "atom-n540"], "no such trace file"),
    (["sim", "{pp}"], "--machine is required"),
    (["sim", "{pp}", "-m", "pentium9"], "unknown machine 'pentium9'"),
    (["sim", "{pp}", "-m", "atom-n540", "--cores", "0"], "--cores 0"),
    (["sim", "{pp}", "-m", "atom-n540", "--cores", "65"], "1 to 64 cores"),
    (["sim", "{pp}", "-m", "atom-n540", "--stack", "zz"], "--stack zz"),
    (["sim", "{pp}", "-m", "atom-n540", "--warmup", "1000"], "has only 40 instructions"),
    (["sim", "{pp}", "-m", "atom-n540", "--cores", "2", "--split", "transactions"],
     "no marker records"),
    (["sim", "capture", "-o", "x.cctrace", "--", "./definitely-not-here"], "no such program"),
    (["sim", "capture", "-o", "x.cctrace"], "no program given"),
    (["sim", "gen", "random", "-o", "x.cctrace", "--working-set", "lots"], "not a size"),
])
def test_user_errors_exit_2(cli, pp_trace, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    r = cli(*[a.replace("{pp}", str(pp_trace)) for a in args])
    assert r.code == 2
    assert needle in r.err
    assert r.err.startswith(("corecast sim: error:", "corecast sim gen: error:")) and "Traceback" not in r.err


def test_bad_machine_file_exit_2(cli, pp_trace, tmp_path):
    m = tmp_path / "m.toml"
    m.write_text('name = "x"\nfrequency_hz = 1e9\n[[cache]]\nlevel = 1\nkind = "unified"\n'
                 'size = "24KiB"\nways = 8\n')
    r = cli("sim", pp_trace, "-m", m)
    assert r.code == 2 and f"{m}: cache[0].ways" in r.err and "not a power of two" in r.err


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None or shutil.which("objdump") is None,
                    reason="needs valgrind and objdump")
def test_capture_real_program_with_marker(cli, tmp_path):
    exe = tmp_path / "cgprog"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(SRC)], check=True)
    out = tmp_path / "cg.cctrace"
    r = cli("sim", "capture", "-o", out, "--marker", "handle", "--", exe)
    assert r.code == 0, r.err
    assert "marker handle at 0x" in r.err
    tr = read_trace(out)
    assert tr.meta["annotated"] and tr.meta["annotated_fraction"] > 0.99
    assert tr.meta["has_branches"] and tr.meta["has_uops"]
    r = cli("sim", out, "-m", "penryn-l5420", "--json")
    d = r.json()
    assert d["transactions"] == 40                       # REQUESTS in cgprog.c
    # handle() runs 64 iterations of about ten instructions; consecutive markers are one
    # call apart, and the instructions before the first call do not count
    assert 600 < d["instructions_per_transaction"] < 1200
    assert d["branch"]["conditional"] > 10000
    assert 0.2 < d["issue"]["baseline_cpi"] < 2.0
    assert d["issue"]["placeholder_instructions"] < 0.01 * d["instructions"]
    for key in ("l2_hit", "dram", "stlb_hit", "dtlb_miss", "itlb_miss", "branch_mispredict",
                "misaligned_load"):
        assert key in d["events_per_kilo_instruction"]
    assert d["events_per_kilo_instruction"]["misaligned_load"] > 0
    # split the one-thread trace by transaction over 4 cores, stack hashed
    r4 = cli("sim", out, "-m", "penryn-l5420", "--cores", "4", "--json").json()
    assert r4["split"] == "transactions"
    assert sum(c["instructions"] for c in r4["per_core"]) == d["instructions"]
    assert all(c["instructions"] > 0 for c in r4["per_core"])


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_capture_failing_program_keeps_trace(tmp_path):
    from corecast.sim.capture import capture
    info = capture(["/bin/sh", "-c", "exit 3"], tmp_path / "f.cctrace", annotate=False, env=ENV)
    assert info.exit_status == 3
    assert any("status 3" in w for w in info.warnings)
    assert len(read_trace(tmp_path / "f.cctrace")) > 1000


def test_one_reader_of_result_files(tmp_path):
    """SimResult.load and `throughput --sim` (model.cpi.load_sim) read a result file through the
    same function and say the same about a file that is not one."""
    from corecast.errors import UserError
    from corecast.model.cpi import load_sim

    cases = {"other.json": ('{"hello": 1}', "not a `corecast sim --json` result"),
             "newer.json": ('{"format": "corecast-sim-result", "version": 9}', "version 9 is not supported"),
             "broken.json": ('{"format": ', ":1: not valid JSON"),
             "missing.json": (None, "no such file")}
    for name, (text, message) in cases.items():
        f = tmp_path / name
        if text is not None:
            f.write_text(text)
        for read in (SimResult.load, load_sim):
            with pytest.raises(UserError, match=message):
                read(f)


def test_sim_text_to_a_pipe_is_not_wrapped(cli, pp_trace):
    r = cli("sim", pp_trace, "-m", "penryn-l5420", "--cores", "2")
    assert r.code == 0, r.err
    # the longest sentence of the report is on one line, whatever COLUMNS says
    line = next(x for x in r.out.splitlines() if x.startswith("baseline_cpi: unavailable"))
    assert line.rstrip().endswith("disassembling the program with objdump)")
    assert max(len(x) for x in r.out.splitlines()) > 120


@pytest.mark.slow
def test_a_long_simulation_stops_at_ctrl_c(tmp_path):
    """The native simulator runs a slice of the trace per call, so Ctrl-C ends a long
    simulation between slices (issue 15: an access at the top of the address space once made
    one call loop forever, deaf to it)."""
    import signal
    import subprocess
    import sys
    import time
    trace = tmp_path / "t.cctrace"
    subprocess.run([sys.executable, "-m", "corecast", "sim", "gen", "transactions", "-n", "100000", "-o", trace],
                   check=True, capture_output=True)
    p = subprocess.Popen([sys.executable, "-m", "corecast", "sim", trace, "-m", "zen4-genoa", "--cores", "4"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    assert "corecast sim: interrupted" in err


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS starts no thread of its own on one CPU")
@pytest.mark.parametrize("saved", [None, "3"])
def test_sim_imports_numpy_without_openblas_threads_and_leaves_the_environment_as_it_was(saved):
    """`corecast sim` imports numpy with OpenBLAS held to the calling thread (its own threads
    spin 0.1 s of CPU for nothing), and the programs it runs get the environment it was given."""
    import sys
    code = ("import os, sys\n"
            "from corecast.cli import sim\n"
            "assert 'numpy' not in sys.modules\n"
            "sim._numpy_one_blas_thread()\n"
            "import numpy\n"
            "threads = int([l for l in open('/proc/self/status') if l.startswith('Threads:')][0].split()[1])\n"
            "print(threads, os.environ.get('OPENBLAS_NUM_THREADS'))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}
    if saved is not None:
        env["OPENBLAS_NUM_THREADS"] = saved
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", str(saved)]
