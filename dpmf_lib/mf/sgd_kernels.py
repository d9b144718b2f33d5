"""The SGD kernels of :func:`dpmf_lib.mf.train_sgd` (C-SGD and naive SGD run the same ones) and the aligned factor
copies they take.

- ``_sgd_epoch`` (numba, ``prange`` over a layout's segments) and ``_sgd_epoch_serial`` (the same loop on one
  thread, for cachegrind) run ``_sgd_range`` per segment: the whole-row kernel ``_sgd_range_rows`` for d in
  ``ROW_LENGTHS`` (:func:`dpmf_lib.mf.rowvec.whole_row_lengths`, from the host's vector registers), else the loop
  kernel. :mod:`dpmf_lib.mf.hot_rows` runs ``_sgd_range`` on per-thread copies of the hot item rows.
- :func:`aligned_copy` — C-contiguous copies that start on a cache line.

The update rule, the kernels' measurements and why they are written as they are: :mod:`dpmf_lib.mf.csgd`.
"""

from __future__ import annotations

import numpy as np
from numba import literally, njit, prange

from .prefetch import prefetch_row
from .rowvec import row_dot, sgd_row_step, whole_row_lengths

# d with a whole-row kernel, from the host's vector registers (others run the loop kernel). MAX_ROW_LENGTH is a
# compile-time constant of the kernels' dispatch, fixed by the host features that numba's on-disk cache is keyed by.
# That cache is keyed by this module's source, not by the globals a kernel reads: after editing
# rowvec.whole_row_lengths, delete dpmf_lib/mf/__pycache__, or the kernels cached with the old lengths are loaded.
# The same holds for hot_rows._private_hot_epoch, which inlines _sgd_range: after editing this file, delete it too.
ROW_LENGTHS = whole_row_lengths()
MAX_ROW_LENGTH = max(ROW_LENGTHS, default=0)


@njit(cache=True, fastmath=True)
def _sgd_range_rows(users, items, vals, start, stop, U, V, bu, bi, b0, eta, lam, lamb, pf, D):
    """``_sgd_range`` for rows of the literal length ``D`` (:mod:`dpmf_lib.mf.rowvec`), with the next rating's dot
    product read *before* this rating's update is stored.

    Why: at d = 128 the loop kernel is bound neither by its loads nor by its FP work but by the chain dot -> error ->
    update -> the next rating's loads, which must wait for the stores they might alias (in cache: ~84 cycles per
    update against ~58 with the error off the chain). Reading rating k+1's rows before rating k's stores takes the
    dot product off that chain. When rating k+1 shares its user or its item with rating k, its dot product is read
    again after the update, so every update sees exactly the rows the sequential order gives it (with one thread;
    with several, segments race on shared item rows as before, Hogwild). Same updates, same order; the dot product's
    summation order differs from the loop kernel's (float32 rounding)."""
    literally(D)
    if start >= stop:
        return
    shrink = np.float32(1.0) - eta * lam
    i = np.uint32(users[start])
    j = np.uint32(items[start])
    s = row_dot(U, i, V, j, D)
    for k in range(start, stop):
        if pf > 0 and k + pf < stop:
            prefetch_row(V, items[k + pf])
            prefetch_row(U, users[k + pf])
        e = vals[k] - (s + bu[i] + bi[j] + b0)
        more = k + 1 < stop
        i_next = i
        j_next = j
        s_next = s
        if more:
            i_next = np.uint32(users[k + 1])
            j_next = np.uint32(items[k + 1])
            s_next = row_dot(U, i_next, V, j_next, D)
        sgd_row_step(U, i, V, j, shrink, eta * e, D)
        bu[i] += eta * (e - lamb * bu[i])
        bi[j] += eta * (e - lamb * bi[j])
        if more and (i_next == i or j_next == j):
            s_next = row_dot(U, i_next, V, j_next, D)
        i = i_next
        j = j_next
        s = s_next


@njit(cache=True, fastmath=True, inline="always")
def _sgd_range(users, items, vals, start, stop, U, V, bu, bi, b0, eta, lam, lamb, pf):
    d = U.shape[1]
    if MAX_ROW_LENGTH >= 16 and d == 16:
        _sgd_range_rows(users, items, vals, start, stop, U, V, bu, bi, b0, eta, lam, lamb, pf, 16)
        return
    if MAX_ROW_LENGTH >= 32 and d == 32:
        _sgd_range_rows(users, items, vals, start, stop, U, V, bu, bi, b0, eta, lam, lamb, pf, 32)
        return
    if MAX_ROW_LENGTH >= 64 and d == 64:
        _sgd_range_rows(users, items, vals, start, stop, U, V, bu, bi, b0, eta, lam, lamb, pf, 64)
        return
    if MAX_ROW_LENGTH >= 128 and d == 128:
        _sgd_range_rows(users, items, vals, start, stop, U, V, bu, bi, b0, eta, lam, lamb, pf, 128)
        return
    shrink = np.float32(1.0) - eta * lam
    for k in range(start, stop):
        if pf > 0 and k + pf < stop:
            prefetch_row(V, items[k + pf])
            prefetch_row(U, users[k + pf])
        i = users[k]
        j = items[k]
        s = np.float32(0.0)
        for f in range(d):
            s += U[i, f] * V[j, f]
        e = vals[k] - (s + bu[i] + bi[j] + b0)
        ee = eta * e
        for f in range(d):
            uf = U[i, f]
            vf = V[j, f]
            U[i, f] = shrink * uf + ee * vf
            V[j, f] = shrink * vf + ee * uf
        bu[i] += eta * (e - lamb * bu[i])
        bi[j] += eta * (e - lamb * bi[j])


@njit(cache=True, parallel=True, fastmath=True)
def _sgd_epoch(users, items, vals, seg, U, V, bu, bi, b0, eta, lam, lamb, pf):
    n_seg = seg.shape[0] - 1
    for s in prange(n_seg):
        _sgd_range(users, items, vals, seg[s], seg[s + 1], U, V, bu, bi, b0, eta, lam, lamb, pf)


@njit(cache=True, fastmath=True)
def _sgd_epoch_serial(users, items, vals, seg, U, V, bu, bi, b0, eta, lam, lamb, pf):
    """The same loop without the parallel backend (one thread; used under cachegrind)."""
    for s in range(seg.shape[0] - 1):
        _sgd_range(users, items, vals, seg[s], seg[s + 1], U, V, bu, bi, b0, eta, lam, lamb, pf)


CACHE_LINE = 64


def aligned_copy(a: np.ndarray, align: int = CACHE_LINE) -> np.ndarray:
    """A C-contiguous copy of ``a`` whose data starts on an ``align``-byte boundary. numpy's large allocations
    start 16 bytes past a page boundary here, so with d = 128 every 512-byte factor row straddled 9 cache lines and
    every 64-byte vector load crossed a line; aligned, a row is exactly 8 lines when d·4 is a multiple of 64."""
    buf = np.empty(a.nbytes + align, dtype=np.uint8)
    off = (-buf.ctypes.data) % align
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out
