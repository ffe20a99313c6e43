"""corecast meters: the meters computed from a fake /proc and a simulated PMU on a virtual clock
(exact values), triggers with hysteresis and dwell, the advice policy, the blackboard's reader
and header, recording and replay."""
from __future__ import annotations

import math
import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from corecast.dataset import load
from corecast.meters import Board, board as B, layout as L
from corecast.meters.catalog import Env
from corecast.meters.daemon import Daemon, Options
from corecast.meters.tree import build
from corecast.native import include_dir
from corecast.errors import UserError

from conftest import board_name
from fakes import HZ, FakePMU, FakeProc, two_cpus   # the simulated PMU of the stat tests, a fake /proc

def fake_daemon(tmp_path, meters="software", triggers=None, pmu=None, status=None, **opts):
    proc = FakeProc(tmp_path / "proc")
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, status=status or (lambda spec: None),
              cpu="skylake")
    pmu = pmu or FakePMU({"context_switches": 1e-6, "cpu_migrations": 0.0, "page_faults": 0.0}, {})
    o = Options(interval_s=0.01, window_s=0.05, meters=meters, triggers=triggers, blackboard=board_name(), **opts)
    d = Daemon(o, backend=pmu, env=env, tree=build(two_cpus()))
    d.writer.running()
    return d, proc, pmu


def tick(d, pmu, t_s: float) -> None:
    pmu._advance_to(t_s)
    d.step(round(t_s * 1e9))


def read(d, meter, scope="node"):
    return d.reader.read(meter, scope)


# ============================================================================================
# meters from a fake /proc, on a virtual clock

def test_software_meters_exact_from_fake_proc(tmp_path):
    d, p, pmu = fake_daemon(tmp_path)
    try:
        tick(d, pmu, 1.0)                                  # the baseline: no value yet, never a 0
        assert read(d, "cpu_busy").current is None and read(d, "cpu_busy").count == 0
        p.jiffies[0][0] += 3                               # cpu0: 3 user ticks, 1 idle
        p.jiffies[0][3] += 1
        p.jiffies[1][3] += 3                               # cpu1: 3 idle, 1 steal
        p.jiffies[1][7] += 1
        p.wait_ns = [2_000_000, 0]                         # 2 ms waited on cpu0's run queue
        p.psi["cpu"][0] += 5000                            # 5 ms of 'some' CPU pressure
        p.psi["io"] = [1000, 500]
        p.ctxt, p.running = 40, 3
        p.write()
        tick(d, pmu, 1.01)
        assert read(d, "cpu_busy", "core0").current == pytest.approx(0.75)
        assert read(d, "cpu_busy", "core1").current == pytest.approx(0.0)
        assert read(d, "cpu_busy").current == pytest.approx(3 / 8)        # the node: sums, not a mean of ratios
        assert read(d, "cpu_busy").total == pytest.approx(3 / HZ)         # busy seconds
        assert read(d, "cpu_steal", "core1").current == pytest.approx(0.25)
        assert read(d, "runq_delay", "core0").current == pytest.approx(0.2)   # 2 ms per 10 ms
        assert read(d, "runq_delay").current == pytest.approx(0.2)
        assert read(d, "psi_cpu_some").current == pytest.approx(0.5)
        assert read(d, "psi_io_some").current == pytest.approx(0.1)
        assert read(d, "psi_io_full").current == pytest.approx(0.05)
        assert read(d, "psi_io_full").total == pytest.approx(500e-6)
        assert read(d, "runnable").current == 2                          # the daemon's own thread left out
        # perf software events per CPU from the simulated PMU: 1e-6 per ns on each CPU
        assert read(d, "context_switches", "core0").current == pytest.approx(1e3, rel=1e-6)
        assert read(d, "context_switches").current == pytest.approx(2e3, rel=1e-6)
        # a tick in which the clock ticks did not advance: the ratio keeps its last value and
        # the window average is the ratio of the sums (time-weighted)
        tick(d, pmu, 1.02)
        r = read(d, "cpu_busy", "core0")
        assert r.current == pytest.approx(0.75) and r.count == 1
        p.jiffies[0][3] += 4
        p.write()
        tick(d, pmu, 1.03)
        r = read(d, "cpu_busy", "core0")
        assert r.current == 0.0 and r.avg == pytest.approx(3 / 8) and (r.min, r.max) == (0.0, 0.75)
        # the window (50 ms = 5 ticks) forgets the old ticks
        for k in range(4, 10):
            p.jiffies[0][0] += 1
            p.write()
            tick(d, pmu, 1.0 + k * 0.01)
        r = read(d, "cpu_busy", "core0")
        assert r.avg == pytest.approx(1.0) and r.min == 1.0 and r.count == 5
    finally:
        d.close()


