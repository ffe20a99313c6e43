"""`corecast stat` as perf's users expect it (issue 26, item 5): it finds the bundled workloads
that `measure` finds, labels a last row by what ended the monitoring, says why every value it
did not count was not counted, and counts perf's default set when no event is given."""
from __future__ import annotations

import io
import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from corecast.collect.stat import (DEFAULT_EVENTS, CsvWriter, JsonWriter, Monitor, TableWriter, parse_metric)
from corecast.collect.stat.rows import why_not_counted
from corecast.collect.perf import CounterValue

from fakes import FakePMU, FakeTarget, hw, sw


def run_fake(pmu, sets, interval=0.1, target_kind="pid", idle=None, **kw):
    mon = Monitor(sets, FakeTarget(pmu, target_kind), interval=interval, backend=pmu, discover_period=0.01, **kw)
    return mon, list(mon.run(idle=idle))


def write(writer, mon, rows):
    out = io.StringIO()
    w = writer(out, mon)
    w.header()
    for r in rows:
        w.row(r)
    w.summary()
    return out.getvalue()


@pytest.fixture
def sleeper():
    """A process that sleeps (it never runs while it is monitored): `sleep`, once it has
    executed and sleeps (state S; on a busy machine its start may take a while)."""
    p = subprocess.Popen(["sleep", "60"])
    try:
        for _ in range(1000):
            with open(f"/proc/{p.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{p.pid}/comm") as f:
                comm = f.read().strip()
            if comm == "sleep" and fields[0] == "S":
                break
            time.sleep(0.01)
        yield p
    finally:
        p.kill()
        p.wait()


