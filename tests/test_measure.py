"""`corecast measure` end to end: placement, substitution, failures, plugins, the summary."""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import numpy as np
import pytest

from corecast import dataset, store
from corecast.collect import plugins, runner
from corecast.errors import UserError

NCPU = len(os.sched_getaffinity(0))
TWO = "1,2" if NCPU >= 2 else "1"


def runs(path: Path) -> list[dict]:
    with store.Campaign.open(path, write=False) as c:
        return c.runs()


def measure(cli, tmp_path, *args, name="c.db"):
    out = tmp_path / name
    r = cli("measure", "-q", "--warmup", "0", "--reps", "1", "-o", out, *args)
    return r, out


# ---------------------------------------------------------------- the plan
def test_plan_interleaves_and_warms_up():
    p = runner.plan([4, 1, 2], reps=3, warmup=1)
    assert [(s.cores, s.repetition, s.warmup) for s in p] == [
        (1, 0, True), (2, 0, True), (4, 0, True),
        (1, 0, False), (2, 0, False), (4, 0, False),
        (4, 1, False), (2, 1, False), (1, 1, False),
        (1, 2, False), (2, 2, False), (4, 2, False)]
    assert [s.slot for s in p] == list(range(12))
    with pytest.raises(UserError):
        runner.plan([1], reps=0, warmup=0)


def test_placeholders_substitution():
    sub = runner.placeholders(4, 2, 1)
    assert plugins.substitute("-t {threads} -c {cores} r{rep} {other} {{x}}", sub) == "-t 8 -c 4 r1 {other} {{x}}"


# ---------------------------------------------------------------- a real workload
def test_lockbench_campaign(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", TWO, "--json", "--",
                     "corecast-lockbench", "-t", "{threads}", "-n", "200000", "--cs", "400", "--think", "10")
    assert r.code == 0, r.err
    summary = r.json()
    assert summary["runs"] == len(TWO.split(","))
    ds = dataset.read_campaign(out)
    # throughput parsed with the bundled workloads' default regex
    assert np.all(ds.metrics["throughput"] > 0)
    assert ds.columns["throughput"].kind == "throughput"
    assert np.all(ds.metrics["time_s"] > 0) and np.all(ds.metrics["rss_bytes"] > 0)
    assert np.all(ds.metrics["rss_bytes"] < 50 * 2**20)       # the program's own RSS, not corecast's
    assert np.all(ds.metrics["user_s"] >= 0)
    for cat in ("lock_wait_cycles", "barrier_wait_cycles", "cond_wait_cycles", "trylock_spin_cycles",
                "runqueue_delay_cycles"):
        assert ds.columns[cat].kind == "stall" and ds.columns[cat].unit == "cycles"
    assert ds.metrics["barrier_wait_cycles"].tolist() == [0.0] * len(ds)
    assert ds.metrics["lock_acquisitions"][0] == 200000
    one = ds.cores == 1
    assert ds.metrics["lock_wait_cycles"][one][0] == 0.0      # one thread: nothing to wait for
    if NCPU >= 2:
        assert ds.metrics["lock_wait_cycles"][ds.cores == 2][0] > 0
    rr = runs(out)
    assert [x["argv"][2] for x in rr] == [str(c) for c in ds.cores.astype(int)]
    assert rr[0]["cpus"] == runner.CampaignConfig.from_dict(
        store.Campaign.open(out, write=False).meta()["config"]).cpu_order[:1]
    assert "threads: 1" in rr[0]["stdout_tail"]
    assert ds.machine.logical_cpus == NCPU and ds.machine.kernel


def test_affinity_of_the_whole_tree_and_env(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", TWO, "--no-shim", "--env", "WANT=t{threads}c{cores}", "--",
                     "sh", "-c", "echo $WANT; sh -c 'grep Cpus_allowed_list /proc/self/status'")
    assert r.code == 0, r.err
    for run in runs(out):
        lines = run["stdout_tail"].splitlines()
        assert lines[0] == f"t{run['cores']}c{run['cores']}"
        allowed = lines[1].split()[-1]
        from corecast.collect.topology import parse_cpulist
        assert parse_cpulist(allowed) == sorted(run["cpus"])      # a grandchild is pinned too
        assert len(run["cpus"]) == run["cores"]


def test_explicit_order(cli, tmp_path):
    cpu = max(os.sched_getaffinity(0))
    r, out = measure(cli, tmp_path, "--cores", "1", "--order", str(cpu), "--no-shim", "--",
                     "grep", "Cpus_allowed_list", "/proc/self/status")
    assert r.code == 0, r.err
    assert runs(out)[0]["stdout_tail"].split()[-1] == str(cpu)


