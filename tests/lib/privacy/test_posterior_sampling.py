"""Liu et al. Algorithm 1 / Theorem 2 (dpmf_lib.privacy): weights, B, trimming, ridge, range check, noise vs ε;
a release states how its redraws were made and which sampler ran."""

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.mf import MFModel, Schedule
from dpmf_lib.privacy import posterior_sampling as ps
from tests.mf_toys import dense_toy


def make_ratings(users, items, values, n_users, n_items, scale=(1.0, 5.0)):
    return Ratings(np.asarray(users, np.int32), np.asarray(items, np.int32), np.asarray(values, np.float32),
                   n_users, n_items, scale, DataSource("toy", False, note="privacy test toy"))


def lowrank_toy(n_users=300, n_items=40, per_user=25, d=2, seed=0):
    """Users rate ``per_user`` random items; r = clip(3 + <u*, v*> + N(0, 0.3²), 1, 5). Returns (ratings, V*)."""
    rng = np.random.default_rng(seed)
    Us = rng.standard_normal((n_users, d)) * 0.8
    Vs = rng.standard_normal((n_items, d)) * 0.8
    users = np.repeat(np.arange(n_users), per_user)
    items = np.concatenate([rng.choice(n_items, per_user, replace=False) for _ in range(n_users)])
    vals = np.clip(3 + np.einsum("ij,ij->i", Us[users], Vs[items]) + 0.3 * rng.standard_normal(len(users)), 1, 5)
    return make_ratings(users, items, vals, n_users, n_items), Vs


# ------------------------------------------------------------------------------------------- weights, B, trimming


def test_weights_and_B_on_hand_made_counts():
    """Also Section 6.6's "B = 2500 ... for Netflix" (τ = 100, κ = 1, ρ = 1, 1..5 stars): arithmetic, so a test
    here rather than a claim in params/claims.yaml."""
    m = np.array([0, 50, 100, 200, 400])  # τ = 100, κ = 1, scale 1..5: c = (4 + 1)² = 25, B0 = 2500
    w, B_i, B, B0 = ps.user_weights(m, tau=100, kappa=1.0, rho=1.0)
    assert B0 == 2500.0 and B == 2500.0
    np.testing.assert_allclose(w, [0, 1, 1, 0.5, 0.25])
    np.testing.assert_allclose(B_i, [0, 1250, 2500, 1250, 625])
    w, B_i, B, _ = ps.user_weights(m, tau=100, kappa=1.0, rho=10.0)  # light users up-weighted to the bound
    np.testing.assert_allclose(w, [0, 2, 1, 0.5, 0.25])
    np.testing.assert_allclose(B_i, [0, 2500, 2500, 1250, 625])
    w, B_i, B, _ = ps.user_weights(m, tau=100, kappa=1.0, rho=0.5)  # ρ < 1 caps everybody: B drops below B0
    np.testing.assert_allclose(w, [0, 0.5, 0.5, 0.5, 0.25])
    assert B == 1250.0


def test_B_is_the_data_max_not_the_weight_constant():
    # nobody reaches τ ratings: Algorithm 1 line 1 gives B = 60 · 25 < τ(Δ+κ)² = 2500
    w, B_i, B, B0 = ps.user_weights(np.array([30, 60]), tau=100, kappa=1.0, rho=1.0)
    assert (B, B0) == (1500.0, 2500.0)
    # the rating scale enters through Δ: scale 0..10, κ = 2 ⇒ c = 144
    _, _, B, B0 = ps.user_weights(np.array([10]), tau=10, kappa=2.0, rho=1.0, rating_scale=(0.0, 10.0))
    assert B0 == 1440.0 and B == 1440.0


