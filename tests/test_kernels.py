"""Kernels: each recovers its own law; fitting is robust; realism checks reject what ESTIMA rejects."""
import numpy as np
import pytest

from corecast.model import kernels as K

N = np.arange(1, 13, dtype=float)

LAWS = {
    "Rat22": ((1 + 2 * N + 0.3 * N**2) / (1 + 0.1 * N + 0.02 * N**2), {"a0": 1, "a1": 2, "a2": 0.3, "b1": 0.1, "b2": 0.02}),
    "Rat23": ((2 + N + 0.5 * N**2) / (1 + 0.2 * N + 0.01 * N**2 + 0.001 * N**3), {"a2": 0.5, "b3": 0.001}),
    "Rat33": ((1 + 2 * N + 0.3 * N**2 + 0.05 * N**3) / (1 + 0.1 * N + 0.02 * N**2 + 0.004 * N**3), {"a3": 0.05, "b3": 0.004}),
    "CubicLn": (1 + 0.5 * np.log(N) + 0.2 * np.log(N)**2 - 0.01 * np.log(N)**3, {"a": 1, "b": 0.5, "c": 0.2, "d": -0.01}),
    "ExpRat": ((2 + 0.5 * N) / np.exp(0.05 * N), {"a": 2, "b": 0.5, "d": 0.05}),
    "Poly25": (1 + 0.5 * N + 0.1 * N**2 + 0.01 * N**2.5, {"a": 1, "b": 0.5, "c": 0.1, "d": 0.01}),
    "PowerLaw": (3 + 2 * N**-1.3, {"a": 3, "b": 2, "p": -1.3}),
    "Amdahl": (0.5 + 10 / N, {"a": 0.5, "b": 10}),
    "USL": (10 / N + 0.5 + 0.05 * N, {"a": 10, "b": 0.5, "c": 0.05}),
    "Linear": (3 + 2 * N, {"a": 3, "b": 2}),
    "Quadratic": (3 + 2 * N - 0.1 * N**2, {"c": -0.1}),
    "Rat11": ((1 + 3 * N) / (1 + 0.2 * N), {"a1": 3, "b1": 0.2}),
    "Rat12": ((5 * N) / (1 + 0.05 * N + 0.01 * N**2), {"a1": 5, "b2": 0.01}),
}


def test_paper_kernels_are_table_1():
    assert [k.name for k in K.PAPER_KERNELS] == ["Rat22", "Rat23", "Rat33", "CubicLn", "ExpRat", "Poly25"]
    assert {k.name for k in K.PAPER_KERNELS} <= {k.name for k in K.DEFAULT_KERNELS}


@pytest.mark.parametrize("name", sorted(LAWS))
def test_kernel_recovers_its_law(name):
    y, params = LAWS[name]
    f = K.fit_kernel(K.kernel(name), N, y)
    assert f is not None
    assert np.max(np.abs(f(N) / y - 1)) < 1e-4
    for p, v in params.items():
        assert f.params[p] == pytest.approx(v, rel=2e-3, abs=2e-5), (p, f.params)
    # It extrapolates the law, not just interpolates it.
    far = np.array([24.0, 48.0])
    truth_far = {"Rat22": lambda n: (1 + 2 * n + 0.3 * n**2) / (1 + 0.1 * n + 0.02 * n**2)}.get(name)
    if truth_far:
        assert np.allclose(f(far), truth_far(far), rtol=1e-4)


def test_pmnf_finds_exponents():
    y = 2 + 0.3 * N**1.5 * np.log2(N)
    f = K.fit_kernel(K.PMNF, N, y)
    assert (f.params["i"], f.params["j"]) == (1.5, 1.0)
    assert f.params["c1"] == pytest.approx(0.3)


def test_exprat_absorbs_c_into_a_b():
    # (a + b n) / e^(c + d n) with c != 0 is the same family with a, b scaled by e^-c.
    y = (2 + 0.5 * N) / np.exp(0.7 + 0.05 * N)
    f = K.fit_kernel(K.EXPRAT, N, y)
    assert f.params["c"] == 0.0
    assert f.params["a"] == pytest.approx(2 * np.exp(-0.7), rel=1e-3)
    assert np.allclose(f(N), y, rtol=1e-4)


