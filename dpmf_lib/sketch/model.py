"""Latent-factor models in one harness: dense MF (P, Q) and count-sketch MF (one k × w sketch for users *and* items).

- ``regular``          dense factors P (n_users × d), Q (n_items × d)
- ``count_sketch``     k × w sketch, w from the space gain γ by eq. (4.9); k = 4 in the thesis
- ``feature_hashing``  the same with k = 1 ([KWS10])

Initialisation (thesis: "small random values, sampled from same distribution for all the three algorithms"): our
choice is that the *reconstructed* vectors all start N(0, init_scale²): dense entries are drawn N(0, init_scale²) and sketch
cells N(0, k·init_scale²) (the mean of k independent cells then has variance init_scale²).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import validate
from ..errors import ParameterError
from . import kernels
from .hashing import MAX_D, make_salts

METHODS = {"regular": ("dense", 1), "count_sketch": ("sketch", 4), "feature_hashing": ("sketch", 1)}


def width_from_gain(n_users: int, n_items: int, d: int, gamma: float, k: int) -> int:
    """Sketch width of eq. (4.9): ``w = ceil((|U| + |I|) d / (γ k))``."""
    validate.positive(gamma, "gamma", what="the sketch (space gain)")
    if k < 1 or d < 1:
        raise ParameterError(f"k and d must be >= 1, got k={k}, d={d}")
    return max(1, math.ceil((n_users + n_items) * d / (gamma * k)))


@dataclass
class MFModel:
    """A dense or count-sketch factor model. ``params`` is P and Q (dense) or C (sketch)."""

    kind: str  # "dense" | "sketch"
    n_users: int
    n_items: int
    d: int
    k: int = 1
    w: int = 0
    P: np.ndarray | None = None
    Q: np.ndarray | None = None
    C: np.ndarray | None = None
    salts: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of the learned parameters (float32 cells or factors; hash salts are 16·k bytes more)."""
        if self.kind == "dense":
            return int(self.P.nbytes + self.Q.nbytes)
        return int(self.C.nbytes)

    @property
    def n_cells(self) -> int:
        return self.nbytes // 4

    def user_vectors(self) -> np.ndarray:
        if self.kind == "dense":
            return self.P
        return kernels.sketch_reconstruct(self.C, self.salts[0], self.n_users, self.d)

    def item_vectors(self) -> np.ndarray:
        if self.kind == "dense":
            return self.Q
        return kernels.sketch_reconstruct(self.C, self.salts[1], self.n_items, self.d)

    def predict(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predicted (mean-corrected) ratings ``p̃_uᵀ q̃_i`` (float32)."""
        P, Q = self.user_vectors(), self.item_vectors()
        return kernels.dense_predict(P, Q, np.ascontiguousarray(users, np.int32), np.ascontiguousarray(items, np.int32))

    def sgd_epoch(self, users, items, values, order, eta: float, lam: float, clip: float = math.inf):
        """One SGD pass (see :mod:`dpmf_lib.sketch.kernels`); returns (n_applied, n_skipped, sum of losses)."""
        if self.kind == "dense":
            return kernels.dense_sgd_epoch(self.P, self.Q, users, items, values, order, eta, lam, clip)
        return kernels.sketch_sgd_epoch(self.C, self.salts, self.d, users, items, values, order, eta, lam, clip)


def make_model(method: str, n_users: int, n_items: int, d: int, *, gamma: float = 1.0, k: int | None = None,
               init_scale: float = 0.1, seed=0) -> MFModel:
    """A freshly initialised model. ``method`` ∈ {regular, count_sketch, feature_hashing}; ``k`` overrides the depth.

    ``seed`` is an int or a ``numpy.random.Generator``; the hash salts and the initial values both derive from it.
    """
    if method not in METHODS:
        raise ParameterError(f"unknown method {method!r}; choose one of {sorted(METHODS)}")
    if not (1 <= d < MAX_D):
        raise ParameterError(f"latent dimension d must lie in [1, {MAX_D}), got {d}")
    if not (init_scale >= 0 and math.isfinite(init_scale)):
        raise ParameterError(f"init_scale must be a finite number >= 0, got {init_scale!r}")
    kind, k_default = METHODS[method]
    rng = validate.generator(seed)
    if kind == "dense":
        if gamma != 1.0:
            raise ParameterError(f"regular factorization has no space gain; got gamma={gamma} (use a smaller d)")
        P = (rng.standard_normal((n_users, d), dtype=np.float32) * np.float32(init_scale))
        Q = (rng.standard_normal((n_items, d), dtype=np.float32) * np.float32(init_scale))
        return MFModel("dense", n_users, n_items, d, 1, 0, P=np.ascontiguousarray(P), Q=np.ascontiguousarray(Q))
    k = k_default if k is None else int(k)
    if method == "feature_hashing" and k != 1:
        raise ParameterError(f"feature hashing is the k = 1 count sketch; got k={k}")
    w = width_from_gain(n_users, n_items, d, gamma, k)
    salts = make_salts(int(rng.integers(0, 2**63 - 1)), k)
    C = rng.standard_normal((k, w), dtype=np.float32) * np.float32(init_scale * math.sqrt(k))
    return MFModel("sketch", n_users, n_items, d, k, w, C=np.ascontiguousarray(C), salts=salts)
