"""Predicting for the machine the program will run on (`predict --target-machine`).

Any fitted method predicts along one axis: more cores like the ones measured. On a machine a
thread count is also a *position* (`corecast.target.placement`): how many physical cores the
threads occupy, whether some share a core with an SMT sibling, how many NUMA nodes or sockets
they span, and whether there are more threads than logical CPUs. A `Layout` (a machine and a
placement order) turns thread counts into

    effective(N) = cores used + smt_yield x (threads that run - cores used)

- threads beyond the logical CPUs (oversubscription) add as much as their time off a CPU lets
  them: a thread on a CPU a share `busy` of its time (the rest waiting for I/O, a client, a
  timer), N threads on C CPUs get `running(N, C, busy)` threads' worth of work done (the
  machine-repairman model: N up to C, then more as the CPUs fill, up to C / busy), and the
  effective cores grow in proportion. Each effect is a hypothesis the measurements can
  confirm or refute (`measured_busy`): the CPU time the runs recorded (user + system over the
  run's time x threads, at the smallest count), else the measured points beyond the measured
  machine's CPUs (the busy share whose effective cores the USL fits best: 1 where they gained
  nothing); with neither, threads are taken as busy (they add nothing) and the band reaches up
  to BUSY_PRIOR_LOW;
- a thread on a core's second hardware thread adds `smt_yield` of a core: the user's, else the
  measurements' own where they already put threads on SMT siblings (`measured_smt_yield`: the
  measured step wins, the prior counting as half a run), else a prior learned from the corpus
  (`corecast.model.priors`);

and into the share of thread pairs that sit on different NUMA nodes (`crossing`).

`fit_for_target` fits a method on the *measured* thread counts turned into effective cores on
the measured machine (a campaign records it, `--measured-machine` gives it for a plain CSV;
otherwise the measurements are taken to come from the target itself, placed alike: then what
they show -- an SMT step or none, runs beyond the CPUs that still gained -- is evidence about
the target), and `OnTarget` asks it about the effective cores of the *target's* thread counts.
Where the target's threads cross more NUMA nodes than the measured ones did, the USL's overheads
(fitted on the same points) grow by `1 + cross_domain x (extra crossing share)`: a cost per
cross-node pair that is a prior learned from the corpus, or, with a calibration run of the
target (`corecast calibrate`), scaled by its measured cross-node over same-node cache-line
latency.

The band widens by the uncertainty of the machine effects applied (`machine_spread`: half the
range of the predictions with the SMT yield and the busy share at the ends of their ranges, and
the cross-node cost from 0 to twice its value); for `auto` the whole band is the corpus'
conformal band at the distance in threads (`corecast.model.bands`). Where the target is the
machine measured, `auto`'s prediction never falls below a throughput measured at fewer threads
unless its fit says the curve turns down.

A memory-bound program meets the target's **bandwidth ceiling**: where the data carry the
program's memory traffic (`memory_bytes` per run with `time_s`, or `memory_bandwidth_bytes_s`
with `throughput`) and the target's bandwidth is known (`bandwidth=` / the description's
`memory_bandwidth_gbs_per_socket`, or a calibration run's memory profile), the throughput is
capped at the bandwidth of the sockets the threads use over the bytes per unit of work (a
roofline).

Every prediction says which of these were used (`params["target"]`).

Size: about 630 lines, one subject: a method asked about another machine. The layout, the
machine effects the measurements show (SMT yield, busy share), the cross-node cost, the
bandwidth ceiling and the band widened by their uncertainty all read the same `Layout` and
positions; split, each part would import the others back.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from ..target import DEFAULT_PLACEMENT, MachineSpec, Position, placement
from . import bands, queueing, usl
from .base import Fitted, Prediction
from .priors import Priors
from .priors import load as load_priors
from .series import convert, speed, time_series

#: Latency ratio (cross-node / same-node cache-line transfer) the corpus' cross-domain prior
#: stands for: its machines are 4-socket Xeon E7 and Opteron servers, whose published
#: core-to-core transfers across sockets take about twice as long as within one.
REFERENCE_LATENCY_RATIO = 2.0
#: The measurements give the SMT yield themselves when at least this many measured thread counts
#: put threads on SMT siblings, and as many do not (the fit needs the cores alone to compare with).
SMT_MEASURED_MIN = 2
#: The yields tried when reading it from the measurements.
SMT_YIELD_GRID = np.round(np.linspace(0.0, 1.0, 41), 3)
#: The measured yield is pooled with the corpus' prior counted as this many measured SMT counts:
#: where the measurements cross the SMT boundary, their step wins over the prior (issue 23).
#: Leave-one-source-out on the 34-source corpus with the machines (fitted on a quarter of each
#: curve), the median over the sources was the same for 0, 0.5 and 2 and the geometric mean
#: 15.7% for 0 and 0.5 against 15.8% for 2 (the Xeon Gold 6230 databases 6.0% against 6.8%).
#: (Tried on the 17-source corpus fitted on half and three quarters: 2 was never worse than the
#: prior there, 0 worse on one source of four, whose two sibling counts are few.)
SMT_PRIOR_COUNTS = 0.5
#: The band spans the measured SMT yield this much either side.
SMT_MEASURED_RANGE = 0.1
#: A thread's busy share (the share of its time on a CPU) when nothing measured says otherwise:
#: busy all the time, so threads beyond the CPUs add nothing ...
BUSY_PRIOR = 1.0
#: ... though they might: the band reaches up to what threads busy this share would give.
BUSY_PRIOR_LOW = 0.5
#: The busy shares tried when the measurements carry points beyond the measured machine's CPUs.
BUSY_GRID = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.33, 0.25, 0.2, 0.15, 0.1, 0.07, 0.05, 0.03, 0.02, 0.01)
#: The busy shares whose fit is within this factor of the best one's squared error make the
#: range the band spans.
BUSY_RANGE_SSE = 1.5


@dataclass
class Layout:
    """A machine and how threads are placed on it."""

    spec: MachineSpec
    order: str = "compact"
    smt_yield: float = 0.5
    busy: float = BUSY_PRIOR        # a thread's share of its time on a CPU (oversubscription)

    def positions(self, cores: Sequence[float] | np.ndarray) -> list[Position]:
        out = []
        sp = self.spec
        for c in np.asarray(cores, dtype=float):
            if c < 1 or c != int(c):
                raise UserError(f"{c:g} threads: a machine runs whole threads (1 or more)")
            out.append(_placement(sp.sockets, sp.cores_per_socket, sp.threads_per_core, sp.numa_nodes, int(c),
                                  self.order))
        return out

    def effective(self, cores: Sequence[float] | np.ndarray) -> np.ndarray:
        out = []
        for p in self.positions(cores):
            e = p.cores_used + self.smt_yield * (p.runnable - p.cores_used)
            if p.threads > p.runnable and self.busy < 1.0:
                e *= running(p.threads, p.runnable, self.busy) / p.runnable
            out.append(e)
        return np.array(out, dtype=float)

    def crossing(self, cores: Sequence[float] | np.ndarray) -> np.ndarray:
        return np.array([p.cross_fraction for p in self.positions(cores)], dtype=float)


@lru_cache(maxsize=65536)
def _placement(sockets: int, cores: int, smt: int, numa: int | None, threads: int, order: str) -> Position:
    return placement(MachineSpec(sockets=sockets, cores_per_socket=cores, threads_per_core=smt, numa_nodes=numa),
                     threads, order)


@lru_cache(maxsize=65536)
def running(threads: int, cpus: int, busy: float) -> float:
    """How many threads' worth of work `threads` threads get done on `cpus` CPUs when each is
    on a CPU a share `busy` of its time when it need not wait for one (the machine-repairman
    model, `queueing.machine_repairman`: service busy, think 1 - busy): the threads themselves
    up to the CPUs, then more as the CPUs fill, up to cpus / busy."""
    if threads <= cpus:
        return float(threads)
    if busy >= 1.0:
        return float(cpus)
    q = queueing.machine_repairman(threads, 1.0 - busy, busy, cpus)
    return float(q.throughput)          # completions per unit time; one thread alone makes 1


def on_layout(ds: Dataset, layout: Layout | None) -> Dataset:
    """The dataset with each row's thread count replaced by its effective cores on `layout`
    (unchanged without one)."""
    if layout is None:
        return ds
    eff = layout.effective(ds.cores)
    out = ds.select(np.ones(len(ds), dtype=bool))
    out.cores = eff
    # the side tables' rows (the per-lock table the demand model reads) follow their runs
    to_eff = dict(zip(ds.cores.tolist(), eff.tolist()))
    out.tables = {name: [{**r, "cores": to_eff.get(float(r["cores"]), r["cores"])} for r in rows]
                  for name, rows in out.tables.items()}
    return out


def measured_smt_yield(ds: Dataset, measured: MachineSpec, order: str = "compact",
                       prior: float | None = None) -> tuple[float, str] | None:
    """The SMT yield the measurements show, when their thread counts already put threads on SMT
    siblings (at least SMT_MEASURED_MIN counts that do and as many that do not): the yield whose
    effective cores the USL fits best (least squares of the log throughput over SMT_YIELD_GRID).
    The USL's α and β bend the curve smoothly; a share of a core per sibling thread is the kink
    at the cores' count that they cannot make. With `prior`, pooled with it counted as
    SMT_PRIOR_COUNTS measured counts. None when the measurements cannot tell."""
    if measured.threads_per_core < 2:
        return None
    try:
        ts = time_series(ds)
    except UserError:
        return None
    lay = Layout(measured, order, 0.0)
    pos = lay.positions(ts.cores)
    smt = [c for c, q in zip(ts.cores, pos) if q.runnable > q.cores_used]
    alone = [c for c, q in zip(ts.cores, pos) if q.runnable == q.cores_used]
    if len(smt) < SMT_MEASURED_MIN or len(alone) < SMT_MEASURED_MIN or len(ts.cores) < 4:
        return None
    X = 1.0 / ts.time
    run = np.array([q.runnable for q in pos], dtype=float)
    used = np.array([q.cores_used for q in pos], dtype=float)
    best, best_y = math.inf, None
    for y in SMT_YIELD_GRID:
        eff = used + y * (run - used)
        if len(np.unique(eff)) < 3:
            continue
        f = usl.fit(eff, X)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(usl.usl(eff, f.alpha, f.beta, f.gamma) / X)
        sse = float(np.sum(r * r)) if np.all(np.isfinite(r)) else math.inf
        if sse < best - 1e-12:
            best, best_y = sse, float(y)
    if best_y is None:
        return None
    why = (f"measured: the runs at {', '.join(f'{c:g}' for c in smt)} threads put threads on SMT siblings of "
           f"{measured.describe()}; the yield that fits them best is {best_y:.2f}")
    if prior is None:
        return best_y, why
    k = float(len(smt))
    y = (k * best_y + SMT_PRIOR_COUNTS * prior) / (k + SMT_PRIOR_COUNTS)
    return y, why + f", pooled with the corpus' prior {prior:.2f} counted as {SMT_PRIOR_COUNTS:g} runs"


def measured_busy(ds: Dataset, measured: MachineSpec, order: str = "compact",
                  smt_yield: float = 0.0) -> tuple[float, tuple[float, float], str] | None:
    """A thread's busy share (the share of its time on a CPU) as the measurements show it, with
    the range the band spans and where it came from; None when they cannot tell.

    - the CPU time the runs recorded (`user_s` + `sys_s` against `time_s` x threads) at the
      smallest count measured (a thread that waits for nothing but I/O or a client: lock waits
      at larger counts are no room for more threads);
    - else the measured points beyond the measured machine's CPUs: the busy share whose
      effective cores (`running`) the USL fits best (least squares of the log throughput over
      BUSY_GRID; 1: threads beyond the CPUs gained nothing)."""
    m = ds.metrics
    cpus = measured.cpus
    if "time_s" in m and "user_s" in m:
        cpu = m["user_s"] + (m["sys_s"] if "sys_s" in m else 0.0)
        ok = np.isfinite(cpu) & np.isfinite(m["time_s"]) & (m["time_s"] > 0) & (ds.cores <= cpus)
        if ok.any():
            n0 = float(np.min(ds.cores[ok]))
            at = ok & (ds.cores == n0)
            u = float(np.clip(np.median(cpu[at] / (m["time_s"][at] * n0)), 0.01, 1.0))
            return u, (max(0.01, u / 1.25), min(1.0, u * 1.25)), (
                f"measured: at {n0:g} thread{'s' if n0 != 1 else ''} the runs were on a CPU {100 * u:.0f}% of "
                "their time (user + system CPU time over the run's time x threads)")
    try:
        ts = time_series(ds)
    except UserError:
        return None
    over = ts.cores > cpus
    if not over.any() or (~over).sum() < 3:
        return None
    X = 1.0 / ts.time
    sse = {}
    for u in BUSY_GRID:
        eff = Layout(measured, order, smt_yield, u).effective(ts.cores)
        if len(np.unique(eff)) < 3:
            continue
        f = usl.fit(eff, X)
        with np.errstate(divide="ignore", invalid="ignore"):
            r = np.log(usl.usl(eff, f.alpha, f.beta, f.gamma) / X)
        sse[u] = float(np.sum(r * r)) if np.all(np.isfinite(r)) else math.inf
    if not sse or not math.isfinite(min(sse.values())):
        return None
    best = min(sse, key=lambda u: (sse[u], -u))          # a tie: the busier share (fewer claims)
    near = [u for u, v in sse.items() if v <= BUSY_RANGE_SSE * sse[best] + 1e-12]
    beyond = ", ".join(f"{c:g}" for c in ts.cores[over])
    what = ("gained nothing over the CPUs' count: threads taken as busy" if best >= 1.0 else
            f"still gained: threads taken as on a CPU {100 * best:.0f}% of their time")
    return best, (min(near), max(near)), (f"measured: the runs at {beyond} threads, beyond the {cpus} CPUs of "
                                          f"{measured.describe()}, {what}")


def check_yield(smt_yield: float | None) -> None:
    if smt_yield is not None and not (math.isfinite(smt_yield) and 0.0 <= smt_yield <= 1.0):
        raise UserError(f"--smt-yield {smt_yield}: between 0 and 1")


def cross_domain_cost(target: MachineSpec, priors: Priors) -> tuple[float, str]:
    """The cross-node cost for `target`: the prior, scaled by the target's calibrated latency
    ratio when `corecast calibrate` measured one."""
    cal = (target.calibration or {}).get("core_to_core_ns") or {}
    same, cross = cal.get("same_socket"), cal.get("cross_socket")
    if isinstance(same, (int, float)) and isinstance(cross, (int, float)) and same > 0 and cross > 0:
        ratio = cross / same
        k = priors.cross_domain * max(ratio - 1.0, 0.0) / (REFERENCE_LATENCY_RATIO - 1.0)
        return k, (f"calibration: cross-socket {cross:.0f} ns / same-socket {same:.0f} ns = {ratio:.2f}, "
                   f"against {REFERENCE_LATENCY_RATIO:g} for the corpus prior {priors.cross_domain:.2f}")
    return priors.cross_domain, f"prior learned from the corpus ({priors.origin})"


def cross_factor(eff: np.ndarray, cross: np.ndarray, measured_crossing: float, overheads: tuple[float, float],
                 cost: float) -> np.ndarray:
    """Throughput with the extra cross-node overhead over throughput without it: the USL's
    overheads (α, β) grown by 1 + cost x (the crossing share beyond the measured one)."""
    a, b = overheads
    over = a * (eff - 1.0) + b * eff * (eff - 1.0)
    extra = cost * np.maximum(cross - measured_crossing, 0.0)
    return (1.0 + over) / (1.0 + over * (1.0 + extra))


@dataclass
class OnTarget(Fitted):
    """A method fitted on effective cores, asked about the effective cores of the target's
    thread counts, with the cross-node cost the measurements could not show."""

    base: Fitted
    target: Layout
    measured_crossing: float = 0.0              # crossing share at the largest measured count
    usl_overheads: tuple[float, float] = (0.0, 0.0)   # (α, β) of the USL on the effective points
    cross_cost: float = 0.0
    cross_source: str = ""
    smt_source: str = ""
    measured_sockets: int | None = None
    measured_desc: str = ""
    bytes_per_work: float | None = None        # memory traffic per unit of throughput's work
    bytes_source: str = ""
    method: str = ""
    warnings: list[str] = field(default_factory=list)
    busy_source: str = ""
    #: the ranges of the SMT yield and of the busy share the band spans (the machine's effects
    #: are uncertain: `bands`)
    smt_range: tuple[float, float] | None = None
    busy_range: tuple[float, float] | None = None
    #: the measured thread counts and throughput, where the target is the machine measured (a
    #: prediction then never falls below a measurement at fewer threads, `bands`), and the
    #: largest measured count
    measured_series: tuple[np.ndarray, np.ndarray] | None = None
    measured_eff: tuple[np.ndarray, np.ndarray] | None = None      # measured threads, their effective cores
    top_threads: float = 0.0
    #: the corpus' conformal band with a machine given (`bands.Conformal`)
    table: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.method:
            self.method = self.base.method

    # kept for callers that ask the layout's questions of the fit
    def positions(self, cores: Sequence[float] | np.ndarray) -> list[Position]:
        return self.target.positions(cores)

    def effective(self, cores: Sequence[float] | np.ndarray) -> np.ndarray:
        return self.target.effective(cores)

    def _factor(self, eff: np.ndarray, cross: np.ndarray, cost: float) -> np.ndarray:
        """Throughput with the extra cross-node overhead over throughput without it."""
        return cross_factor(eff, cross, self.measured_crossing, self.usl_overheads, cost)

    def predict(self, cores: Sequence[float] | np.ndarray, level: float = 0.8) -> Prediction:
        cores = np.asarray(cores, dtype=float)
        pos = self.target.positions(cores)
        eff = self.target.effective(cores)
        cross = np.array([q.cross_fraction for q in pos])
        p0 = self.base.predict(eff, level)
        p = convert(p0, "throughput")
        f = self._factor(eff, cross, self.cross_cost)
        value = p.value * f
        machine = self.machine_spread(cores, eff, cross, value, level)
        warns = [self._in_threads(w, p.params.get("floor"), cores, eff) for w in p.warnings] + list(self.warnings)
        ceiling = self.ceiling(pos)
        if ceiling is not None:
            bound = value > ceiling
            value = np.minimum(value, ceiling)
            if np.any(bound):
                i = int(np.argmax(bound))
                warns.append(f"from {int(cores[i])} threads the target's memory bandwidth caps the throughput "
                             f"({self.bytes_per_work:.4g} bytes per unit of work, {self.bytes_source}; "
                             f"{self.bandwidth_source()})")
        parts = p.params.get("band_parts")
        # the floor where the prediction itself has one (its `retrograde` verdict): not for the
        # two-point stall model, nor for another clock or problem size (`auto`)
        retro = p.params.get("retrograde")
        if parts is not None and self.measured_series is not None and retro is not None:
            value, note = self._floor(cores, value, retro)
            if note:
                warns.append(note)
        low = high = None
        if parts is not None and hasattr(self.base, "band"):
            # auto: the band around the final value, at the distance in threads, widened by the
            # machine's effects
            low, high = self.base.band(value, cores / max(self.top_threads, 1.0), parts, level, machine, self.table)
        elif p.low is not None and p.high is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                dl = np.log(np.maximum(p.value * f, 1e-300) / np.maximum(p.low * f, 1e-300))
                dh = np.log(np.maximum(p.high * f, 1e-300) / np.maximum(p.value * f, 1e-300))
            low = value * np.exp(-np.sqrt(np.maximum(dl, 0.0) ** 2 + machine ** 2))
            high = value * np.exp(np.sqrt(np.maximum(dh, 0.0) ** 2 + machine ** 2))
        if ceiling is not None and low is not None and high is not None:
            # the band stays under the ceiling, unless a measurement kept the value above it (the
            # measured throughput was reached: the ceiling is then not the target's whole story)
            cap = np.maximum(ceiling, value)
            low, high = np.minimum(low, cap), np.minimum(high, cap)
        if parts is not None and self.measured_series is not None and low is not None and high is not None:
            # auto's band on the machine measured holds the measurements inside their range, as
            # auto's own does (the band recomputed around the final value above need not)
            low, high = bands.hold(cores, low, high, *self.measured_series)
        over = [int(c) for c, q in zip(cores, pos) if q.oversubscribed]
        spec = self.target.spec
        if over:
            u = self.target.busy
            if u >= 1.0:
                warns.append(f"{', '.join(map(str, over))} threads: more than the target's {spec.cpus} logical "
                             "CPUs; the threads beyond them wait and add nothing (predicted as at "
                             f"{spec.cpus}; {self.busy_source})")
            else:
                warns.append(f"{', '.join(map(str, over))} threads: more than the target's {spec.cpus} logical "
                             f"CPUs; threads on a CPU {100 * u:.0f}% of their time fill the CPUs up to about "
                             f"{spec.cpus / u:.0f} threads ({self.busy_source})")
        smt = [int(c) for c, q in zip(cores, pos) if q.smt_shared]
        if smt:
            warns.append(f"SMT siblings share cores from {smt[0]} threads on: each adds {self.target.smt_yield:.2f} "
                         f"of a core ({self.smt_source})")
        if np.any(f < 1.0 - 1e-9):
            i = int(np.argmax(f < 1.0 - 1e-9))
            warns.append(f"from {int(cores[i])} threads the target's threads cross more NUMA nodes than the "
                         f"measured ones: the overheads grow by a cross-node cost of {self.cross_cost:.2f} "
                         f"({self.cross_source}); the band spans that cost from 0 to twice it")
        wide = max(q.sockets_used for q in pos)
        if self.measured_sockets is not None and wide > self.measured_sockets and self.cross_cost == 0:
            warns.append(f"the threads span {wide} sockets, the measurements {self.measured_sockets}: no "
                         "cross-socket cost is modelled (the measured scaling is carried across the boundary)")
        params = dict(p.params)
        params["target"] = {"machine": spec.to_dict(), "placement": self.target.order,
                            "measured_machine": self.measured_desc or None,
                            "smt_yield": self.target.smt_yield, "smt_yield_source": self.smt_source,
                            "busy_share": self.target.busy, "busy_share_source": self.busy_source,
                            "cross_domain_cost": self.cross_cost, "cross_domain_source": self.cross_source,
                            "effective_cores": [float(e) for e in eff],
                            "machine_uncertainty": [float(m) for m in machine],
                            "positions": [{"sockets_used": q.sockets_used, "smt_shared": q.smt_shared,
                                           "oversubscribed": q.oversubscribed, "cores_used": q.cores_used,
                                           "cross_fraction": round(q.cross_fraction, 4)}
                                          for q in pos]}
        out = Prediction(cores=cores, value=value, metric="throughput", low=low, high=high, level=p.level,
                         method=p.method, model=p.model + f" on {spec.name or 'the target'}",
                         params=params, warnings=list(dict.fromkeys(warns)))
        return convert(out, p0.metric)

    def machine_spread(self, cores: np.ndarray, eff: np.ndarray, cross: np.ndarray, value: np.ndarray,
                       level: float) -> np.ndarray:
        """Half the range, in log throughput, of the predictions with the machine's effects at
        the ends of their ranges: the SMT yield and the busy share (pessimistic and optimistic
        together) and the cross-node cost from 0 to twice its value."""
        logs = [np.log(value)]
        f0 = self._factor(eff, cross, 0.0)
        f2 = self._factor(eff, cross, 2.0 * self.cross_cost)
        if self.cross_cost > 0:
            base = value / self._factor(eff, cross, self.cross_cost)
            logs += [np.log(base * f0), np.log(base * f2)]
        f = self._factor(eff, cross, self.cross_cost)
        for alt in self.alternatives(cores, eff):
            try:
                pa = convert(self.base.predict(alt, level), "throughput").value * f
            except (UserError, ValueError, np.linalg.LinAlgError):
                continue
            if np.all(np.isfinite(pa)) and np.all(pa > 0):
                logs.append(np.log(pa))
        L = np.array(logs)
        return 0.5 * (L.max(axis=0) - L.min(axis=0))

    def alternatives(self, cores: np.ndarray, eff: np.ndarray | None = None) -> list[np.ndarray]:
        """The target's effective cores at `cores` with the SMT yield and the busy share at the
        pessimistic and at the optimistic ends of their ranges (those that differ from `eff`)."""
        eff = self.target.effective(cores) if eff is None else eff
        y_lo, y_hi = self.smt_range or (self.target.smt_yield,) * 2
        u_lo, u_hi = self.busy_range or (self.target.busy,) * 2
        out = []
        for y, u in ((y_lo, u_hi), (y_hi, u_lo)):
            alt = dataclasses.replace(self.target, smt_yield=y, busy=u).effective(cores)
            if not np.allclose(alt, eff):
                out.append(alt)
        return out

    def _in_threads(self, warning: str, info: dict[str, Any] | None, cores: np.ndarray, eff: np.ndarray) -> str:
        """The base fit's floor note (`bands.floor_note`: counts of effective cores, which the
        fit was asked about) said in the threads asked and measured, with their effective cores."""
        if info is None or warning != bands.floor_note(info):
            return warning
        hit = np.flatnonzero(np.isclose(eff, info["from"], rtol=1e-9))
        if not hit.size:
            return warning
        i = int(hit[0])
        frm = f"{cores[i]:g} threads" + ("" if eff[i] == cores[i] else f" ({eff[i]:.3g} effective cores on the target)")
        at = f"{info['at']:.3g} effective cores"
        if self.measured_eff is not None:
            threads, meff = self.measured_eff
            j = np.flatnonzero(np.isclose(meff, info["at"], rtol=1e-9))
            if j.size:
                t = float(threads[int(j[0])])
                at = f"{t:g} threads" + ("" if t == info["at"] else f" ({info['at']:.3g} effective cores)")
        return bands.floor_note(info, frm, at)

    def _floor(self, cores: np.ndarray, value: np.ndarray, retro: dict[str, Any]) -> tuple[np.ndarray, str]:
        """The prediction kept at least at the highest throughput measured at or below each
        count on this machine, unless the fitted model says the curve turns down."""
        assert self.measured_series is not None
        mc, mx = self.measured_series
        fl = bands.floor(cores, mc, mx)
        below = value < fl * (1 - 1e-12)
        if not np.any(below) or retro.get("confirmed"):
            return value, ""
        i = int(np.argmax(below))
        ok = mc <= cores[i]
        at = float(mc[ok][int(np.argmax(mx[ok]))])
        return np.where(below, fl, value), (f"from {cores[i]:g} threads the prediction fell below the throughput "
                                            f"measured at {at:g} on this machine; kept at that measurement "
                                            f"({retro.get('why') or 'no retrograde fit'})")

    def bandwidth(self, pos: Sequence[Position]) -> np.ndarray | None:
        """Memory bandwidth (bytes/s) the threads can draw on the target: each socket's peak for
        the sockets they use. (A calibration's per-core chase bandwidth is not used as a cap:
        it is the bandwidth of dependent random misses, which a streaming program's prefetched
        accesses exceed.)"""
        spec = self.target.spec
        peak = spec.memory_bandwidth_gbs_per_socket
        mem = (spec.calibration or {}).get("memory") or {}
        if not peak and isinstance(mem.get("peak_bandwidth_bytes_s_per_socket"), (int, float)):
            peak = mem["peak_bandwidth_bytes_s_per_socket"] / 1e9
        if not peak:
            return None
        return np.array([peak * 1e9 * sum(1 for k in q.per_socket if k) for q in pos], dtype=float)

    def bandwidth_source(self) -> str:
        spec = self.target.spec
        if spec.memory_bandwidth_gbs_per_socket:
            return f"{spec.memory_bandwidth_gbs_per_socket:g} GB/s per socket from the machine description"
        return "the peak bandwidth per socket of the target's calibration run"

    def ceiling(self, pos: Sequence[Position]) -> np.ndarray | None:
        """The throughput the target's memory bandwidth allows (None: unknown)."""
        if not self.bytes_per_work:
            return None
        bw = self.bandwidth(pos)
        return None if bw is None else bw / self.bytes_per_work

    def models(self, horizon: float) -> dict[str, Any]:
        return self.base.models(float(self.target.effective([max(1.0, math.floor(horizon))])[0]))

    def bottlenecks(self, cores: Sequence[float] | np.ndarray) -> list[Any]:
        return self.base.bottlenecks(self.target.effective(cores))

    def __getattr__(self, name: str) -> Any:
        # what a report asks of the method (auto's choice and reason, estima's solve) is the base's
        if name.startswith("__") or name in ("base",):
            raise AttributeError(name)
        return getattr(self.base, name)


