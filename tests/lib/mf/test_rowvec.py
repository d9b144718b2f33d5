"""The whole-row intrinsics of :mod:`dpmf_lib.mf.rowvec` against numpy on hand-made rows, and their typing guards."""

import numpy as np
import pytest
from numba import literally, njit
from numba.core.errors import TypingError

from dpmf_lib.mf.rowvec import row_dot, sgd_row_step, sgld_row_step_diag, sgld_row_step_iso

f32 = np.float32


@njit
def _dot(A, i, B, j, D):
    literally(D)
    return row_dot(A, i, B, j, D)


@njit
def _dots(A, i, B, j):
    return (row_dot(A, i, B, j, 16), row_dot(A, i, B, j, 32), row_dot(A, i, B, j, 64), row_dot(A, i, B, j, 128))


@njit
def _sgd_128(A, i, B, j, shrink, step):
    sgd_row_step(A, i, B, j, shrink, step, 128)


def _rows(n, d, seed):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(f32)


def test_row_dot_is_the_dot_product_of_the_named_rows():
    A, B = _rows(5, 128, 0), _rows(7, 128, 1)
    got = _dots(A, 3, B, 6)
    assert len(got) == 4
    for D, value in zip((16, 32, 64, 128), got):  # every length, whatever the host's ROW_LENGTHS
        exact = float(np.dot(A[3, :D].astype(np.float64), B[6, :D].astype(np.float64)))
        assert abs(value - exact) <= 1e-5 * np.abs(A[3, :D] * B[6, :D]).sum()
    # a hand-made case that is exact in float32 whatever the summation order
    A, B = np.zeros((2, 16), f32), np.zeros((3, 16), f32)
    A[1], B[2] = np.arange(16), 2.0
    assert _dot(A, 1, B, 2, 16) == 240.0 and _dot(A, 0, B, 2, 16) == 0.0


def test_sgd_row_step_updates_both_rows_from_the_old_ones():
    A, B = _rows(4, 128, 2), _rows(6, 128, 3)
    A0, B0 = A.copy(), B.copy()
    _sgd_128(A, np.uint32(2), B, np.uint32(5), f32(0.99), f32(0.05))
    np.testing.assert_allclose(A[2], f32(0.99) * A0[2] + f32(0.05) * B0[5], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(B[5], f32(0.99) * B0[5] + f32(0.05) * A0[2], rtol=1e-6, atol=1e-7)
    mask_a, mask_b = np.arange(4) != 2, np.arange(6) != 5
    assert np.array_equal(A[mask_a], A0[mask_a]) and np.array_equal(B[mask_b], B0[mask_b])  # nothing else written


@njit
def _iso(A, i, B, j, hg, cu, cv, sdu, sdv, noise, ou, ov, D):
    literally(D)
    sgld_row_step_iso(A, i, B, j, hg, cu, cv, sdu, sdv, noise, ou, ov, D)


@njit
def _diag(A, i, B, j, h, g, pu, pv, Lu, Lv, sdu, sdv, noise, ou, ov, D):
    literally(D)
    sgld_row_step_diag(A, i, B, j, h, g, pu, pv, Lu, Lv, sdu, sdv, noise, ou, ov, D)


@pytest.mark.parametrize("D", [16, 32, 64, 128])
def test_sgld_row_steps_read_the_noise_at_their_offsets(D):
    """Both SGLD steps against numpy on hand-made rows: every element of both rows gets its own update with its own
    noise element (from its offset) and Λ entry, and no other row or element is written. At d = 64 and 128 the steps
    are emitted in several chunks (rowvec.step_chunk), where a chunk offset off by one would shift or repeat them."""
    A, B = _rows(3, D, 7), _rows(4, D, 8)
    noise = np.random.default_rng(9).standard_normal(3 * D).astype(f32)
    A0, B0 = A.copy(), B.copy()
    _iso(A, 2, B, 0, f32(0.1), f32(0.01), f32(0.02), f32(0.3), f32(0.4), noise, 5, D + 9, D)
    np.testing.assert_allclose(A[2], ((A0[2] + f32(0.1) * B0[0]) - f32(0.01) * A0[2]) + f32(0.3) * noise[5:5 + D],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(B[0], ((B0[0] + f32(0.1) * A0[2]) - f32(0.02) * B0[0])
                               + f32(0.4) * noise[D + 9:2 * D + 9], rtol=1e-6, atol=1e-6)
    assert np.array_equal(A[:2], A0[:2]) and np.array_equal(B[1:], B0[1:])
    A, B = A0.copy(), B0.copy()
    Lu, Lv = np.linspace(1, 2, D).astype(f32), np.linspace(2, 3, D).astype(f32)
    h, g, pu, pv = f32(0.05), f32(0.7), f32(3.0), f32(4.0)
    _diag(A, 1, B, 3, h, g, pu, pv, Lu, Lv, f32(0.3), f32(0.4), noise, 3, 2 * D - 1, D)
    np.testing.assert_allclose(A[1], (A0[1] + h * (g * B0[3] - pu * Lu * A0[1])) + f32(0.3) * noise[3:3 + D],
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(B[3], (B0[3] + h * (g * A0[1] - pv * Lv * B0[3]))
                               + f32(0.4) * noise[2 * D - 1:3 * D - 1], rtol=1e-6, atol=1e-6)
    assert np.array_equal(A[[0, 2]], A0[[0, 2]]) and np.array_equal(B[:3], B0[:3])


def test_typing_guards():
    A = _rows(3, 16, 7)
    # each refused for its own reason: the signature numba reports has exactly the offending argument type
    with pytest.raises(TypingError, match=r"array\(float32, 2d, C\), Literal\[int\]\(0\), int64\)"):
        njit(lambda A, D: row_dot(A, 0, A, 0, D))(A, 16)  # D must be a literal (a plain int64 here)
    with pytest.raises(TypingError, match=r"row_dot\(array\(float32, 2d, F\)"):  # rows must be C-contiguous
        _dot(A[:, ::2].copy(order="F"), 0, A, 0, 16)
    with pytest.raises(TypingError, match=r"row_dot\(array\(float64, 2d, C\)"):  # float32 only
        _dot(A.astype(np.float64), 0, A.astype(np.float64), 0, 16)


@pytest.mark.parametrize("features, bits", [("+avx512f,+avx2,+fma", 512), ("+avx2,-avx512f,+fma", 256),
                                            ("-avx2,+sse4.2,+avx", 128), ("", 128)])
def test_vector_register_bits_reads_numbas_target_features(monkeypatch, features, bits):
    """The width comes from numba's target feature string (``NUMBA_CPU_FEATURES`` when set): enabled ``+`` features
    only, AVX-512F before AVX2."""
    from numba.core import config

    from dpmf_lib.mf import rowvec

    monkeypatch.setattr(config, "CPU_FEATURES", features)
    assert rowvec.vector_register_bits() == bits
