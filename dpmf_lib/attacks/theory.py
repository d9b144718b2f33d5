"""Information-theoretic quantities of thesis Section 3.3.3 (all in nats).

BLIP, simple model (Section 3.1.2): p = 1 - (1 - 1/L)^K (3.5), pi_c = 1 - (1 - p)^c (3.6),
pi~_c = (1 - p_eps) pi_c + p_eps (1 - pi_c) (3.7).
- single decoder: I(B~; X) = L (h(pi~_c) - (1 - p) h(pi~_{c-1}) - p h(p_eps)) (3.16); approximation (3.18)
- joint decoder: I(B~; P) = L (h(pi~_c) - h(p_eps)) (3.19)
- K = ceil(ln 2 * L / c) (3.20), L = ceil(-c ln(P_fp) / (ln 2)^2) (3.22), the asymptotics (3.23)–(3.24), bound (3.21)
JLT: I(Y~; X) = L/2 log(1 + 1/((c - 1) + L sigma^2)) (3.25), I(Y~; P)/c = L/(2c) log(1 + c/(L sigma^2)) (3.26).
The bound printed in (3.25), eps / (32 + 2 eps (c-1) L), follows from sigma^2 >= 16/eps only with (c-1)/L in place of
(c-1) L (a typo in the thesis); :func:`jlt_single_bound` uses the derivable form eps / (32 + 2 eps (c-1) / L).
"""

from __future__ import annotations

import math

import numpy as np

from .mechanisms import blip_flip_probability


def hb(p):
    """Binary entropy in nats (3.17), vectorised; hb(0) = hb(1) = 0."""
    p = np.asarray(p, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = -(p * np.log(p) + (1 - p) * np.log1p(-p))
    return np.where((p <= 0) | (p >= 1), 0.0, out)


def bit_probability(L, K):
    return 1.0 - (1.0 - 1.0 / np.asarray(L, dtype=np.float64)) ** np.asarray(K, dtype=np.float64)


def pi_c(c, L, K):
    return 1.0 - (1.0 - bit_probability(L, K)) ** np.asarray(c, dtype=np.float64)


def pi_tilde(c, L, K, p_eps):
    pc = pi_c(c, L, K)
    return (1 - p_eps) * pc + p_eps * (1 - pc)


def _p_eps(eps, K):
    return np.vectorize(blip_flip_probability, otypes=[float])(eps, K)


def blip_mi_single(c, L, K, eps):
    """I(B~_P; X) (3.16)."""
    pe = _p_eps(eps, K)
    p = bit_probability(L, K)
    return np.asarray(L) * (hb(pi_tilde(c, L, K, pe)) - (1 - p) * hb(pi_tilde(np.asarray(c) - 1, L, K, pe))
                            - p * hb(pe))


def blip_mi_joint(c, L, K, eps):
    """I(B~_P; P) (3.19)."""
    pe = _p_eps(eps, K)
    return np.asarray(L) * (hb(pi_tilde(c, L, K, pe)) - hb(pe))


def bloom_K(c, L):
    """K = ceil(ln 2 * L / c) (3.20)."""
    return np.ceil(math.log(2) * np.asarray(L, dtype=np.float64) / np.asarray(c, dtype=np.float64)).astype(np.int64)


def bloom_L(c, p_fp):
    """L = ceil(-c ln(P_fp) / (ln 2)^2) (3.22)."""
    return np.ceil(-np.asarray(c, dtype=np.float64) * math.log(p_fp) / math.log(2) ** 2).astype(np.int64)


def joint_per_item_asymptotic(eps, p_fp):
    """(3.23): I(B~; P)/c for a well-designed filter, independent of c."""
    a = -math.log(p_fp)
    return a / math.log(2) * (1 - hb(1 / (1 + 2 ** (-eps / a))) / math.log(2))


def blip_bound(eps, K):
    """Upper bound (3.21) on h(pi~) - h(p_eps): eps/K."""
    return np.asarray(eps, dtype=np.float64) / np.asarray(K, dtype=np.float64)


def jlt_mi_single(c, L, sigma):
    """I(Y~; X) (3.25)."""
    c = np.asarray(c, dtype=np.float64)
    return np.asarray(L) / 2 * np.log1p(1.0 / ((c - 1) + np.asarray(L) * np.asarray(sigma) ** 2))


def jlt_mi_joint_per_item(c, L, sigma):
    """I(Y~; P)/c (3.26)."""
    c = np.asarray(c, dtype=np.float64)
    return np.asarray(L) / (2 * c) * np.log1p(c / (np.asarray(L) * np.asarray(sigma) ** 2))


def jlt_single_bound(eps, c, L):
    return np.asarray(eps) / (32 + 2 * np.asarray(eps) * (np.asarray(c) - 1) / np.asarray(L))


def jlt_joint_bound(eps):
    return np.asarray(eps) / 32.0