def overheads(fitted: Any, eds: Dataset) -> tuple[float, float]:
    """The USL's (α, β) for the cross-node cost: the fitted method's own USL where it has one
    (auto's member, the two-point USL), else the USL fitted to the (effective) points."""
    inner = getattr(fitted, "fitted", None) or getattr(fitted, "base", None)
    fits = getattr(fitted, "fits", None)
    if isinstance(fits, dict) and "usl" in fits and hasattr(getattr(fits["usl"], "fit", None), "alpha"):
        return float(fits["usl"].fit.alpha), float(fits["usl"].fit.beta)
    own = getattr(fitted, "fit", None)
    if hasattr(own, "alpha") and hasattr(own, "beta"):
        return float(own.alpha), float(own.beta)
    two = getattr(fitted, "_usl", None)
    if callable(two) and two() is not None:
        a, b, _, _ = two()
        return float(a), float(b)
    if inner is not None and inner is not fitted:
        return overheads(inner, eds)
    try:
        N, X, _ = speed(eds)
        ok = np.isfinite(X) & (X > 0)
        if len(np.unique(N[ok])) < 3:
            return 0.0, 0.0
        u = usl.fit(N[ok], X[ok])
        return float(u.alpha), float(u.beta)
    except (ValueError, np.linalg.LinAlgError, UserError):
        return 0.0, 0.0


