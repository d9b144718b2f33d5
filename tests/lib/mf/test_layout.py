"""The fast C-SGD layout (numba counting sorts and shuffles) equals the plain reference (argsorts of packed keys, a
vectorised shuffle) exactly, and both equal a loop-by-loop statement of the order on hand-made and random cases,
including Yahoo!-sized id spaces; the within-run shuffle is uniform (a chi-square test over all orders of a run)."""

import numpy as np
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.counter_rng import counter_mix_np
from dpmf_lib.mf.layout import _seed_state, tiered_layout, tiered_layout_reference
from tests.mf_toys import random_ratings

FIELDS = ("users", "items", "values", "order", "seg", "item_perm", "item_rank")


def _ratings(users, items, n_users, n_items, values=None):
    users = np.asarray(users, np.int32)
    items = np.asarray(items, np.int32)
    values = np.arange(1, len(users) + 1, dtype=np.float32) if values is None else np.asarray(values, np.float32)
    return Ratings(users, items, values, n_users, n_items, (0.0, 1e9), DataSource("toy", False, note="layout toy"))


def assert_same_layout(a, b):
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        np.testing.assert_array_equal(x, y, err_msg=f)
    assert (a.kind, a.tier_bounds, a.block_users, a.n_users, a.n_items) == \
        (b.kind, b.tier_bounds, b.block_users, b.n_users, b.n_items)


def shuffled_run(ks, seed):
    """Inside-out Fisher-Yates of the run ``ks`` (input positions, in input order) written as a loop: the ``i``-th
    rating goes to slot ``j = floor(x · (i + 1) / 2⁶⁴)`` (Python integers: exact), the rating there to slot ``i``,
    with ``x`` the splitmix64 output of (seed, input position)."""
    out = []
    for i, k in enumerate(ks):
        x = int(counter_mix_np(_seed_state(seed), np.uint64(k)))
        j = (x * (i + 1)) >> 64
        out.append(None)
        out[i] = out[j]
        out[j] = k
    return out


