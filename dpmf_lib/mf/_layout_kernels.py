"""numba kernels of the fast C-SGD layout (:func:`dpmf_lib.mf.layout.tiered_layout`); the definition of the order is
the plain :func:`dpmf_lib.mf.layout.tiered_layout_reference`, and the two are tested equal array for array.

1. ``_user_csr``: stable counting sort of the ratings by user, in ``n_chunks`` contiguous chunks (one per thread):
   a histogram per chunk, offsets user-major then chunk-major (so the result is stable whatever the chunk count),
   then a scatter of the rating's position, item id and value. Parallel over chunks.
2. ``_blocks``: parallel over user blocks. Each user's run is ordered by (tier, key, position) into block-local
   buffers — key = the counter-based random key when interleaving (a counting sort on (tier, top key bits) into ~L/2
   buckets per tier, then an insertion sort: O(L) expected), or the internal item id for user-major order (a sort of
   ``key << 21 | local position``); runs of 2²¹ ratings or more use a stable argsort of the key — and the block is
   emitted tier by tier, round-robin over batches of ``interleave`` users (batch = ``user // interleave`` as in the reference).
   Input already sorted by user (what the loaders and splits give) skips step 1: the runs are read in place.
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
    t = 0
    while t < bounds.shape[0] and j >= bounds[t]:
        t += 1
    return t


@njit(cache=True)
def _bucket_sort_run(a, L, pos, ident, it, rank, bounds, n_tiers, state, keys, tiers_q, bcnt, cc, tb):
    """Sort positions ``0..L-1`` of the run at ``a`` by (tier, random key, position): the keys are uniform, so a
    counting sort on (tier, top bits of the key) into ~L/2 buckets per tier and an insertion sort inside each tier
    (expected O(1) moves per element: moves stay inside a bucket) give the exact order in O(L).
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
        t = _tier_of(rank[it[a + q]], bounds)
        keys[q] = kq << _LOCAL_BITS | q
        tiers_q[q] = t
        bcnt[t * B + (kq >> shift) + 1] += 1
    for j in range(nb):
        bcnt[j + 1] += bcnt[j]
    for t in range(n_tiers):
        tb[t] = bcnt[t * B]
    tb[n_tiers] = L
    for q in range(L):
        c = keys[q]
        bk = tiers_q[q] * B + ((c >> _LOCAL_BITS) >> shift)
        dst = bcnt[bk]
        bcnt[bk] = dst + 1
        cc[dst] = c
    for t in range(n_tiers):
        lo = tb[t]
        for q in range(lo + 1, tb[t + 1]):
            c = cc[q]
            j = q - 1
            while j >= lo and cc[j] > c:
                cc[j + 1] = cc[j]
                j -= 1
            cc[j + 1] = c


