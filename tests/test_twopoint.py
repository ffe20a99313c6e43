"""Predictions from two core counts: the bracket of the two-parameter laws through both points."""
from __future__ import annotations


import numpy as np
import pytest

from corecast import dataset as D
from corecast.model import predictors, twopoint

CLOCK = 2.0e9


def two_core_dataset(time: list[float], stalls: dict[str, list[float]] | None = None,
                     clock: float | None = CLOCK, reps: int = 3, noise: float = 0.0) -> D.Dataset:
    rows = []
    rng = np.random.default_rng(0)
    for i, n in enumerate((1, 2)):
        for r in range(reps):
            row = {"cores": n, "repetition": r, "time_s": time[i] * (1 + noise * rng.standard_normal())}
            for k, v in (stalls or {}).items():
                row[k] = v[i]
            rows.append(row)
    cols = {k: D.ColumnInfo(k, kind="stall", unit="cycles") for k in (stalls or {})}
    return D.Dataset.from_rows(rows, columns=cols, machine=D.Machine(nominal_freq_hz=clock))


def test_time_only_brackets_amdahl_and_the_power_law():
    a, b = 0.2, 0.8                                     # Amdahl: T = a + b/n
    ds = two_core_dataset([a + b, a + b / 2], reps=1)
    f = twopoint.fit_dataset(ds)                        # no prior: the two laws' geometric mean
    assert isinstance(f, twopoint.TwoPointFit)
    p = f.predict([64.0], level=0.8)
    amdahl = a + b / 64
    p_exp = np.log((a + b / 2) / (a + b)) / np.log(2)
    power = (a + b) * 64 ** p_exp
    assert p.metric == "time_s"
    assert p.high[0] == pytest.approx(amdahl, rel=1e-9)        # Amdahl saturates: the slower bound
    assert p.low[0] == pytest.approx(power, rel=1e-9)          # the power law keeps scaling
    assert p.value[0] == pytest.approx(np.sqrt(amdahl * power), rel=1e-9)
    assert twopoint.BAND_NOTE in p.warnings and twopoint.RETRO_NOTE in p.warnings


def test_auto_from_two_points_is_the_usl_with_the_corpus_coherency_share():
    from corecast.model import auto
    from corecast.model.priors import Priors
    n1, n2, x1, x2 = 8.0, 16.0, 100.0, 160.0
    ds = D.Dataset(cores=[n1, n2], metrics={"throughput": [x1, x2]})
    pri = Priors(coherency_share=0.25, band_growth_two=0.3)
    f = auto.fit_dataset(ds, priors=pri)
    assert isinstance(f, auto.PriorBand) and isinstance(f.fitted, twopoint.TwoPointFit)
    # by hand: overhead T at n2 split 3:1 between contention and coherency, through both points
    r, s = x2 / x1, n2 / n1
    u = 0.75 * (n1 - 1) / (n2 - 1) + 0.25 * n1 * (n1 - 1) / (n2 * (n2 - 1))
    T = (s - r) / (r - s * u)
    al, be = 0.75 * T / (n2 - 1), 0.25 * T / (n2 * (n2 - 1))
    g = x2 * (1 + T) / n2
    want = g * 64 / (1 + al * 63 + be * 64 * 63)
    p = f.predict([n1, n2, 64.0])
    assert p.value == pytest.approx([x1, x2, want], rel=1e-9)
    z = 1.2815515655446004                           # the 80% normal quantile
    s0 = twopoint.NOISE_FLOOR                        # one value per count: the noise floor
    h = z * max(s0, 0.3 * np.log(64 / 16))
    assert p.low[2] == pytest.approx(want * np.exp(-h), rel=1e-9)
    assert p.high[2] == pytest.approx(want * np.exp(h), rel=1e-9)
    # never a band of zero width: at the measured counts it is the noise
    assert p.low[1] == pytest.approx(x2 * np.exp(-z * s0), rel=1e-9) and p.high[1] > x2
    assert any("corpus' error growth" in w for w in p.warnings)
    # a decline only coherency can make: the share is raised to 1
    assert twopoint.fit_dataset(D.Dataset(cores=[8.0, 16.0], metrics={"throughput": [100.0, 60.0]}),
                                coherency_share=0.1)._usl()[3] == 1.0


