"""Adding a meter or a scheduling policy is one unit and one registry line (docs/extending.md):
each toy below lives in a module of its own, outside corecast, holding only its unit (a MeterDef
with its recipe; a Policy subclass) and its registry line, and shows up end to end -- on the
blackboard and in `meters show`, in `sched sim` and `sched policies`."""
from __future__ import annotations

import importlib.util
import itertools
import json

import pytest

from corecast.meters.catalog import Env
from corecast.meters.daemon import Daemon, Options
from corecast.meters.tree import build

from conftest import board_name
from fakes import HZ, FakePMU, FakeProc, two_cpus

_MODULES = itertools.count()

TOY_METER = '''
from corecast.meters import layout as L
from corecast.meters.catalog import Input, Instance, MeterDef, per_scope, register


@per_scope
def toy_level(d, scope, ctx):
    """The first number on the `level` line of /proc/toy."""
    return Instance(d, scope, L.MEASURED, "measured: /proc/toy level",
                    num=[Input(("proc", str(ctx.env.proc / "toy")), "level", 1 << 0)])


register(MeterDef("toy_level", "widgets", L.GAUGE, ("node",), "a toy meter: /proc/toy's level",
                  "corecast_toy_level_widgets", recipe=toy_level))
'''

TOY_POLICY = '''
from corecast.sched.policies import register
from corecast.sched.policy import Policy, ranked


@register
class Youngest(Policy):
    """youngest: the big cores to the threads created last (a toy)."""

    name = "youngest"
    period = None

    def decide(self, v):
        return ranked(v, v.runnable[::-1])
'''


def load(tmp_path, source: str):
    """Import `source` as a module of its own (what a user's or a new in-tree module does)."""
    path = tmp_path / f"toy_{next(_MODULES)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def registries():
    """Leave the meter and policy registries as they were."""
    from corecast.meters import catalog
    from corecast.sched import policies
    meters, pols = dict(catalog.METERS), dict(policies.POLICIES)
    yield
    for reg, saved in ((catalog.METERS, meters), (policies.POLICIES, pols)):
        reg.clear()
        reg.update(saved)


def test_a_toy_meter_is_on_the_blackboard_and_in_meters_show(registries, tmp_path, cli):
    load(tmp_path, TOY_METER)
    proc = FakeProc(tmp_path / "proc")
    (tmp_path / "proc" / "toy").write_text("noise 7\nlevel 0\n")
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, status=lambda spec: None, cpu="skylake")
    name = board_name()
    d = Daemon(Options(interval_s=0.01, window_s=0.05, meters="toy_level,cpu_busy", blackboard=name),
               backend=FakePMU({}, {}), env=env, tree=build(two_cpus()))
    try:
        d.writer.running()
        for k, level in enumerate((5, 42)):
            (tmp_path / "proc" / "toy").write_text(f"noise 7\nlevel {level}\n")
            proc.write()
            d.step(round((1.0 + 0.01 * k) * 1e9))
        assert d.reader.read("toy_level").current == 42
        r = cli("meters", "show", "--blackboard", name)
        assert r.code == 0, r.err
        line = next(x for x in r.out.splitlines() if "toy_level" in x)
        assert "42" in line and "widgets" in line
        r = cli("meters", "show", "--blackboard", name, "--json")
        assert r.code == 0, r.err
        doc = json.dumps(r.json())
        assert '"toy_level"' in doc and "/proc/toy level" in doc
    finally:
        d.close()


def test_a_toy_policy_runs_in_sched_sim_and_is_listed(registries, tmp_path, cli):
    load(tmp_path, TOY_POLICY)
    r = cli("sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--policy", "youngest", "--runs", "1", "--json")
    assert r.code == 0, r.err
    (res,) = r.json()["results"]
    assert res["policy"] == "youngest" and res["apps"] and all(a["completion_time_s"] > 0 for a in res["apps"])
    r = cli("sched", "sim", "pmctrack-mix", "--machine", "2b-2s", "--runs", "1", "--json")     # every policy
    assert r.code == 0, r.err
    assert [x["policy"] for x in r.json()["results"]][-1] == "youngest"
    r = cli("sched", "policies")
    assert r.code == 0 and "youngest" in r.out and "the big cores to the threads created last" in r.out


def test_a_name_is_registered_once(registries, tmp_path):
    load(tmp_path, TOY_METER)
    with pytest.raises(ValueError, match="registered twice"):
        load(tmp_path, TOY_METER)
    load(tmp_path, TOY_POLICY)
    with pytest.raises(ValueError, match="registered twice"):
        load(tmp_path, TOY_POLICY)


def test_the_registries_are_left_as_they_were():
    """(the fixture above undid the toys)"""
    from corecast.meters import catalog
    from corecast.sched import policies
    assert "toy_level" not in catalog.METERS and "youngest" not in policies.POLICIES
