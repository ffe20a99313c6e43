"""The event-driven simulator of scheduling on an asymmetric multicore.

Between two decisions of the policy the placement is fixed, so every thread runs at a constant
rate: the simulator jumps straight to the next event -- the policy's next periodic decision (on
the quantum grid), or the earliest end of a thread's part of a phase, computed exactly -- and
accounts work, CPU time per core type, runnable time and energy for the whole stretch at once.
Nothing is random except what is asked for (IPC-sampling noise, the CFS-like placement), from a
seeded generator: the same inputs and seed give the same result.

The model of an application (docs/sched.md): its phases unroll into serial parts (one thread
runnable) and parallel parts (`tlp` threads runnable). In a static part every thread has its own
share of the work and waits at the barrier for the others; in a dynamic part the threads draw
from one pool. Work is counted in seconds of a big core; a thread with speedup factor SF does
1/SF of it per second on the slowest type. A thread moved to another core type loses
`migration_cost` seconds of CPU time there.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UserError
from ..parsing import fmt_time
from .machine import Machine, rates
from .policy import Policy, View, call_policy, check_placement
from .sfsource import IPCSampler
from .workload import Workload, segments

SF_SOURCES = ("true", "ipc-sampling", "model")
MAX_THREADS_PER_CORE = 256
REESTIMATE_S = 0.1
MAX_QUANTA = 10_000_000         # quanta a simulation may span, from a lower bound of its time
RUN_QUANTA = 10 * MAX_QUANTA    # quanta simulated before giving up (a starved thread)


@dataclass
class Options:
    quantum: float = 0.010            # seconds
    migration_cost: float = 50e-6     # seconds of CPU time lost per move to another core type
    sf_source: str | None = None      # None: the policy's own default
    sf_model: Any = None              # a fitted corecast.sched.sfmodel.SFModel for "model"
    sf_noise: float = 0.05            # ipc-sampling: relative noise of one sample (log-normal sigma)
    phase_threshold: float = 0.25     # ipc-sampling: the phase rule's relative distance
    sampling_round_s: float = 1.0     # ipc-sampling: seconds between sampling rounds
    seed: int = 1
    max_time: float = 1e7             # seconds simulated before giving up
    until: float | None = None        # stop at this simulated time (runs not finished are left out)


@dataclass
class AppResult:
    name: str
    category: str
    threads: int
    completion_times: list[float]     # seconds, one per completed run
    completion_time: float            # the summary of the rules (geomean by default)


@dataclass
class SimResult:
    workload: str
    machine: str
    policy: str
    sf_source: str
    apps: list[AppResult]
    end_time: float
    energy_j: float
    busy_core_s: np.ndarray           # (K,) busy core-seconds per type
    migrations: float
    decisions: int
    events: int
    notes: list[str] = field(default_factory=list)
    samples: int = 0

    @property
    def completion_times(self) -> np.ndarray:
        return np.array([a.completion_time for a in self.apps])


def _summary(times: list[float], how: str) -> float:
    if not times:
        return math.nan
    if how == "first":
        return times[0]
    if how == "mean":
        return float(np.mean(times))
    return float(np.exp(np.mean(np.log(times))))


class _Sim:
    """One simulation's state (see `simulate`)."""

    def __init__(self, wl: Workload, machine: Machine, policy: Policy, opts: Options, source: str):
        self.wl, self.m, self.policy, self.o, self.source = wl, machine, policy, opts, source
        A = len(wl.apps)
        self.A = A
        self.K = K = len(machine.types)
        nthr = np.array([a.threads for a in wl.apps], dtype=np.int64)
        self.off = np.concatenate([[0], np.cumsum(nthr)])
        self.T = T = int(nthr.sum())
        self.tapp = np.repeat(np.arange(A), nthr)
        self.tlocal = np.arange(T) - self.off[self.tapp]
        self.weight = np.array([wl.apps[a].weight for a in self.tapp], dtype=float)
        self.segs = [segments(a) for a in wl.apps]
        self.dynamic = np.array([a.sharing == "dynamic" for a in wl.apps])
        self.any_dynamic = bool(self.dynamic.any())
        self.tdyn = self.dynamic[self.tapp]
        # per phase: true SF, the rows of rates per type, and (model source) estimates per type
        dsf = machine.default_sf()
        self.phase_sf = [np.array([p.sf if p.sf is not None else dsf for p in a.phases]) for a in wl.apps]
        self.phase_R = [rates(machine, sf) for sf in self.phase_sf]
        self.phase_est = None
        if source == "model":
            self.phase_est = [_model_estimates(a, machine, opts.sf_model) for a in wl.apps]
        # thread state
        self.R = np.ones((T, K))
        self.sf_true = np.ones(T)
        self.sf_est_rows = np.ones((T, K))
        self.runnable = np.zeros(T, dtype=bool)
        self.seg_left = np.zeros(T)
        self.pool = np.zeros(A)
        self.cur = np.zeros(A, dtype=np.int64)
        self.barrier = np.zeros(A, dtype=np.int64)
        self.run_start = np.zeros(A)
        self.runs: list[list[float]] = [[] for _ in range(A)]
        self.finished = np.zeros(A, dtype=bool)
        self.cpu = np.zeros((T, K))
        self.rtime = np.zeros(T)
        self.work = np.zeros(T)
        self.progress = np.zeros(T)
        self.alone_progress = np.zeros(T)
        self.alone_rate = np.ones(T)
        hi, lo = machine.span or (machine.speeds[0], machine.speeds[-1])
        self.pos = (hi - machine.speeds) / (hi - lo) if hi != lo else np.zeros(K)
        self.run_id = np.zeros(T, dtype=np.int64)
        self.S = np.zeros((T, K))
        self.last_row = np.zeros((T, K))
        self.dom = np.zeros(T, dtype=np.int64)
        self.t = 0.0
        self.energy = 0.0
        self.busy = np.zeros(K)
        self.migrations = 0.0
        self.decisions = 0
        self.events = 0
        self.rng = np.random.default_rng(opts.seed)
        self.sampler = None
        if source == "ipc-sampling":
            self.sampler = IPCSampler(T, K, opts.quantum, dsf, opts.sf_noise, opts.phase_threshold,
                                      opts.sampling_round_s, opts.seed)
        self.sf_seen = np.full(T, dsf) if source == "ipc-sampling" else np.ones(T)
        self.active_w = np.array([t.active_w for t in machine.types])
        self.idle_w = np.array([t.idle_w for t in machine.types])
        self.counts = machine.counts
        self.idle_power = float((self.counts * self.idle_w).sum())
        self.view = View(
            time=0.0, quantum=opts.quantum, machine=machine, counts=self.counts, speeds=machine.speeds,
            runnable=np.zeros(0, dtype=np.int64), is_runnable=self.runnable, app=self.tapp,
            local=self.tlocal, weight=self.weight, sf=self.sf_seen,
            needs_sample=np.zeros((T, K), dtype=bool), cpu=self.cpu, runnable_time=self.rtime,
            work=self.work, progress=self.progress, alone_progress=self.alone_progress,
            alone_rate=self.alone_rate, run_id=self.run_id, app_threads=nthr,
            app_weight=np.array([a.weight for a in wl.apps], dtype=float),
            app_runnable=np.zeros(A, dtype=np.int64), app_start=self.run_start, placement=self.S,
            rng=self.rng)

    # ---------------------------------------------------------------- application life
    def _start_segment(self, a: int) -> None:
        s = self.cur[a]
        sg = self.segs[a]
        lo, hi = self.off[a], self.off[a + 1]
        n = int(sg.tlp[s])
        ph = int(sg.phase[s])
        part = np.arange(lo, lo + n)
        self.runnable[lo:hi] = False
        self.runnable[part] = True
        self.R[part] = self.phase_R[a][ph]
        self.sf_true[part] = self.phase_sf[a][ph]
        if self.phase_est is not None:
            self.sf_est_rows[part] = self.phase_est[a][ph]
        if self.dynamic[a]:
            self.pool[a] = sg.work[s]
            self.barrier[a] = 0
        else:
            self.seg_left[part] = sg.work[s] / n
            self.barrier[a] = n

    def _start_run(self, a: int) -> None:
        lo, hi = self.off[a], self.off[a + 1]
        self.cur[a] = 0
        self.run_start[a] = self.t
        self.cpu[lo:hi] = 0
        self.rtime[lo:hi] = 0
        self.work[lo:hi] = 0
        self.progress[lo:hi] = 0
        self.alone_progress[lo:hi] = 0
        self.run_id[lo:hi] += 1
        self.last_row[lo:hi] = 0
        if self.sampler is not None:
            self.sampler.reset_threads(np.arange(lo, hi))
        self._start_segment(a)

    def _segment_done(self, a: int) -> None:
        self.cur[a] += 1
        if self.cur[a] < len(self.segs[a].work):
            self._start_segment(a)
            return
        self.runs[a].append(self.t - self.run_start[a])
        lo, hi = self.off[a], self.off[a + 1]
        self.runnable[lo:hi] = False
        rules = self.wl.rules
        if rules.restart and not self._over():
            self._start_run(a)
        else:
            self.finished[a] = True

    def _over(self) -> bool:
        rules = self.wl.rules
        if rules.restart:
            return all(len(r) >= rules.runs for r in self.runs)
        return bool(self.finished.all())

    # ---------------------------------------------------------------- decisions
    def _sf_update(self) -> None:
        if self.source == "true":
            np.copyto(self.sf_seen, self.sf_true)
        elif self.source == "model":
            self.sf_seen[:] = self.sf_est_rows[np.arange(self.T), self.dom]
        else:
            np.copyto(self.sf_seen, self.sampler.sf)
            np.copyto(self.view.needs_sample, self.sampler.needs() & self.runnable[:, None])

    def _alone_rates(self, app_runnable: np.ndarray) -> None:
        """Each runnable thread's rate if its application ran alone with its present TLP: its
        threads turning over the fastest cores, one per core (rates from the SF estimate)."""
        n = app_runnable[self.tapp]
        left = n.astype(float)
        acc = np.zeros(self.T)
        for k in range(self.K):
            used = np.minimum(self.counts[k], left)
            left = left - used
            acc = acc + used / (1.0 + (self.sf_seen - 1.0) * self.pos[k])
        np.divide(acc, np.maximum(n, 1), out=self.alone_rate)
        self.alone_rate[n == 0] = 1.0

    def _decide(self) -> None:
        v = self.view
        v.time = self.t
        v.runnable = np.flatnonzero(self.runnable)
        v.app_runnable = np.bincount(self.tapp[v.runnable], minlength=self.A)
        self._sf_update()
        self._alone_rates(v.app_runnable)
        new = call_policy(self.policy, "decide", v)
        self.decisions += 1
        if new is None:
            new = self.S.copy()
        elif not self.policy.trusted:
            new = self._check(new)
        new[~self.runnable] = 0.0
        self._charge_migrations(new)
        self.S = new
        v.placement = new

    def _check(self, S: Any) -> np.ndarray:
        return check_placement(self.policy, S, self.T, self.m)

    def _charge_migrations(self, new: np.ndarray) -> None:
        tot = new.sum(1)
        placed = tot > 0
        if not placed.any():
            return
        rows = np.zeros_like(new)
        rows[placed] = new[placed] / tot[placed, None]
        had = self.last_row.sum(1) > 0
        moved = np.where(placed & had, 0.5 * np.abs(rows - self.last_row).sum(1), 0.0)
        if self.K > 1:
            self.dom[placed] = np.argmax(rows[placed], axis=1)
        self.last_row[placed] = rows[placed]
        mv = moved > 1e-12
        if not mv.any():
            return
        self.migrations += float(moved[mv].sum())
        if self.o.migration_cost <= 0:
            return
        extra = moved * self.o.migration_cost * (rows * self.R).sum(1)
        st = mv & ~self.tdyn
        self.seg_left[st] += extra[st]
        if self.any_dynamic:
            dy = mv & self.tdyn
            if dy.any():
                np.add.at(self.pool, self.tapp[dy], extra[dy])     # one by one, in order (as the native loop)

    # ---------------------------------------------------------------- the loop
    def _period(self) -> int | None:
        p = self.policy
        if getattr(p, "period_s", None):
            return max(1, round(p.period_s / self.o.quantum))
        if p.period is None and self.source != "true":
            # estimates change between events: a policy that decides only at events is also
            # asked every REESTIMATE_S so that new estimates reach it
            return max(1, round(REESTIMATE_S / self.o.quantum))
        return p.period

    def _advance(self, dt: float, rate: np.ndarray, app_rate: np.ndarray | None) -> None:
        S = self.S
        self.seg_left -= rate * dt
        if app_rate is not None:
            self.pool -= app_rate * dt
        self.cpu += S * dt
        self.work += rate * dt
        self.rtime[self.runnable] += dt
        if self.K > 1:
            slow = 1.0 + np.outer(self.sf_seen - 1.0, self.pos)
            pr = (S / slow).sum(1)
        else:
            pr = S[:, 0]
        self.progress += pr * dt
        self.alone_progress += pr * dt / self.alone_rate
        busy = S.sum(0)
        self.busy += busy * dt
        self.energy += (self.idle_power + float((busy * (self.active_w - self.idle_w)).sum())) * dt
        self.t += dt
        if self.sampler is not None:
            self.sampler.advance(self.t, dt, S, self.R)

    def _finish(self, done: np.ndarray, apps_done: np.ndarray) -> None:
        """Threads whose part of a phase ended, and dynamic applications whose pool ran dry."""
        if len(done):
            self.seg_left[done] = 0.0
            self.runnable[done] = False
            for a, c in zip(*np.unique(self.tapp[done], return_counts=True)):
                self.barrier[a] -= c
                if self.barrier[a] <= 0:
                    self._segment_done(int(a))
        for a in apps_done:
            self.pool[a] = 0.0
            self._segment_done(int(a))

    def run(self) -> SimResult:
        for a in range(self.A):
            self._start_run(a)
        call_policy(self.policy, "setup", self.view)
        q = self.o.quantum
        period = self._period()
        native = _native_loop(self) if period == 1 else None
        eps = 1e-12
        next_dec = 0.0
        until = self.o.until if self.o.until is not None else math.inf
        while True:
            if self.t >= next_dec - eps * max(1.0, self.t):
                self._decide()
                next_dec = (math.floor(self.t / (period * q) + 1e-9) + 1) * period * q if period else math.inf
                if native is not None:
                    # the quanta up to the next event run natively (same rules as below)
                    status, done, apps_done = native.run(next_dec, until)
                    if status == 1:
                        self._finish(done, apps_done)
                        self.events += 1
                        if self._over():
                            break
                        next_dec = self.t
                        continue
                    break                              # reached `until`
            S = self.S
            rate = (S * self.R).sum(1)
            dt = next_dec - self.t
            fin_t = math.inf
            st = (rate > 0) & ~self.tdyn
            if st.any():
                fin_t = float((self.seg_left[st] / rate[st]).min())
            app_rate = None
            if self.any_dynamic:
                app_rate = np.bincount(self.tapp, weights=rate, minlength=self.A)
                dyn = self.dynamic & (app_rate > 0)
                if dyn.any():
                    fin_t = min(fin_t, float((self.pool[dyn] / app_rate[dyn]).min()))
            dt = min(dt, fin_t)
            stop = self.t + dt >= until
            if stop:
                dt = max(until - self.t, 0.0)
            if not math.isfinite(dt):
                if self._over():
                    break
                raise UserError(f"policy {self.policy.name} left every runnable thread without a core "
                                f"at t={self.t:.6g} s and asked for no later decision")
            if dt > 0:
                self._advance(dt, rate, app_rate)
            if stop:
                break
            if self.t > min(self.o.max_time, RUN_QUANTA * q):
                raise UserError(f"{self.wl.name}: still running after {self.t:g} simulated seconds "
                                f"({self.t / q:,.0f} quanta) under {self.policy.name}: is a thread starved?")
            done = np.zeros(0, dtype=np.int64)
            apps_done = np.zeros(0, dtype=np.int64)
            if fin_t <= dt + eps * max(1.0, self.t):
                tol = 1e-9 * rate * max(q, dt) + 1e-15
                done = np.flatnonzero(st & (self.seg_left <= tol))
                if app_rate is not None:
                    atol = 1e-9 * app_rate * max(q, dt) + 1e-15
                    apps_done = np.flatnonzero(self.dynamic & ~self.finished & (app_rate > 0) & (self.pool <= atol))
            if len(done) or len(apps_done):
                self._finish(done, apps_done)
                self.events += 1
                if self._over():
                    break
                next_dec = self.t          # decide now: threads started or stopped
        return self._result()

    def _result(self) -> SimResult:
        apps = []
        for a, app in enumerate(self.wl.apps):
            times = self.runs[a]
            apps.append(AppResult(app.name, app.category, app.threads, list(times),
                                  _summary(times, self.wl.rules.summary)))
        return SimResult(self.wl.name, self.m.name, self.policy.name, self.source, apps, self.t,
                         self.energy, self.busy.copy(), self.migrations, self.decisions, self.events,
                         samples=self.sampler.samples if self.sampler else 0)


