"""Trials (corecast.model.trials): auto fitted once per corpus series, frozen, and replayed under
other priors; the fast replay of the point prediction equals the prediction itself, and
fitting in worker processes gives what fitting here gives."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from corecast.model import corpus as C
from corecast.model import trials
from corecast.model.priors import Priors
from corecast.model.priors import load as load_priors

from conftest import ROOT


@pytest.fixture(scope="module")
def sample():
    series = C.load_corpus(ROOT / "data" / "corpus")
    # one series from every source: plain, two core counts (LiTL), SMT, oversubscribed, NUMA
    seen: dict[str, C.Series] = {}
    for s in series:
        seen.setdefault(s.source, s)
    return list(seen.values())


@pytest.mark.parametrize("target", [False, True])
def test_the_replay_equals_the_prediction_under_other_priors(sample, target):
    made = trials.make_trials(sample, target=target, smt_yield=0.3)
    assert len(made) >= len(sample) - 2
    shipped = load_priors()
    others = [shipped, dataclasses.replace(shipped, default_weight=0.25, coherency_share=0.5, cross_domain=1.0),
              dataclasses.replace(shipped, partner="", default_weight=1.0)]
    kinds = set()
    for t in made:
        kinds.add(t.replay.kind)
        for pri in others:
            assert np.allclose(t.values(pri), t.predict(pri)[0], rtol=1e-9), (t.series.source, t.series.name)
    assert {"auto", "two"} <= kinds


def test_worker_processes_give_what_one_process_gives(sample):
    few = sample[:6]
    one = trials.make_trials(few, smt_yield=0.3, jobs=1)
    two = trials.make_trials(few, smt_yield=0.3, jobs=2)
    assert [t.series.name for t in one] == [t.series.name for t in two]
    pri = load_priors()
    for a, b in zip(one, two):
        assert np.array_equal(a.predict(pri)[0], b.predict(pri)[0])


def test_parallel_map_keeps_the_order_and_reports_progress():
    seen = []
    out = trials.parallel_map(lambda x: x * x, range(20), jobs=2, progress=lambda d, n: seen.append((d, n)))
    assert out == [x * x for x in range(20)]
    assert seen[-1] == (20, 20) and len(seen) == 20


def test_a_frozen_member_answers_only_what_it_was_asked():
    s = C.load_corpus(ROOT / "data" / "corpus")[0]
    t = trials.make_trial(s)
    member = t.fitted.fits["usl"]
    assert isinstance(member, trials.Frozen)
    with pytest.raises(ValueError, match="frozen"):
        member.predict(np.array([1.0, 2.0]))
    assert t.predict(Priors())[0].shape == t.cores.shape


def test_workers_end_with_the_process_that_started_them(tmp_path):
    # a scorecard killed with SIGKILL leaves no worker behind
    import os
    import signal
    import subprocess
    import sys
    import time
    pids = tmp_path / "pids"
    code = (
        "import os, time\n"
        "from corecast.model import trials\n"
        f"def f(x):\n    open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n'); time.sleep(60)\n"
        "trials.parallel_map(f, range(2), jobs=2)\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        start = time.monotonic() + 120          # a bound, not a speed: a busy machine starts them slowly
        while time.monotonic() < start and not (pids.exists() and len(pids.read_text().split()) == 2):
            time.sleep(0.05)
        assert pids.exists(), "no worker started"
        workers = [int(p) for p in pids.read_text().split()]
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 30
    alive = workers
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.05)
    for p in alive:
        os.kill(p, signal.SIGKILL)
    assert not alive, f"workers {alive} outlived the process that started them"


def _alive(pid: int) -> bool:
    import os
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        return os.path.exists(f"/proc/{pid}")
