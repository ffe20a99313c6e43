"""Shared fakes for the tests: small stand-ins built in code, so that a test says what it feeds in.

Each section belongs to one part of corecast; import what you need (`from fakes import ...`,
tests/ is on the path under pytest's default rootdir-based import).
"""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path

import numpy as np

from corecast.collect.events import abi
from corecast.collect.events.spec import EventSpec
from corecast.collect.perf import (CounterValue, DrainResult, Sample, TaskDrain, TaskRecord, ThreadRead,
                                   TrackerUnavailable)
from corecast.collect.stat import Target
from corecast.collect.stat.rows import _reading
from corecast.collect.stat.ticks import TickBatch
from corecast.collect.topology import PU, Topology
from corecast.dataset import ColumnInfo, Dataset, Machine
from corecast.model import closednet, methods


# ============================================================================ model: synthetic datasets
# Datasets with a known law and a little multiplicative noise (seeded), for the predictors.

#: The clock of every fake machine below (a stalled cycle per core costs 1/CLOCK_HZ of time).
CLOCK_HZ = 2.0e9


def _noise(rng: np.random.Generator, n: int, noise: float) -> np.ndarray:
    return np.exp(rng.normal(0.0, noise, n)) if noise > 0 else np.ones(n)


def amdahl_time(cores=tuple(range(1, 13)), serial: float = 0.05, t1: float = 10.0, repetitions: int = 3,
                noise: float = 0.02, seed: int = 0) -> Dataset:
    """time_s only: Amdahl's law, T(n) = t1 · (serial + (1 − serial) / n)."""
    rng = np.random.default_rng(seed)
    n = np.repeat(np.asarray(cores, dtype=float), repetitions)
    t = t1 * (serial + (1.0 - serial) / n) * _noise(rng, len(n), noise)
    rep = np.tile(np.arange(repetitions, dtype=float), len(cores))
    ds = Dataset(cores=n, metrics={"time_s": t}, repetition=rep)
    ds.path = "fake:amdahl_time"
    return ds


def usl_throughput(cores=(1, 2, 4, 6, 8, 12, 16, 24, 32), alpha: float = 0.03, beta: float = 2e-4,
                   gamma: float = 1000.0, repetitions: int = 2, noise: float = 0.02, seed: int = 0) -> Dataset:
    """throughput only: the USL, X(n) = γ n / (1 + α (n − 1) + β n (n − 1))."""
    rng = np.random.default_rng(seed)
    n = np.repeat(np.asarray(cores, dtype=float), repetitions)
    x = gamma * n / (1 + alpha * (n - 1) + beta * n * (n - 1)) * _noise(rng, len(n), noise)
    ds = Dataset(cores=n, metrics={"throughput": x})
    ds.path = "fake:usl_throughput"
    return ds


def lock_stalls(cores=tuple(range(1, 13)), work: float = 2.0e11, repetitions: int = 2, noise: float = 0.02,
                seed: int = 0) -> Dataset:
    """time_s and two stall categories in cycles, the clock known: a fixed memory stall and a
    lock wait growing as n² in all; time = (work + stalls) / (n · clock)."""
    rng = np.random.default_rng(seed)
    n = np.repeat(np.asarray(cores, dtype=float), repetitions)
    mem = 0.25 * work * _noise(rng, len(n), noise)
    lock = work / 400.0 * n ** 2 * _noise(rng, len(n), noise)
    t = (work + mem + lock) / (n * CLOCK_HZ) * _noise(rng, len(n), noise)
    columns = {c: ColumnInfo(name=c, kind="stall", unit="cycles", source="fake")
               for c in ("mem_stall_cycles", "lock_wait_cycles")}
    ds = Dataset(cores=n, metrics={"time_s": t, "mem_stall_cycles": mem, "lock_wait_cycles": lock},
                 columns=columns, machine=Machine(nominal_freq_hz=CLOCK_HZ))
    ds.path = "fake:lock_stalls"
    return ds


