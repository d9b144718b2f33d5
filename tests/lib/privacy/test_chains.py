"""Liu Figure 7's chains (issue #14): the convergence diagnostic, independent redraws, the exact Gibbs block;
the chains do not hold every chain's kept V draws after the diagnostics have read them."""

import gc
import weakref

import numpy as np
import pytest

import dpmf_lib.mf as mf
from dpmf_lib.diagnostics import ess, split_rhat
from dpmf_lib.mf import Schedule
from dpmf_lib.privacy import exact_gibbs as eg
from dpmf_lib.privacy import posterior_sampling as ps
from tests.mf_toys import dense_toy


def test_split_rhat_catches_a_non_mixed_chain_and_passes_a_mixed_one():
    rng = np.random.default_rng(0)
    mixed = rng.standard_normal((4, 500))
    assert split_rhat(mixed) < 1.02
    apart = mixed + np.array([0.0, 0.0, 1.0, 1.0])[:, None]  # chains stuck in different places
    assert split_rhat(apart) > 1.1
    drifting = mixed[:1] + np.linspace(0, 3, 500)  # one chain still moving from its start: split halves disagree
    assert split_rhat(drifting) > 1.1


def test_ess_of_iid_and_ar1_chains():
    rng = np.random.default_rng(1)
    iid = rng.standard_normal((2, 4000))
    assert 0.85 * 8000 < ess(iid) < 1.15 * 8000
    phi, x = 0.8, np.zeros((2, 20000))
    e = rng.standard_normal(x.shape)
    for t in range(1, x.shape[1]):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    expect = x.size * (1 - phi) / (1 + phi)  # 1/9 of the draws
    assert 0.75 * expect < ess(x) < 1.25 * expect


def test_redraws_are_separate_chains_with_their_own_seeds():
    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=6, burn_in=2, n_chains=2, eta_n_max=1.0,
              schedule=Schedule(n_threads=1), seed=3, max_resamples=3)
    rel = ps.sample_private(pre, 0.01, **kw)  # broad posterior: every draw violates the range, the loop gives up
    assert rel.n_resamples == 3 and rel.n_chains == 4 and rel.released_chain == 3 and rel.redraw == "fresh"
    seeds = {ps.chain_seed(3, k) for k in range(4)}
    assert len(seeds) == 4
    # the released sample is chain 3's own final state, not a continuation of chain 0
    alone = ps.sample_private(pre, 0.01, **{**kw, "max_resamples": 0, "n_chains": 1, "seed": ps.chain_seed(3, 3)})
    np.testing.assert_array_equal(rel.V, alone.V)
    Vs = [m.V for m in rel.chain_models]
    assert all(not np.array_equal(Vs[a], Vs[b]) for a in range(4) for b in range(a))
    # each chain's draws come from its own start: chain 1 equals a run seeded with chain 1's seed
    one = ps.sample_private(pre, 0.01, **{**kw, "max_resamples": 0, "n_chains": 1, "seed": ps.chain_seed(3, 1)})
    np.testing.assert_array_equal(rel.chain_models[1].V, one.V)
    assert set(rel.trace.chain) == {0, 1, 2, 3}


def test_gibbs_block_kernel_matches_numpy_reference():
    r = dense_toy(2)
    rng = np.random.default_rng(5)
    d = 3
    w = rng.uniform(0.2, 1.0, r.n_ratings)
    indptr, idx, vals, wts = eg._csr_with_weights(r.users, r.items, r.values, w, r.n_users)
    V, bi = rng.standard_normal((r.n_items, d)), rng.standard_normal(r.n_items) * 0.1
    reg = np.array([1.5, 2.0, 0.7, 1.1])
    xi = rng.standard_normal((r.n_users, d + 1))
    out, out_b = np.zeros((r.n_users, d)), np.zeros(r.n_users)
    eg._gibbs_side_kernel(indptr, idx, vals, wts, V, bi, True, 3.0, reg, 0.8, xi, out, out_b)
    ref, ref_b = eg.gibbs_side_reference(indptr, idx, vals, wts, V, bi, 3.0, reg, 0.8, xi)
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(out_b, ref_b, rtol=1e-9, atol=1e-10)