def fit_for_target(fit: Any, ds: Dataset, target: MachineSpec, order: str = "compact",
                   measured: MachineSpec | None = None, measured_order: str = "compact",
                   smt_yield: float | None = None, priors: Priors | None = None) -> OnTarget:
    """Fit (`fit(dataset) -> Fitted`) on the measured thread counts as effective cores of the
    measured machine, and return it asked about the target's (see the module doc). Without the
    measured machine, the measurements are taken to come from the target, placed alike (the
    measured points are then evidence about the target itself: its SMT yield, what threads
    beyond its CPUs gain)."""
    check_yield(smt_yield)
    pri = priors or load_priors()
    warns = []
    assumed = measured is None
    if assumed:
        measured, measured_order = target, order
        warns.append("the measured machine is not given (--measured-machine): the measurements are taken to "
                     f"come from the target ({target.describe()}, placement {order})")
    assert measured is not None
    y = pri.smt_yield if smt_yield is None else smt_yield
    smt_source = pri.smt_source() if smt_yield is None else "given (--smt-yield)"
    smt_range = (y, y) if smt_yield is not None else (min(pri.smt_quartiles[0], y), max(pri.smt_quartiles[1], y))
    if smt_yield is None:
        # The measurements come first where they already put threads on SMT siblings.
        got = measured_smt_yield(ds, measured, measured_order, prior=pri.smt_yield)
        if got is not None:
            y, smt_source = got
            smt_range = (max(0.0, y - SMT_MEASURED_RANGE), min(1.0, y + SMT_MEASURED_RANGE))
    busy = measured_busy(ds, measured, measured_order, y)
    if busy is None:
        u, u_range = BUSY_PRIOR, (BUSY_PRIOR_LOW, 1.0)
        busy_source = ("nothing measured says otherwise: no CPU time recorded, no run beyond the measured "
                       f"machine's {measured.cpus} CPUs; the band reaches to threads on a CPU "
                       f"{100 * BUSY_PRIOR_LOW:.0f}% of their time")
    else:
        u, u_range, busy_source = busy
    m_layout = Layout(measured, measured_order, y, u)
    eds = on_layout(ds, m_layout)
    base = fit(eds)
    top = float(np.max(ds.cores))
    m_cross = float(m_layout.crossing([top])[0])
    ab = overheads(base, eds)
    cost, cost_source = cross_domain_cost(target, pri)
    traffic = bytes_per_work(ds)
    if traffic is None and (target.memory_bandwidth_gbs_per_socket or (target.calibration or {}).get("memory")):
        warns.append("the target's memory bandwidth is known but the data carry no memory traffic "
                     "(memory_bytes per run with time_s, or memory_bandwidth_bytes_s with throughput): no "
                     "bandwidth ceiling")
    same = (_shape(measured) == _shape(target) and measured_order == order)
    series = None
    if same:
        try:
            ts = time_series(ds)
            series = (ts.cores.copy(), 1.0 / ts.time)
        except UserError:
            series = None
    return OnTarget(base, Layout(target, order, y, u), measured_crossing=m_cross, usl_overheads=ab,
                    cross_cost=cost, cross_source=cost_source, smt_source=smt_source,
                    measured_sockets=measured.sockets,
                    measured_desc=("assumed the target: " if assumed else "") + measured.describe(),
                    bytes_per_work=traffic[0] if traffic else None, bytes_source=traffic[1] if traffic else "",
                    warnings=warns, busy_source=busy_source, smt_range=smt_range, busy_range=u_range,
                    measured_series=series, top_threads=top,
                    measured_eff=(np.unique(ds.cores), m_layout.effective(np.unique(ds.cores))),
                    table=pri.table_for(target.known != "cpus"))


