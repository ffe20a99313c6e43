"""The contract every registered method keeps, checked the same way for each.

It iterates `predictors.REGISTRY`, so a method added to the registry is checked here without
touching this file: it fits the fake datasets it applies to, predicts at the core counts asked
for in the dataset's input metric, orders its bounds, returns its warnings as a list of text,
and its JSON document survives a round trip.
"""
import json
import math

import numpy as np
import pytest

import fakes
from corecast.model import methods, predictors
from corecast.model.base import Fitted, Prediction
from corecast.model.calibration import CalibratedFit
from corecast.model.series import input_metric
from corecast.report.prediction import prediction_doc

TARGETS = [16.0, 24.0, 48.0]
CASES = [(name, data) for name in predictors.REGISTRY for data in fakes.MODEL_DATASETS
         if (not predictors.REGISTRY[name].needs_stalls or fakes.with_stalls(fakes.MODEL_DATASETS[data]()))
         and (not predictors.REGISTRY[name].needs_demands or fakes.with_demands(fakes.MODEL_DATASETS[data]()))]


def test_every_method_has_a_case():
    assert {name for name, _ in CASES} == set(predictors.REGISTRY)
    assert set(predictors.METHODS) | set(predictors.MEMBERS) == set(predictors.REGISTRY)


def test_the_lists_of_method_names_come_from_the_registry():
    """auto's default members (learn) and the corpus' baselines (scorecard) are the registry's
    methods that run on any data, by rank; the registry refuses a rank where it means nothing."""
    from corecast.model import laws, learn, scorecard
    anydata = {n for n, m in methods.REGISTRY.items() if not (m.needs_stalls or m.needs_demands)}
    assert set(learn.MEMBERS) == anydata and learn.MEMBERS == methods.RANKED
    assert [methods.REGISTRY[n].rank for n in methods.RANKED] == sorted(m.rank for m in methods.REGISTRY.values()
                                                                        if m.rank is not None)
    assert scorecard.BASELINES == tuple(n for n in methods.RANKED if n in predictors.METHODS)
    with pytest.raises(ValueError, match="rank"):
        methods._registry(methods.Method("x", laws.fit_usl, "member"))
    with pytest.raises(ValueError, match="rank"):
        methods._registry(methods.Method("x", laws.fit_usl, "method", needs_stalls=True, rank=9))
    with pytest.raises(ValueError, match="rank"):
        methods._registry(methods.Method("x", laws.fit_usl, "method", needs_demands=True, rank=9))
    with pytest.raises(ValueError, match="rank 0 taken"):
        methods._registry(methods.Method("x", laws.fit_usl, "member", rank=0),
                          methods.Method("y", laws.fit_amdahl, "member", rank=0))


def _finite_or_none(a):
    return a is None or np.all(np.isfinite(a))


@pytest.mark.parametrize("calibrate", [False, True], ids=["own-band", "calibrated"])
@pytest.mark.parametrize("name,data", CASES)
def test_method_contract(name, data, calibrate):
    ds = fakes.MODEL_DATASETS[data]()
    f = predictors.fit(name, ds, calibrate=calibrate)
    if calibrate and name != "auto":
        assert isinstance(f, CalibratedFit)
    check_contract(name, ds, f, data)


def test_auto_on_two_core_counts_keeps_the_contract():
    ds = fakes.two_points()
    check_contract("auto", ds, predictors.fit("auto", ds), "two_points")


