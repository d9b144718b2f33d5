"""dpmf_lib.lsh: numba kernels against plain references, and the properties the thesis states (chapter 5)."""

import numpy as np
import pytest

from dpmf_lib import lsh
from dpmf_lib.errors import ParameterError
from dpmf_lib.lsh import _kernels as K


@pytest.fixture(scope="module")
def small():
    X = lsh.random_unit_vectors(400, 8, seed=1)
    W = lsh.tight_frame(8, 12, seed=2)
    return X, W


# ------------------------------------------------------------------------------------------------------------ frames
@pytest.mark.parametrize("d,L", [(8, 16), (8, 12), (16, 16), (128, 256)])
def test_tight_frame_identity(d, L):
    W = lsh.tight_frame(d, L, seed=3)
    assert W.shape == (d, L) and W.dtype == np.float32 and W.flags.c_contiguous
    np.testing.assert_allclose(W.astype(np.float64) @ W.T.astype(np.float64), np.eye(d), atol=2e-6)


def test_orthonormal_columns_when_L_below_d():
    W = lsh.tight_frame(16, 8, seed=0)
    np.testing.assert_allclose(W.T.astype(np.float64) @ W, np.eye(8), atol=2e-6)


def test_frames_are_seeded():
    assert np.array_equal(lsh.tight_frame(8, 16, 5), lsh.tight_frame(8, 16, 5))
    assert not np.array_equal(lsh.tight_frame(8, 16, 5), lsh.tight_frame(8, 16, 6))
    G = lsh.gaussian_projections(8, 16, 5)
    np.testing.assert_allclose(np.linalg.norm(G, axis=0), 1.0, atol=1e-6)
    assert np.array_equal(G, lsh.gaussian_projections(8, 16, 5))


def test_random_unit_vectors_uniform_on_sphere():
    from scipy import stats

    X = lsh.random_unit_vectors(4000, 3, seed=0)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-6)
    # Archimedes: the z coordinate of a uniform point on S^2 is uniform on [-1, 1]
    assert stats.kstest(X[:, 2], "uniform", args=(-1, 2)).pvalue > 1e-3


# ------------------------------------------------------------------------------------------------------------ encoders
def test_thesis_example_5_7_project_and_sign_is_suboptimal():
    W = np.array([[1, 0, np.cos(np.pi / 3)], [0, 1, np.sin(np.pi / 3)]], np.float32)
    x = W @ np.array([1, 1, -1], np.float32)
    x /= np.linalg.norm(x)
    assert lsh.encode_lsh(x, W).tolist() == [[1, 1, 1]]
    assert lsh.encode_optimal(x, W).tolist() == [[1, 1, -1]]
    assert lsh.encode_qolsh(x, W, M=1).tolist() == [[1, 1, -1]]
    np.testing.assert_allclose(lsh.objective(x[None], W, [[1, 1, -1]]), 1.0, atol=1e-6)


def test_qolsh_kernel_matches_reference(small):
    X, W = small
    for M in (0, 1, 5, 12):
        fast, flips = lsh.encode_qolsh(X, W, M, return_flips=True)
        ref = lsh.encode_qolsh_reference(X, W, M)
        assert fast.dtype == np.int8
        assert (fast == ref).all(1).mean() >= 0.995  # exact ties/near-ties may resolve differently in rounding
        assert flips.max() <= M
    assert np.array_equal(lsh.encode_qolsh(X, W, 0), lsh.encode_lsh(X, W))


def test_qolsh_never_lowers_the_objective(small):
    X, W = small
    _, traces = lsh.encode_qolsh_reference(X[:150], W, M=8, return_trace=True)
    for tr in traces:
        assert all(b > a for a, b in zip(tr, tr[1:]))  # each accepted flip strictly improves eq. 5.10
    base = lsh.objective(X, W, lsh.encode_lsh(X, W))
    prev = base
    for M in (1, 2, 5, 12):
        cur = lsh.objective(X, W, lsh.encode_qolsh(X, W, M))
        assert (cur >= prev - 1e-6).all()
        prev = cur
    assert (prev > base + 1e-9).mean() > 0.2  # and it does improve a good share of vectors


