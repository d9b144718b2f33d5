"""numba kernels (float32 data, float64 accumulators) of the item-item probabilistic NBM; references in reference.py.

Prediction (paper eq. 2), for user u and item i, with u's training ratings R_u (item i itself excluded):
    neighbours  J = the ≤ N_k items j ∈ R_u \\ {i} with the largest |s_ij| (ties: earlier CSR position first)
    N = Σ_J s_ij c_uj,  D = Σ_J |s_ij|,  D' = max(D, C),  p = N / D' (0 when D' = 0),  r̂_ui = r̄_i + p
with c_uj = r_uj - r̄_j. C = 0 gives the plain kNN formula; C > 0 is DPSGD-PNBM's lower bound on |S_i| I_u.
Gradient (eq. 5) of r̂_ui w.r.t. s_ij, j ∈ J:  ∂r̂/∂s_ij = (c_uj - p sgn(s_ij) [D > C]) / D'.
Per-term clipping for the DP bound: e ∈ [-e_max, e_max], (c_uj - p sgn(s_ij)) ∈ [-f_max, f_max]; then every entry of a
per-rating gradient obeys |G_ij(u)| ≤ e_max f_max / C (the paper's bound with f_max = φ).
``clip_pred`` (DPPS-PNBM): the gradient of the clipped loss ½(clip(r̂_ui, r_min, r_max) − r_ui)², i.e. e ∂r̂/∂S while
r̂ lies in the range and 0 outside it (where the clipped loss is flat) — the loss whose every term is ≤ (r_max −
r_min)², so the posterior the sampler targets has the bounded log-likelihood the privacy argument needs.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ..counter_rng import counter_mix


@njit(cache=True)
def _select(S, i, uitems, a, b, Nk, sel, absbuf):
    """Fill sel[:n] with CSR positions of u's neighbours for item i; returns n."""
    n = 0
    for k in range(a, b):
        if uitems[k] != i:
            sel[n] = k
            n += 1
    if n > Nk:
        # the Nk largest |s_ij|, ties at the threshold to the earliest CSR positions, kept in CSR order (the
        # deterministic summation order) — the same set as a stable argsort by -|s| (reference.neighbours), found
        # by one selection (np.partition) instead of a sort: O(n) instead of O(n log n) per rating
        for q in range(n):
            absbuf[q] = abs(S[i, uitems[sel[q]]])
        thr = np.partition(absbuf[:n], n - Nk)[n - Nk]  # the Nk-th largest |s|
        ngt = 0
        for q in range(n):
            if absbuf[q] > thr:
                ngt += 1
        neq = Nk - ngt  # how many of the ties at thr are kept (earliest first)
        m = 0
        for q in range(n):
            a = absbuf[q]
            if a > thr or (a == thr and neq > 0):
                if a == thr:
                    neq -= 1
                sel[m] = sel[q]
                m += 1
        n = Nk
    return n


@njit(cache=True)
def _ratio(S, i, uitems, ucent, sel, n, C):
    num = 0.0
    den = 0.0
    for q in range(n):
        k = sel[q]
        s = S[i, uitems[k]]
        num += s * ucent[k]
        den += abs(s)
    deff = den if den > C else C
    p = num / deff if deff > 0 else 0.0
    return p, den, deff


@njit(cache=True, parallel=True)
def predict_kernel(S, uptr, uitems, ucent, rbar, tusers, titems, Nk, C, rmin, rmax, out):
    """out[k] = clip(r̄_i + p, rmin, rmax) for test pairs (tusers[k], titems[k])."""
    maxlen = 0
    for u in range(len(uptr) - 1):
        maxlen = max(maxlen, uptr[u + 1] - uptr[u])
    for k in prange(len(tusers)):
        u = tusers[k]
        i = titems[k]
        sel = np.empty(maxlen, dtype=np.int64)
        absbuf = np.empty(maxlen, dtype=np.float64)
        n = _select(S, i, uitems, uptr[u], uptr[u + 1], Nk, sel, absbuf)
        p, den, deff = _ratio(S, i, uitems, ucent, sel, n, C)
        r = rbar[i] + p
        out[k] = min(max(r, rmin), rmax)


