"""The SIMD block Hamming scan and the shard-parallel scan (#19) against the stable-argsort reference, and the
project-and-sign packer against its numpy reference. Order of equal distances: by database index (documented in
:func:`dpmf_lib.lsh.hamming_knn`), so the fast kernels must equal the reference exactly, ties included."""

import numpy as np
import pytest

from dpmf_lib import lsh
from dpmf_lib.errors import ParameterError
from dpmf_lib.lsh import _kernels as K

PAD_D = 2147483647


def _signs(rng, n, L):
    return np.where(rng.random((n, L)) < 0.5, 1, -1).astype(np.int8)


def _check(PA, PB, A, B, k, L, i1, d1):
    kk = min(k, len(B))
    i_ref, d_ref = lsh.hamming_knn_reference(A, B, kk)
    assert i1.shape == (len(A), k) and i1.dtype == np.int64 and d1.dtype == np.int32
    assert np.array_equal(i1[:, :kk], i_ref) and np.array_equal(d1[:, :kk], d_ref)
    assert (i1[:, kk:] == -1).all() and (d1[:, kk:] == PAD_D).all()


def test_hand_made_ties_go_to_the_smaller_index():
    # distances to the query [+,+,+,+]: 0, 1, 0, 1, 0, 2, 1
    B = np.array([[1, 1, 1, 1], [1, 1, 1, -1], [1, 1, 1, 1], [-1, 1, 1, 1], [1, 1, 1, 1], [-1, -1, 1, 1],
                  [1, -1, 1, 1]], np.int8)
    Q, D = lsh.pack_codes(B[:1]), lsh.pack_codes(B)
    for method in ("simd", "shards", "auto", "threshold"):
        idx, dist = K.hamming_knn_kernel(Q, D, 5, 4, method)
        assert idx.tolist() == [[0, 2, 4, 1, 3]] and dist.tolist() == [[0, 0, 0, 1, 1]], method
    # blocks of 2 rows and 3 groups / 4 shards: the block and shard boundaries fall between tied rows
    idx, dist = K._hamming_knn_simd(np.repeat(Q, 3, 0), D, 5, 4, 3, 2)
    assert idx.tolist() == [[0, 2, 4, 1, 3]] * 3 and dist.tolist() == [[0, 0, 0, 1, 1]] * 3
    idx, dist = K._hamming_knn_shards(Q, D, 5, 4, 4, 2)
    assert idx.tolist() == [[0, 2, 4, 1, 3]] and dist.tolist() == [[0, 0, 0, 1, 1]]


@pytest.mark.parametrize("L", [3, 16, 64, 130, 256])
def test_simd_and_shards_equal_the_reference(L):
    rng = np.random.default_rng(7 + L)
    A = _signs(rng, 11, L)
    B = _signs(rng, 1500, L)
    B[200:230] = A[0]  # distance-0 ties spread over two blocks
    B[1020:1030] = A[1]  # ties across the default 1,024-row block edge
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    for k in (1, 10, 97, 1000, 1500):
        for method in ("simd", "shards", "auto"):
            i1, d1 = K.hamming_knn_kernel(PA, PB, k, L, method)
            _check(PA, PB, A, B, k, L, i1, d1)
            i1, d1 = K.hamming_knn_kernel(PA[:1], PB, k, L, method)  # one query
            _check(PA[:1], PB, A[:1], B, k, L, i1, d1)
    # odd block sizes, more groups than queries, more shards than rows per shard
    for block in (1, 5, 64):
        for k in (1, 13, 200):
            _check(PA, PB, A, B, k, L, *K._hamming_knn_simd(PA, PB, k, L, 4, block))
            i1, d1 = K._hamming_knn_shards(PA[:3], PB, k, L, 7, block)
            _check(PA[:3], PB, A[:3], B, k, L, i1, d1)


def test_k_larger_than_the_database():
    rng = np.random.default_rng(3)
    A, B = _signs(rng, 4, 70), _signs(rng, 9, 70)
    B[5] = B[2]
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    for method in ("simd", "shards"):
        i1, d1 = K.hamming_knn_kernel(PA, PB, 15, 70, method)
        _check(PA, PB, A, B, 15, 70, i1, d1)
    i1, d1 = K._hamming_knn_shards(PA, PB, 15, 70, 20, 2)  # empty shards
    _check(PA, PB, A, B, 15, 70, i1, d1)
    with pytest.raises(ParameterError):  # the public function keeps refusing k > n
        lsh.hamming_knn(PA, PB, 10)