# ---------------------------------------------------------------- failures
def test_crash_is_recorded_and_campaign_continues(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", "1", "--reps", "2", "--", "sh", "-c",
                     'echo about to crash >&2; test {rep} = 0 && kill -SEGV $$; echo fine')
    assert r.code == 1
    rr = runs(out)
    assert [x["status"] for x in rr] == ["crashed", "ok"]
    assert rr[0]["exit_status"] == 128 + 11 and rr[0]["signal"] == 11
    assert "SIGSEGV" in rr[0]["message"] and "about to crash" in rr[0]["stderr_tail"]
    ds = dataset.read_campaign(out)
    assert np.isnan(ds.metrics["time_s"][0]) and ds.metrics["time_s"][1] > 0
    assert ds.notes["failed_runs"][0]["status"] == "crashed"
    assert "1 run(s) failed" in r.out


def test_failing_exit_status_and_stderr_tail(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", "1", "--no-shim", "--", "sh", "-c",
                     "for i in $(seq 1 50); do echo line$i >&2; done; exit 3")
    assert r.code == 1
    (run,) = runs(out)
    assert run["status"] == "failed" and run["exit_status"] == 3 and run["message"] == "exit status 3"
    tail = run["stderr_tail"].splitlines()
    assert tail[-1] == "line50" and len(tail) == runner.TAIL_LINES


@pytest.mark.slow
def test_timeout_kills_the_process_group(cli, tmp_path):
    pidfile = tmp_path / "bg.pid"
    t0 = time.monotonic()
    r, out = measure(cli, tmp_path, "--cores", "1", "--reps", "2", "--timeout", "1", "--", "sh", "-c",
                     f"test {{rep}} = 1 && exit 0; sleep 60 & echo $! > {pidfile}; wait")
    assert time.monotonic() - t0 < 30          # not a timing claim: it did not wait for sleep 60
    rr = runs(out)
    assert [x["status"] for x in rr] == ["timeout", "ok"]
    assert "timeout" in rr[0]["message"]
    bg = int(pidfile.read_text())
    assert not _alive(bg)                      # the grandchild went with its group


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it is not running)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def test_missing_program_is_refused_before_anything(cli, tmp_path):
    out = tmp_path / "m.db"
    r = cli("measure", "-q", "-o", out, "--", "no-such-program-xyz", "-t", "{threads}")
    assert r.code == 2
    assert r.err.strip().endswith("program 'no-such-program-xyz' not found (not in PATH, nor a bundled corecast workload)")
    assert len(r.err.strip().splitlines()) == 1
    assert not out.exists()


def test_program_missing_for_some_runs_is_recorded(cli, tmp_path):
    (tmp_path / "prog1").write_text("#!/bin/sh\necho ok\n")
    (tmp_path / "prog1").chmod(0o755)
    (tmp_path / "prog2").write_text("not executable\n")
    os.chdir(tmp_path)
    r, out = measure(cli, tmp_path, "--cores", TWO, "--no-shim", "--", "./prog{cores}")
    rr = runs(out)
    assert rr[0]["status"] == "ok"
    if NCPU >= 2:
        assert r.code == 1
        assert rr[1]["status"] == "not run" and rr[1]["exit_status"] == 127
        assert "cannot execute './prog2': Permission denied" == rr[1]["message"]


def test_existing_output_needs_resume(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", "1", "--no-shim", "--", "true")
    assert r.code == 0
    r = cli("measure", "-q", "-o", out, "--", "true")
    assert r.code == 2 and "already exists" in r.err


def test_a_campaign_named_relative_to_the_current_folder(cli, tmp_path, monkeypatch):
    # the README's `measure ... -o lock.db`: the journal held beside the campaign is named to
    # the sentinel by its whole path (a relative one was refused: no campaign could be started)
    monkeypatch.chdir(tmp_path)
    r = cli("measure", "-q", "--warmup", "0", "--reps", "1", "--cores", "1", "--no-shim", "-o", "c.db", "--", "true")
    assert r.code == 0, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]     # no journal, WAL or index left
    r = cli("measure", "-q", "--resume", "-o", "c.db", "--", "true")
    assert r.code == 0, r.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]