def test_gibbs_block_draws_have_the_conditional_moments():
    r = dense_toy(3, n_users=1, n_items=6)
    d = 2
    rng = np.random.default_rng(7)
    w = np.ones(r.n_ratings)
    indptr, idx, vals, wts = eg._csr_with_weights(r.users, r.items, r.values, w, 1)
    V, bi = rng.standard_normal((r.n_items, d)), np.zeros(r.n_items)
    reg = np.array([1.0, 2.0, 0.5])
    n = 20000  # the same user repeated n times: n independent draws of its conditional in one call
    k = indptr[1]
    rep = (np.arange(n + 1) * k).astype(np.int64), np.tile(idx, n), np.tile(vals, n), np.tile(wts, n)
    out, out_b = np.zeros((n, d)), np.zeros(n)
    eg._gibbs_side_kernel(*rep, V, bi, True, 3.0, reg, 2.0, rng.standard_normal((n, d + 1)), out, out_b)
    draws = np.hstack([out, out_b[:, None]])
    X = np.hstack([V[idx], np.ones((len(idx), 1))])
    P = 2.0 * X.T @ X + np.diag(reg)
    mu = np.linalg.solve(P, 2.0 * X.T @ (vals - 3.0))
    C = np.linalg.inv(P)
    se = np.sqrt(np.diag(C) / n)
    assert np.all(np.abs(draws.mean(0) - mu) < 5 * se)
    np.testing.assert_allclose(np.cov(draws.T), C, atol=0.05 * np.abs(C).max())


def test_gibbs_reference_mixes_on_a_small_problem():
    pre = ps.preprocess(dense_toy(4, 30, 20), tau=10, kappa=1.0, rho=1.0, seed=0)
    g = eg.gibbs_reference(pre, 4 * pre.B, Lambda_u=2.0, Lambda_v=2.0, lam_bias=1.0, d=2, sweeps=300, burn_in=100,
                           n_chains=2, seed=1)
    assert g["n_chains"] == 2 and g["rhat"] < 1.1 and len(g["models"]) == 2


def test_bad_chain_parameters_raise():
    from dpmf_lib.errors import ParameterError

    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    for bad in (dict(n_chains=0), dict(burn_in=-1), dict(thin=0), dict(redraw="again")):
        with pytest.raises(ParameterError):
            ps.sample_private(pre, 1.0, Lambda_u=1.0, Lambda_v=1.0, d=2, rounds=2, seed=0, **bad)


def test_every_chain_phase_has_its_own_noise_seed():
    # chain 0 is seeded by `seed` itself; deriving its sampling phase as chain_seed(chain_seed(seed, 0), 1) made it
    # replay chain 1's burn-in noise (the review's finding): the "independent" redraw shared noise with the draw it
    # replaced, and R̂ over the two chains was biased low
    for seed in (0, 3, 12345):
        phases = [ps.chain_seed(seed, k) for k in range(4)] + [ps.phase_seed(ps.chain_seed(seed, k)) for k in range(4)]
        assert len(set(phases)) == 8


def test_no_two_sgld_runs_of_a_release_share_a_noise_seed(monkeypatch):
    import dpmf_lib.mf as mf

    seeds, real = [], mf.sample_sgld

    def spy(*a, **k):
        seeds.append(k["seed"])
        return real(*a, **k)

    monkeypatch.setattr(mf, "sample_sgld", spy)
    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=4, burn_in=4, n_chains=3, eta_n_max=1.0,
              schedule=Schedule(n_threads=1), seed=3, max_resamples=0)
    rel = ps.sample_private(pre, 0.01, **kw)
    # burn-in and sampling phase of 3 chains: 6 noise streams (seed → splitmix64 stream and Gaussian table), all
    # distinct — before the fix chain 0's sampling phase reused chain 1's burn-in seed
    assert len(seeds) == 6 and len(set(seeds)) == 6
    assert rel.n_chains == 3
    assert any("not covered by ε" in c and "3 chains" in c for c in rel.privacy_caveats)


def test_a_drifting_chain_has_a_much_smaller_ess_than_iid_draws():
    rng = np.random.default_rng(4)
    iid = rng.standard_normal((2, 2000))
    drifting = iid + np.linspace(0, 4, 2000)  # both chains still moving: split halves disagree
    assert ess(drifting) < 0.2 * ess(iid)


def test_an_unmeasurable_statistic_leaves_the_chains_unvouched_for():
    import pandas as pd

    rng = np.random.default_rng(6)
    rows = [{"chain": c, "draw": t, "v_norm2": float(rng.standard_normal()), "sample_rmse": float(rng.standard_normal())}
            for c in range(2) for t in range(50)]
    ok = ps.chain_diagnostics(pd.DataFrame(rows))
    assert np.isfinite(ok["rhat"]) and np.isfinite(ok["ess"])
    rows[7]["sample_rmse"] = float("inf")  # one statistic cannot be diagnosed: the other must not vouch alone
    bad = ps.chain_diagnostics(pd.DataFrame(rows))
    assert np.isnan(bad["rhat"]) and np.isnan(bad["ess"])