def test_qolsh_stops_at_local_optimum(small):
    X, W = small
    codes, flips = lsh.encode_qolsh(X, W, M=64, return_flips=True)
    cur = lsh.objective(X, W, codes)
    for j in range(W.shape[1]):
        c2 = codes.copy()
        c2[:, j] *= -1
        assert (lsh.objective(X, W, c2) <= cur + 1e-9).all()
    assert flips.max() < 64


def test_optimal_quantizer_matches_reference_and_beats_every_encoder(small):
    X, W = small
    opt = lsh.encode_optimal(X, W)
    ref = lsh.encode_optimal_reference(X, W)
    np.testing.assert_allclose(lsh.objective(X, W, opt), lsh.objective(X, W, ref), atol=1e-6)
    best = lsh.objective(X, W, opt)
    rng = np.random.default_rng(0)
    others = {"lsh+frame": lsh.encode_lsh(X, W), "qolsh": lsh.encode_qolsh(X, W, 5),
              "qolsh-M12": lsh.encode_qolsh(X, W, 12), "antisparse": lsh.encode_antisparse(X[:60], W),
              "random": np.where(rng.random((len(X), W.shape[1])) < 0.5, 1, -1).astype(np.int8)}
    for name, codes in others.items():
        n = len(codes)
        assert (best[:n] >= lsh.objective(X[:n], W, codes) - 1e-6).all(), name
    # per-vector reconstruction error ‖x − x̂‖² = 2 − 2 cos: never above any other encoder on the same vector
    err_opt = ((X - lsh.reconstruct(opt, W)) ** 2).sum(1)
    err_lsh = ((X - lsh.reconstruct(others["lsh+frame"], W)) ** 2).sum(1)
    assert (err_opt <= err_lsh + 1e-5).all()


def test_optimal_searches_both_signs_of_each_pair():
    B = lsh.encoders.all_codes(5)
    assert B.shape == (16, 5) and (B[:, -1] == 1).all() and len(np.unique(B, axis=0)) == 16
    with pytest.raises(ParameterError):
        lsh.encoders.all_codes(21)


def test_antisparse_solves_the_linf_program(small):
    X, W = small
    codes, linf = lsh.encode_antisparse(X[:20], W, return_linf=True)
    # feasible v = W⁺x = Wᵀx (tight frame) bounds the optimum from above; ‖x‖ = 1 = ‖Wv‖ ≤ ‖W‖·‖v‖₂ ≤ √L ‖v‖∞ below
    assert (linf <= np.abs(X[:20] @ W).max(1) + 1e-7).all()
    assert (linf >= 1 / np.sqrt(W.shape[1]) - 1e-7).all()
    assert set(np.unique(codes)) <= {-1, 1}


@pytest.mark.parametrize("d,L", [(2, 3), (4, 9), (8, 16)])
def test_antisparse_facet_solver_equals_the_lp(d, L):
    X = lsh.random_unit_vectors(80, d, seed=L)
    W = lsh.tight_frame(d, L, seed=d)
    c_lp, t_lp = lsh.encode_antisparse(X, W, return_linf=True, solver="lp")
    c_f, t_f = lsh.encode_antisparse(X, W, return_linf=True, solver="facets")
    np.testing.assert_allclose(t_f, t_lp, atol=1e-7)
    assert (c_f == c_lp).all(1).mean() >= 0.98  # exact up to components of v* that are ~0 (sign of a tie)
    with pytest.raises(ParameterError, match="solver"):
        lsh.encode_antisparse(X, W, solver="simplex")


def test_encoders_reject_bad_input(small):
    X, W = small
    bad = X.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ParameterError, match="NaN"):
        lsh.encode_qolsh(bad, W)
    with pytest.raises(ParameterError, match="dimension"):
        lsh.encode_lsh(X[:, :5], W)
    with pytest.raises(ParameterError, match="M"):
        lsh.encode_qolsh(X, W, M=-1)
    with pytest.raises(ParameterError, match="unknown encoding"):
        lsh.encode(X, W, "pq")