def _native_loop(sim: "_Sim"):
    """The native loop for the per-quantum ranked policies, or None (another policy, or the
    compiled library missing: the Python loop then runs every quantum, with the same result)."""
    from .policies import _Ranked
    kind = getattr(sim.policy, "kind", 0)
    cls = type(sim.policy)
    # only the built-in rules: a subclass that changes order() or decide() runs in Python
    if not kind or cls.order is not _policy_order(kind) or cls.decide is not _Ranked.decide or not sim.policy.trusted:
        return None
    from . import native
    return native.Loop.create(sim)


def _policy_order(kind: int):
    from .policies import ACFS, ADWRR, EQP
    return {1: ADWRR.order, 2: EQP.order, 3: ACFS.order, 4: ACFS.order}[kind]


def _model_estimates(app, machine: Machine, model) -> np.ndarray:
    """(phases, K): the SF the model gives for each phase on each core type."""
    K = len(machine.types)
    out = np.ones((len(app.phases), K))
    for pi, p in enumerate(app.phases):
        for k, ct in enumerate(machine.types):
            side = "big" if k == 0 else "small"
            met = p.metrics.get(ct.name) or p.metrics.get(side)
            if met is None:
                raise UserError(f"app '{app.name}' phase {pi + 1}: no counter metrics for core type "
                                f"'{ct.name}' (metrics.{side} = {{...}}): --sf-source model needs them")
            out[pi, k] = model.predict(met, side)
    return out


