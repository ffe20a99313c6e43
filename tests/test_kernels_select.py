"""ESTIMA's checkpoint selection."""
import numpy as np
import pytest

from corecast.model import kernels as K
from corecast.model.select import SelectionError, default_checkpoints, select


def test_default_checkpoints():
    assert [default_checkpoints(m) for m in range(3, 14)] == [0, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4]
    for m in range(4, 30):
        assert m - default_checkpoints(m) >= 3


def test_fits_prefixes_and_scores_at_checkpoints():
    n = np.arange(1, 13, dtype=float)
    y = 10 / n + 0.5 + 0.05 * n
    sel = select(n, y, 64)
    assert sel.checkpoints == 4
    # every candidate was fitted on the first i points, 3 <= i <= m - c
    assert all(3 <= c.points <= 8 for c in sel.candidates)
    assert all(np.array_equal(c.fit.n, n[:c.points]) for c in sel.candidates)
    # the exact law wins, validated on the 4 checkpoints, and extrapolates exactly
    assert sel.best.score < 1e-8
    far = np.array([32.0, 64.0])
    assert np.allclose(sel(far), 10 / far + 0.5 + 0.05 * far, rtol=1e-6)
    # checkpoint RMSE is what it says
    c = sel.best
    r = c.fit(n[-4:]) - y[-4:]
    assert c.score == pytest.approx(np.sqrt(np.mean(r * r)), abs=1e-12)


def test_selection_prefers_the_true_law_under_noise():
    rng = np.random.default_rng(0)
    n = np.arange(1, 13, dtype=float)
    truth = lambda n: 0.2 * n**2 + 1.0
    y = truth(n) * np.exp(rng.normal(0, 0.01, len(n)))
    sel = select(n, y, 48)
    assert abs(sel(np.array([48.0]))[0] / truth(48.0) - 1) < 0.15


def test_unrealistic_fits_are_rejected_and_counted():
    n = np.arange(1, 13, dtype=float)
    y = 100.0 - 7.0 * n + 0.0 * n      # a straight line that goes negative beyond 14
    sel = select(n, y, 64, nonneg=True)
    assert np.all(sel(np.linspace(1, 64, 200)) >= 0)
    assert sel.rejected, "the exact straight line goes negative and must be rejected"


def test_no_realistic_fit_is_an_error():
    n = np.arange(1, 8, dtype=float)
    y = -np.ones_like(n)
    with pytest.raises(SelectionError):
        select(n, y, 16, positive=True)


def test_refit_on_all_points():
    n = np.arange(1, 13, dtype=float)
    y = 3 + 2 * n**0.5
    sel = select(n, y, 32, kernels=[K.POWERLAW, K.LINEAR], use="all")
    assert sel.final.n_points == 12
    assert sel.best.points <= 8


def test_band_contains_prediction_and_widens():
    rng = np.random.default_rng(1)
    n = np.arange(1, 13, dtype=float)
    y = (10 / n + 1) * np.exp(rng.normal(0, 0.02, len(n)))
    sel = select(n, y, 128, positive=True)
    t = np.array([16.0, 32.0, 64.0, 128.0])
    p, lo, hi = sel.band(t, 0.8)
    assert np.all(lo <= p) and np.all(p <= hi) and np.all(lo > 0)
    w = np.log(hi / lo)
    assert np.all(np.diff(w) >= -1e-12)
    _, lo9, hi9 = sel.band(t, 0.95)
    assert np.all(hi9 >= hi - 1e-12) and np.all(lo9 <= lo + 1e-12)


def test_three_points_use_kernels_with_a_residual():
    n = np.array([1.0, 2.0, 4.0])
    y = np.array([10.0, 5.5, 3.2])
    sel = select(n, y, 16, positive=True)
    assert sel.checkpoints == 0
    assert all(c.fit.kernel.n_params < 3 for c in sel.candidates)


def test_too_few_points():
    with pytest.raises(SelectionError):
        select([1, 2], [1, 2], 8)
