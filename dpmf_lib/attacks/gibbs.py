"""Multi-stage random-scan Gibbs sampler of the joint decoder (thesis Section 3.4.2, (3.33)–(3.35)).

State: a profile coded as ``c_max`` slots, each holding a candidate index or -1 (the "empty item"). One transition
draws a slot i uniformly and redraws its content from the posterior restricted to the neighbourhood V(P, i) (3.34):
empty, or any candidate not held by another slot (3.35).

Target. The posterior over profiles P (subsets of the candidate set, |P| <= c_max) is

    P[P | obs] ∝ lik(obs | P) * prod_{j in P} rho_j,

with rho_j the prior odds of item j (independent-items prior; see ``decoders``). A profile of m items has
c_max! / (c_max - m)! codings, so a sampler over codings with weight lik * prior would over-weight large profiles; we
give each coding the weight lik * prior * (c_max - m)! / c_max!, which makes the profile marginal exactly the posterior.
In a transition this is the factor 1 / (c_max - m_rest) on every "item" option (m_rest = items in the other slots).
(The thesis does not discuss coding multiplicity; this is our correction, and the exact-enumeration test relies on it.)

Likelihoods, relative to the empty profile:
- BLIP (3.31): log lik(P) = const + lam * sum_{l : B_P(l) = 1} sgn(l), lam = log((1 - p)/p), sgn(l) = +1 if b~(l) = 1
  else -1. With cnt(l) = number of items of the other slots covering bit l, adding item j changes log lik by
  lam * d_j, d_j = sum_{l in X_j, cnt(l) = 0} sgn(l). cnt and every d_j are maintained incrementally: a leaving or
  entering item touches its <= K bits, and d changes only for candidates sharing a bit whose count crosses zero.
- JLT: log lik(P) = -||y - sum_{j in P} X_j||^2 / (2 sigma^2). With z_j = X_j . y, G = X X^T and s_j = sum_{k in rest} G_kj,
  adding j changes it by (2 z_j - 2 s_j - G_jj) / (2 sigma^2); removing/adding an item updates s by one row of G
  (O(|candidates|) per transition instead of O(|candidates| * L)). G is computed once per codebook (BLAS); the kernel
  reads the candidates' block of it, copied contiguous once per chain.

JLT kernel: reuse and arithmetic. A transition's distribution depends only on the other slots' profile. Redrawing an
empty slot, that is the current profile P, so consecutive empty-slot redraws under an unchanged P (most transitions
where c_hat -> N and most of the c_max slots are empty) reuse its weights and running sums: a bisection instead of a
pass over the candidates. A redrawn occupied slot (P without its item) is built in a second buffer, so P's stays
valid when the item stays, and becomes P's when the item leaves for the empty option. A built distribution is the
reference's log-weights bit for bit, then exp by a vectorisable polynomial (:func:`_exp_nonpos`, <= ~2 ulp from
libm) and two-level running sums (blocks of 16 summed in a fixed tree, then left to right), searched by bisection:
the transition probabilities equal the reference's to ~1e-15, so a draw can differ only when a uniform falls within
that of a boundary — the tests and the chapter-3 rows see the same chains (docs/performance.md). The reference,
:func:`jlt_gibbs_kernel_scan`, rebuilds every transition with libm's exp and sequential sums.

Randomness is passed in: ``slot_draws`` (int64, one slot per transition) and ``uniforms`` (float64 in [0, 1), one per
transition, used by inverse-CDF sampling over [candidates..., empty]). The numba kernels and the plain-Python references
consume them identically, so same inputs give the same chain.

Output: ``counts[j]`` = number of post-burn-in states (transitions T+1..T+M) holding candidate j, so the marginal (3.33)
is counts / M. It is accumulated from entry/exit times (O(1) per transition).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

NEG_INF = -np.inf


@njit(cache=True)
def _close(counts, j, enter, t_exit, burn_in, t_last):
    # j was present in states enter .. t_exit-1; count those in [burn_in+1, t_last]
    lo = enter if enter > burn_in + 1 else burn_in + 1
    hi = t_exit - 1 if t_exit - 1 < t_last else t_last
    if hi >= lo:
        counts[j] += hi - lo + 1


@njit(cache=True)
def _draw(logw, n_opt, u):
    mx = NEG_INF
    for j in range(n_opt):
        if logw[j] > mx:
            mx = logw[j]
    total = 0.0
    for j in range(n_opt):
        v = logw[j]
        w = 0.0 if v == NEG_INF else math.exp(v - mx)
        logw[j] = w
        total += w
    target = u * total
    acc = 0.0
    chosen = -1
    for j in range(n_opt):
        if logw[j] > 0.0:
            chosen = j  # fallback when rounding puts target at the very top: last option with positive weight
    for j in range(n_opt):
        acc += logw[j]
        if target < acc and logw[j] > 0.0:
            chosen = j
            break
    for j in range(n_opt):
        logw[j] = logw[j] / total
    return chosen


@njit(cache=True)
def blip_gibbs_kernel(bits, nbits, sgn, lam, log_rho, slots, slot_draws, uniforms, burn_in, counts, probs_out):
    """Run len(slot_draws) transitions from ``slots`` (modified in place). ``probs_out[t]`` (first rows only) receives
    the transition distribution of step t over [candidates..., empty].

    Incremental state: cnt[l] (items of the current profile covering bit l) and, for every candidate j,
    d[j] = sum_{l in X_j, cnt[l] = 0} sgn(l) — so that adding j changes the log-likelihood by lam * d[j]. When an item
    leaves or enters, only its <= K bits are touched, and d changes only for the candidates sharing a bit whose cnt
    crosses 0 (an inverted bit -> candidates index, ~|candidates| K / L entries per bit)."""
    n_c = bits.shape[0]
    c_max = slots.shape[0]
    L = sgn.shape[0]
    # inverted index: candidates covering each bit (CSR)
    start = np.zeros(L + 1, np.int64)
    for j in range(n_c):
        for b in range(nbits[j]):
            start[bits[j, b] + 1] += 1
    for ell in range(L):
        start[ell + 1] += start[ell]
    fill = start[:-1].copy()
    owners = np.empty(start[L], np.int64)
    for j in range(n_c):
        for b in range(nbits[j]):
            ell = bits[j, b]
            owners[fill[ell]] = j
            fill[ell] += 1
    cnt = np.zeros(L, np.int32)
    in_p = np.zeros(n_c, np.bool_)
    enter = np.zeros(n_c, np.int64)
    m = 0
    for s in range(c_max):
        k = slots[s]
        if k >= 0:
            in_p[k] = True
            m += 1
            for b in range(nbits[k]):
                cnt[bits[k, b]] += 1
    d = np.zeros(n_c, np.int64)
    for j in range(n_c):
        for b in range(nbits[j]):
            ell = bits[j, b]
            if cnt[ell] == 0:
                d[j] += sgn[ell]
    n_steps = slot_draws.shape[0]
    n_rec = probs_out.shape[0]
    logw = np.empty(n_c + 1, np.float64)
    for t in range(1, n_steps + 1):
        i = slot_draws[t - 1]
        old = slots[i]
        m_rest = m
        if old >= 0:
            for b in range(nbits[old]):
                ell = bits[old, b]
                cnt[ell] -= 1
                if cnt[ell] == 0:  # bit uncovered: every candidate holding it would now set it
                    for o in range(start[ell], start[ell + 1]):
                        d[owners[o]] += sgn[ell]
            in_p[old] = False
            m_rest = m - 1
        log_slot = -math.log(c_max - m_rest)
        for j in range(n_c):
            if in_p[j]:
                logw[j] = NEG_INF
            else:
                logw[j] = lam * d[j] + log_rho[j] + log_slot
        logw[n_c] = 0.0
        new = _draw(logw, n_c + 1, uniforms[t - 1])
        if t <= n_rec:
            for j in range(n_c + 1):
                probs_out[t - 1, j] = logw[j]
        if new == n_c:
            new = -1
        if new >= 0:
            for b in range(nbits[new]):
                ell = bits[new, b]
                if cnt[ell] == 0:  # bit becomes covered
                    for o in range(start[ell], start[ell + 1]):
                        d[owners[o]] -= sgn[ell]
                cnt[ell] += 1
            in_p[new] = True
        if new != old:
            if old >= 0:
                _close(counts, old, enter[old], t, burn_in, n_steps)
            if new >= 0:
                enter[new] = t
        slots[i] = new
        m = m_rest + (1 if new >= 0 else 0)
    for j in range(n_c):
        if in_p[j]:
            _close(counts, j, enter[j], n_steps + 1, burn_in, n_steps)


BLOCK = 16  # options per block of the two-level running sums (see _block_weights)
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693147180369123816490  # ln 2 in two parts (Cody-Waite): _LN2_HI has 32 significant bits, so
_LN2_LO = 1.90821492927058770002e-10  # k * _LN2_HI is exact for the |k| <= 1022 used here


@njit(cache=True, inline="always")
def _exp_nonpos(d):
    """exp(d) for d <= 0 or -inf, within ~2 ulp of libm (Cody-Waite reduction, degree-12 Taylor polynomial on
    |r| <= ln 2 / 2, 2^k from its bits). Below -708 (under the smallest normal double) it returns 0.0. Straight-line
    arithmetic in a fixed order: the compiler vectorises a loop of it (AVX2/AVX-512), with the same bits as scalar."""
    dd = d if d > -708.0 else -708.0
    k = math.floor(dd * _LOG2E + 0.5)
    r = (dd - k * _LN2_HI) - k * _LN2_LO
    p = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6 + r * (1.0 / 24 + r * (1.0 / 120 + r * (1.0 / 720 + r * (
        1.0 / 5040 + r * (1.0 / 40320 + r * (1.0 / 362880 + r * (1.0 / 3628800 + r * (1.0 / 39916800 + r * (
            1.0 / 479001600))))))))))))
    scale = np.int64((np.int64(k) + 1023) << 52).view(np.float64)
    return p * scale if d > -708.0 else 0.0


@njit(cache=True)
def _block_weights(logw, n_pad, w, bcum):
    """The transition distribution from the log weights ``logw`` (length ``n_pad``, a multiple of BLOCK, padded
    with -inf): ``w`` = exp(logw - max) and ``bcum[b]`` = running sum of the block sums up to block b (left to right;
    a block's sum is a fixed pairwise tree). Returns the last option with positive weight (the fallback of
    :func:`_block_search`). Every loop is a fixed sequence of IEEE operations: the same bits on any machine."""
    nb = n_pad // BLOCK
    mx = NEG_INF
    for b in range(nb):
        o = b * BLOCK
        mb = logw[o]
        for k in range(1, BLOCK):
            v = logw[o + k]
            mb = v if v > mb else mb
        mx = mb if mb > mx else mx
    for j in range(n_pad):
        w[j] = _exp_nonpos(logw[j] - mx)
    acc = 0.0
    last = -1
    for b in range(nb):
        o = b * BLOCK
        s0 = (w[o] + w[o + 8]) + (w[o + 4] + w[o + 12])
        s1 = (w[o + 2] + w[o + 10]) + (w[o + 6] + w[o + 14])
        s2 = (w[o + 1] + w[o + 9]) + (w[o + 5] + w[o + 13])
        s3 = (w[o + 3] + w[o + 11]) + (w[o + 7] + w[o + 15])
        acc += (s0 + s1) + (s2 + s3)
        bcum[b] = acc
    for j in range(n_pad - 1, -1, -1):
        if w[j] > 0.0:
            last = j
            break
    return last


@njit(cache=True)
def _block_search(w, bcum, nb, target, last):
    """Inverse-CDF draw over the options in index order: the first block whose running sum exceeds ``target``
    (bisection), then the first option in it whose running sum (from the previous blocks' sum) exceeds it; ``last``
    (the last positive option) if rounding put target at or above the total, the block's last positive option if
    rounding left its own sum short of the block sum."""
    if not target < bcum[nb - 1]:
        return last
    lo, hi = 0, nb - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if target < bcum[mid]:
            hi = mid
        else:
            lo = mid + 1
    acc = bcum[lo - 1] if lo > 0 else 0.0
    o = lo * BLOCK
    pick = -1
    for k in range(BLOCK):
        v = w[o + k]
        acc += v
        if v > 0.0:
            pick = o + k
            if target < acc:
                return pick
    return pick


@njit(cache=True)
def jlt_gibbs_kernel(Gc, z, inv2s2, log_rho, slots, slot_draws, uniforms, burn_in, counts, probs_out):
    """JLT analogue of :func:`blip_gibbs_kernel`. ``Gc`` = X_cand X_cand^T (the candidates' Gram matrix, contiguous),
    ``z`` = X_cand y, ``inv2s2`` = 1/(2 sigma^2). Reuse and arithmetic: module notes; reference:
    :func:`jlt_gibbs_kernel_scan`."""
    n_c = z.shape[0]
    c_max = slots.shape[0]
    n_opt = n_c + 1
    nb = (n_opt + BLOCK - 1) // BLOCK
    n_pad = nb * BLOCK
    diag = np.empty(n_c, np.float64)
    for j in range(n_c):
        diag[j] = Gc[j, j]
    s_acc = np.zeros(n_c, np.float64)
    in_p = np.zeros(n_c, np.bool_)
    mask = np.zeros(n_c, np.float64)  # -inf where the candidate is held by another slot
    enter = np.zeros(n_c, np.int64)
    m = 0
    for s in range(c_max):
        k = slots[s]
        if k >= 0:
            in_p[k] = True
            mask[k] = NEG_INF
            m += 1
            for j in range(n_c):
                s_acc[j] += Gc[k, j]
    n_steps = slot_draws.shape[0]
    n_rec = probs_out.shape[0]
    logw = np.full(n_pad, NEG_INF)
    w_p = np.zeros(n_pad, np.float64)  # distribution of an empty slot's redraw under the current profile P
    bcum_p = np.empty(nb, np.float64)
    w_k = np.zeros(n_pad, np.float64)  # distribution of an occupied slot's redraw (P without its item)
    bcum_k = np.empty(nb, np.float64)
    last_p = -1
    valid_p = False  # w_p, bcum_p are up to date with P
    for t in range(1, n_steps + 1):
        i = slot_draws[t - 1]
        old = slots[i]
        reuse_k = False
        if old >= 0:
            m_rest = m - 1
            mask[old] = 0.0
            log_slot = -math.log(c_max - m_rest)
            for j in range(n_c):
                sj = s_acc[j] - Gc[old, j]
                logw[j] = inv2s2 * (2.0 * z[j] - 2.0 * sj - diag[j]) + log_rho[j] + log_slot + mask[j]
            logw[n_c] = 0.0
            last_k = _block_weights(logw, n_pad, w_k, bcum_k)
            new = _block_search(w_k, bcum_k, nb, uniforms[t - 1] * bcum_k[nb - 1], last_k)
            w, total = w_k, bcum_k[nb - 1]
            if new == n_c:  # the item leaves, the slot stays empty: P loses it, and w_k is the new P's empty-slot
                w_k, w_p = w_p, w_k  # distribution (m_rest, scores and mask as computed here): keep it
                bcum_k, bcum_p = bcum_p, bcum_k
                last_p = last_k
                reuse_k = True
        else:
            m_rest = m
            if not valid_p:
                log_slot = -math.log(c_max - m_rest)
                for j in range(n_c):
                    logw[j] = inv2s2 * (2.0 * z[j] - 2.0 * s_acc[j] - diag[j]) + log_rho[j] + log_slot + mask[j]
                logw[n_c] = 0.0
                last_p = _block_weights(logw, n_pad, w_p, bcum_p)
                valid_p = True
            new = _block_search(w_p, bcum_p, nb, uniforms[t - 1] * bcum_p[nb - 1], last_p)
            w, total = w_p, bcum_p[nb - 1]
        if t <= n_rec:
            for j in range(n_opt):
                probs_out[t - 1, j] = w[j] / total
        if new == n_c:
            new = -1
        if new != old:  # P changes: the item leaving gives its row of G back, the item entering adds its own
            valid_p = reuse_k
            if old >= 0:
                in_p[old] = False
                for j in range(n_c):
                    s_acc[j] -= Gc[old, j]
                _close(counts, old, enter[old], t, burn_in, n_steps)
            if new >= 0:
                in_p[new] = True
                mask[new] = NEG_INF
                for j in range(n_c):
                    s_acc[j] += Gc[new, j]
                enter[new] = t
        elif old >= 0:
            mask[old] = NEG_INF  # the item stays: P, s_acc and w_p as they were
        slots[i] = new
        m = m_rest + (1 if new >= 0 else 0)
    for j in range(n_c):
        if in_p[j]:
            _close(counts, j, enter[j], n_steps + 1, burn_in, n_steps)


@njit(cache=True)
def jlt_gibbs_kernel_scan(G, cand, z, inv2s2, log_rho, slots, slot_draws, uniforms, burn_in, counts, probs_out):
    """Reference of :func:`jlt_gibbs_kernel` (``G`` = X X^T over all items, ``cand`` the candidates' item ids; otherwise
    the same arguments): every transition rebuilds its distribution — one row of G subtracted (item leaving), one
    added (item entering), one pass over the candidates' scores, libm's exp and sequential sums (:func:`_draw`)."""
    n_c = cand.shape[0]
    c_max = slots.shape[0]
    diag = np.empty(n_c, np.float64)
    for j in range(n_c):
        diag[j] = G[cand[j], cand[j]]
    s_acc = np.zeros(n_c, np.float64)
    in_p = np.zeros(n_c, np.bool_)
    enter = np.zeros(n_c, np.int64)
    m = 0
    for s in range(c_max):
        k = slots[s]
        if k >= 0:
            in_p[k] = True
            m += 1
            gk = cand[k]
            for j in range(n_c):
                s_acc[j] += G[gk, cand[j]]
    n_steps = slot_draws.shape[0]
    n_rec = probs_out.shape[0]
    logw = np.empty(n_c + 1, np.float64)
    for t in range(1, n_steps + 1):
        i = slot_draws[t - 1]
        old = slots[i]
        m_rest = m
        if old >= 0:
            go = cand[old]
            for j in range(n_c):
                s_acc[j] -= G[go, cand[j]]
            in_p[old] = False
            m_rest = m - 1
        log_slot = -math.log(c_max - m_rest)
        for j in range(n_c):
            if in_p[j]:
                logw[j] = NEG_INF
            else:
                logw[j] = inv2s2 * (2.0 * z[j] - 2.0 * s_acc[j] - diag[j]) + log_rho[j] + log_slot
        logw[n_c] = 0.0
        new = _draw(logw, n_c + 1, uniforms[t - 1])
        if t <= n_rec:
            for j in range(n_c + 1):
                probs_out[t - 1, j] = logw[j]
        if new == n_c:
            new = -1
        if new >= 0:
            gn = cand[new]
            for j in range(n_c):
                s_acc[j] += G[gn, cand[j]]
            in_p[new] = True
        if new != old:
            if old >= 0:
                _close(counts, old, enter[old], t, burn_in, n_steps)
            if new >= 0:
                enter[new] = t
        slots[i] = new
        m = m_rest + (1 if new >= 0 else 0)
    for j in range(n_c):
        if in_p[j]:
            _close(counts, j, enter[j], n_steps + 1, burn_in, n_steps)


# ----------------------------------------------------------------------------------------------------------------------
# Plain references: full recomputation of the posterior weight of every option of every transition.

def blip_log_posterior(profile, cand_bits, cand_nbits, btilde, p_eps, log_rho, c_max):
    """log of lik(b~ | P) (3.31) * prod rho * (c_max - m)!/c_max! for a profile given as candidate indices."""
    L = len(btilde)
    B = np.zeros(L, dtype=np.uint8)
    for k in profile:
        B[cand_bits[k, :cand_nbits[k]]] = 1
    w = int(np.sum(B ^ btilde))
    m = len(profile)
    return (w * math.log(p_eps) + (L - w) * math.log1p(-p_eps) + float(sum(log_rho[k] for k in profile))
            + math.lgamma(c_max - m + 1) - math.lgamma(c_max + 1))


def jlt_log_posterior(profile, Xc, y, sigma, log_rho, c_max):
    r = y - (Xc[list(profile)].astype(np.float64).sum(axis=0) if len(profile) else 0.0)
    m = len(profile)
    return (-float(r @ r) / (2 * sigma * sigma) + float(sum(log_rho[k] for k in profile))
            + math.lgamma(c_max - m + 1) - math.lgamma(c_max + 1))


def blip_gibbs_numpy(bits, nbits, sgn, lam, log_rho, slots, slot_draws, uniforms, burn_in):
    """Vectorised numpy baseline of :func:`blip_gibbs_kernel` (the benchmark's like-for-like comparison):
    the same chain from the same inputs, with the per-transition work done by whole-array numpy operations instead
    of the kernel's incremental bookkeeping — bit counts ``cnt`` updated with ``np.add.at`` over the item's bits, and
    every candidate's gain ``d_j = Σ_{l ∈ X_j, cnt(l) = 0} sgn(l)`` recomputed by one gather over the (candidates × K)
    bit table. Returns ``(counts, slots)``; counts as in the kernel (post-burn-in states holding each candidate)."""
    bits = np.asarray(bits, np.int64)
    nbits = np.asarray(nbits, np.int64)
    sgn = np.asarray(sgn, np.float64)
    log_rho = np.asarray(log_rho, np.float64)
    n_c, K = bits.shape
    c_max = len(slots)
    valid = np.arange(K)[None, :] < nbits[:, None]
    safe_bits = np.where(valid, bits, 0)
    sgn_bits = np.where(valid, sgn[safe_bits], 0.0)
    slots = np.array(slots, dtype=np.int64)
    cnt = np.zeros(len(sgn), np.int64)
    in_p = np.zeros(n_c, bool)
    for k in slots[slots >= 0]:
        np.add.at(cnt, bits[k, :nbits[k]], 1)
        in_p[k] = True
    counts = np.zeros(n_c, np.int64)
    n_steps = len(slot_draws)
    for t in range(1, n_steps + 1):
        i = int(slot_draws[t - 1])
        old = int(slots[i])
        if old >= 0:
            np.add.at(cnt, bits[old, :nbits[old]], -1)
            in_p[old] = False
        m_rest = int(in_p.sum())
        d = ((cnt[safe_bits] == 0) * sgn_bits).sum(axis=1)
        w = np.empty(n_c + 1)
        w[:n_c] = lam * d + log_rho - math.log(c_max - m_rest)
        w[:n_c][in_p] = -np.inf
        w[n_c] = 0.0
        w = np.exp(w - w.max())
        acc = np.cumsum(w)
        target = uniforms[t - 1] * acc[-1]
        hit = np.flatnonzero((target < acc) & (w > 0))
        new = int(hit[0]) if len(hit) else int(np.flatnonzero(w > 0)[-1])
        if new == n_c:
            new = -1
        if new >= 0:
            np.add.at(cnt, bits[new, :nbits[new]], 1)
            in_p[new] = True
        slots[i] = new
        if t > burn_in:
            counts[in_p] += 1
    return counts, slots


def gibbs_reference(log_post, n_c, slots, slot_draws, uniforms, burn_in, n_record=0):
    """Plain Python random-scan Gibbs over codings; ``log_post(list_of_candidates)`` is the full log posterior weight.

    Returns (counts, final slots, recorded transition distributions)."""
    slots = np.array(slots, dtype=np.int64)
    counts = np.zeros(n_c, dtype=np.int64)
    rec = []
    for t in range(1, len(slot_draws) + 1):
        i = int(slot_draws[t - 1])
        rest = [int(k) for s, k in enumerate(slots) if s != i and k >= 0]
        opts = [k for k in range(n_c) if k not in rest]
        lw = np.full(n_c + 1, -np.inf)
        for k in opts:
            lw[k] = log_post(rest + [k])
        lw[n_c] = log_post(rest)
        w = np.exp(lw - lw.max())
        probs = w / w.sum()
        target = uniforms[t - 1] * w.sum()
        acc, chosen = 0.0, n_c
        for j in range(n_c + 1):
            acc += w[j]
            if target < acc and w[j] > 0:
                chosen = j
                break
        if t <= n_record:
            rec.append(probs)
        slots[i] = -1 if chosen == n_c else chosen
        if t > burn_in:
            for k in slots:
                if k >= 0:
                    counts[k] += 1
    return counts, slots, np.array(rec)


def exact_marginals(log_post, n_c, c_max):
    """P[j in P | obs] by enumerating every profile of at most c_max candidates (tiny problems only)."""
    from itertools import combinations

    profs, lws = [], []
    for m in range(c_max + 1):
        for comb in combinations(range(n_c), m):
            # log_post includes the coding factor (c_max - m)!/c_max!; undo it: the profile weight is lik * prior
            lw = log_post(list(comb)) - math.lgamma(c_max - m + 1) + math.lgamma(c_max + 1)
            profs.append(comb)
            lws.append(lw)
    lws = np.array(lws)
    w = np.exp(lws - lws.max())
    w /= w.sum()
    marg = np.zeros(n_c)
    for comb, wi in zip(profs, w):
        for k in comb:
            marg[k] += wi
    return marg
