"""The stall method (ESTIMA) on synthetic programs with known laws."""

import numpy as np
import pytest

from corecast.dataset import ColumnInfo, Dataset
from corecast.errors import UserError
from corecast.model import estima, synth, timex
from corecast.model.estima import _pearson

TARGETS = np.array([12.0, 16, 24, 32, 48, 64])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_hidden_lock_growth_predicts_the_slowdown_time_extrapolation_misses(seed):
    # Time still falls up to 12 cores (and beyond), while lock-wait cycles per core grow as n²:
    # the program slows down past ~32 cores.
    ds, truth, _ = synth.scaling_dataset("lock_hidden", seed=seed)
    tt = truth(TARGETS)
    assert np.all(np.diff(truth(np.arange(1, 13.0))) < 0), "time must still fall over the measured range"
    assert tt[-1] > tt[3], "the true program slows down"
    e = estima.fit_dataset(ds).predict(TARGETS)
    x = timex.fit_dataset(ds).predict(TARGETS)
    # The stall method sees the slowdown (the true time at 64 cores is 1.57x the one at 32) ...
    assert e.value[-1] > 1.3 * e.value[3]
    assert TARGETS[np.argmin(e.value)] == 32
    # ... and its size: with the machine's clock known, the scaling factor is WorkStall with
    # b = 1/clock, which the data cannot tell from a flat f (the first increment overshot the
    # time at 64 cores 2.5-3x).
    assert np.max(np.abs(e.value / tt - 1)) < 0.10
    # ... time extrapolation does not: it keeps falling.
    assert np.all(np.diff(x.value) < 0)
    assert x.value[-1] < 0.5 * tt[-1]


@pytest.mark.parametrize("seed", [0, 1])
def test_hidden_lock_without_a_clock_still_predicts_the_slowdown(seed):
    # Without the clock (a plain CSV), b is not known and the scaling factor is chosen by
    # ESTIMA's correlation criterion: the slowdown is still predicted, its size overestimated.
    ds, truth, _ = synth.scaling_dataset("lock_hidden", seed=seed)
    ds.machine.nominal_freq_hz = None
    f = estima.fit_dataset(ds)
    assert f.anchor() is None
    e = f.predict(TARGETS)
    assert e.value[-1] > 1.3 * e.value[3]
    assert f.solve(64).chosen_by == "correlation"


def test_clock_option_anchors_a_plain_csv(cli, tmp_path):
    # The same program written as a plain CSV (no metadata, so no clock): predict warns that the
    # clock is unknown; with --clock it anchors the stalled cycles at 1/clock and is as accurate
    # as with a campaign that records the clock.
    ds, truth, _ = synth.scaling_dataset("lock_hidden", seed=0)
    cols = ["time_s"] + ds.stall_names
    lines = ["cores," + ",".join(cols)]
    for i, n in enumerate(ds.cores):
        lines.append(f"{n:g}," + ",".join(repr(float(ds.metrics[c][i])) for c in cols))
    p = tmp_path / "plain.csv"
    p.write_text("\n".join(lines) + "\n")
    args = ("predict", p, "--cores", "32,64", "--method", "estima", "--json")
    plain = cli(*args).json()
    assert any("clock frequency is unknown" in w for w in plain["warnings"])
    anchored = cli(*args, "--clock", str(synth.CLOCK_HZ / 1e9)).json()
    assert not any("clock frequency is unknown" in w for w in anchored["warnings"])
    assert anchored["models"]["scaling_factor"]["kernel"] == estima.ANCHORED
    t = np.array([q["time_s"] for q in anchored["predictions"]])
    assert np.max(np.abs(t / truth(np.array([32.0, 64.0])) - 1)) < 0.10
    assert plain["predictions"][-1]["time_s"] > 1.5 * t[-1]      # unanchored: far too slow at 64
    r = cli(*args, "--clock", "2500")
    assert r.code == 2 and "--clock 2500: give the clock frequency in GHz" in r.err


@pytest.mark.parametrize("seed", [0, 2, 3])
def test_lock_growing_quadratically_is_predicted_accurately(seed):
    ds, truth, _ = synth.scaling_dataset("lock", seed=seed)
    e = estima.fit_dataset(ds).predict(TARGETS)
    err = np.abs(e.value / truth(TARGETS) - 1)
    assert err.max() < 0.10, err