# --- the exact block-Gibbs sampler as Algorithm 1's sampler (issue #14: a better-mixing sampler of the same target)


def test_gibbs_release_is_the_final_state_of_an_exact_gibbs_chain():
    pre = ps.preprocess(dense_toy(4, 30, 20), tau=10, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=2.0, Lambda_v=2.0, lam_bias=1.0, d=2)
    rel = ps.sample_private(pre, 4 * pre.B, **kw, rounds=40, burn_in=20, n_chains=2, seed=5, sampler="gibbs",
                            max_resamples=0)
    assert rel.sampler == "gibbs" and rel.n_chains == 2 and rel.released_chain == 0
    ref = eg.gibbs_reference(pre, 4 * pre.B, **kw, sweeps=60, burn_in=20, n_chains=2, seed=5)
    for got, want in zip(rel.chain_models, ref["models"]):
        np.testing.assert_array_equal(got.V, want.V)
        np.testing.assert_array_equal(got.bi, want.bi)
    np.testing.assert_array_equal(rel.V, ref["models"][0].V)
    assert rel.ess == pytest.approx(ref["ess"]) and rel.rhat == pytest.approx(ref["rhat"])
    assert len(rel.trace) == 2 * 40 and set(rel.history.phase) == {"burn_in", "sampling"}


def test_gibbs_release_depends_on_epsilon_through_the_likelihood_only():
    # at a tiny ε the target is (almost) the prior: the released V's per-dimension variance is ≈ 1/Λ_v
    pre = ps.preprocess(dense_toy(4, 30, 200), tau=10, kappa=1.0, rho=1.0, seed=0)
    rel = ps.sample_private(pre, 1e-6, Lambda_u=2.0, Lambda_v=4.0, lam_bias=1.0, d=3, rounds=2, burn_in=1,
                            seed=1, sampler="gibbs", check_range=False)
    v = rel.V.astype(np.float64).ravel()
    assert abs(v.var() - 0.25) < 0.25 * 0.25  # 600 draws: sd of the sample variance ≈ 6 %


def test_gibbs_sampler_refuses_what_it_cannot_sample():
    from dpmf_lib.errors import ParameterError

    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=1.0, Lambda_v=1.0, d=2, rounds=2, seed=0, sampler="gibbs")
    with pytest.raises(ParameterError, match="clip_loss"):
        ps.sample_private(pre, 1.0, clip_loss=True, **kw)
    with pytest.raises(ParameterError, match="redraw"):
        ps.sample_private(pre, 1.0, redraw="continue", **kw)
    with pytest.raises(ParameterError, match="sampler"):
        ps.sample_private(pre, 1.0, **{**kw, "sampler": "hmc"})


def test_gibbs_blocks_sample_the_sgld_paths_target(monkeypatch):
    # the review's mutations (likelihood ε/(4B) instead of ε/(2B), Λ_v on the U block, b_0 from the data, weights
    # dropped) all passed a test that compared sample_private(gibbs) with gibbs_reference, which share gibbs_chain:
    # check what the blocks are given against the SGLD path's own definition of the target
    pre = ps.preprocess(dense_toy(4, 30, 20), tau=10, kappa=1.0, rho=3.0, seed=0)
    assert len(np.unique(pre.rating_weights)) > 1  # the weights are not all 1, so dropping them shows
    calls, real = [], eg._gibbs_side_kernel

    def spy(indptr, idx, vals, wts, X, xb, own_b, b0, reg, lik, xi, out, out_b):
        calls.append((indptr.copy(), wts.copy(), b0, reg.copy(), lik, X.shape[0]))
        return real(indptr, idx, vals, wts, X, xb, own_b, b0, reg, lik, xi, out, out_b)

    monkeypatch.setattr(eg, "_gibbs_side_kernel", spy)
    eps, lu, lv, lb, lam_r = 0.7 * pre.B, np.array([2.0, 3.0]), np.array([5.0, 7.0]), 0.5, 2.0
    rel = ps.sample_private(pre, eps, Lambda_u=lu, Lambda_v=lv, lam_bias=lb, d=2, lambda_r=lam_r, rounds=2,
                            burn_in=1, seed=1, sampler="gibbs", check_range=False)
    t = pre.train
    assert len(calls) == 2 * 3  # (users block, items block) per sweep, 3 sweeps
    for k, (indptr, wts, b0, reg, lik, n_other) in enumerate(calls):
        users_block = k % 2 == 0
        assert lik == pytest.approx(rel.likelihood_scale * lam_r) and lik == pytest.approx(eps / (2 * pre.B))
        assert b0 == 0.5 * (pre.rating_scale[0] + pre.rating_scale[1]) == rel.b0
        np.testing.assert_allclose(reg, np.r_[lu if users_block else lv, lb])
        assert n_other == (t.n_items if users_block else t.n_users)
        rows = t.users if users_block else t.items
        want = pre.rating_weights[np.argsort(rows, kind="stable")]
        np.testing.assert_array_equal(wts, want.astype(np.float64))
    assert np.isnan(rel.step_nN)


