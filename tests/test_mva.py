"""The demand model (`mva`) and its solver: the machine-repairman closed form reproduced exactly,
the lock's asymptote, what it says it used, the locks in predict's document, and the side
tables a Dataset carries."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

import fakes
from corecast.dataset import ColumnInfo, Dataset, Machine, read_json
from corecast.errors import UserError
from corecast.model import closednet, predictors, queueing, usecase
from corecast.model.usecase import PredictOptions, Target
from corecast.report import documents as D
from corecast.report import locks as L


@pytest.mark.parametrize("customers,think,service,servers", [
    (1, 1.0, 0.5, 1), (10, 2.0, 0.3, 3), (64, 8.0, 1.0, 64), (50, 1e-4, 1.0, 4), (200, 3.0, 0.2, 16),
    (300, 0.5, 0.01, 1)])
def test_solver_is_the_machine_repairman(customers, think, service, servers):
    """A delay centre (think time Z) and a c-server centre (service S): throughput and queue
    length are the finite-source M/M/c//N model's, exactly (birth-death closed form)."""
    sol = closednet.solve([closednet.Centre("think", think, "delay"),
                           closednet.Centre("cpu", service, "cpu", servers)], customers)
    mr = queueing.machine_repairman(customers, think, service, servers)
    assert sol.throughput == pytest.approx(mr.throughput, rel=1e-10)
    assert sol.queue_length[1] == pytest.approx(mr.mean_in_system, rel=1e-9, abs=1e-12)
    assert sol.queue_length.sum() == pytest.approx(customers, rel=1e-10)      # every job somewhere
    assert sol.residence_time.sum() == pytest.approx(sol.cycle_time, rel=1e-10)


def test_solver_single_server_queues_are_reiser_lavenberg():
    """Single-server queues and a delay: the solver agrees with exact MVA (queueing.mva)."""
    st = [queueing.Station("a", 0.2), queueing.Station("b", 0.05), queueing.Station("z", 1.0, "delay")]
    ref = queueing.mva(st, 40)
    sol = closednet.solve([closednet.Centre("a", 0.2), closednet.Centre("b", 0.05),
                           closednet.Centre("z", 1.0, "delay")], 40)
    assert sol.throughput == pytest.approx(ref.throughput[-1], rel=1e-10)
    np.testing.assert_allclose(sol.queue_length, ref.queue_length[-1], rtol=1e-9)


def repairman_campaign(cpu_s=2.0, off_s=6.0, cores=(1,)):
    """A campaign at one core whose demands are a machine repairman: CPU time cpu_s, off the CPU
    off_s (a sleep), no lock, no waits; the shim ran (lock_acquisitions 0)."""
    rows = [{"cores": c, "repetition": 0, "time_s": cpu_s + off_s, "user_s": cpu_s, "sys_s": 0.0,
             "lock_acquisitions": 0.0, "runqueue_delay_cycles": 0.0} for c in cores]
    ds = Dataset.from_rows(rows, machine=Machine(nominal_freq_hz=fakes.CLOCK_HZ))
    for n, k in (("user_s", "cpu"), ("sys_s", "cpu"), ("lock_acquisitions", "counter")):
        ds.columns[n] = ColumnInfo(name=n, kind=k, unit="s" if k == "cpu" else "count")
    ds.columns["runqueue_delay_cycles"] = ColumnInfo(name="runqueue_delay_cycles", kind="stall", unit="cycles")
    return ds


def test_mva_on_synthetic_demands_is_the_machine_repairman():
    """The method, from demands measured at one core (CPU S, off-CPU Z): at c cores, c threads on
    c CPUs with Z of delay each -- the machine-repairman model with N = c, its time 1/X exactly."""
    f = predictors.fit("mva", repairman_campaign())
    cores = [1, 2, 3, 8, 64]
    t = f.predict(cores).value
    for c, tc in zip(cores, t):
        x = queueing.machine_repairman(c, 6.0, 2.0, c).throughput
        assert tc == pytest.approx(1.0 / x, rel=1e-10)
    d = f.demands
    assert d.cpu_s == 2.0 and d.delay_s == 6.0 and d.customers == 1 and not d.locks