def test_unavailable_sources_say_why_and_have_no_value(tmp_path):
    proc = FakeProc(tmp_path / "proc", psi=False, schedstat=False)
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, cpu="skylake",
              status=lambda spec: "denied (perf_event_paranoid=2)")
    o = Options(interval_s=0.01, window_s=0.05, meters="all", blackboard=board_name())
    d = Daemon(o, backend=FakePMU({}, {}), env=env, tree=build(two_cpus()))
    try:
        d.writer.running()
        proc.jiffies[0][0] += 1
        for t in (1.0, 1.01, 1.02):
            proc.ctxt += 10
            proc.write()
            d.step(round(t * 1e9))
        snap = d.reader.snapshot()
        by = {(m.name, m.scope): (m, r) for m, r in snap.meters}
        for name, why in (("runq_delay", "CONFIG_SCHEDSTATS"), ("psi_cpu_some", "/proc/pressure"),
                          ("cpi", "denied"), ("migrations", "denied")):
            m, r = by[(name, "node")]
            assert m.quality == "unavailable" and why in m.source, (name, m.source)
            assert r.current is None and r.avg is None and r.count == 0       # never a 0
        # per-CPU counting denied: the node's context switches come from /proc/stat instead
        m, r = by[("context_switches", "node")]
        assert m.quality == "measured" and "/proc/stat ctxt" in m.source
        assert r.current == pytest.approx(1000.0)
        assert by[("context_switches", "core0")][0].quality == "unavailable"
        assert by[("cpu_busy", "node")][0].quality == "measured"
    finally:
        d.close()


def test_hardware_meters_through_the_simulated_pmu(tmp_path):
    """CPI and the LLC miss ratio per CPU from the stat tests' simulated PMU, which multiplexes
    (2 counters for 4 events per CPU): the values are the scaled counts' ratios."""
    rates = {"cycles": 3.0, "instr": 2.0, "llc_misses": 0.01, "llc_refs": 0.04, "context_switches": 1e-6,
             "cpu_migrations": 0.0, "page_faults": 0.0}
    pmu = FakePMU(rates, {}, k=2, unsupported={"L2_RQSTS:ALL_DEMAND_MISS", "L2_RQSTS:MISS"})
    status = lambda spec: "not supported (no PMU)" if spec.name in pmu.unsupported else None  # noqa: E731
    d, p, _ = fake_daemon(tmp_path, meters="cpi,llc_miss_ratio,l2_miss_ratio,cpu_busy", pmu=pmu, status=status)
    try:
        assert d.python_fed                              # no descriptors: read in Python each tick
        for k in range(6):
            tick(d, pmu, 1.0 + 0.01 * k)
        for scope in ("core0", "core1", "node"):
            assert read(d, "cpi", scope).current == pytest.approx(1.5, rel=1e-3)
            assert read(d, "llc_miss_ratio", scope).avg == pytest.approx(0.25, rel=1e-3)
        m = d.reader.meter("l2_miss_ratio", "core0")
        assert m.quality == "unavailable" and "not supported" in m.source
        assert read(d, "l2_miss_ratio", "core0").current is None
        assert d.reader.meter("cpi", "core0").source.startswith("measured: perf cycles / instructions")
    finally:
        d.close()


