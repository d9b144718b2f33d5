"""DPSGD-PNBM with per-user L1 clipping (ours, issue #13 part 3): kernel vs reference, the sensitivity bound on
hand-made toys, and the noise calibration the docstring states."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib import nbm
from dpmf_lib.data.ratings import Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.nbm import reference as ref
from dpmf_lib.nbm.model import init_similarity, noisy_item_means
from dpmf_lib.privacy.common import seeded
from tests import nbm_toys
from tests.nbm_toys import rows_of


def toy(seed=1, nu=12, ni=10, density=0.6):
    return nbm_toys.toy(seed, nu, ni, density)


def signed_similarity(ni, seed=2):
    return nbm_toys.signed_similarity(ni, seed, np.float32)


def with_value(r, k, v):
    vals = r.values.copy()
    vals[k] = v
    return Ratings(r.users, r.items, vals, r.n_users, r.n_items, r.rating_scale, r.source)


@pytest.mark.parametrize("Nk,C,clip", [(100, 0.0, 0.5), (3, 0.0, 2.0), (100, 1.0, 1e6), (4, 5.0, 0.05)])
def test_clipped_kernel_matches_reference(Nk, C, clip):
    r = toy()
    d = nbm.prepare(r)
    S = signed_similarity(r.n_items)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, r.n_ratings, size=r.n_ratings)  # with duplicates: the kernel must sum them before the norm
    G, norms = nbm.clipped_gradient(S, d, r.users[idx], r.items[idx], r.values[idx], Nk=Nk, C=C, clip_l1=clip,
                                    e_max=2.0, f_max=4.0)
    batch = list(zip(r.users[idx], r.items[idx], r.values[idx].astype(float)))
    Gr, nr = ref.clipped_gradient(S.astype(np.float64), rows_of(d), d.rbar.astype(np.float64), batch, Nk, C, 2.0,
                                  4.0, clip)
    np.testing.assert_allclose(G, Gr, rtol=1e-4, atol=1e-6)
    for u, n in nr.items():
        assert norms[u] == pytest.approx(n, rel=1e-6, abs=1e-9)  # float32 S in the kernel
    assert set(np.nonzero(norms)[0]) <= set(nr)


def test_huge_clip_equals_the_unclipped_gradient():
    r = toy(seed=4)
    d = nbm.prepare(r)
    S = signed_similarity(r.n_items, seed=5)
    G, _ = nbm.clipped_gradient(S, d, r.users, r.items, r.values, Nk=5, C=1.0, clip_l1=1e9, e_max=2.5, f_max=4.0)
    G0 = nbm.gradient(S, d, r.users, r.items, r.values, Nk=5, C=1.0, e_max=2.5, f_max=4.0)
    np.testing.assert_allclose(G, G0, rtol=1e-5, atol=1e-6)


def test_one_rating_moves_the_clipped_sum_by_at_most_2_clip():
    """Over random toys and every rating moved to the far end of the scale (item means held fixed: they are a separate
    release): ‖ΔG‖₁ ≤ 2·clip. The unclipped gradient of the same toys moves by more, and so does the sum of
    per-rating-clipped terms: the clip has to be on the user's whole contribution (the rating is a neighbour in u's
    other predictions)."""
    clip = 0.3
    worst_clipped, worst_raw, worst_rating_clip = 0.0, 0.0, 0.0
    for seed in range(12):
        r = toy(seed=10 + seed, nu=8, ni=9, density=0.7)
        rbar = nbm.item_means(r)
        S = signed_similarity(r.n_items, seed=seed)

        def grads(rr):
            d = nbm.prepare(rr, rbar)
            G, _ = nbm.clipped_gradient(S, d, rr.users, rr.items, rr.values, Nk=4, C=0.5, clip_l1=clip, e_max=2.5,
                                        f_max=4.0)
            raw = nbm.gradient(S, d, rr.users, rr.items, rr.values, Nk=4, C=0.5, e_max=2.5, f_max=4.0)
            per_rating = np.zeros(S.shape)
            for k in range(rr.n_ratings):  # each rating's own term clipped to `clip` (the unit that does not work)
                g = nbm.gradient(S, d, rr.users[k:k + 1], rr.items[k:k + 1], rr.values[k:k + 1], Nk=4, C=0.5,
                                 e_max=2.5, f_max=4.0).astype(np.float64)
                n = np.abs(g).sum()
                per_rating += g * (clip / n if n > clip else 1.0)
            return G.astype(np.float64), raw.astype(np.float64), per_rating

        G0, R0, P0 = grads(r)
        for k in range(r.n_ratings):
            far = 1.0 if r.values[k] >= 3 else 5.0
            G1, R1, P1 = grads(with_value(r, k, far))
            worst_clipped = max(worst_clipped, np.abs(G1 - G0).sum())
            worst_raw = max(worst_raw, np.abs(R1 - R0).sum())
            worst_rating_clip = max(worst_rating_clip, np.abs(P1 - P0).sum())
    assert worst_clipped <= 2 * clip * (1 + 1e-5)
    assert worst_raw > 2 * clip
    assert worst_rating_clip > 2 * clip


def test_all_of_one_users_ratings_move_the_clipped_sum_by_at_most_2_clip():
    r = toy(seed=7)
    rbar = nbm.item_means(r)
    S = signed_similarity(r.n_items, seed=8)
    clip = 0.2

    def G(rr):
        return nbm.clipped_gradient(S, nbm.prepare(rr, rbar), rr.users, rr.items, rr.values, Nk=5, C=0.5, clip_l1=clip,
                                    e_max=2.5, f_max=4.0)[0].astype(np.float64)

    G0 = G(r)
    for u in range(r.n_users):
        vals = r.values.copy()
        m = r.users == u
        vals[m] = np.where(vals[m] >= 3, 1.0, 5.0)
        r1 = Ratings(r.users, r.items, vals, r.n_users, r.n_items, r.rating_scale, r.source)
        assert np.abs(G(r1) - G0).sum() <= 2 * clip * (1 + 1e-5)


def test_noise_follows_the_stated_calibration():
    """K = 1, λ = 0, γ = 1: S₁ = S₀ − ηβ(G + noise); the noise recovered from the same seed is Laplace(b) with
    b = 2·clip·K/((1 − share)·ε) (KS test), and ε_effective is the stated ε."""
    r = toy(seed=11, nu=40, ni=30, density=0.8)
    eps, clip, share, K, eta, beta = 2.0, 0.7, 0.25, 1, 0.5, 2.0
    res = nbm.train_pnbm_clipped(r, epsilon=eps, clip_l1=clip, mean_share=share, K=K, eta=eta, lam=0.0, beta=beta,
                                 C=1.0, Nk=6, gamma=1.0, min_user_ratings=0, seed=5)
    b = 2 * clip * K / ((1 - share) * eps)
    assert res.noise_scales == [pytest.approx(b)]
    assert res.epsilon_effective == eps and res.epsilon_amplified is None
    assert res.info["epsilon_item_means"] + K * res.info["epsilon_per_iteration"] == pytest.approx(eps)
    rng, _, _ = seeded(5)
    rbar = noisy_item_means(r, share * eps, rng)
    S0 = init_similarity(r.n_items, beta, 0.2, rng)
    G, _ = nbm.clipped_gradient(S0, nbm.prepare(r, rbar), r.users, r.items, r.values, Nk=6, C=1.0, clip_l1=clip,
                                e_max=nbm.accounting.error_clamp(1, 4.0), f_max=4.0)
    noise = (S0.astype(np.float64) - res.S) / (eta * beta) - G
    z = noise[~np.eye(r.n_items, dtype=bool)]
    assert stats.kstest(z, stats.laplace(scale=b).cdf).pvalue > 1e-3
    assert np.mean(np.abs(z)) == pytest.approx(b, rel=0.1)


def test_noisy_item_means_have_the_stated_scale():
    r = toy(seed=12, nu=30, ni=8, density=0.9)
    eps = 0.5
    draws = np.array([noisy_item_means(r, eps, np.random.default_rng(s)) for s in range(400)], np.float64)
    counts = np.bincount(r.items, minlength=r.n_items)
    exact = np.bincount(r.items, weights=r.values, minlength=r.n_items) / counts
    # unclipped in the bulk: the spread of the noisy mean is √2 · φ/(ε n_i) (Laplace sd); checked on item 0
    z = (draws[:, 0] - exact[0]) * counts[0]
    inside = (draws[:, 0] > 1.0) & (draws[:, 0] < 5.0)
    assert inside.mean() > 0.5
    assert np.median(np.abs(z)) == pytest.approx(math.log(2) * 4.0 / eps, rel=0.25)


@pytest.mark.parametrize("kw", [{"clip_l1": 0.0}, {"clip_l1": float("nan")}, {"mean_share": 1.0},
                                {"mean_share": 0.0}, {"epsilon": None}, {"epsilon": float("inf")}])
def test_bad_parameters_raise(kw):
    args = {"epsilon": 1.0, "K": 1, "min_user_ratings": 0, "seed": 0, **kw}
    with pytest.raises(ParameterError):
        nbm.train_pnbm_clipped(toy(), **args)


def test_runs_evaluate_reports_the_provable_epsilon_of_the_clipped_variant():
    from dpmf_lib.nbm import runs

    cfg = {"K": 1, "Nk": 20, "gamma": 0.05, "clip_l1": 1.0, "mean_share": 0.1}
    out = runs.evaluate("dpsgd-pnbm-clipped", "ml-100k", 1, 2.0, seed=0, **cfg)
    assert out["epsilon_effective"] == 2.0 and math.isnan(out["epsilon_amplified"])
    assert out["noise_scale_t1"] == pytest.approx(2 * 1.0 * 1 / (0.9 * 2.0))
    assert runs.LABELS["dpsgd-pnbm-clipped"].endswith("(ours)")
    with pytest.raises(ParameterError):
        runs.evaluate("dpsgd-pnbm-clipped", "ml-100k", 1, None, seed=0, **cfg)
