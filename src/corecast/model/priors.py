"""What a short measured range cannot show, learned from a corpus of real many-core curves.

`Priors` holds the numbers `auto` and the target-machine model take from the corpus (learned by
`corecast.model.learn`, written by scripts/learn_priors.py into `priors.toml`
beside this module, and re-learned without the held-out source by `corecast evaluate --corpus
--leave-one-source-out`):

- `default`, `partner`, `default_weight` and `switch_ratio`: which method to trust far out, and
  how much better another must validate to displace it. On held-out many-core curves the method
  that extrapolates best (median over the sources of the median error, the choice bagged over
  resamples of the sources) is the default, blended in log space with a partner member (weight
  `default_weight` on the default, the rest on the partner; none: the default alone) where that
  extrapolates better; `auto` predicts with the blend unless the default's rolling-origin
  validation error is more than `switch_ratio` times the best member's.
- `coherency_share`: with too few points to fit the USL (two core counts), the share of the
  USL's overhead at the largest measured count taken to be coherency (β) rather than
  contention (α): the one number two points cannot fix. `coherency_share_low` is the same for
  two counts of at most `LOW_PAIR_MAX` cores (a program measured on a small machine, 1 and 2
  cores): learned apart, from the corpus' series through their two smallest counts, because
  the overhead two such counts show does not grow like the pairwise cost the corpus' larger
  pairs show (`share_for`).
- `smt_yield`: what a thread on a core's second hardware thread adds, as a share of a core.
- `cross_domain`: how much the USL's overheads grow for threads on different NUMA nodes or
  sockets: overheads x (1 + cross_domain x the extra share of thread pairs that cross).
- `band_growth`: how fast the relative error grows with the log distance of extrapolation, in
  the corpus; a series' own rolling-origin errors are pooled with it (`band_weight` pseudo
  errors) to give the band; `band_growth_two`, the same for a prediction from two core counts
  (nothing of its own to pool with, and a different regime: learned on those alone).

This module only holds and reads them (no fitting): the learning lives above the methods.
"""
from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

#: Without a source that has SMT to learn from: half a core (the middle of the range).
FALLBACK_SMT_YIELD = 0.5
#: Two measured counts up to this many cores take `coherency_share_low`.
LOW_PAIR_MAX = 4.0


@dataclass(frozen=True)
class Priors:
    default: str = "usl"
    partner: str = ""
    default_weight: float = 1.0
    switch_ratio: float = 2.0
    coherency_share: float = 0.1
    coherency_share_low: float = 0.1
    smt_yield: float = FALLBACK_SMT_YIELD
    smt_quartiles: tuple[float, float] = (0.0, 1.0)
    smt_series: int = 0
    cross_domain: float = 0.0
    band_growth: float = 0.25
    band_weight: float = 4.0
    band_growth_two: float = 0.25
    #: conformal band tables learned out of sample (`bands.Conformal`), without and with a
    #: target machine (None: a t-based band from the growth above)
    band_table: dict[str, Any] | None = None
    band_table_machine: dict[str, Any] | None = None
    sources: tuple[str, ...] = ()
    series: int = 0
    train_frac: float = 0.25
    origin: str = "defaults (nothing learned)"
    scores: dict[str, Any] = field(default_factory=dict, compare=False)

    def table_for(self, topology_known: bool) -> dict[str, Any] | None:
        """The band table for a prediction onto a target machine: the machine's table when its
        topology is known, else (`cpus=N`: no sockets, no SMT) the plain one. The machine's
        table was learned from predictions that knew each source's topology and are the surer
        for it; a target known by its CPU count alone adds nothing below that count (with the
        shipped priors on the corpus given as `cpus=N`, the machine's table held 71.6% of the
        held-out points in an 80% band, the plain one docs/predict.md's figure)."""
        return self.band_table_machine if topology_known else self.band_table

    def share_for(self, top: float) -> float:
        """The coherency share of a two-point USL whose larger measured count is `top`."""
        return self.coherency_share_low if top <= LOW_PAIR_MAX else self.coherency_share

    def smt_source(self) -> str:
        if not self.smt_series:
            return f"no series with SMT to learn from: {self.smt_yield:.2f}, the middle of the range"
        return (f"prior: learned from {self.smt_series} series measured with SMT ({self.origin}; quartiles "
                f"{self.smt_quartiles[0]:.2f}-{self.smt_quartiles[1]:.2f})")

    def to_toml(self) -> str:
        """The text of priors.toml (what `load` reads back)."""
        d = asdict(self)
        sc = d.pop("scores")
        lines = ["# Priors for `auto` and the target-machine model (corecast.model.priors), learned from",
                 "# a corpus of real scaling curves by scripts/learn_priors.py; do not edit by hand.", ""]
        for k, v in d.items():
            if v is not None:
                lines.append(f"{k} = {_toml(v)}")
        if sc:
            lines += ["", "# What the choices scored on the corpus they were learned from (median over the",
                      "# sources of each source's median absolute % error; for band_weight, the mean",
                      "# distance of the sources' band coverage from the level); `votes`: the share of",
                      "# the resamples of the sources that chose each candidate (the choice is bagged).",
                      "[scores]"]
            lines += [f'"{k}" = {_toml(v)}' for k, v in sc.items()]
        return "\n".join(lines) + "\n"


def _toml(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.6g}" if "e" not in f"{v:.6g}" else repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f'"{k}" = {_toml(x)}' for k, x in v.items()) + " }"
    return str(v)


def from_dict(d: dict[str, Any]) -> Priors:
    known = Priors.__dataclass_fields__
    kw = {k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items() if k in known}
    return Priors(**kw)


@lru_cache(maxsize=1)
def load() -> Priors:
    """The priors shipped with corecast (priors.toml beside this module)."""
    text = (resources.files("corecast.model") / "priors.toml").read_text(encoding="utf-8")
    return from_dict(tomllib.loads(text))