def test_bottleneck_ranking_names_the_lock():
    ds, _, _ = synth.scaling_dataset("lock_hidden", seed=0)
    f = estima.fit_dataset(ds)
    b = f.bottlenecks(TARGETS)
    assert [x.rank for x in b] == [1, 2, 3]
    assert b[0].category == "lock_wait_cycles"
    assert b[0].growth > 5 and "stops scaling" in b[0].verdict
    mem = next(x for x in b if x.category == "mem_stall_cycles")
    assert mem.growth < 0.5 and "scales" in mem.verdict
    assert b[0].share_target > b[0].share_measured
    assert sum(x.share[64.0] for x in b) == pytest.approx(1.0)
    d = b[0].to_dict()
    assert d["category"] == "lock_wait_cycles" and d["per_target"][-1]["cores"] == 64


@pytest.mark.parametrize("seed", [1, 3, 4])
def test_perfect_scaling_stays_near_linear(seed):
    ds, truth, _ = synth.scaling_dataset("perfect", seed=seed)
    t1 = truth(np.array([1.0]))[0]
    e = estima.fit_dataset(ds).predict(TARGETS)
    efficiency = t1 / (TARGETS * e.value)
    assert np.all(efficiency > 0.85), efficiency
    assert np.all(efficiency < 1.15), efficiency
    assert all(b.growth < 1.0 for b in estima.fit_dataset(ds).bottlenecks(TARGETS))


def test_time_is_scaling_factor_times_stalls_per_core():
    ds, _, _ = synth.scaling_dataset("memory", seed=0)
    f = estima.fit_dataset(ds)
    sv = f.solve(64.0)
    spc = sum(sel(TARGETS) for sel in sv.stalls.values()) / TARGETS
    assert np.allclose(f._spc(sv.stalls, TARGETS), spc)
    p = f.predict(TARGETS)
    assert np.allclose(p.value, sv.f(TARGETS) * spc)
    # every category extrapolated separately, each with its own kernel selection
    assert set(sv.stalls) == set(ds.stall_names)
    # measured scaling factor: time / stalls per core
    fn, fv = sv.f_points
    ag = ds.aggregate("time_s")
    meas = sum(ds.aggregate(k).value for k in ds.stall_names) / ag.cores
    assert np.allclose(fv, ag.value / meas)


def test_scaling_factor_chosen_by_correlation_with_stalls_per_core():
    ds, _, _ = synth.scaling_dataset("lock", seed=0)
    f = estima.fit_dataset(ds)
    sv = f.solve(64.0)
    s = f._spc(sv.stalls, sv.corr_range)
    s0 = min(c.score for c in sv.f.candidates)
    fn, fv = sv.f_points
    cands = [c for c in sv.f.per_kernel() if c.score <= estima.F_NEAR_FACTOR * s0]
    cands = [c for c in cands if np.all(c.fit(sv.corr_range) <= estima.F_RISE * fv.max())
             and np.all(c.fit(sv.corr_range) >= fv.min() / estima.F_FALL)] or cands
    best = max(cands, key=lambda c: _pearson(c.fit(sv.corr_range) * s, s))
    assert sv.f_choice.fit is best.fit
    assert sv.f_corr == pytest.approx(_pearson(best.fit(sv.corr_range) * s, s))
    assert sv.corr_range[0] == 12 and sv.corr_range[-1] == 64


def test_size_and_frequency_ratios():
    ds, _, _ = synth.scaling_dataset("lock", seed=0)
    base = estima.fit_dataset(ds).predict(TARGETS).value
    assert np.allclose(estima.fit_dataset(ds, size_ratio=2.0).predict(TARGETS).value, 2 * base)
    assert np.allclose(estima.fit_dataset(ds, freq_ratio=0.5).predict(TARGETS).value, 0.5 * base)
    st = estima.fit_dataset(ds, size_ratio=3.0).stalls(TARGETS)
    st1 = estima.fit_dataset(ds).stalls(TARGETS)
    assert np.allclose(st["lock_wait_cycles"][0], 3 * st1["lock_wait_cycles"][0])
    with pytest.raises(UserError, match="size-ratio"):
        estima.fit_dataset(ds, size_ratio=0)


def test_size_ratio_from_size_or_footprint():
    ds, _, _ = synth.scaling_dataset("perfect", seed=0, cores=[1, 2, 4, 8])
    with pytest.raises(UserError, match="no 'size' or 'rss_bytes'"):
        estima.size_ratio_for(ds, 10)
    d2 = ds.with_column("rss_bytes", np.full(len(ds), 1e9))
    assert estima.size_ratio_for(d2, 4e9) == pytest.approx(4.0)
    d3 = Dataset(cores=ds.cores, metrics=dict(ds.metrics), size=np.full(len(ds), 100.0), columns=ds.columns)
    assert estima.size_ratio_for(d3, 250) == pytest.approx(2.5)


