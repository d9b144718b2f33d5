"""One synchronous round of the gradient updates (2)-(5)/(9), as a numba kernel and a plain numpy reference.

A round reads ``U(t-1), V(t-1)`` and writes ``U(t), V(t)``:

- every participating user ``i`` (all users in S1/S2, the selected online users in S3) computes, from her own ratings,
  ``g_u = sum_j -2 v_j e_ij`` (eq. 4) and her local item gradients ``-2 u_i e_ij`` (eq. 5 terms), with
  ``e_ij = r_ij - u_i^T v_j``; then ``u_i <- u_i - gamma (w_u[i] g_u + 2 lambda u_i)`` and, when ``max_norm`` is finite,
  ``u_i <- u_i / max(1, ||u_i|| / max_norm)`` (the proof of Theorem 1 needs ``||u_i|| <= 1``);
- every item ``j`` with at least one participating rater: ``v_j <- v_j - gamma (w_i[j] (G_j + noise_j) + 2 mu v_j)``
  where ``G_j`` is the sum of the local item gradients (what the third party's aggregate holds) and ``noise_j`` is
  ``eta_j + rho~_j(t)`` (eq. 9 / 13; zero for the non-private baseline).

``w_u``/``w_i`` are the gradient weights: ``1/n_i`` and ``1/k_j`` (mean over the user's / item's ratings) by default,
or 1 for the literal sums of (4)-(5) (see :mod:`dpmf_lib.objpert.mf` for why the mean is the default).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def mf_round_nb(indptr, indices, values, participants, U, V, user_w, item_w, item_noise, gamma, lam, mu,
                update_users, update_items, max_norm):
    """In place on ``U``, ``V`` (float32). Returns the uint8 mask of items that had a participating rater."""
    m, d = V.shape
    G = np.zeros((m, d), dtype=np.float32)
    touched = np.zeros(m, dtype=np.uint8)
    gu = np.zeros(d, dtype=np.float32)
    g = np.float32(gamma)
    two_lam = np.float32(2.0 * lam)
    two_mu = np.float32(2.0 * mu)
    mn2 = max_norm * max_norm
    for p in range(participants.shape[0]):
        i = participants[p]
        for l in range(d):
            gu[l] = 0.0
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            pred = np.float32(0.0)
            for l in range(d):
                pred += U[i, l] * V[j, l]
            e2 = np.float32(-2.0) * (values[q] - pred)
            for l in range(d):
                gu[l] += e2 * V[j, l]
                G[j, l] += e2 * U[i, l]
            touched[j] = 1
        if update_users:
            s = 0.0
            wu = user_w[i]
            for l in range(d):
                x = U[i, l] - g * (wu * gu[l] + two_lam * U[i, l])
                gu[l] = x
                s += x * x
            scale = np.float32(1.0)
            if s > mn2:
                scale = np.float32(max_norm / np.sqrt(s))
            for l in range(d):
                U[i, l] = gu[l] * scale
    if update_items:
        for j in range(m):
            if touched[j] == 1:
                wj = item_w[j]
                for l in range(d):
                    V[j, l] -= g * (wj * (G[j, l] + item_noise[j, l]) + two_mu * V[j, l])
    return touched


def mf_round_reference(indptr, indices, values, participants, U, V, user_w, item_w, item_noise, gamma, lam, mu,
                       update_users, update_items, max_norm):
    """Vectorised numpy version of :func:`mf_round_nb` (float64 internally; same in-place contract)."""
    m, d = V.shape
    parts = np.asarray(participants, dtype=np.int64)
    counts = (indptr[parts + 1] - indptr[parts]).astype(np.int64)
    rows = np.repeat(parts, counts)
    pos = (np.concatenate([np.arange(indptr[i], indptr[i + 1]) for i in parts]) if len(parts)
           else np.zeros(0, dtype=np.int64))
    cols = indices[pos].astype(np.int64)
    r = values[pos].astype(np.float64)
    U0 = U.astype(np.float64)
    V0 = V.astype(np.float64)
    e2 = -2.0 * (r - np.einsum("kd,kd->k", U0[rows], V0[cols]))
    GU = np.zeros_like(U0)
    np.add.at(GU, rows, e2[:, None] * V0[cols])
    GV = np.zeros_like(V0)
    np.add.at(GV, cols, e2[:, None] * U0[rows])
    touched = np.zeros(m, dtype=np.uint8)
    touched[cols] = 1
    if update_users:
        newu = U0[parts] - gamma * (user_w[parts][:, None].astype(np.float64) * GU[parts] + 2.0 * lam * U0[parts])
        nrm = np.linalg.norm(newu, axis=1)
        scale = np.where(nrm > max_norm, max_norm / np.maximum(nrm, 1e-300), 1.0)
        U[parts] = (newu * scale[:, None]).astype(U.dtype)
    if update_items:
        t = touched == 1
        V[t] = (V0[t] - gamma * (item_w[t][:, None] * (GV[t] + item_noise[t].astype(np.float64)) + 2.0 * mu * V0[t])
                ).astype(V.dtype)
    return touched


@njit(cache=True)
def abs_errors_nb(users, items, values, U, V):
    """``|r_ij - u_i^T v_j|`` for every rating (float32)."""
    n = users.shape[0]
    d = U.shape[1]
    out = np.empty(n, dtype=np.float32)
    for q in range(n):
        i = users[q]
        j = items[q]
        s = np.float32(0.0)
        for l in range(d):
            s += U[i, l] * V[j, l]
        out[q] = abs(values[q] - s)
    return out


def abs_errors_reference(users, items, values, U, V):
    return np.abs(values.astype(np.float64) - np.einsum("kd,kd->k", U[users].astype(np.float64),
                                                        V[items].astype(np.float64)))


@njit(cache=True, parallel=True)
def item_gram_nb(iptr, users, values, U, A, b):
    """Per-item normal equations of S1's exact minimiser, a segment sum over the ratings grouped by item:
    ``A[j] = sum_{i rates j} u_i u_i^T``, ``b[j] = sum_i u_i r_ij`` (float64 accumulation; A, b zeroed by the caller).

    ``iptr`` (n_items + 1), ``users``, ``values``: the ratings sorted by item (item CSR). Items are independent, so
    ``prange`` over items writes disjoint rows without races (np.add.at on the n x d x d outer products was the
    bottleneck it replaces: 14 s and 2 GB on ML-100K at d = 50).
    """
    m = iptr.shape[0] - 1
    d = U.shape[1]
    for j in prange(m):
        for p in range(iptr[j], iptr[j + 1]):
            i = users[p]
            r = np.float64(values[p])
            for a in range(d):
                ua = np.float64(U[i, a])
                b[j, a] += ua * r
                for c in range(a + 1):
                    A[j, a, c] += ua * np.float64(U[i, c])
        for a in range(d):
            for c in range(a):
                A[j, c, a] = A[j, a, c]


def item_gram_reference(users, items, values, U, n_items):
    """Plain numpy version of :func:`item_gram_nb` (``np.add.at`` over the outer products; small problems only)."""
    Ud = U.astype(np.float64)
    d = Ud.shape[1]
    A = np.zeros((n_items, d, d))
    b = np.zeros((n_items, d))
    uu = Ud[users]
    np.add.at(A, items, uu[:, :, None] * uu[:, None, :])
    np.add.at(b, items, uu * values[:, None].astype(np.float64))
    return A, b
