"""numba kernels of :mod:`dpmf_lib.lsh` (each has a plain reference beside its public wrapper, and an agreement test).

Conventions shared by every kernel:
- a *sign code* is an ``int8`` array of ±1 (``sign(0) = +1``);
- a *packed code* is a ``uint64`` array of ``ceil(L / 64)`` words per vector; bit ``j`` of the code is bit ``j % 64``
  of word ``j // 64`` and is set when ``b_j = +1``; padding bits of the last word are 0 (they never add to a Hamming
  distance);
- popcount is LLVM's ``ctpop`` intrinsic (one ``popcnt`` instruction on x86-64 with POPCNT), see :func:`popcount64`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import intrinsic


@intrinsic
def _ctpop_u64(typingctx, x):
    """LLVM ``llvm.ctpop.i64``: the hardware popcount instruction where the CPU has one."""
    if x != types.uint64:
        return None
    sig = types.uint64(types.uint64)

    def codegen(context, builder, signature, args):
        return builder.ctpop(args[0])

    return sig, codegen


@njit(cache=True, inline="always")
def popcount64(x):
    """Number of set bits of a ``uint64`` (hardware ``popcnt`` through ``llvm.ctpop``)."""
    return _ctpop_u64(x)


@njit(cache=True, inline="always")
def popcount64_swar(x):
    """Bit-trick popcount (SWAR), kept for the agreement test; LLVM turns it into ``popcnt`` too (measured: same speed)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return (x * np.uint64(0x0101010101010101)) >> np.uint64(56)


@njit(cache=True)
def popcount_array(a):
    """Popcount of every element of a 1-d ``uint64`` array, both ways (for the agreement test)."""
    out = np.empty((2, a.shape[0]), np.int64)
    for i in range(a.shape[0]):
        out[0, i] = popcount64(a[i])
        out[1, i] = popcount64_swar(a[i])
    return out


# ----------------------------------------------------------------------------------------------------------- packing
@njit(cache=True, parallel=True)
def pack_signs_kernel(S):
    """(n, L) int8 ±1 → (n, ceil(L/64)) uint64."""
    n, L = S.shape
    nw = (L + 63) // 64
    out = np.zeros((n, nw), np.uint64)
    for i in prange(n):
        for j in range(L):
            if S[i, j] > 0:
                out[i, j >> 6] |= np.uint64(1) << np.uint64(j & 63)
    return out


@njit(cache=True, inline="always")
def _pack_rows(P, r0, r1, out):
    # one word at a time, a constant 64-iteration loop for full words (LLVM vectorises the compares and the OR)
    L = P.shape[1]
    nw = out.shape[1]
    for i in range(r0, r1):
        for w in range(nw):
            j0 = w * 64
            cnt = min(64, L - j0)
            acc = np.uint64(0)
            for j in range(cnt):
                acc |= np.uint64(P[i, j0 + j] >= 0) << np.uint64(j)
            out[i, w] = acc


@njit(cache=True, parallel=True)
def _pack_projections_parallel(P, out, n_chunks):
    n = P.shape[0]
    per = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        _pack_rows(P, min(n, c * per), min(n, (c + 1) * per), out)


@njit(cache=True)
def _pack_projections_serial(P, out):
    _pack_rows(P, 0, P.shape[0], out)


