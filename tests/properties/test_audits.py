"""Distinguishing audits (issue #13, dpmf_lib.privacy.audit): on mechanisms with a known ε the audited lower bound is
≤ ε and close to it; on deliberately broken mechanisms it exceeds the stated ε. Statistical, at fixed seeds."""

import numpy as np
import pytest

from dpmf_lib.privacy import audit as au
from dpmf_lib.privacy import ledger as lg


@pytest.mark.parametrize("eps", [0.5, 1.0, 2.0])
def test_laplace_audit_is_a_lower_bound_and_tight(eps):
    """Laplace(1/ε) on a sensitivity-1 query: the audited bound is ≤ ε and, with 40k runs a side, close to it."""
    res = au.audit_laplace_vector(np.zeros(1), np.ones(1), 1.0 / eps, 40000, seed=3)
    assert res.epsilon_lower <= eps
    assert res.epsilon_lower >= 0.8 * eps


def test_audit_of_broken_laplace_exceeds_its_stated_epsilon():
    """Noise calibrated to one coordinate while the change touches five (the DPSGD-PNBM bug): stated ε = 0.5, true 2.5."""
    stated = 0.5
    res = au.audit_laplace_vector(np.zeros(5), np.ones(5), 1.0 / stated, 20000, seed=4)
    assert res.epsilon_lower > 3 * stated


def test_audit_of_a_deterministic_release_grows_without_bound():
    small = au.audit_statistics(np.zeros(100), np.ones(100)).epsilon_lower
    big = au.audit_statistics(np.zeros(10000), np.ones(10000)).epsilon_lower
    assert big > small > 2.0


def test_audit_of_identical_laws_is_near_zero():
    rng = np.random.default_rng(5)
    res = au.audit_statistics(rng.normal(size=4000), rng.normal(size=4000))
    assert res.epsilon_lower < 0.2


def test_blackbox_projection_audit_on_a_gaussian_mechanism():
    """A 3-d Gaussian release with a mean shift: the learned linear test certifies ≤ the exact curve at δ."""
    rng = np.random.default_rng(6)
    sigma, shift, delta = 0.5, np.array([1.0, 0.0, 0.0]), 1e-3
    R0 = rng.normal(0, sigma, size=(20000, 3))
    R1 = shift + rng.normal(0, sigma, size=(20000, 3))
    res = au.audit_releases(R0, R1, delta=delta)
    exact = lg.analytic_gaussian_epsilon(sigma, 1.0, delta)
    assert 0.5 * exact < res.epsilon_lower <= exact


def test_blip_audit_matches_its_epsilon():
    """BLIP: the exact bit-count test on K uncovered bits certifies ≤ ε and most of it."""
    from dpmf_lib.attacks.mechanisms import BLIP, bloom_codebook

    cb = bloom_codebook(50, 64, 2, seed=0)
    j = next(j for j in range(1, 50) if cb.nbits[j] == 2)
    mech = BLIP(cb, 2.0)
    rng = np.random.default_rng(0)
    pos = cb.bits[j, :2]
    s0 = np.array([mech.sanitize(np.array([], np.int64), seed=rng)[pos].sum() for _ in range(20000)], float)
    s1 = np.array([mech.sanitize(np.array([j]), seed=rng)[pos].sum() for _ in range(20000)], float)
    res = au.audit_statistics(s0, s1)
    assert 1.5 < res.epsilon_lower <= 2.0


def test_dpsgd_pnbm_clipped_audit_stays_below_its_per_iteration_epsilon():
    """On the ledger's ML-100K sub-instance: the worst rating moves the clipped gradient by ≤ 2·clip, so the exact
    loss of the audited pair is ≤ (1 − share)·ε, and the audit's lower bound stays below it."""
    from dpmf_lib.experiments.extra import extra_privacy_ledger as xl
    from dpmf_lib.params import load_params

    p = load_params("extra_privacy_ledger", "smoke")
    sub = xl.sub_instance(xl._ml100k(), 8, 6)
    res, pair, ratio = xl.audit_dpsgd_pnbm_clipped(sub, p, 1.0, 400, 0, 0.95)
    assert ratio <= 2.0 * (1 + 1e-5)
    assert pair <= (1 - p["pnbm_mean_share"]) * 1.0 * (1 + 1e-5)
    assert res.epsilon_lower <= pair