def lock_demands(cores=(1, 2, 3, 4, 6, 8), cpu_s: float = 8.0, hold_s: float = 1.0, acquisitions: float = 1e6,
                 repetitions: int = 2, noise: float = 0.01, seed: int = 0, handoff: float = 0.0) -> Dataset:
    """A campaign as `measure` records it with the sync shim: one lock (`&queue_lock`, held
    hold_s in all a run) and CPU time cpu_s a run; times from the closed network they make
    (the CPU's cores as servers, the lock one server, idle `handoff` holds between two holders
    when one waits), user_s + sys_s the CPU time, and the shim's per-lock table (`locks` side
    table) with the waits the network gives."""
    rng = np.random.default_rng(seed)
    rows, tables = [], []
    for c in cores:
        sol = closednet.solve([closednet.Centre("cpu", cpu_s - hold_s, "cpu", c),
                               closednet.Centre("&queue_lock", hold_s, "queue", handoff=handoff)], int(c))
        t = 1.0 / sol.throughput
        # the threads' waits in one run's work: its residence at the lock less its hold (Little's
        # law: Q_wait = X (R - D) waiting, for 1/X)
        wait = max(sol.residence_time[1] - hold_s, 0.0) if c > 1 else 0.0
        for r in range(repetitions):
            f = float(_noise(rng, 1, noise)[0])
            rows.append({"cores": c, "repetition": r, "time_s": t * f, "user_s": 0.95 * cpu_s * f,
                         "sys_s": 0.05 * cpu_s * f, "lock_acquisitions": acquisitions,
                         "lock_wait_cycles": wait * CLOCK_HZ})
            tables.append({"cores": c, "repetition": r, "lock": "&queue_lock", "lock_kind": "mutex",
                           "lock_file": "pool.c", "site": "pool.c:41 worker", "call": "pthread_mutex_lock(&queue_lock)",
                           "instances": 1, "acquisitions": acquisitions, "contended": acquisitions * min(1.0, wait),
                           "wait_s": wait, "hold_s": hold_s / acquisitions * f, "hold_samples": acquisitions / 16})
    ds = Dataset.from_rows(rows, machine=Machine(nominal_freq_hz=CLOCK_HZ), tables={"locks": tables})
    ds.columns["lock_acquisitions"] = ColumnInfo(name="lock_acquisitions", kind="counter", unit="count", source="fake")
    ds.columns["user_s"] = ColumnInfo(name="user_s", kind="cpu", unit="s", source="fake")
    ds.columns["sys_s"] = ColumnInfo(name="sys_s", kind="cpu", unit="s", source="fake")
    ds.columns["lock_wait_cycles"] = ColumnInfo(name="lock_wait_cycles", kind="stall", unit="cycles", source="fake")
    ds.path = "fake:lock_demands"
    return ds


def with_demands(ds: Dataset) -> bool:
    """Whether a fake has measured demands (what the demand model, mva, needs)."""
    return methods.has_demands(ds)


def two_points(t1: float = 10.0, t2: float = 5.6) -> Dataset:
    """time_s at only 1 and 2 cores (a 2-vCPU VM)."""
    ds = Dataset(cores=[1.0, 1.0, 2.0, 2.0], metrics={"time_s": [t1, t1 * 1.01, t2, t2 * 0.99]})
    ds.path = "fake:two_points"
    return ds


def with_stalls(ds: Dataset) -> bool:
    """Whether a fake has stall categories (what the stall method needs)."""
    return bool(ds.stall_names)


def stalls_csv(path, cores=(1, 2, 3, 4, 6, 8)):
    """Write a CSV Dataset with two stall categories of known laws (a lock wait growing as
    (n-1)^1.6, a run-queue delay linear in n) at a 2 GHz clock; returns `path`."""
    rows = ["cores,time_s,lock_wait_cycles,runqueue_delay_cycles"]
    for n in cores:
        work, lock, rq = 2.0e9 / n, 4.0e6 * (n - 1) ** 1.6, 1.0e6 * n
        rows.append(f"{n},{(work + lock + rq) / 2.0e9:.9g},{lock:.9g},{rq:.9g}")
    path.write_text("\n".join(rows) + "\n")
    return path