@pytest.mark.parametrize("args,message", [
    (["--cores", "0"], "--cores"),
    (["--cores", str(NCPU + 1)], "usable"),
    (["--reps", "0"], "--reps"),
    (["--timeout", "-1"], "--timeout"),
    (["--order", "banana"], "--order"),
    (["--env", "NOEQUALS"], "--env"),
    (["--throughput", "no group"], "exactly one group"),
    (["--throughput", "(unclosed"], "does not compile"),
    (["--plugin", "/nonexistent.toml"], "no such plugin"),
])
def test_option_errors(cli, tmp_path, args, message):
    out = tmp_path / "e.db"
    r = cli("measure", "-q", "-o", out, *args, "--", "true")
    assert r.code == 2 and message in r.err, r.err
    assert not out.exists()


def test_no_command(cli, tmp_path):
    r = cli("measure", "-o", tmp_path / "x.db")
    assert r.code == 2 and "no command" in r.err


# ---------------------------------------------------------------- throughput and plugins
def test_throughput_regex_and_no_match(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", "1", "--reps", "2", "--no-shim",
                     "--throughput", r"rate=([0-9.]+)", "--", "sh", "-c",
                     "test {rep} = 0 && echo rate=12.5 && echo rate=42.5; echo no number")
    assert r.code == 0
    ds = dataset.read_campaign(out)
    assert ds.metrics["throughput"][0] == 42.5          # the last match
    assert np.isnan(ds.metrics["throughput"][1])        # missing, not 0
    assert "matched nothing" in runs(out)[1]["details"]["notes"][0]
    assert ds.columns["throughput"].source.startswith("parsed from the program's stdout")
    # a rate the program reports on stderr only is found there, and the column says so
    r, out = measure(cli, tmp_path, "--cores", "1", "--reps", "1", "--no-shim",
                     "--throughput", r"rate=([0-9.]+)", "--", "sh", "-c", "echo rate=7.5 >&2", name="e.db")
    assert r.code == 0
    ds = dataset.read_campaign(out)
    assert ds.metrics["throughput"][0] == 7.5
    assert ds.columns["throughput"].source.startswith("parsed from the program's stderr")


def test_plugin_categories(cli, tmp_path):
    plugin = tmp_path / "stm.toml"
    plugin.write_text('''
[category.aborted_tx_cycles]
source = "stdout"
regex = 'aborted cycles: ([0-9]+)'
aggregate = "sum"
unit = "cycles"
description = "cycles in aborted transactions"

[category.retries_max]
source = "stats-{cores}.txt"
regex = '^retries ([0-9.]+)$'
aggregate = "max"
unit = "count"
kind = "counter"

[category.missing]
source = "stderr"
regex = 'never ([0-9]+)'
unit = "cycles"
''')
    os.chdir(tmp_path)
    r, out = measure(cli, tmp_path, "--cores", "1", "--no-shim", "--plugin", plugin, "--", "sh", "-c",
                     "echo 'aborted cycles: 100'; echo 'aborted cycles: 250'; "
                     "printf 'retries 3\\nretries 7\\nretries 5\\n' > stats-{cores}.txt")
    assert r.code == 0, r.err
    ds = dataset.read_campaign(out)
    assert ds.metrics["aborted_tx_cycles"][0] == 350
    assert ds.columns["aborted_tx_cycles"].kind == "stall" and ds.columns["aborted_tx_cycles"].unit == "cycles"
    assert "stm.toml" in ds.columns["aborted_tx_cycles"].source
    assert ds.metrics["retries_max"][0] == 7 and ds.columns["retries_max"].kind == "counter"
    assert np.isnan(ds.metrics["missing"][0]) and ds.columns["missing"].status == "unavailable"
    assert "aborted_tx_cycles" in ds.stall_names and "missing" not in ds.stall_names


def test_a_plugin_file_no_run_wrote_gives_no_value(cli, tmp_path):
    """A plugin's output file is read after every run; one the run did not write (the program
    failed before it, or writes it only sometimes) still held an earlier run's number -- or a
    file from before the campaign -- and that number was recorded as this run's."""
    plugin = tmp_path / "p.toml"
    plugin.write_text('[category.app_wait_cycles]\nsource = "p.out"\nregex = \'v: ([0-9]+)\'\nunit = "cycles"\n')
    (tmp_path / "p.out").write_text("v: 9\n")                 # left from before the campaign
    os.chdir(tmp_path)
    r, out = measure(cli, tmp_path, "--cores", "1", "--reps", "4", "--no-shim", "--plugin", plugin, "--", "sh", "-c",
                     "if [ {rep} = 1 ]; then echo 'v: 5' > p.out; fi; if [ {rep} = 3 ]; then echo 'v: 7' >> p.out; fi")
    assert r.code == 0, r.err
    by_rep = {x["repetition"]: x for x in runs(out)}
    assert {k: x["values"]["app_wait_cycles"] for k, x in by_rep.items()} == {0: None, 1: 5, 2: None, 3: 12}
    for k in (0, 2):
        assert any("p.out was not written by this run" in n for n in by_rep[k]["details"]["notes"]), by_rep[k]


