"""Properties of count-sketch factorization claimed in Balu 2016, sections 4.1.3, 4.2 and 4.2.1."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.sketch import hashing, kernels
from dpmf_lib.sketch.model import MFModel, make_model


def test_sketch_estimate_unbiased_with_variance_sigma2_over_wk():
    """Section 4.2: the mean-operator estimate of v_e is unbiased with variance σ²₋ₑ/(wk), σ²₋ₑ = Σ_{e'≠e} v_e'²."""
    N, w, k, reps = 60, 16, 4, 1500
    rng = np.random.default_rng(0)
    v = rng.normal(0, 1, N).astype(np.float32)
    ids = np.arange(N, dtype=np.int64)
    comps = np.zeros(N, dtype=np.int64)
    err = np.empty((reps, N))
    for r in range(reps):
        salts = hashing.make_salts(1000 + r, k)[0].copy()
        C = np.zeros((k, w), np.float32)
        kernels.sketch_insert(C, salts, ids, comps, v)
        err[r] = kernels.sketch_query(C, salts, ids, comps).astype(np.float64) - v
    sigma2 = float(np.sum(v.astype(np.float64) ** 2)) - v.astype(np.float64) ** 2
    z = err / np.sqrt(sigma2 / (w * k))  # should be mean 0, variance 1 for every e
    n = z.size
    # unbiased: overall t-test and per-element t-tests (Bonferroni)
    assert stats.ttest_1samp(z.ravel(), 0.0).pvalue > 1e-3
    per_e = stats.ttest_1samp(z, 0.0, axis=0).pvalue
    assert per_e.min() > 1e-3 / N
    # variance 1: z-test of the sample variance with its kurtosis-based standard error
    var = z.var()
    se = math.sqrt((stats.kurtosis(z.ravel(), fisher=False) - 1) / n)
    assert abs(var - 1.0) < 4 * se, (var, se)
    # and the per-element variances follow σ²₋ₑ (the paper's σ²/(wk) law, not a constant)
    ratio = err.var(axis=0) / (sigma2 / (w * k))
    assert 0.85 < np.median(ratio) < 1.15


def _no_collision_pair(n_users, n_items, d, k, seed=0):
    """A sketch model with k rows wide enough that no two (side, id, l) share a cell in any row."""
    for s in range(seed, seed + 50):
        m = make_model("count_sketch", n_users, n_items, d, gamma=1 / 4096, k=k, init_scale=0.2, seed=s)
        ok = True
        for j in range(k):
            au, _ = hashing.addresses(np.arange(n_users, dtype=np.int64), d, m.salts[0, j], m.w)
            ai, _ = hashing.addresses(np.arange(n_items, dtype=np.int64), d, m.salts[1, j], m.w)
            cells = np.concatenate([au.ravel(), ai.ravel()])
            ok &= len(np.unique(cells)) == len(cells)
        if ok:
            return m
    raise AssertionError("no collision-free seed found")


@pytest.mark.parametrize("k", [1, 2, 4])
def test_no_collisions_equals_dense_mf_exactly(k):
    """k = 1 without collisions is dense MF bit for bit (the sign flip is exact). For k > 1 the per-cell rule 4.3–4.4
    moves the mean of the k cells by exactly the dense step, so k = 2, 4 agree up to float32 rounding of the mean."""
    n_users, n_items, d = 25, 15, 6
    m = _no_collision_pair(n_users, n_items, d, k)
    dense = MFModel("dense", n_users, n_items, d, P=m.user_vectors().copy(), Q=m.item_vectors().copy())
    rng = np.random.default_rng(1)
    u = rng.integers(0, n_users, 600).astype(np.int32)
    i = rng.integers(0, n_items, 600).astype(np.int32)
    v = rng.normal(0, 1, 600).astype(np.float32)
    for epoch in range(3):
        order = rng.permutation(600).astype(np.int64)
        a = m.sgd_epoch(u, i, v, order, 0.05 / (1 + epoch), 0.03, math.inf)
        b = dense.sgd_epoch(u, i, v, order, 0.05 / (1 + epoch), 0.03, math.inf)
        if k == 1:
            assert a == b
        else:
            assert a[:2] == b[:2] and a[2] == pytest.approx(b[2], rel=1e-6)
    if k == 1:
        assert np.array_equal(m.user_vectors(), dense.P)
        assert np.array_equal(m.item_vectors(), dense.Q)
    else:
        np.testing.assert_allclose(m.user_vectors(), dense.P, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m.item_vectors(), dense.Q, rtol=1e-5, atol=1e-6)


def test_update_is_gradient_step_on_sketch_cells_section_4_1_3():
    """One kernel step on ⟨u,i,r⟩ equals C ← C − η·k·∂R_λ(P̃(C), Q̃(C))/∂C (eq. 4.5–4.7), collisions included."""
    d, k, w, lam, eta = 5, 3, 7, 0.3, 0.01  # w = 7 forces collisions between user and item cells
    salts = hashing.make_salts(11, k)
    rng = np.random.default_rng(0)
    C = rng.normal(0, 0.5, (k, w)).astype(np.float32)
    u, i, r = 3, 4, 1.3
    # linear read maps p̃ = S_u c, q̃ = S_i c  (c = C.ravel())
    S = []
    for side, ident in ((0, u), (1, i)):
        M = np.zeros((d, k * w))
        for j in range(k):
            a, s = hashing.address_sign_ref(ident, np.arange(d), salts[side, j], w)
            M[np.arange(d), j * w + a] += s / k
        S.append(M)
    c = C.ravel().astype(np.float64)

    def objective(cv):
        p, q = S[0] @ cv, S[1] @ cv
        return 0.5 * (r - p @ q) ** 2 + 0.5 * lam * (p @ p + q @ q)

    p, q = S[0] @ c, S[1] @ c
    g = p @ q - r
    grad = S[0].T @ (g * q + lam * p) + S[1].T @ (g * p + lam * q)
    # analytic gradient vs central finite differences (float64)
    h = 1e-6
    fd = np.array([(objective(c + h * e) - objective(c - h * e)) / (2 * h) for e in np.eye(k * w)])
    np.testing.assert_allclose(grad, fd, rtol=1e-5, atol=1e-7)
    C1 = C.copy()
    kernels.sketch_sgd_epoch(C1, salts, d, np.array([u], np.int32), np.array([i], np.int32),
                             np.array([r], np.float32), np.zeros(1, np.int64), eta, lam, math.inf)
    np.testing.assert_allclose((C1 - C).ravel(), -eta * k * grad, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("method", ["regular", "count_sketch", "feature_hashing"])
def test_clip_infinite_equals_unclipped_and_finite_clip_skips(method):
    rng = np.random.default_rng(3)
    u = rng.integers(0, 30, 500).astype(np.int32)
    i = rng.integers(0, 20, 500).astype(np.int32)
    v = rng.normal(0, 1.5, 500).astype(np.float32)
    order = rng.permutation(500).astype(np.int64)
    big = 1e30  # a finite threshold no loss reaches == no clipping
    runs = []
    for clip in (math.inf, big, 0.5):
        m = make_model(method, 30, 20, 4, gamma=1.0, init_scale=0.2, seed=9)
        out = m.sgd_epoch(u, i, v, order, 0.05, 0.01, clip)
        runs.append((out, m.user_vectors().copy(), m.item_vectors().copy()))
    (a, Pa, Qa), (b, Pb, Qb), (c, Pc, Qc) = runs
    assert a == b and a[1] == 0 and np.array_equal(Pa, Pb) and np.array_equal(Qa, Qb)
    # with ε = 0.5 the ratings with ½(r − r̂)² > 0.5 are skipped; skipping changes the model
    assert c[1] > 0 and c[0] + c[1] == 500 and not np.array_equal(Pa, Pc)


def test_clip_skip_rule_on_hand_made_case():
    """Single rating with loss ½·2² = 2: skipped for ε < 2, applied for ε ≥ 2."""
    P = np.zeros((1, 2), np.float32)
    Q = np.zeros((1, 2), np.float32)
    m = MFModel("dense", 1, 1, 2, P=P + 1, Q=Q + 1)  # r̂ = 2, r = 0 → loss 2
    args = (np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.float32), np.zeros(1, np.int64), 0.1, 0.0)
    assert m.sgd_epoch(*args, 1.999) == (0, 1, 2.0)
    assert np.array_equal(m.P, P + 1)
    assert m.sgd_epoch(*args, 2.0) == (1, 0, 2.0)
    np.testing.assert_allclose(m.P, 1 - 0.1 * 2)  # p ← p − η (r̂ − r) q


def test_same_seed_same_bytes():
    a = make_model("count_sketch", 50, 40, 8, gamma=2.0, seed=4)
    b = make_model("count_sketch", 50, 40, 8, gamma=2.0, seed=4)
    assert np.array_equal(a.C, b.C) and np.array_equal(a.salts, b.salts)
    c = make_model("count_sketch", 50, 40, 8, gamma=2.0, seed=5)
    assert not np.array_equal(a.salts, c.salts)