#: Every fake above with 3 or more core counts, by name: what the method contract runs on.
MODEL_DATASETS = {"amdahl_time": amdahl_time, "usl_throughput": usl_throughput, "lock_stalls": lock_stalls,
                  "lock_demands": lock_demands}


def count_fits(monkeypatch, top: float) -> dict[str, int]:
    """Wrap every single method of the registry (for the test's duration) to count its fits on
    data reaching `top` cores; fits on fewer cores are the rolling-origin validation's."""
    counts: dict[str, int] = {}
    for name, m in list(methods.REGISTRY.items()):
        def counted(ds, _fit=m.fit, _name=name, **kw):
            if ds.cores.max() >= top:
                counts[_name] = counts.get(_name, 0) + 1
            return _fit(ds, **kw)
        counted.__signature__ = inspect.signature(m.fit)     # the options it declares
        monkeypatch.setitem(methods.REGISTRY, name, dataclasses.replace(m, fit=counted))
    return counts


# ============================================================================ stat: a simulated PMU
# The backend protocol of collect.stat's Monitor on a virtual clock: counters, samplers, the
# kernel's task records, the tick loop in C. The stat and meters tests run on it.

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


class FakeTracker:
    """The kernel's task records for the simulated PMU (perf.TaskTracker's face): inherited
    counters on every thread, a FORK record when a thread starts (`fork_delay` later, to
    model a record read late), EXIT and one READ per CPU when it ends (its lifetime count,
    split unevenly over two CPUs, each part with the thread's whole enabled time as the
    kernel gives it). Threads in `drop` lose their READ records (a full ring buffer)."""

    def __init__(self, pmu, sets, roots, cpus, live, fork_delay=0.0, drop=()):
        self.pmu, self.sets, self.roots, self.cpus = pmu, [list(x) for x in sets], list(roots), list(cpus)
        self.enabled = [s == live for s in range(len(self.sets))]
        self.failed = [[("not supported", "no PMU") if e.name in pmu.unsupported else None for e in x]
                       for x in self.sets]
        self.counts = {}                  # (tid, set, event) -> [raw, enabled_ns]
        self.fork_delay = fork_delay
        self.drop = set(drop)
        self.pending = TaskDrain()
        self.fds = [-1]
        self.rings = [0]
        self.closed = False

    @property
    def expected_reads(self):
        return sum(1 for x in self.failed for f in x if f is None) * len(self.cpus)

    def counting(self, s, i):
        return self.failed[s][i] is None

    def add_root(self, tid, enable_on_exec=False, live=0):
        self.roots.append(tid)
        return True

    def advance(self, now, dt):
        dt_ns = int(dt * 1e9)
        for tid, (start, end) in self.pmu.thread_life.items():
            if not (start <= now < end):
                continue
            for s, specs in enumerate(self.sets):
                if not self.enabled[s]:
                    continue
                for i, e in enumerate(specs):
                    if self.failed[s][i] is None:
                        c = self.counts.setdefault((tid, s, i), [0.0, 0])
                        c[0] += self.pmu.rates[e.name] * dt_ns
                        c[1] += dt_ns
        t1 = now + dt
        for tid, (start, end) in self.pmu.thread_life.items():
            if tid in self.roots:
                continue
            if now < start + self.fork_delay <= t1 + 1e-12:
                self.pending.forks.append(TaskRecord("fork", 1, 1, tid, 1, 0))
            if now < end <= t1 + 1e-12:
                self.pending.exits.append(TaskRecord("exit", 1, 1, tid, 1, 0))
                for s, specs in enumerate(self.sets):
                    for i, e in enumerate(specs):
                        if self.failed[s][i] is not None:
                            continue
                        if tid in self.drop:
                            self.pending.lost_records += len(self.cpus)
                            continue
                        raw, en = self.counts.get((tid, s, i), [0.0, 0])
                        part = int(raw) // 3
                        run0 = en // 3
                        self.pending.reads.append(ThreadRead(1, tid, s, i, 0, part, en, run0))
                        self.pending.reads.append(ThreadRead(1, tid, s, i, 1, int(raw) - part, en, en - run0))

    def has_records(self):
        p = self.pending
        return bool(p.forks or p.exits or p.reads or p.lost_records)

    def drain(self):
        out, self.pending = self.pending, TaskDrain()
        return out

    def read(self, s):
        out = []
        for i, e in enumerate(self.sets[s]):
            if self.failed[s][i] is not None:
                out.append(CounterValue(e.name, None, None, 0, 0, *self.failed[s][i], spec=e))
                continue
            raw = sum(c[0] for (t, ss, ii), c in self.counts.items() if (ss, ii) == (s, i))
            en = sum(c[1] for (t, ss, ii), c in self.counts.items() if (ss, ii) == (s, i))
            out.append(CounterValue(e.name, float(int(raw)), int(raw), en, en, "ok", spec=e))
        return out

    def enable(self, s):
        self.enabled[s] = True

    def disable(self, s):
        self.enabled[s] = False

    def close(self):
        self.closed = True


