"""Attack and utility metrics of thesis Section 3.5: cosine (3.36), mAP@R (3.37), k-NN recall, privacy = 1 - cos."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError


def cosine_sets(true_items: np.ndarray, rec_items: np.ndarray) -> float:
    """cos(P, P^) = |P ∩ P^| / sqrt(|P| |P^|) for item sets (3.36); 0 if either is empty."""
    a, b = np.unique(true_items), np.unique(rec_items)
    if len(a) == 0 or len(b) == 0:
        return 0.0
    return len(np.intersect1d(a, b, assume_unique=True)) / float(np.sqrt(len(a) * len(b)))


def average_precision_at(true_items: np.ndarray, ranking: np.ndarray, R: int = 10) -> float:
    """(1/R) sum_{r=1..R} precision(r), precision(r) = |top-r ∩ P| / r — the inner term of (3.37) as written."""
    if R < 1:
        raise ParameterError(f"mAP rank R must be >= 1, got {R}")
    hits = np.isin(np.asarray(ranking[:R]), true_items).astype(np.float64)
    if len(hits) < R:
        hits = np.pad(hits, (0, R - len(hits)))
    prec = np.cumsum(hits) / np.arange(1, R + 1)
    return float(prec.mean())


def summarize_cosines(cos: np.ndarray) -> dict:
    """Mean, 10 % and 90 % quantiles (the thesis's Figure 3.2/3.3 statistics)."""
    cos = np.asarray(cos, dtype=np.float64)
    return {"cos_mean": float(cos.mean()), "cos_q10": float(np.quantile(cos, 0.1)),
            "cos_q90": float(np.quantile(cos, 0.9))}


def knn_recall(true_sim: np.ndarray, est_sim: np.ndarray, k: int = 10) -> float:
    """Mean over users of |true k-NN ∩ estimated k-NN| / k; self-similarity is excluded (diagonals ignored)."""
    n = true_sim.shape[0]
    if true_sim.shape != est_sim.shape or true_sim.shape != (n, n):
        raise ParameterError("knn_recall: similarity matrices must be square and of the same shape")
    if not (1 <= k < n):
        raise ParameterError(f"knn_recall: k must lie in [1, {n - 1}], got {k}")
    t = true_sim.astype(np.float64).copy()
    e = est_sim.astype(np.float64).copy()
    np.fill_diagonal(t, -np.inf)
    np.fill_diagonal(e, -np.inf)
    rec = np.empty(n)
    for u in range(n):
        tn = np.argsort(-t[u], kind="stable")[:k]
        en = np.argsort(-e[u], kind="stable")[:k]
        rec[u] = len(np.intersect1d(tn, en)) / k
    return float(rec.mean())


def cosine_matrix(M: np.ndarray) -> np.ndarray:
    """Cosine similarity between the rows of a 0/1 (or real) matrix."""
    M = M.astype(np.float64)
    nrm = np.sqrt(np.maximum((M * M).sum(axis=1), 1e-12))
    return (M @ M.T) / np.outer(nrm, nrm)


def blip_similarity(B: np.ndarray, p_eps: float) -> np.ndarray:
    """Cosine between the Bloom filters estimated from BLIPs: each bit debiased, (b~ - p)/(1 - 2p) is unbiased for B,
    so off-diagonal inner products are unbiased for <B_u, B_v> and sum_l debiased bits for w(B_u). At p = 1/2 there is
    nothing to debias and the raw bits are used (the result is noise, as it should be)."""
    X = B.astype(np.float64)
    if abs(1 - 2 * p_eps) > 1e-12:
        X = (X - p_eps) / (1 - 2 * p_eps)
    norm2 = np.maximum(X.sum(axis=1) if abs(1 - 2 * p_eps) > 1e-12 else (X * X).sum(axis=1), 1.0)
    return (X @ X.T) / np.sqrt(np.outer(norm2, norm2))


def jlt_similarity(Y: np.ndarray, sigma: float) -> np.ndarray:
    """Cosine estimated from JLT sketches: y_u . y_v is unbiased for |P_u ∩ P_v| (u != v), ||y_u||^2 - L sigma^2 for
    |P_u| (clipped at 1)."""
    Y = Y.astype(np.float64)
    L = Y.shape[1]
    norm2 = np.maximum((Y * Y).sum(axis=1) - L * sigma * sigma, 1.0)
    return (Y @ Y.T) / np.sqrt(np.outer(norm2, norm2))
