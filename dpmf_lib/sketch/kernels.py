"""numba kernels of sketch-based and dense online matrix factorization (Balu 2016, eqs. 4.1–4.4, 4.10–4.13).

Conventions shared by all kernels (float32, contiguous):

- loss ``L = ½ (r − r̂)²`` on mean-corrected ratings, so ``∂L/∂r̂ = r̂ − r`` (thesis eq. 2.7).
- one SGD step reads ``p̃_u`` and ``q̃_i`` (mean over the k rows of the sign-corrected cells, 4.1–4.2), computes
  ``δp_l = η ((r̂−r) q̃_l + λ p̃_l)`` and ``δq_l = η ((r̂−r) p̃_l + λ q̃_l)`` from those reads, and subtracts
  ``s_j · δ`` from each of the k cells of every component (4.3–4.4, *without* the 1/k factor of 4.7, which the thesis
  folds into η). Reads happen before writes, so with collisions between the user and the item cells both deltas
  still add, i.e. the step is exactly ``−η·k·∂R_λ/∂C`` (the equivalence of section 4.1.3).
- data clipping (4.2.1): when ``L > clip`` the rating is skipped for this epoch (``clip = inf`` disables it).
- the dense kernel runs the very same arithmetic on ``P``/``Q`` so that k = 1 (or any k) without collisions gives
  identical bytes (tested).

Each kernel has a plain numpy/python reference in :mod:`dpmf_lib.sketch.reference`.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .hashing import address_sign


@njit(cache=True)
def sketch_sgd_epoch(C, salts, d, users, items, values, order, eta, lam, clip):
    """One pass over ``order`` on a count sketch ``C`` (k × w). Returns (n_applied, n_skipped, sum of losses)."""
    k, w = C.shape
    eta32 = np.float32(eta)
    lam32 = np.float32(lam)
    clip64 = np.float64(clip)
    invk = np.float32(1.0) / np.float32(k)
    au = np.empty((k, d), dtype=np.int64)
    su = np.empty((k, d), dtype=np.float32)
    ai = np.empty((k, d), dtype=np.int64)
    si = np.empty((k, d), dtype=np.float32)
    p = np.empty(d, dtype=np.float32)
    q = np.empty(d, dtype=np.float32)
    n_applied = 0
    n_skipped = 0
    loss_sum = 0.0
    for t in range(order.shape[0]):
        n = order[t]
        u = users[n]
        i = items[n]
        for l in range(d):
            accp = np.float32(0.0)
            accq = np.float32(0.0)
            for j in range(k):
                a, s = address_sign(u, l, salts[0, j], w)
                au[j, l] = a
                su[j, l] = s
                accp += s * C[j, a]
                b, z = address_sign(i, l, salts[1, j], w)
                ai[j, l] = b
                si[j, l] = z
                accq += z * C[j, b]
            p[l] = accp * invk
            q[l] = accq * invk
        pred = np.float32(0.0)
        for l in range(d):
            pred += p[l] * q[l]
        err = pred - values[n]
        loss = 0.5 * np.float64(err) * np.float64(err)
        loss_sum += loss
        if loss > clip64:
            n_skipped += 1
            continue
        n_applied += 1
        for l in range(d):
            dp = eta32 * (err * q[l] + lam32 * p[l])
            dq = eta32 * (err * p[l] + lam32 * q[l])
            for j in range(k):
                C[j, au[j, l]] -= su[j, l] * dp
                C[j, ai[j, l]] -= si[j, l] * dq
    return n_applied, n_skipped, loss_sum


@njit(cache=True)
def sketch_sgd_epoch_many(C, salts, d, users, items, values, order, eta, lam, clip, active):
    """:func:`sketch_sgd_epoch` for M models that share the hash salts and the visiting order and differ in η, λ and
    their cells: ``C`` is (k, w, M) with the models innermost, ``eta``/``lam`` are length M, ``active[m]`` False
    leaves model m untouched. Model m's cells and returns are bit for bit those of :func:`sketch_sgd_epoch` on
    ``C[:, :, m]`` with ``eta[m]``, ``lam[m]``: each model runs the same float32 operations in the same order; the
    addresses are hashed once per rating for all models, and the loops over models are contiguous (SIMD lanes).
    Returns (n_applied, n_skipped, sum of losses), arrays of length M."""
    k, w, M = C.shape
    clip64 = np.float64(clip)
    invk = np.float32(1.0) / np.float32(k)
    eta32 = np.empty(M, dtype=np.float32)
    lam32 = np.empty(M, dtype=np.float32)
    for m in range(M):
        eta32[m] = np.float32(eta[m])
        lam32[m] = np.float32(lam[m])
    au = np.empty((k, d), dtype=np.int64)
    su = np.empty((k, d), dtype=np.float32)
    ai = np.empty((k, d), dtype=np.int64)
    si = np.empty((k, d), dtype=np.float32)
    p = np.empty((d, M), dtype=np.float32)
    q = np.empty((d, M), dtype=np.float32)
    accp = np.empty(M, dtype=np.float32)
    accq = np.empty(M, dtype=np.float32)
    pred = np.empty(M, dtype=np.float32)
    err = np.empty(M, dtype=np.float32)
    dp = np.empty(M, dtype=np.float32)
    dq = np.empty(M, dtype=np.float32)
    upd = np.empty(M, dtype=np.bool_)
    n_applied = np.zeros(M, dtype=np.int64)
    n_skipped = np.zeros(M, dtype=np.int64)
    loss_sum = np.zeros(M, dtype=np.float64)
    for t in range(order.shape[0]):
        n = order[t]
        u = users[n]
        i = items[n]
        for l in range(d):
            for m in range(M):
                accp[m] = np.float32(0.0)
                accq[m] = np.float32(0.0)
            for j in range(k):
                a, s = address_sign(u, l, salts[0, j], w)
                au[j, l] = a
                su[j, l] = s
                b, z = address_sign(i, l, salts[1, j], w)
                ai[j, l] = b
                si[j, l] = z
                for m in range(M):
                    accp[m] += s * C[j, a, m]
                    accq[m] += z * C[j, b, m]
            for m in range(M):
                p[l, m] = accp[m] * invk
                q[l, m] = accq[m] * invk
        for m in range(M):
            pred[m] = np.float32(0.0)
        for l in range(d):
            for m in range(M):
                pred[m] += p[l, m] * q[l, m]
        any_upd = False
        for m in range(M):
            e = pred[m] - values[n]
            err[m] = e
            upd[m] = False
            if active[m]:
                loss = 0.5 * np.float64(e) * np.float64(e)
                loss_sum[m] += loss
                if loss > clip64:
                    n_skipped[m] += 1
                else:
                    n_applied[m] += 1
                    upd[m] = True
                    any_upd = True
        if not any_upd:
            continue
        for l in range(d):
            for m in range(M):
                dp[m] = eta32[m] * (err[m] * q[l, m] + lam32[m] * p[l, m])
                dq[m] = eta32[m] * (err[m] * p[l, m] + lam32[m] * q[l, m])
            for j in range(k):
                a = au[j, l]
                s = su[j, l]
                for m in range(M):
                    c = C[j, a, m]
                    C[j, a, m] = c - s * dp[m] if upd[m] else c  # a select, not c - 0: keeps -0.0 and NaN cells
                b = ai[j, l]
                z = si[j, l]
                for m in range(M):
                    c = C[j, b, m]
                    C[j, b, m] = c - z * dq[m] if upd[m] else c
    return n_applied, n_skipped, loss_sum


@njit(cache=True)
def dense_sgd_epoch(P, Q, users, items, values, order, eta, lam, clip):
    """One pass over ``order`` on dense factors P (n_users × d), Q (n_items × d). Same returns as the sketch kernel."""
    d = P.shape[1]
    eta32 = np.float32(eta)
    lam32 = np.float32(lam)
    clip64 = np.float64(clip)
    n_applied = 0
    n_skipped = 0
    loss_sum = 0.0
    for t in range(order.shape[0]):
        n = order[t]
        u = users[n]
        i = items[n]
        pred = np.float32(0.0)
        for l in range(d):
            pred += P[u, l] * Q[i, l]
        err = pred - values[n]
        loss = 0.5 * np.float64(err) * np.float64(err)
        loss_sum += loss
        if loss > clip64:
            n_skipped += 1
            continue
        n_applied += 1
        for l in range(d):
            pl = P[u, l]
            ql = Q[i, l]
            dp = eta32 * (err * ql + lam32 * pl)
            dq = eta32 * (err * pl + lam32 * ql)
            P[u, l] = pl - dp
            Q[i, l] = ql - dq
    return n_applied, n_skipped, loss_sum


@njit(cache=True)
def sketch_reconstruct(C, salt_row, n, d):
    """All reconstructed vectors of one side (4.1 or 4.2): ``salt_row`` is ``salts[0]`` (users) or ``salts[1]``.

    Serial, as :func:`dense_predict`: an evaluation takes about a millisecond, and the chapter-4 runs train in worker
    processes that already fill the cores, where the threads' start and spin-waits cost many times that."""
    k, w = C.shape
    invk = np.float32(1.0) / np.float32(k)
    out = np.empty((n, d), dtype=np.float32)
    for e in range(n):
        for l in range(d):
            acc = np.float32(0.0)
            for j in range(k):
                a, s = address_sign(e, l, salt_row[j], w)
                acc += s * C[j, a]
            out[e, l] = acc * invk
    return out


