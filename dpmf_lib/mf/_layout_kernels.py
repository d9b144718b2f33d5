"""numba kernels of the fast C-SGD layout (:func:`dpmf_lib.mf.layout.tiered_layout`); the definition of the order is
the plain :func:`dpmf_lib.mf.layout.tiered_layout_reference`, and the two are tested equal array for array.

1. ``_user_csr``: stable counting sort of the ratings by user, in ``n_chunks`` contiguous chunks (one per thread):
   a histogram per chunk, offsets user-major then chunk-major (so the result is stable whatever the chunk count),
   then a scatter of the rating's position, item id and value. Parallel over chunks.
2. ``_blocks``: parallel over user blocks. (a) One pass maps the block's items to internal ids (``ri``) and counts
   the ratings of every (batch of ``interleave`` users, tier), which fixes where each (tier, batch) group starts in the
   output (tier-major inside the block, batches in user order; batch = ``user // interleave`` as in the reference).
   (b) Per batch: each user's run is ordered by (tier, key, position) into a small batch buffer — key = the
   counter-based random key when interleaving (a counting sort on (tier, top key bits) into ~L/2 buckets per tier,
   then an insertion sort: O(L) expected), or the internal item id for user-major order (a sort of
   ``key << 21 | local position``); runs of 2²¹ ratings or more use a stable argsort of the key — and emitted straight
   into the output, tier by tier, round-robin over the batch's users.
   Input already sorted by user (what the loaders and splits give) skips step 1: the runs are read in place.

#19 (second pass): the first version sorted a whole block's runs into block-sized buffers (16 bytes per rating
written and read back) and looked every item's rank up three times; emitting per batch from an L1-sized buffer and
mapping items once made ``_blocks`` ~1.9x faster (same process, same arrays), and ``item_counts`` / ``_sorted_ptr``
replace ``np.bincount`` (which copied the 21M item ids to int64) and ``np.searchsorted``. The arrays are unchanged
(tests/test_mf_layout.py: equal to the reference and to the loop statement).

#19 (seventh session, same arrays): the tier of a rating is a branch-free count of the bounds below its item (the
early-exit loop mispredicted about once per rating) and is computed once in step (a) and stored (the run sorts looked
it up again); the round-robin emit compacts its active-user list only after a round in which a run ended; and the
``order`` output is optional (``with_order``): :func:`~dpmf_lib.mf.layout.tiered_layout` builds without it and
computes it on first use. Same-process A/B on the 21.1M-rating set (1 thread, process CPU time, machine shared):
``_blocks`` 0.56-0.62 s -> 0.44-0.47 s before dropping ``order``; per phase 0.11 -> 0.08 s (item ids and counts),
0.26 -> 0.17 s (run sorts), the emit ~0.2 s.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..counter_rng import counter_mix

_LOCAL_BITS = 21
_LOCAL_MASK = (1 << _LOCAL_BITS) - 1
_SKEY = np.uint64(64 - 42)  # RANDOM_KEY_BITS = 42 in layout.py


@njit(cache=True, inline="always")
def _random_key(state, k):
    """The top 42 bits of :func:`~dpmf_lib.counter_rng.counter_mix` ``(state, k)`` (= layout.random_keys)."""
    return np.int64(counter_mix(state, k) >> _SKEY)


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


@njit(cache=True, parallel=True)
def _is_sorted(users, n_chunks):
    n = users.shape[0]
    bad = np.zeros(n_chunks, dtype=np.int64)
    for c in prange(n_chunks):
        a = max(1, c * n // n_chunks)
        b = (c + 1) * n // n_chunks
        for k in range(a, b):
            if users[k] < users[k - 1]:
                bad[c] = 1
                break
    return bad.sum() == 0


@njit(cache=True, inline="always")
def _p(pos, ident, x):
    return np.int64(x) if ident else pos[x]


@njit(cache=True, inline="always")
def _tier_of(j, bounds):
    # bounds are strictly increasing, so the tier is the number of bounds ≤ j: a branch-free count (#19, seventh
    # session: the early-exit loop mispredicted about once per rating, tiers being mixed in every user's run). No
    # `t < n and j >= bounds[t]` condition either: numba's parallel-loop optimiser hoisted bounds[0] out of it, an
    # out-of-bounds read (value unused) on the empty bounds of a single tier that NUMBA_BOUNDSCHECK=1 reports
    t = 0
    for x in range(bounds.shape[0]):
        t += np.int64(j >= bounds[x])
    return t


@njit(cache=True, inline="always")
def _bucket_sort_run(a, L, pos, ident, rt, rb, n_tiers, state, keys, tiers_q, bcnt, cc, tb):
    """Sort positions ``0..L-1`` of the run at ``a`` by (tier, random key, position): the keys are uniform, so a
    counting sort on (tier, top bits of the key) into ~L/2 buckets per tier and an insertion sort inside each tier
    (expected O(1) moves per element: moves stay inside a bucket) give the exact order in O(L).
    ``rt[rb + q]`` is the tier of rating ``a + q``.
    Result: ``cc[q] = key << 21 | position``; tier t holds ``cc[tb[t]:tb[t + 1]]``."""
    lb = 0
    while (2 << lb) < L:  # ~L/2 buckets per tier (measured: a little faster than ~L; the result is the same)
        lb += 1
    shift = 42 - lb
    B = 1 << lb
    nb = n_tiers * B
    for j in range(nb + 1):
        bcnt[j] = 0
    for q in range(L):
        kq = _random_key(state, _p(pos, ident, a + q))
        t = rt[rb + q]
        keys[q] = kq << _LOCAL_BITS | q
        bk = t * B + (kq >> shift)
        tiers_q[q] = bk
        bcnt[bk + 1] += 1
    for j in range(nb):
        bcnt[j + 1] += bcnt[j]
    for t in range(n_tiers):
        tb[t] = bcnt[t * B]
    tb[n_tiers] = L
    for q in range(L):
        bk = tiers_q[q]
        dst = bcnt[bk]
        bcnt[bk] = dst + 1
        cc[dst] = keys[q]
    for t in range(n_tiers):
        lo = tb[t]
        for q in range(lo + 1, tb[t + 1]):
            c = cc[q]
            j = q - 1
            while j >= lo and cc[j] > c:
                cc[j + 1] = cc[j]
                j -= 1
            cc[j + 1] = c


@njit(cache=True)
def _sorted_run_general(a, L, pos, ident, ri, rt, rb, n_tiers, interleave, state, keys, cc, tb):
    """The other cases of a run's order (user-major, or a run of 2²¹ ratings or more): sort by key (internal item id,
    or the random key), ties by position, then split stably by tier. Result: ``cc[q]`` = position in the run (plain,
    no key bits); tier t holds ``cc[tb[t]:tb[t + 1]]``."""
    for t in range(n_tiers + 1):
        tb[t] = 0
    for q in range(L):
        if interleave > 1:
            kq = _random_key(state, _p(pos, ident, a + q))
        else:
            kq = np.int64(ri[rb + q])
        tb[rt[rb + q] + 1] += 1
        keys[q] = kq << _LOCAL_BITS | q if L <= _LOCAL_MASK else kq
    for t in range(n_tiers):
        tb[t + 1] += tb[t]
    srt = np.empty(L, dtype=np.int64)
    if L <= _LOCAL_MASK:
        ks = np.sort(keys[:L])
        for q in range(L):
            srt[q] = ks[q] & _LOCAL_MASK
    else:
        srt = np.argsort(keys[:L], kind="mergesort")
    tcur = tb[:n_tiers].copy()
    for q in range(L):
        src = srt[q]
        t = rt[rb + src]
        cc[tcur[t]] = src
        tcur[t] += 1


@njit(cache=True, parallel=True)
def _blocks(ptr, pos, ident, it, rank, val, n_users, bounds, block_users, interleave, state, order, o_users, o_items,
            o_values, with_order):
    """Per user block (parallel): (1) the internal item ids of the block's ratings and the rating count of every
    (batch, tier); (2) per batch of ``interleave`` users: each user's run sorted by (tier, key, position) into a
    small batch buffer, then emitted straight into the output tier by tier, round-robin over the batch's users, at the
    offset of the (tier, batch) group inside the block. A batch's buffers stay in L1/L2; the output is written once
    (its pages first-touched by the thread that fills them)."""
    n_tiers = bounds.shape[0] + 1
    n_blocks = (n_users + block_users - 1) // block_users
    for b in prange(n_blocks):
        u0 = b * block_users
        u1 = min(n_users, u0 + block_users)
        base = ptr[u0]
        nblk = ptr[u1] - base
        b_first = u0 // interleave
        n_batches = (u1 - 1) // interleave - b_first + 1
        # 1. internal item ids (ri) and counts per (batch, tier); the longest run and the largest batch
        ri = np.empty(nblk, dtype=np.int32)
        rt = np.empty(nblk, dtype=np.int32)  # and their tiers (computed once, read by the run sorts)
        cnt = np.zeros(n_batches * n_tiers, dtype=np.int64)
        longest = 0
        for u in range(u0, u1):
            a = ptr[u]
            L = ptr[u + 1] - a
            longest = max(longest, L)
            row = (u // interleave - b_first) * n_tiers
            for k in range(a, a + L):
                r = rank[it[k]]
                t = _tier_of(r, bounds)
                ri[k - base] = r
                rt[k - base] = t
                cnt[row + t] += 1
        biggest = 0
        for x in range(n_batches):
            tot = 0
            for t in range(n_tiers):
                tot += cnt[x * n_tiers + t]
            biggest = max(biggest, tot)
        # output offsets: tier-major inside the block, then batch order (cnt becomes the start of each group)
        w = base
        for t in range(n_tiers):
            for x in range(n_batches):
                c = cnt[x * n_tiers + t]
                cnt[x * n_tiers + t] = w
                w += c
        keys = np.empty(longest, dtype=np.int64)
        tiers_q = np.empty(longest, dtype=np.int64)
        nb = 1
        while nb < longest:
            nb *= 2
        bcnt = np.empty(n_tiers * nb + 1, dtype=np.int64)
        bbuf = np.empty(biggest, dtype=np.int64)  # the batch's sorted runs
        bts = np.empty((interleave, n_tiers + 1), dtype=np.int64)  # per batch user: tier starts in its run
        boff = np.empty(interleave, dtype=np.int64)
        bmask = np.empty(interleave, dtype=np.int64)
        act_u = np.empty(interleave, dtype=np.int64)
        act_s = np.empty(interleave, dtype=np.int64)
        act_e = np.empty(interleave, dtype=np.int64)
        act_m = np.empty(interleave, dtype=np.int64)
        act_p = np.empty(interleave, dtype=np.int64)
        tb = np.empty(n_tiers + 1, dtype=np.int64)
        ub = u0
        while ub < u1:
            be = min(u1, (ub // interleave + 1) * interleave)
            xb = ub // interleave - b_first
            # 2a. sort each user's run of the batch
            o = 0
            for u in range(ub, be):
                x = u - ub
                a = ptr[u]
                L = ptr[u + 1] - a
                boff[x] = o
                cc = bbuf[o:o + L]
                if interleave > 1 and L <= _LOCAL_MASK:
                    _bucket_sort_run(a, L, pos, ident, rt, a - base, n_tiers, state, keys, tiers_q, bcnt, cc, tb)
                    bmask[x] = _LOCAL_MASK
                else:
                    _sorted_run_general(a, L, pos, ident, ri, rt, a - base, n_tiers, interleave, state, keys, cc, tb)
                    bmask[x] = -1
                for t in range(n_tiers + 1):
                    bts[x, t] = tb[t]
                o += L
            # 2b. emit tier by tier, round-robin over the batch's users that still have ratings left (in user order)
            for t in range(n_tiers):
                w = cnt[xb * n_tiers + t]
                na = 0
                for u in range(ub, be):
                    x = u - ub
                    s0 = boff[x] + bts[x, t]
                    s1 = boff[x] + bts[x, t + 1]
                    if s1 > s0:
                        act_u[na] = u
                        act_s[na] = s0
                        act_e[na] = s1
                        act_m[na] = bmask[x]
                        act_p[na] = ptr[u]
                        na += 1
                # one round: a rating of every active user, in user order; the active list is compacted only after
                # a round in which some user's run ended (it used to be rewritten after every rating)
                while na > 0:
                    ended = 0
                    for y in range(na):
                        s = act_s[y]
                        src = act_p[y] + (bbuf[s] & act_m[y])
                        if with_order:
                            order[w] = _p(pos, ident, src)
                        o_users[w] = act_u[y]
                        o_items[w] = ri[src - base]
                        o_values[w] = val[src]
                        w += 1
                        act_s[y] = s + 1
                        ended += np.int64(s + 1 == act_e[y])
                    if ended > 0:
                        keep = 0
                        for y in range(na):
                            if act_s[y] < act_e[y]:
                                act_u[keep] = act_u[y]
                                act_s[keep] = act_s[y]
                                act_e[keep] = act_e[y]
                                act_m[keep] = act_m[y]
                                act_p[keep] = act_p[y]
                                keep += 1
                        na = keep
            ub = be


def build_tiered(users, items, values, n_users, rank, bounds, block_users, interleave, state, n_chunks,
                 with_order=True):
    """``(order, users, items, values, seg)`` of the tiered layout (see the module docstring); with
    ``with_order=False`` ``order`` is left empty (length 0) and not written."""
    n = users.shape[0]
    ident = _is_sorted(users, n_chunks)
    if ident:  # already user-major (loaders and splits keep that order): no scatter needed
        ptr = _sorted_ptr(users, n_users)
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
def item_counts(items, n_items, n_chunks):
    """Ratings per item (int64), a histogram per chunk summed (equal to ``np.bincount(items, minlength=n_items)``,
    without the int64 copy of ``items`` that bincount makes)."""
    n = items.shape[0]
    cnt = np.zeros((n_chunks, n_items), dtype=np.int64)
    for c in prange(n_chunks):
        for k in range(c * n // n_chunks, (c + 1) * n // n_chunks):
            cnt[c, items[k]] += 1
    out = np.zeros(n_items, dtype=np.int64)
    for c in range(n_chunks):
        for j in range(n_items):
            out[j] += cnt[c, j]
    return out


@njit(cache=True)
def _sorted_ptr(users, n_users):
    """Run offsets of users already sorted by user (= ``searchsorted(users, arange(n_users + 1))``)."""
    n = users.shape[0]
    ptr = np.empty(n_users + 1, dtype=np.int64)
    u = 0
    for k in range(n):
        while u <= users[k]:
            ptr[u] = k
            u += 1
    while u <= n_users:
        ptr[u] = n
        u += 1
    return ptr