@njit(cache=True, parallel=True)
def grad_kernel(S, uptr, uitems, ucent, rbar, bptr, busers, bvals, Nk, C, e_max, f_max, rmin, rmax, clip_pred, G):
    """G[i, j] += Σ_{(u, i) in batch} e_ui ∂r̂_ui/∂s_ij (clipped as in the module doc); batch grouped by item.

    bptr (M+1), busers, bvals: the minibatch, grouped by item i (rows bptr[i]:bptr[i+1] are the ratings of item i;
    duplicates allowed). Rows of G are written by one thread each (prange over items): no races.
    Returns nothing; also writes nothing outside the rows of items with batch ratings.
    """
    M = len(bptr) - 1
    maxlen = 0
    for u in range(len(uptr) - 1):
        maxlen = max(maxlen, uptr[u + 1] - uptr[u])
    for i in prange(M):
        if bptr[i + 1] == bptr[i]:
            continue
        sel = np.empty(maxlen, dtype=np.int64)
        absbuf = np.empty(maxlen, dtype=np.float64)
        for q0 in range(bptr[i], bptr[i + 1]):
            u = busers[q0]
            n = _select(S, i, uitems, uptr[u], uptr[u + 1], Nk, sel, absbuf)
            p, den, deff = _ratio(S, i, uitems, ucent, sel, n, C)
            if deff <= 0:
                continue
            rh = rbar[i] + p
            if clip_pred:
                # the gradient of the clipped loss ½(clip(r̂) − r)²: (clip(r̂) − r) ∂r̂/∂S inside the range, 0 outside
                if rh < rmin or rh > rmax:
                    continue
            e = rh - bvals[q0]
            e = min(max(e, -e_max), e_max)
            dsg = 1.0 if den > C else 0.0
            for q in range(n):
                k = sel[q]
                j = uitems[k]
                s = S[i, j]
                sg = 1.0 if s > 0 else (-1.0 if s < 0 else 0.0)
                f = ucent[k] - p * sg * dsg
                f = min(max(f, -f_max), f_max)
                G[i, j] += np.float32(e * f / deff)


@njit(cache=True)
def mf_epoch_kernel(users, items, vals, order, noise, P, Q, rbar, lr, lam, e_max):
    """One pass of DPSGD-MF (Berlioz et al. 2015): e = r - (r̄_i + p_u·q_i) + noise_k, clamped to ±e_max, then SGD."""
    d = P.shape[1]
    for t in range(len(order)):
        k = order[t]
        u = users[k]
        i = items[k]
        pred = rbar[i]
        for f in range(d):
            pred += P[u, f] * Q[i, f]
        e = vals[k] - pred + noise[k]
        e = min(max(e, -e_max), e_max)
        for f in range(d):
            pu = P[u, f]
            qi = Q[i, f]
            P[u, f] = pu + lr * (e * qi - lam * pu)
            Q[i, f] = qi + lr * (e * pu - lam * qi)


@njit(cache=True, parallel=True)
def mf_predict_kernel(P, Q, rbar, tusers, titems, rmin, rmax, out):
    d = P.shape[1]
    for k in prange(len(tusers)):
        s = rbar[titems[k]]
        for f in range(d):
            s += P[tusers[k], f] * Q[titems[k], f]
        out[k] = min(max(s, rmin), rmax)


# ---- SGLD update (eq. 11); the Gaussian draws come from numpy (seeded Generator) ----
@njit(cache=True, parallel=True)
def sgld_update_kernel(S, G, Hinv, present, gscale, lam, a, sd, Z):
    """S ← S - a (gscale G + λ S ∘ H⁻¹ ∘ 𝕀[i, j ∈ Φ]) + sd Z on off-diagonal entries (Z ~ N(0, 1)); S_ii = 0."""
    M = S.shape[0]
    for i in prange(M):
        pi = present[i]
        for j in range(M):
            if j == i:
                S[i, j] = 0.0
                continue
            g = gscale * G[i, j]
            if pi and present[j]:
                g += lam * S[i, j] * Hinv[i, j]
            S[i, j] = np.float32(S[i, j] - a * g + sd * Z[i, j])


# ---- DPSGD-PNBM with per-user L1 clipping (ours, DP-valid); reference: reference.clipped_gradient ----
@njit(cache=True)
def _user_row(S, i, uitems, ucent, rbar, a, b, Nk, C, e_max, f_max, r, sel, absbuf, row):
    """row[k - a] += e ∂r̂_ui/∂s_{i, uitems[k]} for one rating (u, i, r) of the user whose CSR span is [a, b)."""
    n = _select(S, i, uitems, a, b, Nk, sel, absbuf)
    p, den, deff = _ratio(S, i, uitems, ucent, sel, n, C)
    if deff <= 0:
        return
    e = rbar[i] + p - r
    e = min(max(e, -e_max), e_max)
    dsg = 1.0 if den > C else 0.0
    for q in range(n):
        k = sel[q]
        s = S[i, uitems[k]]
        sg = 1.0 if s > 0 else (-1.0 if s < 0 else 0.0)
        f = ucent[k] - p * sg * dsg
        f = min(max(f, -f_max), f_max)
        row[k - a] += e * f / deff