@pytest.mark.parametrize("body,message", [
    ('[category.x]\nsource="stdout"\nregex="(a)(b)"\nunit="s"\n', "exactly one group"),
    ('[category.x]\nsource="stdout"\nregex="(a)"\nunit="s"\naggregate="median"\n', "aggregate 'median'"),
    ('[category.x]\nsource="stdout"\nunit="s"\n', "missing 'regex'"),
    ('[category.cores]\nsource="stdout"\nregex="(a)"\nunit="s"\n', "not usable as a column name"),
    ('[category.x]\nsource="stdout"\nregex="(a)"\nunit="s"\ncolour="red"\n', "unknown key 'colour'"),
    ('[stall.x]\n', "unknown table or key 'stall'"),
    ('[category.x\n', "not valid TOML"),
])
def test_plugin_errors(tmp_path, body, message):
    p = tmp_path / "p.toml"
    p.write_text(body)
    with pytest.raises(UserError, match=re.escape(message)):
        plugins.load_plugin(p)


def test_plugin_aggregations():
    rx = plugins.compile_number_regex(r"v=(\S+)", "t")
    text = "v=1 v=4 v=2 v=oops v=1,000"
    assert plugins.extract(rx, text, "sum") == (1007.0, 5, 1)
    assert plugins.extract(rx, text, "min")[0] == 1.0
    assert plugins.extract(rx, text, "max")[0] == 1000.0
    assert plugins.extract(rx, text, "avg")[0] == pytest.approx(1007 / 4)
    assert plugins.extract(rx, text, "last")[0] == 1000.0
    assert plugins.extract(rx, "nothing", "sum") == (None, 0, 0)


# ---------------------------------------------------------------- output
@pytest.mark.slow
def test_summary_table_and_warmups(cli, tmp_path):
    out = tmp_path / "s.db"
    r = cli("measure", "-q", "--cores", TWO, "--reps", "2", "--warmup", "1", "-o", out, "--",
            "corecast-barrier", "-t", "{threads}", "--phases", "300")
    assert r.code == 0, r.err
    assert "cores" in r.out and "speedup" in r.out and "barrier_wait" in r.out
    rr = runs(out)
    n = len(TWO.split(","))
    assert sum(x["warmup"] for x in rr) == n and len(rr) == 3 * n
    ds = dataset.read_campaign(out)
    assert len(ds) == 2 * n
    if NCPU >= 2:
        assert np.all(ds.metrics["barrier_wait_cycles"][ds.cores == 2] > 0)


def test_membw_workload(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", "1", "--", "corecast-membw", "-t", "{threads}", "--mb", "16",
                     "--iters", "3")
    assert r.code == 0, r.err
    ds = dataset.read_campaign(out)
    assert ds.metrics["throughput"][0] > 100            # MB/s
    assert ds.metrics["rss_bytes"][0] > 3 * 16 * 2**20 * 0.9      # three 16 MiB arrays


def test_campaign_is_a_dataset_for_other_commands(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", TWO, "--no-shim", "--", "corecast-lockbench", "-t", "{threads}",
                     "-n", "50000")
    assert r.code == 0
    from corecast.dataset import load
    ds = load(out)
    js = json.loads(ds.to_json())
    assert js["columns"]["throughput"]["kind"] == "throughput" and js["machine"]["logical_cpus"] == NCPU
    assert {"cores", "repetition", "time_s", "exit_status"} <= set(js["rows"][0])


