"""Plain numpy/python reference implementations of the kernels (slow; for agreement tests on tiny problems).

Each replays exactly the visiting order of a :class:`~dpmf_lib.mf.layout.Layout` (what the numba kernels do with one
thread) with float32 arithmetic, and for SGLD the same noise stream (the scalar RNG helpers of
:mod:`dpmf_lib.mf.noise` are shared — they define the stream, they are not the kernel under test).
Also: the exact Gaussian posterior of the conjugate toy used to validate SGLD, and a numpy top-k.
"""

from __future__ import annotations

import numpy as np

from .model import MFModel, learning_rate
from .noise import randint_below, splitmix_next

f32 = np.float32


def sgd_epoch_reference(users, items, vals, U, V, bu, bi, b0, eta, lam, lamb):
    """One pass of eq. (3) in the stored order, in place (float32)."""
    eta, lam, lamb, b0 = f32(eta), f32(lam), f32(lamb), f32(b0)
    shrink = f32(1) - eta * lam
    for k in range(len(vals)):
        i, j = users[k], items[k]
        u, v = U[i].copy(), V[j].copy()
        e = f32(vals[k]) - (f32(np.dot(u, v)) + bu[i] + bi[j] + b0)
        U[i] = shrink * u + eta * e * v
        V[j] = shrink * v + eta * e * u
        bu[i] += eta * (e - lamb * bu[i])
        bi[j] += eta * (e - lamb * bi[j])


def train_sgd_reference(layout, model: MFModel, *, epochs, eta0, gamma, lam, lamb) -> MFModel:
    """Reference for :func:`dpmf_lib.mf.csgd.train_sgd` on a given layout; ``model`` in the Ratings id space."""
    U = model.U.copy()
    V = model.V[layout.item_perm].copy()
    bu = model.bu.copy()
    bi = model.bi[layout.item_perm].copy()
    for t in range(1, epochs + 1):
        sgd_epoch_reference(layout.users, layout.items, layout.values, U, V, bu, bi, model.b0,
                            learning_rate(eta0, gamma, t), lam, lamb)
    Vo = np.empty_like(V)
    Vo[layout.item_perm] = V
    bio = np.empty_like(bi)
    bio[layout.item_perm] = bi
    return MFModel(U, Vo, bu, bio, model.b0)


def _block_state_py(base, s):
    with np.errstate(over="ignore"):  # uint64 multiply wraps, as in the kernel
        _, z = splitmix_next(np.uint64(base) ^ (np.uint64(s) * np.uint64(0xD6E8FEB86659FD93)))
    return np.uint64(z)


def sgld_epoch_lazy_reference(layout, ahead_u, ahead_v, U, V, bu, bi, b0, eta, zeta, lik, pwu, pwv, Lu, Lv, lamb, ext,
                              size, base, clip=None):
    """Lazy-noise SGLD round with the lookup table, noise ahead (the gradient step, then the noise owed until the
    vector's next touch: ``ahead_u`` / ``ahead_v`` from :func:`~dpmf_lib.mf.layout.noise_ahead_counters`; no
    pre-round noise), same stream as the kernel with one thread.
    ``clip=(lo, hi)``: the clipped-prediction loss (no likelihood drift when r̂ is outside [lo, hi])."""
    d = U.shape[1]
    h, ze = f32(0.5) * f32(eta), f32(zeta) * f32(eta)
    for s in range(len(layout.seg) - 1):
        state = _block_state_py(base, s)
        for k in range(layout.seg[s], layout.seg[s + 1]):
            i, j = layout.users[k], layout.items[k]
            u, v = U[i].copy(), V[j].copy()
            pred = f32(np.dot(u, v)) + bu[i] + bi[j] + f32(b0)
            e = f32(layout.values[k]) - pred
            if clip is not None and not (clip[0] <= pred <= clip[1]):
                e = f32(0.0)
            g = f32(lik) * e
            U[i] = u + h * (g * v - pwu[i] * Lu * u)
            V[j] = v + h * (g * u - pwv[j] * Lv * v)
            bu[i] += h * (g - pwu[i] * f32(lamb) * bu[i])
            bi[j] += h * (g - pwv[j] * f32(lamb) * bi[j])
            for A, b, row, ahead in ((U, bu, i, ahead_u[k]), (V, bi, j, ahead_v[k])):
                state, o = randint_below(np.uint64(state), size)
                sd = np.sqrt(f32(ahead) * ze)
                A[row] += sd * ext[o:o + d]
                b[row] += sd * ext[o + d]


def conjugate_posterior(V: np.ndarray, bi: np.ndarray, b0: float, items: np.ndarray, values: np.ndarray,
                        Lu: np.ndarray, lamb: float, lik: float, zeta: float = 1.0):
    """Exact posterior of x = (u, b_u) for one user with fixed item side:
    r_j ~ N(<u, v_j> + b_u + b_j + b_0, 1/lik), u ~ N(0, diag(Lu)⁻¹), b_u ~ N(0, 1/lamb); at temperature ζ the
    covariance is multiplied by ζ. Returns (mean (d+1,), covariance (d+1, d+1))."""
    X = np.hstack([V[items].astype(np.float64), np.ones((len(items), 1))])
    y = values.astype(np.float64) - bi[items] - b0
    P = np.diag(np.r_[np.asarray(Lu, np.float64), lamb]) + lik * X.T @ X
    C = np.linalg.inv(P)
    return C @ (lik * X.T @ y), zeta * C


def topk_reference(U: np.ndarray, V: np.ndarray, bi: np.ndarray, k: int, exclude=None) -> np.ndarray:
    """Indices of the k highest <u, v_j> + b_j per user (ties broken by lower item id), best first."""
    S = U.astype(np.float64) @ V.T.astype(np.float64) + bi
    if exclude is not None:
        S[exclude] = -np.inf
    return np.argsort(-S, axis=1, kind="stable")[:, :k]