def test_preprocess_trims_to_tau_seeded_and_aligns_weights():
    rng = np.random.default_rng(1)
    users = np.r_[np.zeros(50, int), np.ones(4, int), np.full(12, 2)]
    items = np.r_[np.arange(50), np.arange(4), np.arange(12)]
    r = make_ratings(users, items, rng.integers(1, 6, len(users)), 4, 50)
    pre = ps.preprocess(r, tau=10, kappa=1.0, rho=1.0, seed=3)
    assert pre.kept.tolist() == [10, 4, 10, 0] and pre.m.tolist() == [50, 4, 12, 0]
    assert pre.n_trimmed == 40 + 2 and pre.train.n_ratings == 24
    np.testing.assert_allclose(pre.w, [10 / 50, 1.0, 10 / 12, 0.0])
    np.testing.assert_allclose(pre.rating_weights, pre.w[pre.train.users].astype(np.float32))
    # kept ratings are ratings of the original set (same user, item and value)
    orig = {(u, i): v for u, i, v in zip(r.users, r.items, r.values)}
    assert all(orig[(u, i)] == v for u, i, v in zip(pre.train.users, pre.train.items, pre.train.values))
    # the user with ≤ τ ratings is untouched; trimming is reproducible and depends on the seed
    assert sorted(pre.train.items[pre.train.users == 1].tolist()) == [0, 1, 2, 3]
    again = ps.preprocess(r, tau=10, kappa=1.0, rho=1.0, seed=3)
    other = ps.preprocess(r, tau=10, kappa=1.0, rho=1.0, seed=4)
    assert np.array_equal(again.train.items, pre.train.items)
    assert not np.array_equal(other.train.items[other.train.users == 0], pre.train.items[pre.train.users == 0])
    assert pre.pred_range == (0.0, 6.0)


# ------------------------------------------------------------------------------------------- parameter errors


@pytest.mark.parametrize("name,value", [("epsilon", 0), ("epsilon", -1.0), ("epsilon", float("nan")),
                                        ("epsilon", float("inf")), ("epsilon", "x"), ("tau", 0), ("tau", 2.5),
                                        ("tau", True), ("kappa", 0.0), ("kappa", -1.0), ("kappa", float("nan")),
                                        ("rho", 0.0), ("rho", -2.0), ("rho", float("inf"))])
def test_invalid_parameters_raise_naming_the_parameter(name, value):
    with pytest.raises(ParameterError, match=name):
        ps.check_privacy_params(**{name: value})


def test_entry_points_validate_their_parameters():
    r, _ = lowrank_toy(n_users=20, n_items=10, per_user=5)
    with pytest.raises(ParameterError, match="tau"):
        ps.preprocess(r, tau=0, kappa=1.0, rho=1.0)
    with pytest.raises(ParameterError, match="kappa"):
        ps.preprocess(r, tau=5, kappa=-0.5, rho=1.0)
    with pytest.raises(ParameterError, match="rho"):
        ps.user_weights(np.array([3]), tau=5, kappa=1.0, rho=0)
    pre = ps.preprocess(r, tau=5, kappa=1.0, rho=1.0, seed=0)
    with pytest.raises(ParameterError, match="epsilon"):
        ps.sample_private(pre, -1.0, Lambda_u=1.0, Lambda_v=1.0, d=2, rounds=1)
    with pytest.raises(ParameterError, match="epsilon"):
        ps.privacy_accounting(pre, 0.0)


def test_likelihood_scale_makes_4B_the_unscaled_posterior():
    assert ps.likelihood_scale(4 * 2500.0, 2500.0, 2.0) == 1.0
    assert ps.likelihood_scale(1.0, 2500.0, 1.0) == pytest.approx(1 / 5000)


# ------------------------------------------------------------------------------------------- local ridge (eq. 5)


def test_local_ridge_equals_closed_form_solve_and_reference():
    rng = np.random.default_rng(2)
    r, _ = lowrank_toy(n_users=25, n_items=15, per_user=6, seed=2)
    r = make_ratings(np.r_[r.users, []], np.r_[r.items, []], r.values, 26, 15)  # user 25 has no rating
    d = 3
    V = rng.standard_normal((15, d)).astype(np.float32)
    bi = rng.standard_normal(15).astype(np.float32) * 0.3
    Lu = np.array([0.5, 1.0, 2.0])
    U, bu = ps.local_user_factors(r, V, bi, 3.0, Lambda_u=Lu, lam_bias=0.7, lambda_r=2.0)
    for i in (0, 7, 24):
        sel = r.users == i
        X = np.c_[V[r.items[sel]].astype(np.float64), np.ones(sel.sum())]
        y = r.values[sel] - 3.0 - bi[r.items[sel]]
        z = np.linalg.inv(2.0 * X.T @ X + np.diag(np.r_[Lu, 0.7])) @ (2.0 * X.T @ y)
        np.testing.assert_allclose(np.r_[U[i], bu[i]], z, rtol=1e-4, atol=1e-5)
    assert not U[25].any() and bu[25] == 0.0
    Ur, bur = ps.local_user_factors_reference(r, V, bi, 3.0, Lambda_u=Lu, lam_bias=0.7, lambda_r=2.0)
    np.testing.assert_allclose(U, Ur, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bu, bur, rtol=1e-4, atol=1e-5)