# ---------------------------------------------------------------- perf counters
def test_perf_counters_on_every_run(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", TWO, "--events", "instr", "--", "corecast-lockbench",
                     "-t", "{threads}", "-n", "100000", "--cs", "200", "--think", "200")
    assert r.code == 0, r.err
    ds = dataset.read_campaign(out)
    # software events always: counted from exec, inherited by the worker threads
    cpu_s = ds.metrics["user_s"] + ds.metrics["sys_s"]
    tc = ds.metrics["task_clock_ns"] / 1e9
    assert np.all(tc > 0)
    assert np.all(np.abs(tc - cpu_s) <= 0.2 * cpu_s + 0.02)       # the same CPU time, two ways
    assert ds.columns["task_clock_ns"].kind == "cpu" and ds.columns["task_clock_ns"].status == "ok"
    assert "inherited" in ds.columns["task_clock_ns"].source
    assert np.all(ds.metrics["context_switches"] >= 0)
    # tracepoints where tracefs has them
    if "tp_sched_switch" in ds.columns and ds.columns["tp_sched_switch"].status == "ok":
        assert np.all(ds.metrics["tp_sched_switch"] == ds.metrics["context_switches"])
    # backend stalls: counted where the PMU allows, else recorded as such with one notice
    stalls = [n for n in ds.columns if n.startswith("stall_")]
    for n in stalls:
        c = ds.columns[n]
        assert c.kind == "stall" and c.unit == "cycles"
        if c.status != "ok":
            assert np.all(np.isnan(ds.metrics[n]))             # never 0 for what was not counted
    if stalls and ds.columns[stalls[0]].status != "ok":
        pmu_notes = [t for t in ds.notes.get("notices", []) if "backend-stall" in t]
        assert len(pmu_notes) == 1
    # the user's event, with its status
    instr = ds.columns["instr"]
    assert instr.status in ("ok", "not supported", "denied")
    if instr.status == "ok":
        assert np.all(ds.metrics["instr"] > 0)
    else:                                                    # never 0 for what was not counted, and said
        assert np.all(np.isnan(ds.metrics["instr"]))
        assert [t for t in ds.notes.get("notices", []) if t.startswith(f"perf event instr: {instr.status}: ")]
    details = runs(out)[0]["details"]["counters"]
    assert details["task_clock_ns"]["status"] == "ok" and details["task_clock_ns"]["enabled_ns"] > 0


def test_bad_event_spec(cli, tmp_path):
    out = tmp_path / "b.db"
    r = cli("measure", "-q", "-o", out, "--events", "no_such_event_xyz", "--", "true")
    assert r.code == 2 and len(r.err.strip().splitlines()) == 1
    assert not out.exists()


def test_psi_and_sampled_runqueue_delay(cli, tmp_path):
    r, out = measure(cli, tmp_path, "--cores", "1", "--no-shim", "--", "corecast-lockbench", "-t", "2",
                     "-n", "300000")
    assert r.code == 0, r.err
    ds = dataset.read_campaign(out)
    if Path("/proc/pressure/cpu").exists():
        assert ds.columns["psi_cpu_some_s"].status == "ok" and ds.metrics["psi_cpu_some_s"][0] >= 0
        assert "system-wide" in ds.columns["psi_cpu_some_s"].source
    # without the shim, run-queue delay comes from sampling schedstat: two threads on one
    # core spend time waiting for it
    assert ds.columns["runqueue_delay_cycles"].source.startswith("sampled")
    assert ds.metrics["runqueue_delay_cycles"][0] > 0
    assert "lock_wait_cycles" not in ds.metrics


@pytest.mark.slow
def test_sigterm_interrupts_cleanly_and_resume_finishes(tmp_path):
    import signal
    import subprocess
    import sys
    path = tmp_path / "t.db"
    marker = tmp_path / "child.pid"
    cmd = [sys.executable, "-m", "corecast", "measure", "--cores", "1", "--reps", "3", "--warmup", "0", "-q",
           "--no-shim", "-o", str(path), "--", "sh", "-c", f"echo $$ > {marker}.{{rep}}; sleep 30"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    deadline = time.time() + 30
    while not Path(f"{marker}.0").exists() and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted; 0 run(s) are in" in err and "--resume" in err
    assert not _alive(int(Path(f"{marker}.0").read_text()))      # the run did not outlive corecast
    with store.Campaign.open(path, write=False) as c:
        assert c.runs() == []                                     # the killed run is not recorded


def test_error_names_the_command(cli, tmp_path):
    r = cli("measure", "-q", "-o", tmp_path / "x.db", "--cores", "zero", "--", "true")
    assert r.code == 2 and r.err.startswith("corecast measure: error: --cores")


# ---------------------------------------------------------------- containment (issue 15)
def test_processes_that_escape_with_setsid_are_killed_and_counted(cli, tmp_path):
    """A child that leaves the process group (setsid) is still killed at the end of the run."""
    pids = tmp_path / "escaped"
    r, out = measure(cli, tmp_path, "--cores", "1", "--no-shim", "--", "sh", "-c",
                     f"setsid sh -c 'echo $$ >> {pids}; sleep 60' & setsid sh -c 'echo $$ >> {pids}; sleep 60' & "
                     f"while [ $(cat {pids} 2>/dev/null | wc -l) -lt 2 ]; do sleep 0.05; done; exit 0")
    assert r.code == 0, r.err
    escaped = [int(x) for x in pids.read_text().split()]
    assert len(escaped) == 2
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in escaped) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in escaped)
    rr = runs(out)
    assert rr[0]["status"] == "ok"
    assert rr[0]["details"]["stray_processes_killed"] >= 2