def test_mse_and_entropy_definitions():
    W = lsh.tight_frame(2, 2, 0)  # orthonormal basis: project-and-sign is optimal (Section 5.2.1)
    X = lsh.random_unit_vectors(2000, 2, 1)
    c = lsh.encode_lsh(X, W)
    assert np.array_equal(lsh.objective(X, W, c) >= lsh.objective(X, W, lsh.encode_optimal(X, W)) - 1e-6,
                          np.ones(len(X), bool))
    # four equiprobable quadrants → 2 bits
    assert abs(lsh.code_entropy(c) - 2.0) < 0.01
    assert lsh.code_entropy(np.ones((10, 4), np.int8)) == 0.0
    x = np.array([[1.0, 0.0]], np.float32)
    Wi = np.eye(2, dtype=np.float32)
    # x̂ = (1, 1)/√2 for b = (+1, +1): ‖x − x̂‖² = 2 − √2
    assert abs(lsh.mse(x, Wi, np.array([[1, 1]], np.int8)) - (2 - np.sqrt(2))) < 1e-6


# ------------------------------------------------------------------------------------------------- packing / Hamming
def test_popcount_intrinsic_agrees_with_bit_trick():
    rng = np.random.default_rng(0)
    a = np.concatenate([rng.integers(0, 2**64 - 1, 1000, dtype=np.uint64, endpoint=True),
                        np.array([0, 2**64 - 1, 1, 2**63], np.uint64)])
    got = K.popcount_array(a)
    ref = np.unpackbits(a.view(np.uint8)).reshape(len(a), 64).sum(1)
    assert np.array_equal(got[0], ref) and np.array_equal(got[1], ref)


