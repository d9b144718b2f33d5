"""Fused noise + update kernels of dpmf_lib.nbm (issue #16 "Speed") against the numpy reference path.

The fused kernels draw their noise from a counter-based stream (kernels.py), so they cannot share bytes with numpy's
generator: the laws are checked (KS tests), the update formulas exactly with the kernels' own noise, and the trainers
in distribution (fused vs numpy path, same seed). Reproducibility: same key → same bytes, for 1 and 2 threads.
"""

import numba
import numpy as np
import pytest
from scipy import stats

from dpmf_lib import nbm
from dpmf_lib.errors import ParameterError
from dpmf_lib.nbm import reference as ref
from dpmf_lib.nbm.kernels import (dpsgd_step_kernel, laplace_fill_kernel, normal_fill_kernel, sgld_step_kernel,
                                  sgld_update_kernel)
from tests.nbm_toys import rows_of, toy

KEY = np.uint64(0x1234_5678_9ABC_DEF1)


def _threads(n):
    return min(n, numba.config.NUMBA_NUM_THREADS)


def test_laplace_stream_has_the_laplace_law_and_is_thread_independent():
    out = np.empty((300, 301), np.float32)
    laplace_fill_kernel(KEY, 2.5, out)
    x = out.ravel().astype(np.float64)
    assert stats.kstest(x, "laplace", args=(0.0, 2.5)).pvalue > 1e-3
    assert abs(np.mean(x)) < 0.03 and abs(np.var(x) / (2 * 2.5 ** 2) - 1) < 0.03
    # neighbouring entries independent (the counter is i·M + j)
    assert abs(np.corrcoef(x[:-1], x[1:])[0, 1]) < 0.01
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        a = np.empty_like(out)
        laplace_fill_kernel(KEY, 2.5, a)
        numba.set_num_threads(_threads(2))
        b = np.empty_like(out)
        laplace_fill_kernel(KEY, 2.5, b)
    finally:
        numba.set_num_threads(old)
    assert a.tobytes() == b.tobytes() == out.tobytes()
    c = np.empty_like(out)
    laplace_fill_kernel(KEY + np.uint64(1), 2.5, c)
    assert c.tobytes() != out.tobytes()


def test_normal_stream_has_the_normal_law():
    out = np.empty((301, 299), np.float32)  # odd row length: the last pair keeps one value
    normal_fill_kernel(KEY, out)
    x = out.ravel().astype(np.float64)
    assert stats.kstest(x, "norm").pvalue > 1e-3
    assert abs(np.mean(x)) < 0.01 and abs(np.var(x) - 1) < 0.02
    assert abs(stats.kurtosis(x)) < 0.05
    even, odd = out[:, 0:298:2].ravel(), out[:, 1:298:2].ravel()  # the two values of a polar pair
    assert abs(np.corrcoef(even, odd)[0, 1]) < 0.02
    assert abs(np.corrcoef(even ** 2, odd ** 2)[0, 1]) < 0.02  # the pair's radius is shared: uncorrelated squares


def test_dpsgd_step_kernel_is_the_numpy_update_with_its_noise():
    rng = np.random.default_rng(0)
    M = 40
    S = rng.normal(size=(M, M)).astype(np.float32)
    G = rng.normal(size=(M, M)).astype(np.float32)
    N = np.empty((M, M), np.float32)
    laplace_fill_kernel(KEY, 0.7, N)
    off = ~np.eye(M, dtype=bool)
    want = S.astype(np.float64) - 0.1 * (10.0 * (G + N.astype(np.float64) * off) + 0.05 * S)
    np.fill_diagonal(want, 0.0)
    S1, G1 = S.copy(), G.copy()
    dpsgd_step_kernel(S1, G1, 0.7, KEY, 0.1, 10.0, 0.05)
    np.testing.assert_allclose(S1, want, rtol=2e-6, atol=2e-6)
    assert not G1.any()  # zeroed for the next gradient
    # b = 0: no noise, the plain SGD step (the reference's formula)
    S2, G2 = S.copy(), G.copy()
    dpsgd_step_kernel(S2, G2, 0.0, KEY, 0.1, 10.0, 0.05)
    want0 = S - np.float32(0.1) * (np.float32(10.0) * G + np.float32(0.05) * S)
    np.fill_diagonal(want0, 0.0)
    np.testing.assert_allclose(S2, want0, rtol=1e-5, atol=1e-6)