def test_local_ridge_recovers_exact_linear_user_with_tiny_ridge():
    rng = np.random.default_rng(3)
    V = rng.standard_normal((12, 2)).astype(np.float32)
    u, b = np.array([0.7, -1.2]), 0.4
    vals = V.astype(np.float64) @ u + b + 3.0
    r = make_ratings(np.zeros(12), np.arange(12), vals, 1, 12, scale=(-10.0, 10.0))
    U, bu = ps.local_user_factors(r, V, np.zeros(12, np.float32), 3.0, Lambda_u=1e-6, lam_bias=1e-6)
    np.testing.assert_allclose(U[0], u, atol=1e-3)
    assert bu[0] == pytest.approx(b, abs=1e-3)


# ------------------------------------------------------------------------------------------- range constraint


def test_range_violations_hand_made_and_against_reference():
    U, V = np.array([[1.0], [0.5]]), np.array([[1.0], [10.0]])
    out = ps.range_violations(U, V, np.zeros(2), np.zeros(2), 0.0, 0.0, 6.0)
    assert out == {"n_out": 1, "n_pairs": 4, "min": 0.5, "max": 10.0}
    assert ps.range_violations(U, V, np.zeros(2), np.zeros(2), 0.0, 0.0, 6.0, users=[1])["n_out"] == 0
    rng = np.random.default_rng(4)
    args = (rng.standard_normal((40, 5)), rng.standard_normal((30, 5)), rng.standard_normal(40),
            rng.standard_normal(30), 3.0, 0.0, 6.0)
    fast, ref = ps.range_violations(*args), ps.range_violations_reference(*args)
    assert fast["n_out"] == ref["n_out"] > 0 and fast["n_pairs"] == 1200
    assert fast["min"] == pytest.approx(ref["min"], abs=1e-5) and fast["max"] == pytest.approx(ref["max"], abs=1e-5)


def test_rejection_loop_counts_how_often_the_range_binds():
    r, _ = lowrank_toy(n_users=60, n_items=20, per_user=8, seed=5)
    # ε tiny: the sample is (nearly) a draw from the broad prior N(0, 1/0.5), which leaves [1 − κ, 5 + κ]
    kw = dict(Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=3, eta_n_max=1.0, resample_rounds=1,
              schedule=Schedule(n_threads=1), seed=0)  # DP releases default to fresh entropy; tests fix their seeds
    pre = ps.preprocess(r, tau=5, kappa=1e-4, rho=1.0, seed=0)
    rel = ps.sample_private(pre, 0.01, max_resamples=2, **kw)
    assert rel.n_resamples == 2 and len(rel.violations) == 3 and not rel.constraint_satisfied
    assert all(v > 0 for v in rel.violations) and rel.n_pairs == 60 * 20
    wide = ps.preprocess(r, tau=5, kappa=100.0, rho=1.0, seed=0)
    rel = ps.sample_private(wide, 0.01, max_resamples=2, **kw)
    assert rel.constraint_satisfied and rel.n_resamples == 0 and rel.violations == [0]
    assert rel.V.shape == (20, 2) and rel.bi.shape == (20,) and rel.b0 == 3.0


def test_same_seed_same_release_bytes():
    r, _ = lowrank_toy(n_users=50, n_items=20, per_user=6, seed=6)
    pre = ps.preprocess(r, tau=5, kappa=1.0, rho=1.0, seed=1)
    kw = dict(Lambda_u=2.0, Lambda_v=2.0, d=2, rounds=3, max_resamples=1, schedule=Schedule(n_threads=1), seed=9)
    a, b = ps.sample_private(pre, 10.0, **kw), ps.sample_private(pre, 10.0, **kw)
    assert a.V.tobytes() == b.V.tobytes() and a.violations == b.violations


# ------------------------------------------------------------------------------------------- noise vs ε (statistical)


def _gram_disagreement(V1, V2):
    """Rotation-invariant distance between two releases: relative Frobenius distance of the item Gram matrices."""
    G1, G2 = V1 @ V1.T, V2 @ V2.T
    return float(np.linalg.norm(G1 - G2) / np.sqrt(np.linalg.norm(G1) * np.linalg.norm(G2)))