def least_time(workload: Workload, machine: Machine) -> float:
    """A lower bound of the simulated time of `workload` on `machine` under any policy: every
    application completes its runs (`runs` with restarts, else one), each run at least its work
    at its phases' fastest rate spread over min(threads, cores) cores, and all of them together
    at least their work over every core."""
    cores = machine.cores
    dsf = machine.default_sf()
    alone, total = 0.0, 0.0
    for a in workload.apps:
        sf = np.array([p.sf if p.sf is not None else dsf for p in a.phases])
        core_s = float((np.array([p.work_s for p in a.phases]) / rates(machine, sf).max(axis=1)).sum())
        alone = max(alone, core_s / min(a.threads, cores))
        total += core_s / cores
    rules = workload.rules
    return (rules.runs if rules.restart else 1) * max(alone, total)


def check_quanta(workload: Workload, machine: Machine, options: Options) -> None:
    """Refuse a simulation of more than MAX_QUANTA quanta (from `least_time`) before it starts:
    `work_s = 1e6` or a 1 us quantum would otherwise run for days."""
    q = options.quantum
    t = least_time(workload, machine)
    if options.until is not None:
        t = min(t, options.until)
    if t / q > MAX_QUANTA:
        raise UserError(f"{workload.name} on {machine.name}: at least {t:,.0f} simulated seconds, {t / q:,.0f} "
                        f"quanta of {fmt_time(q)}; at most {MAX_QUANTA:,} quanta (fewer runs, less work or a "
                        "longer --quantum)")


def simulate(workload: Workload, machine: Machine, policy: Policy, options: Options | None = None) -> SimResult:
    """Run `workload` on `machine` under `policy` (see the module documentation)."""
    o = options or Options()
    if not (o.quantum > 0 and math.isfinite(o.quantum)):
        raise UserError(f"--quantum {o.quantum}: must be a positive time")
    check_quanta(workload, machine, o)
    if not (o.migration_cost >= 0 and math.isfinite(o.migration_cost)):
        raise UserError(f"--migration-cost {o.migration_cost}: must be 0 or more")
    source = o.sf_source or policy.default_sf_source
    if source not in SF_SOURCES:
        raise UserError(f"--sf-source {source}: choose {', '.join(SF_SOURCES)}")
    if source == "model" and o.sf_model is None:
        raise UserError("--sf-source model needs --sf-model FILE (written by `corecast sched sfmodel fit -o`)")
    limit = machine.cores * MAX_THREADS_PER_CORE
    if workload.threads > limit:
        raise UserError(f"{workload.name}: {workload.threads} threads; no policy can place more than "
                        f"{MAX_THREADS_PER_CORE} per core ({limit} on the {machine.cores} cores of {machine.name})")
    return _Sim(workload, machine, policy, o, source).run()