@pytest.mark.parametrize("L", [1, 16, 63, 64, 65, 130, 256])
def test_packed_hamming_equals_unpacked(L):
    rng = np.random.default_rng(L)
    A = np.where(rng.random((37, L)) < 0.5, 1, -1).astype(np.int8)
    B = np.where(rng.random((211, L)) < 0.5, 1, -1).astype(np.int8)
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    assert PA.dtype == np.uint64 and PA.shape == (37, (L + 63) // 64)
    assert np.array_equal(PA, lsh.pack_codes_reference(A))
    assert np.array_equal(lsh.unpack_codes(PA, L), A)
    H = lsh.hamming(PA, PB)
    assert np.array_equal(H, lsh.hamming_reference(A, B))
    for k in (1, 7, 64, 65, 211):
        i1, d1 = lsh.hamming_knn(PA, PB, k, n_bits=L)
        i2, d2 = lsh.hamming_knn_reference(A, B, k)
        assert np.array_equal(i1, i2) and np.array_equal(d1, d2)


def test_lsh_packing_from_projections_matches():
    X = lsh.random_unit_vectors(100, 8, 0)
    W = lsh.tight_frame(8, 70, 1)
    assert np.array_equal(lsh.encode_lsh_packed(X, W), lsh.pack_codes(lsh.encode_lsh(X, W)))


def test_hamming_knn_ties_go_to_smaller_index():
    B = np.array([[1, 1, 1, 1], [1, 1, 1, -1], [1, 1, 1, 1], [-1, 1, 1, 1], [1, 1, 1, 1]], np.int8)
    idx, dist = lsh.hamming_knn(lsh.pack_codes(B[:1]), lsh.pack_codes(B), 4, n_bits=4)
    assert idx.tolist() == [[0, 2, 4, 1]] and dist.tolist() == [[0, 0, 0, 1]]
    with pytest.raises(ParameterError):
        lsh.hamming_knn(lsh.pack_codes(B[:1]), lsh.pack_codes(B), 6)


# ------------------------------------------------------------------------------------------------ estimators and search
def test_asymmetric_estimators_match_dense_references():
    rng = np.random.default_rng(0)
    d, L = 16, 70
    W = lsh.tight_frame(d, L, 0)
    X = lsh.random_unit_vectors(300, d, 1)
    Y = lsh.random_unit_vectors(9, d, 2)
    codes = lsh.encode_qolsh(X, W, 3)
    P = lsh.pack_codes(codes)
    cand = rng.integers(0, len(X), size=(9, 25))
    cand[0, 3] = -1
    dense_cos = lsh.asym_cos(Y, codes, W)
    dense_dot = lsh.asym_dot(Y, codes, W)
    got_cos = lsh.asym_scores(Y, P, W, cand, "cos")
    got_dot = lsh.asym_scores(Y, P, W, cand, "dot")
    safe = np.where(cand < 0, 0, cand)
    want_cos = np.take_along_axis(dense_cos, safe, 1)
    want_dot = np.take_along_axis(dense_dot, safe, 1)
    ok = cand >= 0
    np.testing.assert_allclose(got_cos[ok], want_cos[ok], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got_dot[ok], want_dot[ok], rtol=1e-4, atol=1e-5)
    assert np.isneginf(got_cos[0, 3])
    # eq. 5.13 is the cosine between y and the reconstruction x̂
    Xh = lsh.reconstruct(codes, W)
    np.testing.assert_allclose(dense_cos, Y.astype(np.float64) @ Xh.T.astype(np.float64), atol=1e-5)
    np.testing.assert_allclose(lsh.recon_norms(P, W), np.linalg.norm(codes @ W.T.astype(np.float64), axis=1),
                               rtol=1e-5)


def test_recall_at_hand_made_case():
    ranked = np.array([[5, 3, 9], [1, 2, 3], [7, 8, 9], [4, 0, 2]])
    truth = np.array([3, 1, 0, 2])  # ranks 2, 1, missing, 3
    np.testing.assert_allclose(lsh.recall_at(ranked, truth), [0.25, 0.5, 0.75])
    np.testing.assert_allclose(lsh.recall_at(ranked, truth, [3]), [0.75])
    with pytest.raises(ParameterError):
        lsh.recall_at(ranked, truth, [4])


def test_two_stage_search_finds_exact_duplicates_and_matches_bruteforce():
    X = lsh.random_unit_vectors(3000, 16, 0)
    idx = lsh.build_index(X, "qolsh", 32, M=3, seed=1)
    # queries equal to database vectors: Hamming distance 0 puts them in the shortlist; a re-rank by eq. 5.13 keeps
    # them at least as high as any vector sharing their code
    q = X[[5, 77, 2999]]
    ranked = lsh.two_stage_search(idx, q, shortlist=100, R=50)
    assert ranked.shape == (3, 50)
    assert set(ranked[:, :1].ravel()) <= set(range(3000))
    assert all(t in row for t, row in zip([5, 77, 2999], ranked))
    # with a shortlist covering the whole database the ranking is the asymmetric cosine ranking itself
    Y = lsh.random_unit_vectors(5, 16, 9)
    full = lsh.two_stage_search(idx, Y, shortlist=3000, R=10)
    dense = lsh.asym_cos(Y, lsh.unpack_codes(idx.codes, 32), idx.W)
    for a in range(5):
        np.testing.assert_allclose(dense[a, full[a]], np.sort(dense[a])[::-1][:10], atol=1e-5)
    np.testing.assert_array_equal(lsh.exact_nn(X[:4], X), [0, 1, 2, 3])


@pytest.mark.parametrize("L", [16, 130, 256])
def test_every_hamming_knn_path_equals_the_reference(L):
    """The threshold scan agrees with the stable argsort, including many ties (few bits), a query count that is not a
    multiple of 4 and k = the whole database."""
    from dpmf_lib.lsh import _kernels as K

    rng = np.random.default_rng(100 + L)
    A = np.where(rng.random((13, L)) < 0.5, 1, -1).astype(np.int8)
    B = np.where(rng.random((2500, L)) < 0.5, 1, -1).astype(np.int8)
    B[100:140] = A[0]  # exact duplicates of a query: distance-0 ties
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    for k in (1, 10, 300, 2500):
        i_ref, d_ref = lsh.hamming_knn_reference(A, B, k)
        i1, d1 = K.hamming_knn_kernel(PA, PB, k, L, "threshold")
        assert np.array_equal(i1, i_ref) and np.array_equal(d1, d_ref), k
