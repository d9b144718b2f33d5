"""Orders in which the SGD/SGLD kernels visit ratings.

``tiered_layout`` (C-SGD, Liu et al. 2015 Sections 5.1–5.2): items are renumbered by popularity (most-rated first) and
cut into tiers (default: top 500, next 4,000, the rest). Users are cut into blocks of ``block_users`` consecutive ids
(~1,000). Ratings are grouped by (block, tier): within a block, all of the block's users are run through the top tier
first (so the popular item vectors stay hot and the block's user vectors stay in cache), then the next tier, and so on.
Inside a (block, tier) group the order is either user-major (``interleave=1``: user, then item) or, by default
(``interleave=8``), round-robin within batches of 8 consecutive users (a random rating of each, then another, ...) —
one reading of the paper's "within each block, we process a batch of users simultaneously". Why: in user-major
order consecutive updates hit the same u_i and each waits for the previous one's stores, which made C-SGD slower than
a random order at small d (the ``mf`` benchmark reports both as ``csgd`` and ``csgd_usermajor``). A block is the unit
of parallel work (``prange``), item vectors are shared Hogwild-style.
Reconstruction choice (the paper does not fix the loop nest): tiers are the middle loop inside each user block rather
than a global outer loop, so a thread keeps its users in cache across tiers and needs no barrier between tiers.

Building it: ``tiered_layout`` uses O(n) counting sorts in numba (:mod:`dpmf_lib.mf._layout_kernels`, parallel
over user blocks); ``tiered_layout_reference`` is the plain argsort definition, and the tests check the two equal array
for array. The random order of a user's ratings inside a tier is an inside-out Fisher-Yates shuffle of the run (in
input order) with one counter-based draw per rating (:func:`draw_index_np`: splitmix64 of (seed, input position)),
because a global permutation or a sort by random keys cost as much as several SGD epochs. Every order of a run is
equally likely.

``naive_layout``: one random permutation of all ratings (seeded), original item ids, cut into ``n_chunks`` contiguous
chunks for ``prange`` (Hogwild on users and items).

Both give ``seg``: segment ``s`` is ratings ``seg[s]:seg[s+1]``, processed sequentially; with one thread segments run in
order, so the visiting order is exactly the stored order (what the reference implementation replays).

For SGLD the layout gives the lazy-noise counters (Section 5.4). The kernel reads :func:`noise_ahead_counters`:
``ahead_u[k]`` / ``ahead_v[k]`` is the number of steps from the touch at position ``k``
(exclusive) to the next touch of the same user / item vector in the sequential visiting order (inclusive), or to the
round's end after its last touch, and ``first_u`` / ``first_v`` the steps up to and including each vector's first touch
(added before the round). Because the visiting order is the same every round they are evaluated once; the kernel reads
``ahead`` from the rating stream, which keeps it exact and race-free under Hogwild. Every vector thus gets exactly N
steps' worth of noise variance per round. The tests' oracle ``lazy_counters`` (``tests/mf_toys.py``) is the same
information the other way round (``gap``: steps since the previous touch, ``flush``: steps left after the last).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..counter_rng import counter_mix_np, splitmix_np
from ..data.ratings import require_ratings
from ..errors import ParameterError


@dataclass(frozen=True)
class Layout:
    kind: str  # "tiered" | "naive"
    users: np.ndarray  # int32
    items: np.ndarray  # int32, internal item ids
    values: np.ndarray  # float32
    _order: object  # the int64 ``order`` array, or a function computing it on first use (see ``order``)
    seg: np.ndarray  # int64 segment offsets
    item_perm: np.ndarray  # int32: internal id -> Ratings item id
    item_rank: np.ndarray  # int32: Ratings item id -> internal id
    n_users: int
    n_items: int
    tier_bounds: tuple  # internal-id tier boundaries (tiered) or ()
    block_users: int

    @property
    def order(self) -> np.ndarray:
        """int64: position in the input Ratings of each stored rating. The fast tiered layout computes it on first use
        (only SGLD's per-rating weights and the tests read it, and not writing its 8 bytes per rating makes the
        layout build noticeably cheaper)."""
        o = self._order
        if callable(o):
            o = o()
            object.__setattr__(self, "_order", o)
        return o

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_order"] = self.order  # pickle the array, never the function
        return state

    @property
    def n_ratings(self) -> int:
        return len(self.values)

    def to_internal_items(self, items: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(self.item_rank[items], dtype=np.int32)

    def noise_ahead_counters(self):
        """``(ahead_u, ahead_v, first_u, first_v)`` (int32/int64): what the SGLD kernel reads (see
        :func:`noise_ahead_counters`)."""
        return noise_ahead_counters(self.users, self.items, self.n_users, self.n_items)


_INT64_LIMIT = 2 ** 63


def _dense_rank(key: np.ndarray) -> tuple[np.ndarray, int]:
    uniq, inv = np.unique(key, return_inverse=True)
    return inv.astype(np.int64), len(uniq)


def pack_keys(*parts: tuple[np.ndarray, int]) -> np.ndarray:
    """One int64 sort key equivalent to sorting by ``parts`` lexicographically (most significant first).

    Each part is ``(values, bound)`` with ``0 <= values < bound``. The mixed-radix product of the bounds overflows int64
    at Yahoo! Music's shape (1,000,990 users × 624,961 items: ~1.9·10²¹ for the interleave key), which silently garbled
    the C-SGD order; where the next product would overflow, the key built so far (and, if needed, the next part) is
    replaced by its dense rank — order-preserving, and never more than the number of ratings — so one argsort still
    does the job and no product can overflow.
    """
    key, bound = parts[0][0].astype(np.int64), int(parts[0][1])
    for values, b in parts[1:]:
        values, b = values.astype(np.int64), int(b)
        if bound * b >= _INT64_LIMIT:
            key, bound = _dense_rank(key)
            if bound * b >= _INT64_LIMIT:
                values, b = _dense_rank(values)
        key = key * np.int64(b) + values
        bound *= b
    return key


def _check_ratings(r):
    require_ratings(r, "r", "the training layout")


def _check_tiered_args(r, block_users, tiers, interleave):
    _check_ratings(r)
    if not isinstance(block_users, (int, np.integer)) or block_users < 1:
        raise ParameterError(f"block_users must be a positive integer, got {block_users!r}")
    tiers = tuple(int(t) for t in tiers)
    if any(t < 1 for t in tiers):
        raise ParameterError(f"tiers must be positive tier sizes (e.g. [500, 4000]), got {tiers!r}")
    if not isinstance(interleave, (int, np.integer)) or interleave < 1:
        raise ParameterError(f"interleave must be a positive integer (1 = user-major), got {interleave!r}")
    return tiers


def _item_ranking(counts: np.ndarray, n_items: int, tiers):
    """``(perm, rank, bounds)`` from the ratings per item: items by popularity (most-rated first, ties by id),
    internal id -> original, original -> internal, and the internal-id tier boundaries."""
    perm = np.argsort(-counts, kind="stable").astype(np.int32)  # internal -> original
    rank = np.empty(n_items, dtype=np.int32)
    rank[perm] = np.arange(n_items, dtype=np.int32)
    bounds = np.cumsum(tiers)
    bounds = bounds[bounds < n_items]
    return perm, rank, bounds.astype(np.int64)


def draw_index_np(seed: int, positions: np.ndarray, m: np.ndarray) -> np.ndarray:
    """The layout's shuffle draw for the rating at input position ``positions[q]``: an index in ``0..m[q]-1`` (int64),
    ``floor(x · m / 2⁶⁴)`` with ``x`` the splitmix64 output of ``(seed, position)`` (``m < 2³²``). Counter-based, so
    any subset of positions can be drawn independently (in parallel, in any order) — what the fast layout needs; a
    ``default_rng(seed).permutation(n)`` alone costs ~3 epochs of SGD at 20M ratings and is inherently serial. Each
    index has probability within ``m / 2⁶⁴`` of ``1 / m``. Computed in 32-bit limbs so the product never leaves uint64:
    the same arithmetic as the numba kernel's ``_draw_index``."""
    x = counter_mix_np(_seed_state(seed), np.asarray(positions, dtype=np.int64).astype(np.uint64))
    mm = np.asarray(m, dtype=np.int64).astype(np.uint64)
    lo32, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)
    return (((x >> s32) * mm + (((x & lo32) * mm) >> s32)) >> s32).astype(np.int64)