# ============================================================================ the bundled workloads
def test_stat_runs_a_bundled_workload_by_name_as_measure_does():
    """`stat -- corecast-lockbench -t 2` said "cannot run": stat now looks for its program as
    measure and the dashboard do (PATH, then corecast's bundled workloads)."""
    assert shutil.which("corecast-lockbench") is None          # found only among the bundled ones
    r = subprocess.run([sys.executable, "-m", "corecast", "stat", "-c", "task_clock", "-A", "--format", "jsonl",
                        "--", "corecast-lockbench", "-t", "2", "-n", "20000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ops: 20000" in r.stdout                            # the workload ran, its output its own
    summary = [json.loads(x) for x in r.stderr.splitlines() if '"summary"' in x][-1]
    assert summary["sets"][0][0]["value"] > 0 and summary["exit_status"] == 0


def test_stat_names_where_it_looked_for_a_missing_program(cli):
    r = cli("stat", "-c", "task_clock", "--", "corecast-nosuchworkload")
    assert r.code == 2 and r.err.count("\n") == 1
    assert "not in PATH, nor a bundled corecast workload" in r.err


# ============================================================================ what ended the monitoring
@pytest.mark.parametrize("tracker, batched", [(None, False), (True, False), (True, True)])
def test_fake_duration_labels_the_last_row_and_says_the_process_runs_on(tracker, batched):
    """-p PID --duration: the last row of a thread still running is `duration`, not `exit`; a
    thread that ended before is `exit`; a note says the process still runs."""
    pmu = FakePMU({"a": 1.0}, {1: (0, 10.0), 2: (0.05, 0.22)}, k=4, tracker=tracker, batched=batched)
    mon, rows = run_fake(pmu, [[sw("a")]], max_duration=0.35)
    last = {}
    for r in rows:
        last[r.tid] = r.sample_type
    assert last == {1: "duration", 2: "exit"}
    assert mon.ended_by == "duration"
    assert [n for n in mon.notes if "process 1 still runs" in n and "--duration reached" in n]
    table = write(TableWriter, mon, rows)
    assert " duration " in table and "note: process 1 still runs" in table
    summary = json.loads(write(JsonWriter, mon, rows).splitlines()[-1])
    assert any("still runs" in n for n in summary["notes"])


def test_fake_a_command_that_exits_keeps_exit_rows():
    pmu = FakePMU({"a": 1.0}, {1: (0, 0.25)}, k=4, tracker=True)
    mon, rows = run_fake(pmu, [[sw("a")]], target_kind="command", max_duration=5)
    assert rows[-1].sample_type == "exit" and mon.ended_by == "exit"
    assert not [n for n in mon.notes if "still runs" in n]


@pytest.mark.parametrize("sig, label", [(signal.SIGINT, "interrupt"), (signal.SIGTERM, "detach")])
def test_fake_a_signal_labels_the_last_row_of_an_attached_process(sig, label):
    pmu = FakePMU({"a": 1.0}, {1: (0, 10.0)}, k=4, tracker=True)
    box = {}

    def idle():
        if pmu.clock.t > 0.25 and "sent" not in box:
            box["sent"] = True
            box["mon"]._on_signal(sig, None)

    mon = Monitor([[sw("a")]], FakeTarget(pmu, "pid"), interval=0.1, backend=pmu, discover_period=0.01)
    box["mon"] = mon
    rows = list(mon.run(idle=idle))
    assert rows[-1].sample_type == label and [r.sample_type for r in rows[:-1]] == ["tick"] * (len(rows) - 1)
    assert [n for n in mon.notes if "process 1 still runs" in n and f"'{label}'" in n]


def test_fake_per_cpu_duration_labels_its_last_rows():
    pmu = FakePMU({"a": 1.0}, {1: (0, 10.0)}, k=4)
    mon, rows = run_fake(pmu, [[sw("a")]], per_cpu=True, target_kind="system", max_duration=0.3, cpus=[0, 1])
    assert [r.sample_type for r in rows[-2:]] == ["duration", "duration"]
    assert all(r.sample_type == "tick" for r in rows[:-2])


def test_stat_attach_with_duration_says_the_process_still_runs(cli, sleeper):
    r = cli("stat", "-p", sleeper.pid, "-c", "task_clock", "-T", "0.1", "--duration", "0.3")
    assert r.code == 0, r.err
    rows = [x.split() for x in r.err.splitlines() if x.strip()[:1].isdigit()]
    assert rows and rows[-1][4] == "duration" and all(x[4] == "tick" for x in rows[:-1])
    assert f"note: process {sleeper.pid} still runs" in r.err
    assert sleeper.poll() is None


# ============================================================================ why a value was not counted
def test_stat_attached_sleeper_says_why_nothing_was_counted(cli, sleeper):
    """`<not counted>  not counted` was all a sleeping process's totals said."""
    r = cli("stat", "-p", sleeper.pid, "-c", "task_clock,context_switches", "-T", "0.1", "--duration", "0.3")
    assert r.code == 0, r.err
    uncounted = [x for x in r.err.splitlines() if "<not counted>" in x]
    assert len(uncounted) == 4                       # [Totals] and [Process totals], two events each
    for line in uncounted:
        why = line.split("<not counted>", 1)[1].strip()
        assert why.startswith("did not run while monitored (enabled 0 ns"), line
    r = cli("stat", "-p", sleeper.pid, "-c", "task_clock", "-T", "0.1", "--duration", "0.2", "--format", "jsonl")
    summary = json.loads(r.err.splitlines()[-1])
    for v in summary["sets"][0] + summary["process_totals"][0]:
        assert v["value"] is None and v["message"].startswith("did not run while monitored"), v


def test_why_not_counted_never_bare():
    spec = hw("a")
    assert why_not_counted(CounterValue("a", None, 0, 0, 0, "ok", "not counted", spec=spec)).startswith(
        "did not run while monitored")
    assert "never on a counter" in why_not_counted(CounterValue("a", None, 0, 5_000_000, 0, "ok", "", spec=spec))
    assert why_not_counted(CounterValue("a", None, None, 0, 0, "denied", "", spec=spec)) == "denied"
    assert why_not_counted(CounterValue("a", None, 0, 1, 0, "ok", "lost", spec=spec)) == "lost"


def _no_counter_free():
    """A PMU with no hardware counter free, one event it does not support, a metric that needs
    the uncounted one: every kind of value not counted."""
    pmu = FakePMU({"a": 1.0, "t": 1.0, "u": 1.0}, {1: (0, 0.35)}, k=0, unsupported={"u"}, tracker=True)
    return run_fake(pmu, [[hw("a"), sw("t"), hw("u")]], target_kind="command",
                    metrics=[parse_metric("x=a/t")])


def test_table_says_why_for_every_value_not_counted():
    mon, rows = _no_counter_free()
    text = write(TableWriter, mon, rows)
    lines = text.splitlines()
    for line in lines:
        for tag in ("<not counted>", "<not supported>"):
            if tag in line:
                why = line.split(tag, 1)[1].strip()
                assert why and why != "not counted", line
    totals = lines[lines.index("[Totals]"):]
    assert [x for x in totals if x.startswith("pmc0") and "never on a counter" in x]
    assert [x for x in totals if x.startswith("pmc2") and "<not supported>  no PMU" in x]
    # the rows' '-': the reason of each, once (the totals line gives the unsupported one's)
    dashes = [x for x in lines if x.startswith("note: '-' for")]
    assert [x for x in dashes if x.startswith("note: '-' for a in ") and "no counter free" in x]
    assert [x for x in dashes if x.startswith("note: '-' for x in ") and "undefined" in x]
    assert not [x for x in dashes if "for u " in x]


def test_csv_and_json_say_why_for_every_value_not_counted():
    mon, rows = _no_counter_free()
    text = write(JsonWriter, mon, rows)
    objs = [json.loads(x) for x in text.splitlines()]
    for o in objs:
        if o["type"] == "sample":
            for c in o["counters"]:
                assert c["value"] is not None or c["message"] not in ("", "not counted"), c
    summary = objs[-1]
    for v in summary["sets"][0] + summary["process_totals"][0]:
        assert v["value"] is not None or v["message"] not in ("", "not counted"), v
    by = {v["name"]: v for v in summary["sets"][0]}
    assert "never on a counter" in by["a"]["message"] and by["u"]["message"] == "no PMU"
    assert by["t"]["value"] > 0 and by["t"]["message"] == ""
    for fmt in ("rows", "totals"):
        mon, rows = _no_counter_free()
        mon.totals_only = fmt == "totals"
        lines = [x.split(",") for x in write(CsvWriter, mon, rows).splitlines()]
        head = lines[0]
        value, message = head.index("value"), head.index("message")
        body = [x for x in lines[1:] if x[head.index("kind")] == "counter"]
        assert body
        for x in body:
            assert x[value] != "" or x[message] not in ("", "not counted"), x


def test_json_of_a_set_never_live_says_why():
    pmu = FakePMU({"a": 1.0, "b": 1.0}, {1: (0, 0.08)}, k=4)        # ends before the first rotation
    mon, rows = run_fake(pmu, [[sw("a")], [sw("b")]], interval=0.1)
    summary = json.loads(write(JsonWriter, mon, rows).splitlines()[-1])
    b = summary["sets"][1][0]
    assert b["value"] is None and "never the live one" in b["message"]


# ============================================================================ perf's default set
def test_stat_without_events_counts_perfs_default_set(cli):
    """`perf stat -- cmd` counts a default set; `corecast stat -- cmd` said "no events"."""
    r = cli("stat", "--format", "jsonl", "--", "sh", "-c", "i=0; while [ $i -lt 300 ]; do i=$((i+1)); done")
    assert r.code == 0, r.err
    objs = [json.loads(x) for x in r.err.splitlines() if x.startswith("{")]
    header, summary = objs[0], objs[-1]
    assert [e["name"] for e in header["sets"][0]] == list(DEFAULT_EVENTS)
    assert any("default set" in n and "perf stat" in n for n in summary["notes"])
    by = {v["name"]: v for v in summary["sets"][0]}
    assert by["task_clock"]["status"] == "ok" and by["task_clock"]["value"] > 0
    assert by["page_faults"]["value"] > 0
    for name in ("cycles", "instr", "branches", "branch_misses"):
        v = by[name]
        # counted where the PMU has it; otherwise its status and why
        assert v["value"] is not None or v["message"] not in ("", "not counted"), v


def test_stat_default_set_table_marks_what_the_pmu_lacks(cli):
    r = cli("stat", "--", "true")
    assert r.code == 0, r.err
    lines = r.err.splitlines()
    totals = lines[lines.index("[Totals]"):]
    for name in DEFAULT_EVENTS:
        line = [x for x in totals if x.split()[1:2] == [name]]
        assert line, name
        if "<" in line[0]:
            assert line[0].split(">", 1)[1].strip(), line[0]          # the reason
    assert [x for x in lines if x.startswith("note: no -c given: counted the default set")]


def test_virtual_counters_alone_are_not_given_the_default_set(cli):
    r = cli("stat", "-V", "psi_cpu_some", "--format", "jsonl", "--", "true")
    assert r.code == 0, r.err
    header = json.loads(r.err.splitlines()[0])
    assert header["sets"] == [[]]


def test_stat_says_duration_stopped_the_command(cli):
    r = cli("stat", "-A", "-c", "task_clock", "--duration", "0.2", "--", "sleep", "30")
    assert r.code == 128 + 15, r.err
    assert "'sleep' was ended by SIGTERM (--duration reached: corecast stopped it)" in r.err
