"""CPI stack arithmetic, the lock model, throughput by model, and the --mpki format."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from corecast.errors import UserError
from corecast.model import cpi as cm
from corecast.model.cpi import (CPIModel, cpi_stack, estimate_cores, load_mpki, lock_penalty,
                                throughput_at_cores, transaction_time)
from corecast.model.queueing import Station, mmc, mva

PEN = {"l2_hit": 15.0, "dram": 200.0, "itlb_miss": 30.0, "branch_mispredict": 20.0, "misaligned_load": 6.0}


def test_stack_arithmetic():
    s = cpi_stack(0.8, {"branch_mispredict": 5.0, "l2_hit": 20.0, "dram": 1.5}, PEN)
    # cycles per 1K = events per 1K x penalty
    by = {c.name: c for c in s.components}
    assert by["l2_hit"].cycles_per_kilo == pytest.approx(300.0)
    assert by["dram"].cycles_per_kilo == pytest.approx(300.0)
    assert by["branch_mispredict"].cycles_per_kilo == pytest.approx(100.0)
    # CPI = baseline + sum / 1000
    assert s.cpi == pytest.approx(0.8 + 0.7)
    assert s.cycles_per_kilo == pytest.approx(1500.0)
    # components print in the machine's order, not the input's
    assert [c.name for c in s.components] == ["l2_hit", "dram", "branch_mispredict"]
    rows = s.rows()
    assert rows[0]["name"] == "baseline" and rows[0]["cycles_per_kilo"] == pytest.approx(800.0)
    assert rows[-1]["name"] == "total" and rows[-1]["cycles_per_kilo"] == pytest.approx(1500.0)
    assert sum(r["cycles_per_kilo"] for r in rows[:-1]) == pytest.approx(rows[-1]["cycles_per_kilo"])
    shares = [s.share("baseline")] + [s.share(c.name) for c in s.components]
    assert sum(shares) == pytest.approx(1.0)
    assert s.share("dram") == pytest.approx(0.2)


def test_stack_needs_a_penalty_for_every_event():
    with pytest.raises(UserError, match="no penalty for event.*coherence_miss"):
        cpi_stack(1.0, {"l2_hit": 3.0, "coherence_miss": 1.0}, PEN)
    with pytest.raises(UserError, match="baseline CPI"):
        cpi_stack(0.0, {}, PEN)
    with pytest.raises(UserError, match="l2_hit"):
        cpi_stack(1.0, {"l2_hit": -1.0}, PEN)
    # a stack with no events is just the baseline
    assert cpi_stack(1.25, {}, PEN).cpi == 1.25


def test_transaction_time_and_lock_penalty():
    assert transaction_time(2.0, 10_000, 2e9) == pytest.approx(1e-5)
    assert lock_penalty(0.13, 1) == 0.0
    assert lock_penalty(0.13, 2) == pytest.approx(0.13)
    assert lock_penalty(0.13, 4) == pytest.approx(0.39)
    with pytest.raises(UserError, match="below 1"):
        lock_penalty(1.0, 2)
    with pytest.raises(UserError, match="core counts"):
        lock_penalty(0.1, 0)
    with pytest.raises(UserError, match="frequency"):
        transaction_time(1.0, 100, 0)


def test_lock_models():
    t1 = transaction_time(2.0, 10_000, 2e9)
    ws = estimate_cores(2.0, 10_000, 2e9, [1, 2, 4, 8, 9], 0.125, "wait-share")
    # wait-share: X(c) = c (1 - s (c - 1)) / T
    for e in ws[:4]:
        assert e.capacity == pytest.approx(e.cores * (1 - 0.125 * (e.cores - 1)) / t1)
        assert e.cpi == pytest.approx(2.0 / (1 - e.lock_penalty))
        assert e.lock_cycles_per_kilo == pytest.approx(e.cpi * 1000 - 2000.0)
    # at 9 cores the penalty reaches 100%: no prediction, and it says why
    assert not ws[4].valid and math.isnan(ws[4].capacity) and "100%" in ws[4].note
    am = estimate_cores(2.0, 10_000, 2e9, [1, 2, 4, 8, 64], 0.125, "amdahl")
    for e in am:
        # Amdahl's law with serial fraction s: X(c) = X(1) c / (1 + s (c - 1))
        assert e.capacity == pytest.approx(e.cores / (1 + 0.125 * (e.cores - 1)) / t1)
    assert am[-1].capacity < 1 / (0.125 * t1)     # bounded by 1 / (s T)
    with pytest.raises(UserError, match="unknown lock model"):
        estimate_cores(2.0, 1, 1e9, [1], 0.1, "ticket")


def test_throughput_by_model():
    ests = estimate_cores(2.0, 10_000, 2e9, [1, 2, 4], 0.05)
    target = 5 * ests[0].transaction_time_s
    rows = throughput_at_cores(ests, target=target, clients=64, think_time=0.0)
    for r in rows:
        e = r.estimate
        assert r.mmc.arrival_rate < e.capacity
        if e.cores == 1:
            assert r.mm1.arrival_rate == pytest.approx(r.mmc.arrival_rate)
        else:  # a shared queue serves more at the same target than per-core queues
            assert r.mm1.arrival_rate < r.mmc.arrival_rate
        # per-core queues: each core is an M/M/1 meeting the target exactly
        assert mmc(r.mm1.arrival_rate / e.cores, e.service_rate, 1).mean_response_time == pytest.approx(target)
        assert mmc(r.mmc.arrival_rate, e.service_rate, e.cores).mean_response_time == pytest.approx(target)
        # closed loop: the machine-repairman solution equals exact MVA, and 64 clients saturate
        ref = mva([Station("cores", e.transaction_time_s, servers=e.cores)], 64).at(64)
        assert r.closed["throughput"] == pytest.approx(ref["throughput"], rel=1e-9)
        assert r.closed["response_time_s"] == pytest.approx(ref["response_time"], rel=1e-9)
        assert r.closed["throughput"] == pytest.approx(e.capacity, rel=1e-9)
    # a target below the service time cannot be met: a note, not a crash
    rows = throughput_at_cores(ests, target=ests[0].transaction_time_s / 2)
    assert all(r.mm1 is None and "cannot be met" in r.notes[0] for r in rows)


def test_predictor_face():
    m = CPIModel(cpi=2.0, instructions=10_000, frequency_hz=2e9, critical_share=0.1)
    p = m.predict([1, 2, 4])
    assert p.metric == "throughput" and p.method == "cpi"
    assert np.allclose(p.value, [1e5, 2e5 * 0.9, 4e5 * 0.7])
    assert np.allclose(p.as_time(), 1 / p.value)


# ------------------------------------------------------------------ the --mpki format
TOML = """
description = "synthetic"
baseline_cpi = 0.8
instructions = 9200
lock_fraction = 0.1

