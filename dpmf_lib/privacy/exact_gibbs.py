"""Exact block Gibbs on Algorithm 1's target exp(−ε/(4B)·F) × prior (ours; Liu et al. 2015 sample it by SGLD).

Every sweep draws all (u_i, b_i) from their Gaussian conditional given (V, b_j), then all (v_j, b_j) given (U, b_i),
with Λ_u, Λ_v, λ_b fixed, b_0 at the rating-scale midpoint and the trimmed, weighted data of a
:class:`~dpmf_lib.privacy.posterior_sampling.Preprocessed`. Why it is offered, and how it releases under the same ε as
the SGLD path: :mod:`dpmf_lib.privacy.posterior_sampling` (``sample_private(sampler="gibbs")`` runs
:func:`gibbs_chain` per chain).

- :func:`gibbs_chain` → :class:`GibbsChain` — one chain (a function of its seed alone);
- :func:`gibbs_reference` — ``n_chains`` chains and their diagnostics (e.g. at ε = 4B: the non-private posterior a
  converged SGLD chain should land on);
- ``_gibbs_side_kernel`` — one block (numba, parallel over rows); :func:`gibbs_side_reference` — its numpy reference.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from numba import njit, prange

from ..metrics import rmse
from .chains import chain_diagnostics, chain_seed
from .linalg import _cholesky, _solve_lower, _solve_upper_t
from .target import check_epsilon, likelihood_scale

if TYPE_CHECKING:
    from .posterior_sampling import Preprocessed


@njit(cache=True, parallel=True)
def _gibbs_side_kernel(indptr, idx, vals, wts, X, xb, own_b, b0, reg, lik, xi, out, out_b):
    """One block of exact Gibbs: every row's (factor, bias) from its Gaussian conditional given the other side.

    Precision P = lik Σ w x xᵀ + diag(reg), x = (x_j, 1); mean = P⁻¹ lik Σ w x (r − b0 − b_other); draw = mean + L⁻ᵀ ξ
    with P = L Lᵀ."""
    n = indptr.shape[0] - 1
    d = X.shape[1]
    for i in prange(n):
        A = np.zeros((d + 1, d + 1))
        rhs = np.zeros(d + 1)
        x = np.empty(d + 1)
        for p in range(indptr[i], indptr[i + 1]):
            j = idx[p]
            for f in range(d):
                x[f] = X[j, f]
            x[d] = 1.0
            w = lik * wts[p]
            y = vals[p] - b0 - xb[j]
            for a in range(d + 1):
                rhs[a] += w * x[a] * y
                for c in range(a + 1):
                    A[a, c] += w * x[a] * x[c]
        for a in range(d + 1):
            A[a, a] += reg[a]
            for c in range(a):
                A[c, a] = A[a, c]
        L = _cholesky(A)
        # mean: L y = rhs, Lᵀ mu = y; noise: Lᵀ e = ξ; the draw mu + e solves Lᵀ z = y + ξ
        z = _solve_upper_t(L, _solve_lower(L, rhs) + xi[i])
        for f in range(d):
            out[i, f] = z[f]
        out_b[i] = z[d] if own_b else 0.0


def gibbs_side_reference(indptr, idx, vals, wts, X, xb, b0, reg, lik, xi):
    """Plain numpy version of one Gibbs block (``np.linalg``): returns (factors, biases)."""
    n, d = indptr.shape[0] - 1, X.shape[1]
    out, out_b = np.zeros((n, d)), np.zeros(n)
    for i in range(n):
        sl = slice(indptr[i], indptr[i + 1])
        Xi = np.hstack([X[idx[sl]].astype(np.float64), np.ones((indptr[i + 1] - indptr[i], 1))])
        w = lik * wts[sl].astype(np.float64)
        P = (Xi * w[:, None]).T @ Xi + np.diag(reg)
        mu = np.linalg.solve(P, (Xi * w[:, None]).T @ (vals[sl] - b0 - xb[idx[sl]]))
        L = np.linalg.cholesky(P)
        z = mu + np.linalg.solve(L.T, xi[i])
        out[i], out_b[i] = z[:d], z[d]
    return out, out_b


def _csr_with_weights(users, items, values, weights, n_rows):
    order = np.argsort(users, kind="stable")
    indptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(np.bincount(users, minlength=n_rows), out=indptr[1:])
    return (indptr, np.ascontiguousarray(items[order].astype(np.int64)),
            np.ascontiguousarray(values[order].astype(np.float64)),
            np.ascontiguousarray(weights[order].astype(np.float64)))


@dataclass
class GibbsChain:
    """One exact block-Gibbs chain: its final sample, per-draw trace and per-sweep history."""
    model: object  # MFModel (float32), the final sweep's (U, V, b_i, b_j), b_0 fixed
    trace: pd.DataFrame  # chain, draw, v_norm2, sample_rmse (with ``test``) every ``thin`` sweeps after burn-in
    history: pd.DataFrame  # epoch (= sweep), phase, seconds


def gibbs_chain(pre: Preprocessed, epsilon: float, *, Lambda_u, Lambda_v, lam_bias: float, d: int = 16,
                sweeps: int = 200, burn_in: int = 100, thin: int = 1, seed: int = 0, test=None,
                init_scale: float = 0.1, chain: int = 0) -> GibbsChain:
    """One chain of exact block Gibbs on Algorithm 1's target exp(−ε/(4B) Σ w_i (r − r̂)²) × prior (Λ_u, Λ_v, λ_b
    fixed, b_0 at the rating-scale midpoint, the trimmed data of ``pre``): every sweep draws all (u_i, b_i) from their
    exact Gaussian conditional given (V, b_j), then all (v_j, b_j) given (U, b_i). ``seed`` is the chain's own seed
    (its initialisation, N(0, ``init_scale``²) factors and zero biases, and its normals). A function of ``seed``
    alone: the same seed gives the same chain."""
    import time

    from ..mf import MFModel, init_model

    eps = check_epsilon(epsilon)
    t = pre.train
    lik = likelihood_scale(eps, pre.B, 1.0)  # s λ_r = ε / (2B): the SGLD path's exponent ε/(4B) Σ w (r − r̂)², any λ_r
    Lu = np.broadcast_to(np.asarray(Lambda_u, np.float64), (d,))
    Lv = np.broadcast_to(np.asarray(Lambda_v, np.float64), (d,))
    reg_u = np.concatenate([Lu, [float(lam_bias)]])
    reg_v = np.concatenate([Lv, [float(lam_bias)]])
    b0 = 0.5 * (pre.rating_scale[0] + pre.rating_scale[1])
    w = pre.rating_weights
    cu = _csr_with_weights(t.users, t.items, t.values, w, t.n_users)
    cv = _csr_with_weights(t.items, t.users, t.values, w, t.n_items)
    rng = np.random.default_rng([int(seed), 0x61B5])
    m0 = init_model(t.n_users, t.n_items, d, seed=[int(seed), 0xD9], scale=init_scale, b0=b0)
    U, V = m0.U.astype(np.float64), m0.V.astype(np.float64)
    bu, bi = np.zeros(t.n_users), np.zeros(t.n_items)
    rows, hist = [], []
    for s in range(1, int(sweeps) + 1):
        t0 = time.perf_counter()
        _gibbs_side_kernel(*cu, V, bi, True, b0, reg_u, lik, rng.standard_normal((t.n_users, d + 1)), U, bu)
        _gibbs_side_kernel(*cv, U, bu, True, b0, reg_v, lik, rng.standard_normal((t.n_items, d + 1)), V, bi)
        hist.append({"epoch": s, "phase": "burn_in" if s <= burn_in else "sampling",
                     "seconds": time.perf_counter() - t0})
        if s > burn_in and (s - burn_in) % thin == 0:
            row = {"chain": chain, "draw": s, "v_norm2": float(np.mean(V * V))}
            if test is not None:
                p = (np.einsum("ij,ij->i", U[test.users], V[test.items]) + bu[test.users] + bi[test.items] + b0)
                row["sample_rmse"] = rmse(p, test.values)
            rows.append(row)
    model = MFModel(U.astype(np.float32), V.astype(np.float32), bu.astype(np.float32), bi.astype(np.float32),
                    float(b0))
    trace = pd.DataFrame(rows, columns=["chain", "draw", "v_norm2"] + (["sample_rmse"] if test is not None else []))
    return GibbsChain(model, trace, pd.DataFrame(hist))


def gibbs_reference(pre: Preprocessed, epsilon: float, *, Lambda_u, Lambda_v, lam_bias: float, d: int = 16,
                    lambda_r: float = 2.0, sweeps: int = 200, burn_in: int = 100, n_chains: int = 2, thin: int = 1,
                    seed: int = 0, test=None, init_scale: float = 0.1) -> dict:
    """``n_chains`` chains of :func:`gibbs_chain` (seeds :func:`chain_seed`), e.g. at ε = 4B: the reference a
    converged SGLD chain should land on (the non-private posterior of the private pipeline). ``lambda_r`` is implied
    by the target (kept for the callers' signature).

    Returns ``{"models": final sample per chain, "trace": per-draw v_norm2 / sample_rmse, **chain_diagnostics}``."""
    chains = [gibbs_chain(pre, epsilon, Lambda_u=Lambda_u, Lambda_v=Lambda_v, lam_bias=lam_bias, d=d, sweeps=sweeps,
                          burn_in=burn_in, thin=thin, seed=chain_seed(seed, k), test=test, init_scale=init_scale,
                          chain=k)
              for k in range(int(n_chains))]
    trace = pd.concat([c.trace for c in chains], ignore_index=True)
    return {"models": [c.model for c in chains], "trace": trace, **chain_diagnostics(trace)}