def test_fitting_is_scale_invariant():
    y, _ = LAWS["Rat22"]
    for s in (1e-9, 1.0, 1e12):
        f = K.fit_kernel(K.RAT22, N, y * s)
        assert np.allclose(f(N), y * s, rtol=1e-6)


def test_bounded_kernels_keep_coefficients_non_negative():
    # Throughput-like rising series: unconstrained a + b/n would need b < 0.
    y = 1.0 - 0.5 / N
    f = K.fit_kernel(K.AMDAHL, N, y)
    assert min(f.params.values()) >= 0
    g = K.fit_kernel(K.USL_TIME, N, y)
    assert min(g.params.values()) >= 0


def test_underdetermined_kernels_are_regularised():
    n = N[:5]
    y = (1 + 2 * n) / (1 + 0.1 * n)
    f = K.fit_kernel(K.RAT33, n, y)       # 7 parameters, 5 points
    assert f is not None and f.regularised
    assert np.all(np.isfinite(f(np.linspace(1, 12, 50))))
    assert np.allclose(f(n), y, rtol=1e-3)
    assert not K.fit_kernel(K.RAT22, N, LAWS["Rat22"][0]).regularised


def test_noisy_fits_stay_finite():
    rng = np.random.default_rng(3)
    y = LAWS["Rat22"][0] * np.exp(rng.normal(0, 0.05, len(N)))
    for k in K.ALL_KERNELS:
        if k.nonneg:
            continue      # Amdahl/USL time forms cannot rise; bounded on purpose
        f = K.fit_kernel(k, N, y)
        assert f is not None, k.name
        assert np.all(np.isfinite(f(N))), k.name
        rel = np.sqrt(np.mean((f(N) / y - 1) ** 2))
        assert rel < 0.5, (k.name, rel)


# ------------------------------------------------------------------ realism
def _fit(kernel, theta, n=N):
    return K.KernelFit(kernel, np.asarray(theta, dtype=float), n, np.ones_like(n), 0.0)


def test_realism_rejects_a_pole_in_range():
    # Denominator 1 - 0.05 n vanishes at n = 20.
    f = _fit(K.RAT11, [1.0, 1.0, -0.05])
    assert K.realism(f, K.check_grid(1, 16)) is None
    why = K.realism(f, K.check_grid(1, 32))
    assert why is not None and ("pole" in why or "sign" in why)


def test_realism_rejects_a_pole_between_grid_points():
    # Double root at n = 20.5: the denominator touches zero without changing sign.
    b1, b2 = -2 / 20.5, 1 / 20.5**2
    f = _fit(K.RAT12, [1.0, 1.0, b1, b2])
    why = K.realism(f, K.check_grid(1, 32))
    assert why is not None and "pole" in why


def test_realism_rejects_negative_and_accepts_positive():
    f = _fit(K.LINEAR, [10.0, -0.5])          # crosses zero at n = 20
    assert K.realism(f, K.check_grid(1, 16)) is None
    assert "negative" in K.realism(f, K.check_grid(1, 64))
    g = _fit(K.LINEAR, [0.0, 1.0])
    assert K.realism(g, K.check_grid(1, 64)) is None
    assert K.realism(g, K.check_grid(0.5, 64), positive=True) is None
    h = _fit(K.LINEAR, [-1.0, 1.0])          # zero at n = 1
    assert "not positive" in K.realism(h, K.check_grid(1, 64), positive=True)


def test_realism_rejects_non_finite():
    f = _fit(K.EXPRAT, [1.0, 1.0, 0.0, -50.0])   # e^(50 n) overflows
    assert K.realism(f, K.check_grid(1, 64)) == "not finite"


def test_unknown_kernel_name():
    with pytest.raises(KeyError, match="unknown kernel"):
        K.kernel("Rat99")
