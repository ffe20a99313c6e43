"""Shared fakes for the tests: small stand-ins built in code, so that a test says what it feeds in.

Each section belongs to one part of corecast; import what you need (`from fakes import ...`,
tests/ is on the path under pytest's default rootdir-based import).
"""
from __future__ import annotations

import dataclasses
import inspect

import numpy as np

from corecast.dataset import ColumnInfo, Dataset, Machine
from corecast.model import methods


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


def two_points(t1: float = 10.0, t2: float = 5.6) -> Dataset:
    """time_s at only 1 and 2 cores (a 2-vCPU VM)."""
    ds = Dataset(cores=[1.0, 1.0, 2.0, 2.0], metrics={"time_s": [t1, t1 * 1.01, t2, t2 * 0.99]})
    ds.path = "fake:two_points"
    return ds


def with_stalls(ds: Dataset) -> bool:
    """Whether a fake has stall categories (what the stall method needs)."""
    return bool(ds.stall_names)


#: Every fake above with 3 or more core counts, by name: what the method contract runs on.
MODEL_DATASETS = {"amdahl_time": amdahl_time, "usl_throughput": usl_throughput, "lock_stalls": lock_stalls}


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