@njit(cache=True)
def clipped_grad_kernel(S, uptr, uitems, ucent, rbar, bptr, bitems, bvals, Nk, C, e_max, f_max, clip_l1, G, norms):
    """G += Σ_u min(1, clip_l1/‖g_u‖₁) g_u with g_u = Σ_{(u, i) in batch} e_ui ∂r̂_ui/∂S (the grad_kernel clips).

    The unit clipped is the user's whole contribution, not one rating's: r_uj enters every prediction of u in which j
    is a neighbour (through c_uj), so changing it moves all of g_u, but no other user's term (given item means that do
    not depend on the data). ‖g_u‖₁ ≤ clip_l1 after the clip, hence one changed rating moves G by ≤ 2 clip_l1 in L1.
    bptr (n_users+1), bitems, bvals: the minibatch grouped by user, items sorted within a user (duplicates allowed:
    they are summed before the norm is taken). norms[u] = ‖g_u‖₁ before clipping (float64; 0 for users not in the
    batch). Sequential over users: every user writes into rows of other users' items, so a prange would race.
    Two passes per user (norm, then scaled add) recompute the rows instead of storing an n_u × n_u buffer.
    """
    maxlen = 0
    for u in range(len(uptr) - 1):
        maxlen = max(maxlen, uptr[u + 1] - uptr[u])
    sel = np.empty(maxlen, dtype=np.int64)
    absbuf = np.empty(maxlen, dtype=np.float64)
    row = np.zeros(maxlen, dtype=np.float64)
    for u in range(len(bptr) - 1):
        if bptr[u + 1] == bptr[u]:
            continue
        a = uptr[u]
        b = uptr[u + 1]
        nu = b - a
        scale = 1.0
        for pas in range(2):
            tot = 0.0
            q0 = bptr[u]
            while q0 < bptr[u + 1]:
                i = bitems[q0]
                for k in range(nu):
                    row[k] = 0.0
                q1 = q0
                while q1 < bptr[u + 1] and bitems[q1] == i:  # duplicates of (u, i): one row, summed
                    _user_row(S, i, uitems, ucent, rbar, a, b, Nk, C, e_max, f_max, bvals[q1], sel, absbuf, row)
                    q1 += 1
                for k in range(nu):
                    if pas == 0:
                        tot += abs(row[k])
                    elif row[k] != 0.0:
                        G[i, uitems[a + k]] += np.float32(scale * row[k])
                q0 = q1
            if pas == 0:
                norms[u] = tot
                scale = clip_l1 / tot if tot > clip_l1 else 1.0


# ---- Fused noise + update kernels (for speed): the noise is generated inside the kernel ----
# Counter-based generator: entry (i, j) of an M×M draw with 64-bit key k uses splitmix64's output for counter
# c = i·M + j (Laplace) or 64·(i·⌈M/2⌉ + p) + attempt for the pair p of row i (Gaussian, polar method), i.e.
# counter_rng.counter_mix(k, c) = mix64(k + (c + 1)·γ) with γ = 0x9E3779B97F4A7C15 — SplitMix64 jumped to position c,
# which passes BigCrush as a sequential generator. Each entry's value depends only on (k, i, j), so the bytes are the
# same for any number of threads (and any prange schedule). The key of every draw comes from the caller's seeded numpy
# Generator (:func:`draw_key`).
# References (the numpy path kept beside them): model._noisy_step (Laplace) and sgld_update_kernel + numpy's
# standard_normal (Gaussian); tests/lib/nbm/test_fused.py checks the laws (KS) and the update formulas exactly.
_TWO_M52 = 2.0 ** -52
_TWO_M53 = 2.0 ** -53


def draw_key(rng) -> np.uint64:
    """One 64-bit key for a fused draw, taken from the caller's seeded ``numpy.random.Generator``."""
    return np.uint64(rng.integers(0, 2 ** 64, dtype=np.uint64))


@njit(cache=True, inline="always")
def _laplace(key, ctr, b):
    """Laplace(0, b): a random sign (lowest bit) times b·Exp(1), Exp(1) = -log u, u ∈ (0, 1] on a 2^-52 grid."""
    z = counter_mix(key, ctr)
    u = (np.float64(z >> np.uint64(12)) + 1.0) * _TWO_M52
    e = -b * np.log(u)
    return e if (z & np.uint64(1)) == np.uint64(0) else -e


@njit(cache=True, parallel=True)
def laplace_fill_kernel(key, b, out):
    """out[i, j] = Laplace(0, b) from the counter-based stream (i·M + j): the fused kernels' noise, exposed for tests."""
    n, m = out.shape
    for i in prange(n):
        base = np.uint64(i) * np.uint64(m)
        for j in range(m):
            out[i, j] = _laplace(key, base + np.uint64(j), b)


