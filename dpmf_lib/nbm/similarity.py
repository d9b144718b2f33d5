"""Non-private item-item similarities for the PCC and COS kNN baselines (paper section 5.1; Desrosiers & Karypis [7]).

- PCC: s_ij = Σ_u c_ui c_uj / sqrt(Σ_u c_ui² · Σ_u c_uj²), sums over the users who rated both i and j, with
  c_ui = r_ui - r̄_i (r̄_i = item mean over all its training ratings — a common variant; the paper does not say).
- COS: s_ij = Σ_u r_ui r_uj / (‖r_i‖ ‖r_j‖), plain vector cosine of the raw rating columns (missing = 0).
No shrinkage, no significance weighting. The diagonal is 0 (an item is never its own neighbour). Dense float32 M×M.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..data.ratings import Ratings


def item_means(r: Ratings) -> np.ndarray:
    """Mean training rating of each item (float32); items without ratings get the global mean."""
    cnt = r.item_counts()
    s = np.bincount(r.items, weights=r.values.astype(np.float64), minlength=r.n_items)
    mu = float(r.values.mean()) if r.n_ratings else 0.0
    out = np.where(cnt > 0, s / np.maximum(cnt, 1), mu)
    return out.astype(np.float32)


def _matrix(r: Ratings, vals: np.ndarray) -> sp.csr_matrix:
    return sp.csr_matrix((vals.astype(np.float64), (r.users, r.items)), shape=(r.n_users, r.n_items))


def pcc(r: Ratings) -> np.ndarray:
    c = r.values - item_means(r)[r.items]
    X = _matrix(r, c)
    ind = _matrix(r, np.ones(r.n_ratings))
    X2 = X.multiply(X).tocsr()
    num = (X.T @ X).toarray()
    a = (X2.T @ ind).toarray()  # a[i, j] = Σ_{u rated i and j} c_ui²
    den = np.sqrt(a * a.T)
    S = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    np.fill_diagonal(S, 0.0)
    return np.ascontiguousarray(np.clip(S, -1, 1), dtype=np.float32)


def cosine(r: Ratings) -> np.ndarray:
    X = _matrix(r, r.values)
    num = (X.T @ X).toarray()
    nrm = np.sqrt(np.diag(num))
    den = nrm[:, None] * nrm[None, :]
    S = np.divide(num, den, out=np.zeros_like(num), where=den > 0)
    np.fill_diagonal(S, 0.0)
    return np.ascontiguousarray(S, dtype=np.float32)