# ============================================================================================
# triggers and advice, on the virtual clock

def _busy_step(d, p, pmu, t, busy):
    """One 10 ms tick at time t with cpu0 busy or idle (cpu_busy of core0: 1 or 0)."""
    p.jiffies[0][0 if busy else 3] += 1
    p.write()
    tick(d, pmu, t)


def test_trigger_hysteresis_dwell_actions_and_advice(tmp_path):
    out = tmp_path / "actions.txt"
    trig = tmp_path / "t.toml"
    trig.write_text(f"""
[advice]
policy = "halve"
min_workers = 1
max_workers = 8
interval = "30ms"

[[trigger]]
name = "busy"
meter = "cpu_busy"
scope = "core0"
low = 0.3
high = 0.7
dwell = "40ms"
command = "echo $CORECAST_TRIGGER $CORECAST_SCOPE $CORECAST_PREVIOUS_STATE $CORECAST_STATE >> {out}"

[[trigger]]
name = "never"
meter = "cpu_busy"
scope = "core0"
low = 0.3
high = 0.7
dwell = "10s"
advise = false
""")
    d, p, pmu = fake_daemon(tmp_path, meters="cpu_busy", triggers=str(trig))
    try:
        b = d.reader
        sub = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sub.connect(B.socket_address(d.opts.blackboard))
        gen = b.generation()
        woke = []
        waiter = threading.Thread(target=lambda: woke.append(b.wait_change(gen, timeout=30)))
        waiter.start()
        tick(d, pmu, 1.0)
        t = 1.0
        states, allowed = [], []
        # 0.2 s busy, with a 20 ms dip in the middle (the window average stays above low: no change)
        for k in range(1, 41):
            t = 1.0 + 0.01 * k
            busy = k <= 20 and k not in (10, 11)
            _busy_step(d, p, pmu, t, busy)
            states.append(b.trigger_state(0).state)
            allowed.append(b.allowed_workers("core0"))
        s = b.trigger_state(0)
        assert (s.ups, s.downs, s.transitions) == (1, 1, 2)
        assert b.trigger_state(1).transitions == 0                 # its dwell was never met
        # the window average is over 0.7 from the first busy tick (k=1, the only one with data);
        # 40 ms of dwell later (k=5) the trigger goes HIGH. After the last busy tick (k=20) the
        # 50 ms window's average falls: 0.8, 0.6, 0.4, then 0.2 < low at k=24; LOW at k=28.
        # The dip at k=10-11 leaves it at 0.6, between the levels: no change.
        assert states.index("high") + 1 == 5
        assert states.index("low", 5) + 1 == 28
        # advice: 8 halves toward 1 while HIGH, one change per 30 ms, then +1 per 30 ms
        seen = [a for i, a in enumerate(allowed) if i == 0 or a != allowed[i - 1]]
        assert seen[:4] == [8, 4, 2, 1]
        assert seen[-1] > 1 and all(y - x == 1 for x, y in zip(seen[3:], seen[4:]))
        changes = [i for i in range(1, len(allowed)) if allowed[i] != allowed[i - 1]]
        assert all(y - x >= 3 for x, y in zip(changes, changes[1:]))   # at most one change per 30 ms
        waiter.join(5)
        assert woke == [True]                                      # the futex word woke the waiter
        sub.settimeout(5)
        assert sub.recv(16).startswith(b"!")                       # and the subscribers' socket
        sub.close()
        for _ in range(50):
            d.after(t)
            if not d.commands and out.exists() and len(out.read_text().splitlines()) == 2:
                break
            threading.Event().wait(0.05)
        assert out.read_text().splitlines() == ["busy core0 low high", "busy core0 high low"]
    finally:
        d.close()