class FakePMU:
    """The backend protocol of `Monitor`, driven by a virtual clock. Threads: {tid: (start_s,
    end_s)}; the process ends when its main thread (tid 1) ends. With `tracker` (a dict of
    FakeTracker options, or True) it gives task records; without, the monitor polls."""

    def __init__(self, rates, threads, k=2, unsupported=(), tracker=None, batched=False):
        self.rates = rates
        self.thread_life = threads
        self.k = k
        self.unsupported = set(unsupported)
        self.clock = FakeClock()
        self.handles = []
        self.tracker_opts = {} if tracker is True else tracker
        self.tracker = None
        if tracker is None:
            self.open_tracker = None          # no task records: the monitor's fallback
        if not batched:
            self.ticks = None                 # the monitor waits tick by tick in Python
        self.calls = []                       # (clock, ticks asked for, ticks taken) of each ticks() call

    def _step(self, dt):
        now = self.clock.t
        for h in self.handles:
            start, end = self.thread_life.get(h.tid, (0, 1e9))
            if not (start <= now < end):
                continue
            nhw = sum(1 for o in self.handles if o.tid == h.tid and o.enabled and not o.closed
                      for s in o.specs if s.kind == "hardware")
            share = min(1.0, self.k / nhw) if nhw else 1.0
            h.advance(int(dt * 1e9), share)
        if self.tracker is not None and not self.tracker.closed:
            self.tracker.advance(now, dt)
        self.clock.t += dt

    def _advance_to(self, t, stop_on_record=False):
        while self.clock.t < t - 1e-12:
            self._step(min(t - self.clock.t, 0.001))
            if stop_on_record and self.tracker is not None and self.tracker.has_records():
                return

    # backend protocol
    def open(self, specs, pid, cpu, inherit, enable_on_exec, enabled):
        return FakeHandle(self, pid, specs, enabled or enable_on_exec)

    def open_sampler(self, specs, pid, cpu, enable_on_exec, enabled):
        return FakeSampler(self, pid, specs, enabled or enable_on_exec)

    def open_tracker(self, sets, roots, cpus, enable_on_exec, live):
        if self.tracker_opts.get("unavailable"):
            raise TrackerUnavailable(self.tracker_opts["unavailable"])
        opts = {k: v for k, v in self.tracker_opts.items() if k != "unavailable"}
        self.tracker = FakeTracker(self, sets, roots, cpus, live, **opts)
        return self.tracker

    def threads(self, pid):
        return [t for t, (s, e) in self.thread_life.items() if s <= self.clock.t < e]

    def thread_name(self, pid, tid):
        return f"t{tid}"

    def online_cpus(self):
        return [0, 1]

    def now(self):
        return self.clock.t

    def wait(self, seconds, target, fds=()):
        self._advance_to(self.clock.t + seconds, stop_on_record=bool(fds))

    def ticks(self, plan, t0, interval, first, count, target, fds=(), wake=True, rings=()):
        """The native tick loop's contract (collect/stat/ticks.py) on the virtual clock: with
        `wake`, a record (when the ring buffers are watched) or the target's end stops it
        before the next tick; without, both are found right after a tick's reads."""
        out = TickBatch(wake=wake)
        start = self.clock.t
        for j in range(count):
            deadline = t0 + (first + j) * interval
            if wake:
                if fds and self.tracker is not None and self.tracker.has_records():
                    out.why = "ready"           # a record not yet drained: ppoll returns at once
                    break
                self._advance_to(deadline, stop_on_record=bool(fds))
                if self.clock.t < deadline - 1e-12 or not target.alive():
                    out.why = "ready"
                    break
            else:
                self._advance_to(deadline)
            out.ticks.append((self.clock.t, [[_reading(v) for v in h.read()] for h in plan]))
            if not wake and ((rings and self.tracker.has_records()) or not target.alive()):
                out.why, out.found = "ready", 1
                break
        self.calls.append((start, count, len(out.ticks)))
        return out


