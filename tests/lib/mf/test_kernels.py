"""C-SGD / naive SGD kernels vs the numpy reference, layouts, determinism, prefetch, serving."""

import re

import numba
import numpy as np
import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.mf import Schedule, init_model, naive_layout, tiered_layout, top_k, train_sgd
from dpmf_lib.mf.reference import topk_reference, train_sgd_reference
from tests.mf_toys import (host_vector_register, lazy_counters, random_ratings, sgld_segment_arguments,
                           whole_row_lengths_in)

KW = dict(epochs=3, eta0=0.05, gamma=0.5, lam=0.02)


@pytest.mark.parametrize("order", ["tiered", "tiered-usermajor", "naive"])
@pytest.mark.parametrize("prefetch", [0, 2])
@pytest.mark.parametrize("d", [8, 16, 32, 64, 128])
def test_sgd_kernel_matches_reference_same_order(order, prefetch, d):
    """d = 8 runs the loop kernel, d in ``ROW_LENGTHS`` (16-128 with AVX-512, 16 and 32 with AVX2) the whole-row
    kernel, which reads the next rating's rows before this rating's update: with 12 items, consecutive ratings often
    share an item or a user, and the kernel must then re-read (a version that does not is off by ~1e-3 here). The
    whole-row kernel at d the host leaves out: ``test_whole_row_sgd_kernel_matches_reference_on_any_host``."""
    from dpmf_lib.mf.sgd_kernels import ROW_LENGTHS

    assert 8 not in ROW_LENGTHS and set(ROW_LENGTHS) <= {16, 32, 64, 128}
    r = random_ratings(n_items=12)
    lay = (naive_layout(r, seed=3, n_chunks=5) if order == "naive" else
           tiered_layout(r, block_users=7, tiers=(5, 10), interleave=8 if order == "tiered" else 1))
    shared = (lay.users[1:] == lay.users[:-1]) | (lay.items[1:] == lay.items[:-1])
    assert shared.sum() >= 20  # the re-read path runs
    m0 = init_model(r.n_users, r.n_items, d, seed=1, b0=float(r.values.mean()))
    res = train_sgd(r, d=d, model=m0, layout=lay, schedule=Schedule(n_threads=1, prefetch_stride=prefetch), **KW)
    ref = train_sgd_reference(lay, m0, lam=KW["lam"], lamb=KW["lam"], epochs=KW["epochs"], eta0=KW["eta0"],
                              gamma=KW["gamma"])
    for a, b in [(res.model.U, ref.U), (res.model.V, ref.V), (res.model.bu, ref.bu), (res.model.bi, ref.bi)]:
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert not np.allclose(res.model.U, m0.U)  # it did train


@pytest.mark.parametrize("d", [16, 32, 64, 128])
def test_whole_row_sgd_kernel_matches_reference_on_any_host(d):
    """The whole-row kernel called directly, so that it is tested at every d on every host (``train_sgd`` runs it
    only for d in ``ROW_LENGTHS``, which depends on the host's vector registers): one pass over a 12-item toy order
    where ≥ 20 consecutive ratings share a user or an item, against the float32 reference."""
    from dpmf_lib.mf.sgd_kernels import _sgd_range_rows, aligned_copy
    from dpmf_lib.mf.reference import sgd_epoch_reference

    r = random_ratings(n_items=12)
    lay = tiered_layout(r, block_users=7, tiers=(5, 10))
    assert ((lay.users[1:] == lay.users[:-1]) | (lay.items[1:] == lay.items[:-1])).sum() >= 20
    m = init_model(r.n_users, r.n_items, d, seed=1, b0=float(r.values.mean()), scale=0.3)
    A = [aligned_copy(m.U), aligned_copy(m.V), m.bu.copy(), m.bi.copy()]
    B = [m.U.copy(), m.V.copy(), m.bu.copy(), m.bi.copy()]
    f = np.float32
    _sgd_range_rows(lay.users, lay.items, lay.values, 0, len(lay.values), *A, f(m.b0), f(0.05), f(0.02), f(0.02), 2, d)
    sgd_epoch_reference(lay.users, lay.items, lay.values, *B, m.b0, 0.05, 0.02, 0.02)
    for a, b in zip(A, B):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert not np.allclose(A[0], m.U)