@njit(cache=True)
def dense_predict(P, Q, users, items):
    """``p_uᵀ q_i`` for every pair (float32 accumulation in component order, like the SGD kernels; serial, see
    :func:`sketch_reconstruct`)."""
    n = users.shape[0]
    d = P.shape[1]
    out = np.empty(n, dtype=np.float32)
    for t in range(n):
        acc = np.float32(0.0)
        u = users[t]
        i = items[t]
        for l in range(d):
            acc += P[u, l] * Q[i, l]
        out[t] = acc
    return out


@njit(cache=True)
def sketch_insert(C, salt_row, ids, comps, vals):
    """Plain count-sketch update (2.15) of the quantities ``(ids[t], comps[t]) += vals[t]`` on every row."""
    k, w = C.shape
    for t in range(ids.shape[0]):
        for j in range(k):
            a, s = address_sign(ids[t], comps[t], salt_row[j], w)
            C[j, a] += s * vals[t]


@njit(cache=True)
def sketch_query(C, salt_row, ids, comps):
    """Mean-operator estimate (4.1) of the quantities ``(ids[t], comps[t])``."""
    k, w = C.shape
    invk = np.float32(1.0) / np.float32(k)
    out = np.empty(ids.shape[0], dtype=np.float32)
    for t in range(ids.shape[0]):
        acc = np.float32(0.0)
        for j in range(k):
            a, s = address_sign(ids[t], comps[t], salt_row[j], w)
            acc += s * C[j, a]
        out[t] = acc * invk
    return out
