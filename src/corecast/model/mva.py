"""`mva`: a prediction from measured service demands, through a closed queueing network.

Every other method fits a curve to the measured points. This one builds the program's queueing
network from what `corecast measure` recorded about it at its smallest core count, and solves
that network at every thread count asked for (`corecast.model.closednet`, exact):

- the threads are the customers: `cores × threads_per_core` of the campaign;
- a CPU centre with the target's cores as servers (load-dependent: min(j, c); fractional c,
  the effective cores of `--target-machine`, counts SMT siblings at the SMT yield), whose demand
  is the run's CPU time (user + system) less the hold time of the locks modelled below;
- one single-server centre per hot lock (at most MAX_LOCKS: the largest hold demands, each at
  least HOT_SHARE of the run's CPU time), with demand acquisitions × mean hold time from the
  sync shim's per-lock table; a lock name that stands for k lock objects (`lock in push()`,
  the heap locks taken at one site) is k centres of 1/k of the demand each (the load taken to
  be spread evenly), and one for more than MAX_INSTANCES objects is left in the CPU demand;
  readers of an rwlock do not exclude each other: their hold stays in the CPU demand;
- a delay centre for the time off the CPU that is neither waiting for a lock, for a CPU
  (run-queue delay), nor in a barrier or condition wait: customers × time − CPU − those waits;
- the hot locks' handoff (`fit_handoff`): the time a contended lock stands idle between two
  holders, fitted at the largest larger count where their own waits are material.

The demands are the medians over the repetitions at the smallest count; the model says which it
used and where each came from (`Demands.sources`). The predicted time is the network's cycle
time for one run's work, 1 / X(N): with one customer at one core it is CPU + delay, the
measured time less the waits; with many it bends where a lock saturates, towards its hold
demand -- the speed-up's ceiling (hold + rest) / hold. Its band: the repetitions' demands
solved one by one (their spread), widened by the corpus' error growth with the distance of
extrapolation (`priors.band_growth`).

Demands need a campaign file recorded with the sync shim (time, CPU time, the per-lock table);
a plain CSV has none, and the method says so (`missing`) and is not offered.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from scipy import stats

from ..dataset import Dataset
from ..errors import UserError
from . import closednet
from .base import Fitted, Prediction
from .priors import load as load_priors
from .series import check_ratio, input_metric, single_size, to_prediction

MAX_LOCKS = 8
HOT_SHARE = 0.001
MAX_INSTANCES = 16
TABLE = "locks"
#: The handoff is fitted at a count where the lock waits are at least this share of thread time ...
HANDOFF_CONTENDED = 0.10
#: ... where the network without one is faster than the measurement by more than this (noise) ...
HANDOFF_MIN_GAP = 0.05
#: ... and is at most this many holds.
HANDOFF_MAX = 20.0


@dataclass
class LockDemand:
    lock: str
    kind: str
    demand_s: float                 # acquisitions × hold per run (median over the repetitions)
    hold_s: float                   # mean hold per acquisition
    acquisitions: float
    instances: int
    site: str                       # its busiest call site
    call: str
    lock_file: str | None = None
    sites: list[str] = field(default_factory=list)
    handoff_s: float = 0.0          # the lock idle between two holders when one waits (`fit_handoff`)

    @property
    def label(self) -> str:
        """`pool.c:41 worker: pthread_mutex_lock(&queue_lock)`."""
        return f"{self.site}: {self.call}"

    def to_dict(self) -> dict[str, Any]:
        return {"lock": self.lock, "kind": self.kind, "demand_s": self.demand_s, "hold_s": self.hold_s,
                "acquisitions": self.acquisitions, "instances": self.instances, "site": self.site,
                "call": self.call, "lock_file": self.lock_file, "sites": self.sites, "label": self.label,
                "handoff_s": self.handoff_s}


@dataclass
class Demands:
    """Service demands of one run's work, from the runs at `cores` (see the module doc)."""

    cores: float
    customers: int
    threads_per_core: float
    time_s: float                   # measured (median)
    cpu_s: float                    # CPU demand less the modelled locks' holds
    delay_s: float
    locks: list[LockDemand]
    lock_wait_s: float              # measured waits at this count (queueing, not demand)
    runqueue_s: float
    sync_wait_s: float
    runs: int
    sources: dict[str, str]
    notes: list[str] = field(default_factory=list)

    def customers_at(self, cores: float) -> int:
        return max(1, min(closednet.MAX_CUSTOMERS, int(round(cores * self.threads_per_core))))

    def centres(self, servers: float) -> list[closednet.Centre]:
        out = [closednet.Centre("cpu", max(self.cpu_s, 1e-12), "cpu", float(servers))]
        for ld in self.locks:
            if ld.demand_s > 0:
                h = ld.handoff_s / ld.hold_s if ld.hold_s > 0 else 0.0
                out += [closednet.Centre(ld.lock, ld.demand_s / ld.instances, "queue", handoff=h)] * ld.instances
        if self.delay_s > 0:
            out.append(closednet.Centre("off-CPU (delay)", self.delay_s, "delay"))
        return out

    def solve(self, cores: float) -> closednet.Solution:
        return closednet.solve(self.centres(cores), self.customers_at(cores))

    def to_dict(self) -> dict[str, Any]:
        return {"cores": self.cores, "customers": self.customers, "threads_per_core": self.threads_per_core,
                "runs": self.runs, "time_s": self.time_s, "cpu_s": self.cpu_s, "delay_s": self.delay_s,
                "lock_wait_s": self.lock_wait_s, "runqueue_delay_s": self.runqueue_s,
                "sync_wait_s": self.sync_wait_s, "locks": [ld.to_dict() for ld in self.locks],
                "sources": dict(self.sources)}