def test_whole_row_lengths_follow_the_vector_register_file(monkeypatch):
    """Whole-row kernels while two rows fit in half the vector registers: d ≤ 128 with AVX-512, d ≤ 32 with AVX2 (on
    a Zen 3 AVX2 host they were ~2x slower than the loop kernels at d = 64 and 128), none below AVX2."""
    from dpmf_lib.mf import rowvec
    from dpmf_lib.mf.sgd_kernels import MAX_ROW_LENGTH, ROW_LENGTHS

    assert ROW_LENGTHS == rowvec.whole_row_lengths() and MAX_ROW_LENGTH == max(ROW_LENGTHS, default=0)
    for bits, expected in ((512, (16, 32, 64, 128)), (256, (16, 32)), (128, ())):
        monkeypatch.setattr(rowvec, "vector_register_bits", lambda b=bits: b)
        assert rowvec.whole_row_lengths() == expected


def test_sgld_steps_are_emitted_in_chunks_that_fit_half_the_register_file(monkeypatch):
    """step_chunk: the largest power of two ≤ d whose ``vectors`` chunks take ≤ half the vector register file (512
    float32 with AVX-512, 128 with AVX2); the isotropic SGLD step has 4 row-long operands, the diagonal one 6."""
    from dpmf_lib.mf import rowvec

    monkeypatch.setattr(rowvec, "vector_register_bits", lambda: 512)
    assert [rowvec.step_chunk(d, 4) for d in (16, 32, 64, 128)] == [16, 32, 64, 64]
    assert [rowvec.step_chunk(d, 6) for d in (16, 32, 64, 128)] == [16, 32, 32, 32]
    assert [rowvec.step_chunk(d, 2) for d in (16, 32, 64, 128)] == [16, 32, 64, 128]  # C-SGD's two rows: whole
    monkeypatch.setattr(rowvec, "vector_register_bits", lambda: 256)
    assert [rowvec.step_chunk(d, 4) for d in (16, 32)] == [16, 16]
    assert [rowvec.step_chunk(d, 6) for d in (16, 32)] == [8, 8]
    assert rowvec.step_chunk(24, 4) == 8  # a chunk divides the row


def test_epoch_kernel_compiles_the_whole_row_kernel_exactly_for_row_lengths():
    """The dispatch in the compiled epoch kernel (recompiled without the on-disk cache): it holds the whole-row kernel
    for each D in ``ROW_LENGTHS`` (the symbols end in ``Literal[int](D)``) and for no other D."""
    from dpmf_lib.mf.sgd_kernels import ROW_LENGTHS, _sgd_epoch_serial

    fresh = numba.njit(fastmath=True)(_sgd_epoch_serial.py_func)
    r = random_ratings()
    m = init_model(r.n_users, r.n_items, 24, seed=0)
    f = np.float32
    fresh(r.users, r.items, r.values, np.array([0, len(r.values)], np.int64), m.U, m.V, m.bu, m.bi, f(3), f(0.01),
          f(0.0), f(0.0), 2)
    compiled = whole_row_lengths_in("".join(fresh.inspect_asm().values()), "_sgd_range_rows")
    assert compiled == set(ROW_LENGTHS)