def test_many_ties_few_bits_large_database():
    # 4-bit codes: every distance is 0..4, so nearly every row ties; checks compaction under the threshold rule
    rng = np.random.default_rng(11)
    A, B = _signs(rng, 6, 4), _signs(rng, 5000, 4)
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    for k in (1, 10, 333, 4999):
        for method in ("simd", "shards"):
            _check(PA, PB, A, B, k, 4, *K.hamming_knn_kernel(PA, PB, k, 4, method))


@pytest.mark.parametrize("L", [1, 16, 63, 64, 65, 256])
def test_pack_projections_serial_and_parallel_equal_the_reference(L):
    rng = np.random.default_rng(L)
    P = rng.standard_normal((301, L)).astype(np.float32)
    P[0] = 0.0
    P[1] = -0.0  # -0.0 >= 0: +1, like np.where(X @ W >= 0, ...) in encode_lsh
    P[2, ::2] = np.float32(-1e-30)
    ref = K.pack_projections_reference(P)
    assert ref[0, 0] == np.uint64((1 << L) - 1 if L < 64 else 2**64 - 1) and np.array_equal(ref[1], ref[0])
    assert np.array_equal(K.pack_projections_kernel(P), ref)
    out = np.empty_like(ref)
    K._pack_projections_serial(P, out)
    assert np.array_equal(out, ref)
    for chunks in (1, 2, 7):
        out = np.empty_like(ref)
        K._pack_projections_parallel(P, out, chunks)
        assert np.array_equal(out, ref)
    W = lsh.tight_frame(8, L, 1)
    X = lsh.random_unit_vectors(200, 8, 2)
    assert np.array_equal(lsh.encode_lsh_packed(X, W), lsh.pack_codes(lsh.encode_lsh(X, W)))


# ------------------------------------------------------------------------------- input checks (review of caffa46)
def _packed(rng, n, L):
    return lsh.pack_codes(_signs(rng, n, L))


def test_hamming_knn_refuses_n_bits_that_do_not_match_the_codes():
    # n_bits below the packed width: the kernels size their per-distance buffers n_bits + 2, so a distance above
    # n_bits used to be written past the end; now a ParameterError naming n_bits
    rng = np.random.default_rng(5)
    Q, D = _packed(rng, 3, 256), _packed(rng, 50, 256)
    for nb in (16, 192, 257, 0, -3):
        with pytest.raises(ParameterError, match="n_bits"):
            lsh.hamming_knn(Q, D, 5, n_bits=nb)
    for nb in (1.5, "256", True):
        with pytest.raises(ParameterError, match="n_bits"):
            lsh.hamming_knn(Q, D, 5, n_bits=nb)
    for nb in (256, None, np.int64(256)):
        lsh.hamming_knn(Q, D, 5, n_bits=nb)
    # 193 bits live in 4 words too (the narrowest L of that width)
    A, B = _signs(rng, 3, 193), _signs(rng, 50, 193)
    i1, d1 = lsh.hamming_knn(lsh.pack_codes(A), lsh.pack_codes(B), 5, n_bits=193)
    i2, d2 = lsh.hamming_knn_reference(A, B, 5)
    assert np.array_equal(i1, i2) and np.array_equal(d1, d2)


def test_hamming_knn_refuses_padding_bits_above_n_bits():
    rng = np.random.default_rng(6)
    A, B = _signs(rng, 2, 70), _signs(rng, 40, 70)
    Q, D = lsh.pack_codes(A), lsh.pack_codes(B)
    assert np.array_equal(lsh.hamming_knn(Q, D, 7, n_bits=70)[0], lsh.hamming_knn_reference(A, B, 7)[0])
    Dd = D.copy()
    Dd[17, 1] |= np.uint64(1) << np.uint64(63)  # bit 127 of a 70-bit code
    with pytest.raises(ParameterError, match="db_packed row 17 has bits set above n_bits=70"):
        lsh.hamming_knn(Q, Dd, 7, n_bits=70)
    Qd = Q.copy()
    Qd[1, 1] |= np.uint64(1) << np.uint64(6)  # bit 70: the first padding bit
    with pytest.raises(ParameterError, match="q_packed row 1"):
        lsh.hamming_knn(Qd, D, 7, n_bits=70)
    # as 128-bit codes (n_bits=None) the same words are valid and searched in full
    i1, d1 = lsh.hamming_knn(Q, Dd, 7)
    H = lsh.hamming(Q, Dd)
    i2 = np.argsort(H, axis=1, kind="stable")[:, :7]
    assert np.array_equal(i1, i2) and np.array_equal(d1, np.take_along_axis(H, i2, 1))


