"""dpmf_lib.nbm kernels: gradient (5) against finite differences; numba kernels against the plain references."""

import numpy as np
import pytest

from dpmf_lib import nbm
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.nbm import reference as ref
from dpmf_lib.nbm.kernels import mf_epoch_kernel, sgld_update_kernel
from tests.nbm_toys import rows_of, signed_similarity, toy


@pytest.mark.parametrize("Nk,C", [(100, 0.0), (4, 0.0), (100, 1.0), (5, 50.0)])
def test_gradient_matches_finite_differences(Nk, C):
    r = toy()
    d = nbm.prepare(r)
    S = signed_similarity(r.n_items)
    rows, rbar = rows_of(d), d.rbar.astype(np.float64)
    batch = list(zip(r.users, r.items, r.values.astype(float)))
    G = nbm.gradient(S.astype(np.float32), d, r.users, r.items, r.values, Nk=Nk, C=C).astype(np.float64)
    h = 1e-6
    fd = np.zeros_like(S)
    for a in range(r.n_items):
        for b in range(r.n_items):
            if a != b:
                Sp, Sm = S.copy(), S.copy()
                Sp[a, b] += h
                Sm[a, b] -= h
                fd[a, b] = (ref.loss(Sp, rows, rbar, batch, Nk, C) - ref.loss(Sm, rows, rbar, batch, Nk, C)) / (2 * h)
    assert np.abs(fd).max() > 0.1  # a non-trivial gradient
    np.testing.assert_allclose(G, fd, atol=2e-5 * max(1.0, np.abs(fd).max()))


def test_gradient_kernel_matches_reference_with_clips():
    r = toy(seed=3, nu=30, ni=20)
    d = nbm.prepare(r)
    S = signed_similarity(r.n_items, seed=4)
    batch = list(zip(r.users, r.items, r.values.astype(float)))
    for kw in (dict(e_max=0.7, f_max=1.5, C=2.0), dict(clip_pred=True, C=0.0), dict(e_max=2.0, f_max=4.0, C=30.0)):
        Gk = nbm.gradient(S.astype(np.float32), d, r.users, r.items, r.values, Nk=6, **kw)
        Gr = ref.gradient(S, rows_of(d), d.rbar.astype(float), batch, 6, kw.get("C"), kw.get("e_max", np.inf),
                          kw.get("f_max", np.inf), 1.0, 5.0, kw.get("clip_pred", False))
        np.testing.assert_allclose(Gk, Gr, rtol=1e-4, atol=1e-5)


def test_per_rating_gradient_entries_obey_the_paper_bound():
    r = toy(seed=5, nu=40, ni=25, density=0.7)
    d = nbm.prepare(r)
    S = signed_similarity(r.n_items, seed=6).astype(np.float32) * 0.2  # small S: the C bound is active
    C, phi = 3.0, 4.0
    for t in (1, 3, 10):
        e_max = nbm.accounting.error_clamp(t, phi)
        worst = 0.0
        for k in range(0, r.n_ratings, 5):
            G = nbm.gradient(S, d, r.users[k:k + 1], r.items[k:k + 1], r.values[k:k + 1], Nk=500, C=C, e_max=e_max,
                             f_max=phi)
            worst = max(worst, float(np.abs(G).max()))
        assert 0.3 * e_max * phi / C < worst <= e_max * phi / C * (1 + 1e-6)  # bound holds and is nearly reached


def test_predict_kernel_matches_reference():
    r = toy(seed=7, nu=25, ni=18)
    d = nbm.prepare(r)
    S = signed_similarity(r.n_items, seed=8)
    rng = np.random.default_rng(0)
    pairs = [(int(u), int(i)) for u, i in zip(rng.integers(0, 25, 60), rng.integers(0, 18, 60))]
    test = Ratings(np.array([p[0] for p in pairs], np.int32), np.array([p[1] for p in pairs], np.int32),
                   np.ones(60, np.float32) * 3, 25, 18, (1.0, 5.0), DataSource("toy", False))
    for Nk, C in ((3, 0.0), (100, 2.0)):
        got = nbm.predict(S, d, test, Nk=Nk, C=C)
        want = ref.predict(S, rows_of(d), d.rbar.astype(float), pairs, Nk, C, 1.0, 5.0)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_neighbour_selection_keeps_the_largest_absolute_similarities():
    S = np.zeros((6, 6))
    S[0, 1:] = [0.1, -0.9, 0.5, -0.2, 0.3]
    items = np.array([1, 2, 3, 4, 5])
    assert [items[k] for k in ref.neighbours(S, 0, items, 2)] == [2, 3]
    r = Ratings(np.zeros(5, np.int32), items.astype(np.int32), np.array([5, 1, 4, 2, 3], np.float32), 1, 6, (1.0, 5.0),
                DataSource("toy", False))
    d = nbm.prepare(r)
    test = Ratings(np.zeros(1, np.int32), np.zeros(1, np.int32), np.ones(1, np.float32), 1, 6, (1.0, 5.0),
                   DataSource("toy", False))
    # item means are the ratings themselves (one rater), so every centred rating is 0 except through r̄ of item 0
    want = ref.predict(S, rows_of(d), d.rbar.astype(float), [(0, 0)], 2, 0.0, 1.0, 5.0)
    np.testing.assert_allclose(nbm.predict(S, d, test, Nk=2), want, rtol=1e-6)


def test_mf_epoch_kernel_matches_reference():
    r = toy(seed=9, nu=20, ni=15)
    rng = np.random.default_rng(1)
    P = rng.normal(0, 0.1, (20, 4)).astype(np.float32)
    Q = rng.normal(0, 0.1, (15, 4)).astype(np.float32)
    order = rng.permutation(r.n_ratings).astype(np.int64)
    noise = rng.laplace(0, 0.5, r.n_ratings)
    rbar = nbm.item_means(r)
    Pr, Qr = ref.mf_epoch(r.users, r.items, r.values, order, noise, P, Q, rbar.astype(float), 0.05, 0.02, 1.0)
    mf_epoch_kernel(r.users, r.items, r.values, order, noise, P, Q, rbar, 0.05, 0.02, 1.0)
    np.testing.assert_allclose(P, Pr, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(Q, Qr, rtol=1e-4, atol=1e-5)


def test_sgld_update_kernel_matches_numpy_formula():
    rng = np.random.default_rng(2)
    M = 30
    S = rng.normal(size=(M, M)).astype(np.float32)
    np.fill_diagonal(S, 0)
    G = rng.normal(size=(M, M)).astype(np.float32)
    Hinv = rng.uniform(1, 3, (M, M)).astype(np.float32)
    present = (rng.random(M) < 0.5).astype(np.uint8)
    Z = rng.standard_normal((M, M), dtype=np.float32)
    mask = np.outer(present, present).astype(bool)
    want = S - 0.01 * (7.0 * G + 0.2 * S * Hinv * mask) + 0.3 * Z
    np.fill_diagonal(want, 0)
    sgld_update_kernel(S, G, Hinv, present, 7.0, 0.2, 0.01, 0.3, Z)
    np.testing.assert_allclose(S, want, rtol=1e-5, atol=1e-6)
