"""Lost core-time: which waits cost the run time, and how much (the arbiter of the stall categories).

A run on n cores for a wall time T had n·T core-seconds. The program's threads ran for C of them
(user + system CPU time, wait4's rusage); the rest,

    L(n) = n·T(n) − C(n)                                  lost core-time,

were cores that ran other processes or stood idle. Beside it, the run-queue delay Q (time the
program's threads were runnable without a CPU): **interference** I = min(Q, L) is core-time
other processes took from the run (or, where the program has more threads than cores, its own
threads queueing for each other; L bounds it). A run without it would have taken

    T'(n) = T(n) − I(n)/n                                 (interference-free time)

and every wall-clock quantity of the run (its waits) is stretched by T/T'. corecast predicts the
program, not the machine's other tenants: the stall method and `auto` fit T', and scale the waits
by T'/T (`prepared`, said in a warning when it is more than 1% of the core-time).

A thread blocked in a wait frees its core: the wait costs time only while no other thread of the
program uses the core. A coordinator waiting for busy workers, an idle pool while the others work,
a producer waiting for its consumers: their waits can be many times L and cost nothing (`xz -T`:
15 core-seconds of condition waits against 1 core-second lost). Against perfect scaling from the
smallest measured count n₁ the run lost

    Λ(n) = n·T'(n) − n₁·T'(n₁) = [L'(n) − L'(n₁)] + [C(n) − C(n₁)]       (L' = L − I)

core-seconds: cores left idle, and CPU time the smaller count did not need (spinning, coherency
misses, overheads).

**Charging.** Each category's critical part K is the part of its wait during which cores stood
idle, where the sync shim measured it (the column `X_idle_cycles` beside `X_cycles`; a spinning
wait counts whole: its core does no work), else all of it. Per run the categories share a budget,
the program's idle core-time plus the CPU time beyond the smallest count's median,
B = L' + max(C − C₁, 0): each is charged K·min(1, B / ΣK). What is not charged is *waiting while
other threads work*. Run-queue delay is not a wait of the program: with the CPU time known it is
shown beside L and not charged. Without CPU times (a plain table) nothing is corrected and each
category is charged in full, as before.

**Noise.** σ, the repetitions' spread of log T' (at least NOISE_FLOOR), gives the standard error
of Λ at the largest count; a loss or a charged growth within two of them is not told from noise.

**Explains** (whether the stall method may speak). With two counts nothing can validate the
stalls: a real loss (Λ beyond the noise) must be accounted for by the charged stalls' growth, at
least STALL_SHARE_MIN of it; with no loss beyond the noise nothing contradicts them (charged,
they cannot exceed what was lost, and their growth may show a slowdown before the time does). A
program faster than linear, or one whose loss the waits do not account for, gets the USL through
both points instead. With three or more
counts, once the loss is material (STALL_LOSS_MATERIAL of the core-time at n_k), the same share
and a correlation of at least STALL_CORRELATION_MIN across the counts; below that nothing
contradicts the stalls and validation judges the stall method like any other.

**Bottlenecks.** A category whose wait mostly overlapped other threads' running is not one. With
two counts, one is on the way to becoming a scaling bottleneck only when its charged part grows,
by at least CRITICAL_MIN_SHARE of the core-time, and the program does not scale faster than
linearly; with three or more, when its charged part grows and moves with the loss (correlation at
least STALL_CORRELATION_MIN) -- the stall method's extrapolation, judged by validation, says the
rest. The stall method then says how it grows (its verdict); every other category gets its
verdict here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ..dataset import IDLE_PART_SUFFIX, ColumnInfo, Dataset

#: A category's charged growth must account for at least this share of the core-time lost to
#: imperfect scaling at the largest count (and the categories together, for the stall method) ...
STALL_SHARE_MIN = 0.25
#: ... and move with it across three or more counts (correlation at least this) ...
STALL_CORRELATION_MIN = 0.5
#: ... judged, with three or more counts, once the loss is material: this share of the core-time.
STALL_LOSS_MATERIAL = 0.10
#: The least run-to-run noise (relative) assumed: with one repetition there is nothing to measure
#: it on, and repeated timed runs of a program rarely agree closer than this.
NOISE_FLOOR = 0.02
#: Differences within this many standard errors are not told from noise.
SIGNIFICANT = 2.0
#: With two counts, a critical wait that grew by less than this share of the core-time at the
#: larger count is not named a bottleneck (half the noise floor: a timed run cannot show it).
CRITICAL_MIN_SHARE = NOISE_FLOOR / 2
#: Interference is said (a warning) once it is more than this share of the core-time somewhere.
INTERFERENCE_NOTE = 0.01
#: Run-queue delay: shown beside the lost core-time, not charged as a wait of the program.
RUNQUEUE = "runqueue_delay_cycles"
#: Source notes of the columns `prepared` rewrote (their values are no longer the measured ones).
CHARGED = "charged to time (corecast.model.losttime): "
INTERFERENCE_FREE = "interference-free (corecast.model.losttime): "
OVERLAP_VERDICT = "waiting while other threads work: not a bottleneck"


def idle_name(category: str) -> str | None:
    """`lock_wait_cycles` -> `lock_wait_idle_cycles` (the sync shim's split); None for a
    category not in cycles."""
    return category[: -len("_cycles")] + IDLE_PART_SUFFIX if category.endswith("_cycles") else None


@dataclass
class CountLoss:
    """One measured core count (medians over the repetitions; seconds and core-seconds)."""

    cores: float
    wall_s: float                   # as measured
    free_wall_s: float              # interference-free
    cpu_s: float | None             # user + sys
    lost_core_s: float | None       # n·T − C
    interference_core_s: float      # min(run-queue delay, lost core-time)
    runqueue_core_s: float | None
    scaling_loss_core_s: float      # Λ = n·T' − n₁·T'₁
    waits_core_s: float             # every category's wait (interference-free)
    charged_core_s: float           # what of it is charged to time

    def to_dict(self) -> dict[str, Any]:
        return {"cores": _intish(self.cores), "wall_s": _num(self.wall_s),
                "interference_free_wall_s": _num(self.free_wall_s), "cpu_s": _num(self.cpu_s),
                "core_s": _num(self.cores * self.wall_s), "lost_core_s": _num(self.lost_core_s),
                "runqueue_delay_core_s": _num(self.runqueue_core_s),
                "interference_core_s": _num(self.interference_core_s),
                "scaling_loss_core_s": _num(self.scaling_loss_core_s), "waits_core_s": _num(self.waits_core_s),
                "charged_core_s": _num(self.charged_core_s)}


@dataclass
class Charge:
    """One stall category across the measured counts (medians; interference-free core-seconds)."""

    name: str
    cores: np.ndarray
    wait_s: np.ndarray
    idle_s: np.ndarray | None       # the shim's idle part (None: not measured, all of it counts)
    charged_s: np.ndarray
    critical: bool                  # grows with the loss and accounts for enough of it
    verdict: str                    # this analysis' verdict (the stall method's replaces it when critical)

    @property
    def charged_share(self) -> float:
        """Share of its wait at the largest count charged to time."""
        w = float(self.wait_s[-1])
        return float(self.charged_s[-1]) / w if w > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"category": self.name, "wait_core_s": _num(self.wait_s[-1]),
                "idle_core_s": None if self.idle_s is None else _num(self.idle_s[-1]),
                "charged_core_s": _num(self.charged_s[-1]),
                "overlap_core_s": _num(self.wait_s[-1] - self.charged_s[-1]),
                "charged_share": _num(self.charged_share), "critical": self.critical, "verdict": self.verdict,
                "per_count": [{"cores": _intish(c), "wait_core_s": _num(w), "charged_core_s": _num(k)}
                              for c, w, k in zip(self.cores, self.wait_s, self.charged_s)]}


@dataclass
class LossAnalysis:
    counts: list[CountLoss]
    charges: dict[str, Charge]
    cpu_known: bool
    explains: bool
    reason: str                     # why the stalls do not explain the loss ("" when they do)
    clock_hz: float | None
    noise: float                    # σ of log T' over the repetitions (at least NOISE_FLOOR)
    loss_se_core_s: float           # standard error of Λ at the largest count
    notes: list[str] = field(default_factory=list)
    free_time: np.ndarray | None = field(default=None, repr=False)     # T' per run (None: unchanged)
    charged_rows: dict[str, np.ndarray] = field(default_factory=dict, repr=False)   # per run, column's unit

    @property
    def top(self) -> CountLoss:
        return self.counts[-1]

    def summary(self) -> str:
        """One line: what was lost at the largest count and what the waits account for."""
        c = self.top
        core = c.cores * c.wall_s
        if c.lost_core_s is None:
            return (f"at {c.cores:g} cores: {c.waits_core_s:.3g} core-s of waits, {c.scaling_loss_core_s:.3g} "
                    "core-s lost to imperfect scaling (CPU time not recorded: waits charged in full)")
        rq = (f"; run-queue delay {c.runqueue_core_s:.3g} core-s, of which {c.interference_core_s:.3g} taken by "
              "other processes (interference)") if c.runqueue_core_s is not None else ""
        return (f"at {c.cores:g} cores: lost core-time {c.lost_core_s:.3g} of {core:.3g} core-s "
                f"({100 * c.lost_core_s / core:.1f}%; cores × wall − CPU time){rq}; against perfect scaling "
                f"{c.scaling_loss_core_s:.3g} core-s lost (± {self.loss_se_core_s:.2g}); waits {c.waits_core_s:.3g} "
                f"core-s, of which {c.charged_core_s:.3g} charged to time, the rest waiting while other threads work")

    def interference_note(self) -> str | None:
        """A warning when the times were corrected by more than INTERFERENCE_NOTE of the core-time."""
        big = [c for c in self.counts if c.interference_core_s > INTERFERENCE_NOTE * c.cores * c.wall_s]
        if self.free_time is None or not big:
            return None
        c = max(big, key=lambda c: c.interference_core_s / (c.cores * c.wall_s))
        at = f"{c.cores:g} core" + ("" if c.cores == 1 else "s")
        return (f"other processes took {100 * c.interference_core_s / (c.cores * c.wall_s):.0f}% of the core-time at "
                f"{at} (run-queue delay while the run's cores were not its own): predicted from the "
                f"interference-free times (at {at} {c.free_wall_s:.3g} s instead of {c.wall_s:.3g} s)")

    def prepared(self, ds: Dataset) -> Dataset:
        """`ds` with its time interference-free and each analysed category replaced by its
        charged part (same unit); run-queue delay no longer a stall category when the CPU time
        is known. Analysing the result changes nothing more."""
        out = ds.select(np.ones(len(ds), dtype=bool))
        if self.free_time is not None:
            info = ds.columns["time_s"]
            out.metrics["time_s"] = self.free_time
            out.columns["time_s"] = ColumnInfo(name="time_s", kind=info.kind, unit=info.unit,
                                               source=INTERFERENCE_FREE + (info.source or "measured"),
                                               status="derived", description=info.description)
        for name, values in self.charged_rows.items():
            info = ds.columns[name]
            out.metrics[name] = values
            out.columns[name] = ColumnInfo(name=name, kind="stall", unit=info.unit,
                                           source=CHARGED + (info.source or "measured"), status="derived",
                                           description=f"the part of {name} that cost time")
        if self.cpu_known and RUNQUEUE in out.columns and out.columns[RUNQUEUE].kind == "stall":
            info = out.columns[RUNQUEUE]
            out.columns[RUNQUEUE] = ColumnInfo(name=RUNQUEUE, kind="counter", unit=info.unit, source=info.source,
                                               status=info.status, description=info.description)
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"per_count": [c.to_dict() for c in self.counts],
                "categories": [ch.to_dict() for ch in self.charges.values()],
                "cpu_time_known": self.cpu_known, "stalls_explain_the_loss": self.explains,
                "reason": self.reason or None, "noise": self.noise, "loss_standard_error_core_s": self.loss_se_core_s,
                "summary": self.summary(), "notes": list(self.notes)}


def was_prepared(ds: Dataset, name: str) -> bool:
    src = ds.columns[name].source if name in ds.columns else None
    return bool(src and (src.startswith(CHARGED) or src.startswith(INTERFERENCE_FREE)))


def analyze(ds: Dataset, categories: Sequence[str] | None = None) -> LossAnalysis | None:
    """The lost core-time of a time series and what its stall categories account for (see the
    module docstring); None where it cannot be judged: no time of a fixed work, fewer than two
    core counts, neither the CPU time nor a category in cycles (with the clock) or seconds."""
    if "time_s" not in ds.metrics:
        return None
    n = ds.cores
    T = ds.metrics["time_s"]
    ok = np.isfinite(T) & (T > 0)
    cs = np.unique(n[ok])
    if len(cs) < 2:
        return None
    clock = ds.machine.nominal_freq_hz
    names = [nm for nm in (list(categories) if categories else ds.stall_names) if nm in ds.metrics]
    cpu = None if was_prepared(ds, "time_s") else _cpu(ds)
    cpu_known = cpu is not None
    if cpu_known:
        names = [nm for nm in names if nm != RUNQUEUE]
    rq_rows = None
    if RUNQUEUE in ds.metrics and ds.columns[RUNQUEUE].unit == "cycles" and clock:
        rq_rows = ds.metrics[RUNQUEUE] / clock
    # ---- interference, per run
    if cpu_known:
        lost = np.maximum(n * T - cpu, 0.0)
        interf = np.minimum(np.nan_to_num(rq_rows, nan=0.0), lost) if rq_rows is not None else np.zeros_like(T)
        free = T - interf / n
    else:
        lost, interf, free = None, np.zeros_like(T), T
    stretch = np.where(T > 0, free / T, 1.0)
    # ---- the categories, per run, in interference-free seconds
    sec: dict[str, np.ndarray] = {}
    crit: dict[str, np.ndarray] = {}
    crit_unit: dict[str, np.ndarray] = {}       # the critical part in the column's unit, as measured
    split: dict[str, bool] = {}
    for nm in names:
        unit = ds.columns[nm].unit
        if unit == "cycles" and clock:
            f = 1.0 / clock
        elif unit == "s":
            f = 1.0
        else:
            continue
        v = ds.metrics[nm] * f * stretch
        sec[nm] = v
        idn = idle_name(nm)
        have = (idn is not None and idn in ds.metrics and not was_prepared(ds, nm)
                and bool(np.isfinite(ds.metrics[idn][np.isfinite(v)]).all()))
        crit_unit[nm] = np.minimum(ds.metrics[idn], ds.metrics[nm]) if have else ds.metrics[nm]
        crit[nm] = crit_unit[nm] * f * stretch
        split[nm] = have
    if not sec and not cpu_known:
        return None
    # ---- the budget, per run
    n1 = float(cs[0])
    if cpu_known:
        c1 = _median(cpu[ok & (n == n1)])
        budget = (lost - interf) + np.maximum(cpu - c1, 0.0)
    else:
        budget = n * free
    K = np.nansum(np.stack(list(crit.values())), axis=0) if crit else np.zeros_like(T)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(K > 0, np.minimum(1.0, np.maximum(budget, 0.0) / K), 1.0)
    charged_rows = {nm: crit[nm] * scale for nm in sec}
    # ---- medians per count, the noise
    def med(a: np.ndarray) -> np.ndarray:
        return np.array([_median(a[ok & (n == c)]) for c in cs])

    Tm, Fm = med(T), med(free)
    Lam = cs * Fm - cs[0] * Fm[0]
    noise = repetition_noise(np.where(ok, free, np.nan), n)
    reps = np.array([max(int(np.sum(ok & (n == c))), 1) for c in cs])
    se = 1.25 * noise * math.sqrt((cs[-1] * Fm[-1]) ** 2 / reps[-1] + (cs[0] * Fm[0]) ** 2 / reps[0])
    waits = {nm: med(v) for nm, v in sec.items()}
    charged = {nm: med(v) for nm, v in charged_rows.items()}
    idle = {nm: med(crit[nm]) if split[nm] else None for nm in sec}
    rq = med(rq_rows) if rq_rows is not None else None
    counts = []
    for i, c in enumerate(cs):
        counts.append(CountLoss(
            cores=float(c), wall_s=float(Tm[i]), free_wall_s=float(Fm[i]),
            cpu_s=None if cpu is None else float(med(cpu)[i]),
            lost_core_s=None if lost is None else float(med(lost)[i]),
            interference_core_s=float(med(interf)[i]),
            runqueue_core_s=None if rq is None or not math.isfinite(rq[i]) else float(rq[i]),
            scaling_loss_core_s=float(Lam[i]),
            waits_core_s=float(sum(np.nan_to_num(w[i]) for w in waits.values())),
            charged_core_s=float(sum(np.nan_to_num(k[i]) for k in charged.values()))))
    charges: dict[str, Charge] = {}
    for nm in sec:
        crit_ok, verdict = _category_verdict(cs, Lam, se, waits[nm], charged[nm], split[nm], float(Fm[-1]))
        charges[nm] = Charge(nm, cs, waits[nm], idle[nm], charged[nm], crit_ok, verdict)
    total = np.nansum(np.stack(list(charged.values())), axis=0) if charged else np.zeros(len(cs))
    explains, reason = _explains(cs, Fm, Lam, se, total)
    notes: list[str] = []
    if not cpu_known and not was_prepared(ds, "time_s"):
        notes.append("CPU time not recorded (user_s, sys_s): the lost core-time cannot be told from the "
                     "waits; every wait is charged in full")
    an = LossAnalysis(counts, charges, cpu_known, explains, reason, clock, noise, se, notes,
                      free_time=free if cpu_known and np.any(interf > 0) else None,
                      charged_rows={nm: crit_unit[nm] * (stretch * scale) for nm in sec})
    note = an.interference_note()
    if note:
        an.notes.append(note)
    return an


def prepare(ds: Dataset, categories: Sequence[str] | None = None) -> tuple[Dataset, LossAnalysis | None]:
    """The dataset the stall method and `auto` fit (`LossAnalysis.prepared`) and its analysis;
    `ds` itself where there is nothing to analyse."""
    la = analyze(ds, categories)
    return (la.prepared(ds) if la is not None else ds), la


def _category_verdict(cs: np.ndarray, Lam: np.ndarray, se: float, wait: np.ndarray, charged: np.ndarray,
                      split: bool, free_top: float) -> tuple[bool, str]:
    w, k = float(np.nan_to_num(wait[-1])), float(np.nan_to_num(charged[-1]))
    grown = k - float(np.nan_to_num(charged[0]))
    overlap = 1.0 - k / w if w > 0 else 0.0
    if w <= 0:
        return False, "no waits measured"
    if overlap >= 0.5:
        how = ("overlapped other threads' running (measured by the sync shim)" if split else
               "is more than the core-time the run lost")
        return False, f"{OVERLAP_VERDICT} ({100 * overlap:.0f}% of its wait {how})"
    if len(cs) >= 3:
        # The stall method extrapolates it and validation judges the method: here only whether
        # it grows, and with the loss.
        if grown <= 0:
            return False, "does not grow with the cores: not a bottleneck"
        if np.ptp(Lam) > 0:
            r = _corr(Lam, charged)
            if not math.isfinite(r) or r < STALL_CORRELATION_MIN:
                return False, f"does not move with the lost core-time (correlation {r:.2f}): not a bottleneck"
        return True, "on the critical path, growing with the lost core-time"
    # Two counts: it must grow, with a loss that is not a gain, and matter.
    if Lam[-1] < -SIGNIFICANT * se:
        return False, (f"on the critical path, but the time scales faster than linearly to {cs[-1]:g} cores: "
                       "not a bottleneck")
    if grown <= 0:
        return False, "does not grow with the cores: not a bottleneck"
    core = float(cs[-1] * free_top)
    if grown < CRITICAL_MIN_SHARE * core:
        return False, (f"on the critical path but {100 * grown / core:.2f}% of the core-time at {cs[-1]:g} cores "
                       f"(under {100 * CRITICAL_MIN_SHARE:g}%): not a bottleneck")
    share = grown / Lam[-1] if Lam[-1] > 0 else math.inf
    what = (f"accounts for {100 * min(share, 1.0):.0f}% of the core-time lost" if math.isfinite(share) else
            "grows while the time still scales")
    return True, f"on the critical path ({100 * grown / core:.1f}% of the core-time): {what}"


def _explains(cs: np.ndarray, T: np.ndarray, Lam: np.ndarray, se: float, charged: np.ndarray) -> tuple[bool, str]:
    grown = float(charged[-1] - charged[0])
    top = cs[-1]
    lim = SIGNIFICANT * se
    if len(cs) == 2:
        if Lam[-1] < -lim:
            return False, (f"the time scales faster than linearly from {cs[0]:g} to {top:g} cores: no core-time "
                           "lost for the stalls to explain")
        if Lam[-1] <= lim:
            # No loss beyond the noise: nothing contradicts the stalls (charged, they cannot exceed
            # what was lost), and their growth may show a slowdown before the time does.
            return True, ""
    elif Lam[-1] <= STALL_LOSS_MATERIAL * top * T[-1]:
        return True, ""
    share = grown / float(Lam[-1])
    if share < STALL_SHARE_MIN:
        return False, (f"the growth of the waits charged to time accounts for {100 * max(share, 0.0):.1f}% of the "
                       f"core-time lost to imperfect scaling at {top:g} cores (under {100 * STALL_SHARE_MIN:g}%): "
                       "something the stall columns do not show limits the scaling")
    if len(cs) >= 3:
        g = charged - charged[0]
        if np.ptp(g) <= 0:
            return False, "the stalls do not grow with the cores while the time lost to imperfect scaling does"
        r = _corr(Lam, g)
        if not math.isfinite(r) or r < STALL_CORRELATION_MIN:
            return False, (f"the core-time lost to imperfect scaling does not move with the stalls across the "
                           f"measured counts (correlation {r:.2f} < {STALL_CORRELATION_MIN:g}): something the "
                           "stall columns do not show limits the scaling")
    return True, ""


def _cpu(ds: Dataset) -> np.ndarray | None:
    if "user_s" not in ds.metrics or "sys_s" not in ds.metrics:
        return None
    c = ds.metrics["user_s"] + ds.metrics["sys_s"]
    ok = np.isfinite(ds.metrics["time_s"])
    if not np.isfinite(c[ok]).all() or not np.any(c[ok] > 0):
        return None
    return c


def repetition_noise(t: np.ndarray, n: np.ndarray) -> float:
    """Relative run-to-run noise of the values `t` at core counts `n`: the pooled standard
    deviation of log t over the repetitions at each count, at least NOISE_FLOOR."""
    ss, dof = 0.0, 0
    ok = np.isfinite(t) & (t > 0)
    for c in np.unique(n[ok]):
        x = t[ok & (n == c)]
        if len(x) >= 2:
            lx = np.log(x)
            ss += float(np.sum((lx - lx.mean()) ** 2))
            dof += len(x) - 1
    return max(math.sqrt(ss / dof), NOISE_FLOOR) if dof else NOISE_FLOOR


def _median(a: np.ndarray) -> float:
    a = a[np.isfinite(a)]
    return float(np.median(a)) if a.size else math.nan


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(a) <= 0 or np.ptp(b) <= 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def _num(v: Any) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if math.isfinite(v) else None


def _intish(v: float) -> float | int:
    return int(v) if float(v).is_integer() else float(v)