def _shape(m: MachineSpec) -> tuple[int, int, int, int | None]:
    return m.sockets, m.cores_per_socket, m.threads_per_core, m.numa_nodes


def bytes_per_work(ds: Dataset) -> tuple[float, str] | None:
    """Memory traffic per unit of the work the throughput counts: bytes per run (memory_bytes
    with time_s: the throughput is runs per second), or bandwidth over throughput
    (memory_bandwidth_bytes_s with throughput); the median over the rows that have both."""
    m = ds.metrics
    if "memory_bytes" in m and "time_s" in m:
        v = m["memory_bytes"][np.isfinite(m["memory_bytes"]) & np.isfinite(m["time_s"])]
        if len(v) and np.median(v) > 0:
            return float(np.median(v)), "memory_bytes per run, measured"
    if "memory_bandwidth_bytes_s" in m and "throughput" in m:
        bw, x = m["memory_bandwidth_bytes_s"], m["throughput"]
        ok = np.isfinite(bw) & np.isfinite(x) & (x > 0) & (bw > 0)
        if ok.any():
            return float(np.median(bw[ok] / x[ok])), "memory_bandwidth_bytes_s over throughput, measured"
    return None


def measured_machine(ds: Dataset, given: MachineSpec | None = None, given_order: str | None = None,
                     target_order: str | None = None) -> tuple[MachineSpec | None, str]:
    """The machine the dataset was measured on and the placement used there: `given` (from
    --measured-machine) first, else the campaign's own record (sockets, cores, threads per core;
    `measure --order`), else None. The placement: `given_order`, else the campaign's, else the
    target's (`target_order`, when given), else DEFAULT_PLACEMENT."""
    notes = (ds.notes or {}).get("campaign") or {}
    order = given_order or str(notes.get("order") or target_order or DEFAULT_PLACEMENT)
    order = {"socket": "compact"}.get(order, order)
    if order not in ("compact", "spread", "smt-last"):
        order = "compact"            # an explicit CPU list: taken in the order given, like compact
    if given is not None:
        return given, order
    m = ds.machine
    if m.sockets and m.cores and m.cores % m.sockets == 0:
        tpc = m.threads_per_core or (m.logical_cpus // m.cores if m.logical_cpus and m.logical_cpus % m.cores == 0
                                     else 1)
        return MachineSpec(sockets=int(m.sockets), cores_per_socket=int(m.cores // m.sockets),
                           threads_per_core=int(tpc or 1), numa_nodes=m.numa_nodes or None,
                           ghz=(m.nominal_freq_hz / 1e9) if m.nominal_freq_hz else None,
                           name=m.cpu_model or "the measured machine", source="the campaign's machine record"), order
    return None, order