def loop_order(r, block_users, tiers, interleave, seed):
    """The order written out as loops: blocks, tiers, batches of users, round-robin over each user's shuffled run."""
    counts = np.bincount(r.items, minlength=r.n_items)
    perm = sorted(range(r.n_items), key=lambda j: (-counts[j], j))
    rank = {j: q for q, j in enumerate(perm)}
    bounds = [b for b in np.cumsum(tiers) if b < r.n_items]
    tier = [sum(rank[int(j)] >= b for b in bounds) for j in r.items]
    out = []
    for b0 in range(0, r.n_users, block_users):
        for t in range(len(bounds) + 1):
            runs = {}
            for u in range(b0, min(b0 + block_users, r.n_users)):
                ks = [k for k in range(r.n_ratings) if r.users[k] == u and tier[k] == t]
                runs[u] = (shuffled_run(ks, seed) if interleave > 1 else
                           sorted(ks, key=lambda k: (rank[int(r.items[k])], k)))
            for batch in sorted({u // interleave for u in runs}):
                us = [u for u in runs if u // interleave == batch]
                for p in range(max(len(runs[u]) for u in us)):
                    out += [runs[u][p] for u in us if p < len(runs[u])]
    return np.array(out, dtype=np.int64)


def test_hand_made_user_major():
    # items 0..3 rated 1, 3, 2, 1 times -> popularity order 1, 2, 0, 3; tiers (1,): tier 0 = {item 1}
    r = _ratings([0, 0, 1, 1, 2, 2, 2, 0], [3, 1, 2, 1, 0, 2, 1, 2], n_users=3, n_items=4)
    for fn in (tiered_layout, tiered_layout_reference):
        lay = fn(r, block_users=2, tiers=(1,), interleave=1)
        np.testing.assert_array_equal(lay.item_perm, [1, 2, 0, 3])
        # block {0, 1}: tier 0 -> user 0 (k=1), user 1 (k=3); tier 1 -> user 0: items 2, 3 (k=7, 0), user 1 (k=2)
        # block {2}: tier 0 -> k=6; tier 1 -> items 2 then 0 (k=5, 4)
        np.testing.assert_array_equal(lay.order, [1, 3, 7, 0, 2, 6, 5, 4])
        np.testing.assert_array_equal(lay.seg, [0, 5, 8])
        np.testing.assert_array_equal(lay.items, [0, 0, 1, 3, 1, 0, 1, 2])
        np.testing.assert_array_equal(lay.values, r.values[lay.order])


def test_hand_made_round_robin():
    # one block, one tier, users 0..2 in one batch of 4: ratings dealt one per user per round
    r = _ratings([0, 0, 0, 1, 2, 2], [0, 1, 2, 0, 1, 2], n_users=3, n_items=3)
    run0, run2 = shuffled_run([0, 1, 2], 7), shuffled_run([4, 5], 7)
    expected = [run0[0], 3, run2[0], run0[1], run2[1], run0[2]]
    for fn in (tiered_layout, tiered_layout_reference):
        lay = fn(r, block_users=10, tiers=(100,), interleave=4, seed=7)
        np.testing.assert_array_equal(lay.order, expected)


@pytest.mark.parametrize("seed", range(4))
def test_fast_equals_reference_and_loops_on_random_cases(seed):
    rng = np.random.default_rng(seed)
    r = random_ratings(n_users=40, n_items=50, n_ratings=500, seed=seed)
    shuffled = r.subset(rng.permutation(r.n_ratings))  # unsorted users: the counting-sort path
    dup = _ratings(np.r_[r.users, r.users[:50]], np.r_[r.items, r.items[:50]], r.n_users + 5, r.n_items + 3)
    for rr in (r, shuffled, dup):
        for il, bu, tiers in [(8, 7, (5, 10)), (1, 7, (5, 10)), (3, 10, (1, 2, 3)), (8, 1000, (500, 4000)),
                              (2, 1, (5,)), (5, 16, (49,))]:
            kw = dict(block_users=bu, tiers=tiers, interleave=il, seed=seed)
            fast = tiered_layout(rr, **kw)
            assert_same_layout(fast, tiered_layout_reference(rr, **kw))
            np.testing.assert_array_equal(fast.order, loop_order(rr, bu, tiers, il, seed))


def test_within_run_order_is_uniform():
    """Every order of a run is equally likely: 24,000 users with 4 ratings each (one tier) give 24,000 independent
    shuffles (distinct input positions), counted over the 24 orders (chi-square); and in 3,000 runs of 50 ratings the
    rating visited first is uniform over the 50. A shuffle that draws j < i (Sattolo's: cycles only, 6 of the 24
    orders) fails, and so does a biased draw (measured on mutants)."""
    from itertools import permutations

    from scipy import stats

    for n_users, L, seed in ((24_000, 4, 11), (3_000, 50, 12)):
        users = np.repeat(np.arange(n_users), L)
        items = np.tile(np.arange(L), n_users)
        r = _ratings(users, items, n_users, L)
        lay = tiered_layout(r, block_users=1000, tiers=(10_000,), interleave=8, seed=seed)
        visit = lay.order.reshape(-1)
        by_user = visit[np.argsort(users[visit], kind="stable")].reshape(n_users, L) % L  # each user's run, in order
        if L == 4:
            index = {p: q for q, p in enumerate(permutations(range(4)))}
            counts = np.bincount([index[tuple(row)] for row in by_user], minlength=24)
            assert counts.min() > 0
        else:
            counts = np.bincount(by_user[:, 0], minlength=L)
        assert stats.chisquare(counts).pvalue > 1e-4, counts


def test_seed_moves_only_the_within_user_order():
    r = random_ratings(n_users=30, n_items=40, n_ratings=300, seed=5)
    a, b = tiered_layout(r, seed=0, block_users=7, tiers=(5, 10)), tiered_layout(r, seed=1, block_users=7,
                                                                                  tiers=(5, 10))
    assert not np.array_equal(a.order, b.order)
    np.testing.assert_array_equal(a.seg, b.seg)
    assert_same_layout(a, tiered_layout(r, seed=0, block_users=7, tiers=(5, 10)))


def test_fast_equals_reference_at_yahoo_scale_ids():
    """Yahoo! Music's id space (1,000,990 users x 624,961 items): the reference needs pack_keys' dense ranking there;
    the fast path needs none, and the two must agree."""
    rng = np.random.default_rng(0)
    n_users, n_items, n = 1_000_990, 624_961, 40_000
    users = rng.integers(0, n_users, n)
    items = np.minimum(rng.zipf(1.3, n) - 1, n_items - 1)
    r = _ratings(users, items, n_users, n_items, rng.integers(1, 6, n))
    for il in (8, 1):
        kw = dict(block_users=1000, tiers=(500, 4000), interleave=il, seed=3)
        assert_same_layout(tiered_layout(r, **kw), tiered_layout_reference(r, **kw))


def test_fast_equals_reference_for_a_run_of_two_million_ratings():
    """A user with > 2²¹ ratings in one run: a shuffle of ~2M steps (draws on up to 2²¹ slots), and a stable
    user-major sort of as many (the sorted-key path before the shuffle had a fallback from 2²¹ on)."""
    rng = np.random.default_rng(1)
    n = (1 << 21) + 100
    users = np.r_[np.zeros(n, np.int64), [1, 1, 2]]
    items = np.r_[rng.integers(0, 3, n), [0, 1, 2]]
    r = _ratings(users, items, 3, 3, np.zeros(len(users)))
    for il in (8, 1):
        kw = dict(block_users=2, tiers=(1,), interleave=il, seed=2)
        assert_same_layout(tiered_layout(r, **kw), tiered_layout_reference(r, **kw))


def test_item_counts_and_run_offsets_equal_numpy():
    """The fast layout's one pass (#19) gives np.bincount's item counts and, for input sorted by user,
    np.searchsorted's run offsets, whatever the chunk count (chunk borders inside a user's run and between users)."""
    from dpmf_lib.mf._layout_kernels import item_counts_user_ptr

    rng = np.random.default_rng(4)
    users = np.sort(rng.integers(0, 50, 300)).astype(np.int32)  # some users without ratings, incl. the last ones
    items = rng.integers(0, 37, 300).astype(np.int32)
    for chunks in (1, 2, 3, 7, 300):
        counts, ptr, ok = item_counts_user_ptr(users, items, 60, 40, chunks)
        assert ok
        np.testing.assert_array_equal(counts, np.bincount(items, minlength=40))
        np.testing.assert_array_equal(ptr, np.searchsorted(users, np.arange(61)))
        shuffled = rng.permutation(300)
        counts, _, ok = item_counts_user_ptr(users[shuffled], items[shuffled], 60, 40, chunks)
        assert not ok
        np.testing.assert_array_equal(counts, np.bincount(items, minlength=40))
    counts, ptr, ok = item_counts_user_ptr(users[:0], items[:0], 3, 2, 1)
    assert ok
    np.testing.assert_array_equal(ptr, [0, 0, 0, 0])
    np.testing.assert_array_equal(counts, [0, 0])
    for bad in ([0, 2, 1], [3, 3, 0], [1, 0]):  # a step down anywhere, not only by more than one
        for chunks in (1, 2):
            assert not item_counts_user_ptr(np.array(bad, np.int32), np.zeros(len(bad), np.int32), 4, 1, chunks)[2]
    for chunks in (1, 2, 3, 5):  # a user without ratings in the middle, a chunk border at every position
        _, ptr, ok = item_counts_user_ptr(np.array([0, 0, 2, 2, 3], np.int32), np.zeros(5, np.int32), 4, 1, chunks)
        assert ok
        np.testing.assert_array_equal(ptr, [0, 2, 2, 4, 5])
    gappy = np.sort(rng.choice(np.r_[3:20, 25:40], 200)).astype(np.int32)  # none for 0-2, 20-24 and 40-44
    for chunks in (1, 2, 4, 9):
        _, ptr, ok = item_counts_user_ptr(gappy, np.zeros(200, np.int32), 45, 1, chunks)
        assert ok
        np.testing.assert_array_equal(ptr, np.searchsorted(gappy, np.arange(46)))


def test_run_offsets_are_not_written_after_a_step_down():
    """Unsorted input: no offsets are written after a chunk's first step down (they stay -1). A first version wrote
    them again on every later step up: O(n_users) stores per rating of a random order, found in review."""
    from dpmf_lib.mf._layout_kernels import item_counts_user_ptr

    counts, ptr, ok = item_counts_user_ptr(np.array([0, 5, 1, 9], np.int32), np.zeros(4, np.int32), 10, 1, 1)
    assert not ok and counts[0] == 4
    np.testing.assert_array_equal(ptr[:6], [0, 1, 1, 1, 1, 1])
    assert np.all(ptr[6:10] == -1)


def test_layout_kernels_stay_in_bounds(tmp_path):
    """#19 review: an 8-byte overflow of a per-batch buffer left every output unchanged, so the equality tests passed;
    NUMBA_BOUNDSCHECK=1 (a fresh compile in a subprocess) turns any out-of-bounds access into an IndexError. Edge
    cases: short last batches, users and whole blocks without ratings, single-user blocks, one tier, empty tiers."""
    import os
    import subprocess
    import sys

    script = r'''
import numpy as np
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.mf._layout_kernels import item_counts_user_ptr
from dpmf_lib.mf.layout import tiered_layout, tiered_layout_reference
rng = np.random.default_rng(0)
def R(u, i, nu, ni):
    return Ratings(np.asarray(u, np.int32), np.asarray(i, np.int32), np.ones(len(u), np.float32), nu, ni, (1.0, 5.0),
                   DataSource("toy", False, note="t"))
cases = [R([0, 0, 1], [0, 1, 1], 2, 2), R(rng.integers(0, 37, 400), rng.integers(0, 50, 400), 45, 80)]
u = rng.integers(0, 20, 300); cases.append(R(u[u % 3 != 0], rng.integers(0, 30, 300)[u % 3 != 0], 29, 30))
for r in cases:
    for bu, tiers, il in [(10, (1000,), 8), (1, (5,), 8), (7, (5, 10), 8), (9, (1, 2, 3), 3), (3, (2, 60), 1000),
                          (12, (5, 10), 1)]:
        a = tiered_layout(r, block_users=bu, tiers=tiers, interleave=il, seed=1)
        b = tiered_layout_reference(r, block_users=bu, tiers=tiers, interleave=il, seed=1)
        assert np.array_equal(a.users, b.users) and np.array_equal(a.items, b.items)  # the build without the order
        assert np.array_equal(a.order, b.order)  # the order, computed on first use
    for chunks in (1, 2, 3, 7):  # the counting pass with chunk borders anywhere (a layout this small uses one)
        for o in (np.arange(len(r.users)), np.argsort(r.users, kind="stable")):
            cnt, ptr, ok = item_counts_user_ptr(r.users[o], r.items[o], r.n_users, r.n_items, chunks)
            assert np.array_equal(cnt, np.bincount(r.items, minlength=r.n_items))
            assert ok == bool(np.all(np.diff(r.users[o]) >= 0))
            if ok:  # case 3 leaves users out at the start, in the middle and at the end
                assert np.array_equal(ptr, np.searchsorted(r.users[o], np.arange(r.n_users + 1)))
    for chunks in (1, 3):
        cnt, ptr, ok = item_counts_user_ptr(np.zeros(0, np.int32), np.zeros(0, np.int32), 4, 2, chunks)
        assert ok and np.array_equal(ptr, np.zeros(5)) and np.array_equal(cnt, np.zeros(2))
print("ok")
'''
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]


def test_order_is_computed_on_first_use_and_pickled_as_an_array():
    """#19: the fast layout does not write ``order`` when built; it is computed (by the same build) when first read,
    then kept. Equal to the reference, and a pickled layout carries the array, not the function."""
    import pickle

    r = random_ratings(n_users=50, n_items=40, n_ratings=500, seed=4)
    r = r.subset(np.random.default_rng(1).permutation(r.n_ratings))  # unsorted input: the scatter path
    for il in (1, 8):
        lay = tiered_layout(r, block_users=7, tiers=(5, 10), interleave=il, seed=2)
        assert callable(lay._order)
        ref = tiered_layout_reference(r, block_users=7, tiers=(5, 10), interleave=il, seed=2)
        for name in ("users", "items", "values", "seg"):
            np.testing.assert_array_equal(getattr(lay, name), getattr(ref, name))
        back = pickle.loads(pickle.dumps(lay))
        assert isinstance(back._order, np.ndarray) and back._order.dtype == np.int64
        np.testing.assert_array_equal(back.order, ref.order)
        first = lay.order
        assert lay.order is first and first.dtype == np.int64
        np.testing.assert_array_equal(first, ref.order)


def test_kernel_draw_is_exact_for_large_run_lengths():
    """``_draw_index`` (numba) and ``draw_index_np`` both equal ``floor(x · m / 2⁶⁴)`` in Python integers up to
    m = 2³² − 1. A draw that drops the low limb, or multiplies in float64, agrees with it for small m and fails here
    (#19 review: the tests had used m ≤ 1,000)."""
    from numba import njit

    from dpmf_lib.mf._layout_kernels import _draw_index
    from dpmf_lib.mf.layout import draw_index_np

    @njit
    def draws(state, ks, ms):
        out = np.empty(ks.shape[0], dtype=np.int64)
        for q in range(ks.shape[0]):
            out[q] = _draw_index(state, ks[q], ms[q])
        return out

    rng = np.random.default_rng(5)
    ks = rng.integers(0, 2 ** 40, 20_000)
    ms = np.r_[rng.integers(1, 2 ** 32, 19_990), 2 ** 32 - 1, 2 ** 31, 2 ** 31 + 1, 1, 2, 3, 2 ** 21, 7, 2 ** 32 - 2,
               10 ** 9]
    x = counter_mix_np(_seed_state(9), ks.astype(np.uint64))
    exact = np.array([(int(a) * int(b)) >> 64 for a, b in zip(x, ms)], dtype=np.int64)
    np.testing.assert_array_equal(draws(_seed_state(9), ks, ms), exact)
    np.testing.assert_array_equal(draw_index_np(9, ks, ms), exact)
    assert np.all((exact >= 0) & (exact < ms))
