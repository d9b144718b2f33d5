"""#19 kernel properties: aligned factor rows, prefetch has no effect on results, and the hot loops compile to packed
FMAs without per-rating reshapes or gathers (checked on the assembly of fresh, uncached compilations)."""

import platform
import re

import numba
import numpy as np
import pytest

from dpmf_lib.mf import Schedule, init_model, sample_sgld, tiered_layout, train_sgd
from dpmf_lib.mf.sgd_kernels import aligned_copy
from tests.mf_toys import random_ratings

x86 = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 assembly")


@pytest.mark.parametrize("shape", [(7, 128), (3, 5), (1, 1), (0, 16)])
def test_aligned_copy_is_aligned_equal_and_contiguous(shape):
    a = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    b = aligned_copy(a)
    assert (a.size == 0 or b.ctypes.data % 64 == 0) and b.flags.c_contiguous and b.flags.writeable
    assert b.dtype == a.dtype and b.shape == a.shape
    np.testing.assert_array_equal(a, b)
    b[...] = 1  # a copy, not a view
    assert a.size == 0 or not np.all(a == 1)


def test_prefetch_stride_does_not_change_results():
    r = random_ratings(n_users=90, n_items=40, n_ratings=1500, seed=8)
    lay = tiered_layout(r, block_users=20, tiers=(5, 15))
    m0 = init_model(r.n_users, r.n_items, 16, seed=1, b0=float(r.values.mean()))
    kw = dict(d=16, model=m0, layout=lay, epochs=2)
    a, b = (train_sgd(r, schedule=Schedule(n_threads=1, prefetch_stride=p), **kw).model for p in (0, 8))
    assert a.U.tobytes() == b.U.tobytes() and a.V.tobytes() == b.V.tobytes() and a.bi.tobytes() == b.bi.tobytes()
    kw = dict(d=16, layout=lay, epochs=2, seed=2, noise_table_size=4096)
    a, b = (sample_sgld(r, schedule=Schedule(n_threads=1, prefetch_stride=p), **kw).model for p in (0, 3))
    assert a.U.tobytes() == b.U.tobytes() and a.V.tobytes() == b.V.tobytes() and a.bu.tobytes() == b.bu.tobytes()


def test_sgd_result_is_deterministic_with_default_prefetch():
    r = random_ratings(n_users=90, n_items=40, n_ratings=1500, seed=9)
    kw = dict(d=32, schedule=Schedule(n_threads=1, block_users=20, tiers=(5, 15)), epochs=2, seed=4)
    a, b = train_sgd(r, **kw).model, train_sgd(r, **kw).model
    assert a.U.tobytes() == b.U.tobytes() and a.V.tobytes() == b.V.tobytes()


def _asm(fn, *args):
    fresh = numba.njit(fastmath=True)(fn.py_func)
    fresh(*args)
    return "".join(fresh.inspect_asm().values())


@x86
def test_csgd_loop_is_packed_fma_without_reshape():
    from dpmf_lib.mf.sgd_kernels import _sgd_range

    r = random_ratings()
    m = init_model(r.n_users, r.n_items, 128, seed=0)
    f = np.float32
    asm = _asm(_sgd_range, r.users, r.items, r.values, 0, len(r.values), m.U, m.V, m.bu, m.bi, f(3), f(0.01), f(0.0),
               f(0.0), 8)
    assert "prefetcht0" in asm
    assert re.search(r"vfmadd\d+ps", asm)  # packed float32 FMAs (xmm/ymm/zmm by the CPU)
    assert "reshape" not in asm  # prefetch_row used to reshape (a call + reference counting) per rating
    assert not re.search(r"\b(vaddsd|vsubsd|vmulsd|vdivsd|vfmadd\w*sd|vfnmadd\w*sd|vcvtss2sd)\b", asm)  # no float64


@x86
def test_sgld_table_loop_is_packed_fma_without_gather():
    from dpmf_lib.mf.sgld import _sgld_range_table

    d, n = 128, 4
    i32 = np.zeros(n, np.int32)
    z = np.zeros(n, np.float32)
    U = np.zeros((n, d), np.float32)
    gap = np.ones(n, np.int64)
    ext = np.zeros(1000, np.float32)
    L = np.ones(d, np.float32)
    f = np.float32
    asm = _asm(_sgld_range_table, i32, i32, z, z.copy(), False, gap, gap, 0, n, U, U.copy(), z.copy(), z.copy(), f(0),
               f(0.01), f(0.01), f(1), z.copy(), z.copy(), L, L, f(1), ext, 500, np.uint64(3), np.int64(8), True,
               False, f(0), f(0))
    assert re.search(r"vfmadd\d+ps", asm) and "prefetcht0" in asm
    assert "gather" not in asm  # table reads are contiguous vector loads (a sign-unknown offset made them gathers)
    assert "reshape" not in asm
    assert not re.search(r"\b(vaddsd|vsubsd|vmulsd|vdivsd|vfmadd\w*sd|vfnmadd\w*sd|vcvtss2sd)\b", asm)  # no float64
