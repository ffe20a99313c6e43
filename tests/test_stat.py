"""`corecast stat`: real runs with software events, and a simulated PMU that exercises kernel
multiplexing and scaling, round-robin sets, EBS, thread churn and the writers exactly."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import pytest

from corecast.collect.events import resolve
from corecast.collect.events.spec import EventSpec
from corecast.collect.events import abi
from corecast.collect.monitor import (CsvWriter, JsonWriter, Monitor, TableWriter, Target, parse_metric,
                                      parse_virtual)
from corecast.collect.perf import CounterValue, DrainResult, Sample
from corecast.errors import UserError

from test_perf import progs  # noqa: F401  (session fixture: compiled test programs)


# ============================================================================================
# real runs

def test_stat_threads_picked_up_and_exit_rows(cli, progs, tmp_path):
    out = tmp_path / "o.json"
    r = cli("stat", "-c", "task_clock,context_switches", "-V", "runq_delay,ctxsw,psi_cpu_some", "-T", "0.05",
            "--format", "json", "-o", out, "--", progs["threads"], "3", "150", "30")
    assert r.code == 0, r.err
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert lines[0]["type"] == "header" and lines[-1]["type"] == "summary"
    samples = [x for x in lines if x["type"] == "sample"]
    tids = {s["tid"] for s in samples}
    assert len(tids) >= 4                      # main thread + 3 workers picked up as they appeared
    exits = [s for s in samples if s["sample_type"] == "exit"]
    assert {s["tid"] for s in exits} == tids   # every thread ends in an exit row: no lost rows
    assert [s["nsample"] for s in samples] == list(range(1, len(samples) + 1))
    for s in samples:
        c = {v["name"]: v for v in s["counters"]}
        assert c["task_clock"]["status"] == "ok"
        assert set(c["task_clock"]) >= {"enabled_ns", "running_ns", "value", "raw"}
    worker_cpu = sum(v["value"] or 0 for s in samples if s["tid"] != samples[0]["pid"]
                     for v in s["counters"] if v["name"] == "task_clock")
    assert worker_cpu > 50e6
    assert "psi_cpu_some" in samples[-1]["virtual"]


def test_stat_sleeper_vs_spinner_table(cli, progs):
    r = cli("stat", "-c", "task_clock", "-A", "--", progs["sleeper"])
    assert r.code == 0
    line = [x for x in r.out.splitlines() if "task_clock" in x][0]
    sleep_ns = float(line.split()[2])
    r = cli("stat", "-c", "task_clock", "-A", "--", progs["spinner"])
    line = [x for x in r.out.splitlines() if "task_clock" in x][0]
    spin_ns = float(line.split()[2])
    assert sleep_ns < 20e6 < 150e6 < spin_ns


def test_stat_context_switches_of_n_blocks_csv(cli, progs):
    r = cli("stat", "-c", "context_switches", "-T", "0.05", "--format", "csv", "--", progs["yielder"], "100")
    assert r.code == 0, r.err
    rows = [x.split(",") for x in r.out.splitlines()[1:]]
    total = sum(float(x[10]) for x in rows if x[9] == "context_switches" and x[10])
    assert 100 <= total <= 115


def test_stat_table_layout_and_unsupported_is_dash(cli, progs):
    r = cli("stat", "-c", "instr,task_clock", "-T", "0.1", "--", progs["sleeper"])
    assert r.code == 0
    lines = r.out.splitlines()
    assert lines[0] == "[Event-to-counter mappings]"
    assert lines[1].startswith("pmc0=instr") and lines[2].startswith("pmc1=task_clock")
    i = lines.index("[Event counts]")
    assert lines[i + 1].split()[:6] == ["nsample", "time_s", "pid", "tid", "event", "pmc0"]
    data = [x.split() for x in lines[i + 2:] if x.strip() and x.split()[0].isdigit()]
    assert data and all(d[4] in ("tick", "exit") for d in data)
    if "not supported" in r.out:
        assert all(d[5] == "-" for d in data)        # never 0 for what could not be counted
        assert "<not supported>" in r.out


def test_stat_round_robin_sets(cli, progs):
    r = cli("stat", "-c", "task_clock", "-c", "context_switches,page_faults", "-T", "0.05", "--format", "json",
            "--", progs["spinner"])
    assert r.code == 0
    samples = [json.loads(x) for x in r.out.splitlines() if '"sample"' in x]
    sets = [s["set"] for s in samples]
    assert set(sets) == {0, 1}
    assert all(b == (a + 1) % 2 for a, b in zip(sets, sets[1:]))      # one thread: strict alternation
    for s in samples:
        names = [c["name"] for c in s["counters"]]
        assert names == (["task_clock"] if s["set"] == 0 else ["context_switches", "page_faults"])


def test_stat_attach_to_running_process(cli, progs):
    p = subprocess.Popen([progs["spin_ms"], "2000"])   # long enough to attach on a loaded machine
    try:
        time.sleep(0.05)
        r = cli("stat", "-c", "task_clock", "-p", p.pid, "-T", "0.05", "--format", "json")
    finally:
        p.wait()
    assert r.code == 0, r.err
    samples = [json.loads(x) for x in r.out.splitlines() if '"sample"' in x]
    assert samples and samples[-1]["sample_type"] == "exit"
    assert sum(c["value"] or 0 for s in samples for c in s["counters"]) > 50e6


def test_stat_ebs_real(cli, progs):
    r = cli("stat", "-c", "task_clock:ebs=20000000,page_faults", "--format", "json", "-T", "0.1",
            "--", progs["spinner"])
    assert r.code == 0, r.err
    samples = [json.loads(x) for x in r.out.splitlines() if '"sample"' in x]
    ebs = [s for s in samples if s["sample_type"] == "ebs"]
    assert 6 <= len(ebs) <= 20
    assert samples[-1]["sample_type"] == "exit"


def test_stat_metrics(cli, progs):
    r = cli("stat", "-c", "task_clock,context_switches", "-m", "utilization", "-m", "cs_per_ms=context_switches/(task_clock/1e6)",
            "-T", "0.1", "--format", "json", "--", progs["spinner"])
    assert r.code == 0, r.err
    samples = [json.loads(x) for x in r.out.splitlines() if '"sample"' in x]
    utils = [s["metrics"]["utilization"] for s in samples if s["sample_type"] == "tick"]
    assert utils and all(u is None or 0 <= u <= 1.2 for u in utils)


@pytest.mark.parametrize("args, msg", [
    (["-c", "nosuch", "--", "true"], "unknown event"),
    (["-c", "task_clock", "-T", "0.001", "--", "true"], "at least 0.01"),
    (["-c", "task_clock", "-p", "99999999"], "no such process"),
    (["-c", "task_clock"], "nothing to monitor"),
    (["-c", "task_clock", "-m", "x=nosuch/2", "--", "true"], "unknown name"),
    (["-c", "task_clock", "-m", "x=__import__('os')", "--", "true"], "only numbers"),
    (["-c", "task_clock", "-V", "bogus", "--", "true"], "unknown virtual counter"),
    (["-c", "task_clock", "--", "/no/such/program"], "cannot run"),
    (["-c", "task_clock:ebs=1000", "-c", "page_faults", "--", "true"], "one event set"),
])
def test_stat_user_errors(cli, args, msg):
    r = cli("stat", *args)
    assert r.code == 2
    assert msg in r.err and r.err.count("\n") == 1


def test_stat_failing_command_keeps_rows(cli, progs):
    r = cli("stat", "-c", "task_clock", "-T", "0.05", "--", "sh", "-c", "sleep 0.12; exit 3")
    assert r.code == 0
    assert "exited with status 3" in r.err
    assert "exit" in r.out and "[Totals]" in r.out


def test_events_command(cli):
    r = cli("events")
    assert r.code == 0 and "task_clock" in r.out and "[Software sources]" in r.out
    r = cli("events", "--translate", "pmc0,pmc3=0x2e,umask3=0x41", "--cpu", "haswell")
    assert "config=0x412e" in r.out
    r = cli("events", "--translate", "backend_stalls", "--cpu", "haswell", "--format", "json")
    assert [e["config"] for e in json.loads(r.out)] == [0x487, 0x1A2, 0x4A2, 0x8A2, 0x10A2]
    r = cli("events", "--cpu", "zen3")
    assert "PMCx0AE" in r.out
    r = cli("events", "--translate", "pmc3=0x2e,umask3")
    assert r.code == 2


# ============================================================================================
# a simulated PMU

class FakeClock:
    def __init__(self):
        self.t = 0.0


class FakeHandle:
    """Counters of one thread on a PMU with `k` hardware counters: when more hardware events are
    enabled on the thread than counters, the kernel rotates them, so each runs k/n of the time."""

    def __init__(self, pmu, tid, specs, enabled):
        self.pmu, self.tid, self.specs = pmu, tid, list(specs)
        self.enabled = enabled
        self.raw = [0.0] * len(specs)
        self.en = [0] * len(specs)
        self.run = [0] * len(specs)
        self.closed = False
        pmu.handles.append(self)

    def advance(self, dt_ns, share):
        if not self.enabled or self.closed:
            return
        for i, s in enumerate(self.specs):
            self.en[i] += dt_ns
            frac = share if s.kind == "hardware" else 1.0
            run = int(dt_ns * frac)
            self.run[i] += run
            self.raw[i] += self.pmu.rates[s.name] * run

    def read(self):
        out = []
        for i, s in enumerate(self.specs):
            if s.name in self.pmu.unsupported:
                out.append(CounterValue(s.name, None, None, 0, 0, "not supported", "no PMU", spec=s))
                continue
            raw = int(self.raw[i])
            val = raw * self.en[i] / self.run[i] if self.run[i] else None
            out.append(CounterValue(s.name, val, raw, self.en[i], self.run[i], "ok", "", spec=s))
        return out

    def enable(self):
        self.enabled = True

    def disable(self):
        self.enabled = False

    def close(self):
        self.closed = True


class FakeSampler(FakeHandle):
    def __init__(self, pmu, tid, specs, enabled):
        lead = [s for s in specs if s.sample_period]
        specs = lead + [s for s in specs if not s.sample_period]
        super().__init__(pmu, tid, specs, enabled)
        self.counters = [type("C", (), {"fd": 1, "spec": s})() for s in self.specs]
        self.period = lead[0].sample_period
        self.next = self.period
        self.pending = []

    def advance(self, dt_ns, share):
        # split into small steps so samples land on their period boundaries
        step = 100_000
        while dt_ns > 0:
            d = min(step, dt_ns)
            super().advance(d, share)
            dt_ns -= d
            while self.raw[0] >= self.next:
                self.pending.append(Sample(1, self.tid, 0, 0, self.en[0], self.run[0],
                                           [int(self.next)] + [int(x) for x in self.raw[1:]]))
                self.next += self.period

    def drain(self):
        out = DrainResult(samples=self.pending)
        self.pending = []
        return out


class FakePMU:
    """The backend protocol of `Monitor`, driven by a virtual clock. Threads: {tid: (start_s,
    end_s)}; the process ends when its main thread (tid 1) ends."""

    def __init__(self, rates, threads, k=2, unsupported=()):
        self.rates = rates
        self.thread_life = threads
        self.k = k
        self.unsupported = set(unsupported)
        self.clock = FakeClock()
        self.handles = []

    def _advance_to(self, t):
        while self.clock.t < t - 1e-12:
            dt = min(t - self.clock.t, 0.001)
            now = self.clock.t
            for h in self.handles:
                start, end = self.thread_life.get(h.tid, (0, 1e9))
                if not (start <= now < end):
                    continue
                nhw = sum(1 for o in self.handles if o.tid == h.tid and o.enabled and not o.closed
                          for s in o.specs if s.kind == "hardware")
                share = min(1.0, self.k / nhw) if nhw else 1.0
                h.advance(int(dt * 1e9), share)
            self.clock.t += dt

    # backend protocol
    def open(self, specs, pid, cpu, inherit, enable_on_exec, enabled):
        return FakeHandle(self, pid, specs, enabled or enable_on_exec)

    def open_sampler(self, specs, pid, cpu, enable_on_exec, enabled):
        return FakeSampler(self, pid, specs, enabled or enable_on_exec)

    def threads(self, pid):
        return [t for t, (s, e) in self.thread_life.items() if s <= self.clock.t < e]

    def thread_name(self, pid, tid):
        return f"t{tid}"

    def online_cpus(self):
        return [0, 1]

    def now(self):
        return self.clock.t

    def wait(self, seconds, target):
        self._advance_to(self.clock.t + seconds)


class FakeTarget(Target):
    def __init__(self, pmu):
        super().__init__("pid", pid=1)
        self.pmu = pmu

    def prepare(self):
        pass

    def start(self):
        pass

    def alive(self):
        return self.pmu.clock.t < self.pmu.thread_life[1][1]

    def finish(self):
        pass


def hw(name):
    return EventSpec(name=name, type=abi.PERF_TYPE_RAW, config=1)


def sw(name):
    return EventSpec(name=name, type=abi.PERF_TYPE_SOFTWARE, config=1, unit="ns")


def run_fake(pmu, sets, interval=0.1, **kw):
    mon = Monitor(sets, FakeTarget(pmu), interval=interval, backend=pmu, discover_period=0.01, **kw)
    return mon, list(mon.run())


def test_fake_kernel_multiplexing_is_scaled():
    """4 hardware events on a 2-counter PMU: each runs half the time; the scaled estimate equals
    rate x time exactly, and the raw count is half of it."""
    rates = {"a": 1.0, "b": 2.0, "c": 3.0, "d": 4.0}
    pmu = FakePMU(rates, {1: (0, 0.5)}, k=2)
    mon, rows = run_fake(pmu, [[hw(n) for n in rates]])
    ticks = [r for r in rows if r.sample_type == "tick"]
    assert len(ticks) == 4
    for r in ticks:
        for v in r.values:
            assert v.running_ns == pytest.approx(v.enabled_ns / 2, abs=10)
            assert v.value == pytest.approx(rates[v.name] * 0.1e9, rel=1e-3)
            assert v.raw == pytest.approx(rates[v.name] * 0.05e9, rel=1e-3)
    out = io.StringIO()
    w = TableWriter(out, mon)
    w.header()
    for r in rows:
        w.row(r)
    w.summary()
    assert "~" in out.getvalue()              # estimates are marked
    assert "50.0% running" in out.getvalue()


def test_fake_round_robin_sets_only_live_set_counts():
    rates = {"a": 1.0, "b": 2.0}
    pmu = FakePMU(rates, {1: (0, 0.6)}, k=4)
    mon, rows = run_fake(pmu, [[hw("a")], [hw("b")]])
    assert [r.set_index for r in rows] == [0, 1, 0, 1, 0, 1]
    for r in rows:
        (v,) = r.values
        assert v.name == ("a" if r.set_index == 0 else "b")
        assert v.running_ns == v.enabled_ns == pytest.approx(0.1e9, rel=0.02)
        assert v.value == pytest.approx(rates[v.name] * 0.1e9, rel=0.02)
    totals = mon.totals.per_set
    assert totals[0]["a"][0] == pytest.approx(0.3e9, rel=0.02)
    assert totals[1]["b"][0] == pytest.approx(2 * 0.3e9, rel=0.02)


def test_fake_threads_come_and_go_no_lost_rows():
    rates = {"a": 1.0}
    # worker 2 lives 0.15-0.35 s; worker 3 appears at 0.25 and outlives nothing; main ends at 0.55
    pmu = FakePMU(rates, {1: (0, 0.55), 2: (0.15, 0.35), 3: (0.25, 0.45)}, k=4)
    mon, rows = run_fake(pmu, [[hw("a")]])
    by = {}
    for r in rows:
        by.setdefault(r.tid, []).append(r)
    assert set(by) == {1, 2, 3}
    for tid, (s, e) in pmu.thread_life.items():
        assert by[tid][-1].sample_type == "exit"
        counted = sum(v.value for r in by[tid] for v in r.values)
        # counted from pickup (at most one discovery period late) to exit
        assert (e - s - 0.1) * 1e9 <= counted + 1 <= (e - s) * 1e9 + 1e6
    # the target ends mid-interval (0.55 s with T = 0.1): a final partial row, not lost
    assert rows[-1].time_s == pytest.approx(0.55, abs=0.002)
    assert [r.nsample for r in rows] == list(range(1, len(rows) + 1))


def test_fake_unsupported_event_never_zero():
    pmu = FakePMU({"a": 1.0, "x": 1.0}, {1: (0, 0.2)}, unsupported={"x"})
    mon, rows = run_fake(pmu, [[hw("a"), hw("x")]], metrics=[parse_metric("r=x/a")])
    for r in rows:
        x = [v for v in r.values if v.name == "x"][0]
        assert x.value is None and x.status == "not supported"
        assert r.metrics["r"] is None
    out = io.StringIO()
    w = CsvWriter(out, mon)
    w.header()
    for r in rows:
        w.row(r)
    lines = [l.split(",") for l in out.getvalue().splitlines()[1:]]
    xs = [l for l in lines if l[9] == "x"]
    assert xs and all(l[10] == "" and l[14] == "not supported" for l in xs)


def test_fake_ebs_samples_each_period():
    pmu = FakePMU({"lead": 1.0, "other": 0.5}, {1: (0, 0.35)}, k=4)
    lead = EventSpec(name="lead", type=abi.PERF_TYPE_RAW, config=1, sample_period=10_000_000)
    mon, rows = run_fake(pmu, [[lead, hw("other")]])
    ebs = [r for r in rows if r.sample_type == "ebs"]
    assert 34 <= len(ebs) <= 35      # 0.35 s of a 1/ns event, one sample each 10 ms
    for r in ebs:
        vals = {v.name: v.raw for v in r.values}
        assert vals["lead"] == 10_000_000
        assert vals["other"] == pytest.approx(5_000_000, rel=0.03)
    assert rows[-1].sample_type == "exit"


def test_fake_metrics_and_json():
    pmu = FakePMU({"instr": 2.0, "cycles": 1.0}, {1: (0, 0.2)}, k=8)
    mon, rows = run_fake(pmu, [[hw("instr"), hw("cycles")]], metrics=[parse_metric("ipc")])
    assert all(r.metrics["ipc"] == pytest.approx(2.0) for r in rows)
    out = io.StringIO()
    w = JsonWriter(out, mon)
    w.header()
    for r in rows:
        w.row(r)
    w.summary()
    objs = [json.loads(l) for l in out.getvalue().splitlines()]
    assert objs[0]["sets"][0][0]["label"] == "pmc0"
    summ = objs[-1]
    assert summ["sets"][0][0]["value"] == pytest.approx(2.0 * 0.2e9, rel=0.01)
    assert summ["sets"][0][0]["status"] == "ok"


def test_virtual_counter_names():
    assert "psi_cpu_some" in parse_virtual("psi")
    assert parse_virtual("schedstat,ctxsw") == ["runq_delay", "ctxsw"]
    with pytest.raises(UserError):
        parse_virtual("nope")
