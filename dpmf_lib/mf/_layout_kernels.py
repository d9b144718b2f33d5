"""numba kernels of the fast C-SGD layout (:func:`dpmf_lib.mf.layout.tiered_layout`); the definition of the order is
the plain :func:`dpmf_lib.mf.layout.tiered_layout_reference`, and the two are tested equal array for array.

1. ``_user_csr``: stable counting sort of the ratings by user, in ``n_chunks`` contiguous chunks (one per thread):
   a histogram per chunk, offsets user-major then chunk-major (so the result is stable whatever the chunk count),
   then a scatter of the rating's position, item id and value. Parallel over chunks.
2. ``_blocks``: parallel over user blocks. (a) One pass maps the block's items to internal ids (``ri``), their tiers
   (``rt``), counts each user's ratings per tier and each (batch of ``interleave`` users, tier), which fixes where each
   (tier, batch) group starts in the output (tier-major inside the block, batches in user order; batch =
   ``user // interleave`` as in the reference). (b) Per batch and tier, the output slot of a user's ``i``-th rating is
   known from the run lengths alone: the start of round ``i`` (the ratings of the earlier rounds) plus the number of
   the batch's earlier users with more than ``i`` ratings in the tier (``rpos``). (c) Per user, each tier's run is
   shuffled by an inside-out Fisher-Yates written straight into those slots (one counter-based draw per rating, no
   sort); in user-major order (``interleave=1``) the run is sorted by internal item id instead.
   Input already sorted by user (what the loaders and splits give) skips step 1: the runs are read in place.

Design choices (speed, same arrays as the reference): per-batch emit from an L1-sized buffer with every item mapped
once; counting kernels instead of ``np.bincount``/``np.searchsorted`` (one pass, :func:`item_counts_user_ptr`); the
tier of a rating as a branch-free count of the bounds below its item, computed once; the ``order`` output optional
(``with_order``); an inside-out Fisher-Yates with one counter-based draw per rating instead of sorting by random keys
(the same law, every order of the run equally likely, and no sort); the per-rating loops as functions of their own
with unsigned indices (inlined, they spilled registers and paid negative-index wraparound); with ≤ 3 tiers (the
papers' case) the per-tier counters in registers (``_shuffle_runs_few_tiers``: in memory each rating waited for the
store of the one before in its tier). Timings, and what was tried without gain, are in docs/performance.md.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..counter_rng import counter_mix

_LO32 = np.uint64(0xFFFFFFFF)
_NO_BOUND = np.int64(1 << 62)  # a tier bound no internal item id reaches
_S32 = np.uint64(32)


@njit(cache=True, inline="always")
def _draw_index(state, k, m):
    """``floor(x · m / 2⁶⁴)`` for ``x = counter_mix(state, k)``: an index in ``0..m-1`` (``m < 2³²``), exact in
    64-bit integers (32-bit limbs), so every index has probability within ``m / 2⁶⁴`` of ``1 / m``. The numpy twin is
    :func:`dpmf_lib.mf.layout.draw_index_np`."""
    x = counter_mix(state, k)
    mm = np.uint64(m)
    return np.int64(((x >> _S32) * mm + (((x & _LO32) * mm) >> _S32)) >> _S32)


@njit(cache=True, parallel=True)
def _user_csr(users, items, values, n_users, n_chunks):
    n = users.shape[0]
    cnt = np.zeros((n_chunks, n_users), dtype=np.int64)
    for c in prange(n_chunks):
        a = c * n // n_chunks
        b = (c + 1) * n // n_chunks
        for k in range(a, b):
            cnt[c, users[k]] += 1
    ptr = np.empty(n_users + 1, dtype=np.int64)
    tot = 0
    for u in range(n_users):
        ptr[u] = tot
        for c in range(n_chunks):
            x = cnt[c, u]
            cnt[c, u] = tot
            tot += x
    ptr[n_users] = tot
    pos = np.empty(n, dtype=np.int64)
    it = np.empty(n, dtype=np.int32)
    val = np.empty(n, dtype=np.float32)
    for c in prange(n_chunks):
        a = c * n // n_chunks
        b = (c + 1) * n // n_chunks
        for k in range(a, b):
            u = users[k]
            s = cnt[c, u]
            pos[s] = k
            it[s] = items[k]
            val[s] = values[k]
            cnt[c, u] = s + 1
    return ptr, pos, it, val


@njit(cache=True, inline="always")
def _p(pos, ident, x):
    return np.int64(x) if ident else pos[x]


@njit(cache=True, inline="always")
def _tier_of(j, bounds):
    # bounds are strictly increasing, so the tier is the number of bounds ≤ j: a branch-free count (an early-exit
    # loop mispredicts about once per rating, tiers being mixed in every user's run). No
    # `t < n and j >= bounds[t]` condition either: numba's parallel-loop optimiser hoisted bounds[0] out of it, an
    # out-of-bounds read (value unused) on the empty bounds of a single tier that NUMBA_BOUNDSCHECK=1 reports
    t = 0
    for x in range(bounds.shape[0]):
        t += np.int64(j >= bounds[x])
    return t


@njit(cache=True)
def _map_run(a, e, base, it, rank, bounds, ri, rt, counts):
    """Internal item ids and tiers of ratings ``a .. e-1`` (stored at ``k - base``), counted per tier."""
    U = np.uint64  # unsigned indices: no negative-index wraparound code (see _shuffle_runs_into)
    nb = bounds.shape[0]
    if nb <= 2:
        # ≤ 3 tiers (the papers use 3): the counts live in registers. Incrementing counts[t] in memory made each
        # rating wait for the store of the one before in the same tier
        b0 = bounds[0] if nb > 0 else _NO_BOUND
        b1 = bounds[1] if nb > 1 else _NO_BOUND
        above0 = 0
        above1 = 0
        for k in range(a, e):
            r = rank[U(it[U(k)])]
            g0 = np.int64(r >= b0)
            g1 = np.int64(r >= b1)
            ri[U(k - base)] = r
            rt[U(k - base)] = g0 + g1
            above0 += g0
            above1 += g1
        counts[0] += (e - a) - above0
        if nb > 0:
            counts[1] += above0 - above1
        if nb > 1:
            counts[2] += above1
        return
    for k in range(a, e):
        r = rank[U(it[U(k)])]
        t = _tier_of(r, bounds)
        ri[U(k - base)] = r
        rt[U(k - base)] = t
        counts[U(t)] += 1


@njit(cache=True, inline="always")
def _swap_into(u, src_item, src_value, i, j, row, rpos, o_users, o_items, o_values):
    """One inside-out Fisher-Yates step in the output: round ``i``'s slot takes round ``j``'s rating, round ``j``'s
    slot takes the new one (``j == i``: the first write is overwritten). Returns the two slots."""
    U = np.uint64
    pi = U(rpos[U(row + i)])
    pj = U(rpos[U(row + j)])
    o_users[pi] = u
    o_items[pi] = o_items[pj]
    o_values[pi] = o_values[pj]
    o_items[pj] = src_item
    o_values[pj] = src_value
    return pi, pj


@njit(cache=True, inline="always")
def _next_round(t, s0, s1, s2):
    """The round of a rating of tier ``t`` (< 3) and the three tiers' counters after it, all in registers."""
    i = s0 if t == 0 else (s1 if t == 1 else s2)
    return i, s0 + np.int64(t == 0), s1 + np.int64(t == 1), s2 + np.int64(t == 2)