# ============================================================================================
# the blackboard: reader, staleness, application area, header

def test_board_reader_application_area_and_stop(tmp_path):
    d, p, pmu = fake_daemon(tmp_path, meters="cpu_busy,psi_cpu_some")
    name = d.opts.blackboard
    try:
        with Board.open(name) as b:
            assert b.stale() is None and b.state == "running" and b.pid == os.getpid()
            assert {s.name for s in b.scopes()} == {"node", "socket0", "core0", "core1"}
            m = b.meter("psi_cpu_some")
            assert (m.unit, m.quality, m.kind, m.has_total, m.total_unit) == ("s/s", "measured", "rate", True, "s")
            b.publish("phase", 3)
            b.publish("active_workers", 5)
            b.publish("phase", 4)
            apps = {(a.key, a.value, a.pid, a.alive) for a in b.apps()}
            assert apps == {("phase", 4.0, os.getpid(), True), ("active_workers", 5.0, os.getpid(), True)}
            with pytest.raises(UserError, match="no meter 'cpu_busy' at scope 'thread9'"):
                b.meter("cpu_busy", "thread9")
        d.close()
        assert not B.board_path(name).exists()                      # a clean exit removes it
    finally:
        d.close()
    with pytest.raises(UserError, match="no blackboard"):
        Board.open(name)


C_READER = r"""
#include <corecast_meters.h>
int main(int argc, char **argv) {
    ccm_board b;
    int r = ccm_open(&b, argc > 1 ? argv[1] : NULL);
    if (r) { printf("open %d\n", r); return 1; }
    char why[200];
    int stale = ccm_stale(&b, 0, why, sizeof why);
    int i = ccm_find_meter(&b, "cpu_busy", "core0");
    struct ccm_meter_rec m;
    if (i < 0 || ccm_read_meter(&b, i, &m)) return 3;
    printf("stale %d %s\ncpu_busy %.6f count %u\n", stale, why, m.current, m.count);
    printf("quality %d unit %s\n", ccm_meter_desc(&b, i)->quality, ccm_meter_desc(&b, i)->unit);
    printf("allowed %d\n", cc_allowed_workers(NULL));
    if (ccm_app_publish(&b, "from_c", 42.5)) return 4;
    printf("layout %zu %zu %zu\n", sizeof(struct ccm_header), sizeof(struct ccm_meter_desc), sizeof(struct ccm_meter_rec));
    ccm_close(&b);
    return 0;
}
"""