def test_mva_reaches_the_locks_ceiling():
    """A lock held H of a run's CPU time C: the speed-up tends to C / H, and the lock's share of
    thread time to 1."""
    ds = fakes.lock_demands(cpu_s=8.0, hold_s=1.0, noise=0.0, cores=(1, 2))
    f = predictors.fit("mva", ds)
    t = f.predict([1, 16, 256]).value
    assert t[0] / t[-1] == pytest.approx(8.0, rel=1e-3)
    assert t[0] / t[1] < 8.0
    (lk,) = f.lock_shares([1, 2, 256])
    assert lk["lock"] == "&queue_lock" and lk["share"][0] == pytest.approx(1 / 8, rel=1e-9)
    assert lk["share"][0] < lk["share"][1] < lk["share"][2] and lk["share"][2] > 0.95


def test_mva_says_which_demands_it_used_and_spreads_its_band():
    ds = fakes.lock_demands(cores=(1, 2, 4))
    f = predictors.fit("mva", ds)
    m = f.models(64)["mva"]
    d = m["demands"]
    assert d["cores"] == 1 and d["runs"] == 2 and d["customers"] == 1
    assert set(d["sources"]) == {"customers", "cpu", "locks", "delay"}
    assert d["locks"][0]["label"] == "pool.c:41 worker: pthread_mutex_lock(&queue_lock)"
    assert "exact" in m["solver"]
    p = f.predict([2, 8, 64], 0.8)
    assert np.all(p.low < p.value) and np.all(p.value < p.high)
    assert np.all(np.diff(np.log(p.high / p.low)) > 0)             # wider the farther out
    # the checks at the measured counts: the model against the measured time
    assert [c["cores"] for c in m["checks"]] == [1.0, 2.0, 4.0]
    assert all(abs(c["error_pct"]) < 3 for c in m["checks"])


def test_mva_refuses_throughput_only_data_in_one_line():
    ds = fakes.lock_demands(cores=(1, 2), noise=0.0)
    ds.metrics["throughput"] = 1e6 / ds.metrics["time_s"]
    ds.columns["throughput"] = ColumnInfo(name="throughput", kind="throughput", unit="1/s")
    ds.metrics.pop("time_s")
    ds.columns.pop("time_s")
    with pytest.raises(UserError, match="no time_s"):
        predictors.fit("mva", ds)


def test_predict_names_the_locks_with_their_shares(tmp_path):
    """predict's document, terminal and HTML: the hot lock with its call site, its measured share
    at the largest measured count and its predicted share at each target, whatever the method."""
    ds = fakes.lock_demands(cores=(1, 2))
    doc = D.predict_doc(usecase.predict(ds, PredictOptions()), "camp", [2, 16, 64], 0.8)
    block = doc["locks"]
    (lk,) = block["locks"]
    assert lk["label"] == "pool.c:41 worker: pthread_mutex_lock(&queue_lock)"
    assert [p["cores"] for p in lk["predicted"]] == [2, 16, 64]
    shares = [p["share"] for p in lk["predicted"]]
    assert shares[0] < shares[1] < shares[2] <= 1
    assert lk["measured"][-1]["cores"] == 2
    (line,) = L.lock_lines(block)
    assert line.startswith("pool.c:41 worker: pthread_mutex_lock(&queue_lock): ")
    assert f"{100 * shares[2]:.0f}% at 64" in line and "of thread time" in line
    from corecast.report import prediction as R
    html = R.render_html(doc)
    assert "Locks" in html and "pthread_mutex_lock(&amp;queue_lock)" in html
    assert json.loads(json.dumps(doc, allow_nan=False))["locks"] == doc["locks"]
    # a plain CSV: no locks in the document
    plain = D.predict_doc(usecase.predict(fakes.amdahl_time(), PredictOptions()), "plain", [16], 0.8)
    assert "locks" not in plain