@njit(cache=True)
def _shuffle_runs_few_tiers(u, a, L, base, pos, ident, state, rt, ri, val, rpos, stride, o_users, o_items,
                            o_values):
    """:func:`_shuffle_runs_into` for ≤ 3 tiers without ``order``, the same writes: the per-tier counters in
    registers (in memory, each rating waited for the store of the one before in its tier), and one loop per source
    of the draw's counter (sorted input: the position itself), so that no test of ``ident`` is left in the loop."""
    U = np.uint64
    s0 = 0
    s1 = 0
    s2 = 0
    if ident:
        for k in range(a, a + L):
            t = rt[U(k - base)]
            i, s0, s1, s2 = _next_round(t, s0, s1, s2)
            j = _draw_index(state, k, i + 1)
            _swap_into(u, ri[U(k - base)], val[U(k)], i, j, t * stride, rpos, o_users, o_items, o_values)
    else:
        for k in range(a, a + L):
            t = rt[U(k - base)]
            i, s0, s1, s2 = _next_round(t, s0, s1, s2)
            j = _draw_index(state, pos[U(k)], i + 1)
            _swap_into(u, ri[U(k - base)], val[U(k)], i, j, t * stride, rpos, o_users, o_items, o_values)


@njit(cache=True)
def _shuffle_runs_into(u, a, L, base, pos, ident, state, rt, ri, val, seen, rpos, stride, o_users, o_items,
                       o_values, order, with_order):
    """Inside-out Fisher-Yates of each of user ``u``'s tier runs (its ratings ``a .. a+L-1`` in input order) straight
    into its round-robin slots: the run's ``i``-th rating in tier ``t`` swaps with the uniform slot ``j ≤ i``
    (``rpos[t * stride + i]`` is the slot of round ``i``; ``seen[t]`` counts the tier's ratings so far, zeroed
    here). A function of its own with unsigned indices: inside the block loop this loop spilled most of its
    registers and spent more instructions on negative-index wraparound than on the shuffle. ≤ 3 tiers without
    ``order`` go to :func:`_shuffle_runs_few_tiers`."""
    if seen.shape[0] <= 3 and not with_order:
        _shuffle_runs_few_tiers(u, a, L, base, pos, ident, state, rt, ri, val, rpos, stride, o_users, o_items,
                                o_values)
        return
    U = np.uint64
    seen[:] = 0
    for q in range(L):
        k = a + q
        t = rt[U(k - base)]
        i = seen[U(t)]
        seen[U(t)] = i + 1
        src = _p(pos, ident, k)
        j = _draw_index(state, src, i + 1)
        pi, pj = _swap_into(u, ri[U(k - base)], val[U(k)], i, j, t * stride, rpos, o_users, o_items, o_values)
        if with_order:
            order[pi] = order[pj]
            order[pj] = src


