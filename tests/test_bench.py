"""The bench's ratio records and diagnostics."""

import numpy as np


def test_ratio_met_is_a_json_boolean_for_numpy_values():
    import json

    import numpy as np

    from dpmf_lib.bench import ratio

    r = ratio("x", np.float64(1.6), "<= 1")
    assert r["met"] is False and json.loads(json.dumps(r, default=str))["met"] is False
    assert ratio("y", np.float32(3.5), ">= 3")["met"] is True


def _numba_chunks(n: int, threads: int) -> list:
    """The iterations each numba thread runs in a static ``prange`` over ``n``, as numba schedules them here."""
    import numba
    from numba import njit, prange

    @njit(parallel=True)
    def owner(n):
        out = np.empty(n, np.int64)
        for i in prange(n):
            out[i] = numba.get_thread_id()
        return out

    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        o = owner(n)
    finally:
        numba.set_num_threads(old)
    return [np.flatnonzero(o == t) for t in np.unique(o)]


def test_private_item_layout_gives_each_thread_its_own_item_rows():
    """The thread-scaling diagnostic (#19): under numba's own static split of the segments, no item row is written by
    two threads, and modulo n_items every rating keeps its item."""
    import numba

    from dpmf_lib.bench.mf import private_item_layout
    from dpmf_lib.mf.csgd import make_layout
    from mf_toys import random_ratings

    r = random_ratings(n_users=300, n_items=40, n_ratings=6000, seed=3)
    lay = make_layout(r, "tiered", block_users=20, tiers=(5, 20))
    n_seg = lay.seg.shape[0] - 1
    assert n_seg >= 5 and n_seg % 2 == 1  # an uneven split is exercised
    for threads in (2, 3):
        if threads > numba.config.NUMBA_NUM_THREADS:
            continue
        items, n_tot = private_item_layout(lay, r.n_items, threads)
        assert n_tot == threads * r.n_items
        np.testing.assert_array_equal(items % r.n_items, lay.items)
        chunks = _numba_chunks(n_seg, threads)
        assert all(np.array_equal(c, np.arange(c[0], c[-1] + 1)) for c in chunks)  # contiguous, as assumed
        for c in chunks:
            mine = items[lay.seg[c[0]]:lay.seg[c[-1] + 1]] // r.n_items
            assert np.unique(mine).size == 1  # one thread, one private copy of V
        copies = [np.unique(items[lay.seg[c[0]]:lay.seg[c[-1] + 1]] // r.n_items)[0] for c in chunks]
        assert len(set(copies)) == len(chunks)
    # the original layout does share items between the halves (else the diagnostic would measure nothing)
    half = lay.seg[(n_seg + 1) // 2]
    assert set(lay.items[:half].tolist()) & set(lay.items[half:].tolist())


def test_machine_fma_scaling_is_read_from_the_same_parallel_loop():
    from dpmf_lib.bench.machine import _fma_loop, _fma_loop_threads, fma_scaling

    a, b = np.float32(0.5), np.float32(1.0)
    # each copy runs the single-thread loop: the sum over copies is copies x one loop's value
    assert abs(_fma_loop_threads(40, a, b, 3) - 3 * _fma_loop(40, a, b)) < 1e-2
    assert fma_scaling({"fma_GFLOPs_by_threads": {1: 50.0, 2: 90.0}}) == 1.8
    assert fma_scaling({"fma_GFLOPs": 50.0}) is None


def test_fma_gflops_threads_restores_the_thread_count():
    import numba

    from dpmf_lib.bench.machine import fma_gflops_threads

    before = numba.get_num_threads()
    assert fma_gflops_threads(1, n=1000, repeats=1) > 0
    assert numba.get_num_threads() == before
