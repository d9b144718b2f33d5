"""The biased inner-product model r̂_ij = <u_i, v_j> + b_i + b_j + b_0 (Liu et al. 2015, eq. 2), float32.

:class:`MFModel` holds ``U`` (n_users × d), ``V`` (n_items × d), user and item biases and the global bias, always in
the ``Ratings`` id space (kernels that renumber items internally map back before returning).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit, prange

from .. import metrics, validate


@dataclass
class MFModel:
    U: np.ndarray  # float32 (n_users, d)
    V: np.ndarray  # float32 (n_items, d)
    bu: np.ndarray  # float32 (n_users,)
    bi: np.ndarray  # float32 (n_items,)
    b0: float

    @property
    def d(self) -> int:
        return self.U.shape[1]

    def predict(self, users: np.ndarray, items: np.ndarray, clip: tuple[float, float] | None = None) -> np.ndarray:
        p = _predict(np.ascontiguousarray(users, dtype=np.int32), np.ascontiguousarray(items, dtype=np.int32),
                     self.U, self.V, self.bu, self.bi, np.float32(self.b0))
        if clip is not None:
            np.clip(p, clip[0], clip[1], out=p)
        return p

    def rmse(self, ratings, clip: bool = False) -> float:
        """Root-mean-square error on a ``Ratings`` set (no clipping unless ``clip``: then to its rating scale)."""
        p = self.predict(ratings.users, ratings.items, clip=ratings.rating_scale if clip else None)
        return metrics.rmse(p, ratings.values)  # the clip stays in predict (float32): see dpmf_lib.metrics

    def copy(self) -> "MFModel":
        return MFModel(self.U.copy(), self.V.copy(), self.bu.copy(), self.bi.copy(), float(self.b0))


MAX_DIM = 4096  # the largest factor dimension d the kernels take
DIM_HINT = "d is the factor dimension of U and V"  # what a bad d is told


def init_model(n_users: int, n_items: int, d: int, *, seed: int | np.random.Generator = 0, scale: float | None = None,
               b0: float = 0.0) -> MFModel:
    """Factors N(0, scale²) with ``scale = 0.1`` by default (an arbitrary common choice; the papers do not state one),
    zero biases, global bias ``b0`` (the kernels use the training mean)."""
    d = validate.integer(d, "d", hi=MAX_DIM, fix=DIM_HINT)
    rng = validate.generator(seed)
    s = 0.1 if scale is None else float(scale)
    U = rng.standard_normal((n_users, d), dtype=np.float32)
    U *= np.float32(s)  # in place: the same float32 products without a second array (setup time)
    V = rng.standard_normal((n_items, d), dtype=np.float32)
    V *= np.float32(s)
    return MFModel(U, V, np.zeros(n_users, np.float32), np.zeros(n_items, np.float32), float(b0))


@njit(cache=True, parallel=True, fastmath=True)
def _predict(users, items, U, V, bu, bi, b0):
    n = users.shape[0]
    d = U.shape[1]
    out = np.empty(n, dtype=np.float32)
    for k in prange(n):
        i = users[k]
        j = items[k]
        s = np.float32(0.0)
        for f in range(d):
            s += U[i, f] * V[j, f]
        out[k] = s + bu[i] + bi[j] + b0
    return out


def learning_rate(eta0: float, gamma: float, t: int) -> float:
    """η_t = η0 / t^γ for round t = 1, 2, ... (Liu et al., Section 6.3)."""
    return float(eta0) / float(t) ** float(gamma)
