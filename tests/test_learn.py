"""Priors learned from a corpus (corecast.model.learn) and the corpus scorecard with them
(corecast.model.scorecard, `evaluate --corpus --leave-one-source-out --target-machine source`)."""
from __future__ import annotations

import dataclasses
import math
import tomllib

import numpy as np
import pytest

from corecast.model import auto, learn, priors, scorecard, usl
from corecast.model import corpus as C
from corecast.model.priors import Priors

from conftest import ROOT


def _write_source(root, name, laws, machine="sockets=1,cores=64", placement="compact", n=None, noise=0.01, seed=0):
    src = root / name
    src.mkdir(parents=True)
    (src / "source.toml").write_text(f'name = "{name}"\nmachine = "{machine}"\nplacement = "{placement}"\n')
    rng = np.random.default_rng(seed)
    n = np.arange(1, 33, dtype=float) if n is None else np.asarray(n, dtype=float)
    for i, (a, b) in enumerate(laws):
        x = usl.usl(n, a, b, 100.0) * rng.normal(1, noise, len(n))
        (src / f"s{i}.csv").write_text("cores,throughput\n" + "".join(f"{c:g},{v:.8g}\n" for c, v in zip(n, x)))


@pytest.fixture
def amdahl_corpus(tmp_path):
    """Three sources whose curves are Amdahl's law (no coherency): a USL fitted on the first
    quarter sees a bend in the noise and predicts a decline; Amdahl extrapolates best."""
    for k, name in enumerate(("a", "b", "c")):
        _write_source(tmp_path, name, [(0.01 + 0.01 * i + 0.005 * k, 0.0) for i in range(4)], seed=k)
    return C.load_corpus(tmp_path)


def test_the_default_is_the_member_that_extrapolates_best(amdahl_corpus):
    trials = learn.make_trials(amdahl_corpus, 0.25)
    assert len(trials) == 12 and all(isinstance(t.fitted, auto.AutoFit) for t in trials)
    pri = learn.learn(trials, (), amdahl_corpus, 0.25, origin="test")
    member = {m: pri.scores[f"member {m}"] for m in learn.MEMBERS}
    assert pri.default == min(member, key=member.get)
    assert member["amdahl"] <= member["usl"]
    assert pri.sources == ("a", "b", "c") and pri.series == 12 and pri.origin == "test"


def test_the_shipped_band_holds_its_level_on_the_held_out_scores(amdahl_corpus):
    # learn_shipped: the band learned from every source's held-out scores (each scored with the
    # priors learned without it): on those scores, 80% of each source's points, on average
    pri = scorecard.learn_shipped(amdahl_corpus, 0.25, jobs=1, origin="test")
    assert pri.band_table is not None and pri.band_table_machine is not None
    assert pri.default in learn.MEMBERS and pri.origin == "test"
    ev = scorecard.evaluate_corpus(amdahl_corpus, ["auto"], priors=pri)
    cov = ev.coverage_summary("auto")
    assert cov["mean_over_sources"] == pytest.approx(0.8, abs=0.12), cov
    # a band learned from wider scores is wider
    tab = dict(pri.band_table)
    tab["upper"] = [[2 * v for v in row] for row in tab["upper"]]
    wide = scorecard.evaluate_corpus(amdahl_corpus, ["auto"], priors=dataclasses.replace(pri, band_table=tab))
    # (strictly: a table that were not read would give the same coverage)
    assert wide.coverage_summary("auto")["points"] > cov["points"]


def test_priors_round_trip_through_toml():
    p = Priors(default="usl", partner="amdahl", default_weight=0.5, switch_ratio=3.0, coherency_share=0.2,
               smt_yield=0.3, smt_quartiles=(0.1, 0.5), smt_series=7, cross_domain=0.25, band_growth=0.3, band_growth_two=0.4,
               sources=("x", "y"), series=9, origin="o", scores={"member usl": 12.5},
               band_table={"edges": [1.5, float("inf")], "levels": [0.8], "lower": [[-1.2], [-1.5]],
                           "upper": [[1.0], [1.3]]})
    back = priors.from_dict(tomllib.loads(p.to_toml()))
    assert back == p and back.scores == {"member usl": 12.5}


def test_shipped_priors_were_learned_from_the_bundled_corpus():
    shipped = priors.load()
    on_disk = {s.source for s in C.load_corpus(ROOT / "data" / "corpus")}
    assert set(shipped.sources) == on_disk
    assert shipped.series == len(C.load_corpus(ROOT / "data" / "corpus"))
    assert shipped.default in learn.MEMBERS and 0 <= shipped.smt_yield <= 1 and shipped.band_growth > 0
    assert shipped.scores and all(k.split()[0] in ("member", "blend", "switch_ratio", "coherency_share", "coherency_share_low",
                                                   "cross_domain", "votes") for k in shipped.scores)
    # the bands, learned out of sample, with and without the machines
    for tab in (shipped.band_table, shipped.band_table_machine):
        assert tab is not None and len(tab["edges"]) == len(tab["lower"]) == len(tab["upper"])
        assert all(lo < 0 < hi for row_lo, row_hi in zip(tab["lower"], tab["upper"])
                   for lo, hi in zip(row_lo, row_hi))
    # the bagged choices: the shares of the resamples sum to one and the shipped weight is the
    # median of the resamples' choices
    votes = shipped.scores["votes blend"]
    assert sum(votes.values()) == pytest.approx(1.0, abs=1e-6)
    w = shipped.default_weight if shipped.partner else 1.0
    below = sum(v for k, v in votes.items() if float(k) < w)
    above = sum(v for k, v in votes.items() if float(k) > w)
    assert below <= 0.5 + 1e-9 and above <= 0.5 + 1e-9, votes


