"""numba kernels (float32 data, float64 accumulators) of the item-item probabilistic NBM; references in reference.py.

Prediction (paper eq. 2), for user u and item i, with u's training ratings R_u (item i itself excluded):
    neighbours  J = the ≤ N_k items j ∈ R_u \\ {i} with the largest |s_ij| (ties: earlier CSR position first)
    N = Σ_J s_ij c_uj,  D = Σ_J |s_ij|,  D' = max(D, C),  p = N / D' (0 when D' = 0),  r̂_ui = r̄_i + p
with c_uj = r_uj - r̄_j. C = 0 gives the plain kNN formula; C > 0 is DPSGD-PNBM's lower bound on |S_i| I_u.
Gradient (eq. 5) of r̂_ui w.r.t. s_ij, j ∈ J:  ∂r̂/∂s_ij = (c_uj - p sgn(s_ij) [D > C]) / D'.
Per-term clipping for the DP bound: e ∈ [-e_max, e_max], (c_uj - p sgn(s_ij)) ∈ [-f_max, f_max]; then every entry of a
per-rating gradient obeys |G_ij(u)| ≤ e_max f_max / C (the paper's bound with f_max = φ).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _select(S, i, uitems, a, b, Nk, sel, absbuf):
    """Fill sel[:n] with CSR positions of u's neighbours for item i; returns n."""
    n = 0
    for k in range(a, b):
        if uitems[k] != i:
            sel[n] = k
            n += 1
    if n > Nk:
        for q in range(n):
            absbuf[q] = -abs(S[i, uitems[sel[q]]])
        order = np.argsort(absbuf[:n], kind="mergesort")
        keep = np.sort(order[:Nk])  # keep CSR order among the selected (deterministic summation order)
        for q in range(Nk):
            absbuf[q] = sel[keep[q]]
        for q in range(Nk):
            sel[q] = np.int64(absbuf[q])
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
                rh = min(max(rh, rmin), rmax)
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


# ---- DPSGD-PNBM with per-user L1 clipping (ours, issue #13 part 3); reference: reference.clipped_gradient ----
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
