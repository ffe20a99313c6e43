"""Prediction for a target machine (corecast.model.topo, `predict --target-machine`)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from corecast import dataset as D
from corecast.errors import UserError
from corecast.model import predictors
from corecast.model.topo import OnTarget, smt_prior
from corecast.target import parse_spec

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_priors_are_what_the_corpus_gives():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import learn_priors
    finally:
        sys.path.pop(0)
    shipped = (ROOT / "src" / "corecast" / "model" / "priors.toml").read_text()
    assert learn_priors.render(ROOT / "data" / "corpus") == shipped
    y, where = smt_prior()
    assert 0 < y < 1 and "concmap" in where


def _usl_fit():
    n = np.array([1, 2, 4, 8, 16.0])
    x = 100 * n / (1 + 0.01 * (n - 1))
    return predictors.fit("usl", D.Dataset(cores=n, metrics={"throughput": x}))


def test_effective_cores_smt_and_oversubscription():
    base = _usl_fit()
    t = OnTarget(base, parse_spec("sockets=2,cores=8,smt=2"), "compact", smt_yield=0.25)
    assert list(t.effective([4, 8, 12, 16, 17, 32, 40])) == [4, 8, 9, 10, 11, 20, 20]
    p = t.predict([8, 12, 32, 40])
    ref = base.predict([8, 9, 20, 20])
    assert np.allclose(p.value, ref.value) and list(p.cores) == [8, 12, 32, 40]
    assert any("more than the target's 32 logical CPUs" in w for w in p.warnings)
    assert any("each adds 0.25 of a core" in w for w in p.warnings)
    pos = p.params["target"]["positions"]
    assert [(q["sockets_used"], q["smt_shared"], q["oversubscribed"]) for q in pos] == [
        (1, False, False), (1, True, False), (2, True, False), (2, True, True)]


def test_spread_uses_physical_cores_of_both_sockets_first():
    t = OnTarget(_usl_fit(), parse_spec("sockets=2,cores=8,smt=2"), "spread", smt_yield=0.25,
                 measured_sockets=1)
    assert list(t.effective([16, 24])) == [16, 18]
    p = t.predict([16])
    assert any("span 2 sockets, the measurements 1" in w for w in p.warnings)


def test_bad_yield_and_fractional_threads():
    with pytest.raises(UserError, match="between 0 and 1"):
        OnTarget(_usl_fit(), parse_spec("cpus=8"), smt_yield=1.5)
    with pytest.raises(UserError, match="whole threads"):
        OnTarget(_usl_fit(), parse_spec("cpus=8")).predict([2.5])


def test_predict_json_interface(cli):
    r = cli("predict", ROOT / "data" / "usl" / "specsdm91.csv", "--cores", "16,64,200", "--target-machine",
            "sockets=2,cores=32,smt=2", "--placement", "compact", "--json")
    assert r.code == 0, r.err
    d = r.json()
    for k in ("method", "predictions", "models", "bottlenecks", "target_machine"):
        assert k in d
    assert d["target_machine"]["cpus"] == 128 and d["target_machine"]["placement"] == "compact"
    for p in d["predictions"]:
        assert {"cores", "time_s", "throughput", "low", "high", "sockets_used", "smt_shared"} <= set(p)
    assert [p["smt_shared"] for p in d["predictions"]] == [False, True, True]
    assert d["predictions"][2]["oversubscribed"] is True
    r = cli("predict", ROOT / "data" / "usl" / "specsdm91.csv", "--cores", "16", "--smt-yield", "0.3")
    assert r.code == 2 and "--smt-yield is for --target-machine" in r.err
    r = cli("predict", ROOT / "data" / "usl" / "specsdm91.csv", "--cores", "16", "--target-machine", "cores=x")
    assert r.code == 2 and "not a whole number" in r.err