@njit(cache=True, parallel=True)
def _blocks(ptr, pos, ident, it, rank, val, n_users, bounds, block_users, interleave, state, order, o_users, o_items,
            o_values, with_order):
    """Per user block (parallel): (a) the internal item ids and tiers of the block's ratings, each user's run length
    per tier and the rating count of every (batch, tier); (b) per batch and tier, the output slot of round ``i``'s
    first rating (``rpos``); (c) per user, each tier's run shuffled (inside-out Fisher-Yates: rating ``i`` of the run,
    in input order, swaps with a uniform slot ``j ≤ i`` of the user's slots) or, user-major, sorted by item, straight
    into the output. A batch's slots lie close together; the output is written once per rating plus one move per
    swap (its pages first-touched by the thread that fills them)."""
    n_tiers = bounds.shape[0] + 1
    n_blocks = (n_users + block_users - 1) // block_users
    for b in prange(n_blocks):
        u0 = b * block_users
        u1 = min(n_users, u0 + block_users)
        base = ptr[u0]
        nblk = ptr[u1] - base
        b_first = u0 // interleave
        n_batches = (u1 - 1) // interleave - b_first + 1
        # (a) internal item ids (ri), tiers (rt), run lengths per (user, tier), counts per (batch, tier)
        ri = np.empty(nblk, dtype=np.int32)
        rt = np.empty(nblk, dtype=np.int32)
        ulen = np.zeros((u1 - u0, n_tiers), dtype=np.int64)
        cnt = np.zeros(n_batches * n_tiers, dtype=np.int64)
        longest = 0  # the longest run of one user in one tier
        longest_user = 0  # the most ratings of one user
        for u in range(u0, u1):
            a = ptr[u]
            longest_user = max(longest_user, ptr[u + 1] - a)
            _map_run(a, ptr[u + 1], base, it, rank, bounds, ri, rt, ulen[u - u0])
            row = (u // interleave - b_first) * n_tiers
            for t in range(n_tiers):
                cnt[row + t] += ulen[u - u0, t]
                longest = max(longest, ulen[u - u0, t])
        # output offsets: tier-major inside the block, then batch order (cnt becomes the start of each group)
        w = base
        for t in range(n_tiers):
            for x in range(n_batches):
                c = cnt[x * n_tiers + t]
                cnt[x * n_tiers + t] = w
                w += c
        rpos = np.empty(n_tiers * (longest + 1), dtype=np.int64)  # tier t's rounds at t * (longest + 1)
        n_len = np.empty(longest + 1, dtype=np.int64)
        seen = np.empty(n_tiers, dtype=np.int64)
        keys = np.empty(longest_user if interleave == 1 else 0, dtype=np.int64)
        ub = u0
        while ub < u1:
            be = min(u1, (ub // interleave + 1) * interleave)
            xb = ub // interleave - b_first
            # (b) round i of tier t starts after the earlier rounds: Σ over the batch's users of min(run length, i)
            for t in range(n_tiers):
                maxl = 0
                for u in range(ub, be):
                    maxl = max(maxl, ulen[u - u0, t])
                for i in range(maxl + 1):
                    n_len[i] = 0
                for u in range(ub, be):
                    n_len[ulen[u - u0, t]] += 1
                w = cnt[xb * n_tiers + t]
                ended = 0
                for i in range(maxl):
                    ended += n_len[i]  # users whose run is shorter than i + 1
                    rpos[t * (longest + 1) + i] = w
                    w += (be - ub) - ended
            # (c) each user's runs into their slots; rpos[t, i] + 1 is then the next user's slot in round i
            # (rpos[t, i] is stored at rpos[t * (longest + 1) + i])
            for u in range(ub, be):
                a = ptr[u]
                L = ptr[u + 1] - a
                if interleave > 1:
                    _shuffle_runs_into(u, a, L, base, pos, ident, state, rt, ri, val, seen, rpos, longest + 1,
                                       o_users, o_items, o_values, order, with_order)
                else:
                    # user-major: by internal item id (and so by tier), ties in input order (a stable sort)
                    for q in range(L):
                        keys[q] = ri[a - base + q]
                    srt = np.argsort(keys[:L], kind="mergesort")
                    seen[:] = 0
                    for q in range(L):
                        k = a + srt[q]
                        t = rt[k - base]
                        p = rpos[t * (longest + 1) + seen[t]]
                        seen[t] += 1
                        o_users[p] = u
                        o_items[p] = ri[k - base]
                        o_values[p] = val[k]
                        if with_order:
                            order[p] = _p(pos, ident, k)
                for t in range(n_tiers):
                    for i in range(ulen[u - u0, t]):
                        rpos[t * (longest + 1) + i] += 1
            ub = be


def build_tiered(users, items, values, n_users, rank, bounds, block_users, interleave, state, ptr, ident, n_chunks,
                 with_order=True):
    """``(order, users, items, values, seg)`` of the tiered layout (see the module docstring), given ``(ptr, ident)``
    of :func:`item_counts_user_ptr` (the users' run offsets, and whether the input is sorted by user); with
    ``with_order=False`` ``order`` is left empty (length 0) and not written."""
    n = users.shape[0]
    if ident:  # already user-major (loaders and splits keep that order): no scatter needed
        pos, it, val = np.empty(0, dtype=np.int64), items, values
    else:
        ptr, pos, it, val = _user_csr(users, items, values, n_users, n_chunks)
    order = np.empty(n if with_order else 0, dtype=np.int64)
    o_users = np.empty(n, dtype=np.int32)
    o_items = np.empty(n, dtype=np.int32)
    o_values = np.empty(n, dtype=np.float32)
    _blocks(ptr, pos, ident, it, rank, val, n_users, bounds, block_users, interleave, state, order, o_users, o_items,
            o_values, bool(with_order))
    n_blocks = (n_users + block_users - 1) // block_users
    seg = np.ascontiguousarray(ptr[np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * block_users, n_users)])
    return order, o_users, o_items, o_values, seg


@njit(cache=True, parallel=True)
def item_counts_user_ptr(users, items, n_users, n_items, n_chunks):
    """``(counts, ptr, is_sorted)`` in one pass over the ratings, in ``n_chunks`` contiguous chunks (one per thread):
    the ratings per item (int64, ``np.bincount(items, minlength=n_items)``) and, when the ratings are sorted by user,
    the users' run offsets (``ptr = searchsorted(users, arange(n_users + 1))``). A chunk writes ``ptr[u]`` for the
    ids from the one after the user before its first rating up to its last rating's user (ids without ratings
    included), the serial tail those after the last rating's user, so for sorted input every entry is written once.
    Unsorted, ``is_sorted`` is False and the offsets are void (the caller sorts): a chunk writes none after its first
    step down, so those entries stay -1 (writing them on every later step up cost O(n_users) stores per rating of a
    random order). One pass for both because two passes cost nearly twice the time."""
    n = users.shape[0]
    cnt = np.zeros((n_chunks, n_items), dtype=np.int64)
    ptr = np.full(n_users + 1, -1, dtype=np.int64)
    chunk_sorted = np.ones(n_chunks, dtype=np.bool_)
    U = np.uint64  # unsigned indices and the chunk's own row: no wraparound code, no 2-D indexing in the loop
    for c in prange(n_chunks):
        a = c * n // n_chunks
        b = (c + 1) * n // n_chunks
        row = cnt[c]
        prev = np.int64(users[a - 1]) if a > 0 else np.int64(-1)
        k = a
        while k < b:
            row[U(items[U(k)])] += 1
            x = np.int64(users[U(k)])
            k += 1
            if x != prev:  # a new user: about once per 200 ratings on Netflix-shaped data
                if x < prev:
                    chunk_sorted[c] = False
                    break
                for u in range(prev + 1, x + 1):
                    ptr[U(u)] = k - 1
                prev = x
        for q in range(k, b):  # after a step down: count only
            row[U(items[U(q)])] += 1
    last = np.int64(users[n - 1]) if n > 0 else np.int64(-1)
    for u in range(last + 1, n_users + 1):
        ptr[u] = n
    out = np.zeros(n_items, dtype=np.int64)
    for c in range(n_chunks):
        for j in range(n_items):
            out[j] += cnt[c, j]
    return out, ptr, bool(np.all(chunk_sorted))
