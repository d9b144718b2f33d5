"""Privacy accounting of the PNBM paper, and the standard subsampling bound beside it.

DPSGD-PNBM (section 3, Theorem 1), iteration t = 1..K (t counts from 1 — the paper does not say; with t = 1 the first
clamp is 0.5 + (φ-1)/2):
    error clamp        e_max(t) = 0.5 + (φ - 1)/(t + 1)                 φ = r_max - r_min
    gradient bound     max|G^(t)| ≤ e_max(t) φ / C                      C = lower bound on |S_i| I_u
    sensitivity        ΔF^(t) = 2 e_max(t) φ / C
    per-iteration ε    ε^(t) = ε / (K γ)                                 γ = L / 𝓛 (sampling ratio)
    Laplace scale      b^(t) = ΔF^(t) / ε^(t)

The paper's ε rests on the "privacy enhancing technique" (an ε^(t)-DP step on a γ-subsample is γ ε^(t)-DP) and basic
composition. The standard amplification-by-subsampling bound (sampling without replacement, one record replaced) is
ε' = ln(1 + γ (e^{ε^(t)} - 1)) per iteration, K ε' over K iterations (basic composition); it equals the paper's ε only
when γ = 1 and exceeds it when γ < 1 and ε^(t) is not small. :func:`amplified_epsilon` gives that number so every
figure can show both.

DPPS-PNBM (section 4.3): one posterior sample with the log-posterior scaled by ε/(4B) is ε-DP at user level when each
user's log-likelihood is bounded by B = (r_max - r_min)² τ (τ = max ratings per user). ε ≥ 4B means no scaling.
"""

from __future__ import annotations

import math

import numpy as np

from .. import validate
from ..errors import ParameterError


_EPS_FIX = "use epsilon=None for the non-private model"


def check_epsilon(eps, name: str = "epsilon") -> float:
    """ε of the PNBM mechanisms: :func:`dpmf_lib.validate.epsilon` (None is the callers' non-private branch)."""
    return validate.epsilon(eps, name, fix=_EPS_FIX)


def error_clamp(t: int, phi: float) -> float:
    """e_max(t) = 0.5 + (φ - 1)/(t + 1)."""
    if t < 1:
        raise ParameterError(f"iteration index t counts from 1, got {t}")
    return 0.5 + (phi - 1.0) / (t + 1.0)


def sensitivity(t: int, phi: float, C: float) -> float:
    """ΔF^(t) = 2 (0.5 + (φ - 1)/(t + 1)) φ / C."""
    return 2.0 * error_clamp(t, phi) * phi / validate.positive(C, "C")


def epsilon_per_iteration(eps: float, K: int, gamma: float) -> float:
    """ε^(t) = ε / (K γ) (Theorem 1)."""
    eps = check_epsilon(eps)
    K = validate.integer(K, "K", what="the PNBM schedule (iterations)")
    gamma = validate.positive(gamma, "gamma")
    if gamma > 1:
        raise ParameterError(f"parameter 'gamma' (sampling ratio L/𝓛) must lie in (0, 1], got {gamma}")
    return eps / (K * gamma)


def laplace_scale(t: int, eps: float, K: int, gamma: float, phi: float, C: float) -> float:
    """Scale b of the Laplace noise added to every similarity-gradient entry at iteration t: ΔF^(t) / ε^(t)."""
    return sensitivity(t, phi, C) / epsilon_per_iteration(eps, K, gamma)


def amplified_epsilon(eps: float, K: int, gamma: float) -> float:
    """K ln(1 + γ (e^{ε^(t)} - 1)) with ε^(t) = ε/(Kγ): the standard subsampling bound for the paper's schedule."""
    et = epsilon_per_iteration(eps, K, gamma)
    if gamma == 1.0:
        return K * et
    # ln(1 - γ + γ e^{x}) computed stably
    per = float(np.logaddexp(math.log1p(-gamma), math.log(gamma) + et))
    return K * per


def loglik_bound(rating_scale: tuple[float, float], tau: int) -> float:
    """B = (r_max - r_min)² τ (section 4.3)."""
    lo, hi = rating_scale
    return (hi - lo) ** 2 * float(tau)


def posterior_scale(eps, B: float) -> float:
    """Factor ε/(4B) on the log-posterior, capped at 1 (ε ≥ 4B: the non-private posterior). ``eps=None``: 1."""
    if eps is None:
        return 1.0
    return min(1.0, check_epsilon(eps) / (4.0 * validate.positive(B, "B")))


def pair_inclusion_prob(counts: np.ndarray, L: int) -> np.ndarray:
    """H_ij = P(item i and item j both occur in a minibatch of L ratings drawn with replacement), i ≠ j.

    With p_i = |I_i|/𝓛: H_ij = 1 - (1-p_i)^L - (1-p_j)^L + (1-p_i-p_j)^L (inclusion-exclusion). The diagonal is
    P(i occurs) = 1 - (1-p_i)^L. This is E[𝕀[i,j ∈ Φ]] for the event we apply the prior on (both items in Φ).
    """
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0 or L < 1:
        raise ParameterError(f"pair_inclusion_prob needs ratings and a minibatch size L >= 1, got total={total}, L={L}")
    p = counts / total
    qi = (1.0 - p) ** L
    both_absent = np.clip(1.0 - p[:, None] - p[None, :], 0.0, 1.0) ** L
    H = 1.0 - qi[:, None] - qi[None, :] + both_absent
    np.fill_diagonal(H, 1.0 - qi)
    return np.clip(H, 0.0, 1.0)


def pair_inclusion_prob_paper(counts: np.ndarray, L: int) -> np.ndarray:
    """The expression printed in section 4.2: H_ij = 1 - (|I_i||I_j|/𝓛²)(1-|I_j|/𝓛)^{L-1}(1-|I_i|/𝓛)^{L-1}.

    Kept to compare with :func:`pair_inclusion_prob` and a Monte-Carlo estimate (it does not match either event's
    probability; see tests/lib/nbm/test_accounting.py and the pnbm_fig2 notebook)."""
    counts = np.asarray(counts, dtype=np.float64)
    p = counts / counts.sum()
    return 1.0 - p[:, None] * p[None, :] * ((1.0 - p[None, :]) ** (L - 1)) * ((1.0 - p[:, None]) ** (L - 1))