# ============================================================================ demands
WHERE_DEMANDS_COME_FROM = ("demands come from a campaign recorded by `corecast measure` with the sync shim "
                          "(a plain CSV, or a campaign made with --no-shim, has none)")


def missing(ds: Dataset) -> str | None:
    """Why the demands cannot be had from this dataset, or None when they can."""
    if "time_s" not in ds.metrics or not np.isfinite(ds.metrics["time_s"]).any():
        why = "no time_s column (the time of one run's work)"
    elif _cpu(ds) is None:
        why = "no CPU time (user_s and sys_s, or cpu_s)"
    elif TABLE not in ds.tables and not _shim_ran(ds):
        why = "no per-lock table"
    else:
        return None
    return f"{why}: {WHERE_DEMANDS_COME_FROM}"


def _shim_ran(ds: Dataset) -> bool:
    v = ds.metrics.get("lock_acquisitions")
    return v is not None and bool(np.isfinite(v).any())


def _cpu(ds: Dataset) -> np.ndarray | None:
    if "user_s" in ds.metrics and "sys_s" in ds.metrics:
        v = ds.metrics["user_s"] + ds.metrics["sys_s"]
        if np.isfinite(v).any():
            return v
    if "cpu_s" in ds.metrics and np.isfinite(ds.metrics["cpu_s"]).any():
        return ds.metrics["cpu_s"]
    return None


def _cycles_s(ds: Dataset, name: str, i: int) -> float:
    v = ds.metrics.get(name)
    clock = ds.machine.nominal_freq_hz
    if v is None or not np.isfinite(v[i]) or not clock:
        return 0.0
    return float(v[i]) / clock


def demands(ds: Dataset) -> Demands:
    """The demands of the smallest core count measured (UserError when there are none)."""
    why = missing(ds)
    if why:
        raise UserError(f"{ds.label}: mva needs measured demands: {why}")
    t, cpu = ds.metrics["time_s"], _cpu(ds)
    ok = np.isfinite(t) & np.isfinite(cpu) & (t > 0)
    if not ok.any():
        raise UserError(f"{ds.label}: mva needs a run with both time_s and CPU time")
    c0 = float(ds.cores[ok].min())
    idx = np.flatnonzero(ok & (ds.cores == c0))
    tpc = float((ds.notes.get("campaign") or {}).get("threads_per_core") or 1)
    n0 = max(1, int(round(c0 * tpc)))
    per_run = [_run_demands(ds, int(i), _table_rows(ds, int(i)), n0) for i in idx]
    return _median(per_run, c0, n0, tpc, ds)


