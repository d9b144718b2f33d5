"""Multi-thread C-SGD with per-thread copies of the hot item rows ("private hot rows"), beside Hogwild.

:func:`train_sgd` runs C-SGD's user blocks in parallel Hogwild-style: every thread writes the shared item rows. The
top tier's rows (the most-rated items, about half the updates on a Netflix-shaped set) are then written by both
threads all the time, and each write pulls the row's cache lines from the other core, which limits 2-thread scaling.

The scheme here (a reconstruction: the paper parallelises by Hogwild and says no more): for each user block, the
thread that runs it
1. copies the hot rows (internal items ``0 .. n_hot-1`` and their biases) into its own buffer, twice: a working copy
   and the base it started from;
2. runs the block's hot range (the tiered layout puts the top tier first in every block, so it is a prefix of the
   block's ratings) with the C-SGD kernel on its working copy — no other thread writes those rows;
3. adds its change (working copy − base) to the shared hot rows, under a lock, so that no thread's change is lost
   (the copy in step 1 takes no lock and may read rows another thread's merge is changing: each value is read once
   into both copies, so this only adds staleness, and each merge adds only its own change);
4. runs the rest of the block Hogwild on the shared rows (tiers 1.., written rarely by both threads at once).
A hot row thus sees the other threads' updates once per block (a block's top tier is ~27k updates on the quick set)
rather than as they happen: asynchronous SGD with bounded staleness on the top tier, Hogwild on the rest. With one thread
there is nothing to share and ``train_sgd(..., schedule=Schedule(hot_rows="private"))`` runs the Hogwild kernel (same
model, byte for byte); copies would only add float32 rounding ((base + (copy − base)) need not equal copy).

Measured speed-ups and the convergence check are in docs/performance.md (the ``mf`` benchmark reports both schemes).

Use: :func:`dpmf_lib.mf.train_sgd` with ``hot_rows="private"`` (C-SGD's tiered order, at least two tiers). The
default stays ``"shared"`` (Hogwild): it is the paper's scheme, and the experiments keep it.

numba's on-disk cache keys ``_private_hot_epoch`` by this file's source only, yet it inlines
:func:`dpmf_lib.mf.sgd_kernels._sgd_range`: after editing ``sgd_kernels.py`` or ``rowvec.py``, delete
``dpmf_lib/mf/__pycache__`` (the tests' fresh clones start without it).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ..atomics import load_relaxed, try_lock, unlock
from ..errors import ParameterError
from .sgd_kernels import _sgd_range, aligned_copy

MERGES = 8  # lock[MERGES]: the merge counter, a cache line away from the lock word lock[0]


@njit(cache=True)
def _acquire(lock):
    """Spin until this thread holds ``lock[0]``: test, then test-and-set, so that a waiting thread reads the lock's
    line instead of claiming it from the holder on every turn."""
    while True:
        if load_relaxed(lock, 0) == 0 and try_lock(lock, 0):
            return


def check_private_hot_layout(layout) -> None:
    """Private hot rows need C-SGD's tiered layout with at least two tiers (the hot rows are the top one)."""
    if layout.kind != "tiered":
        raise ParameterError(f"hot_rows='private' needs C-SGD's tiered layout (order='tiered'), got a "
                             f"{layout.kind!r} layout")
    if not layout.tier_bounds:
        raise ParameterError(f"hot_rows='private' needs at least two tiers, and this layout has one (its "
                             f"{layout.n_items} items are all in the top tier): lower tiers[0] below the item count, "
                             f"or use hot_rows='shared'")


@njit(cache=True)
def hot_range_ends(items, seg, n_hot):
    """Per segment ``s``: the end of its prefix of items ``< n_hot`` (the hot range). When in some segment an item
    ``< n_hot`` follows a colder one (the hot items are then not a prefix: not a tiered layout cut at ``n_hot``), the
    scan stops at the first such segment ``s`` and ``out[0]`` holds ``-1 - s`` (negative; the rest of ``out`` is then
    not to be read)."""
    n = seg.shape[0] - 1
    out = np.empty(n, np.int64)
    for s in range(n):
        k = seg[s]
        while k < seg[s + 1] and items[k] < n_hot:
            k += 1
        out[s] = k
        for q in range(k, seg[s + 1]):
            if items[q] < n_hot:
                out[0] = -1 - s
                return out
    return out


