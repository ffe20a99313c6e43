"""Queueing formulas against closed forms and independent exact methods."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from corecast.errors import UserError
from corecast.model import queueing as qm
from corecast.model.queueing import (QueueingError, Station, TargetUnreachable, erlang_b, erlang_c,
                                     log_erlang_c, machine_repairman, max_arrival_rate, mm1, mmc, mva)


# ------------------------------------------------------------------ independent references
def erlang_c_exact(c: int, a: Fraction) -> Fraction:
    """Erlang C by the textbook sum, in exact rational arithmetic."""
    head = sum(a ** k / math.factorial(k) for k in range(c))
    tail = a ** c / math.factorial(c) * Fraction(c) / (c - a)
    return tail / (head + tail)


def erlang_c_recursive(c: int, a: float) -> float:
    """Erlang C through the Erlang B recursion (a different, also stable, algorithm)."""
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    return c * b / (c - a * (1.0 - b))


def buzen_throughput(demands: list[float], think: float, n: int) -> float:
    """X(n) of a closed network of single-server queues plus a delay, by Buzen's convolution."""
    g = np.zeros(n + 1)
    g[0] = 1.0
    if think > 0:  # delay centre: G_delay(k) = Z^k / k!
        g = np.array([think ** k / math.factorial(k) for k in range(n + 1)])
    for d in demands:
        for k in range(1, n + 1):
            g[k] = g[k] + d * g[k - 1]
    return g[n - 1] / g[n]


# ------------------------------------------------------------------ M/M/1
@pytest.mark.parametrize("lam,mu", [(0.5, 1.0), (8.0, 10.0), (99.0, 100.0), (0.0, 3.0)])
def test_mm1_closed_forms(lam, mu):
    q = mm1(lam, mu)
    rho = lam / mu
    assert q.utilization == pytest.approx(rho)
    assert q.mean_response_time == pytest.approx(1.0 / (mu - lam))
    assert q.mean_waiting_time == pytest.approx(rho / (mu - lam))
    assert q.mean_in_system == pytest.approx(rho / (1.0 - rho))
    assert q.mean_queue_length == pytest.approx(rho ** 2 / (1.0 - rho), rel=1e-12, abs=1e-15)
    assert q.prob_wait == pytest.approx(rho)
    # Little's law, both at the queue and in the whole system
    assert q.mean_in_system == pytest.approx(lam * q.mean_response_time)
    assert q.mean_queue_length == pytest.approx(lam * q.mean_waiting_time, rel=1e-12, abs=1e-15)