def test_side_tables_follow_the_rows(tmp_path):
    """A Dataset's side table survives JSON, and select keeps the rows of the runs it keeps."""
    ds = fakes.lock_demands(cores=(1, 2, 4))
    path = tmp_path / "d.json"
    ds.to_json(path)
    back = read_json(path)
    assert back.tables == ds.tables and len(back.tables["locks"]) == 6
    two = back.select(back.cores <= 2)
    assert {r["cores"] for r in two.tables["locks"]} == {1, 2}
    first = back.select((back.cores == 4) & (back.repetition == 1))
    assert [(r["cores"], r["repetition"]) for r in first.tables["locks"]] == [(4, 1)]


@pytest.mark.parametrize("bad,msg", [
    ({"locks": 3}, "must be a list of row objects"),
    ({"locks": [{"lock": "x"}]}, "expected a flat object with a 'cores' number"),
    ({"locks": [{"cores": 1, "x": {"y": 1}}]}, "expected a flat object"),
    ([1], "must be an object of tables")])
def test_side_tables_in_a_file_are_checked(tmp_path, bad, msg):

    p = tmp_path / "d.json"
    p.write_text(json.dumps({"format": "corecast-dataset", "version": 1, "tables": bad,
                             "rows": [{"cores": 1, "time_s": 1.0}]}))
    with pytest.raises(UserError, match=msg):
        read_json(p)


def test_solver_bounds():

    with pytest.raises(UserError, match="customers"):
        closednet.solve([closednet.Centre("cpu", 1.0, "cpu", 2)], closednet.MAX_CUSTOMERS + 1)
    with pytest.raises(UserError, match="positive demand"):
        closednet.Centre("x", 0.0)
    assert math.isfinite(closednet.solve([closednet.Centre("cpu", 1.0, "cpu", 1e3)], 2000).throughput)


def test_mva_for_a_target_machine_keeps_its_locks():
    """--target-machine: the demand model is fitted on the measured machine's effective cores
    (its per-lock table follows the runs) and asked about the target's, SMT siblings at the
    yield; predict's locks are there too."""
    from corecast.target import parse_spec

    ds = fakes.lock_demands(cores=(1, 2), noise=0.0)
    ds.machine.sockets, ds.machine.cores, ds.machine.threads_per_core = 1, 2, 1
    target = Target(parse_spec("sockets=1,cores=8,smt=2"), "compact", 0.5)
    doc = D.predict_doc(usecase.predict(ds, PredictOptions("mva"), target), "camp", [8, 16], 0.8)
    assert doc["models"]["mva"]["demands"]["locks"][0]["lock"] == "&queue_lock"
    assert [p["effective_cores"] for p in doc["predictions"]] == [8, 12]       # 8 cores + 8 siblings at 0.5
    assert doc["locks"]["locks"][0]["lock"] == "&queue_lock"
    plain = predictors.fit("mva", ds).predict([8, 12]).value
    assert [p["time_s"] for p in doc["predictions"]] == pytest.approx(plain, rel=1e-6)
    # measured at 2 threads on one core's two hardware threads: 1.5 effective cores, and the
    # lock table's rows at 2 threads are the demands of those 1.5
    smt = fakes.lock_demands(cores=(2, 3), noise=0.0)
    smt.machine.sockets, smt.machine.cores, smt.machine.threads_per_core = 1, 1, 3
    target = Target(target.machine, "compact", 0.5, parse_spec("sockets=1,cores=1,smt=3"), "compact")
    doc = D.predict_doc(usecase.predict(smt, PredictOptions("mva"), target), "camp", [8], 0.8)
    d = doc["models"]["mva"]["demands"]
    assert d["cores"] < 2 and [lk["lock"] for lk in d["locks"]] == ["&queue_lock"]


