"""Privacy properties of the DP release paths (issue #13): each test states a property a correct mechanism has and
that a known bug breaks (flip symmetry of BLIP, gradient clipping of DPSGD-PNBM, κ in DPPS, fresh per-round noise of
Hua S2 / fixed η of S3, ‖u_i‖ ≤ 1, weights in layout order, ζ in exact SGLD, temperature, NaN ε, seed policy).
Statistical tests use fixed seeds; thresholds are set so a correct implementation fails about once in 10³ runs."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib import nbm
from dpmf_lib.attacks.mechanisms import BLIP, JLT, bloom_codebook, bloom_filter, jlt_codebook, jlt_guarantee_void
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.mf import MFModel, Schedule, sample_sgld
from dpmf_lib.nbm import accounting as acc
from dpmf_lib.nbm import model as nbm_model
from dpmf_lib.nbm import runs
from dpmf_lib.objpert import mf as hua
from dpmf_lib.objpert import kernels as hua_kernels
from dpmf_lib.privacy import posterior_sampling as ps
from dpmf_lib.privacy.common import check_dp_epsilon, resolve_seed

NAN, INF = float("nan"), float("inf")


def ratings(users, items, values, n_users, n_items, scale=(1.0, 5.0)) -> Ratings:
    return Ratings(np.asarray(users, np.int32), np.asarray(items, np.int32), np.asarray(values, np.float32),
                   n_users, n_items, scale, DataSource("toy", False, note="dp release test toy"))


def random_ratings(n_users=40, n_items=25, per_user=12, seed=0, shuffle=True) -> Ratings:
    """Integer ratings 1..5 with structure (a user and an item effect), every user rating ``per_user`` items."""
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(n_users), per_user)
    items = np.concatenate([rng.choice(n_items, per_user, replace=False) for _ in range(n_users)])
    ub, ib = rng.normal(0, 1, n_users), rng.normal(0, 1, n_items)
    vals = np.clip(np.round(3 + ub[users] + ib[items] + rng.normal(0, 0.7, len(users))), 1, 5)
    order = rng.permutation(len(users)) if shuffle else np.arange(len(users))
    return ratings(users[order], items[order], vals[order], n_users, n_items)


# ------------------------------------------------------------------------------------------------ BLIP


def test_blip_flips_set_and_unset_bits_alike_and_bounds_the_likelihood_ratio():
    """(3.3)-(3.4): every bit flips with p = 1/(1 + e^{ε/K}) whether it is set or not. Then one item (≤ K bits) moves
    the likelihood of any output by at most e^ε: per bit, max(P(1|1)/P(1|0), P(0|0)/P(0|1)) = e^{ε/K}. A BLIP that
    flips only 0-bits never turns a 1 into a 0 and has an unbounded ratio."""
    eps, K = 2.0, 4
    cb = bloom_codebook(400, 500, K, seed=0)
    m = BLIP(cb, eps)
    items = np.arange(0, 400, 7)
    B = bloom_filter(items, cb).astype(bool)
    assert 0.2 < B.mean() < 0.8  # both kinds of bit are well represented
    rng = np.random.default_rng(1)
    obs = np.stack([m.sanitize(items, seed=rng) for _ in range(300)]).astype(bool)
    k1, n1 = int((~obs[:, B]).sum()), int(obs[:, B].size)  # set bits that flipped to 0
    k0, n0 = int(obs[:, ~B].sum()), int(obs[:, ~B].size)  # unset bits that flipped to 1
    p = m.p_eps
    assert stats.binomtest(k1, n1, p).pvalue > 1e-3, (k1 / n1, p)
    assert stats.binomtest(k0, n0, p).pvalue > 1e-3, (k0 / n0, p)
    # the worst-case per-bit likelihood ratio that the data *certify* (Clopper–Pearson, 99.9 %) stays below e^{ε/K}
    f1, f0 = stats.binomtest(k1, n1).proportion_ci(0.999), stats.binomtest(k0, n0).proportion_ci(0.999)
    lr_certified = max((1 - f1.high) / f0.high, (1 - f0.high) / f1.high)
    assert lr_certified <= math.exp(eps / K)
    assert int(cb.nbits.max()) <= K  # one item changes at most K bits: profile-level ratio ≤ e^ε


# ------------------------------------------------------------------------------------------------ DPSGD-PNBM


def _clip_toy():
    r = random_ratings(n_users=30, n_items=20, per_user=10, seed=2)
    rng = np.random.default_rng(3)
    S = rng.uniform(-0.05, 0.05, (20, 20)).astype(np.float32)  # small |s|: D < C, so D' = C and 1/D' is large
    np.fill_diagonal(S, 0)
    return r, nbm.prepare(r), S


def test_dpsgd_pnbm_per_rating_gradient_entries_are_within_the_clip():
    """Every entry of one rating's gradient obeys |G_ij| ≤ e_max(t) φ / C (the paper's ΔF / 2) — on a toy where the
    unclipped gradient exceeds that bound, so the clipping is what keeps it."""
    r, data, S = _clip_toy()
    phi, C, Nk = 4.0, 0.1, 4
    worst_unclipped = 0.0
    for t in (1, 6):
        e_max = acc.error_clamp(t, phi)
        bound = e_max * phi / C
        for k in range(r.n_ratings):
            u, i, v = r.users[k:k + 1], r.items[k:k + 1], r.values[k:k + 1]
            G = nbm.gradient(S, data, u, i, v, Nk=Nk, C=C, e_max=e_max, f_max=phi)
            assert np.abs(G).max() <= bound * (1 + 1e-5)
            G0 = nbm.gradient(S, data, u, i, v, Nk=Nk, C=C)
            worst_unclipped = max(worst_unclipped, float(np.abs(G0).max()) / bound)
    assert worst_unclipped > 1.2  # the toy is not flat: without the clips the bound is broken


def test_dpsgd_pnbm_training_passes_the_clips_to_every_gradient(monkeypatch):
    """train_pnbm must call the gradient with the clips of iteration t and the bound C; recomputing each rating's
    gradient with exactly the arguments it passed must respect e_max(t) φ / C."""
    r, data, _ = _clip_toy()
    calls = []
    real = nbm_model.gradient

    def spy(S, d, users, items, vals, **kw):
        calls.append((S.copy(), d, np.array(users), np.array(items), np.array(vals), kw))
        return real(S, d, users, items, vals, **kw)

    monkeypatch.setattr(nbm_model, "gradient", spy)
    C = 0.1
    nbm.train_pnbm(r, epsilon=1.0, K=3, eta=0.05, beta=1.0, C=C, Nk=4, gamma=0.5, min_user_ratings=5,
                   init_high=0.05, seed=4)
    assert len(calls) == 3
    for t, (S, d, users, items, vals, kw) in enumerate(calls, start=1):
        bound = acc.error_clamp(t, 4.0) * 4.0 / C
        assert kw.get("C") == C and kw.get("f_max") == 4.0
        assert kw.get("e_max") == pytest.approx(acc.error_clamp(t, 4.0))
        for k in range(0, len(users), 5):
            G = real(S, d, users[k:k + 1], items[k:k + 1], vals[k:k + 1], **kw)
            assert np.abs(G).max() <= bound * (1 + 1e-5)


# ------------------------------------------------------------------------------------------------ DPPS-PNBM


def _record_sgld_update(monkeypatch):
    """Spy on the DPPS-PNBM update, whichever path runs it — the fused batch kernel (the default: the Gaussian is
    drawn inside from ``key``, regenerated here with ``normal_fill_kernel``) or the numpy path's update kernel: per
    chain and step, the drift (S_after − S_before − sd·Z), drift scale a and sd."""
    from dpmf_lib.nbm.kernels import normal_fill_kernel

    rec = []
    real_numpy, real_fused = nbm_model.sgld_update_kernel, nbm_model.sgld_step_batch_kernel

    def spy(S, G, Hinv, present, gscale, lam, a, sd, Z):
        before = S.astype(np.float64)
        real_numpy(S, G, Hinv, present, gscale, lam, a, sd, Z)
        drift = S.astype(np.float64) - before - sd * Z.astype(np.float64)
        np.fill_diagonal(drift, 0.0)
        rec.append({"drift": drift, "a": a, "sd": sd})

    def spy_fused(S, G, Hinv, present, gscale, lam, a, sd, key):
        before = S.astype(np.float64)
        real_fused(S, G, Hinv, present, gscale, lam, a, sd, key)
        Z = np.empty(S.shape[1:], np.float32)
        normal_fill_kernel(key, Z)
        for b in range(S.shape[0]):
            drift = S[b].astype(np.float64) - before[b] - float(sd[b]) * Z.astype(np.float64)
            np.fill_diagonal(drift, 0.0)
            rec.append({"drift": drift, "a": float(a[b]), "sd": float(sd[b])})

    monkeypatch.setattr(nbm_model, "sgld_update_kernel", spy)
    monkeypatch.setattr(nbm_model, "sgld_step_batch_kernel", spy_fused)
    return rec


@pytest.mark.parametrize("impl", ["fused", "numpy"])
def test_dpps_drift_ratio_between_two_epsilons_is_the_kappa_ratio(monkeypatch, impl):
    """κ = min(1, ε/(4B)) scales the drift (likelihood and prior) of every step: with the same seed, the drift at ε₁
    over the drift at ε₂ is κ₁/κ₂ entry by entry. Without κ the two drifts would be equal."""
    r = random_ratings(n_users=40, n_items=15, per_user=10, seed=5)
    rec = _record_sgld_update(monkeypatch)
    kw = dict(tau=10, T=1, L=200, eta1=0.5, rho=1.0, lam=0.02, Nk=5, seed=6, impl=impl)
    B = acc.loglik_bound(r.rating_scale, 10)
    e1, e2 = 0.2 * 4 * B, 0.8 * 4 * B  # κ = 0.2 and 0.8
    nbm.sample_pnbm(r, epsilon=e1, **kw)
    nbm.sample_pnbm(r, epsilon=e2, **kw)
    assert len(rec) == 2, "the spy saw no update: the sampler runs a kernel this test does not know"
    d1, d2 = rec[0]["drift"], rec[1]["drift"]
    assert np.abs(d2).max() > 1e-3 and (np.abs(d2) > 1e-4).sum() > 50  # the drift is far above float32 rounding
    np.testing.assert_allclose(d1, (0.2 / 0.8) * d2, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("impl", ["fused", "numpy"])
@pytest.mark.parametrize("rho", [0.001, 0.09])
def test_dpps_pnbm_rho_scales_drift_and_noise_alike(monkeypatch, rho, impl):
    """ϱ is a step scale (module docstring of dpmf_lib.nbm.model): drift a = ϱη_tκ/2 and noise variance ϱη_t, so
    a / sd² = κ/2 whatever ϱ — the chain targets the ε-posterior, and the result says so. A temperature on the noise
    alone (a / sd² = κ/(2ϱ)) targets the (ε/ϱ)-posterior."""
    r = random_ratings(n_users=40, n_items=15, per_user=10, seed=5)
    rec = _record_sgld_update(monkeypatch)
    B = acc.loglik_bound(r.rating_scale, 10)
    eps = 0.5 * 4 * B
    res = nbm.sample_pnbm(r, epsilon=eps, tau=10, T=3, L=100, eta1=0.1, rho=rho, Nk=5, seed=7, impl=impl)
    assert len(rec) == 3, "the spy saw no update: the sampler runs a kernel this test does not know"
    for c in rec:
        assert c["a"] / c["sd"] ** 2 == pytest.approx(0.5 * 0.5, rel=1e-9)
    # the target is the ε-posterior, but the non-private item means couple all users: no ε is claimed for the release
    assert res.epsilon == eps and res.info["epsilon_target"] == pytest.approx(eps) and res.epsilon_effective is None


def test_dpsgd_mf_claims_no_epsilon_for_a_predictor_with_noiseless_item_means():
    """The released predictor uses r̄ computed without noise: no ε; the factors alone are 2ε (one rating moves the
    item's other errors through r̄), not the ε the paper's noise is calibrated to."""
    r = random_ratings(n_users=30, n_items=12, per_user=6, seed=2)
    res = nbm.train_dpsgd_mf(r, epsilon=1.0, K=2, d=2, seed=1)
    assert res.epsilon_effective is None and res.epsilon_factors == 2.0
    assert any("r̄" in c for c in res.privacy_caveats)


# ------------------------------------------------------------------------------------------------ Hua S1/S2/S3


def _zero_problem(n_users=60, n_items=200, per_user=40, seed=0):
    """All ratings 0 and U(0) = V(0) = 0: the data gradient vanishes, U stays 0, and V(t) reveals the noise exactly:
    V(t) = (1 − 2γμ) V(t−1) − γ w_j noise_j(t)."""
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(n_users), per_user)
    items = np.concatenate([rng.choice(n_items, per_user, replace=False) for _ in range(n_users)])
    r = ratings(users, items, np.zeros(len(users)), n_users, n_items, scale=(0.0, 1.0))
    return hua.Problem.from_ratings(r)


def _noise_per_round(monkeypatch, run, prob, cfg, T):
    monkeypatch.setattr(hua, "init_factors", lambda p, d, seed: (np.zeros((p.n_users, d), np.float32),
                                                                 np.zeros((p.n_items, d), np.float32)))
    res = run(list(range(1, T + 1)))
    _, iw = prob.weights(cfg)
    assert np.all(prob.item_counts > 0)
    out, V_prev = [], np.zeros((prob.n_items, cfg.d))
    for t in range(1, T + 1):
        U, V = (x.astype(np.float64) for x in res.factors[t])
        assert not U.any()  # U = 0 throughout: V moves only by the noise and the μ shrinkage
        out.append(((1 - 2 * cfg.gamma * cfg.mu) * V_prev - V) / (cfg.gamma * iw[:, None]))
        V_prev = V
    return np.stack(out), res


def _round_correlation(noise):
    T = len(noise)
    return float(np.mean([np.corrcoef(noise[t].ravel(), noise[s].ravel())[0, 1]
                          for t in range(T) for s in range(t + 1, T)]))


def test_hua_s2_noise_is_fixed_eta_plus_fresh_rho_every_round(monkeypatch):
    """S2 (Sec. 4.2): round t adds η_j + ρ̃_j(t), η_j drawn once, ρ̃_j(t) "re-sampled during each iteration", both
    per-coordinate Laplace(2Δ√d/ε). So the per-round noise has variance 4b² and two rounds correlate at 1/2: a
    fixed ρ̃ would correlate at 1, no η at 0."""
    prob = _zero_problem()
    cfg = hua.HuaConfig(d=8)
    eps = 1.0
    noise, res = _noise_per_round(monkeypatch, lambda its: hua.run_s2(prob, cfg, eps, its, seed=3, keep_factors=True),
                                  prob, cfg, 6)
    b = 2 * prob.delta * math.sqrt(cfg.d) / eps
    assert noise.var() == pytest.approx(4 * b * b, rel=0.2)
    assert 0.38 < _round_correlation(noise) < 0.62
    assert res.privacy["epsilon_stated"] == eps and res.privacy["epsilon_effective"] is None


def test_hua_s3_keeps_eta_from_the_initialisation_and_draws_fresh_rho(monkeypatch):
    """S3 (Sec. 4.3): "η_j no longer varies in different iterations"; ρ̃_j(t) is fresh. Redrawing η every round would
    make rounds uncorrelated; a fixed ρ̃ would make them identical."""
    prob = _zero_problem()
    cfg = hua.HuaConfig(d=8)
    run = lambda its: hua.run_s3(prob, cfg, 1.0, its, seed=4, p_join=1.0, p_leave=0.0, max_online=10 ** 6,
                                 keep_factors=True)
    noise, _ = _noise_per_round(monkeypatch, run, prob, cfg, 6)
    assert 0.38 < _round_correlation(noise) < 0.62


def test_hua_user_factors_stay_in_the_unit_ball_in_s1_s2_s3():
    """Theorem 1's sensitivity bound needs ‖u_i‖ ≤ 1; on this toy unprojected rows leave the ball."""
    r = random_ratings(n_users=50, n_items=20, per_user=12, seed=8)
    r = ratings(r.users, r.items, np.full(r.n_ratings, 5.0), r.n_users, r.n_items)  # large targets push |u| up
    prob = hua.Problem.from_ratings(r)
    T = 30
    for max_norm in (1.0, math.inf):
        cfg = hua.HuaConfig(d=4, max_norm=max_norm)
        runs_ = {"s1": hua.run_s1(prob, cfg, 1.0, [T], seed=1, keep_factors=True),
                 "s2": hua.run_s2(prob, cfg, 1.0, [T], seed=1, keep_factors=True),
                 "s3": hua.run_s3(prob, cfg, 1.0, [T], seed=1, p_join=1.0, p_leave=0.0, max_online=25,
                                  keep_factors=True)}
        for name, res in runs_.items():
            norms = np.linalg.norm(res.factors[T][0].astype(np.float64), axis=1)
            if max_norm == 1.0:
                assert norms.max() <= 1 + 1e-5, name
            else:
                assert norms.max() > 1.05, name  # the toy needs the projection


def test_hua_s1_defaults_to_the_exact_minimiser_and_gd_is_labelled():
    r = random_ratings(n_users=40, n_items=15, per_user=8, seed=9)
    prob = hua.Problem.from_ratings(r)
    assert hua.HuaConfig().reopt == "exact"
    ex = hua.run_s1(prob, hua.HuaConfig(d=4), 0.5, [5], seed=2)
    gd = hua.run_s1(prob, hua.HuaConfig(d=4, reopt="gd"), 0.5, [5], seed=2)
    # U is non-private MF on the same ratings: Theorem 1's premise (V given a fixed U) is broken, no ε holds
    assert ex.privacy["epsilon_effective"] is None and any("premise broken" in c for c in ex.privacy["caveats"])
    assert gd.privacy["epsilon_effective"] is None and any("gd" in c for c in gd.privacy["caveats"])


def test_hua_item_gram_kernel_agrees_with_reference():
    r = random_ratings(n_users=60, n_items=30, per_user=9, seed=10)
    prob = hua.Problem.from_ratings(r)
    U = np.random.default_rng(0).standard_normal((prob.n_users, 6)).astype(np.float32)
    A1, b1 = hua.item_gram(prob, U, "numba")
    A2, b2 = hua_kernels.item_gram_reference(prob.users, prob.items, prob.values, U, prob.n_items)
    np.testing.assert_allclose(A1, A2, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(b1, b2, rtol=1e-10, atol=1e-10)


# ------------------------------------------------------------------------------------------------ Liu / SGLD


def test_sgld_weights_reach_the_kernel_in_layout_order():
    """Per-rating weights are given in the order of the Ratings; the kernel visits ratings in layout order, so they
    must be permuted with it. With V frozen and (almost) no noise, SGLD is SGD on the weighted ridge objective, whose
    per-user minimiser we solve exactly: the sample must match the solution with the weights where they belong, not
    the one with the weights in storage order."""
    rng = np.random.default_rng(11)
    n_users, n_items, d = 30, 16, 2
    r0 = random_ratings(n_users, n_items, per_user=8, seed=11)
    V = rng.standard_normal((n_items, d)).astype(np.float32)
    Us = rng.standard_normal((n_users, d))
    vals = (np.einsum("kd,kd->k", Us[r0.users], V[r0.items]) + rng.normal(0, 1.0, r0.n_ratings)).astype(np.float32)
    r = ratings(r0.users, r0.items, vals, n_users, n_items, scale=(-10.0, 10.0))
    w = rng.uniform(0.05, 3.0, r.n_ratings).astype(np.float32)
    start = MFModel(np.zeros((n_users, d), np.float32), V.copy(), np.zeros(n_users, np.float32),
                    np.zeros(n_items, np.float32), 0.0)
    res = sample_sgld(r, d=d, epochs=400, eta0=0.01 / r.n_ratings, gamma=0.0, zeta=1e-12, lambda_r=1.0,
                      fixed_lambda=(1.0, 1.0), weights=w, model=start, freeze_items=True, biases=False,
                      schedule=Schedule(n_threads=1), seed=0)

    def ridge(wt):
        out = np.zeros((n_users, d))
        for i in range(n_users):
            s = r.users == i
            X, y, ww = V[r.items[s]].astype(np.float64), vals[s].astype(np.float64), wt[s].astype(np.float64)
            out[i] = np.linalg.solve(np.eye(d) + X.T @ (ww[:, None] * X), X.T @ (ww * y))
        return out

    want = ridge(w)
    wrong = np.empty_like(w)
    wrong[res.layout.order] = w  # weight k applied to the rating the kernel visits k-th
    err = np.abs(res.model.U - want).max()
    err_wrong = np.abs(ridge(wrong) - want).max()
    assert err_wrong > 0.3
    assert err < 0.1 * err_wrong and err < 0.05


@pytest.mark.parametrize("zeta", [0.25, 1.0])
def test_exact_mode_sgld_honours_zeta(zeta):
    """mode="exact" (eager fresh normals): with no data term the chain samples the prior at temperature ζ,
    u ~ N(0, ζ/Λ). The sample variance of the final state must fit ζ/Λ (χ² test) — noise N(0, η) ignoring ζ
    gives 1/Λ."""
    r = random_ratings(n_users=40, n_items=20, per_user=6, seed=12)
    d = 4
    res = sample_sgld(r, d=d, epochs=60, eta0=0.2 / r.n_ratings, gamma=0.0, zeta=zeta, fixed_lambda=(1.0, 1.0),
                      weights=np.zeros(r.n_ratings, np.float32), mode="exact", biases=False,
                      schedule=Schedule(n_threads=1), seed=13)
    x = np.concatenate([res.model.U.ravel(), res.model.V.ravel()]).astype(np.float64)
    n = len(x)
    stat = float((x ** 2).sum() / zeta)  # mean 0 is exact here (no data term)
    p = 2 * min(stats.chi2.cdf(stat, n), stats.chi2.sf(stat, n))
    assert p > 1e-3, (x.var(), zeta)


def _liu_toy():
    r = random_ratings(n_users=50, n_items=20, per_user=8, seed=14)
    return r, ps.preprocess(r, tau=6, kappa=1.0, rho=1.0, seed=1)


def test_sample_private_refuses_a_temperature_and_offers_a_step_scale():
    r, pre = _liu_toy()
    kw = dict(Lambda_u=2.0, Lambda_v=2.0, d=2, rounds=3, check_range=False, schedule=Schedule(n_threads=1), seed=5)
    eps = 4 * pre.B  # likelihood scale 1: the step is eta_n itself, below the cap
    with pytest.raises(ParameterError, match="zeta"):
        ps.sample_private(pre, eps, zeta=0.006, **kw)
    a = ps.sample_private(pre, eps, step_scale=0.5, **kw)
    b = ps.sample_private(pre, eps, eta_n=0.01, **kw)  # step_scale 0.5 == half the step, drift and noise alike
    np.testing.assert_allclose(a.V, b.V, rtol=1e-5, atol=1e-6)
    # the range rule was not checked, so Theorem 1 gives no finite ε for this sample: None, not the stated ε
    assert a.epsilon == eps and a.epsilon_effective is None and a.step_scale == 0.5
    assert any("non-private run" in c for c in a.privacy_caveats)  # Λ may be data-dependent, and says so


def test_dpps_mf_maps_rho_to_a_step_scale():
    r, _ = _liu_toy()
    rel = runs.dpps_mf_release(r, epsilon=50.0, seed=3, eta=1e-4, lam=0.05, rho=0.03, d=2, tau=6, rounds=2)
    assert rel.step_scale == 0.03 and rel.epsilon_effective == (50.0 if rel.constraint_satisfied else None)


# ------------------------------------------------------------------------------------------------ NaN / inf ε


def test_only_none_means_non_private(monkeypatch):
    assert check_dp_epsilon(None) is None and check_dp_epsilon(2) == 2.0
    r, pre = _liu_toy()
    monkeypatch.setattr(runs, "fold_data", lambda dataset, fold: (r, r))  # a NaN that slipped through runs fast
    monkeypatch.setattr(runs, "_dataset", lambda dataset: r)
    prob = hua.Problem.from_ratings(r)
    for bad in (NAN, INF):
        calls = [lambda: check_dp_epsilon(bad),
                 lambda: ps.sample_private(pre, bad, Lambda_u=1.0, Lambda_v=1.0, d=2, rounds=1),
                 lambda: nbm.train_pnbm(r, epsilon=bad, K=1),
                 lambda: nbm.sample_pnbm(r, epsilon=bad, T=1, L=5),
                 lambda: nbm.train_dpsgd_mf(r, epsilon=bad, K=1),
                 lambda: runs.evaluate("dpsgd-pnbm", "toy", 1, epsilon=bad, K=1, min_user_ratings=5),
                 lambda: runs.run_grid("dpsgd-pnbm", "toy", [1], [1.0, bad], {}, {"K": 1, "min_user_ratings": 5}, 0),
                 lambda: hua.run_s1(prob, hua.HuaConfig(d=2), bad, [1]),
                 lambda: hua.run_s2(prob, hua.HuaConfig(d=2), bad, [1]),
                 lambda: BLIP(bloom_codebook(10, 20, 2), bad),
                 lambda: JLT(jlt_codebook(10, 20), bad)]
        for call in calls:
            with pytest.raises(ParameterError):
                call()


def test_non_private_grid_rows_survive_the_dataframe_round_trip(monkeypatch):
    r = random_ratings(seed=15)
    monkeypatch.setattr(runs, "fold_data", lambda dataset, fold: (r, r))
    monkeypatch.setattr(runs, "_dataset", lambda dataset: r)
    df = runs.run_grid("pcc", "toy", [1], [None], {}, {"Nk": 5}, 0, 1)
    assert len(df) == 1 and np.isnan(df["epsilon"].iloc[0]) and np.isfinite(df["rmse"].iloc[0])
    assert runs.best_rmse(runs.select_best(df), r.source.label, "pcc") == df["rmse"].iloc[0]


def test_jlt_points_outside_3_10_are_flagged():
    assert [jlt_guarantee_void(e, 0.1) for e in (600, 6, 3, 2, 0.1)] == [True, True, True, False, False]


# ------------------------------------------------------------------------------------------------ seeds


def test_resolve_seed_policy():
    a, fa = resolve_seed(None)
    b, _ = resolve_seed(None)
    assert not fa and a != b and 0 <= a < 2 ** 63
    assert resolve_seed(7) == (7, True)
    with pytest.raises(ParameterError, match="seed"):
        resolve_seed(-1)


def test_dp_releases_default_to_fresh_entropy_and_a_recorded_seed_replays_them():
    r, pre = _liu_toy()
    kw = dict(Lambda_u=2.0, Lambda_v=2.0, d=2, rounds=2, check_range=False, schedule=Schedule(n_threads=1))
    a, b = ps.sample_private(pre, 10.0, **kw), ps.sample_private(pre, 10.0, **kw)
    assert not a.seed_was_fixed and a.seed_used != b.seed_used and a.V.tobytes() != b.V.tobytes()
    again = ps.sample_private(pre, 10.0, seed=a.seed_used, **kw)
    assert again.seed_was_fixed and again.V.tobytes() == a.V.tobytes()
    assert not ps.preprocess(r, tau=6, kappa=1.0, rho=1.0).seed_was_fixed

    for fn, kw2 in ((nbm.train_pnbm, dict(epsilon=1.0, K=2, min_user_ratings=5)),
                    (nbm.sample_pnbm, dict(epsilon=20.0, T=2, L=30, tau=10)),
                    (nbm.train_dpsgd_mf, dict(epsilon=1.0, K=2))):
        x, y = fn(r, **kw2), fn(r, **kw2)
        X = x.S if hasattr(x, "S") else x.P
        assert not x.seed_was_fixed and x.seed_used != y.seed_used
        assert X.tobytes() != (y.S if hasattr(y, "S") else y.P).tobytes()
        z = fn(r, seed=x.seed_used, **kw2)
        assert z.seed_was_fixed and X.tobytes() == (z.S if hasattr(z, "S") else z.P).tobytes()

    prob = hua.Problem.from_ratings(r)
    cfg = hua.HuaConfig(d=3)
    h1, h2 = hua.run_s2(prob, cfg, 1.0, [3]), hua.run_s2(prob, cfg, 1.0, [3])
    assert not h1.privacy["seed_was_fixed"] and h1[3]["mean"] != h2[3]["mean"]
    h3 = hua.run_s2(prob, cfg, 1.0, [3], seed=h1.privacy["seed_used"])
    assert h3[3]["mean"] == h1[3]["mean"]

    blip = BLIP(bloom_codebook(50, 400, 3, seed=0), 1.0)
    assert blip.sanitize(np.arange(5)).tobytes() != blip.sanitize(np.arange(5)).tobytes()
    assert blip.sanitize(np.arange(5), seed=3).tobytes() == blip.sanitize(np.arange(5), seed=3).tobytes()


def test_count_sketch_clipping_is_deterministic_given_data_and_seed():
    """"Data-clipped privacy" adds no noise: same data + seed → bit-identical release, so no finite ε can hold."""
    from dpmf_lib.sketch import make_model, prepare_split, train

    r = random_ratings(n_users=60, n_items=30, per_user=10, seed=16)
    split = prepare_split(r, 0, min_freq=1)
    out = []
    for _ in range(2):
        m = make_model("count_sketch", split.n_users, split.n_items, 4, gamma=2.0, k=2, seed=np.random.default_rng(1))
        train(m, split, epochs=3, eta=0.02, lam=0.01, clip=0.5, seed=np.random.default_rng(2))
        out.append(m.C.tobytes())
    assert out[0] == out[1]


def test_liu_release_claims_its_epsilon_only_when_the_range_rule_held(monkeypatch):
    """Theorem 1 needs every prediction within the range (Algorithm 1 lines 5–6) and a data-independent prior: a
    sample that did not meet the range carries epsilon_effective None; one that met it (here: a range check forced
    to pass) carries the stated ε only when Λ is declared public — Λ that may be fit to the ratings (the figures')
    breaks the premise, and then no ε holds either."""
    r, pre = _liu_toy()
    kw = dict(Lambda_u=2.0, Lambda_v=2.0, d=2, rounds=2, schedule=Schedule(n_threads=1), seed=5)
    eps = 4 * pre.B
    assert ps.sample_private(pre, eps, check_range=False, priors_public=True, **kw).epsilon_effective is None
    monkeypatch.setattr(ps, "range_violations", lambda *a, **k: {"n_out": 0, "n_pairs": 1, "min": 1.0, "max": 5.0})
    held = ps.sample_private(pre, eps, check_range=True, priors_public=True, **kw)
    assert held.constraint_satisfied and held.epsilon_effective == eps
    fitted = ps.sample_private(pre, eps, check_range=True, **kw)
    assert fitted.constraint_satisfied and fitted.epsilon_effective is None
