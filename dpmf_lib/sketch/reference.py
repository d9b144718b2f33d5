"""Plain numpy/python references of the numba kernels in :mod:`dpmf_lib.sketch.kernels` (slow; for tests only).

They follow the same float32 arithmetic in the same order, so kernel and reference agree to the last bit on small
inputs (the tests check ``array_equal`` where the order is identical and ``allclose`` otherwise).
"""

from __future__ import annotations

import numpy as np

from .hashing import address_sign_ref

f32 = np.float32


def sketch_sgd_epoch_ref(C, salts, d, users, items, values, order, eta, lam, clip):
    k, w = C.shape
    eta, lam, invk = f32(eta), f32(lam), f32(1.0) / f32(k)
    comps = np.arange(d)
    n_applied = n_skipped = 0
    loss_sum = 0.0
    for n in order:
        u, i = int(users[n]), int(items[n])
        au, su = address_sign_ref(u, comps[None, :], salts[0][:, None], w)  # (k, d)
        ai, si = address_sign_ref(i, comps[None, :], salts[1][:, None], w)
        p = np.zeros(d, dtype=np.float32)
        q = np.zeros(d, dtype=np.float32)
        for j in range(k):  # same accumulation order as the kernel
            p = (p + su[j] * C[j, au[j]]).astype(np.float32)
            q = (q + si[j] * C[j, ai[j]]).astype(np.float32)
        p, q = (p * invk).astype(np.float32), (q * invk).astype(np.float32)
        pred = f32(0.0)
        for l in range(d):
            pred = f32(pred + p[l] * q[l])
        err = f32(pred - values[n])
        loss = 0.5 * float(err) ** 2
        loss_sum += loss
        if loss > clip:
            n_skipped += 1
            continue
        n_applied += 1
        dp = (eta * (err * q + lam * p)).astype(np.float32)
        dq = (eta * (err * p + lam * q)).astype(np.float32)
        for l in range(d):
            for j in range(k):
                C[j, au[j, l]] = f32(C[j, au[j, l]] - su[j, l] * dp[l])
                C[j, ai[j, l]] = f32(C[j, ai[j, l]] - si[j, l] * dq[l])
    return n_applied, n_skipped, loss_sum


def sketch_sgd_epoch_many_ref(C, salts, d, users, items, values, order, eta, lam, clip, active):
    """Reference of the M-model kernel: :func:`sketch_sgd_epoch_ref` on each active model ``C[:, :, m]``."""
    M = C.shape[2]
    n_applied, n_skipped, loss_sum = np.zeros(M, np.int64), np.zeros(M, np.int64), np.zeros(M)
    for m in range(M):
        if active[m]:
            Cm = C[:, :, m].copy()
            n_applied[m], n_skipped[m], loss_sum[m] = sketch_sgd_epoch_ref(Cm, salts, d, users, items, values, order,
                                                                           eta[m], lam[m], clip)
            C[:, :, m] = Cm
    return n_applied, n_skipped, loss_sum


def dense_sgd_epoch_ref(P, Q, users, items, values, order, eta, lam, clip):
    eta, lam = f32(eta), f32(lam)
    n_applied = n_skipped = 0
    loss_sum = 0.0
    for n in order:
        u, i = int(users[n]), int(items[n])
        pred = f32(0.0)
        for l in range(P.shape[1]):
            pred = f32(pred + P[u, l] * Q[i, l])
        err = f32(pred - values[n])
        loss = 0.5 * float(err) ** 2
        loss_sum += loss
        if loss > clip:
            n_skipped += 1
            continue
        n_applied += 1
        p, q = P[u].copy(), Q[i].copy()
        P[u] = (p - eta * (err * q + lam * p)).astype(np.float32)
        Q[i] = (q - eta * (err * p + lam * q)).astype(np.float32)
    return n_applied, n_skipped, loss_sum


def sketch_reconstruct_ref(C, salt_row, n, d):
    k, w = C.shape
    ids = np.arange(n)[:, None, None]
    comps = np.arange(d)[None, :, None]
    a, s = address_sign_ref(ids, comps, np.asarray(salt_row)[None, None, :], w)  # (n, d, k)
    vals = s * C[np.arange(k)[None, None, :], a]
    acc = np.zeros((n, d), dtype=np.float32)
    for j in range(k):
        acc = (acc + vals[:, :, j]).astype(np.float32)
    return (acc * (f32(1.0) / f32(k))).astype(np.float32)


def dense_predict_ref(P, Q, users, items):
    return np.einsum("nd,nd->n", P[users].astype(np.float64), Q[items].astype(np.float64)).astype(np.float32)


def sketch_insert_ref(C, salt_row, ids, comps, vals):
    k, w = C.shape
    for j in range(k):
        a, s = address_sign_ref(ids, comps, salt_row[j], w)
        np.add.at(C[j], a, (s * vals).astype(np.float32))


def sketch_query_ref(C, salt_row, ids, comps):
    k, w = C.shape
    acc = np.zeros(len(ids), dtype=np.float32)
    for j in range(k):
        a, s = address_sign_ref(ids, comps, salt_row[j], w)
        acc = (acc + s * C[j, a]).astype(np.float32)
    return (acc * (f32(1.0) / f32(k))).astype(np.float32)