@pytest.mark.slow
def test_shipped_priors_are_what_the_script_learns(tmp_path):
    import subprocess
    import sys
    out = tmp_path / "priors.toml"
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "learn_priors.py"), "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert out.read_text() == (ROOT / "src" / "corecast" / "model" / "priors.toml").read_text(), \
        "run scripts/learn_priors.py: the corpus or the learning changed"


def _fake_trials(errs):
    """Trials whose prediction under candidate c misses by errs[c][source] percent."""
    import types
    trials = [learn.Trial(types.SimpleNamespace(source=src), 1.0, np.array([2.0, 4.0]), np.array([10.0, 20.0]), None)
              for src in next(iter(errs.values()))]
    return trials, lambda c: (lambda t: t.truth * (1 + errs[c][t.series.source] / 100))


def test_a_candidate_best_everywhere_is_chosen_by_every_resample():
    errs = {1.0: {"a": 10, "b": 20, "c": 5}, 0.5: {"a": 12, "b": 25, "c": 6}}
    trials, pf = _fake_trials(errs)
    ch = learn.choose_bagged(trials, (1.0, 0.5), pf)
    assert ch.value == 1.0 and ch.votes == {1.0: 1.0, 0.5: 0.0}
    assert ch.scores[1.0] == pytest.approx(learn.score(trials, pf(1.0)))


def test_the_bagged_choice_is_what_most_sources_favour_not_one_median():
    # The plain median over the 7 sources picks 1.0 (17% against 20%), yet 0.5 is the better
    # choice in 5 of the 7 sources: the resamples of the sources mostly choose 0.5.
    errs = {1.0: dict(s0=14, s1=24, s2=32, s3=31, s4=17, s5=15, s6=12),
            0.85: dict(s0=21, s1=25, s2=25, s3=35, s4=17, s5=22, s6=12),
            0.5: dict(s0=20, s1=9, s2=20, s3=24, s4=7, s5=37, s6=6)}
    trials, pf = _fake_trials(errs)
    assert min(errs, key=lambda c: learn.score(trials, pf(c))) == 1.0
    ch = learn.choose_bagged(trials, tuple(errs), pf)
    assert ch.value == 0.5 and ch.votes[0.5] > 0.5 and sum(ch.votes.values()) == pytest.approx(1.0)
    again = learn.choose_bagged(trials, tuple(errs), pf)
    assert again.votes == ch.votes                       # a fixed seed: the priors are reproducible
    # a categorical choice is the most chosen candidate
    cat = learn.choose_bagged(trials, tuple(errs), pf, numeric=False)
    assert cat.value == max(cat.votes, key=cat.votes.get) == 0.5


@pytest.mark.slow
def test_leave_one_source_out_learns_without_the_source(amdahl_corpus):
    ev = scorecard.evaluate_corpus(amdahl_corpus, ["auto", "usl"], leave_one_source_out=True)
    assert [s.source for s in ev.sources] == ["a", "b", "c"]
    for s in ev.sources:
        assert s.priors.origin == f"learned without {s.source}"
        assert s.source not in s.priors.sources and len(s.priors.sources) == 2
        assert math.isfinite(s.median_error["auto"]) and 0 <= s.coverage["auto"] <= 1
    d = ev.to_dict()
    assert d["leave_one_source_out"] is True and d["sources"][0]["priors"]["origin"] == "learned without a"
    # the median over the sources every method predicted: here all three, so the same as overall
    assert ev.overall_common()["auto"] == pytest.approx(ev.overall()["auto"])
    assert set(d["overall_on_common_sources"]) == {"auto", "usl"}
    # and their geometric mean, each source's error counted once
    errs = [s.median_error["usl"] for s in ev.sources]
    assert ev.geomean_common()["usl"] == pytest.approx(float(np.prod(errs)) ** (1 / 3))
    assert d["geometric_mean_on_common_sources"]["usl"] == pytest.approx(ev.geomean_common()["usl"], abs=1e-3)


def test_target_mode_uses_each_sources_machine(tmp_path):
    # Measured on a 1-socket 8-core 2-way SMT machine with compact placement: threads 9..16 are
    # SMT siblings; the curve is a USL of the effective cores with a yield of 0.3.
    from corecast.model.topo import Layout
    from corecast.target import parse_spec
    m = parse_spec("sockets=1,cores=8,smt=2")
    n = np.arange(1, 17, dtype=float)
    src = tmp_path / "smt"
    src.mkdir()
    (src / "source.toml").write_text('name = "smt"\nmachine = "sockets=1,cores=8,smt=2"\nplacement = "compact"\n')
    for i, a in enumerate((0.01, 0.03)):
        eff = Layout(m, "compact", 0.3).effective(n)
        x = usl.usl(eff, a, 0.0, 100.0)
        (src / f"s{i}.csv").write_text("cores,throughput\n" + "".join(f"{c:g},{v:.10g}\n" for c, v in zip(n, x)))
    series = C.load_corpus(tmp_path)
    plain = scorecard.evaluate_corpus(series, ["usl"], train_frac=0.5)
    on = scorecard.evaluate_corpus(series, ["usl"], train_frac=0.5, target=True, priors=Priors(smt_yield=0.3))
    assert on.target and not plain.target
    assert on.sources[0].median_error["usl"] < 0.1 < plain.sources[0].median_error["usl"]
