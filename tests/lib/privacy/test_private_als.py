"""Private ALS (Chien et al. 2021) and DP-SGD-MF with per-user clipping: kernels against their numpy references,
the released noise's law (Kolmogorov–Smirnov and variance), per-user clipping bounds by brute force on a toy, the
sampling rate, and the accounting cross-checked between dp-accounting's RDP and PLD, the exact Gaussian curve and
the zCDP closed form. Fixed seeds; p-value threshold 10⁻³."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.data.ratings import Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import dpsgd_user as du
from dpmf_lib.privacy import private_als as pa
from dpmf_lib.privacy.ledger import analytic_gaussian_epsilon
from tests.nbm_toys import toy

P_MIN = 1e-3


def _centred(r):
    return np.clip(r.values.astype(np.float64) - 3.0, -2.0, 2.0)


# ------------------------------------------------------------------------------------------------ private ALS


def test_item_statistics_kernel_matches_reference():
    r = toy(seed=3)
    rng = np.random.default_rng(0)
    U = rng.standard_normal((r.n_users, 4))
    A, b = pa.statistics(r.items, r.users, _centred(r), U, r.n_items)
    A0, b0 = pa.item_statistics_reference(r.items, r.users, _centred(r), U, r.n_items)
    np.testing.assert_allclose(A, A0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b, b0, rtol=1e-12, atol=1e-12)


def test_sample_contributions_caps_each_user_at_k():
    r = toy(seed=4, nu=30, ni=20, density=0.8)
    keep = pa.sample_contributions(r.users, r.n_users, 5, np.random.default_rng(1))
    counts = np.bincount(r.users[keep], minlength=r.n_users)
    assert counts.max() <= 5
    np.testing.assert_array_equal(counts, np.minimum(np.bincount(r.users, minlength=r.n_users), 5))
    assert len(np.unique(keep)) == len(keep)


def test_released_statistics_noise_has_the_stated_gaussian_law():
    rng = np.random.default_rng(7)
    M, D, sA, sb = 400, 3, 2.5, 0.7
    A = rng.standard_normal((M, D, D))
    A = A + np.transpose(A, (0, 2, 1))
    b = rng.standard_normal((M, D))
    An, bn = pa.noisy_item_statistics(A, b, sA, sb, rng)
    N = An - A
    np.testing.assert_allclose(N, np.transpose(N, (0, 2, 1)))  # symmetric
    iu = np.triu_indices(D)
    up = N[:, iu[0], iu[1]].ravel()
    assert stats.kstest(up / sA, "norm").pvalue > P_MIN
    assert stats.kstest((bn - b).ravel() / sb, "norm").pvalue > P_MIN
    assert abs(np.var(up) / sA ** 2 - 1) < 0.1


def test_fit_adds_noise_at_the_calibrated_scale():
    r = toy(seed=5, nu=40, ni=15)
    cfg = pa.DPALSConfig(d=2, alternations=3, k=6)
    res = pa.fit(r, 4.0, 1e-5, cfg, seed=0)
    z = pa.calibrate(4.0, 1e-5, 3)
    dA, db = pa.sensitivities(6, 2.0)
    assert res.sigma_A == pytest.approx(dA * z / math.sqrt(0.5))
    assert res.sigma_b == pytest.approx(db * z / math.sqrt(0.5))
    # one round's multiplier: 1/z² = (Δ_A/σ_A)² + (Δ_b/σ_b)²
    assert (dA / res.sigma_A) ** 2 + (db / res.sigma_b) ** 2 == pytest.approx(1.0 / z ** 2)


def _user_contribution(r, keep, U, user, M):
    m = keep[r.users[keep] == user]
    A, b = pa.item_statistics_reference(r.items[m], r.users[m], _centred(r)[m], U, M)
    iu = np.triu_indices(U.shape[1])
    return A[:, iu[0], iu[1]].ravel(), b.ravel()


def test_clipping_bounds_each_users_contribution_brute_force():
    """Replace one user's ratings (values, items, factor) by many random alternatives: the upper-triangular Gram
    entries move by ≤ Δ_A = √(2k), the right-hand sides by ≤ Δ_b = 2Γ√k."""
    r = toy(seed=6, nu=12, ni=15, density=0.9)
    k, D = 4, 3
    rng = np.random.default_rng(2)
    keep = pa.sample_contributions(r.users, r.n_users, k, rng)
    V = rng.standard_normal((r.n_items, D))
    U = pa.user_factors(r.users, r.items, _centred(r), r.n_users, V, 0.1, 0.5)
    assert np.linalg.norm(U, axis=1).max() <= 1 + 1e-12
    dA, db = pa.sensitivities(k, 2.0)
    worst = [0.0, 0.0]
    for user in range(r.n_users):
        a0, b0 = _user_contribution(r, keep, U, user, r.n_items)
        for _ in range(60):
            items = rng.choice(r.n_items, size=k, replace=False)
            vals = rng.choice([1.0, 5.0], size=k)
            u = rng.standard_normal(D)
            u /= np.linalg.norm(u)
            A1, b1 = pa.item_statistics_reference(items, np.zeros(k, int), vals - 3.0, u[None], r.n_items)
            iu = np.triu_indices(D)
            worst[0] = max(worst[0], np.linalg.norm(A1[:, iu[0], iu[1]].ravel() - a0))
            worst[1] = max(worst[1], np.linalg.norm(b1.ravel() - b0))
    assert worst[0] <= dA + 1e-9 and worst[1] <= db + 1e-9
    assert worst[1] > 0.5 * db  # the bound is not vacuous on this toy


def test_accountant_matches_the_closed_forms():
    z, T, delta = 3.0, 5, 1e-5
    a = pa.accounting(z, T, delta)
    # RDP of T Gaussians: α T/(2z²); dp-accounting's conversion, recomputed here on its own orders
    from dp_accounting import rdp

    orders = np.array(rdp.RdpAccountant()._orders, float)
    orders = orders[orders > 1]
    r = orders * T / (2 * z * z)
    eps = r + np.log1p(-1 / orders) - (np.log(delta) + np.log(orders)) / (orders - 1)
    assert a["rdp_epsilon"] == pytest.approx(max(0.0, eps.min()), rel=1e-6)
    assert a["pld_epsilon"] == pytest.approx(a["exact_gaussian_epsilon"], abs=2e-3)
    assert a["exact_gaussian_epsilon"] <= a["rdp_epsilon"] <= a["zcdp_epsilon"]
    assert a["zcdp_epsilon"] == pytest.approx(a["zcdp_rho"] + 2 * math.sqrt(a["zcdp_rho"] * math.log(1 / delta)))


def test_calibration_hits_the_target():
    z = pa.calibrate(2.0, 1e-5, 4)
    assert pa._rdp_epsilon(z, 4, 1e-5) <= 2.0 < pa._rdp_epsilon(z * 0.99, 4, 1e-5)


def test_mechanism_adapter_reports_the_ledger_entry():
    r = toy(seed=8, nu=30, ni=12)
    rel = pa.PrivateALS(d=2, alternations=2, k=5).fit(r, 5.0, 1e-5, 3)
    e = rel.privacy()
    assert e.unit.startswith("user") and e.epsilon_provable <= 5.0 + 1e-9 and e.delta_provable == 1e-5
    assert rel.record.seed_used == 3 and rel.record.seed_was_fixed
    assert np.isfinite(rel.predict(r.users, r.items)).all()


# ------------------------------------------------------------------------------------------------ DP-SGD-MF


def _sgd_setup(seed=9):
    r = toy(seed=seed, nu=25, ni=14, density=0.7)
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((r.n_items, 3))
    U = pa.user_factors(r.users, r.items, _centred(r), r.n_users, V, 0.5, 0.9)
    return r, rng, V, U


def test_clipped_gradient_kernel_matches_reference_and_bounds_each_user():
    r, rng, V, U = _sgd_setup()
    csr = du.by_user(r.users, r.items, _centred(r), r.n_users)
    sampled = np.arange(r.n_users)
    C = 0.3
    _, G, norms = du.noisy_step_gradient(csr, sampled, U, V, C, None, rng)
    G0, n0 = du.clipped_user_gradients_reference(r.users, r.items, _centred(r), sampled, U, V, C)
    np.testing.assert_allclose(G, G0, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(norms, n0, rtol=1e-10)
    assert (norms > C).any()
    # brute force: each user's clipped contribution (the sum with the user minus without) has norm ≤ C
    for i in range(r.n_users):
        Gi, _ = du.clipped_user_gradients_reference(r.users, r.items, _centred(r), [i], U, V, C)
        assert np.linalg.norm(Gi) <= C + 1e-12


def test_dpsgd_noise_law_and_sampling_rate():
    r, rng, V, U = _sgd_setup(10)
    csr = du.by_user(r.users, r.items, _centred(r), r.n_users)
    sigma, C = 1.7, 0.4
    noisy, G, _ = du.noisy_step_gradient(csr, np.arange(5), U, V, C, sigma, rng)
    x = np.concatenate([du.noisy_step_gradient(csr, np.arange(5), U, V, C, sigma, rng)[0].ravel() - G.ravel()
                        for _ in range(40)])
    assert stats.kstest(x / (sigma * C), "norm").pvalue > P_MIN
    assert abs(np.var(x) / (sigma * C) ** 2 - 1) < 0.1
    n, q = 20000, 0.13
    k = len(du.poisson_sample(n, q, np.random.default_rng(3)))
    assert stats.binomtest(k, n, q).pvalue > P_MIN


def test_dpsgd_accounting_rdp_and_pld_agree_and_replace_is_larger():
    q, sigma, steps, delta = 0.1, 1.2, 50, 1e-5
    a = du.accounting(q, sigma, steps, delta)
    assert a["pld_epsilon_add_remove"] <= a["rdp_epsilon_add_remove"] * 1.001
    assert a["pld_epsilon_add_remove"] >= 0.75 * a["rdp_epsilon_add_remove"]
    assert a["pld_epsilon_replace"] > 1.2 * a["pld_epsilon_add_remove"]  # replace-one costs more, strictly
    s = du.calibrate(3.0, delta, q, steps)
    assert du.pld_epsilon(q, s, steps, delta) <= 3.0 < du.pld_epsilon(q, s / 1.01, steps, delta)


def test_dpsgd_fit_records_the_steps_taken():
    r = toy(seed=11, nu=30, ni=12)
    rel = du.DPSGDUserMF(d=2, steps=7, q=0.5).fit(r, 8.0, 1e-5, 0)
    e = rel.privacy()
    assert e.extra["steps"] == 7 and e.epsilon_provable <= 8.0 + 1e-6
    assert rel.extra["mean_batch"] > 0


# ------------------------------------------------------------------------------------------------ what fit wires


def _wild_toy():
    """A toy whose centred values leave [−Γ, Γ] (a rating 9 and −3 on a 1..5 scale), with one user rating every
    item (more than k) — so the rating clip and the k-per-user bound bind in ``fit``."""
    r = toy(seed=12, nu=30, ni=12, density=0.5)
    u = np.concatenate([r.users, np.zeros(r.n_items, np.int32)])
    i = np.concatenate([r.items, np.arange(r.n_items, dtype=np.int32)])
    v = np.concatenate([r.values, np.full(r.n_items, 3.0, np.float32)])
    keep = np.unique(u.astype(np.int64) * r.n_items + i, return_index=True)[1]
    u, i, v = u[keep].copy(), i[keep].copy(), v[keep].copy()
    v[:4] = 9.0
    v[4:8] = -3.0
    return Ratings(u, i, v, r.n_users, r.n_items, (1.0, 5.0), r.source)


def test_als_fit_noises_every_round_and_clips_what_enters_the_released_statistics(monkeypatch):
    """What ``fit`` hands the noise: T noisy rounds at (σ_A, σ_b); item statistics from ≤ k ratings per user, factors
    ‖u_i‖ ≤ 1 (they would be large unclipped: small V, little ridge) and centred ratings |r − c| ≤ Γ."""
    r = _wild_toy()
    k, T = 3, 4
    cfg = pa.DPALSConfig(d=2, alternations=T, k=k, lam_u=1e-3, init_std=0.01)
    stats_calls, noisy_calls = [], []
    real_stats, real_noisy = pa.statistics, pa.noisy_item_statistics

    def statistics(rows, cols, vals, F, n_rows):
        if n_rows == r.n_items and np.shape(F)[0] == r.n_users:  # the item statistics (user_factors: F = V)
            stats_calls.append((np.array(cols), np.array(vals, float), np.array(F, float)))
        return real_stats(rows, cols, vals, F, n_rows)

    def noisy(A, b, sA, sb, rng):
        noisy_calls.append((sA, sb))
        return real_noisy(A, b, sA, sb, rng)

    monkeypatch.setattr(pa, "statistics", statistics)
    monkeypatch.setattr(pa, "noisy_item_statistics", noisy)
    res = pa.fit(r, 3.0, 1e-5, cfg, seed=0)
    assert len(noisy_calls) == T and all(c == (res.sigma_A, res.sigma_b) for c in noisy_calls)
    assert len(stats_calls) == T
    unclipped = pa.user_factors(r.users, r.items, _centred(r), r.n_users, np.full((r.n_items, 3), 0.01), 1e-3, 0.5,
                                clip=False)
    assert np.linalg.norm(unclipped, axis=1).max() > 2  # the u clip binds on this toy
    for cols, vals, F in stats_calls:
        assert np.bincount(cols, minlength=r.n_users).max() <= k
        assert np.linalg.norm(F, axis=1).max() <= 1 + 1e-9
        assert np.abs(vals).max() <= 2.0 + 1e-12
    assert np.bincount(r.users).max() > k and np.abs(r.values - 3.0).max() > 2  # both bounds bind


def test_dpsgd_fit_passes_C_sigma_and_the_poisson_batches(monkeypatch):
    r = toy(seed=13, nu=30, ni=12)
    cfg = du.DPSGDUserConfig(d=2, steps=6, q=0.4, C=0.37)
    drawn, used = [], []
    real_sample, real_step = du.poisson_sample, du.noisy_step_gradient

    def sample(n, q, rng):
        drawn.append((n, q, real_sample(n, q, rng)))
        return drawn[-1][2]

    def step(csr, sampled, U, V, C, sigma, rng):
        used.append((np.array(sampled), C, sigma))
        return real_step(csr, sampled, U, V, C, sigma, rng)

    monkeypatch.setattr(du, "poisson_sample", sample)
    monkeypatch.setattr(du, "noisy_step_gradient", step)
    res = du.fit(r, 6.0, 1e-5, cfg, seed=1)
    assert res.sigma == du.calibrate(6.0, 1e-5, 0.4, 6)
    assert len(drawn) == len(used) == 6
    for (n, q, s), (s2, C, sigma) in zip(drawn, used):
        assert (n, q, C, sigma) == (r.n_users, 0.4, 0.37, res.sigma)
        np.testing.assert_array_equal(s, s2)


def test_dpsgd_fit_batch_sizes_are_binomial():
    """Poisson sampling: the realised batch sizes vary as Binomial(n, q) (a fixed-size or deterministic batch has
    variance 0)."""
    r = toy(seed=14, nu=60, ni=8)
    n, q, steps = r.n_users, 0.3, 200
    res = du.fit(r, None, 1e-5, du.DPSGDUserConfig(d=1, steps=steps, q=q), seed=2)
    b = np.array(res.batch_sizes)
    assert abs(b.mean() - n * q) < 4 * math.sqrt(n * q * (1 - q) / steps)
    ratio = b.var(ddof=1) / (n * q * (1 - q))
    lo, hi = stats.chi2.ppf([P_MIN / 2, 1 - P_MIN / 2], steps - 1) / (steps - 1)
    assert lo < ratio < hi
    sizes = [len(du.poisson_sample(n, q, np.random.default_rng(s))) for s in range(400)]
    assert lo < np.var(sizes, ddof=1) / (n * q * (1 - q)) < 1.5


def test_dpsgd_replace_one_is_the_gaussian_at_sensitivity_2C():
    """q = 1, one step: the replace-one ε is the exact Gaussian mechanism's (Balle & Wang) at L2 sensitivity 2 (in
    units of C; multiplier σ = noise std / C), the add/remove ε the one at sensitivity 1 — strictly smaller."""
    delta = 1e-5
    for s in (2.0, 5.0):
        rep, ar = du.pld_epsilon(1.0, s, 1, delta, "replace"), du.pld_epsilon(1.0, s, 1, delta, "add_remove")
        assert rep == pytest.approx(analytic_gaussian_epsilon(s, 2.0, delta), abs=5e-3)
        assert ar == pytest.approx(analytic_gaussian_epsilon(s, 1.0, delta), abs=5e-3)
        assert rep > 1.5 * ar


def test_dpsgd_entry_pld_column_is_the_plotted_replace_epsilon():
    cfg = du.DPSGDUserConfig(q=0.3, steps=5)
    s = du.calibrate(4.0, 1e-5, 0.3, 5)
    e = du.entry(4.0, 1e-5, cfg, s, 5, 100)
    assert e.pld_epsilon == e.epsilon_provable == pytest.approx(du.pld_epsilon(0.3, s, 5, 1e-5, "replace"))
    assert math.isnan(e.rdp_epsilon)
    assert e.extra["pld_epsilon_add_remove"] < e.epsilon_provable


@pytest.mark.parametrize("fit", [lambda r: pa.fit(r, 2.0, 1e-5, pa.DPALSConfig(d=2, alternations=1, k=3), seed=0),
                                 lambda r: du.fit(r, 2.0, 1e-5, du.DPSGDUserConfig(d=2, steps=2), seed=0)])
def test_fits_refuse_duplicate_pairs(fit):
    r = toy(seed=15, nu=10, ni=8)
    dup = Ratings(np.append(r.users, r.users[0]), np.append(r.items, r.items[0]), np.append(r.values, r.values[0]),
                  r.n_users, r.n_items, r.rating_scale, r.source)
    with pytest.raises(ParameterError, match="pair"):
        fit(dup)


# ------------------------------------------------------------------------------------------------ ablation switches


def test_als_clip_off_runs_without_noise_only_and_leaves_factors_unclipped():
    """``clip_users=False`` (the ablation's noise-free variant): refused with noise (no sensitivity bound holds);
    without noise the users' factors keep their ridge solution (norms above the clip's cap on this toy)."""
    r = _wild_toy()
    cfg = pa.DPALSConfig(d=2, alternations=2, k=3, lam_u=1e-3, init_std=0.01, clip_users=False)
    with pytest.raises(ParameterError, match="clip_users"):
        pa.fit(r, 3.0, 1e-5, cfg, seed=0)
    with pytest.raises(ParameterError, match="clip_users"):
        pa.DPALSConfig(clip_users="no")
    free = pa.fit(r, None, 1e-5, cfg, seed=0)
    clipped = pa.fit(r, None, 1e-5, pa.DPALSConfig(d=2, alternations=2, k=3, lam_u=1e-3, init_std=0.01), seed=0)
    cap = math.sqrt(1 - 0.5 ** 2)
    assert np.linalg.norm(clipped.U[:, :-1], axis=1).max() <= cap + 1e-9
    assert np.linalg.norm(free.U[:, :-1], axis=1).max() > cap
    np.testing.assert_array_equal(free.U[:, -1], 0.5)  # the fixed offset coordinate stays


def test_als_without_its_constraints_and_noise_fits_a_low_rank_matrix():
    """No noise, no clip, every rating (k above each user's count), little ridge, enough rounds: ALS recovers a
    rank-2 matrix to the rating noise (0.1), while the k-bound and heavy item ridge of the private grid stay well
    above it — what the frontier's ablation measures on ML-100K."""
    rng = np.random.default_rng(4)
    nu, ni = 80, 40
    P, Q = rng.normal(0, 0.6, (nu, 2)), rng.normal(0, 0.6, (ni, 2))
    u, i = np.nonzero(rng.random((nu, ni)) < 0.6)
    v = np.clip(3.0 + np.einsum("nd,nd->n", P[u], Q[i]) + rng.normal(0, 0.1, len(u)), 1, 5).astype(np.float32)
    r = Ratings(u.astype(np.int32), i.astype(np.int32), v, nu, ni, (1.0, 5.0), toy().source)

    def rmse(cfg):
        res = pa.fit(r, None, 1e-5, cfg, seed=1)
        return float(np.sqrt(np.mean((res.predict(r.users, r.items) - r.values) ** 2)))

    free = rmse(pa.DPALSConfig(d=3, alternations=30, k=10 ** 6, lam_u=0.01, lam_v=0.01, bias_coord=0.5,
                               clip_users=False))
    bound = rmse(pa.DPALSConfig(d=3, alternations=30, k=3, lam_u=0.01, lam_v=30.0, bias_coord=0.5))
    assert free < 0.15 < 2 * free < bound


def test_accounting_is_memoised_without_sharing_the_returned_dict():
    a = pa.accounting(3.0, 2, 1e-5)
    a["rdp_epsilon"] = -1.0
    b = pa.accounting(3.0, 2, 1e-5)
    assert b["rdp_epsilon"] > 0 and b == pa._accounting_dict(3.0, 2, 1e-5)
    c = du.accounting(0.2, 2.0, 10, 1e-5)
    c["pld_epsilon_replace"] = -1.0
    assert du.accounting(0.2, 2.0, 10, 1e-5)["pld_epsilon_replace"] == du.pld_epsilon(0.2, 2.0, 10, 1e-5, "replace")