def test_sgld_step_kernel_is_the_reference_update_with_its_noise():
    rng = np.random.default_rng(2)
    M = 31
    S = rng.normal(size=(M, M)).astype(np.float32)
    np.fill_diagonal(S, 0)
    G = rng.normal(size=(M, M)).astype(np.float32)
    Hinv = rng.uniform(1, 3, (M, M)).astype(np.float32)
    present = (rng.random(M) < 0.5).astype(np.uint8)
    Z = np.empty((M, M), np.float32)
    normal_fill_kernel(KEY, Z)
    want = S.copy()
    sgld_update_kernel(want, G, Hinv, present, 7.0, 0.2, 0.01, 0.3, Z)
    G1 = G.copy()
    sgld_step_kernel(S, G1, Hinv, present, 7.0, 0.2, 0.01, 0.3, KEY)
    np.testing.assert_allclose(S, want, rtol=1e-6, atol=1e-6)
    assert not G1.any()


def test_neighbour_selection_with_ties_matches_the_reference():
    """The partition-based selection keeps the same set as the stable sort (ties to the earliest CSR position)."""
    r = toy(seed=11, nu=30, ni=25, density=0.8)
    d = nbm.prepare(r)
    S = np.round(np.random.default_rng(3).normal(0, 1, (25, 25)) * 2) / 2  # many equal |s|
    np.fill_diagonal(S, 0)
    batch = list(zip(r.users, r.items, r.values.astype(float)))
    for Nk in (1, 3, 7):
        Gk = nbm.gradient(S.astype(np.float32), d, r.users, r.items, r.values, Nk=Nk, C=0.5)
        Gr = ref.gradient(S, rows_of(d), d.rbar.astype(float), batch, Nk, 0.5)
        np.testing.assert_allclose(Gk, Gr, rtol=1e-4, atol=1e-5)


def test_trainers_fused_and_numpy_paths_agree_in_distribution():
    r = toy(seed=1, nu=60, ni=70, density=0.5)
    kw = dict(epsilon=0.5, K=1, gamma=1.0, min_user_ratings=0, eta=0.1, beta=10.0, lam=0.05, C=10.0)
    noise = {}
    for impl in ("fused", "numpy"):
        res = nbm.train_pnbm(r, seed=4, impl=impl, **kw)
        assert res.info["impl"] == impl
        # replay the same start and gradient without noise: the difference is -ηβ × the noise added
        clean = nbm.train_pnbm(r, seed=4, impl=impl, **{**kw, "epsilon": None})
        off = ~np.eye(r.n_items, dtype=bool)
        noise[impl] = ((res.S.astype(np.float64) - clean.S) / (-0.1 * 10.0))[off]
        b = res.noise_scales[0]
        assert stats.kstest(noise[impl], "laplace", args=(0.0, b)).pvalue > 1e-3
    assert stats.ks_2samp(noise["fused"], noise["numpy"]).pvalue > 1e-3
    # same seed → same bytes (fused), for 1 and 2 threads
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        a = nbm.train_pnbm(r, seed=9, impl="fused", **{**kw, "K": 2}).S
        numba.set_num_threads(_threads(2))
        b2 = nbm.train_pnbm(r, seed=9, impl="fused", **{**kw, "K": 2}).S
    finally:
        numba.set_num_threads(old)
    assert a.tobytes() == b2.tobytes()
    # the clipped variant: same noise law through the same step
    c = nbm.train_pnbm_clipped(r, epsilon=1.0, K=2, gamma=1.0, min_user_ratings=0, seed=3, impl="fused")
    d = nbm.train_pnbm_clipped(r, epsilon=1.0, K=2, gamma=1.0, min_user_ratings=0, seed=3, impl="numpy")
    assert c.noise_scales == d.noise_scales
    assert abs(c.S.std() / d.S.std() - 1) < 0.1
    with pytest.raises(ParameterError, match="impl"):
        nbm.train_pnbm(r, seed=1, impl="gpu", **kw)


