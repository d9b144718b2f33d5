"""BLIP / JLT mechanisms, size estimators, metrics (thesis chapter 3)."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.attacks import (BLIP, JLT, average_precision_at, blip_flip_probability, bloom_codebook, bloom_filter,
                              cosine_sets, estimate_c_blip, estimate_c_jlt, jlt_codebook, jlt_sigma, knn_recall)
from dpmf_lib.attacks import decoders, metrics
from dpmf_lib.errors import ParameterError


@pytest.mark.parametrize("eps", [59, 8, 2, 0])
def test_blip_flip_rate_matches_p_eps(eps):
    cb = bloom_codebook(50, 200_000, 20, seed=3)
    m = BLIP(cb, eps)
    items = np.array([1, 7, 9])
    obs = m.sanitize(items, seed=11)
    flips = int(np.count_nonzero(obs ^ bloom_filter(items, cb)))
    assert stats.binomtest(flips, cb.L, m.p_eps).pvalue > 1e-3


def test_p_eps_and_sigma_tables_of_the_thesis():
    # Section 3.5.1: eps {59,28,17,8,6,5,3,2,0} <-> p_eps {0.05,0.2,0.3,0.4,0.42,0.44,0.46,0.48,0.5} (K = 20)
    got = [round(blip_flip_probability(e, 20), 2) for e in (59, 28, 17, 8, 6, 5, 3, 2, 0)]
    assert got == [0.05, 0.2, 0.3, 0.4, 0.43, 0.44, 0.46, 0.48, 0.5] or \
        np.allclose(got, [0.05, 0.2, 0.3, 0.4, 0.42, 0.44, 0.46, 0.48, 0.5], atol=0.011)
    # eps {600,6,3,2,1,0.75,0.5,0.25,0.1} <-> sigma {0,1,2,3,6,8,12,24,61} with delta = 0.1
    sig = [round(jlt_sigma(e, 0.1)) for e in (600, 6, 3, 2, 1, 0.75, 0.5, 0.25, 0.1)]
    assert sig == [0, 1, 2, 3, 6, 8, 12, 24, 61]


def test_bad_eps_raises():
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ParameterError, match="eps"):
            blip_flip_probability(bad, 20)
    with pytest.raises(ParameterError, match="eps"):
        jlt_sigma(0)
    with pytest.raises(ParameterError, match="K"):
        blip_flip_probability(1.0, 0)


def test_codebook_bits_are_the_distinct_positions():
    cb = bloom_codebook(300, 64, 6, seed=0)  # small L: many repeated hashes
    dense = cb.dense()
    for j in range(300):
        assert np.array_equal(np.flatnonzero(dense[j]), cb.bits[j, :cb.nbits[j]])
        assert np.all(cb.bits[j, cb.nbits[j]:] == -1)
    assert np.array_equal(bloom_filter(np.array([3, 5]), cb), dense[3] | dense[5])


def test_jlt_noise_variance_and_codebook_scale():
    jc = jlt_codebook(40, 2000, seed=1)
    assert abs(jc.X.var() * jc.L - 1) < 0.02
    m = JLT(jc, 1.0)
    y = m.sanitize(np.array([], dtype=np.int64), seed=2)
    s2 = float(y @ y) / m.sigma ** 2  # ~ chi2_L
    assert stats.chi2.sf(s2, jc.L) > 1e-3 and stats.chi2.cdf(s2, jc.L) > 1e-3


def test_size_estimators_recover_c():
    rng = np.random.default_rng(0)
    cb = bloom_codebook(2000, 5000, 20, seed=4)
    items = rng.choice(2000, 100, replace=False)
    m = BLIP(cb, 59)
    c_hat, c_up = estimate_c_blip(m.sanitize(items, seed=1), m.p_eps, 20, n_items=2000, fallback=50)
    assert abs(c_hat - 100) <= 10 and c_up >= c_hat
    c0, up0 = estimate_c_blip(BLIP(cb, 0).sanitize(items, seed=1), 0.5, 20, n_items=2000, fallback=50)
    assert c0 == 50 and math.isinf(up0)
    jm = JLT(jlt_codebook(2000, 1000, seed=5), 6)
    c_hat, c_up = estimate_c_jlt(jm.sanitize(items, seed=3), jm.sigma, n_items=2000)
    assert abs(c_hat - 100) < 4 * math.sqrt(2 * 1000) * jm.sigma ** 2 and c_up >= c_hat - 1


def test_single_decoder_ranks_true_items_first_at_high_eps():
    rng = np.random.default_rng(1)
    cb = bloom_codebook(500, 5000, 20, seed=2)
    items = rng.choice(500, 30, replace=False)
    m = BLIP(cb, 59)
    s = decoders.blip_single_scores(m.sanitize(items, seed=0), m)
    assert set(np.argsort(-s)[:30]) == set(items)
    jm = JLT(jlt_codebook(500, 1000, seed=3), 600)
    s = decoders.jlt_single_scores(jm.sanitize(items, seed=0), jm, 30)
    assert len(set(np.argsort(-s)[:30]) & set(items)) >= 27


def test_metrics_hand_cases():
    assert cosine_sets(np.array([1, 2, 3, 4]), np.array([3, 4])) == pytest.approx(2 / math.sqrt(8))
    assert cosine_sets(np.array([1]), np.array([], dtype=int)) == 0.0
    # ranking hits at ranks 1 and 3 out of R = 4: precisions 1, 1/2, 2/3, 2/4
    assert average_precision_at(np.array([5, 7]), np.array([5, 1, 7, 2]), R=4) == pytest.approx((1 + .5 + 2 / 3 + .5) / 4)
    S = np.random.default_rng(0).random((30, 30))
    S = S + S.T
    assert knn_recall(S, S, k=5) == 1.0
    assert metrics.knn_recall(S, -S, k=5) < 0.2


def test_attack_end_to_end_small():
    rng = np.random.default_rng(5)
    N = 200
    cb = bloom_codebook(N, 1500, 10, seed=6)
    q = np.full(N, 0.1)
    items = rng.choice(N, 20, replace=False)
    m = BLIP(cb, 40)
    c_hat, rk = decoders.attack(m, m.sanitize(items, seed=1), q, burn_in=200, n_samples=2000, c_fallback=20, seed=2)
    for a in decoders.ATTACKS:
        assert sorted(rk[a]) == list(range(N))
    assert cosine_sets(items, rk["mcmc_flat"][:c_hat]) > 0.8
    with pytest.raises(ParameterError, match="attack"):
        decoders.attack(m, m.sanitize(items, seed=1), q, attacks=("nope",), c_fallback=20)


def _c_hat_draws(K_used: int, n: int = 60) -> np.ndarray:
    """ĉ over n independent (codebook, profile, noise) draws, c = 100, K = 20, L = 5,000, ε = 59; ``K_used`` is the
    K handed to the estimator (20 = right; 19 = the K − 1 bug)."""
    vals = []
    for r in range(n):
        cb = bloom_codebook(2000, 5000, 20, seed=100 + r)
        items = np.random.default_rng(r).choice(2000, 100, replace=False)
        m = BLIP(cb, 59)
        vals.append(estimate_c_blip(m.sanitize(items, seed=r), m.p_eps, K_used, n_items=2000, fallback=50)[0])
    return np.asarray(vals, float)


def _unbiased_at_c100(vals: np.ndarray) -> bool:
    """|mean − 100| < 1 (SE ≈ 0.25 over 60 draws, so a true mean of 100 passes with overwhelming probability)."""
    return abs(float(np.mean(vals)) - 100) < 1.0


def test_blip_size_estimator_is_unbiased_over_codebooks():
    """(3.9) through (3.6) has no visible bias: the mean over 60 (codebook, profile, noise) draws lies within 1 % of
    c = 100 (SE ≈ 0.25), and the draw-to-draw spread is what the binomial noise of w(b̃) predicts."""
    vals = _c_hat_draws(20)
    assert _unbiased_at_c100(vals)
    assert 0.5 < vals.std(ddof=1) < 5.0


def test_blip_size_bias_check_rejects_the_k_minus_1_bug():
    """The check above has power: ĉ computed with K − 1 hash functions (a 5.3 % bias: ĉ ∝ 1/K) passed the single-draw
    ±10 % check of test_size_estimators_recover_c; on the same draws it fails this one (mean ≈ 105)."""
    vals = _c_hat_draws(19)
    assert not _unbiased_at_c100(vals)
    assert 103.5 < float(np.mean(vals)) < 107.0


def test_single_decoder_score_hand_case_3_27():
    """(3.27)–(3.29) by hand on a 12-bit filter: item 0 hashes to bits {1, 4, 9} (K = 3; a repeated hash counts
    once), the release has bits {1, 9, 2, 6} set, so w(b̃) = 4/12, n11 = 2 (bits 1, 9), n01 = 1 (bit 4) and
    s_0 = 2 log((1 − p)/π̃) + 1 log(p/(1 − π̃)) with π̃ = 1/3. Item 1 hashes to {4, 4, 5} (a collision: n01 = 2,
    n11 = 0). A denominator other than π̃ = w(b̃)/L, or a collision counted twice, changes the numbers."""
    from dpmf_lib.attacks.mechanisms import BloomCodebook

    positions = np.array([[1, 4, 9], [4, 4, 5]], np.int32)
    bits = np.array([[1, 4, 9], [4, 5, -1]], np.int32)
    cb = BloomCodebook(L=12, K=3, positions=positions, bits=bits, nbits=np.array([3, 2], np.int32))
    m = BLIP(cb, 4.0)
    p = m.p_eps
    assert p == pytest.approx(1 / (1 + math.exp(4.0 / 3)))  # (3.4)-(3.5): p_eps = 1/(1 + e^{eps/K})
    bt = np.zeros(12, np.uint8)
    bt[[1, 9, 2, 6]] = 1
    s = decoders.blip_single_scores(bt, m)
    pt = 4 / 12
    assert s[0] == pytest.approx(2 * math.log((1 - p) / pt) + 1 * math.log(p / (1 - pt)), rel=1e-12)
    assert s[1] == pytest.approx(2 * math.log(p / (1 - pt)), rel=1e-12)
    # the same with the prior-free π̃ given explicitly
    s2 = decoders.blip_single_scores(bt, m, pi_tilde=0.25)
    assert s2[0] == pytest.approx(2 * math.log((1 - p) / 0.25) + math.log(p / 0.75), rel=1e-12)


def test_single_decoder_with_prior_adds_exactly_the_prior():
    """The fair baseline for "joint beats single": with a uniform prior it ranks like the single decoder; at ε = 0
    (the release is pure noise) a sharp prior decides its top ranks — the part of the joint decoder's gain that is the
    prior's."""
    N = 150
    cb = bloom_codebook(N, 800, 8, seed=1)
    m = BLIP(cb, 2.0)
    obs = m.sanitize(np.arange(10), seed=1)
    _, rk = decoders.attack(m, obs, np.full(N, 0.05), attacks=("single", "single_prior"), c_fallback=10, seed=2)
    np.testing.assert_array_equal(rk["single_prior"], rk["single"])
    q = np.full(N, 0.001)
    q[40:50] = 0.9
    m0 = BLIP(cb, 0.0)
    _, rk = decoders.attack(m0, m0.sanitize(np.arange(10), seed=1), q, attacks=("single", "single_prior"),
                            c_fallback=10, seed=2)
    assert set(rk["single_prior"][:10]) == set(range(40, 50))
    assert set(rk["single"][:10]) != set(range(40, 50))


def test_mcmc_flat_rows_do_not_depend_on_whether_mcmc_prior_ran():
    """The per-ε cache serves a request for mcmc_flat alone from rows written by a run of both: the two must agree."""
    N = 150
    cb = bloom_codebook(N, 800, 8, seed=1)
    m = BLIP(cb, 6.0)
    obs = m.sanitize(np.arange(12), seed=3)
    q = np.random.default_rng(0).uniform(0.02, 0.2, N)
    kw = dict(burn_in=30, n_samples=200, c_fallback=12)
    _, both = decoders.attack(m, obs, q, attacks=("mcmc_prior", "mcmc_flat"), seed=7, **kw)
    _, alone = decoders.attack(m, obs, q, attacks=("mcmc_flat",), seed=7, **kw)
    np.testing.assert_array_equal(both["mcmc_flat"], alone["mcmc_flat"])