def test_a_chain_drops_its_kept_v_draws_once_the_trace_has_read_them(monkeypatch):
    """At paper scale rounds/thin copies of V per chain add up: when chain k+1 starts, chain k's kept V draws must be
    gone (only its final model, history and layout are read afterwards)."""
    real = mf.sample_sgld
    refs, alive_at_start = [], []

    def spy(*a, **kw):
        gc.collect()
        alive_at_start.append(sum(r() is not None for r in refs))
        res = real(*a, **kw)
        refs.extend(weakref.ref(v) for v in res.samples_V)
        return res

    monkeypatch.setattr(mf, "sample_sgld", spy)
    pre = ps.preprocess(dense_toy(), tau=5, kappa=1.0, rho=1.0, seed=0)
    rel = ps.sample_private(pre, 0.01, Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=6, burn_in=2, thin=1,
                            n_chains=3, eta_n_max=1.0, schedule=mf.Schedule(n_threads=1), seed=2, max_resamples=0)
    assert len(refs) == 3 * 6  # the draws were kept (the trace needs them) ...
    assert len(rel.trace) == 3 * 6 and rel.trace.v_norm2.notna().all()
    assert alive_at_start == [0] * 6  # ... and none outlived its chain (2 sample_sgld calls per chain)


def test_a_run_without_burn_in_traces_both_statistics_and_the_test_set_leaves_the_release_alone():
    """No burn-in phase (the PNBM figures' DPPS-MF): the trace keeps the mean squared item factor of every kept round
    as after a burn-in, and passing a test set (for the trace's test RMSE) changes no byte of the release."""
    r = dense_toy()
    pre = ps.preprocess(r, tau=5, kappa=1.0, rho=1.0, seed=0)
    kw = dict(Lambda_u=0.5, Lambda_v=0.5, lam_bias=0.5, d=2, rounds=6, eta_n_max=1.0, schedule=Schedule(n_threads=1),
              seed=4, max_resamples=2)
    plain = ps.sample_private(pre, 5.0, **kw)
    traced = ps.sample_private(pre, 5.0, test=dense_toy(seed=1), **kw)
    assert plain.V.tobytes() == traced.V.tobytes() and plain.released_chain == traced.released_chain
    assert plain.trace.v_norm2.notna().all() and traced.trace.sample_rmse.notna().all()
    # the default start is init_scale None = init_model's 0.1, and chain_start is each chain's start
    assert ps.sample_private(pre, 5.0, init_scale=0.1, **kw).V.tobytes() == plain.V.tobytes()
    wide = ps.sample_private(pre, 5.0, init_scale=10.0, **{**kw, "max_resamples": 0})
    assert wide.trace.v_norm2.iloc[0] > 5 * plain.trace.v_norm2.iloc[0]  # after one round: still far wider
    m0 = ps.chain_start(pre, 2, 4, 1)
    assert np.array_equal(m0.V, mf.init_model(r.n_users, r.n_items, 2, seed=[ps.chain_seed(4, 1), 0xD9]).V)


def test_diagnostic_chains_have_a_seed_namespace_of_their_own():
    """An extra chain run only for the diagnostics must share no noise with the release or its redraws."""
    from dpmf_lib.errors import ParameterError
    from dpmf_lib.privacy.chains import diagnostic_chain_seed

    for seed in (0, 7, 2001):
        redraws = {ps.chain_seed(seed, k) for k in range(8)}
        extra = {diagnostic_chain_seed(seed, k) for k in range(1, 8)}
        assert len(extra) == 7 and not extra & redraws
    with pytest.raises(ParameterError):
        diagnostic_chain_seed(3, 0)