def test_mm1_response_time_is_exponential():
    q = mm1(7.0, 10.0)
    for t in (0.0, 0.1, 0.5, 2.0):
        assert q.response_time_survival(t) == pytest.approx(math.exp(-3.0 * t), rel=1e-12)
    assert q.response_time_percentile(0.99) == pytest.approx(math.log(100.0) / 3.0, rel=1e-12)
    assert q.response_time_percentile(0.5) == pytest.approx(math.log(2.0) / 3.0, rel=1e-12)
    # waiting time: atom 1 - rho at 0, then Exp(mu - lambda) with weight rho
    assert q.waiting_time_survival(0.2) == pytest.approx(0.7 * math.exp(-0.6), rel=1e-12)
    assert q.waiting_time_percentile(0.25) == 0.0     # 30% of arrivals do not wait
    assert q.waiting_time_percentile(0.99) == pytest.approx(math.log(0.7 / 0.01) / 3.0, rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(mu=st.floats(1e-3, 1e6), rho=st.floats(0.0, 0.999))
def test_mmc_with_one_server_is_mm1(mu, rho):
    a, b = mm1(rho * mu, mu), mmc(rho * mu, mu, 1)
    for f in ("utilization", "prob_wait", "mean_waiting_time", "mean_response_time",
              "mean_queue_length", "mean_in_system"):
        assert getattr(b, f) == pytest.approx(getattr(a, f), rel=1e-12, abs=1e-300), f
    t = 1.3 / mu
    assert b.response_time_survival(t) == pytest.approx(a.response_time_survival(t), rel=1e-9)
    assert b.response_time_percentile(0.9) == pytest.approx(a.response_time_percentile(0.9), rel=1e-9)


# ------------------------------------------------------------------ Erlang C
@pytest.mark.parametrize("c", [1, 2, 3, 5, 8, 12])
@pytest.mark.parametrize("util", [Fraction(1, 10), Fraction(1, 2), Fraction(9, 10), Fraction(99, 100)])
def test_erlang_c_matches_the_direct_sum(c, util):
    a = util * c
    assert erlang_c(c, float(a)) == pytest.approx(float(erlang_c_exact(c, a)), rel=1e-12)


def test_erlang_c_known_values():
    assert erlang_c(2, 1.0) == pytest.approx(1.0 / 3.0, rel=1e-14)   # (1/2 * 2) / (1 + 1 + 1)
    assert erlang_c(1, 0.3) == pytest.approx(0.3, rel=1e-14)          # M/M/1: P(wait) = rho
    assert erlang_c(7, 0.0) == 0.0
    assert log_erlang_c(7, 0.0) == -math.inf


@pytest.mark.parametrize("c,util", [(100, 0.95), (1000, 0.999), (20000, 0.9995), (250_000, 0.999)])
def test_erlang_c_large_systems_stay_finite_and_agree_with_the_b_recursion(c, util):
    a = c * util
    if c >= 1000:
        with pytest.raises(OverflowError):
            float(a) ** c                             # the textbook form overflows
    got = erlang_c(c, a)
    assert 0.0 < got < 1.0
    assert got == pytest.approx(erlang_c_recursive(c, a), rel=1e-8)


def test_erlang_c_large_c_paths_agree(monkeypatch):
    c, a = 5000, 4990.0
    direct = log_erlang_c(c, a)
    monkeypatch.setattr(qm, "_DIRECT_SUM_LIMIT", 10)   # force the incomplete-gamma path
    assert log_erlang_c(c, a) == pytest.approx(direct, rel=1e-10)


@settings(max_examples=200, deadline=None)
@given(c=st.integers(1, 300), util=st.floats(0.001, 0.999))
def test_erlang_c_properties(c, util):
    a = c * util
    pc = erlang_c(c, a)
    pb = erlang_b(c, a)
    assert 0.0 <= pb <= pc <= 1.0
    # C = B / (1 - rho (1 - B))
    assert pc == pytest.approx(pb / (1.0 - util * (1.0 - pb)), rel=1e-9)
    # more servers at the same offered load wait less
    assert erlang_c(c + 1, a) <= pc * (1 + 1e-12)


# ------------------------------------------------------------------ M/M/c
def test_mmc_littles_law_and_two_server_closed_form():
    lam, mu = 1.5, 1.0
    q = mmc(lam, mu, 2)
    # M/M/2: Wq = rho^2 / (mu (1 - rho^2)) with rho = lambda / (2 mu)
    rho = lam / 2.0
    assert q.mean_waiting_time == pytest.approx(rho ** 2 / (mu * (1 - rho ** 2)), rel=1e-12)
    assert q.mean_queue_length == pytest.approx(lam * q.mean_waiting_time, rel=1e-12)
    assert q.mean_in_system == pytest.approx(q.mean_queue_length + lam / mu, rel=1e-12)
    assert q.utilization == pytest.approx(0.75)


@pytest.mark.parametrize("c,lam", [(4, 3.2), (3, 2.0), (16, 15.0)])
def test_mmc_response_time_percentile_inverts_the_survival(c, lam):
    q = mmc(lam, 1.0, c)
    for p in (0.5, 0.9, 0.99, 0.999):
        t = q.response_time_percentile(p)
        assert q.response_time_survival(t) == pytest.approx(1 - p, rel=1e-9)
    # the survival starts at 1 and integrates to the mean
    assert q.response_time_survival(0.0) == pytest.approx(1.0)
    ts = np.linspace(0, 60 * q.mean_response_time, 200001)
    surv = np.array([q.response_time_survival(t) for t in ts[::100]])
    mean = np.trapezoid(surv, ts[::100]) if hasattr(np, "trapezoid") else np.trapz(surv, ts[::100])
    assert mean == pytest.approx(q.mean_response_time, rel=1e-3)


def test_mmc_survival_is_continuous_where_the_two_rates_meet():
    # c mu - lambda == mu: the hypoexponential formula's removable singularity
    c, mu = 3, 2.0
    q = mmc((c - 1) * mu, mu, c)
    qa = mmc((c - 1) * mu * (1 - 1e-7), mu, c)
    for t in (0.1, 1.0, 5.0):
        assert q.response_time_survival(t) == pytest.approx(qa.response_time_survival(t), rel=1e-5)


def test_mmc_heavy_load_many_servers_no_overflow():
    q = mmc(9999.0, 1.0, 10000)
    assert math.isfinite(q.mean_response_time) and q.mean_response_time > 1.0
    assert q.response_time_percentile(0.999) > q.mean_response_time


# ------------------------------------------------------------------ capacity at a target
def test_max_arrival_rate_mm1_closed_form():
    mu, r = 1000.0, 0.01
    cap = max_arrival_rate(mu, 1, r)
    assert cap.arrival_rate == pytest.approx(mu - 1.0 / r)
    assert cap.queue.mean_response_time == pytest.approx(r)
    p = max_arrival_rate(mu, 1, r, percentile=0.99)
    assert p.arrival_rate == pytest.approx(mu - math.log(100.0) / r)
    assert p.queue.response_time_percentile(0.99) == pytest.approx(r)
    assert p.statistic == "p99"


@pytest.mark.parametrize("c", [2, 4, 32])
@pytest.mark.parametrize("percentile", [None, 0.95, 0.999])
def test_max_arrival_rate_mmc_meets_the_target_exactly(c, percentile):
    mu = 50_000.0
    r = 10.0 / mu
    cap = max_arrival_rate(mu, c, r, percentile)
    stat = (cap.queue.mean_response_time if percentile is None
            else cap.queue.response_time_percentile(percentile))
    assert stat == pytest.approx(r, rel=1e-9)
    assert cap.arrival_rate < c * mu
    # a little more load misses the target
    q2 = mmc(cap.arrival_rate * (1 + 1e-6), mu, c)
    stat2 = q2.mean_response_time if percentile is None else q2.response_time_percentile(percentile)
    assert stat2 > r


def test_shared_queue_beats_split_queues_and_per_core_split_is_c_times_mm1():
    mu, c, r = 100.0, 4, 0.03
    split = max_arrival_rate(mu, 1, r, queues=c)
    shared = max_arrival_rate(mu, c, r)
    assert split.arrival_rate == pytest.approx(c * max_arrival_rate(mu, 1, r).arrival_rate)
    assert shared.arrival_rate > split.arrival_rate
    assert split.queues == c and shared.queues == 1


def test_unreachable_target_is_a_clear_error():
    with pytest.raises(TargetUnreachable, match="service time alone"):
        max_arrival_rate(1000.0, 4, 0.0009)                 # mean service time is 1 ms
    with pytest.raises(TargetUnreachable, match="p99"):
        max_arrival_rate(1000.0, 1, 0.004, percentile=0.99)  # p99 of Exp(1000) is 4.6 ms


# ------------------------------------------------------------------ validation
@pytest.mark.parametrize("call,match", [
    (lambda: mm1(1.0, 1.0), "utilisation"),
    (lambda: mm1(-1.0, 1.0), "arrival rate"),
    (lambda: mmc(1.0, 0.0, 2), "service rate"),
    (lambda: mmc(1.0, 1.0, 0), "servers"),
    (lambda: mmc(1.0, 1.0, 2.5), "servers"),
    (lambda: mmc(float("nan"), 1.0, 2), "arrival rate"),
    (lambda: mmc(5.0, 1.0, 4), "capacity"),
    (lambda: erlang_c(3, 3.0), "unstable"),
    (lambda: mm1(0.5, 1.0).response_time_percentile(1.0), "percentile"),
    (lambda: max_arrival_rate(1.0, 1, -1.0), "target"),
    (lambda: machine_repairman(0, 1.0, 1.0), "customers"),
    (lambda: machine_repairman(3, -1.0, 1.0), "think time"),
    (lambda: mva([], 3), "at least one station"),
    (lambda: Station("disk", -0.1), "demand"),
    (lambda: Station("disk", 0.1, kind="fifo"), "kind"),
])
def test_invalid_inputs_raise_clear_errors(call, match):
    with pytest.raises(QueueingError, match=match) as info:
        call()
    assert isinstance(info.value, ValueError) and isinstance(info.value, UserError)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ machine repairman
def repairman_single_server_textbook(n: int, z: float, s: float) -> tuple[float, float]:
    """M/M/1//N: p0 = 1 / sum_k N!/(N-k)! (S/Z)^k; X = (1 - p0)/S; R = N/X - Z."""
    r = Fraction(s) / Fraction(z)
    terms = [Fraction(math.factorial(n), math.factorial(n - k)) * r ** k for k in range(n + 1)]
    p0 = 1 / sum(terms)
    x = (1 - p0) / Fraction(s)
    return float(x), float(n / x - Fraction(z))


@pytest.mark.parametrize("n", [1, 2, 7, 30, 120])
def test_repairman_single_server_against_textbook(n):
    z, s = 1.5, 0.1
    m = machine_repairman(n, z, s, 1)
    x, r = repairman_single_server_textbook(n, z, s)
    assert m.throughput == pytest.approx(x, rel=1e-12)
    assert m.response_time == pytest.approx(r, rel=1e-10)
    assert n == pytest.approx(m.throughput * (m.response_time + z))     # Little's law, whole loop
    assert m.utilization == pytest.approx(m.throughput * s)


def test_repairman_limits():
    # enough servers for everyone: no queueing, X = N / (Z + S)
    m = machine_repairman(5, 2.0, 0.5, servers=8)
    assert m.throughput == pytest.approx(5 / 2.5)
    assert m.response_time == pytest.approx(0.5)
    assert m.mean_queue_length == pytest.approx(0.0, abs=1e-12)
    # saturation: X -> c / S
    assert machine_repairman(2000, 1.0, 0.01, 4).throughput == pytest.approx(400.0, rel=1e-9)
    # no think time: all customers at the servers
    z0 = machine_repairman(6, 0.0, 0.2, 4)
    assert z0.throughput == pytest.approx(4 / 0.2)
    assert z0.response_time == pytest.approx(6 / 20.0)
    assert z0.probabilities.sum() == pytest.approx(1.0)


# ------------------------------------------------------------------ MVA
@pytest.mark.parametrize("c", [1, 2, 4, 8])
@pytest.mark.parametrize("z", [0.0, 0.05, 2.0])
def test_mva_equals_machine_repairman(c, z):
    s = 0.1
    res = mva([Station("cores", s, servers=c)], 120, think_time=z)
    for n in (1, 2, 3, c, c + 1, 10, 40, 120):
        m = machine_repairman(n, z, s, c)
        assert res.throughput[n - 1] == pytest.approx(m.throughput, rel=1e-7), n
        assert res.response_time[n - 1] == pytest.approx(m.response_time, rel=1e-6), n
        assert res.queue_length[n - 1, 0] == pytest.approx(m.mean_in_system, rel=1e-6), n
        assert res.utilization[n - 1, 0] == pytest.approx(m.utilization, rel=1e-7), n


def test_mva_against_buzen_convolution():
    demands, z = [0.05, 0.03, 0.08], 0.4
    res = mva([Station(f"q{i}", d) for i, d in enumerate(demands)], 25, think_time=z)
    for n in (1, 2, 5, 12, 25):
        assert res.throughput[n - 1] == pytest.approx(buzen_throughput(demands, z, n), rel=1e-10)
    # asymptotic bounds: X(N) <= min(N / (D + Z), 1 / D_max), and the bottleneck dominates
    d, dmax = sum(demands), max(demands)
    assert np.all(res.throughput <= np.minimum(res.population / (d + z), 1 / dmax) * (1 + 1e-12))
    assert res.throughput[-1] == pytest.approx(1 / dmax, rel=0.02)
    assert res.utilization[-1, 2] == pytest.approx(res.throughput[-1] * 0.08)


def test_mva_delay_station_and_result_dict():
    res = mva([Station("net", 0.002, kind="delay"), Station("cpu", 0.01)], 5)
    at = res.at(5)
    assert at["stations"][0]["residence_time"] == pytest.approx(0.002)
    assert at["response_time"] == pytest.approx(sum(s["residence_time"] for s in at["stations"]))
    assert at["throughput"] * at["response_time"] == pytest.approx(5)
    # equal to a single queue with think time 0.002 (delay centres are interchangeable with Z)
    ref = machine_repairman(5, 0.002, 0.01, 1)
    assert at["throughput"] == pytest.approx(ref.throughput, rel=1e-12)
    with pytest.raises(QueueingError, match="solved up to 5"):
        res.at(6)
