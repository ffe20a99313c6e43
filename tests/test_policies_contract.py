"""The contract every registered scheduling policy keeps, checked the same way for each.

It iterates the registry (`sched.policies.POLICIES`, and `VARIANTS`), so a policy added with
`register` is checked here without touching this file: its entry is consistent, it runs an
application alone at no slowdown, each of its placements is one the engine accepts from a
policy it does not trust (no thread on two cores at once, no core type over its count), every
application finishes, a seed fixes its result, and `sched sim --policy NAME` reports it.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from corecast.sched.engine import SF_SOURCES, Options, simulate
from corecast.sched.machine import CoreType, Machine
from corecast.sched.metrics import evaluate
from corecast.sched.policies import POLICIES, VARIANTS, make_policy
from corecast.sched.policy import Policy
from corecast.sched.workload import parse_workload

REGISTERED = [*POLICIES, *VARIANTS]
M11 = Machine("1b1s", (CoreType("big", 1, 1.0, 20.0, 5.0), CoreType("small", 1, 1 / 3, 4.0, 1.0)))
M22 = Machine("2b2s", (CoreType("big", 2, 1.0, 20.0, 5.0), CoreType("small", 2, 0.4, 5.0, 1.0)))


def _mix():
    """Applications of 1 to 3 threads, static and dynamic, with serial parts and two phases."""
    apps = []
    for i in range(5):
        th = [1, 2, 3, 1, 2][i]
        apps.append({"name": f"a{i}", "threads": th, "priority": [0, -5, 5, 0, 0][i],
                     "sharing": "dynamic" if i == 4 else "static",
                     "phase": [{"work_s": 0.6 + 0.2 * i, "sf": 1.3 + 0.4 * i, "serial_fraction": 0.1 if th > 1 else 0,
                                "iterations": 2},
                               {"work_s": 0.3, "sf": 2.6 - 0.3 * i}]})
    return parse_workload({"rules": {"runs": 1}, "app": apps})


def test_there_is_a_registry_to_check():
    assert {"hsp", "rr", "adwrr", "eqp", "acfs", "energy", "cfs", "acfs-big"} <= set(REGISTERED)


@pytest.mark.parametrize("name", REGISTERED)
def test_registry_entry(name):
    cls = POLICIES.get(name) or VARIANTS[name]
    assert isinstance(cls, type) and issubclass(cls, Policy) and cls.name == name
    pol = make_policy(name)
    assert type(pol) is cls and pol.name == name
    assert pol.describe() and "\n" not in pol.describe()
    assert pol.period is None or (isinstance(pol.period, int) and pol.period >= 1)
    assert pol.period_s is None or pol.period_s > 0
    assert pol.default_sf_source in SF_SOURCES and isinstance(cls.label, str)


@pytest.mark.parametrize("name", REGISTERED)
def test_one_application_alone_has_slowdown_one(name):
    wl = parse_workload({"rules": {"runs": 3, "restart": True}, "app": [{"name": "a", "work_s": 7.0, "sf": 2.5}]})
    _, met = evaluate(wl, M11, name, Options(sf_source="true"))
    assert met.apps[0].runs == 3
    assert met.apps[0].slowdown == pytest.approx(1.0, abs=1e-9)
    assert met.unfairness == 1.0


@pytest.mark.parametrize("name", REGISTERED)
def test_every_placement_is_valid_and_every_application_finishes(name):
    pol = make_policy(name)
    pol.trusted = False                      # the engine checks every placement it returns
    wl = _mix()
    res = simulate(wl, M22, pol, Options(quantum=0.01))
    assert res.decisions > 10
    assert all(len(a.completion_times) >= 1 for a in res.apps)      # (with restarts, the faster run again)
    ct = res.completion_times
    assert np.all(np.isfinite(ct)) and np.all(ct > 0)
    # no application finishes sooner than alone on a big core with all its threads running
    alone = [sum(p.work_s for p in a.phases) / max(1, a.threads) for a in wl.apps]
    assert all(c >= t * (1 - 1e-9) for c, t in zip(ct, alone))


@pytest.mark.parametrize("name", REGISTERED)
def test_same_seed_same_result(name):
    a = simulate(_mix(), M22, make_policy(name), Options(seed=7)).completion_times
    b = simulate(_mix(), M22, make_policy(name), Options(seed=7)).completion_times
    assert a.tolist() == b.tolist()


@pytest.mark.parametrize("name", REGISTERED)
def test_sched_sim_reports_it(cli, name, tmp_path):
    r = cli("sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--policy", name, "--runs", "1", "--json")
    assert r.code == 0, r.err
    (res,) = r.json()["results"]
    assert res["policy"] == name and math.isfinite(res["asp"]) and res["apps"]
    r = cli("sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--policy", name, "--runs", "1")
    assert r.code == 0, r.err
    assert ((POLICIES.get(name) or VARIANTS[name]).label or name) in r.out
