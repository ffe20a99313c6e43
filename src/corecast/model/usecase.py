"""The predict use case: one `predict(data, options, target)` that `corecast predict`, the
dashboard's predict view and `corecast evaluate` all call, with the options validated once.

- `PredictOptions`: what the user chose (method, kernels, checkpoints, refit, the rows of a
  problem size, clock, frequency and size ratios, stall categories), as typed values. Building
  one validates it; a mistake is one UserError line naming the option. `fit_kwargs(data)` turns
  it into the keywords of `predictors.fit`, once per prediction.
- `Target`: the machine to predict for (a `target.MachineSpec`), how threads are laid out there,
  the SMT yield, and what the data do not record about the machine measured.
- `predict(...)` -> `PredictResult`: the chosen method's fit (for a target, the fit carried to
  the target's positions), the other methods fitted beside it for a plot, and the work per run.

Rendering (terminal, JSON, HTML, plots) is `report/`'s: it receives a `PredictResult` and never
fits. The dataset given is not changed: a clock the data lack goes into a copy.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from ..dataset import Dataset
from ..errors import UserError
from ..target import MachineSpec
from . import estima, mva, predictors, topo
from .base import Fitted
from .kernels import PAPER_KERNELS, kernels as kernel_set

#: How threads are laid out on a machine (target.placement's orders).
PLACEMENTS = ("compact", "spread", "smt-last")


def _names(text: str | Sequence[str] | None) -> tuple[str, ...] | None:
    """A comma-separated list as typed, or a sequence, as a tuple of names (None when empty)."""
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    names = tuple(s.strip() for s in items if s and s.strip())
    return names or None


@dataclass(frozen=True)
class PredictOptions:
    """The options of a prediction, validated when built (see the module's note)."""
    method: str = "auto"
    kernels: tuple[str, ...] | None = None      # kernel names, or ("paper",)
    checkpoints: int | None = None
    refit: bool = False
    size: float | None = None                   # use the rows of this problem size
    freq_ratio: float = 1.0                     # measured / target clock frequency
    size_ratio: float | None = None             # target / measured problem size
    target_size: float | None = None            # gives size_ratio
    clock: float | None = None                  # GHz of the measured machine, where the data lack it
    stalls: tuple[str, ...] | None = None       # stall categories to use

    def __post_init__(self) -> None:
        object.__setattr__(self, "kernels", _names(self.kernels))
        object.__setattr__(self, "stalls", _names(self.stalls))
        if self.method not in predictors.METHODS:
            raise UserError(f"unknown method '{self.method}' (choose from {', '.join(predictors.METHODS)})")
        if self.checkpoints is not None and self.checkpoints < 1:
            # 0 left nothing to validate on, and the in-sample error was reported as "validated at"
            raise UserError(f"--checkpoints {self.checkpoints}: at least 1 (leave it out for the default, which "
                            "grows with the number of points)")
        if self.clock is not None and not (math.isfinite(self.clock) and 0.01 <= self.clock <= 100):
            raise UserError(f"--clock {self.clock:g}: give the clock frequency in GHz (e.g. 2.5)")
        for value, option in ((self.freq_ratio, "--freq-ratio"), (self.size_ratio, "--size-ratio"),
                              (self.target_size, "--target-size")):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise UserError(f"{option} must be a number > 0 (got {value:g})")
        if self.target_size is not None and self.size_ratio is not None:
            raise UserError("give --size-ratio or --target-size, not both")
        if self.kernels:
            self._kernel_set()             # an unknown kernel is said now, not at the first fit

    def _kernel_set(self) -> Any:
        # "paper": ESTIMA's six kernels
        names = [k.name for k in PAPER_KERNELS] if self.kernels == ("paper",) else list(self.kernels or ())
        try:
            return kernel_set(names)
        except KeyError as err:
            raise UserError(f"--kernels: {err.args[0]}") from None

    def with_clock(self, data: Dataset) -> Dataset:
        """`data`, or a copy of it whose machine records `clock` (the data's own is not changed)."""
        if self.clock is None:
            return data
        machine = dataclasses.replace(data.machine, nominal_freq_hz=self.clock * 1e9)
        return dataclasses.replace(data, machine=machine)

    def fit_kwargs(self, data: Dataset) -> dict[str, Any]:
        """The keywords of `predictors.fit` for `data` (a --target-size read against its size or
        memory footprint). The stall categories are checked against the data here."""
        size_ratio = self.size_ratio
        if self.target_size is not None:
            size_ratio = estima.size_ratio_for(data, self.target_size)
        kw: dict[str, Any] = dict(kernels=self._kernel_set() if self.kernels else None,
                                  checkpoints=self.checkpoints, use="all" if self.refit else "prefix",
                                  size=self.size, freq_ratio=self.freq_ratio,
                                  size_ratio=1.0 if size_ratio is None else size_ratio)
        if self.stalls:
            kw["categories"] = list(self.stalls)
            predictors.check_categories(data, kw["categories"])
        return kw


@dataclass(frozen=True)
class Target:
    """The machine to predict for, and what the data do not say about the one measured."""
    machine: MachineSpec
    placement: str | None = None                # None: as the measurements were placed, else compact
    smt_yield: float | None = None              # None: the corpus' prior
    measured: MachineSpec | None = None         # where the data do not record their machine
    measured_placement: str | None = None       # None: the campaign's --order, else compact

    def __post_init__(self) -> None:
        for value, what in ((self.placement, "placement"), (self.measured_placement, "measured placement")):
            if value is not None and value not in PLACEMENTS:
                raise UserError(f"{what} '{value}': choose from {', '.join(PLACEMENTS)}")
        topo.check_yield(self.smt_yield)


@dataclass
class PredictResult:
    """What `predict` found: `fitted` (the chosen method's, on the target's positions where a
    target was given), `fits` (by method name: the chosen one's fit on the measured axis and the
    `others`', an exception in place of one that could not be fitted), the work per run (the
    measured throughput's unit of work, for the report), and the data it was fitted on."""
    method: str
    fitted: Fitted
    fits: dict[str, Fitted | Exception]
    work: float | None
    data: Dataset
    target: Target | None = None
    options: PredictOptions = field(default_factory=PredictOptions)

    def lock_outlook(self, cores: Sequence[float]) -> tuple[Any, list[dict[str, Any]]] | None:
        """The measured demands and the demand model's share of each hot lock at `cores` (on
        the target's effective cores where a target was given); None without demands."""
        eff = None
        if self.target is not None and hasattr(self.fitted, "effective"):
            eff = self.fitted.effective(cores)
        return lock_outlook(self.data, cores, eff)


def lock_outlook(data: Dataset, cores: Sequence[float],
                 effective: Sequence[float] | None = None) -> tuple[Any, list[dict[str, Any]]] | None:
    """(demands, mva.lock_outlook) of the data's hot locks at `cores` (`effective`: the
    target's effective cores for them), or None where the data have no demands (a plain CSV,
    a run without the sync shim's lock table)."""
    if mva.missing(data) is not None or not data.tables.get(mva.TABLE):
        return None
    try:
        dem = mva.demands(data)
    except UserError:
        return None
    return dem, mva.lock_outlook(dem, list(effective) if effective is not None else [float(c) for c in cores])


def predict(data: Dataset, options: PredictOptions, target: Target | None = None,
            others: Sequence[str] = ()) -> PredictResult:
    """Fit `options.method` to `data` (for `target`, on the effective cores of the machine
    measured, carried to the target's positions) and `others` beside it on the measured axis."""
    data = options.with_clock(data)
    kw = options.fit_kwargs(data)
    method = options.method
    names = [method] + [m for m in others if m != method]
    if target is None:
        fits = predictors.fit_many(names, data, calibrate=True, **kw)
        fitted = fits[method]
        if isinstance(fitted, Exception):
            raise fitted
    else:
        m_spec, m_order = topo.measured_machine(data, target.measured, target.measured_placement)
        fitted = topo.fit_for_target(lambda d: predictors.fit(method, d, calibrate=True, **kw), data,
                                     target.machine, target.placement or "compact", measured=m_spec,
                                     measured_order=m_order, smt_yield=target.smt_yield)
        fits = {method: fitted.base, **predictors.fit_many(names[1:], data, calibrate=True, **kw)}
    return PredictResult(method, fitted, fits, predictors.work_per_run(data), data, target, options)