def pack_projections_kernel(P):
    """Project-and-sign straight from projections: (n, L) float32 ``X W`` → packed codes of ``sign(P)`` (sign(0)=+1,
    also for −0.0: the test is ``P >= 0``). One thread (or few rows: the parallel launch costs more than the work)
    → a serial pass; otherwise a chunk of rows per thread."""
    from numba import get_num_threads

    n, L = P.shape
    out = np.empty((n, (L + 63) // 64), np.uint64)
    threads = get_num_threads()
    if threads == 1 or n * L < 1 << 20:
        _pack_projections_serial(P, out)
    else:
        _pack_projections_parallel(P, out, threads)
    return out


def pack_projections_reference(P):
    """Plain numpy: bits ``P >= 0`` packed little-endian into uint64 words, padding 0."""
    P = np.asarray(P)
    n, L = P.shape
    nw = (L + 63) // 64
    bits = np.zeros((n, nw * 64), np.uint8)
    bits[:, :L] = P >= 0
    return np.packbits(bits, axis=1, bitorder="little").view("<u8").astype(np.uint64).reshape(n, nw)


@njit(cache=True, parallel=True)
def unpack_codes_kernel(C, L):
    """(n, W) uint64 → (n, L) int8 ±1."""
    n = C.shape[0]
    out = np.empty((n, L), np.int8)
    for i in prange(n):
        for j in range(L):
            out[i, j] = 1 if (C[i, j >> 6] >> np.uint64(j & 63)) & np.uint64(1) else -1
    return out


# ----------------------------------------------------------------------------------------------------------- qoLSH
@njit(cache=True, parallel=True)
def qolsh_kernel(X, WT, G, M, n_chunks):
    """Greedy single-bit flips (thesis eqs. 5.10–5.12) from the project-and-sign code.

    X (n, d) float32, WT = Wᵀ (L, d) float64 (rows w_j), G = WᵀW (L, L) float64. For each x: p = Wᵀx, b = sign(p),
    x̂ = Wb, num = xᵀx̂ = Σ p_j b_j, nrm2 = ‖x̂‖², g = Wᵀx̂. Flipping bit j gives (eq. 5.11) x̂' = x̂ − 2 b_j w_j, so
    num' = num − 2 b_j p_j and nrm2' = nrm2 − 4 b_j g_j + 4 G_jj; after flipping k, g_j −= 2 b_k G_kj. At each step the
    flip with the largest objective num'/‖x̂'‖ is taken if it is strictly larger than the current one (ties → smallest
    j); at most M flips. Returns (codes (n, L) int8, n_flips (n,) int32). Arithmetic in float64.
    """
    n, d = X.shape
    L = WT.shape[0]
    codes = np.empty((n, L), np.int8)
    flips = np.zeros(n, np.int32)
    chunk = (n + n_chunks - 1) // n_chunks
    for c in prange(n_chunks):
        p = np.empty(L, np.float64)
        g = np.empty(L, np.float64)
        b = np.empty(L, np.float64)
        val = np.empty(L, np.float64)
        xh = np.empty(d, np.float64)
        x = np.empty(d, np.float64)
        Gd = np.empty(L, np.float64)
        for j in range(L):
            Gd[j] = 4.0 * G[j, j]
        start = c * chunk
        stop = min(n, start + chunk)
        for i in range(start, stop):
            for k in range(d):
                x[k] = np.float64(X[i, k])
            for j in range(L):
                s = 0.0
                for k in range(d):
                    s += WT[j, k] * x[k]
                p[j] = s
                b[j] = 1.0 if s >= 0.0 else -1.0
            for k in range(d):
                xh[k] = 0.0
            for j in range(L):
                for k in range(d):
                    xh[k] += WT[j, k] * b[j]
            num = 0.0
            nrm2 = 0.0
            for j in range(L):
                num += p[j] * b[j]
            for k in range(d):
                nrm2 += xh[k] * xh[k]
            for j in range(L):
                s = 0.0
                for k in range(d):
                    s += WT[j, k] * xh[k]
                g[j] = s
            cur = num / np.sqrt(nrm2) if nrm2 > 1e-12 else -np.inf
            nf = 0
            for _it in range(M):
                for j in range(L):
                    n2 = nrm2 - 4.0 * b[j] * g[j] + Gd[j]
                    val[j] = (num - 2.0 * b[j] * p[j]) / np.sqrt(n2) if n2 > 1e-12 else -np.inf
                best = cur
                bj = -1
                for j in range(L):
                    if val[j] > best:
                        best = val[j]
                        bj = j
                if bj < 0:
                    break
                sb = b[bj]
                num -= 2.0 * sb * p[bj]
                nrm2 = nrm2 - 4.0 * sb * g[bj] + Gd[bj]
                for j in range(L):
                    g[j] -= 2.0 * sb * G[bj, j]
                b[bj] = -sb
                cur = best
                nf += 1
            flips[i] = nf
            for j in range(L):
                codes[i, j] = 1 if b[j] > 0 else -1
    return codes, flips


# ----------------------------------------------------------------------------------------------------------- anti-sparse
@njit(cache=True, parallel=True)
def best_facet_kernel(X, YT, n_chunks):
    """For each row x of X (n, d) float32: argmax_F |xᵀy_F| over the columns of YT (d, C) float64, and the signed
    value. Ties → the first facet. Three vectorisable passes per vector: all C inner products into a buffer, their
    largest magnitude, the first facet reaching it. Returns (facet (n,) int64, value (n,) float64)."""
    n, d = X.shape
    C = YT.shape[1]
    fac = np.empty(n, np.int64)
    val = np.empty(n, np.float64)
    chunk = (n + n_chunks - 1) // n_chunks
    for ch in prange(n_chunks):
        buf = np.empty(C, np.float64)
        for i in range(ch * chunk, min(n, (ch + 1) * chunk)):
            for c in range(C):
                buf[c] = 0.0
            for k in range(d):
                xk = np.float64(X[i, k])
                for c in range(C):
                    buf[c] += xk * YT[k, c]
            best = 0.0
            for c in range(C):
                best = max(best, abs(buf[c]))
            bf = 0
            for c in range(C):
                if abs(buf[c]) == best:
                    bf = c
                    break
            fac[i] = bf
            val[i] = buf[bf]
    return fac, val


# ----------------------------------------------------------------------------------------------------------- Hamming
@njit(cache=True, parallel=True)
def hamming_matrix_kernel(Q, D):
    """All Hamming distances between packed codes: (nq, W), (n, W) → (nq, n) int32."""
    nq, nw = Q.shape
    n = D.shape[0]
    out = np.empty((nq, n), np.int32)
    for a in prange(nq):
        for i in range(n):
            s = np.uint64(0)
            for w in range(nw):
                s += popcount64(Q[a, w] ^ D[i, w])
            out[a, i] = np.int32(s)
    return out


# ----------------------------------------------------------------------------------- shared pieces of the k-NN kernels
# One copy of each rule (the candidate-list set-up, compaction, counting-sort read-out and padding), used by the
# threshold, simd and shards paths. All are tiny and ``inline="always"`` (numba inlines them into the caller's IR),
# so the compiled loops are the ones the kernels had written out.
#
# The selection rule of every path: the k smallest (distance, index) pairs. With t the k-th smallest distance (the
# *threshold*) that is every row at distance < t, then the first ``k − count(d < t)`` rows, in index order, at
# distance t; rows are read off in (distance, index) order by a stable counting sort on distance.

# _dist4/_dist_words give the raw uint64 sum of popcounts (what the kernels had inline); _dist casts to int64.
@njit(cache=True, inline="always")
def _dist4(q0, q1, q2, q3, D, i):
    """Distance (uint64) of a 256-bit code (words q0..q3, hoisted by the caller) to row i of D, unrolled."""
    return (popcount64(q0 ^ D[i, 0]) + popcount64(q1 ^ D[i, 1]) + popcount64(q2 ^ D[i, 2])
            + popcount64(q3 ^ D[i, 3]))


@njit(cache=True, inline="always")
def _dist_words(q, D, i, nw):
    """Distance (uint64) of packed code q to row i of D, any number of words."""
    v = np.uint64(0)
    for w in range(nw):
        v += popcount64(q[w] ^ D[i, w])
    return v


@njit(cache=True, inline="always")
def _dist(q, D, i, nw):
    """Distance (int64) of q to row i of D; 256-bit codes unrolled (the loop-invariant branch is hoisted by LLVM)."""
    if nw == 4:
        return np.int64(_dist4(q[0], q[1], q[2], q[3], D, i))
    return np.int64(_dist_words(q, D, i, nw))


@njit(cache=True, inline="always")
def _keep(v, t, need_t):
    """The selection rule for the next row in index order, at distance v, under threshold t with ``need_t`` places left
    at distance t: (kept, places left at t afterwards)."""
    if v < t:
        return True, need_t
    if v == t and need_t > 0:
        return True, need_t - 1
    return False, need_t


@njit(cache=True, inline="always")
def _bucket_starts(counts, nb):
    """Exclusive prefix sums of ``counts[:nb]``: the output slot where the rows at each distance start."""
    pos = np.empty(nb, np.int64)
    acc = 0
    for v in range(nb):
        pos[v] = acc
        acc += counts[v]
    return pos


@njit(cache=True, inline="always")
def _place(pos, v, i, k, out_i, out_d):
    """One step of the stable counting sort: row i at distance v into the next slot of its bucket, if among the k."""
    p = pos[v]
    pos[v] = p + 1
    if p < k:
        out_i[p] = i
        out_d[p] = v


@njit(cache=True, inline="always")
def _pad(out_i, out_d):
    """Every slot empty: index −1, distance 2³¹−1 (what stays when fewer than k rows were scanned)."""
    for s in range(out_i.shape[0]):
        out_i[s] = -1
        out_d[s] = 2147483647


@njit(cache=True, inline="always")
def _emit_sorted(cand_i, cand_d, size, hist, k, out_i, out_d):
    """The first k of ``size`` candidates (in index order; ``hist`` = their distance histogram) by (distance, index),
    by stable counting sort."""
    pos = _bucket_starts(hist, hist.shape[0])
    for j in range(size):
        _place(pos, cand_d[j], cand_i[j], k, out_i, out_d)


@njit(cache=True, inline="always")
def _new_candidates(m, k, n_bits):
    """Candidate lists of m queries for the one-pass scans: (cap, cand_i (m, cap), cand_d (m, cap), hist (m, n_bits+2),
    size (m,), thr (m,) = n_bits + 1, lt (m,) = count of candidates at distance < thr)."""
    cap = 2 * k + 64
    return (cap, np.empty((m, cap), np.int64), np.empty((m, cap), np.int64), np.zeros((m, n_bits + 2), np.int64),
            np.zeros(m, np.int64), np.full(m, n_bits + 1, np.int64), np.zeros(m, np.int64))


@njit(cache=True)
def _compact(cand_i, cand_d, size, hist, thr, lt, k):
    """Keep the candidates with distance < thr and the first ``k - lt`` (in index order) at distance thr
    (:func:`_keep`); rebuild the histogram. Returns the new size (≤ k)."""
    need_t = k - lt
    w = 0
    for j in range(size):
        v = cand_d[j]
        keep, need_t = _keep(v, thr, need_t)
        hist[v] -= 1
        if keep:
            cand_i[w] = cand_i[j]
            cand_d[w] = v
            w += 1
    for j in range(w):
        hist[cand_d[j]] += 1
    return w


@njit(cache=True, inline="always")
def _accept(x, i, v, t, cand_i, cand_d, size, hist, lt, k, cap):
    """Append row i at distance v < t to query x's candidates; return the lowered threshold."""
    if size[x] == cap:
        size[x] = _compact(cand_i[x], cand_d[x], size[x], hist[x], t, lt[x], k)
    s = size[x]
    cand_i[x, s] = i
    cand_d[x, s] = v
    size[x] = s + 1
    hist[x, v] += 1
    c = lt[x] + 1
    while c >= k:  # lower the threshold while ≥ k candidates lie below it
        t -= 1
        c -= hist[x, t]
    lt[x] = c
    return t


# ---------------------------------------------------------------------------- k-NN: the previous default path
@njit(cache=True, parallel=True)
def _hamming_knn_threshold(Q, D, k, n_bits, n_groups, block):
    """Any k, one pass. Queries are split into ``n_groups`` groups (one per thread); each group walks the
    database in blocks of ``block`` rows and scans each block for all its queries while it is in cache — 256-bit codes
    four queries at a time, so a row's words are loaded once for four distances. Per query a threshold ``thr`` (the
    smallest t with at least k candidates at distance ≤ t; n_bits + 1 until k are seen) rejects a row with one
    comparison; accepted rows go to a candidate list (index order), compacted when full. A row at distance ≥ thr can
    never be selected: ≥ k earlier rows are at distance ≤ thr, and ties go to the smaller index. The answer is the
    first k candidates by (distance, index) (counting sort on distance, stable)."""
    nq, nw = Q.shape
    n = D.shape[0]
    idx = np.empty((nq, k), np.int64)
    dist = np.empty((nq, k), np.int32)
    per = (nq + n_groups - 1) // n_groups
    for g in prange(n_groups):
        a0 = g * per
        a1 = min(nq, a0 + per)
        m = max(0, a1 - a0)
        cap, cand_i, cand_d, hist, size, thr, lt = _new_candidates(m, k, n_bits)
        m4 = m - m % 4 if nw == 4 else 0
        for lo in range(0, n, block):
            hi = min(n, lo + block)
            for x in range(0, m4, 4):
                qa, qb, qc, qd = Q[a0 + x], Q[a0 + x + 1], Q[a0 + x + 2], Q[a0 + x + 3]
                a_0, a_1, a_2, a_3 = qa[0], qa[1], qa[2], qa[3]
                b_0, b_1, b_2, b_3 = qb[0], qb[1], qb[2], qb[3]
                c_0, c_1, c_2, c_3 = qc[0], qc[1], qc[2], qc[3]
                d_0, d_1, d_2, d_3 = qd[0], qd[1], qd[2], qd[3]
                ta, tb, tc, td = thr[x], thr[x + 1], thr[x + 2], thr[x + 3]
                for i in range(lo, hi):
                    w0, w1, w2, w3 = D[i, 0], D[i, 1], D[i, 2], D[i, 3]
                    va = np.int64(popcount64(a_0 ^ w0) + popcount64(a_1 ^ w1) + popcount64(a_2 ^ w2)
                                  + popcount64(a_3 ^ w3))
                    vb = np.int64(popcount64(b_0 ^ w0) + popcount64(b_1 ^ w1) + popcount64(b_2 ^ w2)
                                  + popcount64(b_3 ^ w3))
                    vc = np.int64(popcount64(c_0 ^ w0) + popcount64(c_1 ^ w1) + popcount64(c_2 ^ w2)
                                  + popcount64(c_3 ^ w3))
                    vd = np.int64(popcount64(d_0 ^ w0) + popcount64(d_1 ^ w1) + popcount64(d_2 ^ w2)
                                  + popcount64(d_3 ^ w3))
                    if va < ta:
                        ta = _accept(x, i, va, ta, cand_i, cand_d, size, hist, lt, k, cap)
                    if vb < tb:
                        tb = _accept(x + 1, i, vb, tb, cand_i, cand_d, size, hist, lt, k, cap)
                    if vc < tc:
                        tc = _accept(x + 2, i, vc, tc, cand_i, cand_d, size, hist, lt, k, cap)
                    if vd < td:
                        td = _accept(x + 3, i, vd, td, cand_i, cand_d, size, hist, lt, k, cap)
                thr[x], thr[x + 1], thr[x + 2], thr[x + 3] = ta, tb, tc, td
            for x in range(m4, m):
                q = Q[a0 + x]
                t = thr[x]
                for i in range(lo, hi):
                    v = _dist(q, D, i, nw)
                    if v < t:
                        t = _accept(x, i, v, t, cand_i, cand_d, size, hist, lt, k, cap)
                thr[x] = t
        for x in range(m):
            _emit_sorted(cand_i[x], cand_d[x], size[x], hist[x], k, idx[a0 + x], dist[a0 + x])
    return idx, dist


# ----------------------------------------------------------------------------------------------------- SIMD block scan
@njit(cache=True, inline="always")
def _block_distances(q, T, nb, nw, buf):
    """Distances of query ``q`` to the ``nb`` rows of a transposed block ``T`` (nw, block) into ``buf``; returns their
    minimum. Rows are the inner, unit-stride loop so LLVM vectorises the popcount (``vpopcntq`` with AVX-512 VPOPCNTDQ,
    a nibble-table popcount with AVX2) and the minimum."""
    if nw == 4:
        q0, q1, q2, q3 = q[0], q[1], q[2], q[3]
        for i in range(nb):
            buf[i] = np.int32(popcount64(q0 ^ T[0, i]) + popcount64(q1 ^ T[1, i]) + popcount64(q2 ^ T[2, i])
                              + popcount64(q3 ^ T[3, i]))
    else:
        q0 = q[0]
        for i in range(nb):
            buf[i] = np.int32(popcount64(q0 ^ T[0, i]))
        for w in range(1, nw):
            qw = q[w]
            for i in range(nb):
                buf[i] += np.int32(popcount64(qw ^ T[w, i]))
    m = np.int32(1 << 30)
    for i in range(nb):
        m = min(m, buf[i])
    return m


@njit(cache=True)
def _scan_rows(Q, a0, a1, D, r0, r1, k, n_bits, block, out_i, out_d):
    """Queries a0..a1-1 against database rows r0..r1-1 (global indices), one pass: the k smallest (distance, index)
    of each query into out_i/out_d[a - a0] (rows beyond the number of rows scanned: index −1, distance 2³¹−1).

    The database is walked in blocks of ``block`` rows; each block is transposed once into a (words, block) buffer
    and, while in L1, scanned for every query: a vectorised pass computes the block's distances and their minimum;
    only when that minimum is below the query's threshold ``thr`` (the smallest t with ≥ k candidates at distance ≤ t;
    n_bits + 1 until k rows are seen) are the rows visited one by one, and a row enters the candidate list only when
    its distance is < thr (a row at distance ≥ thr can never be selected: ≥ k earlier rows are at ≤ thr and ties go
    to the smaller index). Candidates are kept in index order, compacted when full (:func:`_compact`), and the answer
    is read off by a stable counting sort on distance: the same rule, hence the same output, as
    :func:`_hamming_knn_threshold` and the stable-argsort reference."""
    nw = D.shape[1]
    m = a1 - a0
    cap, cand_i, cand_d, hist, size, thr, lt = _new_candidates(m, k, n_bits)
    T = np.empty((nw, block), np.uint64)
    buf = np.empty(block, np.int32)
    for lo in range(r0, r1, block):
        nb = min(r1, lo + block) - lo
        for i in range(nb):
            for w in range(nw):
                T[w, i] = D[lo + i, w]
        for x in range(m):
            t = thr[x]
            mn = _block_distances(Q[a0 + x], T, nb, nw, buf)
            if mn < t:
                for i in range(nb):
                    v = np.int64(buf[i])
                    if v < t:
                        t = _accept(x, lo + i, v, t, cand_i, cand_d, size, hist, lt, k, cap)
                thr[x] = t
    for x in range(m):
        _pad(out_i[x], out_d[x])
        _emit_sorted(cand_i[x], cand_d[x], size[x], hist[x], k, out_i[x], out_d[x])


@njit(cache=True, parallel=True)
def _hamming_knn_simd(Q, D, k, n_bits, n_groups, block):
    """Queries split into ``n_groups`` groups, one per thread (:func:`_scan_rows` over the whole database each)."""
    nq = Q.shape[0]
    n = D.shape[0]
    idx = np.empty((nq, k), np.int64)
    dist = np.empty((nq, k), np.int32)
    per = (nq + n_groups - 1) // n_groups
    for g in prange(n_groups):
        a0 = min(nq, g * per)
        a1 = min(nq, a0 + per)
        if a1 > a0:
            _scan_rows(Q, a0, a1, D, 0, n, k, n_bits, block, idx[a0:a1], dist[a0:a1])
    return idx, dist


@njit(cache=True, parallel=True)
def _hamming_knn_shards(Q, D, k, n_bits, n_shards, block):
    """Few queries: the database split into ``n_shards`` contiguous shards, one per thread, each giving every query's
    k best of its rows; then a merge per query. The global k best by (distance, index) are among the shards' k best,
    and shards are in index order, so a stable counting sort of the concatenated shard lists by distance gives the
    same (distance, index) order as one pass."""
    nq = Q.shape[0]
    n = D.shape[0]
    per = (n + n_shards - 1) // n_shards
    pi = np.empty((n_shards, nq, k), np.int64)
    pd = np.empty((n_shards, nq, k), np.int32)
    for s in prange(n_shards):
        r0 = min(n, s * per)
        r1 = min(n, r0 + per)
        _scan_rows(Q, 0, nq, D, r0, r1, k, n_bits, block, pi[s], pd[s])
    idx = np.empty((nq, k), np.int64)
    dist = np.empty((nq, k), np.int32)
    for a in range(nq):
        cnt = np.zeros(n_bits + 2, np.int64)
        for s in range(n_shards):
            for j in range(k):
                if pi[s, a, j] >= 0:
                    cnt[pd[s, a, j]] += 1
        pos = _bucket_starts(cnt, n_bits + 2)
        _pad(idx[a], dist[a])
        for s in range(n_shards):
            for j in range(k):
                if pi[s, a, j] >= 0:
                    _place(pos, pd[s, a, j], pi[s, a, j], k, idx[a], dist[a])
    return idx, dist


SMALL_K = 64
SCAN_BLOCK = 1024  # rows per transposed block of the simd scan: 4 words x 1024 x 8 B = 32 KB + 4 KB of distances


def hamming_knn_kernel(Q, D, k, n_bits, method: str = "auto"):
    """The k smallest Hamming distances of every query, ties broken by the smaller database index.

    ``auto``: ``simd`` (:func:`_hamming_knn_simd`: per thread a group of queries, the database in transposed L1 blocks,
    distances and block minimum vectorised, rows visited only when the block's minimum beats the query's threshold)
    or, with fewer queries than threads, ``shards`` (the database split over the threads, then a
    merge: :func:`_hamming_knn_shards`). ``threshold`` (one scalar pass, queries four at a time:
    :func:`_hamming_knn_threshold`) is kept for the agreement tests and the ``lsh`` bench, which times it beside
    ``simd``. All
    return the same (indices (nq, k) int64, distances (nq, k) int32), each row in increasing (distance, index) order;
    ``simd``/``shards`` also accept k > len(D) (missing neighbours: index −1, distance 2³¹−1; the public
    :func:`dpmf_lib.lsh.hamming_knn` refuses k > len(D), so the padding never reaches its callers). Raises
    ``ParameterError`` on calls that could index out of bounds (word counts, n_bits vs width, k < 1, k > len(D) for
    the path that does not pad).
    """
    from numba import get_num_threads

    from ..errors import ParameterError

    # Memory safety (the kernels index per-distance buffers of n_bits + 2 entries and read q[w] for every word of D):
    # same word count, ≥ 1 word, k ≥ 1 (k = 0 would walk the threshold below 0), and n_bits consistent with the width.
    # The public :func:`dpmf_lib.lsh.hamming_knn` checks all this with friendlier messages (and the padding bits).
    if Q.ndim != 2 or D.ndim != 2 or Q.dtype != np.uint64 or D.dtype != np.uint64:
        raise ParameterError(f"Q and D must be 2-d uint64 packed codes, got {Q.dtype} {Q.shape} and "
                             f"{D.dtype} {D.shape}")
    nw = D.shape[1]
    if Q.shape[1] != nw or nw < 1:
        raise ParameterError(f"Q has {Q.shape[1]} words per code, D {nw}: both need the same number >= 1")
    if not 64 * (nw - 1) < n_bits <= 64 * nw:
        raise ParameterError(f"n_bits={n_bits} does not match {nw} word(s): need {64 * (nw - 1) + 1}..{64 * nw}")
    if k < 1:
        raise ParameterError(f"k must be >= 1, got {k}")
    if method not in ("auto", "simd", "shards") and k > len(D):
        raise ParameterError(f"method {method!r} needs k <= len(D) = {len(D)} (only simd/shards pad), got k = {k}")
    # Buffers sized by the full width 64·words, not n_bits: codes whose padding bits are not 0 (distances above
    # n_bits) are then ranked by their full-width distances, never written out of bounds. The answers are the same
    # for any size ≥ the largest distance (the threshold starts above every distance either way).
    n_bits = 64 * nw
    threads = get_num_threads()
    groups = max(1, min(len(Q), threads))
    if method == "auto":
        method = "shards" if len(Q) < threads and len(D) >= threads * SCAN_BLOCK else "simd"
    if method == "simd":
        return _hamming_knn_simd(Q, D, k, n_bits, groups, SCAN_BLOCK)
    if method == "shards":
        return _hamming_knn_shards(Q, D, k, n_bits, max(1, threads), SCAN_BLOCK)
    if method != "threshold":
        raise ValueError(f"method must be 'auto', 'simd', 'shards' or 'threshold', got {method!r}")
    return _hamming_knn_threshold(Q, D, k, n_bits, groups, 1024)


# ----------------------------------------------------------------------------------------------------------- estimators
@njit(cache=True, parallel=True)
def asym_scores_kernel(P, C8, norms, cand, divide):
    """Asymmetric scores of candidates from packed codes.

    P = YW (nq, L) float32 (query projections yᵀw_j); C8 = packed codes viewed as bytes (n, 8·words) uint8 (byte m holds
    bits 8m..8m+7, little-endian); norms = ‖Wb‖ (n,) float32; cand (nq, S) int64 candidate ids (−1 = none).
    score = Σ_j p_j b_j (eq. 5.3), divided by ‖Wb‖ when ``divide`` (eq. 5.13). With b_j = ±1,
    Σ_j p_j b_j = 2 Σ_{b_j=+1} p_j − Σ_j p_j; the first sum is read from a per-query table of the 256 partial sums of
    every code byte (one lookup per byte instead of eight bit tests). Returns (nq, S) float32 (−inf for id −1).
    """
    nq, L = P.shape
    nb = C8.shape[1]
    S = cand.shape[1]
    out = np.empty((nq, S), np.float32)
    for a in prange(nq):
        tab = np.zeros((nb, 256), np.float64)
        tot = 0.0
        for m in range(nb):
            for v in range(1, 256):
                low = v & (-v)
                t = 0
                while (low >> t) != 1:
                    t += 1
                j = 8 * m + t
                pj = np.float64(P[a, j]) if j < L else 0.0
                tab[m, v] = tab[m, v & (v - 1)] + pj
        for j in range(L):
            tot += np.float64(P[a, j])
        for s in range(S):
            i = cand[a, s]
            if i < 0:
                out[a, s] = -np.inf
                continue
            acc = 0.0
            for m in range(nb):
                acc += tab[m, C8[i, m]]
            v = 2.0 * acc - tot
            if divide:
                v = v / np.float64(norms[i])
            out[a, s] = np.float32(v)
    return out