@njit(cache=True, parallel=True)
def _blocks(ptr, pos, ident, it, rank, val, n_users, bounds, block_users, interleave, state, order, o_users, o_items,
            o_values):
    n_tiers = bounds.shape[0] + 1
    n_blocks = (n_users + block_users - 1) // block_users
    tstart = np.zeros((n_users, n_tiers + 1), dtype=np.int64)  # per user: offsets of its tier runs in its sorted run
    for b in prange(n_blocks):
        u0 = b * block_users
        u1 = min(n_users, u0 + block_users)
        longest = 0
        for u in range(u0, u1):
            longest = max(longest, ptr[u + 1] - ptr[u])
        keys = np.empty(longest, dtype=np.int64)
        nblk = ptr[u1] - ptr[u0]  # the block's sorted runs stay in these block-local buffers until emitted
        tpos = np.empty(nblk, dtype=np.int64)
        tit = np.empty(nblk, dtype=np.int32)
        tval = np.empty(nblk, dtype=np.float32)
        tcur = np.empty(n_tiers + 1, dtype=np.int64)
        cc = np.empty(longest, dtype=np.int64)
        tiers_q = np.empty(longest, dtype=np.int64)
        nb = 1
        while nb < longest:
            nb *= 2
        bcnt = np.empty(n_tiers * nb + 1, dtype=np.int64)
        # 1. each user's run sorted by (tier, key, position) into the block buffers tpos/tit/tval
        for u in range(u0, u1):
            a = ptr[u]
            L = ptr[u + 1] - a
            o = a - ptr[u0]
            for t in range(n_tiers + 1):
                tstart[u, t] = 0
            if interleave > 1 and L <= _LOCAL_MASK:
                _bucket_sort_run(a, L, pos, ident, it, rank, bounds, n_tiers, state, keys, tiers_q, bcnt, cc, tcur)
                for t in range(n_tiers):
                    tstart[u, t + 1] = tcur[t + 1]
                for q in range(L):
                    src = a + (cc[q] & _LOCAL_MASK)
                    tpos[o + q] = _p(pos, ident, src)
                    tit[o + q] = rank[it[src]]
                    tval[o + q] = val[src]
            else:
                for q in range(L):
                    if interleave > 1:
                        kq = _random_key(state, _p(pos, ident, a + q))
                    else:
                        kq = np.int64(rank[it[a + q]])
                    tstart[u, _tier_of(rank[it[a + q]], bounds) + 1] += 1
                    keys[q] = kq << _LOCAL_BITS | q if L <= _LOCAL_MASK else kq
                for t in range(n_tiers):
                    tstart[u, t + 1] += tstart[u, t]
                    tcur[t] = tstart[u, t]
                if L <= _LOCAL_MASK:
                    keys[:L].sort()
                    for q in range(L):
                        cc[q] = keys[q] & _LOCAL_MASK
                else:
                    srt = np.argsort(keys[:L], kind="mergesort")
                    for q in range(L):
                        cc[q] = srt[q]
                for q in range(L):
                    src = a + cc[q]
                    t = _tier_of(rank[it[src]], bounds)
                    dst = o + tcur[t]
                    tcur[t] += 1
                    tpos[dst] = _p(pos, ident, src)
                    tit[dst] = rank[it[src]]
                    tval[dst] = val[src]
        # 2. emit: tier by tier, round-robin over batches of ``interleave`` consecutive users; ``act`` holds the
        #    batch's users that still have ratings left (in user order), so the cost is O(ratings), not O(batch x max)
        act_u = np.empty(interleave, dtype=np.int64)
        act_s = np.empty(interleave, dtype=np.int64)
        act_e = np.empty(interleave, dtype=np.int64)
        w = ptr[u0]
        for t in range(n_tiers):
            ub = u0
            while ub < u1:
                be = min(u1, (ub // interleave + 1) * interleave)
                na = 0
                for u in range(ub, be):
                    s0 = ptr[u] - ptr[u0] + tstart[u, t]
                    s1 = ptr[u] - ptr[u0] + tstart[u, t + 1]
                    if s1 > s0:
                        act_u[na] = u
                        act_s[na] = s0
                        act_e[na] = s1
                        na += 1
                while na > 0:
                    keep = 0
                    for x in range(na):
                        src = act_s[x]
                        order[w] = tpos[src]
                        o_users[w] = act_u[x]
                        o_items[w] = tit[src]
                        o_values[w] = tval[src]
                        w += 1
                        if src + 1 < act_e[x]:
                            act_u[keep] = act_u[x]
                            act_s[keep] = src + 1
                            act_e[keep] = act_e[x]
                            keep += 1
                    na = keep
                ub = be


def build_tiered(users, items, values, n_users, rank, bounds, block_users, interleave, state, n_chunks):
    """``(order, users, items, values, seg)`` of the tiered layout (see the module docstring)."""
    n = users.shape[0]
    ident = _is_sorted(users, n_chunks)
    if ident:  # already user-major (loaders and splits keep that order): no scatter needed
        ptr = np.searchsorted(users, np.arange(n_users + 1, dtype=np.int32)).astype(np.int64)
        pos, it, val = np.empty(0, dtype=np.int64), items, values
    else:
        ptr, pos, it, val = _user_csr(users, items, values, n_users, n_chunks)
    order = np.empty(n, dtype=np.int64)
    o_users = np.empty(n, dtype=np.int32)
    o_items = np.empty(n, dtype=np.int32)
    o_values = np.empty(n, dtype=np.float32)
    _blocks(ptr, pos, ident, it, rank, val, n_users, bounds, block_users, interleave, state, order, o_users, o_items,
            o_values)
    n_blocks = (n_users + block_users - 1) // block_users
    seg = np.ascontiguousarray(ptr[np.minimum(np.arange(n_blocks + 1, dtype=np.int64) * block_users, n_users)])
    return order, o_users, o_items, o_values, seg
