"""The paper's arithmetic (Hart, Frachtenberg and Berezecki, 2012), from data/hart2012/.

The per-component rows of the paper's Tables 2 and 4 could not be sourced (see
data/hart2012/README.md), so this checks everything from the published CPI totals onward:
transaction time = CPI x 9,200 / frequency, the 13% / 39% lock penalties, the predicted
throughput and its error against the measured 51,000 / 128,000 / 174,000 / 232,000 RPS.
"""
from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from corecast.model.cpi import cpi_stack, estimate_cores, lock_penalty, transaction_time


@pytest.fixture(scope="module")
def paper():
    with open(Path(__file__).resolve().parent.parent / "data" / "hart2012" / "paper.toml", "rb") as f:
        doc = tomllib.load(f)
    machines = {m["name"]: m for m in doc["machine"]}
    return doc, machines


def predictions(paper, lock_model="wait-share"):
    doc, machines = paper
    w = doc["workload"]
    out = []
    for m in doc["measured"]:
        mach = machines[m["machine"]]
        e = estimate_cores(mach["cpi"], w["instructions_per_transaction"], mach["frequency_hz"],
                           [m["cores"]], w["critical_share"], lock_model)[0]
        out.append((m["machine"], m["cores"], e, m["throughput"]))
    return out


def test_published_cpis_and_transaction_times(paper):
    doc, machines = paper
    # The totals, to the paper's precision (a stack with only the baseline row reproduces them;
    # the component rows are not available).
    assert cpi_stack(machines["atom-n540"]["cpi"], {}, {}).cpi == pytest.approx(3.905, abs=5e-4)
    assert cpi_stack(machines["penryn-l5420"]["cpi"], {}, {}).cpi == pytest.approx(2.499, abs=5e-4)
    n = doc["workload"]["instructions_per_transaction"]
    assert n == 9200
    # 3.905 x 9,200 / 1.66 GHz = 21.64 µs; 2.499 x 9,200 / 2.5 GHz = 9.196 µs
    assert transaction_time(3.905, n, 1.66e9) == pytest.approx(21.642e-6, rel=1e-4)
    assert transaction_time(2.499, n, 2.5e9) == pytest.approx(9.1963e-6, rel=1e-4)


def test_lock_penalties_are_the_papers(paper):
    s = paper[0]["workload"]["critical_share"]
    assert lock_penalty(s, 2) == pytest.approx(0.13)
    assert lock_penalty(s, 4) == pytest.approx(0.39)


def test_throughput_errors_against_measurement(paper):
    got = {(m, c): (e.capacity, meas) for m, c, e, meas in predictions(paper)}
    expected = {  # predicted RPS, error (pred - meas) / meas, error (meas - pred) / pred
        ("atom-n540", 1): (46_206, -0.094, +0.104),
        ("penryn-l5420", 1): (108_739, -0.150, +0.177),
        ("penryn-l5420", 2): (189_206, +0.087, -0.080),
        ("penryn-l5420", 4): (265_324, +0.144, -0.126),
    }
    lo, hi = paper[0]["workload"]["stated_error_band"]
    for key, (pred, err_meas, err_pred) in expected.items():
        x, meas = got[key]
        assert x == pytest.approx(pred, rel=1e-4), key
        assert (x - meas) / meas == pytest.approx(err_meas, abs=1e-3), key
        assert (meas - x) / x == pytest.approx(err_pred, abs=1e-3), key
        # every error against the measurement lies in the paper's 8-17% band
        assert lo <= abs(x - meas) / meas <= hi, key
        # relative to the prediction the largest is 17.7% (Penryn, 1 core): the band's "17%"
        assert lo <= abs(meas - x) / x < 0.18, key


def test_charging_the_lock_as_extra_cycles_misses_the_band(paper):
    # The other reading of the lock penalty, T (1 + p): 4 cores come out 35% high, which is why
    # the wait-share reading is the default (data/hart2012/README.md).
    got = {(m, c): (e.capacity, meas) for m, c, e, meas in predictions(paper, "amdahl")}
    x, meas = got[("penryn-l5420", 4)]
    assert (x - meas) / meas == pytest.approx(0.349, abs=1e-3)
    x, meas = got[("penryn-l5420", 2)]
    assert (x - meas) / meas == pytest.approx(0.106, abs=1e-3)