@pytest.mark.parametrize("d", [8, 16, 32])
def test_sgd_kernel_repeated_pairs_and_python_float_scalars(d):
    """Consecutive ratings of the same (user, item) pair, and of the same user or item, in a hand-made stream; the
    scalars as Python floats (cast to float32 by the whole-row kernel; the loop kernel computes in float64 then)."""
    from dpmf_lib.mf.sgd_kernels import _sgd_epoch_serial
    from dpmf_lib.mf.reference import sgd_epoch_reference

    users = np.array([0, 0, 0, 1, 1, 2, 0, 2, 2, 1], np.int32)
    items = np.array([3, 3, 1, 1, 1, 0, 0, 0, 2, 2], np.int32)
    vals = np.linspace(1, 5, len(users)).astype(np.float32)
    m = init_model(3, 4, d, seed=2, b0=3.0, scale=0.5)
    A = [m.U.copy(), m.V.copy(), m.bu.copy(), m.bi.copy()]
    B = [x.copy() for x in A]
    _sgd_epoch_serial(users, items, vals, np.array([0, len(vals)], np.int64), *A, np.float32(3.0), 0.1, 0.05, 0.05,
                      np.int64(2))
    sgd_epoch_reference(users, items, vals, *B, 3.0, 0.1, 0.05, 0.05)
    for a, b in zip(A, B):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert not np.allclose(A[0], m.U)