def check_contract(name, ds, f, data):
    assert isinstance(f, Fitted)
    assert f.method == name
    assert isinstance(f.warnings, list) and all(isinstance(w, str) for w in f.warnings)

    p = f.predict(TARGETS, 0.8)
    assert isinstance(p, Prediction)
    assert p.metric == input_metric(ds)
    assert p.cores.tolist() == TARGETS
    assert p.value.shape == (len(TARGETS),) and np.all(np.isfinite(p.value)) and np.all(p.value > 0)
    assert p.level == 0.8
    assert p.low is not None and p.high is not None, f"{name} gives no band"
    assert p.low.shape == p.high.shape == p.value.shape
    rtol = 1e-12
    assert np.all(p.low <= p.value * (1 + rtol)) and np.all(p.value <= p.high * (1 + rtol)), (p.low, p.value, p.high)
    assert isinstance(p.warnings, list) and all(isinstance(w, str) for w in p.warnings)
    # a wider level gives a band at least as wide
    q = f.predict(TARGETS, 0.95)
    assert np.all(q.low <= p.low * (1 + rtol)) and np.all(q.high >= p.high * (1 - rtol))

    doc = prediction_doc(f"fake:{data}", name, f, TARGETS, 0.8)
    back = json.loads(json.dumps(doc, allow_nan=False))
    assert back == doc            # plain JSON data: nothing lost, no tuple or NaN on the way
    assert back["method"] == name and back["metric"] == p.metric
    assert [r["cores"] for r in back["predictions"]] == [16, 24, 48]
    col = p.metric
    for r, v in zip(back["predictions"], p.value):
        assert math.isclose(r[col], float(v), rel_tol=1e-12)
    assert isinstance(back["warnings"], list)
    models = f.models(max(TARGETS))
    assert isinstance(models, dict) and models
    assert json.loads(json.dumps(models, allow_nan=False)) == back["models"]
    assert isinstance(f.bottlenecks(TARGETS), list)


@pytest.mark.parametrize("name", list(predictors.REGISTRY))
def test_options_are_declared_and_checked(name):
    m = predictors.REGISTRY[name]
    assert m.options <= methods.OPTIONS
    ds = fakes.amdahl_time()
    with pytest.raises(TypeError, match="unknown fit option"):
        predictors.fit(name, ds, no_such_option=1)
    if "size_ratio" in m.options:
        with pytest.raises(Exception, match="--size-ratio must be a number > 0"):
            predictors.fit(name, fakes.lock_stalls() if m.needs_stalls else fakes.lock_demands() if m.needs_demands
                           else ds, size_ratio=-1.0)


def test_auto_refuses_a_bad_ratio_whatever_its_members_declare(monkeypatch):
    """docs/extending.md's member may declare no --size-ratio: auto still refuses a bad one
    (it fitted that member alone and predicted with the mistake unseen)."""
    from corecast.model.laws import fit_usl

    def fit_toy(ds, level: float = 0.8):
        return fit_usl(ds)

    monkeypatch.setitem(methods.REGISTRY, "toy", methods.Method("toy", fit_toy, "member", rank=99))
    monkeypatch.setattr(methods, "MEMBERS", methods.MEMBERS + ("toy",))
    for opt, flag in (("size_ratio", "--size-ratio"), ("freq_ratio", "--freq-ratio")):
        with pytest.raises(Exception, match=f"{flag} must be a number > 0"):
            predictors.fit("auto", fakes.amdahl_time(), **{opt: -1.0})
    assert predictors.fit("auto", fakes.amdahl_time(), size_ratio=2.0).predict(TARGETS).value.size == 3


def test_a_fit_function_that_swallows_options_is_refused():
    def fit_loose(ds, size=None, **_):
        raise AssertionError("never called")

    with pytest.raises(TypeError, match="declare every option by name"):
        methods.declared(fit_loose)
    assert methods.declared(lambda ds, size=None, freq_ratio=1.0: None) == ("size", "freq_ratio")


def test_applicable_follows_the_registry():
    assert methods.applicable(fakes.amdahl_time()) == [n for n in methods.BASE
                                                       if not (methods.REGISTRY[n].needs_stalls
                                                               or methods.REGISTRY[n].needs_demands)]
    assert methods.applicable(fakes.lock_stalls()) == [n for n in methods.BASE
                                                       if not methods.REGISTRY[n].needs_demands]
    # a campaign with the shim's demands (and a stall column): every method
    assert methods.applicable(fakes.lock_demands()) == list(methods.BASE)
