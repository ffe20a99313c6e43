"""Synthetic scaling datasets with known laws, for tests, benchmarks and demonstrations.

Every program does W cycles of work in all, split evenly over n cores, and waits for stall
cycles summed over its threads; its time is (work + stalls) / (n · clock). Each law returns
a Dataset measured (with multiplicative noise) at the given core counts and a function giving
the true time at any core count.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..dataset import ColumnInfo, Dataset, Machine

CLOCK_HZ = 2.0e9


def _law(kind: str, work: float) -> tuple[dict[str, Callable[[np.ndarray], np.ndarray]], str]:
    W = work
    if kind == "lock":
        # Time still falls up to ~20 cores, then lock-wait (growing quadratically in total
        # cycles, linearly per core) takes over: intruder/kmeans-like.
        k = W / 400.0
        return {
            "mem_stall_cycles": lambda n: 0.25 * W + 0.0 * n,
            "lock_wait_cycles": lambda n: k * n ** 2,
            "branch_stall_cycles": lambda n: 0.02 * W * (1.0 + 0.01 * n),
        }, "lock-wait cycles grow as n²: time bottoms out near 20 cores and rises after"
    if kind == "lock_hidden":
        # Lock-wait grows quadratically *per core* (n³ in all) but is still a few per cent of
        # the time at 12 cores: time keeps falling there, the collapse comes later.
        k = W / 12.0 ** 3 * 0.04 * 12 / 1.3
        return {
            "mem_stall_cycles": lambda n: 0.3 * W + 0.0 * n,
            "lock_wait_cycles": lambda n: k * n ** 3 / 12.0,
            "branch_stall_cycles": lambda n: 0.02 * W + 0.0 * n,
        }, "lock-wait cycles per core grow as n²: hidden in the time up to 12 cores"
    if kind == "perfect":
        return {
            "mem_stall_cycles": lambda n: 0.3 * W + 0.0 * n,
            "branch_stall_cycles": lambda n: 0.02 * W + 0.0 * n,
        }, "perfect scaling: stalls are a fixed share of the work"
    if kind == "memory":
        # Memory bandwidth saturates: memory stalls per core grow once ~8 cores share it.
        return {
            "mem_stall_cycles": lambda n: 0.3 * W * (1.0 + (n / 8.0) ** 2),
            "branch_stall_cycles": lambda n: 0.02 * W + 0.0 * n,
        }, "memory stalls grow as bandwidth saturates"
    raise ValueError(f"unknown law {kind!r}")


LAWS = ("lock", "lock_hidden", "perfect", "memory")


def scaling_dataset(kind: str = "lock", cores: Sequence[float] = tuple(range(1, 13)), repetitions: int = 3,
                    noise: float = 0.02, seed: int = 0, work: float = 2.0e11,
                    with_time: bool = True, extra_categories: int = 0
                    ) -> tuple[Dataset, Callable[[np.ndarray], np.ndarray], str]:
    """A measured dataset of a known law, and the true time as a function of n."""
    cats, what = _law(kind, work)
    rng = np.random.default_rng(seed)
    for j in range(extra_categories):
        share = 0.01 * (j + 1)
        power = (j % 3) * 0.5
        cats[f"extra{j}_stall_cycles"] = (lambda s, p: (lambda n: s * work * np.power(n, p)))(share, power)

    def truth(n: np.ndarray | Sequence[float]) -> np.ndarray:
        n = np.asarray(n, dtype=float)
        total = work + sum(f(n) for f in cats.values())
        return total / (n * CLOCK_HZ)

    rows = []
    for c in cores:
        for r in range(repetitions):
            n = np.array([float(c)])
            row: dict[str, float] = {"cores": float(c), "repetition": float(r)}
            for name, f in cats.items():
                row[name] = float(f(n)[0] * np.exp(rng.normal(0.0, noise)))
            t = float(truth(n)[0] * np.exp(rng.normal(0.0, noise)))
            if with_time:
                row["time_s"] = t
            else:
                row["throughput"] = 1.0 / t
            rows.append(row)
    columns = {name: ColumnInfo(name=name, kind="stall", unit="cycles", source=f"synthetic: {kind}")
               for name in cats}
    ds = Dataset.from_rows(rows, columns=columns, machine=Machine(nominal_freq_hz=CLOCK_HZ),
                           notes={"synthetic": kind, "law": what})
    ds.path = f"synthetic:{kind}"
    return ds, truth, what
