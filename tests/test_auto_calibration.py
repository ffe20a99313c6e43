"""`auto`'s combination and calibrated band; the member laws; calibrated bands of single methods."""
import warnings

import numpy as np
import pytest

from corecast.dataset import Dataset, load
from corecast.model import auto, calibration, laws, predictors, priors, usl
from corecast.model.evaluate import evaluate


def _usl_draws(seed: int, draws: int):
    """Throughput-only datasets of random USL laws, 12 core counts x 3 repetitions, 1-5% noise,
    with a fresh noisy measurement at the targets."""
    rng = np.random.default_rng(seed)
    targets = np.array([16.0, 24, 32, 48])
    for _ in range(draws):
        a = rng.uniform(0.0, 0.08)
        b = 10 ** rng.uniform(-5, -3) if rng.random() < 0.7 else 0.0
        g = rng.uniform(50, 200)
        noise = rng.uniform(0.01, 0.05)
        N = np.repeat(np.arange(1, 13, dtype=float), 3)
        X = usl.usl(N, a, b, g) * np.exp(rng.normal(0, noise, len(N)))
        truth = usl.usl(targets, a, b, g) * np.exp(rng.normal(0, noise, len(targets)))
        yield Dataset(cores=N, metrics={"throughput": X}), targets, truth


def test_calibrated_band_covers_about_its_level_on_noisy_draws():
    inside, width, err = [], [], []
    for ds, targets, truth in _usl_draws(seed=3, draws=40):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            p = auto.fit_dataset(ds).predict(targets, 0.8)
        inside += list((p.low <= truth) & (truth <= p.high))
        width += list(np.log(p.high / p.low) / 2)
        err += list(np.abs(p.value / truth - 1))
    cov = float(np.mean(inside))
    # Measured: 0.925-0.956 over seeds 1-4 and 12345 (160 points each), median half-width
    # 0.25-0.27, with the conformal band the corpus learned out of sample (issue 23; 0.95-0.99
    # and 0.20-0.21 with the t-based band learned in sample before): conservative on pure USL
    # draws, because the band is calibrated on real curves, whose held-out errors are larger,
    # and the laws' disagreement widens it. A band that ignored the distance of extrapolation or
    # the members' disagreement falls well below (0.70 on the real data); one that is merely
    # wider is caught by the half-width bound.
    assert 0.75 <= cov <= 0.995, cov
    assert np.median(width) < 0.30            # not a trivially wide band (relative half-width)
    assert np.median(err) < 0.10


def test_band_grows_with_the_distance_and_the_members_disagreement(data_dir):
    ds = load(data_dir / "usl" / "raytracer.csv")
    a = auto.fit_dataset(ds.select(ds.cores <= 24))
    cal = a.calibration()
    assert cal is not None and cal.points >= 4 and cal.growth > 0 and cal.noise > 0
    p = a.predict([28.0, 32, 48, 64, 128])
    rel = np.log(p.high / p.low)
    assert np.all(np.diff(rel) > 0)
    assert np.all(p.low <= p.value) and np.all(p.value <= p.high)
    doc = a.models(128.0)["auto"]
    assert doc["band"]["calibration_points"] == cal.points
    pri = priors.load()
    assert set(doc["weights"]) == {pri.default} | ({pri.partner} if pri.partner else set())
    assert doc["band"]["prior_growth"] == pri.band_growth


@pytest.mark.parametrize("name,K,old", [("raytracer", 20, 26.1), ("raytracer", 24, 26.7),
                                        ("specsdm91", 72, 25.8), ("clients_without_n1", 16, 31.3)])
def test_auto_shrinks_the_usls_coherency_where_it_predicted_a_decline(data_dir, name, K, old):
    # The first increment selected one method on one or two validation points: the USL on a
    # noisy validation predicted a decline that never came (raytracer <= 24: 26.7% MAPE, 46%
    # at 64 cores; every band missed). auto's default now blends the USL with Amdahl's law
    # (its coherency term shrunk, by the weight the corpus favours): at most the USL's error
    # here. (Its band, set by the corpus, still misses raytracer's last points from 24 cores:
    # docs/predict.md says so.)
    ds = load(data_dir / "usl" / f"{name}.csv")
    ev = evaluate(ds, K, methods=["auto", "usl"])
    m, u = ev.get("auto"), ev.get("usl")
    assert m.ok and u.ok
    assert m.mape <= u.mape + 1e-9 and m.mape < old, (m.mape, u.mape, old)


