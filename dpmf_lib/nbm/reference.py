"""Plain numpy/python references of the kernels in kernels.py (slow; for agreement tests on small problems)."""

from __future__ import annotations

import numpy as np


def neighbours(S, i, items, Nk):
    """Positions (into ``items``) of the ≤ Nk items ≠ i with the largest |s_ij|; ties: earlier position first."""
    pos = [k for k, j in enumerate(items) if j != i]
    if len(pos) > Nk:
        mags = np.array([-abs(float(S[i, items[k]])) for k in pos])
        order = np.argsort(mags, kind="stable")[:Nk]
        pos = [pos[q] for q in sorted(order)]
    return pos


def predict_one(S, i, items, cent, rbar_i, Nk, C):
    """(r̂ unclipped, p, D, D', positions) for one user (``items``, centred ratings ``cent``) and item i."""
    pos = neighbours(S, i, items, Nk)
    num = sum(float(S[i, items[k]]) * float(cent[k]) for k in pos)
    den = sum(abs(float(S[i, items[k]])) for k in pos)
    deff = max(den, C)
    p = num / deff if deff > 0 else 0.0
    return float(rbar_i) + p, p, den, deff, pos


def predict(S, user_rows, rbar, pairs, Nk, C, rmin, rmax):
    """user_rows[u] = (items, centred values); pairs = [(u, i)]; clipped predictions."""
    out = []
    for u, i in pairs:
        items, cent = user_rows[u]
        r, *_ = predict_one(S, i, items, cent, rbar[i], Nk, C)
        out.append(min(max(r, rmin), rmax))
    return np.array(out)


def gradient(S, user_rows, rbar, batch, Nk, C, e_max=np.inf, f_max=np.inf, rmin=-np.inf, rmax=np.inf,
             clip_pred=False):
    """Σ over batch [(u, i, r_ui)] of e_ui ∂r̂_ui/∂S (eq. 5, with the clips of kernels.grad_kernel); dense float64."""
    G = np.zeros(S.shape)
    for u, i, r in batch:
        items, cent = user_rows[u]
        rh, p, den, deff, pos = predict_one(S, i, items, cent, rbar[i], Nk, C)
        if deff <= 0:
            continue
        if clip_pred and not (rmin <= rh <= rmax):
            continue  # the clipped loss is flat outside the range: its gradient is 0
        e = float(np.clip(rh - r, -e_max, e_max))
        for k in pos:
            j = items[k]
            s = float(S[i, j])
            f = float(cent[k]) - p * np.sign(s) * (1.0 if den > C else 0.0)
            G[i, j] += e * float(np.clip(f, -f_max, f_max)) / deff
    return G


def loss(S, user_rows, rbar, batch, Nk, C, rmin=-np.inf, rmax=np.inf):
    """½ Σ (clip(r̂, rmin, rmax) - r)² over the batch (default: no clipping): the function whose gradient is
    :func:`gradient` (unclipped, or with ``clip_pred`` and the same range)."""
    tot = 0.0
    for u, i, r in batch:
        items, cent = user_rows[u]
        rh, *_ = predict_one(S, i, items, cent, rbar[i], Nk, C)
        tot += 0.5 * (min(max(rh, rmin), rmax) - r) ** 2
    return tot


def mf_epoch(users, items, vals, order, noise, P, Q, rbar, lr, lam, e_max):
    P = P.astype(np.float64).copy()
    Q = Q.astype(np.float64).copy()
    for k in order:
        u, i = users[k], items[k]
        e = float(np.clip(vals[k] - (rbar[i] + P[u] @ Q[i]) + noise[k], -e_max, e_max))
        pu, qi = P[u].copy(), Q[i].copy()
        P[u] = pu + lr * (e * qi - lam * pu)
        Q[i] = qi + lr * (e * pu - lam * qi)
    return P, Q


def clipped_gradient(S, user_rows, rbar, batch, Nk, C, e_max, f_max, clip_l1):
    """Reference of kernels.clipped_grad_kernel: (G, norms) with G = Σ_u min(1, clip/‖g_u‖₁) g_u, g_u the
    :func:`gradient` of user u's ratings in ``batch`` [(u, i, r)]; norms[u] = ‖g_u‖₁ (dense float64)."""
    G = np.zeros(S.shape)
    norms = {}
    for u in sorted({int(b[0]) for b in batch}):
        gu = gradient(S, user_rows, rbar, [b for b in batch if int(b[0]) == u], Nk, C, e_max, f_max)
        n = float(np.abs(gu).sum())
        norms[u] = n
        G += gu * (clip_l1 / n if n > clip_l1 else 1.0)
    return G, norms