@pytest.mark.parametrize("handoff,think,hold", [(0.0, 1.0, 0.5), (3.0, 1.0, 0.5), (0.7, 0.2, 0.9)])
def test_a_lock_with_a_handoff_is_its_birth_death_chain(handoff, think, hold):
    """Two threads, a think time Z (delay) and a lock of hold D that stands idle h·D between two
    holders when one waits: the chain over j threads at the lock (0, 1, 2), arrivals (2 - j)/Z,
    departures 1/D with one there and 1/(D(1 + h)) with two, solved directly."""
    sol = closednet.solve([closednet.Centre("z", think, "delay"),
                           closednet.Centre("lock", hold, "queue", handoff=handoff)], 2)
    up = [2 / think, 1 / think]                           # j -> j + 1
    down = [1 / hold, 1 / (hold * (1 + handoff))]         # j + 1 -> j
    p = np.array([1.0, up[0] / down[0], up[0] * up[1] / (down[0] * down[1])])
    p /= p.sum()
    x = p[1] * down[0] + p[2] * down[1]
    assert sol.throughput == pytest.approx(x, rel=1e-10)
    assert sol.queue_length[1] == pytest.approx(p[1] + 2 * p[2], rel=1e-9)


def test_a_handoff_costs_nothing_to_one_thread_and_sets_the_saturated_pace():
    lock = closednet.Centre("lock", 0.1, "queue", handoff=4.0)
    assert closednet.solve([closednet.Centre("cpu", 1.0, "cpu", 1), lock], 1).throughput == pytest.approx(1 / 1.1)
    # saturated: one acquisition every D (1 + h)
    sat = closednet.solve([closednet.Centre("cpu", 1.0, "cpu", 512), lock], 512).throughput
    assert sat == pytest.approx(1 / (0.1 * 5.0), rel=1e-3)
    for bad in (dict(kind="queue", handoff=-1.0), dict(kind="delay", handoff=1.0), dict(kind="queue", handoff=math.nan)):
        with pytest.raises(UserError, match="handoff"):
            closednet.Centre("x", 1.0, **bad)


def test_mva_fits_the_handoff_a_contended_count_shows():
    # the campaign's lock is handed over in 3 holds when contended: measured at 1-4 cores, the
    # hold alone (from 1 core) predicts too fast a pace; the handoff fitted at 4 cores recovers it
    truth = fakes.lock_demands(cores=(1, 2, 4, 8, 16, 32), cpu_s=8.0, hold_s=1.0, noise=0.0, handoff=3.0)
    train = truth.select(truth.cores <= 4)
    f = predictors.fit("mva", train)
    (ld,) = f.demands.locks
    assert ld.handoff_s / ld.hold_s == pytest.approx(3.0, rel=1e-3)
    assert "4 cores" in f.demands.sources["handoff"] and "handoff" in f.describe()
    ag = truth.aggregate("time_s")
    np.testing.assert_allclose(f.predict(ag.cores).value, ag.value, rtol=1e-3)
    # without a handoff in the data, none is fitted (and the noise of 1% is not taken for one)
    f0 = predictors.fit("mva", fakes.lock_demands(cores=(1, 2, 4)))
    assert f0.demands.locks[0].handoff_s == 0.0 and "handoff" not in f0.demands.sources


def test_the_handoff_is_fitted_in_the_measured_machine_s_seconds():
    # the same campaign fitted for a clock 1.5x slower: the handoff (a property of the measured
    # runs) is the same, and the prediction is the measured-clock one times the ratio
    truth = fakes.lock_demands(cores=(1, 2, 4), cpu_s=8.0, hold_s=1.0, noise=0.0, handoff=3.0)
    a, b = predictors.fit("mva", truth), predictors.fit("mva", truth, freq_ratio=1.5)
    assert b.demands.locks[0].handoff_s == pytest.approx(a.demands.locks[0].handoff_s, rel=1e-6)
    np.testing.assert_allclose(b.predict([8.0, 32.0]).value, 1.5 * a.predict([8.0, 32.0]).value, rtol=1e-9)
