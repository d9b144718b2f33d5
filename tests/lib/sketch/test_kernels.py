"""Hash quality and kernel-vs-reference agreement for dpmf_lib.sketch (Balu 2016, chapter 4)."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.errors import ParameterError
from dpmf_lib.sketch import hashing, kernels, reference
from dpmf_lib.sketch.model import make_model, width_from_gain


def test_mix64_matches_reference_and_known_value():
    z = np.arange(0, 1000, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    ref = hashing.mix64_ref(z)
    from numba import njit

    @njit
    def run(a):
        out = np.empty_like(a)
        for t in range(a.shape[0]):
            out[t] = hashing.mix64(a[t])
        return out

    assert np.array_equal(run(z), ref)
    # splitmix64 first output for state 0 (seed 0): mix64(0x9E3779B97F4A7C15) = 0xE220A8397B1DCDAF
    assert int(hashing.mix64_ref(np.array([0x9E3779B97F4A7C15], dtype=np.uint64))[0]) == 0xE220A8397B1DCDAF


def test_address_sign_kernel_equals_reference():
    salts = hashing.make_salts(7, 3)
    ids = np.arange(500, dtype=np.int64)
    for w in (1, 7, 1000, 2**20 + 3):
        for j in range(3):
            a, s = hashing.addresses(ids, 13, salts[1, j], w)
            ar, sr = hashing.address_sign_ref(ids[:, None], np.arange(13)[None, :], salts[1, j], w)
            assert np.array_equal(a, ar) and np.array_equal(s, sr)
            assert a.min() >= 0 and a.max() < w


def test_address_uniformity_chi_square():
    """Addresses of 200k consecutive (id, l) keys over w = 1000 cells: chi-square goodness of fit to uniform."""
    salts = hashing.make_salts(1, 4)
    ids = np.arange(20000, dtype=np.int64)
    w = 1000
    pvals = []
    for side in (0, 1):
        for j in range(4):
            a, _ = hashing.addresses(ids, 10, salts[side, j], w)
            counts = np.bincount(a.ravel(), minlength=w)
            pvals.append(stats.chisquare(counts).pvalue)
    # 8 independent tests: Bonferroni at 1e-3 overall
    assert min(pvals) > 1e-3 / 8, pvals


def test_sign_balance_binomial_and_independence():
    salts = hashing.make_salts(2, 2)
    ids = np.arange(20000, dtype=np.int64)
    a0, s0 = hashing.addresses(ids, 8, salts[0, 0], 97)
    a1, s1 = hashing.addresses(ids, 8, salts[0, 1], 97)
    n = s0.size
    assert stats.binomtest(int((s0 > 0).sum()), n, 0.5).pvalue > 1e-4
    assert stats.binomtest(int((s1 > 0).sum()), n, 0.5).pvalue > 1e-4
    # sign independent of the address (low bit vs high bits) and of the other row's sign
    table = np.zeros((97, 2))
    np.add.at(table, (a0.ravel(), (s0.ravel() > 0).astype(int)), 1)
    assert stats.chi2_contingency(table).pvalue > 1e-4
    assert stats.binomtest(int((s0 == s1).sum()), n, 0.5).pvalue > 1e-4


def test_make_salts_deterministic_and_distinct():
    a, b = hashing.make_salts(5, 4), hashing.make_salts(5, 4)
    assert np.array_equal(a, b) and len(np.unique(a)) == 8
    assert not np.array_equal(a, hashing.make_salts(6, 4))
    with pytest.raises(ParameterError):
        hashing.make_salts(0, 0)


def _toy(n_users=30, n_items=20, n=400, seed=0):
    rng = np.random.default_rng(seed)
    u = rng.integers(0, n_users, n).astype(np.int32)
    i = rng.integers(0, n_items, n).astype(np.int32)
    v = rng.normal(0, 1, n).astype(np.float32)
    return u, i, v, rng.permutation(n).astype(np.int64)


@pytest.mark.parametrize("k,gamma,clip", [(1, 1.0, math.inf), (4, 2.0, math.inf), (3, 8.0, 0.5)])
def test_sketch_epoch_kernel_equals_reference(k, gamma, clip):
    u, i, v, order = _toy()
    m = make_model("count_sketch", 30, 20, 6, gamma=gamma, k=k, init_scale=0.3, seed=3)
    C0 = m.C.copy()
    got = kernels.sketch_sgd_epoch(m.C, m.salts, 6, u, i, v, order, 0.05, 0.02, clip)
    C1 = C0.copy()
    want = reference.sketch_sgd_epoch_ref(C1, m.salts, 6, u, i, v, order, 0.05, 0.02, clip)
    assert got[:2] == want[:2]
    assert got[2] == pytest.approx(want[2], rel=1e-9)
    np.testing.assert_allclose(m.C, C1, rtol=1e-5, atol=1e-6)
    if clip < math.inf:
        assert got[1] > 0  # the clipping branch was exercised


@pytest.mark.parametrize("k,gamma,clip,M", [(4, 8.0, 0.5, 3), (1, 1.0, math.inf, 17), (2, 30.0, math.inf, 1)])
def test_many_model_epoch_kernel_equals_one_model_kernel_bit_for_bit(k, gamma, clip, M):
    """Model m of the M-model kernel is the one-model kernel on its cells with its (η, λ), to the last bit: with
    clipping, with heavy collisions (γ = 30: a few cells per row), with a model left inactive (untouched, no counts)
    and one that diverges (η = 40: inf/NaN cells stay in their own lane)."""
    u, i, v, order = _toy()
    m = make_model("count_sketch", 30, 20, 6, gamma=gamma, k=k, init_scale=0.3, seed=3)
    rng = np.random.default_rng(M)
    eta, lam = rng.uniform(0.005, 0.2, M), rng.choice([0.0, 0.01, 0.3], M)
    eta[-1] = 40.0
    active = np.ones(M, np.bool_)
    if M > 2:
        active[1] = False
    C = np.ascontiguousarray(np.repeat(m.C[:, :, None], M, axis=2))
    n_app, n_skip, loss = kernels.sketch_sgd_epoch_many(C, m.salts, 6, u, i, v, order, eta, lam, clip, active)
    for j in range(M):
        Cj = m.C.copy()
        if active[j]:
            want = kernels.sketch_sgd_epoch(Cj, m.salts, 6, u, i, v, order, eta[j], lam[j], clip)
            assert (n_app[j], n_skip[j]) == want[:2] and loss[j] == want[2] or np.isnan(loss[j]) and np.isnan(want[2])
        else:
            assert n_app[j] == n_skip[j] == 0 and loss[j] == 0.0
        assert C[:, :, j].tobytes() == Cj.tobytes(), j
    if clip < math.inf:
        assert n_skip.sum() > 0  # the clipping branch was exercised
    else:
        assert not np.isfinite(C[:, :, -1]).all()  # the diverging model did diverge
    C2 = np.ascontiguousarray(np.repeat(m.C[:, :, None], M, axis=2))
    with np.errstate(all="ignore"):  # the diverging model overflows in numpy too
        got = reference.sketch_sgd_epoch_many_ref(C2, m.salts, 6, u, i, v, order[:60], eta, lam, clip, active)
    C3 = np.ascontiguousarray(np.repeat(m.C[:, :, None], M, axis=2))
    fast = kernels.sketch_sgd_epoch_many(C3, m.salts, 6, u, i, v, order[:60], eta, lam, clip, active)
    np.testing.assert_array_equal(fast[0], got[0])
    np.testing.assert_allclose(C3, C2, rtol=1e-5, atol=1e-6)


def test_dense_epoch_kernel_equals_reference():
    u, i, v, order = _toy()
    m = make_model("regular", 30, 20, 5, init_scale=0.3, seed=1)
    P, Q = m.P.copy(), m.Q.copy()
    got = kernels.dense_sgd_epoch(m.P, m.Q, u, i, v, order, 0.05, 0.02, 0.8)
    want = reference.dense_sgd_epoch_ref(P, Q, u, i, v, order, 0.05, 0.02, 0.8)
    assert got[:2] == want[:2]
    np.testing.assert_allclose(m.P, P, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.Q, Q, rtol=1e-5, atol=1e-6)


def test_reconstruct_predict_insert_query_equal_reference():
    m = make_model("count_sketch", 40, 25, 7, gamma=3.0, k=4, seed=2)
    for side, n in ((0, 40), (1, 25)):
        np.testing.assert_array_equal(kernels.sketch_reconstruct(m.C, m.salts[side], n, 7),
                                      reference.sketch_reconstruct_ref(m.C, m.salts[side], n, 7))
    P, Q = m.user_vectors(), m.item_vectors()
    u, i, _, _ = _toy(40, 25, 300)
    np.testing.assert_allclose(kernels.dense_predict(P, Q, u, i), reference.dense_predict_ref(P, Q, u, i),
                               rtol=1e-5, atol=1e-6)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 100, 500).astype(np.int64)
    comps = rng.integers(0, 5, 500).astype(np.int64)
    vals = rng.normal(size=500).astype(np.float32)
    C1, C2 = np.zeros((3, 50), np.float32), np.zeros((3, 50), np.float32)
    kernels.sketch_insert(C1, m.salts[0][:3].copy(), ids, comps, vals)
    reference.sketch_insert_ref(C2, m.salts[0][:3].copy(), ids, comps, vals)
    np.testing.assert_allclose(C1, C2, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kernels.sketch_query(C1, m.salts[0][:3].copy(), ids, comps),
                               reference.sketch_query_ref(C1, m.salts[0][:3].copy(), ids, comps), rtol=1e-6)


def test_width_from_gain_eq_4_9_and_errors():
    assert width_from_gain(6040, 3952, 32, 1.0, 4) == math.ceil(9992 * 32 / 4)
    assert width_from_gain(10, 10, 3, 2.83, 1) == math.ceil(60 / 2.83)
    m = make_model("count_sketch", 943, 1682, 32, gamma=1.0, seed=0)
    dense = make_model("regular", 943, 1682, 32, seed=0)
    assert m.nbytes == dense.nbytes  # γ = 1: same space
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ParameterError):
            width_from_gain(10, 10, 3, bad, 1)
    with pytest.raises(ParameterError):
        make_model("sketchy", 10, 10, 3)
    with pytest.raises(ParameterError):
        make_model("feature_hashing", 10, 10, 3, k=4)


def test_salts_of_different_seeds_are_unrelated():
    """Consecutive seeds used to share 2k − 1 of their 2k salts (a shifted splitmix64 stream), so repetitions over
    seeds 1000, 1001, ... re-used nearly the same hash functions."""
    k = 4
    a, b = hashing.make_salts(1000, k), hashing.make_salts(1001, k)
    assert not set(a.ravel().tolist()) & set(b.ravel().tolist())
    np.testing.assert_array_equal(hashing.make_salts(1000, k), a)  # deterministic in the seed
    many = np.concatenate([hashing.make_salts(s, k).ravel() for s in range(200)])
    assert len(np.unique(many)) == many.size