def test_sgld_fused_and_numpy_paths_agree_in_distribution():
    """Zero data term (λ = 0, a flat rating set): S_T − S_0 = Σ_t sqrt(ϱη_t) z_t under both paths."""
    from tests.lib.nbm.test_accounting import flat_ratings

    r = flat_ratings(n_items=60)
    kw = dict(epsilon=None, T=3, L=20, eta1=1e-2, rho=0.5, xi=0.3, lam=0.0)
    sd = np.sqrt(sum(0.5 * 1e-2 * t ** (-0.3) for t in range(1, 4)))
    off = ~np.eye(60, dtype=bool)
    moves = {}
    for impl in ("fused", "numpy"):
        S0 = nbm.model.init_similarity(60, 1.0, 0.2, np.random.default_rng(0))
        res = nbm.sample_pnbm(r, seed=5, impl=impl, init_S=S0, **kw)
        moves[impl] = (res.S.astype(np.float64) - S0)[off]
        assert stats.kstest(moves[impl] / sd, "norm").pvalue > 1e-3
    assert stats.ks_2samp(moves["fused"], moves["numpy"]).pvalue > 1e-3
    a = nbm.sample_pnbm(r, seed=5, impl="fused", **kw).S
    b = nbm.sample_pnbm(r, seed=5, impl="fused", **kw).S
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("impl", ["fused", "numpy"])
def test_sgld_batch_chains_equal_separate_runs_byte_for_byte(impl):
    """Common random numbers: chains run in lockstep share trim, start, minibatches and noise — each chain's bytes
    are those of its separate sample_pnbm call with the same seed."""
    r = toy(seed=2, nu=50, ni=30, density=0.6)
    te = toy(seed=3, nu=50, ni=30, density=0.2)
    chains = [{"epsilon": 5.0, "eta1": 1e-2, "rho": 0.5, "lam": 0.02},
              {"epsilon": None, "eta1": 2e-3, "rho": 0.09, "lam": 0.0},
              {"epsilon": 50.0, "eta1": 1e-2, "rho": 1.0, "lam": 0.2}]
    kw = dict(tau=20, T=4, L=40, xi=0.3, Nk=6, seed=8, test=te, eval_every=2, impl=impl)
    batch = nbm.sample_pnbm_batch(r, chains, **kw)
    for c, got in zip(chains, batch):
        one = nbm.sample_pnbm(r, **c, **kw)
        assert got.S.tobytes() == one.S.tobytes()
        assert got.history == one.history and got.noise_scales == one.noise_scales
        assert got.info["rmse"] == one.info["rmse"] and got.info["movement"] == one.info["movement"]
        assert got.info["movement"][-1][1] > 0
    assert batch[0].S.tobytes() != batch[2].S.tobytes()


def test_sgld_batch_kernel_equals_the_single_chain_kernel():
    from dpmf_lib.nbm.kernels import sgld_step_batch_kernel

    rng = np.random.default_rng(4)
    M = 21
    S = rng.normal(size=(2, M, M)).astype(np.float32)
    G = rng.normal(size=(2, M, M)).astype(np.float32)
    Hinv = rng.uniform(1, 3, (M, M)).astype(np.float32)
    present = (rng.random(M) < 0.5).astype(np.uint8)
    want = S.copy()
    for b, (lam, a, sd) in enumerate(((0.2, 0.01, 0.3), (0.0, 0.5, 0.01))):
        sgld_step_kernel(want[b], G[b].copy(), Hinv, present, 7.0, lam, a, sd, KEY)
    sgld_step_batch_kernel(S, G, Hinv, present, 7.0, np.array([0.2, 0.0]), np.array([0.01, 0.5]),
                           np.array([0.3, 0.01]), KEY)
    assert S.tobytes() == want.tobytes() and not G.any()