def test_stall_model_brackets_linear_and_pairwise_contention():
    # work (core-s); lock cycles = k·n(n−1): at 2 cores a loss of 10% of the work, beyond the
    # noise one repetition is assumed to have (losttime.NOISE_FLOOR)
    W, k = 1.0, 1.0e8
    n = np.array([1.0, 2.0])
    S = k * n * (n - 1)
    T = W / n + S / (n * CLOCK)
    ds = two_core_dataset(list(T), {"lock_wait_cycles": list(S)}, reps=1)
    f = predictors.fit("auto", ds)
    assert f.uses_stalls and f.work == pytest.approx(W, rel=1e-9)
    target = np.array([8.0, 64.0])
    p = f.fitted.predict(target)                         # the stall model's own bracket
    pairwise = W / target + k * target * (target - 1) / (target * CLOCK)
    linear = W / target + (S[1] * (target - 1)) / (target * CLOCK)
    assert p.high == pytest.approx(pairwise, rel=1e-9)
    assert p.low == pytest.approx(linear, rel=1e-9)
    assert np.all(p.low < p.value) and np.all(p.value < p.high)
    # auto's band: that bracket united with the corpus' error growth (and the noise)
    q = f.predict(target)
    assert q.value == pytest.approx(p.value, rel=1e-12)
    assert np.all(q.low <= p.low) and np.all(q.high >= p.high)
    # ... the corpus' conformal band (auto.PriorBand.band) united with the bracket, never
    # narrower than z·max(noise, g0·ln(n/n2))
    x_lo, x_hi = f.band(1.0 / p.value, target / 2.0, {"growth": f.growth}, 0.8)
    assert q.low == pytest.approx(np.minimum(p.low, 1.0 / x_hi), rel=1e-9)
    assert q.high == pytest.approx(np.maximum(p.high, 1.0 / x_lo), rel=1e-9)
    h = twopoint.prior_half_width(target, 2.0, f.growth, 0.8, f.noise)
    assert np.all(q.low <= p.value * np.exp(-h) * (1 + 1e-12))
    assert np.all(q.high >= p.value * np.exp(h) * (1 - 1e-12))
    b = f.bottlenecks(target)
    assert b[0].category == "lock_wait_cycles" and b[0].growth > 1.5
    assert "scaling bottleneck" in b[0].verdict


def test_steep_growth_is_capped_and_still_meets_the_last_point():
    ds = two_core_dataset([1.0, 0.6], {"runq_cycles": [1e6, 3.2e7]}, reps=1)   # n^5 from 1 to 2
    # (their growth is 8% of the core-time lost: auto would not use them, see losttime)
    f = twopoint.fit_dataset(ds, use_stalls=True)
    st = f.stalls[0]
    assert st.raw_exponent == pytest.approx(5.0) and st.exponent == 2.0
    for law in st.laws(np.array([2.0])).values():
        assert law[0] == pytest.approx(3.2e7)
    assert any("grows as n^5.0" in w and "n^2 at most" in w for w in f.warnings)


def test_steep_growth_of_a_charged_part_says_it_is_the_charged_part():
    # condition waits flat at 5 s a run, but the runs lost core-time only at 2 cores: the part
    # charged to time grows as n^10; the warning said "stall category 'cond_wait_cycles' grows
    # as n^10", which the flat measured waits contradict
    rows = []
    for n, t, u in ((1, 10.0, 9.999), (2, 5.5, 10.0)):
        for r in range(3):
            f = 1 + 0.002 * (r - 1)
            rows.append({"cores": n, "repetition": r, "time_s": t * f, "user_s": u * f, "sys_s": 0.0,
                         "cond_wait_cycles": 5.0 * CLOCK})
    cols = {"cond_wait_cycles": D.ColumnInfo("cond_wait_cycles", kind="stall", unit="cycles", source="shim")}
    ds = D.Dataset.from_rows(rows, columns=cols, machine=D.Machine(nominal_freq_hz=CLOCK))
    f = twopoint.fit_dataset(ds, use_stalls=True)
    steep = [w for w in f.warnings if "grows as n^" in w]
    assert len(steep) == 1 and steep[0].startswith("the part of stall category 'cond_wait_cycles' charged to time")


