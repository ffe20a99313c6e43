"""Queueing formulas against a discrete-event simulation (PyPI `ciw`).

Each simulation is short and seeded. The comparison uses the method of batch means: after a
warm-up, the observations (one per customer, in arrival order) are cut into B = 20 consecutive
batches; batch averages are close to independent and normal when batches hold hundreds of
customers, so mean ± t(0.9995, B - 1) · sd / sqrt(B) is a 99.9% confidence interval for the
steady-state value. The analytic value must fall inside it. With a fixed seed the outcome is
deterministic; the interval says why the tolerance is what it is. (The intervals are 5-30%
wide: enough to catch a wrong formula -- a missing factor, the wrong Erlang probability --
not a rounding error, which the closed-form tests in test_queueing.py catch.)
"""
from __future__ import annotations

import math

import ciw  # in the `test` extra: the proof runs everywhere the tests do
import numpy as np
import pytest
from scipy import stats

from corecast.model.queueing import machine_repairman, mmc, mva, Station

BATCHES = 20
LEVEL = 0.999


def batch_interval(values: np.ndarray, batches: int = BATCHES, level: float = LEVEL) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    n = len(values) // batches * batches
    means = values[:n].reshape(batches, -1).mean(axis=1)
    half = stats.t.ppf(0.5 + level / 2, batches - 1) * means.std(ddof=1) / math.sqrt(batches)
    return float(means.mean() - half), float(means.mean() + half)


def assert_inside(value: float, interval: tuple[float, float], what: str) -> None:
    lo, hi = interval
    assert lo <= value <= hi, f"{what}: analytic {value:.6g} outside the 99.9% interval [{lo:.6g}, {hi:.6g}]"
    # the interval must also be tight enough to mean something
    assert hi - lo < 0.35 * max(abs(value), 1e-9), f"{what}: interval too wide to test anything"


def simulate_open(lam: float, mu: float, c: int, horizon: float, seed: int, warmup: float):
    net = ciw.create_network(arrival_distributions=[ciw.dists.Exponential(rate=lam)],
                             service_distributions=[ciw.dists.Exponential(rate=mu)],
                             number_of_servers=[c])
    ciw.seed(seed)
    sim = ciw.Simulation(net)
    sim.simulate_until_max_time(horizon)
    recs = sorted((r for r in sim.get_all_records() if r.arrival_date > warmup),
                  key=lambda r: r.arrival_date)
    wait = np.array([r.waiting_time for r in recs])
    resp = wait + np.array([r.service_time for r in recs])
    return wait, resp


@pytest.mark.slow
@pytest.mark.parametrize("lam,mu,c,seed", [(0.6, 1.0, 1, 11), (2.1, 1.0, 3, 12)])
def test_open_queue_against_simulation(lam, mu, c, seed):
    q = mmc(lam, mu, c)
    wait, resp = simulate_open(lam, mu, c, horizon=40000.0 / lam, seed=seed, warmup=500.0 / lam)
    assert_inside(q.mean_response_time, batch_interval(resp), "mean response time")
    assert_inside(q.mean_waiting_time, batch_interval(wait), "mean waiting time")
    assert_inside(q.prob_wait, batch_interval(wait > 0), "P(wait) (Erlang C)")
    # the 90th percentile: a fraction 0.1 of customers take longer than it
    p90 = q.response_time_percentile(0.9)
    lo, hi = batch_interval(resp > p90)
    assert lo <= 0.1 <= hi, f"P(R > p90) interval [{lo:.4f}, {hi:.4f}] misses 0.1"


class _FirstN(ciw.dists.Distribution):
    """Arrivals that inject the N customers of a closed loop at the start, then none."""

    def __init__(self, n: int):
        self.left = n

    def sample(self, t=None, ind=None):
        if self.left > 0:
            self.left -= 1
            return 1e-9
        return math.inf


@pytest.mark.slow
@pytest.mark.parametrize("customers,think,service,c,seed", [(10, 2.0, 0.1, 2, 21), (6, 0.3, 0.1, 1, 22)])
def test_closed_loop_against_simulation(customers, think, service, c, seed):
    horizon, warmup = 6000.0, 100.0
    net = ciw.create_network(
        arrival_distributions=[_FirstN(customers), None],
        service_distributions=[ciw.dists.Exponential(rate=1.0 / think),
                               ciw.dists.Exponential(rate=1.0 / service)],
        number_of_servers=[math.inf, c], routing=[[0.0, 1.0], [1.0, 0.0]])
    ciw.seed(seed)
    sim = ciw.Simulation(net)
    sim.simulate_until_max_time(horizon)
    at_server = sorted((r for r in sim.get_all_records() if r.node == 2 and r.arrival_date > warmup),
                       key=lambda r: r.arrival_date)
    resp = np.array([r.waiting_time + r.service_time for r in at_server])
    # throughput: completions per batch of simulated time
    ends = np.array(sorted(r.exit_date for r in at_server))
    edges = np.linspace(warmup, ends[-1], BATCHES + 1)
    counts = np.histogram(ends, bins=edges)[0] / np.diff(edges)
    half = stats.t.ppf(0.5 + LEVEL / 2, BATCHES - 1) * counts.std(ddof=1) / math.sqrt(BATCHES)
    model = machine_repairman(customers, think, service, c)
    exact = mva([Station("cores", service, servers=c)], customers, think).at(customers)
    assert exact["throughput"] == pytest.approx(model.throughput, rel=1e-9)
    assert_inside(model.throughput, (counts.mean() - half, counts.mean() + half), "closed-loop throughput")
    assert_inside(model.response_time, batch_interval(resp), "closed-loop response time")