def test_hamming_knn_refuses_bad_shapes_dtypes_and_k():
    rng = np.random.default_rng(8)
    Q, D = _packed(rng, 3, 100), _packed(rng, 30, 100)
    bad_codes = [(Q.astype(np.int64), D), (Q, D.astype(np.float64)), (Q, D.view(np.uint8)), (Q[:, :1], D),
                 (Q, D[:, :0]), (Q[None], D), (Q, D.astype(">u8"))]
    for q, d in bad_codes:
        with pytest.raises(ParameterError, match="q_packed|db_packed|words"):
            lsh.hamming_knn(q, d, 3)
    for k in (0, -1, 31, 2.0, True, "3", None):
        with pytest.raises(ParameterError, match="k must be an integer in \\[1, 30\\]"):
            lsh.hamming_knn(Q, D, k)
    # non-contiguous and 1-d inputs are accepted and give the contiguous answer
    ref = lsh.hamming_knn(Q, D, 30, n_bits=100)
    got = lsh.hamming_knn(np.asfortranarray(Q), np.asfortranarray(D), np.int32(30), n_bits=100)
    assert all(np.array_equal(a, b) for a, b in zip(got, ref))
    D2 = np.repeat(D, 2, axis=0)[::2]
    assert not D2.flags.c_contiguous
    assert all(np.array_equal(a, b) for a, b in zip(lsh.hamming_knn(Q, D2, 30, n_bits=100), ref))
    i1, d1 = lsh.hamming_knn(Q[0], D, 4, n_bits=100)
    assert np.array_equal(i1, ref[0][:1, :4]) and np.array_equal(d1, ref[1][:1, :4])


def test_kernel_wrapper_refuses_unsafe_calls_and_survives_dirty_padding():
    rng = np.random.default_rng(9)
    Q, D = _packed(rng, 5, 70), _packed(rng, 60, 70)
    for args in ((Q, D, 0, 70), (Q, D, 5, 16), (Q, D, 5, 129), (Q[:, :1], D, 5, 64), (Q[:, :0], D[:, :0], 5, 0)):
        for method in ("auto", "simd", "shards", "threshold"):
            with pytest.raises(ParameterError):
                K.hamming_knn_kernel(*args, method)
    with pytest.raises(ParameterError, match="k <= len"):  # this path never pads: k > n would return np.empty garbage
        K.hamming_knn_kernel(Q, D, 61, 70, "threshold")
    # padding bits set (the public function refuses them; a direct kernel call must still stay in bounds): every
    # path returns the k smallest of the full-width distances
    Dd = D.copy()
    Dd[:, 1] |= ~np.uint64((1 << 6) - 1)  # all 58 padding bits: every distance is above 70
    Dd[:4] = ~Q[0]  # distance 128 to query 0
    H = lsh.hamming(Q, Dd)
    assert H.min() > 70 and H.max() == 128
    i_ref = np.argsort(H, axis=1, kind="stable")[:, :9]
    for method in ("auto", "simd", "shards", "threshold"):
        i1, d1 = K.hamming_knn_kernel(Q, Dd, 9, 70, method)
        assert np.array_equal(i1, i_ref) and np.array_equal(d1, np.take_along_axis(H, i_ref, 1)), method


def test_results_do_not_depend_on_the_thread_count():
    # auto picks shards for 1 query at 2 threads and simd at 1 thread; the packer goes parallel above 2^20
    # projections only with > 1 thread: the bytes must be the same either way
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs NUMBA_NUM_THREADS >= 2")
    rng = np.random.default_rng(10)
    A, B = _signs(rng, 5, 256), _signs(rng, 3 * K.SCAN_BLOCK + 17, 256)
    B[1000:1100] = A[0]  # ties at distance 0 across a shard edge (2 shards of 1,546 rows) and a block edge
    B[1500:1600] = A[0]
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    X = lsh.random_unit_vectors(4100, 8, 3)
    W = lsh.gaussian_projections(8, 256, 4)
    old = numba.get_num_threads()
    out = {}
    try:
        for t in (1, 2):
            numba.set_num_threads(t)
            out[t] = ([lsh.hamming_knn(PA[:1], PB, k, n_bits=256) for k in (1, 150, 3000)]
                      + [lsh.hamming_knn(PA, PB, k, n_bits=256) for k in (1, 150)], lsh.encode_lsh_packed(X, W))
    finally:
        numba.set_num_threads(old)
    for r1, r2 in zip(out[1][0], out[2][0]):
        assert np.array_equal(r1[0], r2[0]) and np.array_equal(r1[1], r2[1])
    i_ref, d_ref = lsh.hamming_knn_reference(A[:1], B, 3000)
    assert np.array_equal(out[2][0][2][0], i_ref) and np.array_equal(out[2][0][2][1], d_ref)
    assert np.array_equal(out[1][1], out[2][1])
    assert np.array_equal(out[1][1], K.pack_projections_reference(X @ W))


