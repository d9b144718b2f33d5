"""Noise for objective perturbation (Hua, Xia, Zhong 2015, Sections 4.1-4.2).

- :func:`norm_gamma` — Theorem 1: ``p(eta) ∝ exp(-eps ||eta|| / (2 Delta))`` in R^d. In polar coordinates the density of
  the norm is ``∝ r^(d-1) exp(-eps r / (2 Delta))``, i.e. ``||eta|| ~ Gamma(shape=d, scale=2 Delta / eps)``, and the
  direction is uniform on the sphere (a normalised standard Gaussian vector).
- :func:`laplace_coords` — Lemma 1: every coordinate i.i.d. ``Laplace(0, 2 Delta sqrt(d) / eps)``.
- :func:`theorem2` — Theorem 2: ``mu + b sqrt(2h) c`` with ``h ~ Exponential(1)``, ``c ~ N(0, 1)`` is ``Laplace(mu, b)``.
- :func:`shares` — the distributed version of Lemma 1 (eq. 12): the recommender draws one ``H_j ~ Exponential(1)^d``
  per item, each of the ``k`` users of the group draws ``C ~ N(0, 1/k)^d`` locally and uses
  ``(2 Delta sqrt(d) / eps) sqrt(2 H_j) * C``. Given ``H_j`` the ``k`` shares sum to ``b sqrt(2 H_j) N(0, 1)``, which is
  Laplace(0, b) per coordinate by Theorem 2.

Note (stated in the notebooks): the shares of eq. (12) sum to the Lemma-1 law (per-coordinate Laplace), not to the
norm law (10) that the paper says they satisfy; Lemma 1 is what makes the distributed scheme epsilon-DP.

``eps = None`` gives exact zeros (the non-private limit); ``eps <= 0``, NaN or inf raises :class:`ParameterError`
(only None means non-private: an inf or NaN in a grid is more likely a mistake than a request for no privacy).
Every sampler takes a ``numpy.random.Generator``, an int seed, or None (fresh OS entropy).
"""

from __future__ import annotations

import math

import numpy as np

from .. import validate
from ..errors import ParameterError


_DELTA = "the noise (rating range max_r - min_r)"


def check_eps(eps) -> float:
    """ε of the samplers (:func:`dpmf_lib.validate.epsilon`, None allowed) with None → ``math.inf``, which the
    samplers turn into exact zeros."""
    e = validate.epsilon(eps, "eps", allow_none=True)
    return math.inf if e is None else e


def laplace_scale(d: int, eps: float, delta: float) -> float:
    """Per-coordinate Laplace scale ``2 Delta sqrt(d) / eps`` of Lemma 1 (0 for eps = None, no privacy)."""
    return 2.0 * validate.positive(delta, "delta", what=_DELTA) * math.sqrt(validate.integer(d, "d")) / check_eps(eps)


def norm_gamma(m: int, d: int, eps: float, delta: float, rng=None, dtype=np.float64) -> np.ndarray:
    """``m`` i.i.d. vectors with density ``∝ exp(-eps ||eta|| / (2 Delta))`` in R^d (rows of an ``m x d`` array)."""
    d = validate.integer(d, "d")
    eps = check_eps(eps)
    delta = validate.positive(delta, "delta", what=_DELTA)
    rng = validate.generator(rng, "rng")
    if math.isinf(eps):
        return np.zeros((m, d), dtype=dtype)
    g = rng.standard_normal((m, d))
    nrm = np.linalg.norm(g, axis=1, keepdims=True)
    nrm[nrm == 0] = 1.0
    r = rng.gamma(shape=d, scale=2.0 * delta / eps, size=(m, 1))
    return (g / nrm * r).astype(dtype)


def laplace_coords(m: int, d: int, eps: float, delta: float, rng=None, dtype=np.float64) -> np.ndarray:
    """``m x d`` i.i.d. ``Laplace(0, 2 Delta sqrt(d) / eps)`` entries (Lemma 1)."""
    b = laplace_scale(d, eps, delta)
    rng = validate.generator(rng, "rng")
    if b == 0.0:
        return np.zeros((m, d), dtype=dtype)
    return rng.laplace(0.0, b, size=(m, d)).astype(dtype)


def theorem2(mu: float, b: float, size, rng=None) -> np.ndarray:
    """``mu + b sqrt(2h) c`` with ``h ~ Exp(1)``, ``c ~ N(0,1)`` independent (Theorem 2: ``~ Laplace(mu, b)``)."""
    validate.positive(b, "b", strict=False, what="theorem2 (Laplace scale)")
    rng = validate.generator(rng, "rng")
    h = rng.standard_exponential(size)
    c = rng.standard_normal(size)
    return mu + b * np.sqrt(2.0 * h) * c


def exponential_vectors(m: int, d: int, rng=None) -> np.ndarray:
    """The recommender's shared ``H_j ~ Exponential(1)^d`` for ``m`` items (``m x d``)."""
    return validate.generator(rng, "rng").standard_exponential((m, validate.integer(d, "d")))


def shares(H: np.ndarray, k: int, d: int, eps: float, delta: float, rng=None, dtype=np.float64) -> np.ndarray:
    """The ``k`` users' local shares (eq. 12) for one item with shared exponential vector ``H`` (length d): ``k x d``.

    Each user draws ``C ~ N(0, 1/k)^d`` on her own; the shares sum to a per-coordinate Laplace(2 Delta sqrt(d)/eps).
    """
    validate.integer(k, "k", what="shares (number of users sharing the noise)")
    b = laplace_scale(d, eps, delta)
    rng = validate.generator(rng, "rng")
    H = np.asarray(H, dtype=np.float64).reshape(-1)
    if len(H) != d:
        raise ParameterError(f"H has length {len(H)} but d = {d}")
    c = rng.standard_normal((int(k), d)) / math.sqrt(k)
    return (b * np.sqrt(2.0 * H)[None, :] * c).astype(dtype)


def item_laplace_via_shares(m: int, d: int, eps: float, delta: float, rng=None, dtype=np.float64) -> np.ndarray:
    """The aggregate of the shares of ``m`` items drawn directly: ``b sqrt(2 H) Z``, ``Z ~ N(0,1)`` (``m x d``).

    Same law as summing :func:`shares` over any number ``k`` of users (sum of ``k`` i.i.d. ``N(0, 1/k)`` is ``N(0,1)``);
    used by the simulations' fast ("aggregate") path, where only the sum ever reaches the recommender.
    """
    b = laplace_scale(d, eps, delta)
    rng = validate.generator(rng, "rng")
    if b == 0.0:
        return np.zeros((m, d), dtype=dtype)
    h = rng.standard_exponential((m, d))
    z = rng.standard_normal((m, d))
    return (b * np.sqrt(2.0 * h) * z).astype(dtype)


def sample_eta(m: int, d: int, eps: float, delta: float, law: str = "norm_gamma", rng=None, dtype=np.float64):
    """Objective-perturbation noise matrix (``m x d``) by name: ``norm_gamma`` (Theorem 1) or ``laplace`` (Lemma 1)."""
    if law == "norm_gamma":
        return norm_gamma(m, d, eps, delta, rng, dtype)
    if law == "laplace":
        return laplace_coords(m, d, eps, delta, rng, dtype)
    raise ParameterError(f"parameter 'noise_law' must be 'norm_gamma' (Theorem 1) or 'laplace' (Lemma 1), got {law!r}")