def test_throughput_only_gives_throughput_predictions():
    ds, truth, _ = synth.scaling_dataset("lock", seed=0)
    dx, _, _ = synth.scaling_dataset("lock", seed=0, with_time=False)
    # Throughput has no unit of time: WorkStall cannot be anchored at 1/clock. Compared with
    # the time data without the anchor, the two are the same prediction.
    assert estima.fit_dataset(dx).anchor() is None and estima.fit_dataset(ds).anchor() is not None
    ds.machine.nominal_freq_hz = None
    pt = estima.fit_dataset(ds).predict(TARGETS)
    px = estima.fit_dataset(dx).predict(TARGETS)
    assert pt.metric == "time_s" and px.metric == "throughput"
    # median of 1/t equals 1/median of t with an odd count of repetitions
    assert np.allclose(px.value, 1 / pt.value, rtol=1e-6)
    assert np.all(px.low <= px.value) and np.all(px.value <= px.high)


def test_missing_values_and_thin_categories():
    ds, truth, _ = synth.scaling_dataset("lock", seed=0)
    m = dict(ds.metrics)
    lw = m["lock_wait_cycles"].copy()
    lw[ds.cores == 5] = np.nan                       # a run that produced no number
    m["lock_wait_cycles"] = lw
    thin = np.full(len(ds), np.nan)
    thin[ds.cores == 1] = 1e9
    thin[ds.cores == 2] = 2e9                        # measured at 2 core counts only
    m["thin_stall_cycles"] = thin
    cols = dict(ds.columns)
    cols["thin_stall_cycles"] = ColumnInfo("thin_stall_cycles", kind="stall", unit="cycles")
    d2 = Dataset(cores=ds.cores, metrics=m, repetition=ds.repetition, columns=cols, machine=ds.machine)
    f = estima.fit_dataset(d2)
    assert [c.name for c in f.categories] == ["mem_stall_cycles", "lock_wait_cycles", "branch_stall_cycles"]
    assert any("thin_stall_cycles" in w for w in f.warnings)
    p = f.predict(TARGETS)
    assert np.all(np.isfinite(p.value))
    assert np.abs(p.value / truth(TARGETS) - 1).max() < 0.15


def test_seconds_stalls_converted_with_the_clock():
    ds, _, _ = synth.scaling_dataset("lock", seed=0)
    m = dict(ds.metrics)
    m["lock_wait_s"] = m.pop("lock_wait_cycles") / synth.CLOCK_HZ
    cols = {k: v for k, v in ds.columns.items() if k != "lock_wait_cycles"}
    cols["lock_wait_s"] = ColumnInfo("lock_wait_s", kind="stall", unit="s")
    d2 = Dataset(cores=ds.cores, metrics=m, repetition=ds.repetition, columns=cols, machine=ds.machine)
    f = estima.fit_dataset(d2)
    lw = next(c for c in f.categories if c.name == "lock_wait_s")
    assert lw.unit == "cycles"
    assert np.allclose(lw.value, ds.aggregate("lock_wait_cycles").value)


def test_no_stalls_is_a_user_error():
    ds = Dataset(cores=[1, 2, 4, 8], metrics={"time_s": [8, 4.2, 2.3, 1.4]})
    with pytest.raises(UserError, match="needs stall categories"):
        estima.fit_dataset(ds)
    with pytest.raises(UserError, match="unknown stall category"):
        estima.fit_dataset(synth.scaling_dataset("lock")[0], categories=["nope"])


def test_several_sizes_use_one():
    ds, _, _ = synth.scaling_dataset("lock", seed=0)
    small, _, _ = synth.scaling_dataset("perfect", seed=0, cores=[1, 2, 4])
    rows = [dict(r, size=100.0) for r in ds.rows()] + [dict(r, size=10.0) for r in small.rows()]
    both = Dataset.from_rows(rows, columns=dict(ds.columns), machine=ds.machine)
    f = estima.fit_dataset(both)
    assert any("problem sizes" in w for w in f.series.warnings)
    assert len(f.series.cores) == 12
    f10 = estima.fit_dataset(both, size=10.0)
    assert list(f10.series.cores) == [1.0, 2.0, 4.0]
    with pytest.raises(UserError, match="3 or more"):
        estima.fit_dataset(both.select(both.cores <= 2), size=10.0)
    with pytest.raises(UserError, match="no rows of size 7"):
        estima.fit_dataset(both, size=7.0)


def test_paper_kernels_only():
    from corecast.model.kernels import PAPER_KERNELS
    ds, truth, _ = synth.scaling_dataset("memory", seed=0)
    f = estima.fit_dataset(ds, kernels=PAPER_KERNELS, work_stall=False)
    sv = f.solve(64)
    names = {s.kernel for s in sv.stalls.values()} | {sv.f.kernel}
    assert names <= {k.name for k in PAPER_KERNELS}
    assert np.all(np.isfinite(f.predict(TARGETS).value))