@njit(cache=True, parallel=True, fastmath=True)
def _private_hot_epoch(users, items, vals, seg, hot_end, U, V, bu, bi, V_work, V_base, b_work, b_base, lock, b0,
                       eta, lam, lamb, pf):
    n_hot = V_work.shape[1]
    d = V.shape[1]
    for s in prange(seg.shape[0] - 1):
        t = numba.get_thread_id()
        Vw = V_work[t]
        Vb = V_base[t]
        bw = b_work[t]
        bb = b_base[t]
        if hot_end[s] > seg[s]:
            for j in range(n_hot):
                for f in range(d):
                    x = V[j, f]
                    Vw[j, f] = x
                    Vb[j, f] = x
                x = bi[j]  # read once: a merge may land between two reads
                bw[j] = x
                bb[j] = x
            _sgd_range(users, items, vals, seg[s], hot_end[s], U, Vw, bu, bw, b0, eta, lam, lamb, pf)
            _acquire(lock)
            for j in range(n_hot):
                for f in range(d):
                    V[j, f] += Vw[j, f] - Vb[j, f]
                bi[j] += bw[j] - bb[j]
            lock[MERGES] += 1  # merges made under the lock (read by the tests)
            unlock(lock, 0)
        _sgd_range(users, items, vals, hot_end[s], seg[s + 1], U, V, bu, bi, b0, eta, lam, lamb, pf)


class HotCopies:
    """The per-thread buffers of C-SGD with private hot rows for one layout, d and thread count: a working copy and a
    base of the ``n_hot`` hottest item rows and biases for each of numba's ``threads`` threads
    (``numba.get_thread_id`` indexes them), the segments' hot-range ends, and ``lock``: the merge lock (``lock[0]``)
    and the number of merges made under it (``lock[MERGES]``). ``n_hot``: a tier boundary of the layout (default:
    the top tier's)."""

    def __init__(self, layout, d: int, n_hot: int | None = None, threads: int | None = None):
        check_private_hot_layout(layout)
        if n_hot is None:
            n_hot = layout.tier_bounds[0]
        if n_hot not in layout.tier_bounds:
            raise ParameterError(f"n_hot must be one of the tiered layout's tier boundaries {layout.tier_bounds} "
                                 f"(only there are the hot items a prefix of every block), got {n_hot!r}")
        n_hot = int(n_hot)
        ends = hot_range_ends(layout.items, layout.seg, np.int64(n_hot))
        if ends.size and ends[0] < 0:
            raise ParameterError(f"the hot items (< {n_hot}) are not a prefix of segment {-1 - ends[0]}: "
                                 f"private hot rows need a tiered layout (make_layout(..., 'tiered'))")
        self.threads = numba.get_num_threads() if threads is None else int(threads)
        self.layout = layout
        self.n_hot = n_hot
        self.hot_end = ends
        shape = (self.threads, n_hot, d)
        self.V_work = aligned_copy(np.zeros(shape, np.float32))
        self.V_base = aligned_copy(np.zeros(shape, np.float32))
        self.b_work = np.zeros(shape[:2], np.float32)
        self.b_base = np.zeros(shape[:2], np.float32)
        self.lock = np.zeros(MERGES + 1, np.int64)

    @property
    def merges(self) -> int:
        return int(self.lock[MERGES])

    def epoch(self, layout, m, eta, lam, lamb, prefetch_stride) -> None:
        """One C-SGD round over ``layout`` (the one these copies were made for) on the internal model ``m`` (item
        rows in the layout's order), in place, with numba's current thread count."""
        if layout is not self.layout or m.V.shape[1] != self.V_work.shape[2] or numba.get_num_threads() > self.threads:
            raise ParameterError(f"these HotCopies were made for another layout, d = {self.V_work.shape[2]} or "
                                 f"{self.threads} threads (now: d = {m.V.shape[1]}, {numba.get_num_threads()} "
                                 f"threads): make HotCopies(layout, d) for this layout, model and thread count")
        _private_hot_epoch(layout.users, layout.items, layout.values, layout.seg, self.hot_end, m.U, m.V, m.bu, m.bi,
                           self.V_work, self.V_base, self.b_work, self.b_base, self.lock, np.float32(m.b0),
                           np.float32(eta), np.float32(lam), np.float32(lamb), np.int64(prefetch_stride))
