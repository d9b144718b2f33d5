"""Mutual-information expressions (3.16)–(3.26) against Monte-Carlo estimates, and their limits."""

import math

import numpy as np
import pytest

from dpmf_lib.attacks import blip_flip_probability, jlt_sigma
from dpmf_lib.attacks import theory


def _plugin_mi(a, b):
    """Plug-in mutual information (nats) of two 0/1 arrays."""
    joint = np.zeros((2, 2))
    np.add.at(joint, (a.astype(int), b.astype(int)), 1)
    joint /= joint.sum()
    pa, pb = joint.sum(1, keepdims=True), joint.sum(0, keepdims=True)
    nz = joint > 0
    return float((joint[nz] * np.log(joint[nz] / (pa @ pb)[nz])).sum())


@pytest.mark.parametrize("c,L,K,eps", [(5, 60, 4, 6.0), (3, 40, 6, 20.0)])
def test_blip_per_bit_information_matches_monte_carlo(c, L, K, eps):
    # real hashing (K positions per item, with repeats), c-item profiles, item 0 of the profile is the tested one
    rng = np.random.default_rng(0)
    n = 40_000
    pe = blip_flip_probability(eps, K)
    pos = rng.integers(0, L, size=(n, c, K))
    X = np.zeros((n, c, L), dtype=bool)
    X[np.arange(n)[:, None, None], np.arange(c)[None, :, None], pos] = True
    B = X.any(axis=1)
    Bt = B ^ (rng.random((n, L)) < pe)
    mi_single = _plugin_mi(X[:, 0, :].ravel(), Bt.ravel())
    mi_joint = _plugin_mi(B.ravel(), Bt.ravel())  # I(B~(l); B(l)) = I(B~(l); X_1..X_c(l)) per bit
    assert mi_single == pytest.approx(float(theory.blip_mi_single(c, L, K, eps)) / L, rel=0.06, abs=2e-4)
    assert mi_joint == pytest.approx(float(theory.blip_mi_joint(c, L, K, eps)) / L, rel=0.03, abs=2e-4)


def test_jlt_information_matches_monte_carlo():
    rng = np.random.default_rng(1)
    c, L, sigma, n = 20, 100, 0.3, 400_000
    # per coordinate: x ~ N(0, 1/L) (tested item), rest ~ N(0, (c-1)/L + sigma^2), y = x + rest
    v_rest = (c - 1) / L + sigma ** 2
    x = rng.normal(0, math.sqrt(1 / L), n)
    y = x + rng.normal(0, math.sqrt(v_rest), n)
    v_y = v_rest + 1 / L
    mc_single = np.mean(-(y - x) ** 2 / (2 * v_rest) + y ** 2 / (2 * v_y)) - 0.5 * math.log(v_rest / v_y)
    assert mc_single == pytest.approx(float(theory.jlt_mi_single(c, L, sigma)) / L, rel=0.05)
    s = rng.normal(0, math.sqrt(c / L), n)  # sum of the c codewords
    y = s + rng.normal(0, sigma, n)
    mc_joint = np.mean(-(y - s) ** 2 / (2 * sigma ** 2) + y ** 2 / (2 * (c / L + sigma ** 2))) \
        - 0.5 * math.log(sigma ** 2 / (c / L + sigma ** 2))
    assert mc_joint == pytest.approx(float(theory.jlt_mi_joint_per_item(c, L, sigma)) * c / L, rel=0.02)


def test_joint_beats_single_and_ratio_tends_to_one_over_ln2():
    c = np.array([10, 50, 106, 300])
    L = np.array([500, 2000, 5000, 10000])
    for ci in c:
        for Li in L:
            K = int(theory.bloom_K(ci, Li))
            assert theory.blip_mi_joint(ci, Li, K, 20.0) / ci >= theory.blip_mi_single(ci, Li, K, 20.0) - 1e-12
    cbig, pfp = 2000, 2.0 ** -7 * 1.001  # P_fp ~ 2^-K makes (3.20) nearly an integer, so the ceilings hardly matter
    Lw = int(theory.bloom_L(cbig, pfp))
    Kw = int(theory.bloom_K(cbig, Lw))
    ratio = (theory.blip_mi_joint(cbig, Lw, Kw, 20.0) / cbig) / theory.blip_mi_single(cbig, Lw, Kw, 20.0)
    assert ratio == pytest.approx(1 / math.log(2), rel=0.02)
    assert float(theory.blip_mi_joint(cbig, Lw, Kw, 20.0)) / cbig == pytest.approx(
        float(theory.joint_per_item_asymptotic(20.0, pfp)), rel=0.01)


def test_bounds_and_eps_zero():
    for eps in (0.5, 2.0, 8.0, 20.0):
        for K in (1, 5, 20):
            for c, L in ((10, 500), (106, 5000)):
                pe = blip_flip_probability(eps, K)
                gap = theory.hb(theory.pi_tilde(c, L, K, pe)) - theory.hb(pe)
                assert gap <= theory.blip_bound(eps, K) + 1e-12
    assert float(theory.blip_mi_joint(106, 5000, 20, 0.0)) == pytest.approx(0.0, abs=1e-12)
    assert float(theory.blip_mi_single(106, 5000, 20, 0.0)) == pytest.approx(0.0, abs=1e-12)
    delta = 0.05  # eps < log(1/delta) = 3.0 is required by (3.10)
    for eps in (0.1, 1.0, 2.9):
        s = jlt_sigma(eps, delta)
        for c, L in ((10, 1000), (106, 1000), (300, 50)):
            assert theory.jlt_mi_single(c, L, s) <= theory.jlt_single_bound(eps, c, L) + 1e-12
            assert theory.jlt_mi_joint_per_item(c, L, s) <= theory.jlt_joint_bound(eps) + 1e-12