class FakeTarget(Target):
    def __init__(self, pmu, kind="pid"):
        super().__init__(kind, pid=1)
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


# ============================================================================ meters: a fake /proc
# The files the meters read, with counters a test sets, and a two-CPU machine.

HZ = 100                     # the fake /proc/stat's clock tick
class FakeProc:
    """A /proc with stat, schedstat, pressure and vmstat whose counters a test sets."""

    def __init__(self, root: Path, cpus: int = 2, psi: bool = True, schedstat: bool = True):
        self.root, self.n = root, cpus
        self.jiffies = [[0] * 10 for _ in range(cpus)]    # user nice system idle iowait irq softirq steal guest gn
        self.wait_ns = [0] * cpus
        self.ctxt, self.running, self.pgfault = 0, 1, 0
        self.psi = {r: [0, 0] for r in ("cpu", "memory", "io")}
        self.has_psi, self.has_schedstat = psi, schedstat
        (root / "self").mkdir(parents=True)
        (root / "self" / "schedstat").write_text("0 0 0\n")
        self.write()

    def write(self) -> None:
        tot = [sum(j[i] for j in self.jiffies) for i in range(10)]
        lines = ["cpu  " + " ".join(map(str, tot))]
        lines += [f"cpu{c} " + " ".join(map(str, j)) for c, j in enumerate(self.jiffies)]
        lines += [f"intr 0", f"ctxt {self.ctxt}", "btime 1", "processes 10", f"procs_running {self.running}",
                  "procs_blocked 0"]
        (self.root / "stat").write_text("\n".join(lines) + "\n")
        if self.has_schedstat:
            ss = ["version 15", "timestamp 1"]
            ss += [f"cpu{c} 0 0 0 0 0 0 {1000 * c} {w} 7" for c, w in enumerate(self.wait_ns)]
            (self.root / "schedstat").write_text("\n".join(ss) + "\n")
        if self.has_psi:
            (self.root / "pressure").mkdir(exist_ok=True)
            for r, (some, full) in self.psi.items():
                (self.root / "pressure" / r).write_text(
                    f"some avg10=0.00 avg60=0.00 avg300=0.00 total={some}\n"
                    f"full avg10=0.00 avg60=0.00 avg300=0.00 total={full}\n")
        (self.root / "vmstat").write_text(f"nr_free_pages 1\npgfault {self.pgfault}\npgmajfault 0\n")


def two_cpus() -> Topology:
    return Topology(pus=[PU(0, 0, 0, 0, None), PU(1, 0, 1, 0, None)])