def test_member_laws_recover_their_laws():
    n = np.arange(1, 13, dtype=float)
    # power law on throughput, exact
    ds = Dataset(cores=n, metrics={"throughput": 7.0 * n ** 0.8})
    f = laws.fit_power(ds)
    assert f.p == pytest.approx(0.8) and f.c == pytest.approx(7.0)
    assert f.predict([64.0]).value[0] == pytest.approx(7.0 * 64 ** 0.8)
    assert list(f.n_fit) == list(n[6:])     # the upper half
    # superlinear data: the exponent is capped at 1 (no superlinear extrapolation)
    f = laws.fit_power(Dataset(cores=n, metrics={"throughput": n ** 1.2}))
    assert f.p == laws.POWER_MAX_EXPONENT
    # PMNF of the throughput: c0 + c1 n^(1/2)
    f = laws.fit_pmnf(Dataset(cores=n, metrics={"time_s": 1.0 / (3.0 + 2.0 * np.sqrt(n))}))
    assert f.fit.extra == {"i": 0.5, "j": 0.0}
    p = f.predict([100.0])
    assert p.metric == "time_s" and p.value[0] == pytest.approx(1.0 / 23.0)
    # Amdahl's law: the USL with beta = 0
    X = 10 * n / (1 + 0.05 * (n - 1))
    f = laws.fit_amdahl(Dataset(cores=n, metrics={"throughput": X}))
    assert f.fit.beta == 0.0 and f.fit.alpha == pytest.approx(0.05, rel=1e-4)
    assert f.models()["throughput"]["kernel"] == "Amdahl"


def test_pmnf_with_a_throughput_that_turns_negative_is_left_out():
    # Falling throughput: the PMNF term fitted (200 - 10 n) is below zero at 200 cores; the
    # member refuses to predict there and auto leaves it out of the combination, saying so.
    n = np.arange(1, 13, dtype=float)
    X = 200 - 10 * n
    ds = Dataset(cores=n, metrics={"throughput": X})
    f = laws.fit_pmnf(ds)
    with pytest.raises(Exception):
        f.predict([200.0])
    a = auto.fit_dataset(ds, priors=priors.Priors(default="usl", partner="pmnf", default_weight=0.5,
                                                  switch_ratio=1e9))
    assert set(a.weights) == {"usl", "pmnf"}
    p = a.predict([200.0])
    assert p.params["chosen"] == ["usl"] and any("pmnf left out" in w for w in p.warnings)
    assert p.value[0] == pytest.approx(a.fits["usl"].predict([200.0]).value[0])


def test_single_method_bands_are_calibrated_on_their_own_errors():
    rng = np.random.default_rng(7)
    n = np.repeat(np.arange(1, 13, dtype=float), 3)
    t = (100 / n + 2) * np.exp(rng.normal(0, 0.03, len(n)))
    ds = Dataset(cores=n, metrics={"time_s": t})
    raw = predictors.fit("timex", ds)
    cal = predictors.fit("timex", ds, calibrate=True)
    assert isinstance(cal, calibration.CalibratedFit)
    assert cal.validation and {v.method for v in cal.validation} == {"timex"}
    c = cal.calibration()
    targets = [16.0, 32, 64]
    p, q = cal.predict(targets), raw.predict(targets)
    assert np.allclose(p.value, q.value)                     # same prediction, another band
    assert p.params["band"]["calibrated"] and p.params["band"]["calibration_points"] == c.points
    h = np.log(p.high / p.value)
    # the noise at least; growth with the distance only where the validation errors exceed
    # the noise (here the law fits: they do not)
    assert np.all(h > 0) and np.all(np.diff(h) >= 0)
    assert h[0] == pytest.approx(c.half_width(np.zeros(1), np.zeros(1), 0.8)[0])
    assert cal.models(64.0) == raw.models(64.0)              # everything else passes through