def _table_rows(ds: Dataset, i: int, locks: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The per-lock table's rows of run `i` (its core count and repetition), of `locks` only
    when given."""
    c = float(ds.cores[i])
    rep = None if ds.repetition is None else float(ds.repetition[i])
    return [r for r in ds.tables.get(TABLE, []) if float(r.get("cores", -1)) == c
            and (rep is None or r.get("repetition") is None or float(r["repetition"]) == rep)
            and (locks is None or r.get("lock") in locks)]


def _run_demands(ds: Dataset, i: int, rows: list[dict[str, Any]], n0: int) -> dict[str, Any]:
    locks: dict[str, dict[str, Any]] = {}
    wait = 0.0
    for r in rows:
        wait += float(r.get("wait_s") or 0.0)
        hold, acq = r.get("hold_s"), float(r.get("acquisitions") or 0)
        lk = locks.setdefault(r["lock"], {"demand": 0.0, "acq": 0.0, "kind": r.get("lock_kind", "mutex"),
                                          "instances": 1, "sites": {}, "lock_file": r.get("lock_file")})
        d = acq * float(hold) if hold is not None else 0.0
        if r.get("lock_kind") != "rdlock":        # readers do not exclude each other: CPU demand
            lk["demand"] += d
        lk["acq"] += acq
        lk["instances"] = max(lk["instances"], int(r.get("instances") or 1))
        if r.get("lock_kind") != "rdlock":
            lk["kind"] = r.get("lock_kind", "mutex")
        s = lk["sites"].setdefault(r.get("site", "?"), [0.0, r.get("call", "")])
        s[0] += d + float(r.get("wait_s") or 0.0)
    return {"time": float(ds.metrics["time_s"][i]), "cpu": float(_cpu(ds)[i]), "lock_wait": wait,
            "rq": _cycles_s(ds, "runqueue_delay_cycles", i),
            "sync": _cycles_s(ds, "barrier_wait_cycles", i) + _cycles_s(ds, "cond_wait_cycles", i),
            "locks": locks, "n0": n0}


def _median(runs: list[dict[str, Any]], c0: float, n0: int, tpc: float, ds: Dataset) -> Demands:
    med = lambda k: float(np.median([r[k] for r in runs]))                    # noqa: E731
    names = sorted({n for r in runs for n in r["locks"]})
    cpu = med("cpu")
    lds = []
    for n in names:
        got = [r["locks"].get(n) for r in runs]
        demand = float(np.median([g["demand"] if g else 0.0 for g in got]))
        acq = float(np.median([g["acq"] if g else 0.0 for g in got]))
        first = next(g for g in got if g)
        sites = {}
        for g in got:
            for s, (w, call) in (g or {"sites": {}})["sites"].items():
                sites.setdefault(s, [0.0, call])[0] += w
        ordered = sorted(sites, key=lambda s: -sites[s][0])
        lds.append(LockDemand(lock=n, kind=first["kind"], demand_s=demand, hold_s=demand / acq if acq else 0.0,
                              acquisitions=acq, instances=first["instances"], site=ordered[0],
                              call=sites[ordered[0]][1], lock_file=first["lock_file"], sites=ordered))
    lds.sort(key=lambda ld: -ld.demand_s)
    notes = []
    hot = []
    for ld in lds:
        if ld.kind == "rdlock":
            continue
        if ld.instances > MAX_INSTANCES:
            notes.append(f"{ld.lock}: {ld.instances} lock objects at its sites: its hold stays in the CPU demand")
            continue
        if len(hot) < MAX_LOCKS and ld.demand_s >= HOT_SHARE * cpu and ld.demand_s > 0:
            hot.append(ld)
    held = sum(ld.demand_s for ld in hot)
    cpu_rest = cpu - held
    if cpu_rest <= 0:
        notes.append(f"the hot locks' hold time ({held:.4g} s) is not below the CPU time ({cpu:.4g} s): "
                     "the CPU demand is taken as a thousandth of it")
        cpu_rest = 1e-3 * cpu
    delay = max(0.0, med("time") * n0 - cpu - med("lock_wait") - med("rq") - med("sync"))
    where = f"{len(runs)} run{'s' if len(runs) > 1 else ''} at {c0:g} core{'s' if c0 != 1 else ''}"
    sources = {
        "customers": f"{n0} threads: {c0:g} cores × {tpc:g} threads per core (the campaign's --threads-per-core)",
        "cpu": f"user_s + sys_s (rusage), median of the {where}, less the modelled locks' hold",
        "locks": f"the sync shim's per-lock table, {where}: acquisitions × hold time sampled on "
                 "the lock's own path (hold samples over 32× the median left out)",
        "delay": f"threads × time_s − CPU − lock waits − run-queue delay − barrier and condition waits, {where}",
    }
    return Demands(cores=c0, customers=n0, threads_per_core=tpc, time_s=med("time"), cpu_s=cpu_rest,
                   delay_s=delay, locks=hot, lock_wait_s=med("lock_wait"), runqueue_s=med("rq"),
                   sync_wait_s=med("sync"), runs=len(runs), sources=sources, notes=notes)


# ============================================================================ the fitted model
@dataclass
class MVAFit(Fitted):
    demands: Demands
    per_run: list[Demands]
    metric: str
    work: float                     # one run's work in the throughput's units (1 with no throughput)
    top: float                      # largest core count measured
    growth: float                   # the corpus' error growth per unit of log distance
    checks: list[dict[str, Any]]
    freq_ratio: float = 1.0
    method: str = "mva"
    warnings: list[str] = field(default_factory=list)

    def model_time(self, cores: Sequence[float] | np.ndarray, dem: Demands | None = None) -> np.ndarray:
        d = dem or self.demands
        return np.array([1.0 / d.solve(float(c)).throughput for c in np.asarray(cores, dtype=float)]) \
            * self.freq_ratio

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        if np.any(cores <= 0) or np.any(~np.isfinite(cores)):
            raise UserError("mva: core counts must be positive")
        t = self.model_time(cores)
        reps = [self.model_time(cores, d) for d in self.per_run] or [t]
        lo, hi = np.minimum(np.min(reps, axis=0), t), np.maximum(np.max(reps, axis=0), t)
        h = float(stats.norm.ppf((1 + level) / 2)) * self.growth * np.log(np.maximum(cores, self.top) / self.top)
        lo, hi = lo * np.exp(-h), hi * np.exp(h)
        sol = self.demands.solve(float(cores.max()))
        params = {"demands": self.demands.to_dict(), "checks": self.checks,
                  "at_largest": {"cores": float(cores.max()), "customers": sol.customers,
                                 "shares": {c.name: sol.share(k) for k, c in enumerate(sol.centres)}}}
        p = to_prediction(cores, t, lo, hi, "time_s", level=level, method="mva", model=self.describe(),
                          params=params, warnings=list(self.warnings))
        if self.metric == "throughput":
            return Prediction(cores=cores, value=self.work / t, metric="throughput", low=self.work / hi,
                              high=self.work / lo, level=level, method="mva", model=p.model, params=params,
                              warnings=p.warnings)
        return p

    def describe(self) -> str:
        d = self.demands
        parts = [f"CPU {d.cpu_s:.4g} s on the cores"]
        parts += [f"{ld.lock} {ld.demand_s:.4g} s" + (f" over {ld.instances}" if ld.instances > 1 else "")
                  + (f" + {_ns(ld.handoff_s)} handoff an acquisition when contended" if ld.handoff_s > 0 else "")
                  for ld in d.locks]
        if d.delay_s > 0:
            parts.append(f"off-CPU {d.delay_s:.4g} s")
        return f"closed network (exact, {d.customers_at(1)} thread(s) a core): " + ", ".join(parts)

    def models(self, horizon: float) -> dict[str, Any]:
        return {"mva": {"model": self.describe(), "solver": "exact: convolution of normalisation constants in "
                        "log space (load-dependent CPU centre)", "demands": self.demands.to_dict(),
                        "checks": self.checks}}

    def lock_shares(self, cores: Sequence[float] | np.ndarray) -> list[dict[str, Any]]:
        """Each modelled lock's predicted share of thread time (waiting for it and holding it) at
        each of `cores`, with the CPU's and the off-CPU time's beside them."""
        return lock_outlook(self.demands, cores)


def lock_outlook(dem: Demands, cores: Sequence[float] | np.ndarray) -> list[dict[str, Any]]:
    cores = [float(c) for c in np.asarray(cores, dtype=float)]
    sols = [dem.solve(c) for c in cores]
    out = []
    for ld in dem.locks:
        shares = [sum(s.share(k) for k, c in enumerate(s.centres) if c.name == ld.lock) for s in sols]
        out.append({**ld.to_dict(), "cores": cores, "share": shares})
    return out


def _runqueue_per_thread(ds: Dataset, tpc: float) -> dict[float, float]:
    """Median run-queue delay per thread at each core count, in seconds: what the machine's other
    work cost a thread of the run (the checks compare the model with the time less it)."""
    clock = ds.machine.nominal_freq_hz
    if "runqueue_delay_cycles" not in ds.metrics or not clock:
        return {}
    ag = ds.aggregate("runqueue_delay_cycles")
    return {float(c): float(v) / clock / max(1.0, c * tpc) for c, v in zip(ag.cores, ag.value)}


def _ns(seconds: float) -> str:
    return f"{seconds * 1e9:.0f} ns" if seconds < 1e-5 else f"{seconds * 1e6:.3g} µs" if seconds < 1e-2 \
        else f"{seconds * 1e3:.3g} ms"


def lock_wait_share(ds: Dataset, cores: float, tpc: float, locks: Sequence[str] | None = None) -> float | None:
    """The median over the runs at `cores` of the waits for `locks` (default: every lock; the
    shim's per-lock table) over the thread time (threads × time_s); None without a table row
    there."""
    t = ds.metrics["time_s"]
    shares = []
    for i in np.flatnonzero(ds.cores == cores):
        mine = _table_rows(ds, int(i), locks)
        if mine and np.isfinite(t[i]) and t[i] > 0:
            shares.append(sum(float(r.get("wait_s") or 0.0) for r in mine) / (float(t[i]) * max(1.0, cores * tpc)))
    return float(np.median(shares)) if shares else None


def fit_handoff(fit: MVAFit, ds: Dataset, quiet: dict[float, float]) -> None:
    """The hot locks' handoff, from the largest measured count where their own waits are material
    (at least HANDOFF_CONTENDED of the thread time): the idle time h between two holders that
    makes the network give the time measured there (less the run-queue delay, `quiet`); the
    same h for every hot lock (a wake-up, a cache line's move: the machine's, not the lock's),
    at most HANDOFF_MAX holds. A lock whose waiters sleep is handed over in microseconds while
    it is held for hundreds of nanoseconds: at one core it costs nothing, contended it sets the
    lock's pace -- which the hold alone, measured at the smallest count, cannot show. Nothing is
    fitted when no count above the smallest has such waits, or the network without a handoff is
    within HANDOFF_MIN_GAP of the measurement there (noise, not a handoff)."""
    dem = fit.demands
    holds = [ld.hold_s for ld in dem.locks if ld.hold_s > 0]
    if not holds:
        return
    # the modelled locks' own waits: another lock's (one not hot at the smallest count) say
    # nothing of these locks' handoff
    names = [ld.lock for ld in dem.locks if ld.hold_s > 0]
    above = sorted((c for c in quiet if c > dem.cores), reverse=True)
    at = next((c for c in above
               if (lock_wait_share(ds, c, dem.threads_per_core, names) or 0.0) >= HANDOFF_CONTENDED), None)
    if at is None:
        return
    target = quiet[at]            # the network is in the measured machine's seconds (no freq_ratio)

    def with_h(h: float, d: Demands) -> Demands:
        return dataclasses.replace(d, locks=[dataclasses.replace(ld, handoff_s=h if ld.hold_s > 0 else 0.0)
                                             for ld in d.locks])

    def t_at(h: float) -> float:
        return float(1.0 / with_h(h, dem).solve(at).throughput)

    if t_at(0.0) * (1.0 + HANDOFF_MIN_GAP) >= target:
        return
    hi = HANDOFF_MAX * max(holds)
    if t_at(hi) <= target:
        h = hi
    else:
        lo = 0.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if t_at(mid) < target else (lo, mid)
        h = 0.5 * (lo + hi)
    fit.demands = with_h(h, dem)
    fit.per_run = [with_h(h, d) for d in fit.per_run]
    share = lock_wait_share(ds, at, dem.threads_per_core, names) or 0.0
    fit.demands.sources["handoff"] = (
        f"{_ns(h)} an acquisition when a thread waits, fitted so that the network gives the time measured at "
        f"{at:g} cores less its run-queue delay ({quiet[at]:.4g} s), where the lock waits were {100 * share:.0f}% of "
        "the thread time" + (f" (at its bound, {HANDOFF_MAX:g} holds)" if h >= HANDOFF_MAX * max(holds) else ""))


def fit_mva(ds: Dataset, size: float | None = None, freq_ratio: float = 1.0) -> MVAFit:
    """Build the network from the dataset's demands at its smallest count (see the module doc)."""
    check_ratio(freq_ratio, "--freq-ratio")
    ds1, warns = single_size(ds, size)
    metric = input_metric(ds1)
    dem = demands(ds1)
    per_run = []
    for i in np.flatnonzero(ds1.cores == dem.cores):
        try:
            per_run.append(demands(ds1.select(np.arange(len(ds1)) == i)))
        except UserError:
            continue
    work = 1.0
    if metric == "throughput" or "throughput" in ds1.metrics:
        x, t = ds1.metrics.get("throughput"), ds1.metrics["time_s"]
        if x is not None:
            ok = np.isfinite(x) & np.isfinite(t) & (ds1.cores == dem.cores)
            if ok.any():
                work = float(np.median(x[ok] * t[ok]))
    fit = MVAFit(demands=dem, per_run=per_run, metric=metric, work=work, top=float(ds1.cores.max()),
                 growth=load_priors().band_growth, checks=[], freq_ratio=freq_ratio, warnings=warns + dem.notes)
    ag = ds1.aggregate("time_s")
    rq = _runqueue_per_thread(ds1, dem.threads_per_core)
    fit_handoff(fit, ds1, {float(c): float(tm) - rq.get(float(c), 0.0) for c, tm in zip(ag.cores, ag.value)})
    dem = fit.demands
    t0 = float(fit.model_time([dem.cores])[0]) / freq_ratio
    explained = t0 / dem.time_s
    if abs(explained - 1) > 0.10:
        fit.warnings.append(f"the demands give {t0:.4g} s at {dem.cores:g} cores against {dem.time_s:.4g} s measured "
                            f"(run-queue delay {dem.runqueue_s:.3g} s, lock waits {dem.lock_wait_s:.3g} s, barrier "
                            f"and condition waits {dem.sync_wait_s:.3g} s are not demands)")
    for c, tm in zip(ag.cores, ag.value):
        m = float(fit.model_time([c])[0]) / freq_ratio
        quiet = float(tm) - rq.get(float(c), 0.0)
        fit.checks.append({"cores": float(c), "measured_s": float(tm), "measured_less_runqueue_s": quiet,
                           "model_s": m, "error_pct": 100.0 * (m / quiet - 1.0) if quiet > 0 else None})
    far = [c for c in fit.checks if c["cores"] != dem.cores and c["error_pct"] is not None
           and abs(c["error_pct"]) > 25]
    if far:
        fit.warnings.append("the network misses the measured time (less the run-queue delay) by more than 25% at " +
                            ", ".join(f"{c['cores']:g} cores ({c['error_pct']:+.0f}%)" for c in far) +
                            ": something it does not model (a serial phase, memory bandwidth, coherence) matters")
    if not math.isfinite(t0):
        raise UserError(f"{ds.label}: mva: the network could not be solved")
    return fit