[events]
l2_hit = 20.0
dram = 1.5
coherence_miss = { per_1k = 0.5, penalty = 120, label = "coherence miss (HITM)" }

[penalties]
dram = 180
"""

CSV = """# synthetic
name,per_1k,penalty,label
baseline_cpi,0.8,,
instructions,9200,,
lock_fraction,0.1,,
l2_hit,20.0,,
dram,1.5,180,
coherence_miss,0.5,120,coherence miss (HITM)
"""


def _check(inp):
    assert inp.baseline_cpi == 0.8 and inp.instructions == 9200 and inp.lock_fraction == 0.1
    assert inp.events == {"l2_hit": 20.0, "dram": 1.5, "coherence_miss": 0.5}
    assert inp.penalties == {"dram": 180.0, "coherence_miss": 120.0}
    assert inp.labels == {"coherence_miss": "coherence miss (HITM)"}


def test_mpki_formats_agree(tmp_path):
    (tmp_path / "w.toml").write_text(TOML)
    (tmp_path / "w.csv").write_text(CSV)
    doc = {"baseline_cpi": 0.8, "instructions": 9200, "lock_fraction": 0.1,
           "events": {"l2_hit": 20.0, "dram": 1.5,
                      "coherence_miss": {"per_1k": 0.5, "penalty": 120, "label": "coherence miss (HITM)"}},
           "penalties": {"dram": 180}}
    (tmp_path / "w.json").write_text(json.dumps(doc))
    for name in ("w.toml", "w.csv", "w.json"):
        _check(load_mpki(tmp_path / name))
    inp = load_mpki(tmp_path / "w.toml")
    s = cpi_stack(inp.baseline_cpi, inp.events, {**PEN, **inp.penalties}, labels=inp.labels)
    assert s.cpi == pytest.approx(0.8 + (20 * 15 + 1.5 * 180 + 0.5 * 120) / 1000)
    assert s.components[-1].label == "coherence miss (HITM)"


@pytest.mark.parametrize("name,text,match", [
    ("a.toml", "baseline_cpi = 1\nevent = {}\n", "unknown key.*event"),
    ("b.toml", "[events]\nl2_hit = 3\n", "baseline_cpi' is missing"),
    ("c.toml", "baseline_cpi = 1\n[events]\nl2_hit = -3\n", "events.l2_hit"),
    ("d.toml", "baseline_cpi = 1\n[events]\nl2_hit = 'many'\n", "events.l2_hit"),
    ("e.toml", "baseline_cpi = [\n", "not valid TOML"),
    ("f.json", '{"baseline_cpi": 1,\n "events": }', "f.json:2: not valid JSON"),
    ("g.csv", "event,value\nl2_hit,3\n", "g.csv:1: the header"),
    ("h.csv", "name,per_1k\nbaseline_cpi,1\nl2_hit,lots\n", "h.csv:3: 'l2_hit'"),
    ("i.csv", "name,per_1k\nbaseline_cpi,1\nl2_hit,1\nl2_hit,2\n", "h?i.csv:4: event 'l2_hit' appears twice"),
    ("j.toml", "baseline_cpi = 1\nlock_fraction = 1.5\n", "lock_fraction must be below 1"),
    ("k.toml", "baseline_cpi = 1\n[events]\nx = { per_1k = 1, cost = 3 }\n", "event 'x' must be"),
])
def test_mpki_errors_name_the_file(tmp_path, name, text, match):
    (tmp_path / name).write_text(text)
    with pytest.raises(UserError, match=match) as info:
        load_mpki(tmp_path / name)
    assert name in str(info.value)


def test_mpki_missing_file(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_mpki(tmp_path / "nope.toml")


def test_component_labels_cover_every_penalty_name():
    assert set(cm.PENALTY_NAMES) <= set(cm.COMPONENT_LABELS)


def test_sim_result_reader_checks_format_and_version():
    doc = {"format": "corecast-sim-result", "version": 1, "events_per_kilo_instruction": {"dram": 2.0},
           "issue": {"baseline_cpi": 0.7}, "machine": {"name": "atom-n540"},
           "instructions_per_transaction": 5000}
    inp = cm.inputs_from_sim(doc, "r.json")
    assert (inp.baseline_cpi, inp.events, inp.instructions, inp.machine) == (0.7, {"dram": 2.0}, 5000, "atom-n540")
    assert cm.inputs_from_sim(doc, "r.json", baseline_cpi=0.5).baseline_cpi == 0.5
    with pytest.raises(UserError, match="version 2 is not supported"):
        cm.inputs_from_sim({**doc, "version": 2}, "r.json")
    with pytest.raises(UserError, match="events_per_kilo_instruction"):
        cm.inputs_from_sim({**doc, "events_per_kilo_instruction": None}, "r.json")
    with pytest.raises(UserError, match="events_per_kilo_instruction.dram"):
        cm.inputs_from_sim({**doc, "events_per_kilo_instruction": {"dram": -1}}, "r.json")