def _shuffle_runs(elements: np.ndarray, start: np.ndarray, run_len: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Inside-out Fisher-Yates of every run ``elements[start[r]:start[r] + run_len[r]]`` at once: at step ``i`` every
    run longer than ``i`` puts its ``i``-th element at slot ``j = draws[start + i]`` (``0 ≤ j ≤ i``) and the element
    that was there at slot ``i``. Uniform over the run's orders when each ``j`` is uniform on ``0..i``."""
    out = np.empty_like(elements)
    by_len = np.argsort(-run_len, kind="stable")
    sorted_len = run_len[by_len]
    for i in range(int(sorted_len[0]) if len(sorted_len) else 0):
        active = by_len[:np.searchsorted(-sorted_len, -i, side="left")]  # the runs longer than i (longest first)
        slot_i = start[active] + i
        slot_j = start[active] + draws[slot_i]
        out[slot_i] = out[slot_j]
        out[slot_j] = elements[slot_i]
    return out


def tiered_layout_reference(r, *, block_users: int = 1000, tiers=(500, 4000), interleave: int = 8,
                            seed: int = 0) -> Layout:
    """The plain numpy definition of the C-SGD order (argsorts of packed int64 keys and a vectorised shuffle);
    :func:`tiered_layout` computes the same arrays in O(n) with numba (a counting sort by user, shuffles straight
    into precomputed slots), and the tests check that they are equal exactly.

    Order: stable by (block, tier, user, item) for ``interleave=1``; for ``interleave > 1`` by
    (block, tier, user-batch, position in the user's shuffled run, user), where a user's run inside a tier (its
    ratings in input order) is shuffled by an inside-out Fisher-Yates whose ``i``-th step draws
    :func:`draw_index_np` ``(seed, input position, i + 1)``."""
    tiers = _check_tiered_args(r, block_users, tiers, interleave)
    perm, rank, bounds = _item_ranking(np.bincount(r.items, minlength=r.n_items), r.n_items, tiers)
    items = rank[r.items]
    tier = np.searchsorted(bounds, items, side="right").astype(np.int64)
    n_tiers = len(bounds) + 1
    block = (r.users // block_users).astype(np.int64)
    n_blocks = int((r.n_users + block_users - 1) // block_users)
    # one int64 key (block, tier, user, item) and a single argsort: ~5x faster than a 4-key lexsort
    group = block * n_tiers + tier
    n_groups = n_blocks * n_tiers
    users = r.users.astype(np.int64)
    if interleave == 1:
        order = np.argsort(pack_keys((group, n_groups), (users, r.n_users), (items, r.n_items)), kind="stable")
    else:
        # round-robin within batches of ``interleave`` consecutive users of the group: a random rating of each of
        # the batch's users, then another, ... Consecutive updates touch different u_i, so they do not wait on each
        # other's stores. Small batches on purpose: round-robin over a whole block puts only the heaviest users at the
        # end of every round, which biased the item vectors and cost ~0.2 test RMSE on ML-100K (measured).
        # Each user's run in a tier is shuffled (uniformly: every order equally likely), then dealt round-robin.
        n = len(users)
        order = np.argsort(pack_keys((group, n_groups), (users, r.n_users)), kind="stable")
        g_o, u_o = group[order], users[order]
        start = np.r_[0, np.flatnonzero((g_o[1:] != g_o[:-1]) | (u_o[1:] != u_o[:-1])) + 1]
        run_len = np.diff(np.r_[start, n])
        pos_in_user = np.arange(n) - np.repeat(start, run_len)
        order = _shuffle_runs(order, start, run_len, draw_index_np(seed, order, pos_in_user + 1))
        batch = u_o // int(interleave)
        key2 = pack_keys((g_o, n_groups), (batch, r.n_users // int(interleave) + 1), (pos_in_user, n),
                         (u_o, r.n_users))
        order = order[np.argsort(key2, kind="stable")]
    seg_counts = np.bincount(block, minlength=n_blocks)
    seg = np.zeros(n_blocks + 1, dtype=np.int64)
    np.cumsum(seg_counts, out=seg[1:])
    return Layout("tiered", np.ascontiguousarray(r.users[order]), np.ascontiguousarray(items[order]),
                  np.ascontiguousarray(r.values[order]), order.astype(np.int64), seg, perm, rank, r.n_users, r.n_items,
                  tuple(int(b) for b in bounds) if n_tiers > 1 else (), int(block_users))


def tiered_layout(r, *, block_users: int = 1000, tiers=(500, 4000), interleave: int = 8, seed: int = 0) -> Layout:
    """The C-SGD layout (order defined by :func:`tiered_layout_reference`), built in O(n) with numba: a parallel
    counting sort of the ratings by user (stable), then per user block in parallel: each user's tier runs shuffled
    (or, user-major, sorted by internal item id) straight into their round-robin slots of the batches of
    ``interleave`` users. Equal to the reference array for array (``tests/lib/mf/test_layout.py``)."""
    import numba

    from ._layout_kernels import build_tiered, item_counts_user_ptr

    tiers = _check_tiered_args(r, block_users, tiers, interleave)
    in_users = np.ascontiguousarray(r.users, dtype=np.int32)
    in_items = np.ascontiguousarray(r.items, dtype=np.int32)
    n_chunks = max(1, min(numba.get_num_threads(), r.n_ratings // 65536 + 1))
    counts, ptr, ident = item_counts_user_ptr(in_users, in_items, int(r.n_users), int(r.n_items), int(n_chunks))
    perm, rank, bounds = _item_ranking(counts, r.n_items, tiers)
    n_tiers = len(bounds) + 1
    args = (in_users, in_items, np.ascontiguousarray(r.values, dtype=np.float32), int(r.n_users), rank, bounds,
            int(block_users), int(interleave), _seed_state(seed), ptr, bool(ident))
    _, users, items, values, seg = build_tiered(*args, int(n_chunks), with_order=False)
    return Layout("tiered", users, items, values, functools.partial(_tiered_order, args), seg, perm, rank, r.n_users,
                  r.n_items, tuple(int(b) for b in bounds) if n_tiers > 1 else (), int(block_users))


def _tiered_order(args) -> np.ndarray:
    """``Layout.order`` of :func:`tiered_layout`, computed when first read: the same build again, writing the order
    (the arrays do not depend on the chunk or thread count)."""
    import numba

    from ._layout_kernels import build_tiered

    n_chunks = max(1, min(numba.get_num_threads(), len(args[0]) // 65536 + 1))
    return build_tiered(*args, int(n_chunks), with_order=True)[0]


def _seed_state(seed: int) -> np.uint64:
    """The first output of the splitmix64 generator seeded with ``seed``: the key of :func:`draw_index_np`."""
    return splitmix_np(seed, 1)[0]


def naive_layout(r, *, seed: int = 0, n_chunks: int = 256) -> Layout:
    _check_ratings(r)
    order = np.random.default_rng(seed).permutation(r.n_ratings).astype(np.int64)
    n_chunks = int(max(1, min(n_chunks, r.n_ratings)))
    seg = np.linspace(0, r.n_ratings, n_chunks + 1).astype(np.int64)
    ident = np.arange(r.n_items, dtype=np.int32)
    return Layout("naive", np.ascontiguousarray(r.users[order]), np.ascontiguousarray(r.items[order]),
                  np.ascontiguousarray(r.values[order]), order, seg, ident, ident, r.n_users, r.n_items, (), 0)


def noise_ahead_counters(users: np.ndarray, items: np.ndarray, n_users: int, n_items: int):
    """The lazy-noise counters read the other way round ("noise ahead", see :mod:`dpmf_lib.mf.sgld`).

    ``ahead_u[k]``: the steps from the touch of user ``users[k]`` at position ``k`` (exclusive) to its next touch
    (inclusive) — the next touch's ``gap_u`` — or to the end of the round (``n − 1 − k``) after its last touch;
    ``first_u[i]``: the steps up to and including user ``i``'s first touch (its first ``gap_u``; 0 without ratings).
    Likewise for items. Each rated vector's ``first`` plus its ``ahead`` counts is the round length ``n``."""
    n = len(users)
    pos = np.arange(n, dtype=np.int64)

    def ahead(ids, n_ids):
        o = np.lexsort((pos, ids))  # positions grouped by id, in visiting order
        ids_s = ids[o]
        same_next = np.r_[ids_s[1:] == ids_s[:-1], False]
        nxt = np.empty(n, dtype=np.int64)
        nxt[:-1] = o[1:]
        out = np.empty(n, dtype=np.int64)
        out[o] = np.where(same_next, nxt - o, n - 1 - o)
        first = np.zeros(n_ids, dtype=np.int64)
        starts = np.r_[True, ~same_next[:-1]] if n else np.zeros(0, dtype=bool)
        first[ids_s[starts]] = o[starts] + 1
        return np.ascontiguousarray(out.astype(np.int32)), first

    au, fu = ahead(users, n_users)
    av, fv = ahead(items, n_items)
    return au, av, fu, fv