def test_tiered_layout_order():
    r = random_ratings(n_users=50, n_items=60, n_ratings=700, seed=2)
    lay = tiered_layout(r, block_users=10, tiers=(5, 20))
    counts = r.item_counts()
    # internal ids are sorted by popularity
    assert np.all(np.diff(counts[lay.item_perm]) <= 0)
    assert lay.tier_bounds == (5, 25)
    # same multiset of ratings
    k1 = np.sort(r.users.astype(np.int64) * 1000 + r.items)
    k2 = np.sort(lay.users.astype(np.int64) * 1000 + lay.item_perm[lay.items])
    np.testing.assert_array_equal(k1, k2)
    np.testing.assert_array_equal(lay.values, r.values[lay.order])
    np.testing.assert_array_equal(lay.item_rank[lay.item_perm], np.arange(r.n_items))  # consistent renumbering
    np.testing.assert_array_equal(lay.to_internal_items(r.items[lay.order]), lay.items)
    # within each block: tier non-decreasing; within a tier users interleaved round-robin (default)
    for s in range(len(lay.seg) - 1):
        a, b = lay.seg[s], lay.seg[s + 1]
        assert np.all(lay.users[a:b] // 10 == s)
        tier = np.searchsorted(np.array(lay.tier_bounds), lay.items[a:b], side="right")
        assert np.all(np.diff(tier) >= 0)
        for t in np.unique(tier):
            us = lay.users[a:b][tier == t]
            assert np.all(np.diff(us // 8) >= 0)  # batches of 8 users in order
            for bt in np.unique(us // 8):
                ub = us[us // 8 == bt]
                n_u = len(np.unique(ub))
                np.testing.assert_array_equal(ub[:n_u], np.unique(ub))  # first round: each batch user once
    um = tiered_layout(r, block_users=10, tiers=(5, 20), interleave=1)
    for s in range(len(um.seg) - 1):
        a, b = um.seg[s], um.seg[s + 1]
        tier = np.searchsorted(np.array(um.tier_bounds), um.items[a:b], side="right")
        for t in np.unique(tier):
            assert np.all(np.diff(um.users[a:b][tier == t]) >= 0)


def _check_tiered_order(lay, block_users):
    for s in range(len(lay.seg) - 1):
        a, b = lay.seg[s], lay.seg[s + 1]
        assert np.all(lay.users[a:b] // block_users == s), f"block {s} holds foreign users"
        tier = np.searchsorted(np.array(lay.tier_bounds), lay.items[a:b], side="right")
        assert np.all(np.diff(tier) >= 0), f"block {s}: tiers out of order"


def test_tiered_layout_at_yahoo_scale_ids_does_not_overflow():
    """Yahoo! Music's id space (1,000,990 users × 624,961 items) overflowed the int64 sort key of the interleave
    step (≈ 1.9·10²¹): blocks held foreign users and tiers came out of order, silently."""
    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.mf.layout import pack_keys

    rng = np.random.default_rng(0)
    n_users, n_items, n = 1_000_990, 624_961, 30_000
    users = rng.integers(0, n_users, n).astype(np.int32)
    items = np.minimum(rng.zipf(1.3, n) - 1, n_items - 1).astype(np.int32)
    r = Ratings(users, items, rng.integers(1, 6, n).astype(np.float32), n_users, n_items, (1.0, 5.0),
                DataSource("yahoo-music", False, None, "toy with Yahoo's id space"))
    lay = tiered_layout(r, block_users=1000, tiers=(500, 4000), interleave=8)
    _check_tiered_order(lay, 1000)
    assert len(np.unique(lay.order)) == n
    # the packed key sorts exactly like a lexsort on the parts, also where the mixed radix would overflow
    parts = [(rng.integers(0, 3003, n), 3003), (rng.integers(0, n_users, n), n_users),
             (rng.integers(0, n_items, n), n_items), (rng.integers(0, n_users, n), n_users)]
    expected = np.lexsort([p[0] for p in reversed(parts)])
    np.testing.assert_array_equal(np.argsort(pack_keys(*parts), kind="stable"), expected)


def test_lazy_counters_sum_to_round_length():
    r = random_ratings(seed=4)
    lay = tiered_layout(r, block_users=7, tiers=(5, 10))
    gu, gv, fu, fv = lazy_counters(lay.users, lay.items, r.n_users, r.n_items)
    n = r.n_ratings
    tot_u = np.bincount(lay.users, weights=gu, minlength=r.n_users) + fu
    tot_v = np.bincount(lay.items, weights=gv, minlength=r.n_items) + fv
    assert np.all(tot_u == n) and np.all(tot_v == n)
    # hand check against an explicit last-touched counter
    last = {}
    for k, u in enumerate(lay.users):
        assert gu[k] == k - last.get(u, -1)
        last[u] = k


def test_same_seed_one_thread_bit_identical():
    r = random_ratings(n_users=60, n_items=50, n_ratings=600, seed=5)
    small = Schedule(n_threads=1, block_users=10, tiers=(5, 10))
    a = train_sgd(r, d=16, epochs=2, schedule=small, seed=7)
    b = train_sgd(r, d=16, epochs=2, schedule=small, seed=7)
    assert a.model.U.tobytes() == b.model.U.tobytes() and a.model.V.tobytes() == b.model.V.tobytes()
    c = train_sgd(r, d=16, epochs=2, schedule=small, seed=8)
    assert a.model.U.tobytes() != c.model.U.tobytes()


@pytest.mark.parametrize("d", [8, 16])  # the loop kernel and the whole-row kernel under prange
def test_two_threads_still_converges(d):
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs 2 numba threads")
    r = random_ratings(n_users=200, n_items=80, n_ratings=4000, seed=6)
    res = train_sgd(r, d=d, epochs=10, eta0=0.02, gamma=0.0, lam=0.05,
                    schedule=Schedule(n_threads=2, block_users=20, tiers=(10, 20)), test=r)
    h = res.history["test_rmse"].to_numpy()
    assert np.isfinite(h).all() and h[-1] < h[0]


def test_prefetch_emits_instruction():
    """The C-SGD inner loop (recompiled without the on-disk cache, which cannot be inspected) contains prefetches."""
    from dpmf_lib.mf.sgd_kernels import _sgd_range

    fresh = numba.njit(fastmath=True)(_sgd_range.py_func)
    r = random_ratings()
    m = init_model(r.n_users, r.n_items, 32, seed=0)
    f = np.float32
    fresh(r.users, r.items, r.values, 0, len(r.values), m.U, m.V, m.bu, m.bi, f(3), f(0.01), f(0.0), f(0.0), 2)
    asm = "".join(fresh.inspect_asm().values())
    assert "prefetcht0" in asm


def test_whole_row_kernel_is_straight_vector_code_with_prefetch():
    """The whole-row C-SGD kernel at d = 128 (recompiled without the on-disk cache): prefetches, packed single
    precision FMAs on full rows (on the host's widest vector registers), and no reference counting in its loop."""
    from dpmf_lib.mf.sgd_kernels import _sgd_range_rows

    fresh = numba.njit(fastmath=True)(_sgd_range_rows.py_func)
    r = random_ratings()
    m = init_model(r.n_users, r.n_items, 128, seed=0)
    f = np.float32
    fresh(r.users, r.items, r.values, 0, len(r.values), m.U, m.V, m.bu, m.bi, f(3), f(0.01), f(0.0), f(0.0), 2, 128)
    asm = "".join(fresh.inspect_asm().values())
    native = asm.split("_ZN7cpython")[0]  # the kernel itself, before its Python wrapper (which unboxes and decrefs)
    reg = host_vector_register()
    assert "prefetcht0" in native and f"vfmadd231ps\t%{reg}" in native.replace("vfmadd213ps", "vfmadd231ps")
    assert reg == "zmm" or "%zmm" not in native  # and no wider registers than the host has (the check's premise)
    assert "NRT_incref" not in native and "NRT_decref" not in native


def test_whole_row_sgld_kernel_is_straight_vector_code():
    """The same for the whole-row SGLD kernel (diagonal and isotropic steps are both compiled): table and row
    prefetches, packed FMAs on the host's widest vector registers, no reference counting, no double-precision
    arithmetic."""
    from dpmf_lib.mf.sgld import _sgld_range_table_rows

    fresh = numba.njit(fastmath=True)(_sgld_range_table_rows.py_func)
    fresh(*sgld_segment_arguments(128), 128)
    asm = "".join(fresh.inspect_asm().values())
    native = asm.split("_ZN7cpython")[0]
    reg = host_vector_register()
    assert "prefetcht0" in native and re.search(rf"vfn?m(add|sub)\d+ps\t[^\n]*%{reg}", native)
    assert reg == "zmm" or "%zmm" not in native
    assert "NRT_incref" not in native and "NRT_decref" not in native
    assert "sd\t" not in native.replace("vmovsd", "").replace("movsd", "")  # no scalar double arithmetic


def test_whole_row_sgld_kernel_keeps_its_vectors_in_registers():
    """At d = 128 on AVX-512 the SGLD step's four rows (u, v, two noise segments) were all 32 registers as whole
    rows, and LLVM spilled vectors to the stack in every update (22 stack accesses of zmm registers in the kernel,
    twenty-seventh session); emitted in chunks (rowvec.step_chunk) it spills none."""
    from dpmf_lib.mf.sgld import _sgld_range_table_rows

    if host_vector_register() != "zmm":
        pytest.skip("d = 128 runs the loop kernel without AVX-512 (rowvec.whole_row_lengths)")
    fresh = numba.njit(fastmath=True)(_sgld_range_table_rows.py_func)
    fresh(*sgld_segment_arguments(128), 128)
    native = "".join(fresh.inspect_asm().values()).split("_ZN7cpython")[0]
    # vector moves to or from the stack (a scalar broadcast from the stack, vbroadcastss, is not a spill)
    spills = [line for line in native.splitlines() if re.search(r"vmov[au]ps\t.*%zmm\d+", line) and "(%rsp)" in line]
    assert not spills, spills[:5]


def test_bad_parameters_raise():
    r = random_ratings()
    with pytest.raises(ParameterError, match="order"):
        train_sgd(r, schedule=Schedule(order="random"))
    with pytest.raises(ParameterError, match="eta0"):
        train_sgd(r, eta0=float("nan"))
    with pytest.raises(ParameterError, match="d "):
        train_sgd(r, d=0)
    with pytest.raises(ParameterError, match="tiers"):
        train_sgd(r, schedule=Schedule(tiers=(0, 5)))


def test_topk_matches_reference_and_excludes_seen():
    r = random_ratings(n_users=40, n_items=70, n_ratings=500, seed=9)
    m = init_model(r.n_users, r.n_items, 6, seed=2)
    m.bi[:] = np.random.default_rng(0).standard_normal(r.n_items).astype(np.float32)
    got = top_k(m, 5, block=7)
    ref = topk_reference(m.U, m.V, m.bi, 5)
    np.testing.assert_array_equal(got, ref)
    seen = r.user_csr()
    got2 = top_k(m, 5, block=16, seen=seen)
    mask = np.zeros((r.n_users, r.n_items), bool)
    mask[r.users, r.items] = True
    np.testing.assert_array_equal(got2, topk_reference(m.U, m.V, m.bi, 5, exclude=mask))