def test_smaller_epsilon_gives_noisier_V():
    """Independent chains (disjoint seed pairs) agree on V Vᵀ when ε is large and disagree when ε is small."""
    r, _ = lowrank_toy(n_users=300, n_items=40, per_user=25, d=2, seed=7)
    pre = ps.preprocess(r, tau=25, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=1.0, Lambda_v=1.0, d=2, rounds=40, eta_n=0.02, gamma=0.3, check_range=False,
              schedule=Schedule(n_threads=1))

    def disagreements(eps):
        out = []
        for k in range(4):
            a = ps.sample_private(pre, eps, seed=100 + 2 * k, **kw).V
            b = ps.sample_private(pre, eps, seed=101 + 2 * k, **kw).V
            out.append(_gram_disagreement(a, b))
        return np.array(out)

    small, large = disagreements(0.5), disagreements(4 * pre.B)
    assert stats.ttest_ind(small, large, alternative="greater").pvalue < 0.01
    assert small.min() > large.max()


# ------------------------------------------------------------------------------------------- accounting


def test_accounting_personalized_eps_and_realized_loglik():
    # user 0: 2 ratings, user 1: 4 ratings; τ = 3 ⇒ user 1 keeps 3 with w = 3/4
    r = make_ratings([0, 0, 1, 1, 1, 1], [0, 1, 0, 1, 2, 3], [1, 5, 3, 3, 3, 3], 2, 4)
    pre = ps.preprocess(r, tau=3, kappa=1.0, rho=1.0, seed=0)
    assert pre.B_i.tolist() == [2 * 25.0, 3 * 0.75 * 25] and pre.B_data == 56.25  # the paper's max_i B_i
    assert pre.B == 3 * 25.0  # the data-independent B₀ = τ (Δ+κ)² the target and every ε use
    model = MFModel(np.zeros((2, 1), np.float32), np.zeros((4, 1), np.float32), np.zeros(2, np.float32),
                    np.zeros(4, np.float32), 3.0)  # predicts 3 everywhere
    acc = ps.privacy_accounting(pre, 8.0, model)
    np.testing.assert_allclose(acc.eps_i, 8.0 * pre.B_i / (2 * pre.B))
    np.testing.assert_allclose(acc.L_i, [(1 - 3) ** 2 + (5 - 3) ** 2, 0.0])
    np.testing.assert_allclose(acc.loglik_i, 8.0 * acc.L_i / (4 * pre.B))
    np.testing.assert_allclose(acc.eps_hat_i, 2 * acc.loglik_i)
    assert acc.bound_ok.all()
    s = ps.privacy_summary(pre, 8.0, acc)
    # rating level: ε max_i w_i (Δ+κ)²/B = 8 · 1 · 25/75 (user 0's weight is 1)
    assert s["epsilon_rating"] == pytest.approx(8.0 / 3) and s["eps_i_over_eps_max"] == pytest.approx(56.25 / 150)


# ---- the release states how its redraws were made and which sampler ran (issue #14 review) ----

def _release_args():
    z = np.zeros((3, 2), np.float32)
    return (z, np.zeros(3, np.float32), 3.0, 1.0, 10.0, 0.05, np.ones(2, np.float32), np.ones(2, np.float32), 1.0,
            2.0, True, 0)


def test_a_release_must_say_how_its_redraws_were_made():
    # the dataclass once defaulted to "continue" while sample_private defaults to "fresh": a release built without the
    # field misreported its redraws. Now it is a required keyword, checked against REDRAWS.
    with pytest.raises(TypeError, match="redraw"):
        ps.PrivateRelease(*_release_args(), sampler="sgld")
    with pytest.raises(ParameterError, match="redraw"):
        ps.PrivateRelease(*_release_args(), redraw="again", sampler="sgld")
    for r in ps.REDRAWS:
        assert ps.PrivateRelease(*_release_args(), redraw=r, sampler="sgld").redraw == r


def test_a_release_must_say_which_sampler_ran():
    with pytest.raises(TypeError, match="sampler"):
        ps.PrivateRelease(*_release_args(), redraw="fresh")
    with pytest.raises(ParameterError, match="sampler"):
        ps.PrivateRelease(*_release_args(), redraw="fresh", sampler="hmc")
    for s in ps.SAMPLERS:
        assert ps.PrivateRelease(*_release_args(), redraw="fresh", sampler=s).sampler == s


def test_sample_private_reports_the_redraw_that_ran():
    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=4, burn_in=2, eta_n_max=1.0,
              schedule=Schedule(n_threads=1), seed=1, max_resamples=1)
    assert ps.sample_private(pre, 0.01, **kw).redraw == "fresh"  # the function's default
    assert ps.sample_private(pre, 0.01, **kw, redraw="continue").redraw == "continue"
