"""The PMCTrack paper's findings (Figures 8 and 9), reproduced in simulation on the bundled
Table 2 and 3 mixes. The directions the issue asks for must hold; the sizes are in docs/sched.md.
"ACFS the fairest on every workload" holds on 2B-2S only (5 of 8 on 2B-10S): asserted as it is."""
from __future__ import annotations

import numpy as np
import pytest

from corecast.sched.experiments import findings, load_experiment, run

pytestmark = pytest.mark.slow        # the paper's experiments take a minute: `make test`, not `make check`


@pytest.fixture(scope="module")
def results():
    return {n: run(load_experiment(n)) for n in ("pmctrack-2b2s", "pmctrack-2b10s")}


def _mean(res, what, p):
    return float(np.mean([row[p].__dict__[what] for row in res.metrics.values()]))


@pytest.mark.parametrize("name", ["pmctrack-2b2s", "pmctrack-2b10s"])
def test_hsp_best_asp_on_most_workloads_and_most_unfair(results, name):
    res = results[name]
    asp = res.table("asp")
    best = sum(max(r, key=r.get) == "hsp" for r in asp.values())
    assert best > len(asp) / 2
    means = {p: _mean(res, "unfairness", p) for p in res.experiment.policies}
    assert max(means, key=means.get) == "hsp"


def test_acfs_fairer_than_rr_adwrr_and_eqp_on_2b2s(results):
    res = results["pmctrack-2b2s"]
    a = _mean(res, "unfairness", "acfs")
    for p in ("rr", "adwrr", "eqp"):
        assert a < _mean(res, "unfairness", p), p
    unf = res.table("unfairness")
    assert all(min(r, key=r.get) == "acfs" for r in unf.values())


def test_acfs_fairer_than_eqp_and_rr_on_2b10s(results):
    res = results["pmctrack-2b10s"]
    a = _mean(res, "unfairness", "acfs")
    for p in ("eqp", "rr"):
        assert a < _mean(res, "unfairness", p), p


def test_findings_report_each_statement_with_its_size(results):
    f8 = findings(results["pmctrack-2b2s"])
    f9 = findings(results["pmctrack-2b10s"])
    assert [f.holds for f in f8] == [True] * len(f8)
    by = {f.statement: f for f in f9}
    assert by["ACFS achieves the best unfairness across the board"].holds is False     # as it is
    assert "of 8 workloads" in by["ACFS achieves the best unfairness across the board"].detail
    assert by["ACFS's average unfairness is below EQP's"].paper == "-24%"
    assert by["ACFS's average unfairness is below EQP's"].detail.startswith("-")


def test_the_experiment_files_state_their_choices():
    e = load_experiment("pmctrack-2b10s")
    assert e.machine.name == "2b-10s" and e.machine.cores == 12
    assert {"ST-high", "ST-low", "PS-high", "HP-high"} <= set(e.categories)
    assert all(a.category for w in e.workloads for a in w.apps)
    assert e.workloads[0].rules.runs == 3 and e.workloads[0].rules.summary == "geomean"
