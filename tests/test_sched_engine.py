"""The AMP scheduling simulator: analytic cases, the policies' published rules on small cases,
and the native loop equal to the Python one."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from corecast.sched import engine
from corecast.sched.engine import Options, simulate
from corecast.sched.machine import CoreType, Machine, inline_machine, rates
from corecast.sched.metrics import evaluate
from corecast.sched.policies import HSP, make_policy
from corecast.sched.policy import Policy, fair_shares
from corecast.sched.workload import parse_workload


def _wl(apps, runs=1, restart=False):
    return parse_workload({"rules": {"runs": runs, "restart": restart}, "app": apps})


M11 = Machine("1b1s", (CoreType("big", 1, 1.0, 20.0, 5.0), CoreType("small", 1, 1 / 3, 4.0, 1.0)))
TRUE0 = Options(sf_source="true", migration_cost=0.0)


# (an application alone has slowdown one under every policy: tests/test_policies_contract.py)


def test_two_identical_applications_under_rr_are_fair():
    wl = _wl([{"name": "a", "work_s": 20.0, "sf": 2.0}, {"name": "b", "work_s": 20.0, "sf": 2.0}], runs=3, restart=True)
    _, met = evaluate(wl, M11, "rr", Options())
    assert abs(met.unfairness - 1.0) < 0.01
    # and RR does pass the big core back and forth (periodic migrations)
    assert met.migrations > 100


class Recorder(HSP):
    def setup(self, v):
        self.first = None

    def decide(self, v):
        S = super().decide(v)
        if self.first is None:
            self.first = S.copy()
        return S


def test_hsp_gives_the_big_core_to_the_higher_sf():
    wl = _wl([{"name": "low", "work_s": 10.0, "sf": 1.2}, {"name": "high", "work_s": 10.0, "sf": 3.0}])
    pol = Recorder()
    res = simulate(wl, M11, pol, TRUE0)
    assert pol.first[1].tolist() == [1.0, 0.0]      # 'high' on the big core
    assert pol.first[0].tolist() == [0.0, 1.0]
    assert res.apps[1].completion_time == pytest.approx(10.0)


def test_asp_unfairness_and_edp_by_hand():
    """HSP on 1 big (20 W busy, 5 W idle) + 1 small (speed 1/3; 4 W, 1 W): A (10 s of work, SF 3)
    runs on the big core and ends at 10 s; B (10 s, SF 1.2) does 10/1.2 s of work on the small
    core meanwhile, then the 1.667 s left on the big core: it ends at 11.667 s."""
    wl = _wl([{"name": "A", "work_s": 10.0, "sf": 3.0}, {"name": "B", "work_s": 10.0, "sf": 1.2}])
    res, met = evaluate(wl, M11, "hsp", TRUE0)
    ct_b = 10.0 + (10.0 - 10.0 / 1.2)
    assert [a.completion_time for a in met.apps] == pytest.approx([10.0, ct_b])
    # alone: each on the big core; all-small (2 small cores, one each): 30 s and 12 s
    assert [a.alone_time for a in met.apps] == pytest.approx([10.0, 10.0])
    assert [a.small_time for a in met.apps] == pytest.approx([30.0, 12.0])
    assert met.asp == pytest.approx((30.0 / 10.0 - 1) + (12.0 / ct_b - 1))
    assert met.unfairness == pytest.approx(ct_b / 10.0)
    assert met.stp == pytest.approx(1.0 + 10.0 / ct_b)
    assert met.antt == pytest.approx((1.0 + ct_b / 10.0) / 2)
    energy = 10.0 * (20.0 + 4.0) + (ct_b - 10.0) * (20.0 + 1.0)
    assert met.energy_j == pytest.approx(energy)
    assert met.edp == pytest.approx(energy * ct_b)


def test_migration_cost_is_cpu_time_lost_on_the_new_core():
    wl = _wl([{"name": "A", "work_s": 10.0, "sf": 3.0}, {"name": "B", "work_s": 10.0, "sf": 1.2}])
    res = simulate(wl, M11, make_policy("hsp"), Options(sf_source="true", migration_cost=0.01))
    # B moves once, to the big core where it does 1 unit of work per second
    assert res.apps[1].completion_time == pytest.approx(10.0 + (10.0 - 10.0 / 1.2) + 0.01)
    assert res.migrations == pytest.approx(1.0)


def test_static_parts_wait_at_the_barrier_dynamic_parts_share_a_pool():
    # two threads, 10 s of work; one on the big core, one on the small core (speed 1/2 at SF 2)
    class Pin(Policy):
        period = None

        def decide(self, v):
            S = np.zeros((v.threads, v.types))      # thread 0 always big, thread 1 always small
            S[v.runnable, v.local[v.runnable]] = 1.0
            return S
    for sharing, ct in (("static", 5.0 * 2.0), ("dynamic", 10.0 / 1.5)):
        wl = _wl([{"name": "p", "threads": 2, "sharing": sharing, "work_s": 10.0, "sf": 2.0}])
        res = simulate(wl, inline_machine(1, 1, 2.0), Pin(), TRUE0)
        assert res.apps[0].completion_time == pytest.approx(ct)


def test_serial_fraction_runs_one_thread():
    wl = _wl([{"name": "p", "threads": 4, "work_s": 8.0, "sf": 2.0, "serial_fraction": 0.5, "iterations": 2}])
    res, met = evaluate(wl, Machine("4b", (CoreType("big", 4, 1.0),)), "hsp", TRUE0)
    # 4 s serial on one core, 4 s of parallel work on four cores: 5 s
    assert res.apps[0].completion_time == pytest.approx(5.0)


def test_restart_rule_and_geometric_mean():
    wl = _wl([{"name": "short", "work_s": 1.0, "sf": 3.0}, {"name": "long", "work_s": 3.0, "sf": 3.0}],
             runs=3, restart=True)
    res = simulate(wl, Machine("2b", (CoreType("big", 2, 1.0),)), make_policy("hsp"), TRUE0)
    long_, short = res.apps[1], res.apps[0]
    assert len(long_.completion_times) == 3
    assert len(short.completion_times) == 9           # it restarts until the longest has run 3 times
    assert res.end_time == pytest.approx(9.0)
    assert long_.completion_time == pytest.approx(3.0)


def test_rates_interpolate_a_middle_type_by_speed():
    m = Machine("3", (CoreType("P", 1, 1.0), CoreType("E", 1, 0.6), CoreType("L", 1, 0.2)))
    r = rates(m, np.array([3.0, 1.0]))
    assert r[0].tolist() == pytest.approx([1.0, 1 / 2.0, 1 / 3.0])   # E halfway: slowdown 1 + 2 * 0.5
    assert r[1].tolist() == pytest.approx([1.0, 1.0, 1.0])


def test_fair_shares_water_filling():
    s = fair_shares(np.array([3121.0, 1024.0, 1024.0, 335.0]), 2.0)
    assert s[0] == 1.0 and s.sum() == pytest.approx(2.0)
    assert s[1] == pytest.approx(s[2]) and s[3] == pytest.approx(s[1] * 335 / 1024)


def test_same_seed_same_result_and_cfs_depends_on_it():
    wl = _wl([{"name": f"a{i}", "work_s": 5.0 + i, "sf": 1.2 + 0.4 * i} for i in range(5)])
    m = inline_machine(2, 2, 3.0)
    a = simulate(wl, m, make_policy("cfs"), Options(seed=3)).completion_times
    b = simulate(wl, m, make_policy("cfs"), Options(seed=3)).completion_times
    assert a.tolist() == b.tolist()
    others = {tuple(np.round(simulate(wl, m, make_policy("cfs"), Options(seed=s)).completion_times, 9)) for s in range(6)}
    assert len(others) > 1


def test_acfs_follows_priorities():
    apps = [{"name": n, "priority": p, "work_s": 20.0, "sf": 3.0} for n, p in (("hi", -5), ("mid", 0), ("lo", 5))]
    _, met = evaluate(_wl(apps), inline_machine(1, 2, 3.0), "acfs", Options())
    sd = [a.slowdown for a in met.apps]
    assert sd[0] < sd[1] < sd[2]


def test_a_users_policy_from_a_file(tmp_path, cli):
    pol = tmp_path / "mine.py"
    pol.write_text(
        "import numpy as np\n"
        "from corecast.sched import Policy, ranked\n"
        "class LowFirst(Policy):\n"
        "    name = 'lowfirst'\n"
        "    period = None\n"
        "    def decide(self, v):\n"
        "        return ranked(v, v.runnable[np.argsort(v.sf[v.runnable])])\n"
        "class Bad(Policy):\n"
        "    period = None\n"
        "    def decide(self, v):\n"
        "        return np.ones((v.threads, v.types))\n")
    wl = _wl([{"name": "low", "work_s": 10.0, "sf": 1.2}, {"name": "high", "work_s": 10.0, "sf": 3.0}])
    res = simulate(wl, M11, make_policy(f"{pol}:LowFirst"), TRUE0)
    assert res.apps[0].completion_time == pytest.approx(10.0)         # the low SF got the big core
    from corecast.errors import UserError
    with pytest.raises(UserError, match="cores at once|threads placed"):
        simulate(wl, M11, make_policy(f"{pol}:Bad"), TRUE0)


# ------------------------------------------------------------------------ native == Python
def _mix():
    apps = []
    for i in range(10):
        th = [1, 1, 2, 4][i % 4]
        apps.append({"name": f"a{i}", "threads": th, "priority": [0, 0, -5, 5][i % 4],
                     "sharing": "dynamic" if i % 5 == 0 else "static",
                     "phase": [{"work_s": 1 + 0.3 * i, "sf": 1.3 + 0.15 * (i % 9),
                                "serial_fraction": 0.1 if th > 1 else 0, "iterations": 3},
                               {"work_s": 1.0, "sf": 2.5 - 0.1 * (i % 7)}]})
    return parse_workload({"rules": {"runs": 2}, "app": apps})


@pytest.mark.slow
@pytest.mark.parametrize("source", ["true", "ipc-sampling"])
@pytest.mark.parametrize("policy", ["adwrr", "eqp", "acfs", "acfs-big"])
def test_native_loop_equals_the_python_loop(policy, source, monkeypatch):
    wl = _mix()
    m = Machine("2b6s", (CoreType("big", 2, 1.0, 20, 5), CoreType("small", 6, 0.4, 5, 1)))
    o = Options(quantum=0.005, sf_source=source)
    assert engine._native_loop(engine._Sim(wl, m, make_policy(policy), o, source)) is not None
    a = simulate(wl, m, make_policy(policy), o)
    monkeypatch.setattr(engine, "_native_loop", lambda sim: None)
    b = simulate(wl, m, make_policy(policy), o)
    assert a.decisions == b.decisions > 1000
    assert a.completion_times.tolist() == b.completion_times.tolist()
    assert a.energy_j == b.energy_j and a.migrations == b.migrations and a.samples == b.samples


def test_ipc_sampling_estimates_and_its_phase_error():
    # one thread whose SF changes from 3 to 1.5 half way: EQP's sampled SF follows, with noise
    wl = _wl([{"name": "a", "phase": [{"work_s": 5, "sf": 3.0}, {"work_s": 5, "sf": 1.5}]},
              {"name": "b", "work_s": 10, "sf": 2.0}])
    seen = []

    class Spy(make_policy("eqp").__class__):
        def decide(self, v):
            seen.append((v.time, v.sf[0]))
            return super().decide(v)
    simulate(wl, M11, Spy(), Options(sf_source="ipc-sampling", sf_noise=0.0))
    early = [s for t, s in seen if 1.0 < t < 4.0]
    late = [s for t, s in seen if t > 12.0]
    assert np.median(early) == pytest.approx(3.0, rel=1e-6)
    assert np.median(late) == pytest.approx(1.5, rel=1e-6)


_MINE = ("from corecast.sched import Policy, ranked\n"
         "class Mine(Policy):\n"
         "    name = {name!r}\n"
         "    period = None\n"
         "    def decide(self, v):\n"
         "        return ranked(v, v.runnable)\n")


def test_a_users_policy_file_runs_its_own_source_never_a_bytecode_cache(tmp_path):
    """Python's import machinery read `__pycache__/mine.cpython-*.pyc` beside the policy file
    when its recorded time and size matched the source: another user who may write that folder
    (the policy in /tmp) had root run their code instead of the file root read. The source is
    compiled itself, and no cache is written."""
    import importlib.util
    import marshal
    pol = tmp_path / "mine.py"
    pol.write_text(_MINE.format(name="mine"))
    st = pol.stat()
    cache = Path(importlib.util.cache_from_source(str(pol)))
    cache.parent.mkdir()
    evil = compile(_MINE.format(name="planted"), str(pol), "exec")
    cache.write_bytes(importlib.util.MAGIC_NUMBER + (0).to_bytes(4, "little")
                      + (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
                      + (st.st_size & 0xFFFFFFFF).to_bytes(4, "little") + marshal.dumps(evil))
    assert make_policy(f"{pol}:Mine").name == "mine"
    # the planted cache is what the import machinery itself would have run
    spec = importlib.util.spec_from_file_location("probe_planted", pol)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.Mine.name == "planted"
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "mine.py").write_text(_MINE.format(name="mine"))
    assert make_policy(f"{fresh / 'mine.py'}:Mine").name == "mine"
    assert sorted(p.name for p in fresh.iterdir()) == ["mine.py"]          # no __pycache__ made
    from corecast.errors import UserError
    from corecast.sched.policies import MAX_POLICY_BYTES
    big = tmp_path / "big.py"
    big.write_text(_MINE.format(name="big") + "#" * MAX_POLICY_BYTES)
    with pytest.raises(UserError, match="more than the 4,194,304 corecast reads from a policy file"):
        make_policy(f"{big}:Mine")


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file another user's takes root")
def test_a_policy_file_another_user_owns_or_anyone_may_write_is_not_run(tmp_path):
    from corecast.errors import UserError
    pol = tmp_path / "mine.py"
    pol.write_text(_MINE.format(name="mine") + "open(__file__ + '.ran', 'w').close()\n")
    os.chown(pol, 65534, 65534)
    with pytest.raises(UserError, match="owned by uid 65534, not by you or root"):
        make_policy(f"{pol}:Mine")
    os.chown(pol, 0, 0)
    os.chmod(pol, 0o666)
    with pytest.raises(UserError, match="writable by anyone"):
        make_policy(f"{pol}:Mine")
    assert not (tmp_path / "mine.py.ran").exists()                     # neither ran a line of it
    os.chmod(pol, 0o644)
    assert make_policy(f"{pol}:Mine").name == "mine"
    assert (tmp_path / "mine.py.ran").exists()
    (tmp_path / "d.py").mkdir()
    with pytest.raises(UserError, match="not a regular file"):
        make_policy(f"{tmp_path / 'd.py'}:Mine")