def test_unknown_clock_falls_back_to_time_laws():
    ds = two_core_dataset([1.0, 0.6], {"lock_wait_cycles": [0, 1e7]}, clock=None, reps=1)
    f = predictors.fit("auto", ds)
    assert not f.uses_stalls
    assert any("clock frequency is unknown" in w for w in f.warnings)
    assert f.bottlenecks([8]) == []


def test_cli_predicts_from_two_core_counts_and_explicit_methods_say_why_not(cli, tmp_path):
    p = tmp_path / "two.csv"
    p.write_text("cores,time_s\n1,1.0\n2,0.55\n")
    r = cli("predict", p, "--cores", "4,16", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["method"] == "auto" and doc["chosen"] == ["two-point"]
    assert [q["cores"] for q in doc["predictions"]] == [4, 16]
    for q in doc["predictions"]:
        assert q["low"] <= q["time_s"] <= q["high"]
        assert q["throughput"] == pytest.approx(1 / q["time_s"])
    assert any("the band is the corpus' error growth" in w for w in doc["warnings"])
    r = cli("predict", p, "--cores", "16", "--method", "timex")
    assert r.code == 2 and "`--method auto` gives a two-point estimate" in r.err
    r = cli("predict", p, "--cores", "16", "--plot", tmp_path / "two.png")
    assert r.code == 0 and (tmp_path / "two.png").read_bytes().startswith(b"\x89PNG")


def test_auto_keeps_the_size_asked_for():
    # Two problem sizes, each at 1 and 2 cores: --size picks the rows the two-point predictor
    # fits (it used to fall back to the size measured at the most core counts, here the larger).
    rows = [{"cores": n, "size": s, "time_s": t} for s, ts in ((10.0, (4.0, 2.5)), (20.0, (8.0, 4.0)))
            for n, t in zip((1, 2), ts)]
    ds = D.Dataset.from_rows(rows)
    small = predictors.fit("auto", ds, size=10.0)
    assert isinstance(small.fitted, twopoint.TwoPointFit)
    assert small.series.time.tolist() == [4.0, 2.5]
    assert not any("problem sizes" in w for w in small.warnings)
    large = predictors.fit("auto", ds)
    assert large.series.time.tolist() == [8.0, 4.0]
    assert any("2 problem sizes in the data; using size 20" in w for w in large.warnings)


def test_barrier_and_condition_waits_are_bracketed_by_a_fixed_and_a_growing_imbalance_never_pairwise():
    # waits for the slowest: with a fixed imbalance delta the threads' total wait is
    # W·delta·(1 - 1/n) -- the law through (1, 0) and (2, s2) that saturates is exact for it
    StallLaw = twopoint.StallLaw
    W, delta = 4e9, 0.2
    n = np.array([4.0, 16.0, 64.0])
    b = StallLaw("barrier_wait_cycles", np.array([1.0, 2.0]), np.array([0.0, W * delta * 0.5]))
    laws = b.laws(n)
    np.testing.assert_allclose(laws["k(1−n₁/n)"], W * delta * (1 - 1 / n))
    np.testing.assert_allclose(laws["k(n−n₁)"], W * delta * 0.5 * (n - 1))
    mid, lo, hi = b.bracket(n)
    assert np.all(lo < mid) and np.all(mid < hi)
    # a lock's waits that appear keep the pairwise law (contention of every core with every other)
    lk = StallLaw("lock_wait_cycles", np.array([1.0, 2.0]), np.array([0.0, 1e8]))
    assert "k·n(n−n₁)" in lk.laws(n)
    # a condition's waits are a thread asleep until a producer or a signal: idle cores, as at a
    # barrier, never pairwise (xz -T -6 on 81 MB, 1-2 cores on the 2-vCPU VM, was predicted
    # 29.9 s at 64 cores against 25.7 s measured at 2 through the pairwise law)
    cw = StallLaw("cond_wait_cycles", np.array([1.0, 2.0]), np.array([0.0, 1e8]))
    assert set(cw.laws(n)) == {"k(1−n₁/n)", "k(n−n₁)"}
    _, _, hi = cw.bracket(n)
    np.testing.assert_allclose(hi, 1e8 * (n - 1))
    # measured at both counts and growing faster than the cores: at most linear for these, up to
    # pairwise for a lock's
    assert StallLaw("cond_wait_cycles", np.array([1.0, 2.0]), np.array([1e7, 8e7])).exponent == 1.0
    assert StallLaw("barrier_wait_cycles", np.array([1.0, 2.0]), np.array([1e7, 8e7])).exponent == 1.0
    assert StallLaw("lock_wait_cycles", np.array([1.0, 2.0]), np.array([1e7, 8e7])).exponent == 2.0


def test_a_peak_that_only_the_prior_makes_is_said_with_where_it_comes_from():
    # xz -T at 1 and 2 cores on the 2-vCPU VM: 0.357 and 0.194 s (1.84x). The USL through both
    # with the corpus' coherency share (0.2) peaks near 10 cores and is slower beyond; the
    # output said only that two points "cannot show coherency costs"
    ds = two_core_dataset([0.357, 0.194], reps=1)
    f = twopoint.fit_dataset(ds, coherency_share=0.2)
    a, b, _, _ = f._usl()
    peak = np.sqrt((1 - a) / b)
    assert 8 < peak < 12
    p = f.predict([4.0, 8.0, 64.0])
    assert p.value[2] > p.value[1]                       # slower at 64 than at 8
    note = next(w for w in p.warnings if "peaks near" in w)
    assert f"peaks near {peak:.0f} cores" in note and "20%" in note and "prior" in note
    assert twopoint.RETRO_NOTE not in p.warnings
    # within the counts before the peak, or without the prior, the general note stays
    assert twopoint.RETRO_NOTE in f.predict([4.0, 8.0]).warnings
    assert not any("peaks near" in w for w in twopoint.fit_dataset(ds).predict([64.0]).warnings)


def test_two_counts_up_to_4_cores_take_the_low_pairs_share():
    """Two counts of at most LOW_PAIR_MAX cores (a program measured on a small machine) take
    `coherency_share_low`; larger pairs `coherency_share`. With the low share 0, the prediction
    from 1 and 2 cores is Amdahl's law through both points (no peak the prior alone makes)."""
    from corecast.model import auto
    from corecast.model.priors import LOW_PAIR_MAX, Priors, load
    pri = Priors(coherency_share=0.3, coherency_share_low=0.0)
    assert pri.share_for(LOW_PAIR_MAX) == 0.0 and pri.share_for(2 * LOW_PAIR_MAX) == 0.3
    t1, t2 = 0.398, 0.226                                  # xz -T on the VM, where the waits did not explain the loss
    small = auto.fit_dataset(two_core_dataset([t1, t2], reps=1), priors=pri)
    b = (t1 - t2) / (1 - 0.5)
    a = t1 - b
    p = small.predict([8.0, 64.0])
    assert p.value == pytest.approx([a + b / 8, a + b / 64], rel=1e-9)     # time: Amdahl's law
    assert not any("peaks near" in w for w in p.warnings)
    big = D.Dataset(cores=[8.0, 16.0], metrics={"throughput": [100.0, 160.0]})
    fb = auto.fit_dataset(big, priors=pri)
    assert fb.fitted.coherency_share == 0.3 and fb.fitted._usl()[1] > 0
    # the shipped priors learned both, and they differ: the corpus tells the two regimes apart
    shipped = load()
    assert shipped.coherency_share_low != shipped.coherency_share


def test_a_campaign_that_scales_linearly_is_not_told_its_stalls_explain_a_loss():
    """stress-ng --cpu on the 2-vCPU VM (no waits at all, 0.049 ± 0.029 core-s lost at 2 cores)
    got 'the stall categories ... explain the loss': there was no loss beyond the noise, and no
    wait. The reason says so; a loss the waits do account for keeps the old words."""
    def campaign(t2: float, wait2: float) -> D.Dataset:
        rows = []
        for n, t, w in ((1, 1.0, 0.0), (2, t2, wait2)):
            for r in range(3):
                f = 1 + 0.01 * (r - 1)
                rows.append({"cores": n, "repetition": r, "time_s": t * f, "user_s": 1.0 * f, "sys_s": 0.0,
                             "lock_wait_cycles": w, "lock_wait_idle_cycles": w})
        cols = {"lock_wait_cycles": D.ColumnInfo("lock_wait_cycles", kind="stall", unit="cycles", source="shim"),
                "lock_wait_idle_cycles": D.ColumnInfo("lock_wait_idle_cycles", kind="counter", unit="cycles",
                                                      source="shim")}
        return D.Dataset.from_rows(rows, columns=cols, machine=D.Machine(nominal_freq_hz=CLOCK))

    f = twopoint.fit_dataset(campaign(0.5, 0.0))
    assert f.uses_stalls
    reason = f.predict([4.0]).params["reason"]
    assert "no core-time lost to imperfect scaling beyond the noise at 2 cores" in reason
    assert "explain the loss" not in reason
    g = twopoint.fit_dataset(campaign(0.7, 0.4 * 2 * CLOCK))         # 0.4 core-s lost, all of it waited idle
    assert g.uses_stalls
    assert "explain the loss" in g.predict([4.0]).params["reason"]


def test_an_added_core_that_slept_through_the_run_predicts_no_speed_up():
    """xz -T on one block, 1-2 cores on the 2-vCPU VM: the second thread waited on a condition
    99% of the 2-core run, which was no faster (12.2 s, 12.7 s), and the geometric mean of the
    saturating and the growing law predicted 2.1 s at 64 cores. The added core's idle share
    weighs the growing law; a small share keeps the geometric mean."""
    T, idle = 1.0, 0.95
    ds = two_core_dataset([T, T], {"cond_wait_cycles": [0.0, idle * T * CLOCK]}, reps=1)
    f = twopoint.fit_dataset(ds)
    assert f.uses_stalls
    (cw,) = f.stalls
    assert cw.linear_weight == pytest.approx(idle)
    n = np.array([4.0, 16.0, 64.0])
    p = f.predict(n)
    # no more than the speed-up the added cores' working 5% allows (0.95 T at 64 cores by the growing
    # law alone; the saturating one keeps 5% of the weight): the 2-core run showed none
    assert np.all(p.value >= 0.75 * T) and p.value[0] >= 0.9 * T
    assert any("waited 95% of the run at 2 cores" in w for w in p.warnings)
    # the geometric mean it replaces predicted a speed-up of 2.6x at 16 cores and more beyond
    geo = twopoint.StallLaw(cw.name, cw.n, cw.s)
    assert geo.linear_weight == 0.5
    t_geo = f.work / n + geo.bracket(n)[0] / (n * CLOCK)
    assert np.all(t_geo[1:] < 0.5 * T)
    # the band still holds both laws
    _, lo, hi = cw.bracket(n)
    assert np.all(p.low <= f.work / n + lo / (n * CLOCK) + 1e-12)
    assert np.all(p.high >= f.work / n + hi / (n * CLOCK) - 1e-12)
    # a small idle share (a third of the added core's time, and a 1.7x speed-up) keeps the geometric mean
    g = twopoint.fit_dataset(two_core_dataset([1.0, 0.6], {"cond_wait_cycles": [0.0, 0.2 * CLOCK]}, reps=1))
    (cw2,) = g.stalls
    assert cw2.linear_weight == 0.5
    laws = cw2.laws(n)
    np.testing.assert_allclose(cw2.bracket(n)[0], np.sqrt(laws["k(1−n₁/n)"] * laws["k(n−n₁)"]))
    assert not any("of the run at" in w for w in g.predict(n).warnings)