def test_asym_scores_refuses_ids_outside_the_database():
    # the scoring kernel reads the code and norm of every candidate id without bounds checks
    W = lsh.tight_frame(8, 70, 0)
    X = lsh.random_unit_vectors(20, 8, 1)
    Y = lsh.random_unit_vectors(2, 8, 2)
    P = lsh.pack_codes(lsh.encode_lsh(X, W))
    ok = np.array([[0, 19, -1], [3, 4, 5]])
    assert np.isneginf(lsh.asym_scores(Y, P, W, ok)[0, 2])
    for bad in ([[0, 20, 1], [1, 2, 3]], [[0, -2, 1], [1, 2, 3]]):
        with pytest.raises(ParameterError, match="candidates must be database ids"):
            lsh.asym_scores(Y, P, W, np.array(bad))
    with pytest.raises(ParameterError, match="norms"):
        lsh.asym_scores(Y, P, W, ok, norms=np.ones(5, np.float32))
    with pytest.raises(ParameterError, match="word"):
        lsh.asym_scores(Y, P[:, :1], W, ok, norms=np.ones(20, np.float32))


def test_block_minimum_equal_to_the_threshold_and_shard_ties():
    # distances to the query [+,+,+,+] by row: 0, 1 | 1, 1 | 0, 1 (blocks of 2). With k = 2, after block 0 the
    # threshold is 1 (rows 0, 1); block 1's minimum equals it and is skipped (its rows tie with row 1 but come later);
    # block 2 holds a 0, which must displace row 1. Shards of 2 rows: every shard's list ties at distance 1, and the
    # merge must keep index order among equal distances.
    B = np.array([[1, 1, 1, 1], [1, 1, 1, -1], [1, -1, 1, 1], [-1, 1, 1, 1], [1, 1, 1, 1], [1, 1, -1, 1]], np.int8)
    Q, D = lsh.pack_codes(B[:1]), lsh.pack_codes(B)
    for k, want_i, want_d in ((2, [0, 4], [0, 0]), (3, [0, 4, 1], [0, 0, 1]), (5, [0, 4, 1, 2, 3], [0, 0, 1, 1, 1])):
        i_ref, d_ref = lsh.hamming_knn_reference(B[:1], B, k)
        assert i_ref.tolist() == [want_i] and d_ref.tolist() == [want_d]
        for block in (1, 2, 3):
            i1, d1 = K._hamming_knn_simd(Q, D, k, 4, 1, block)
            assert i1.tolist() == [want_i] and d1.tolist() == [want_d], (k, block)
            for shards in (2, 3, 6):
                i1, d1 = K._hamming_knn_shards(Q, D, k, 4, shards, block)
                assert i1.tolist() == [want_i] and d1.tolist() == [want_d], (k, block, shards)
        assert lsh.hamming_knn(Q, D, k, n_bits=4)[0].tolist() == [want_i]


def test_every_path_ties_at_the_threshold_compaction_and_k_equal_n():
    # #15/#19 (shared selection helpers): 4-bit codes put thousands of rows at the threshold distance, so every
    # path's candidate list is compacted many times (cap = 2k + 64) and the first rows at the threshold must win;
    # k = n and k = n − 1 included. (1-word codes never take the unrolled four-query loop: the 256-bit part does.)
    rng = np.random.default_rng(19)
    A, B = _signs(rng, 7, 4), _signs(rng, 3000, 4)
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    for k in (1, 10, 100, 333, 2999, 3000):
        for method in ("auto", "simd", "shards", "threshold"):
            _check(PA, PB, A, B, k, 4, *K.hamming_knn_kernel(PA, PB, k, 4, method))
        for block in (1, 7):  # block edges between tied rows, groups of 1 and 2 queries
            for groups in (1, 4):
                _check(PA, PB, A, B, k, 64, *K._hamming_knn_threshold(PA, PB, k, 64, groups, block))
    # 256-bit codes (4 words: the unrolled four-query loop of the threshold kernel) with exact duplicates at the
    # threshold; 11 queries in 1 group = two passes of four and a remainder of three, on any thread count
    A, B = _signs(rng, 11, 256), _signs(rng, 700, 256)
    B[50:90] = A[2]
    B[400:420] = A[2]
    PA, PB = lsh.pack_codes(A), lsh.pack_codes(B)
    for k in (30, 40, 45, 60, 700):
        for method in ("simd", "shards", "threshold"):
            _check(PA, PB, A, B, k, 256, *K.hamming_knn_kernel(PA, PB, k, 256, method))
        _check(PA, PB, A, B, k, 256, *K._hamming_knn_threshold(PA, PB, k, 256, 2, 3))
        _check(PA, PB, A, B, k, 256, *K._hamming_knn_threshold(PA, PB, k, 256, 1, 3))