@pytest.mark.parametrize("compiler", [["gcc", "-std=c11"], ["g++", "-x", "c++"]])
def test_header_only_c_reader(tmp_path, compiler):
    src = tmp_path / "reader.c"
    src.write_text(C_READER)
    exe = tmp_path / "reader"
    r = subprocess.run([*compiler, "-Wall", "-Wextra", "-Werror", "-O2", "-I", str(include_dir("corecast_meters.h")),
                        "-o", str(exe), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    d, p, pmu = fake_daemon(tmp_path, meters="cpu_busy")
    try:
        p.jiffies[0][0] += 1
        p.write()
        tick(d, pmu, 1.0)
        p.jiffies[0][0] += 1
        p.jiffies[0][3] += 1
        p.write()
        tick(d, pmu, 1.01)
        r = subprocess.run([str(exe), d.opts.blackboard], capture_output=True, text=True,
                           env=dict(os.environ, CORECAST_METERS=d.opts.blackboard))
        assert r.returncode == 0, r.stdout + r.stderr
        lines = r.stdout.splitlines()
        # the heartbeat is the virtual clock's (1.01 s after boot): old, so the C reader says stale,
        # and cc_allowed_workers refuses advice from a stale board
        assert lines[0].startswith("stale 1 no tick for")
        assert lines[1] == "cpu_busy 0.500000 count 1"
        assert lines[2] == "quality 0 unit ratio"
        assert lines[3] == "allowed -1"
        assert lines[4] == f"layout {256} {512} {64}"
        assert ("from_c", 42.5) in {(a.key, a.value) for a in d.reader.apps()}
    finally:
        d.close()


def test_header_compiles_after_other_system_headers(tmp_path):
    """A reader that includes a system header first (docs/meters.md's prints with stdio) has
    not defined _GNU_SOURCE in time for the header's own #define: it compiles all the same
    (struct ucred, declared only under _GNU_SOURCE, ended it in 'storage size of cred')."""
    src = tmp_path / "after.c"
    src.write_text("#include <stdio.h>\n#include <sys/socket.h>\n" + C_READER)
    r = subprocess.run(["gcc", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", "-I",
                        str(include_dir("corecast_meters.h")), str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_layout_mirror_checked_against_the_library():
    L._lib = None
    lib = L.lib()                      # raises when the ctypes mirrors and the header differ
    got = (L.C.c_int64 * 64)()
    n = lib.ccmx_layout(got, 64)
    assert list(got[:n]) == L._expected() and n == 23


# ============================================================================================
# recording and replay

@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_record_is_a_dataset_and_replays(tmp_path, cli, suffix):
    rec = tmp_path / f"m{suffix}"
    trig = tmp_path / "t.toml"
    trig.write_text('[[trigger]]\nmeter = "cpu_busy"\nscope = "core0"\nlow = 0.2\nhigh = 0.6\n')
    d, p, pmu = fake_daemon(tmp_path, meters="cpu_busy,psi_cpu_some,runq_delay", triggers=str(trig), record=str(rec))
    try:
        for k in range(30):
            _busy_step(d, p, pmu, 1.0 + 0.01 * k, 10 <= k < 20)
    finally:
        d.close()
    ds = load(rec)
    assert len(ds) == 5                                  # a row per 50 ms window
    assert set(ds.cores) == {2.0}
    assert list(ds.metrics["elapsed_s"]) == pytest.approx([0.05, 0.1, 0.15, 0.2, 0.25])
    busy = ds.metrics["cpu_busy@core0"]
    # rows at k = 5, 10, 15, 20, 25 (10 ms ticks, k = 10..19 busy), each the last 5 ticks' average
    assert list(busy) == pytest.approx([0.0, 0.2, 1.0, 0.8, 0.0])
    assert list(ds.metrics["trigger:cpu_busy@core0@core0"]) == [0, 0, 1, 1, 0]
    assert ds.columns["cpu_busy@core0"].unit == "ratio"
    assert ds.notes["meters"]["window_s"] == 0.05
    r = cli("info", rec)
    assert r.code == 0 and "cpu_busy@node" in r.out
    plot = tmp_path / "m.png"
    r = cli("meters", "replay", rec, "--plot", plot, "--meters", "cpu_busy", "--scope", "core0")
    assert r.code == 0, r.err
    assert "cpu_busy" in r.out and "low->high at 0.15 s, high->low at 0.25 s" in r.out
    assert plot.stat().st_size > 10_000
    r = cli("meters", "replay", rec, "--meters", "cpi")
    assert r.code == 2 and "'cpi' is not in" in r.err
    if suffix == ".csv":
        pd = pytest.importorskip("pandas")
        assert list(pd.read_csv(rec).columns[:3]) == ["cores", "elapsed_s", "cpu_busy@node"]


def test_replay_refuses_a_dataset_that_is_not_a_recording(cli, tmp_path):
    f = tmp_path / "d.csv"
    f.write_text("cores,throughput\n1,2\n")
    r = cli("meters", "replay", f)
    assert r.code == 2 and "not a recording" in r.err and r.err.count("\n") == 1


def test_replay_of_a_recording_moved_without_its_metadata_says_so(cli, tmp_path, monkeypatch):
    """`cp m.csv meters.csv` left m.csv.meta.json behind: replay said "no elapsed_s column" of a
    file whose elapsed_s column it had just read (as time_s)."""
    monkeypatch.chdir(tmp_path)
    Path("meters.csv").write_text("cores,elapsed_s,cpu_busy@node\n2,0.1,0.5\n2,0.2,0.25\n")
    r = cli("meters", "replay", "meters.csv")
    assert r.code == 2 and r.err.count("\n") == 1 + r.err.count("note:"), r.err
    assert "meters.csv.meta.json is not beside it" in r.err


def test_recorded_values_are_never_zero_for_missing(tmp_path):
    rec = tmp_path / "m.csv"
    d, p, pmu = fake_daemon(tmp_path, meters="cpu_busy", record=str(rec))
    try:
        for k in range(11):
            tick(d, pmu, 1.0 + 0.01 * k)                  # the clock ticks never advance
    finally:
        d.close()
    ds = load(rec)
    assert all(math.isnan(v) for v in ds.metrics["cpu_busy@node"])


def test_slow_sources_read_every_10_ms_rates_over_their_span(tmp_path):
    """At a 5 ms interval /proc/stat and the per-CPU perf counters are read every other tick;
    their meters get a value at those ticks, over the 10 ms since the last reading, while PSI
    is read every tick."""
    proc = FakeProc(tmp_path / "proc")
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, status=lambda spec: None, cpu="skylake")
    pmu = FakePMU({"context_switches": 1e-6, "cpu_migrations": 0.0, "page_faults": 0.0}, {})
    o = Options(interval_s=0.005, window_s=0.05, meters="software", blackboard=board_name())
    d = Daemon(o, backend=pmu, env=env, tree=build(two_cpus()))
    try:
        d.writer.running()
        assert d.engine.slow_ticks == 2
        counts = []
        for k in range(7):
            proc.jiffies[0][0] += 1                 # visible only when /proc/stat is read
            proc.psi["cpu"][0] += 2500              # half of every 5 ms tick
            proc.write()
            tick(d, pmu, 1.0 + 0.005 * k)
            counts.append(read(d, "cpu_busy", "core0").count)
            if k:
                assert read(d, "psi_cpu_some").current == pytest.approx(0.5)
        assert counts == [0, 0, 1, 1, 2, 2, 3]      # a value every other tick
        assert read(d, "context_switches", "core0").current == pytest.approx(1e3, rel=1e-6)   # over 10 ms
        assert read(d, "context_switches", "core0").avg == pytest.approx(1e3, rel=1e-6)
        assert read(d, "cpu_busy", "core0").current == 1.0
    finally:
        d.close()


def test_window_min_max_follow_a_brute_force_window(tmp_path):
    """The window's minimum and maximum (monotonic queues, O(1) a tick) are those of the last
    window of per-tick values, on values that repeat (a rate of 0 tick after tick), that rise
    and fall in runs, and ticks with no value at all (the file's line missing: NaN, skipped)."""
    import random
    rng = random.Random(28)
    proc = FakeProc(tmp_path / "proc")
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, status=lambda spec: None, cpu="skylake")
    pmu = FakePMU({"context_switches": 1e-6, "cpu_migrations": 0.0, "page_faults": 0.0}, {})
    o = Options(interval_s=0.01, window_s=0.07, meters="runnable,psi_cpu_some", blackboard=board_name())
    d = Daemon(o, backend=pmu, env=env, tree=build(two_cpus()))
    try:
        d.writer.running()
        gauge: list[float] = []
        rate: list[float] = []
        for k in range(400):
            phase = (k // 40) % 4
            running = (rng.choice([1, 1, 1, 2]) if phase == 0 else k % 9 + 1 if phase == 1
                       else 12 - k % 11 if phase == 2 else rng.randint(1, 6))
            missing = rng.random() < 0.08
            proc.running = running
            step = rng.choice([0, 0, 0, 2500, 5000]) if phase != 1 else 1000 * (k % 7)
            proc.psi["cpu"][0] += step
            proc.write()
            if missing:
                stat = proc.root / "stat"
                stat.write_text("".join(ln for ln in stat.read_text().splitlines(True)
                                        if not ln.startswith("procs_running")))
            tick(d, pmu, 1.0 + 0.01 * k)
            gauge.append(math.nan if missing else running - 1.0)
            if k:
                rate.append(step / 1e6 / 0.01)
            for meter, vals in (("runnable", gauge), ("psi_cpu_some", rate)):
                win = [v for v in vals[-7:] if not math.isnan(v)]
                r = read(d, meter)
                if win:
                    assert (r.min, r.max) == (pytest.approx(min(win)), pytest.approx(max(win))), (meter, k)
                    assert r.count == len(win)
                else:
                    assert r.min is None and r.max is None
    finally:
        d.close()


def test_per_cpu_software_events_are_one_group_read(tmp_path):
    """On the real perf backend the software events of a CPU are opened as one group read in one
    call (one inter-processor interrupt a CPU, not one a counter), and their meters still count."""
    o = Options(interval_s=0.01, window_s=0.05, meters="context_switches,migrations,page_faults",
                blackboard=board_name())
    d = Daemon(o)
    try:
        if not all(i.available for i in d.instances):
            pytest.skip("per-CPU software events cannot be counted here: "
                        + next(i.source for i in d.instances if not i.available))
        groups = [h for h, _ in d.handles if getattr(h, "group", False)]
        assert len(groups) == len(d.tree.cpus) and all(len(g.counters) == 3 for g in groups)
        assert all([c.group_index for c in g.counters] == [0, 1, 2] for g in groups)
        assert len(d.perf_fds) == 3 * len(d.tree.cpus)
        assert all(isinstance(v, tuple) and v[2] == 3 for v in d.perf_fds.values())
        assert len({v[0] for v in d.perf_fds.values()}) == len(d.tree.cpus)     # one leader a CPU
        d.writer.running()
        d.engine.run(30)
        assert read(d, "context_switches").current is not None
        assert read(d, "context_switches").current > 0
        assert read(d, "page_faults").count > 0
    finally:
        d.close()


# ============================================================================================
# the memory-latency probe (chase's kernel, for real)

def test_memory_latency_probe_over_the_profiles_idle_latency(tmp_path, monkeypatch):
    from corecast.memprofile import MemoryProfile
    prof = tmp_path / "memory.json"
    MemoryProfile(idle_latency_ns=50.0).write(prof)
    d, p, pmu = fake_daemon(tmp_path, meters="mem_latency,mem_probe_latency,mem_probe_cost",
                            memory_profile=str(prof), probe_period_s=0.05)
    try:
        assert d.probe is not None and d.probe.cpu == 1
        for _ in range(400):                               # the first burst (the buffer is built first)
            if d.probe.latest() is not None:
                break
            threading.Event().wait(0.05)
        r = d.probe.latest()
        assert r is not None, d.probe.error
        tick(d, pmu, 1.0)                                  # after it, Python hands the probe's values over
        tick(d, pmu, 1.01)
        lat, ratio, cost = (read(d, m).current for m in ("mem_probe_latency", "mem_latency", "mem_probe_cost"))
        assert 1e-9 < lat < 1e-5                           # ns per dereference: a miss, not a hit or a stall
        assert ratio == pytest.approx(lat / 50e-9, rel=1e-4)   # over the profile's idle latency
        assert 0 < cost < 0.5
        m = d.reader.meter("mem_latency")
        assert m.quality == "derived" and f"profile {prof}" in m.source and "CPU 1" in m.source
        assert d.reader.meter("mem_probe_cost").quality == "measured"
    finally:
        d.close()
    assert d.probe is None                                 # stopped and let go at close


def test_probe_unavailable_without_the_chase_kernel(tmp_path, monkeypatch):
    from corecast.meters import probe
    monkeypatch.setattr(probe, "unavailable", lambda: "the chase kernel is not built (no libcorecast_chase.so)")
    d, p, pmu = fake_daemon(tmp_path, meters="mem_latency,cpu_busy")
    try:
        assert d.probe is None
        m = d.reader.meter("mem_latency")
        assert m.quality == "unavailable" and "chase kernel is not built" in m.source
        tick(d, pmu, 1.0)
        tick(d, pmu, 1.01)
        assert read(d, "mem_latency").current is None
    finally:
        d.close()


def test_bad_memory_profile_is_one_line(cli, tmp_path):
    f = tmp_path / "m.json"
    f.write_text('{"kind": "something else"}')
    r = cli("meters", "--meters", "mem_latency", "--memory-profile", f, "--blackboard", board_name(), "--duration", "1")
    assert r.code == 2 and "not a memory profile" in r.err and r.err.count("\n") == 1, r.err


def test_replay_plot_reads_well():
    """Issue 26: the title sat over the data, latency read "1e−7 s", and 16 panels of which
    several were flat zeros."""
    import types

    import numpy as np

    from corecast.meters.record import Series
    from corecast.report import meters as R
    t = np.arange(1, 21) * 0.1
    rec = types.SimpleNamespace(
        path="rec.csv", elapsed_s=t, triggers=[], advice=[],
        meters=[Series("cpu_busy@node", "cpu_busy", "node", "ratio", np.linspace(0.2, 0.9, 20)),
                Series("cpu_steal@node", "cpu_steal", "node", "ratio", np.zeros(20)),
                Series("runq_delay@node", "runq_delay", "node", "s/s", np.full(20, np.nan)),
                Series("mem_probe_latency@node", "mem_probe_latency", "node", "s", np.linspace(1.4e-7, 1.6e-7, 20))])
    fig = R.replay_figure(rec)
    assert fig.corecast_left_out == ["cpu_steal", "runq_delay"]
    axes = fig.get_axes()
    assert [a.get_ylabel().split("\n")[0] for a in axes] == ["cpu_busy", "mem_probe_latency"]
    lat = axes[1]
    assert lat.get_ylabel() == "mem_probe_latency\n[ns]"
    assert 100 < lat.get_ylim()[0] < lat.get_ylim()[1] < 200                 # in ns, not 1e-7 s
    fig.canvas.draw()
    title = fig._suptitle.get_window_extent()
    assert title.y0 >= max(a.get_window_extent().y1 for a in axes)          # above every panel
    assert "not shown (zero or missing throughout): cpu_steal, runq_delay" in fig._supxlabel.get_text()


def test_a_second_signal_while_it_closes_still_removes_the_board(tmp_path):
    """`timeout -s INT 3 corecast meters` signals the daemon, then its process group: the second
    SIGINT came while close() joined the threads, after the old handler was back, so it raised
    there (exit 130, "interrupted") and the board stayed in /dev/shm."""
    import signal

    class Second(Exception):
        pass

    def outer(signum, frame):                  # what was there before the daemon (Python's: raise)
        raise Second()

    FakeProc(tmp_path / "proc")
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, status=lambda spec: None, cpu="skylake")
    o = Options(interval_s=0.01, window_s=0.05, meters="software", blackboard=board_name())
    d = Daemon(o, backend=FakePMU({"context_switches": 1e-6, "cpu_migrations": 0.0, "page_faults": 0.0}, {}),
               env=env, tree=build(two_cpus()))
    path = d.writer.path
    real_close = d.close

    def close():                               # the second signal, as shutting down begins
        os.kill(os.getpid(), signal.SIGINT)
        real_close()

    d.close = close
    before = signal.signal(signal.SIGINT, outer)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))     # the first
    try:
        timer.start()
        assert d.run() == 0
        assert not os.path.exists(path) and not os.path.exists(f"{path}.app")
        assert signal.getsignal(signal.SIGINT) is outer      # given back once closed
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, before)
        real_close()
