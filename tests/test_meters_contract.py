"""The contract every registered meter keeps, checked the same way for each.

It iterates the catalogue (`meters.catalog.METERS`), so a meter added with `register` is
checked here without touching this file: its definition is well formed (names the blackboard
and the Prometheus exposition can hold, a total only with its unit), its recipe gives one
instance per scope it exists at, each measured or derived with inputs the engine reads, or
unavailable with the reason and no input (never a 0 for something not counted), on a machine
that allows everything and on one that allows nothing; and every one reaches the blackboard
with the quality and source its recipe gave.
"""
from __future__ import annotations

import collections
import re

import pytest

from corecast.meters import layout as L
from corecast.meters.catalog import BY_NAME, GROUPS, METERS, Env, Input, MeterDef, plan
from corecast.meters.daemon import Daemon, Options
from corecast.meters.tree import Scope, build

from conftest import board_name
from fakes import HZ, FakePMU, FakeProc, two_cpus

LEVELS = ("node", "socket", "core", "process", "thread")
INPUT_KINDS = ("proc", "perf", "thread", "external")
QUALITY_PREFIX = {L.MEASURED: "measured: ", L.DERIVED: "derived: ", L.UNAVAILABLE: "unavailable: "}


def _tree():
    """Two CPUs, and a watched process with two thread slots (the process meters' scopes)."""
    tree = build(two_cpus())
    proc = Scope(len(tree.scopes), "pid4242", "process", 0)
    tree.scopes.append(proc)
    for k in range(2):
        tree.scopes.append(Scope(len(tree.scopes), f"pid4242.thread{k}", "thread", proc.index, slot=k))
    tree.pid = 4242
    return tree


def _env(tmp_path, allowed: bool) -> Env:
    FakeProc(tmp_path / "proc", psi=allowed, schedstat=allowed)
    return Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, cpu="skylake",
               status=(lambda spec: None) if allowed else (lambda spec: "denied (perf_event_paranoid=2)"),
               probe_reason=None if allowed else "no memory profile", pmus=tmp_path / "pmus")


def test_the_catalogue_is_the_registry():
    assert list(BY_NAME) == list(METERS) and len(METERS) >= 20
    assert len({d.prom for d in METERS.values()}) == len(METERS)


@pytest.mark.parametrize("name", list(METERS))
def test_definition(name):
    d = METERS[name]
    assert isinstance(d, MeterDef) and d.name == name and BY_NAME[name] is d
    assert re.fullmatch(r"[a-z][a-z0-9_]*", name) and len(name) < L.NAME_MAX
    assert d.unit and d.help and d.kind in (L.GAUGE, L.RATE, L.RATIO) and d.group in GROUPS
    assert d.levels and set(d.levels) <= set(LEVELS)
    assert re.fullmatch(r"corecast_[a-z0-9_]+", d.prom)
    assert bool(d.total_unit) == bool(d.total_prom)
    assert not d.total_prom or re.fullmatch(r"corecast_[a-z0-9_]+_total", d.total_prom)
    assert callable(d.recipe)


def check_instances(d: MeterDef, tree, env, insts) -> None:
    scopes = [s for s in tree.scopes if s.kind in d.levels]
    assert [i.scope for i in insts] == scopes and all(i.meter is d for i in insts)
    for i in insts:
        assert i.quality in QUALITY_PREFIX and i.source.startswith(QUALITY_PREFIX[i.quality]), i.source
        inputs = i.num + i.den
        if not i.available:
            assert inputs == [] and len(i.source) > len("unavailable: ") + 5
            continue
        assert i.num, f"{d.name} at {i.scope.name}: available with nothing to read"
        for inp in inputs:
            assert isinstance(inp, Input) and inp.file[0] in INPUT_KINDS, inp
            if inp.file[0] == "perf":
                assert inp.file[1] in env.specs and inp.file[2] in i.scope.cpus, inp
            if inp.file[0] == "proc":
                assert str(inp.file[1]).startswith((str(env.proc), str(env.sys))), inp
        if i.has_total:
            assert d.total_prom and i.total_scale > 0


@pytest.mark.parametrize("allowed", [True, False], ids=["allowed", "denied"])
@pytest.mark.parametrize("name", list(METERS))
def test_recipe(name, allowed, tmp_path):
    d = METERS[name]
    tree, env = _tree(), _env(tmp_path, allowed)
    insts = plan(tree, [d], env)
    check_instances(d, tree, env, insts)
    if not allowed and d.group in ("hardware", "probe"):
        assert not any(i.available for i in insts)        # no counters, no probe: no value, and why


def test_every_meter_reaches_the_blackboard(tmp_path):
    """The whole catalogue (but the process meters, which need a live process) in one daemon on
    a fake /proc and the simulated PMU: each instance is on the board as its recipe made it."""
    proc = FakeProc(tmp_path / "proc")
    env = Env(proc=tmp_path / "proc", sys=tmp_path / "sys", user_hz=HZ, cpu="skylake", status=lambda spec: None,
              probe_reason="no memory profile in this test")
    o = Options(interval_s=0.01, window_s=0.05, meters="all", blackboard=board_name())
    pmu = FakePMU(collections.defaultdict(lambda: 0.01, cycles=3.0, instr=2.0), {})     # every event counts
    d = Daemon(o, backend=pmu, env=env, tree=build(two_cpus()))
    try:
        d.writer.running()
        for k in range(3):
            proc.jiffies[0][0] += 1
            proc.write()
            pmu._advance_to(1.0 + 0.01 * k)
            d.step(round((1.0 + 0.01 * k) * 1e9))
        on_board = {(m.name, m.scope): m for m, _ in d.reader.snapshot().meters}
        wanted = [m for m in METERS.values() if m.group != "process"]
        assert {n for n, _ in on_board} == {m.name for m in wanted}
        for inst in d.instances:
            m = on_board[(inst.meter.name, inst.scope.name)]
            assert (m.quality, m.source, m.unit) == (L.QUALITIES[inst.quality], inst.source, inst.meter.unit)
    finally:
        d.close()


def test_the_check_catches_a_broken_recipe(tmp_path):
    from corecast.meters.catalog import Instance
    tree, env = _tree(), _env(tmp_path, True)
    cases = {
        "nothing to read": lambda d, scopes, ctx: [Instance(d, s, L.MEASURED, "measured: air") for s in scopes],
        "a scope missed": lambda d, scopes, ctx: [Instance(d, s, L.UNAVAILABLE, "unavailable: no reason at all")
                                                  for s in scopes[1:]],
        "inputs while unavailable": lambda d, scopes, ctx: [Instance(d, s, L.UNAVAILABLE, "unavailable: not here",
                                                                 num=[Input(("proc", str(env.proc / "stat")))])
                                                        for s in scopes],
    }
    for why, recipe in cases.items():
        d = MeterDef("broken", "1/s", L.RATE, ("node", "core"), "a broken meter", "corecast_broken", recipe=recipe)
        with pytest.raises(AssertionError):
            check_instances(d, tree, env, plan(tree, [d], env))
