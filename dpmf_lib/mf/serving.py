"""Top-k recommendation for many users at once: blocked matrix product (float32 BLAS) + partial sort.

score_ij = <u_i, v_j> + b_j (the user and global biases do not change a user's ranking). For each block of
``block`` users: S = U_b Vᵀ + b (one GEMM), optionally mask the items the user already rated (CSR), then
``argpartition`` for the top k and a sort of those k. Ties: order among exactly equal scores is unspecified.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit, prange

from ..errors import ParameterError
from .model import MFModel


@njit(cache=True, parallel=True)
def _mask_seen(S, u0, indptr, indices):
    for r in prange(S.shape[0]):
        u = u0 + r
        for p in range(indptr[u], indptr[u + 1]):
            S[r, indices[p]] = -np.inf


def top_k(model: MFModel, k: int = 10, *, users: np.ndarray | None = None, block: int = 1024, seen=None) -> np.ndarray:
    """``(n, k)`` int32 item ids, best first, for ``users`` (default all). ``seen``: a user CSR (``Ratings.user_csr()``)
    whose items are excluded."""
    n_items = model.V.shape[0]
    if not isinstance(k, (int, np.integer)) or not 1 <= k <= n_items:
        raise ParameterError(f"k must be an integer in [1, n_items={n_items}], got {k!r}")
    if not isinstance(block, (int, np.integer)) or block < 1:
        raise ParameterError(f"block must be a positive integer, got {block!r}")
    U = model.U if users is None else model.U[np.asarray(users)]
    if seen is not None and users is not None:
        raise ParameterError("seen= needs users=None (the CSR rows are indexed by user id)")
    VT = np.ascontiguousarray(model.V.T)
    bi = model.bi.astype(np.float32)
    out = np.empty((U.shape[0], k), dtype=np.int32)
    for a in range(0, U.shape[0], block):
        S = U[a:a + block] @ VT
        S += bi
        if seen is not None:
            _mask_seen(S, a, seen.indptr, seen.indices)
        if k < n_items:
            part = np.argpartition(-S, k - 1, axis=1)[:, :k]
        else:
            part = np.broadcast_to(np.arange(n_items), S.shape).copy()
        vals = np.take_along_axis(S, part, axis=1)
        o = np.argsort(-vals, axis=1, kind="stable")
        out[a:a + block] = np.take_along_axis(part, o, axis=1)
    return out


def serving_throughput(model: MFModel, k: int = 10, *, block: int = 1024, repeats: int = 1) -> dict:
    """Time :func:`top_k` for all users: users/s, item scores/s (users × items / s) and GFLOP/s of the GEMM part."""
    top_k(model, k, users=np.arange(min(8, model.U.shape[0])), block=block)  # warm BLAS threads
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        top_k(model, k, block=block)
        best = min(best, time.perf_counter() - t0)
    n_u, n_i, d = model.U.shape[0], model.V.shape[0], model.U.shape[1]
    return {"seconds": best, "users_per_s": n_u / best, "scores_per_s": n_u * n_i / best,
            "recommendations_per_s": n_u * k / best, "gflops": 2.0 * n_u * n_i * d / best / 1e9}
