"""Privacy accounting of the PNBM paper: noise scale per iteration, the subsampling bound, B, κ, and H of eq. (11)."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib import nbm
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.nbm import accounting as acc
from dpmf_lib.nbm.model import init_similarity
from dpmf_lib.validate import generator as as_generator


def test_noise_scale_formula_by_hand():
    # t = 1, φ = 4, C = 10: clamp 0.5 + 3/2 = 2, ΔF = 2·2·4/10 = 1.6; ε = 1, K = 10, γ = 0.2: ε^(t) = 0.5 → b = 3.2
    assert acc.error_clamp(1, 4.0) == 2.0
    assert math.isclose(acc.sensitivity(1, 4.0, 10.0), 1.6)
    assert math.isclose(acc.epsilon_per_iteration(1.0, 10, 0.2), 0.5)
    assert math.isclose(acc.laplace_scale(1, 1.0, 10, 0.2, 4.0, 10.0), 3.2)
    # t = 5, C = 15: clamp 0.5 + 3/6 = 1, ΔF = 2·1·4/15
    assert math.isclose(acc.laplace_scale(5, 2.0, 4, 1.0, 4.0, 15.0), (8 / 15) / 0.5)
    # the clamp shrinks to 0.5 as t grows
    assert acc.error_clamp(10**9, 4.0) == pytest.approx(0.5)


def flat_ratings(n_users=30, n_items=12):
    """Every item always gets the same rating: r̂ = r̄_i = r, so every error and every gradient is exactly 0."""
    u, i = np.meshgrid(np.arange(n_users), np.arange(n_items), indexing="ij")
    vals = (1 + (i % 5)).astype(np.float32)
    return Ratings(u.ravel().astype(np.int32), i.ravel().astype(np.int32), vals.ravel(), n_users, n_items, (1.0, 5.0),
                   DataSource("toy", False))


@pytest.mark.parametrize("K,t_checked", [(1, 1), (3, 3)])
def test_dpsgd_adds_laplace_noise_of_the_stated_scale(K, t_checked):
    """With zero gradients, S_K - S_0 = -η β Σ_t Lap(b_t): check b_t and, for K = 1, the Laplace law (KS test)."""
    r = flat_ratings(n_items=40)
    kw = dict(epsilon=2.0, K=K, eta=0.1, lam=0.0, beta=10.0, C=10.0, gamma=0.5, init_high=0.2, seed=11)
    res = nbm.train_pnbm(r, **kw)
    want = [acc.laplace_scale(t, 2.0, K, 0.5, 4.0, 10.0) for t in range(1, K + 1)]
    np.testing.assert_allclose(res.noise_scales, want)
    S0 = init_similarity(r.n_items, 10.0, 0.2, as_generator(11))
    off = ~np.eye(r.n_items, dtype=bool)
    noise = -(res.S - S0)[off] / (0.1 * 10.0)
    if K == 1:
        assert stats.kstest(noise, "laplace", args=(0, want[0])).pvalue > 1e-3
        assert stats.kstest(noise, "laplace", args=(0, 1.5 * want[0])).pvalue < 1e-3  # the test has power
    else:  # sum of independent Laplace draws: variance 2 Σ b_t²
        assert np.var(noise) == pytest.approx(2 * sum(b * b for b in want), rel=0.15)


def test_noise_free_training_adds_no_noise():
    r = flat_ratings(n_items=25)
    res = nbm.train_pnbm(r, epsilon=None, K=2, eta=0.1, lam=0.0, beta=10.0, C=10.0, gamma=1.0, seed=3)
    S0 = init_similarity(r.n_items, 10.0, 0.2, as_generator(3))
    np.testing.assert_array_equal(res.S, S0)
    assert res.noise_scales == [] and res.epsilon_amplified is None


def test_amplified_epsilon():
    assert acc.amplified_epsilon(3.0, 10, 1.0) == pytest.approx(3.0)
    # γ = 0.1, K = 10, ε = 1: ε^(t) = 1, per step ln(1 + 0.1(e - 1))
    assert acc.amplified_epsilon(1.0, 10, 0.1) == pytest.approx(10 * math.log1p(0.1 * (math.e - 1)))
    # no overflow for huge ε^(t): ≈ K (ε^(t) + ln γ)
    assert acc.amplified_epsilon(50.0, 1, 0.01) == pytest.approx(5000 + math.log(0.01), rel=1e-9)
    # small ε: the bound is close to the paper's ε; larger ε: the bound exceeds it
    assert acc.amplified_epsilon(0.01, 10, 0.2) == pytest.approx(0.01, rel=0.01)
    assert acc.amplified_epsilon(10.0, 10, 0.2) > 10.0


def test_posterior_scale_and_bound():
    B = acc.loglik_bound((1.0, 5.0), 200)
    assert B == 16 * 200
    assert acc.posterior_scale(0.1 * 200, B) == pytest.approx(20 / 12800)
    assert acc.posterior_scale(4 * B, B) == 1.0 and acc.posterior_scale(1e9, B) == 1.0
    assert acc.posterior_scale(None, B) == 1.0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "x"])
def test_bad_epsilon_raises_naming_the_parameter(bad):
    r = flat_ratings()
    for call in (lambda: nbm.train_pnbm(r, epsilon=bad, K=1), lambda: nbm.sample_pnbm(r, epsilon=bad, T=1, L=5),
                 lambda: nbm.train_dpsgd_mf(r, epsilon=bad, K=1), lambda: acc.laplace_scale(1, bad, 1, 1.0, 4.0, 1.0)):
        with pytest.raises(ParameterError, match="epsilon"):
            call()
    with pytest.raises(ParameterError, match="gamma"):
        acc.epsilon_per_iteration(1.0, 5, 1.5)
    with pytest.raises(ParameterError, match="C"):
        acc.sensitivity(1, 4.0, 0.0)


def test_H_matches_monte_carlo_under_sampling_with_replacement():
    counts = np.array([1, 3, 10, 40, 200, 500, 50])
    L, n_mc = 100, 4000
    rng = np.random.default_rng(0)
    items = np.repeat(np.arange(len(counts)), counts)
    draws = items[rng.integers(0, counts.sum(), (n_mc, L))]
    pres = np.zeros((n_mc, len(counts)), dtype=bool)
    pres[np.repeat(np.arange(n_mc), L), draws.ravel()] = True
    mc = (pres[:, :, None] & pres[:, None, :]).mean(0)
    H = acc.pair_inclusion_prob(counts, L)
    se = np.sqrt(np.maximum(H * (1 - H), 1e-12) / n_mc)
    assert np.all(np.abs(mc - H) <= 4.5 * se + 1e-12)
    # the expression printed in section 4.2 is ≈ 1 everywhere and misses the rare items by far
    Hp = acc.pair_inclusion_prob_paper(counts, L)
    assert Hp[0, 1] > 0.99 and mc[0, 1] < 0.1
    # unbiasedness of the corrected prior term: E[𝕀 ∘ H⁻¹] = 1 for every pair
    assert np.allclose((pres[:, :, None] & pres[:, None, :]).mean(0) / H, 1.0, atol=5 * (se / H).max())


def test_preprocessing_helpers():
    r = flat_ratings(n_users=5, n_items=30)
    sub = r.subset(np.flatnonzero((r.users != 2) | (r.items < 10)))  # user 2 keeps 10 ratings
    kept = nbm.users_with_more_than(sub, 20)
    assert set(np.unique(kept.users)) == {0, 1, 3, 4}
    t = nbm.trim_to_tau(r, 7, seed=0)
    assert t.user_counts().max() == 7 and t.n_ratings == 35
    assert np.array_equal(t.items, nbm.trim_to_tau(r, 7, seed=0).items)  # seeded
