"""The bench's ratio records and diagnostics."""

import numpy as np


def test_ratio_met_is_a_json_boolean_for_numpy_values():
    import json

    import numpy as np

    from dpmf_lib.bench import ratio

    r = ratio("x", np.float64(1.6), "<= 1")
    assert r["met"] is False and json.loads(json.dumps(r, default=str))["met"] is False
    assert ratio("y", np.float32(3.5), ">= 3")["met"] is True


def test_private_item_layout_gives_each_thread_its_own_item_rows():
    """The thread-scaling diagnostic (#19): under numba's static split of the segments into contiguous halves, no
    item row is written by both threads, and modulo n_items every rating keeps its item."""
    from dpmf_lib.bench.mf import private_item_layout
    from dpmf_lib.mf.csgd import make_layout
    from mf_toys import random_ratings

    r = random_ratings(n_users=300, n_items=40, n_ratings=6000, seed=3)
    lay = make_layout(r, "tiered", block_users=20, tiers=(5, 20))
    n_seg = lay.seg.shape[0] - 1
    assert n_seg >= 3  # an odd/even split is exercised below only with several segments
    items, n_tot = private_item_layout(lay, r.n_items, 2)
    assert n_tot == 2 * r.n_items
    np.testing.assert_array_equal(items % r.n_items, lay.items)
    split = lay.seg[(n_seg + 1) // 2]  # the first thread's share: ceil(n_seg / 2) segments
    assert items[:split].max() < r.n_items <= items[split:].min()
    # the original layout does share items between the halves (else the diagnostic would measure nothing)
    assert set(lay.items[:split].tolist()) & set(lay.items[split:].tolist())


def test_machine_fma_scaling_is_read_from_the_same_parallel_loop():
    from dpmf_lib.bench.machine import _fma_loop, _fma_loop_threads, fma_scaling

    a, b = np.float32(0.5), np.float32(1.0)
    # each copy runs the single-thread loop: the sum over copies is copies x one loop's value
    assert abs(_fma_loop_threads(40, a, b, 3) - 3 * _fma_loop(40, a, b)) < 1e-2
    assert fma_scaling({"fma_GFLOPs_by_threads": {1: 50.0, 2: 90.0}}) == 1.8
    assert fma_scaling({"fma_GFLOPs": 50.0}) is None