@njit(cache=True, parallel=True)
def dpsgd_step_kernel(S, G, b, key, eta, beta, lam):
    """S ← S − η(β(G + N) + λS) with N_ij ~ Laplace(0, b) on the off-diagonal (no noise when b ≤ 0), S_ii = 0;
    G is zeroed on the way (ready for the next gradient). One pass over S and G; rows in parallel."""
    M = S.shape[0]
    for i in prange(M):
        base = np.uint64(i) * np.uint64(M)
        for j in range(M):
            if j == i:
                S[i, j] = 0.0
                G[i, j] = 0.0
                continue
            g = np.float64(G[i, j])
            if b > 0:
                g += _laplace(key, base + np.uint64(j), b)
            s = np.float64(S[i, j])
            S[i, j] = np.float32(s - eta * (beta * g + lam * s))
            G[i, j] = 0.0


@njit(cache=True, inline="always")
def _normal_pair(key, ctr):
    """Two independent N(0, 1) by Marsaglia's polar method (no trigonometry): attempt a of pair ctr reads stream
    output 64·ctr + a (two 32-bit coordinates in [-1, 1)), accepted when 0 < s = x² + y² < 1 (π/4 of attempts;
    64 consecutive rejections have probability 1e-43 and then the last attempt's point is rescaled onto s < 1)."""
    c = ctr << np.uint64(6)
    x = 0.0
    y = 0.0
    s = 0.0
    for _ in range(64):
        z = counter_mix(key, c)
        c += np.uint64(1)
        x = np.float64(z >> np.uint64(32)) * 4.656612873077393e-10 - 1.0  # 2^-31
        y = np.float64(z & np.uint64(0xFFFFFFFF)) * 4.656612873077393e-10 - 1.0
        s = x * x + y * y
        if 0.0 < s < 1.0:
            break
    if not (0.0 < s < 1.0):
        x, y, s = 0.6, 0.0, 0.36
    f = np.sqrt(-2.0 * np.log(s) / s)
    return x * f, y * f


@njit(cache=True, parallel=True)
def normal_fill_kernel(key, out):
    """out[i, j] = N(0, 1) from the counter-based stream (row i's pairs): the SGLD kernel's noise, for tests."""
    n, m = out.shape
    half = (m + 1) // 2
    for i in prange(n):
        base = np.uint64(i) * np.uint64(half)
        for p in range(half):
            z0, z1 = _normal_pair(key, base + np.uint64(p))
            out[i, 2 * p] = z0
            if 2 * p + 1 < m:
                out[i, 2 * p + 1] = z1


@njit(cache=True, parallel=True)
def sgld_step_batch_kernel(S, G, Hinv, present, gscale, lam, a, sd, key):
    """sgld_update_kernel with Z generated in the kernel (normal_fill_kernel's stream, same key → same Z), for B chains
    in lockstep (S, G: B×M×M float32; lam, a, sd: length-B float64); G is zeroed on the way. Per chain b:
    S ← S - a (gscale G + λ S ∘ H⁻¹ ∘ 𝕀[i, j ∈ Φ]) + sd Z off the diagonal; S_ii = 0. The chains share the
    minibatch (``present``, ``gscale``) and the Gaussian stream (``key``) — common random numbers: z_ij is drawn
    once and used by every chain, so chain b's bytes equal a single-chain run with the same key and its own
    (lam[b], a[b], sd[b]); the noise costs one draw per entry instead of B."""
    B, M = S.shape[0], S.shape[1]
    half = (M + 1) // 2
    for i in prange(M):
        # row i's noise once (pair p of the row → entries 2p, 2p + 1), then each chain's row in one contiguous pass
        z = np.empty(2 * half, dtype=np.float64)
        base = np.uint64(i) * np.uint64(half)
        for p in range(half):
            z[2 * p], z[2 * p + 1] = _normal_pair(key, base + np.uint64(p))
        pi = present[i]
        hrow = Hinv[i]
        for b in range(B):
            srow = S[b, i]
            grow = G[b, i]
            lb, ab, sb = lam[b], a[b], sd[b]
            for j in range(M):
                g = gscale * grow[j]
                if pi and present[j]:
                    g += lb * srow[j] * hrow[j]
                srow[j] = np.float32(srow[j] - ab * g + sb * z[j])
                grow[j] = 0.0
            srow[i] = 0.0  # the diagonal: computed above with the rest of the row, then overwritten
            grow[i] = 0.0


def sgld_step_kernel(S, G, Hinv, present, gscale, lam, a, sd, key):
    """One chain (S, G: M×M float32, updated in place) of :func:`sgld_step_batch_kernel` (B = 1: same bytes, one
    kernel). S ← S - a (gscale G + λ S ∘ H⁻¹ ∘ 𝕀[i, j ∈ Φ]) + sd Z off the diagonal, S_ii = 0, G zeroed."""
    lam, a, sd = (np.array([x], dtype=np.float64) for x in (lam, a, sd))
    sgld_step_batch_kernel(S[None], G[None], Hinv, present, gscale, lam, a, sd, key)  # S[None], G[None]: views