def test_sigkill_of_corecast_takes_the_whole_tree_with_it(tmp_path):
    """SIGKILL cannot be caught by corecast; its supervisor (corecast-launch) is told by the
    kernel (parent-death signal) and kills every descendant, escaped ones included."""
    import signal
    import subprocess
    import sys
    pids = tmp_path / "tree"
    cmd = [sys.executable, "-m", "corecast", "measure", "--cores", "1", "--reps", "1", "--warmup", "0", "-q",
           "--no-shim", "-o", str(tmp_path / "k.db"), "--", "sh", "-c",
           f"setsid sh -c 'echo $$ >> {pids}; sleep 60' & sh -c 'echo $$ >> {pids}; sleep 60' & sleep 60"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    deadline = time.monotonic() + 30
    while (not pids.exists() or len(pids.read_text().split()) < 2) and time.monotonic() < deadline:
        time.sleep(0.02)
    tree = [int(x) for x in pids.read_text().split()]
    assert len(tree) == 2 and all(_alive(p) for p in tree)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in tree)


def test_shim_sees_the_program_not_its_supervisor(cli, tmp_path):
    """One single-threaded process measured: the shim reports exactly one process and one
    thread (it used to be preloaded into corecast-launch too, which added one of each)."""
    r, out = measure(cli, tmp_path, "--cores", "1", "--", "sh", "-c", "exit 0")
    assert r.code == 0, r.err
    shim = runs(out)[0]["details"]["shim"]
    assert shim["processes"] == 1 and shim["threads"] == 1


def test_campaign_summary_has_one_number_format_and_is_not_wrapped():
    """The summary mixed 1.5764e+06 (5 digits) beside 1.87e+06 (3 digits); titles wrapped to
    the table's width on a pipe."""
    import io
    import re

    from corecast.dataset import Dataset
    from corecast.report.campaign import render_summary
    from corecast.report.terminal import console
    rows = [{"cores": c, "repetition": r, "time_s": 1.0 / c, "throughput": 1576400.0 * c + r,
             "lock_wait_cycles": 1.87e6 * c, "rss_bytes": 2e6} for c in (1, 2, 4) for r in range(3)]
    ds = Dataset.from_rows(rows)
    out = io.StringIO()
    render_summary(ds, console(out))
    text = out.getvalue()
    numbers = re.findall(r"\d\.\d+e[+-]\d+", text)
    assert numbers, text
    assert len({len(n.split("e")[0]) for n in numbers}) == 1, numbers     # one mantissa width
    assert "stall categories: median cycles per run, summed over threads" in text


@pytest.mark.slow
def test_interrupted_counts_the_measured_runs_not_the_warmups(tmp_path, monkeypatch):
    """`measure -o x.db` (a relative path) stopped during its first measured run, after the
    warm-up: it said "1 run(s) are in x.db" and `info x.db` then said the campaign had no
    finished runs. The warm-up is not a run of the data."""
    import signal
    import subprocess
    import sys
    monkeypatch.chdir(tmp_path)
    prog = "n=$(ls m.* 2>/dev/null | wc -l); touch m.$n; if [ $n -ge 1 ]; then sleep 30; fi"
    cmd = [sys.executable, "-m", "corecast", "measure", "--cores", "1", "--reps", "2", "--warmup", "1", "-q",
           "--no-shim", "-o", "x.db", "--", "sh", "-c", prog]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not Path("m.1").exists() and time.time() < deadline:
        time.sleep(0.02)
    assert Path("m.1").exists()                 # the warm-up ran and the first measured run started
    time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted; 0 run(s) are in x.db" in err
    with store.Campaign.open(tmp_path / "x.db", write=False) as c:
        assert [r["warmup"] for r in c.runs()] == [True]      # the warm-up was recorded, nothing else