def test_run_grid_batches_sgld_chains_and_halves_over_folds():
    """ML-100K u1/u2, T = 2: the batched rows equal evaluate()'s; with halving_keep = 1 only the best config of
    fold 1 runs on fold 2, and select_best picks among the configs evaluated on every fold."""
    from dpmf_lib.nbm import runs

    fx = dict(tau=200, T=2, L=500, xi=0.3, Nk=500, init_high=0.2)
    g = {"eta1": [8e-6, 4e-7], "lam": [0.02], "rho": [0.09]}
    try:
        df = runs.run_grid("dpps-pnbm", "ml-100k", [1, 2], [20.0], g, fx, 0, halving_keep=1)
    except Exception as exc:  # noqa: BLE001 - the real data may be absent on a bare checkout
        if "DatasetUnavailable" in type(exc).__name__:
            pytest.skip(str(exc))
        raise
    assert len(df) == 3 and sorted(df.fold) == [1, 1, 2]
    r = df.iloc[2]
    one = runs.evaluate("dpps-pnbm", "ml-100k", int(r.fold), 20.0, 0, eta1=r.eta1, lam=r.lam, rho=r.rho, **fx)
    assert one["rmse"] == r.rmse and one["rmse_start"] == r.rmse_start
    f1 = df[df.fold == 1].sort_values("rmse", kind="stable")
    assert r.eta1 == f1.eta1.iloc[0]
    agg = runs.select_best(df)
    assert agg[agg.selected].n_folds.tolist() == [2]


def test_dpps_mf_memo_reuses_only_identical_steps():
    """sample_private caps the adapted step: at x = 0.01 two grid η run the same step, and the memo's reuse gives the
    bytes of a fresh run; a different step is never reused."""
    from dpmf_lib.nbm import runs

    try:
        train, _ = runs.fold_data("ml-100k", 1)
    except Exception as exc:  # noqa: BLE001
        if "DatasetUnavailable" in type(exc).__name__:
            pytest.skip(str(exc))
        raise
    kw = dict(epsilon=2.0, seed=1001, lam=0.02, rho=0.03, d=4, rounds=1)
    memo = {}
    a = runs.dpps_mf_release(train, eta=8e-6, memo=memo, **kw)
    b = runs.dpps_mf_release(train, eta=8e-7, memo=memo, **kw)  # capped to the same step: reused
    fresh = runs.dpps_mf_release(train, eta=8e-7, **kw)
    assert b is a and len(memo) == 1
    assert fresh.V.tobytes() == a.V.tobytes()
    c = runs.dpps_mf_release(train, eta=8e-6, memo=memo, **{**kw, "epsilon": 200.0})  # another ε: another step
    assert c is not a and len(memo) == 2


def test_grid_interior_counts_the_smallest_possible_k_as_interior():
    from dpmf_lib.nbm.runs import grid_interior

    assert grid_interior(2, [1, 2, 3, 10]) == 1.0
    assert grid_interior(1, [1, 2, 3, 10]) == 0.0 and grid_interior(1, [1, 2, 3, 10], domain_min=1) == 1.0
    assert grid_interior(10, [1, 2, 3, 10], domain_min=1) == 0.0  # the upper edge could be extended
    assert grid_interior(2, [2, 3], domain_min=1) == 0.0  # K = 1 was not searched
    assert grid_interior(1, [1], domain_min=1) == 0.0  # a one-point grid is all edge
