"""The registry of the single methods: every way corecast fits a Dataset on its own.

Each entry names a fit function and what it is:

- role "method": offered as `--method` (and plotted, evaluated and validated by `auto`);
- role "member": a scaling law `auto` fits, validates and combines with the methods, not offered
  as `--method`.

An entry's options are the keyword parameters of its fit function, read from its signature:
declared once, where they are used. `fit` passes each method the options it declares and drops
the shared ones it does not use (`--kernels` means nothing to the USL), and refuses an option
that no registered method declares. `auto`, which combines these methods, sits above this
module (`corecast.model.predictors` adds it to the names `fit` accepts).
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..dataset import Dataset
from ..errors import UserError
from . import estima, laws, mva, timex
from .base import Fitted
from .series import check_categories


def declared(fit: Callable[..., Any]) -> tuple[str, ...]:
    """The keyword options of a fit function: its parameters after the Dataset. A fit function
    that takes **kwargs (options it would swallow unseen) is refused."""
    params = list(inspect.signature(fit).parameters.values())[1:]
    for p in params:
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            raise TypeError(f"{fit.__module__}.{fit.__qualname__} takes *{p.name}: declare every option by name")
    return tuple(p.name for p in params)


@dataclass(frozen=True)
class Method:
    """One registered method: its name, fit function (Dataset, **options) -> Fitted, and role."""

    name: str
    fit: Callable[..., Fitted]
    role: str                       # "method" or "member"
    needs_stalls: bool = False      # applicable only to data with stall categories
    #: Applicable only to data with measured service demands (a campaign recorded with the sync
    #: shim: `mva.missing(ds)` says why not); like needs_stalls, it takes no rank.
    needs_demands: bool = False
    combines: bool = False          # combines the registered methods: takes all their options
    #: Where a method that runs on any data (no stall categories) stands when one of them is
    #: chosen -- auto's default member (model.learn), the baselines a corpus is scored against
    #: (model.scorecard): lowest first, and the lower wins a tie (the simplest first). None for a
    #: method that needs stall categories, and only for one.
    rank: int | None = None

    @property
    def options(self) -> frozenset[str]:
        return OPTIONS if self.combines else frozenset(declared(self.fit))


def _registry(*entries: Method) -> dict[str, Method]:
    out: dict[str, Method] = {}
    for m in entries:
        if m.name in out:
            raise ValueError(f"method '{m.name}' registered twice")
        if m.role not in ("method", "member") or m.combines:
            raise ValueError(f"method '{m.name}': not a single method (role '{m.role}')")
        declared(m.fit)             # a **kwargs fit function is refused at import, not at the first fit
        if (m.rank is None) != (m.needs_stalls or m.needs_demands):
            raise ValueError(f"method '{m.name}': a rank if and only if it runs without stall categories "
                             "or demands")
        if m.rank is not None and m.rank in {o.rank for o in out.values()}:
            raise ValueError(f"method '{m.name}': rank {m.rank} taken")
        out[m.name] = m
    return out


#: Every single method, in the order they are shown, validated and combined.
REGISTRY: Mapping[str, Method] = _registry(
    # stall categories extrapolated one by one, turned into time by a scaling factor
    Method("estima", estima.fit_dataset, "method", needs_stalls=True),
    # measured service demands (CPU, the hot locks' holds, off-CPU) in a closed queueing network
    Method("mva", mva.fit_mva, "method", needs_demands=True),
    Method("timex", timex.fit_dataset, "method", rank=4),     # the time series extrapolated directly
    Method("usl", laws.fit_usl, "method", rank=0),            # the Universal Scalability Law
    Method("amdahl", laws.fit_amdahl, "member", rank=1),      # Amdahl's law: the USL with β = 0
    Method("power", laws.fit_power, "member", rank=2),        # the local power law of the throughput
    Method("pmnf", laws.fit_pmnf, "member", rank=3),          # Extra-P's one-term normal form of the throughput
)

#: The single methods offered as --method.
BASE = tuple(n for n, m in REGISTRY.items() if m.role == "method")
#: The scaling laws `auto` combines with the methods above; not offered as --method.
MEMBERS = tuple(n for n, m in REGISTRY.items() if m.role == "member")
#: The methods that run on any data, by rank (see Method.rank).
RANKED = tuple(sorted((n for n, m in REGISTRY.items() if m.rank is not None), key=lambda n: REGISTRY[n].rank))
#: Every option some method declares.
OPTIONS: frozenset[str] = frozenset().union(*(declared(m.fit) for m in REGISTRY.values()))


def check_options(opts: Mapping[str, Any], known: frozenset[str] = OPTIONS) -> None:
    """A TypeError naming the options no method declares (a caller's mistake, not a user's)."""
    unknown = sorted(set(opts) - known)
    if unknown:
        raise TypeError(f"unknown fit option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def options_for(fit: Callable[..., Any], opts: Mapping[str, Any]) -> dict[str, Any]:
    """The options among `opts` that the fit function `fit` declares."""
    names = declared(fit)
    return {k: v for k, v in opts.items() if k in names}


def fit(name: str, ds: Dataset, **opts: Any) -> Fitted:
    """Fit the single method `name` to a Dataset with the options it declares among `opts`."""
    if name not in REGISTRY:
        raise UserError(f"unknown method '{name}' (choose from {', '.join(REGISTRY)})")
    check_options(opts)
    check_categories(ds, opts.get("categories"))
    m = REGISTRY[name]
    return m.fit(ds, **options_for(m.fit, opts))


def has_stalls(ds: Dataset, categories: Sequence[str] | None = None) -> bool:
    """Stall categories named, or some stall column measured at 3 or more core counts."""
    if categories:
        return True
    return any(len(np.unique(ds.cores[np.isfinite(ds.metrics[n])])) >= 3 for n in ds.stall_names)


def has_demands(ds: Dataset) -> bool:
    """Measured service demands: a campaign recorded with the sync shim (`mva.missing`)."""
    return mva.missing(ds) is None


def applicable(ds: Dataset, categories: Sequence[str] | None = None) -> list[str]:
    """The methods (role "method") that can run on this dataset (estima only with stall categories,
    mva only with measured demands)."""
    stalls = has_stalls(ds, categories)
    demands = has_demands(ds)
    return [n for n in BASE if (stalls or not REGISTRY[n].needs_stalls)
            and (demands or not REGISTRY[n].needs_demands)]
