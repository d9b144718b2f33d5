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
