"""Privacy ledger and distinguishing audits (issue #13): kernels vs references, audits of mechanisms with a known ε,
audits of deliberately broken mechanisms, and the ledger's provable ε against dp-accounting."""

import math

import numpy as np
import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import audit as au
from dpmf_lib.privacy import ledger as lg


def test_threshold_counts_kernel_matches_reference():
    rng = np.random.default_rng(0)
    s0 = np.round(rng.normal(size=300), 1)  # ties on purpose
    s1 = np.round(rng.normal(0.5, 1, size=250), 1)
    thr = np.concatenate([np.unique(np.concatenate([s0, s1])), [np.inf]])
    fp = np.empty(len(thr), np.int64)
    fn = np.empty(len(thr), np.int64)
    au.threshold_counts(np.sort(s0), np.sort(s1), thr, fp, fn)
    rfp, rfn = au.threshold_counts_reference(s0, s1, thr)
    assert np.array_equal(fp, rfp) and np.array_equal(fn, rfn)


def test_laplace_llr_kernel_matches_reference():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=7), rng.normal(size=7)
    noise = rng.laplace(0, 0.7, size=(50, 7))
    for centre_is_b in (False, True):
        out = np.empty(50)
        au.laplace_llr(noise, a, b, 0.7, centre_is_b, out)
        np.testing.assert_allclose(out, au.laplace_llr_reference(noise, a, b, 0.7, centre_is_b), rtol=1e-12)


def test_clopper_pearson_zero_successes_closed_form():
    # P[0 successes] = (1-p)^n = alpha at the bound
    for n in (10, 1000):
        assert au.cp_upper(0, n, 0.025) == pytest.approx(1 - 0.025 ** (1 / n), rel=1e-9)
    with pytest.raises(ParameterError):
        au.cp_upper(5, 3, 0.05)


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


def test_analytic_gaussian_agrees_with_dp_accounting():
    for sigma, sens, delta in ((1.0, 1.0, 1e-5), (3.0, 1.2, 1e-3), (0.5, 1.0, 0.1)):
        ours = lg.analytic_gaussian_epsilon(sigma, sens, delta)
        assert ours == pytest.approx(lg.pld_gaussian(sigma, sens, delta), rel=2e-2, abs=2e-3)
    assert lg.analytic_gaussian_epsilon(0.0, 1.0, 1e-5) == math.inf


def test_ledger_entries_agree_with_dp_accounting():
    mf = lg.dpsgd_mf_entry(1.0, 5, 4.0)
    assert mf.epsilon_provable == 2.0 and mf.pld_epsilon == pytest.approx(2.0, rel=1e-2)
    s2 = lg.hua_rounds_entry(1.0, 10, 2, "S2")  # ε/T per round, composed
    assert s2.epsilon_provable == 1.0 and s2.pld_epsilon <= 1.0 + 1e-2
    stated = lg.hua_rounds_as_stated(1.0, 10, 2, "S2")  # ε per round, as the paper runs it
    assert stated.epsilon_provable == 10.0 and 1.0 < stated.pld_epsilon <= 10.0 + 1e-2
    blip = lg.blip_entry(2.0, 4)
    assert blip.epsilon_provable == pytest.approx(2.0) and blip.pld_epsilon == pytest.approx(2.0, rel=1e-2)
    cs = lg.count_sketch_entry(1.0)
    assert cs.epsilon_provable == math.inf and cs.no_finite_reason
    liu = lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=False)
    assert liu.epsilon_provable == math.inf and "range" in liu.no_finite_reason


def test_dpsgd_pnbm_bound_exceeds_stated_by_L_times_Nk():
    e = lg.dpsgd_pnbm_entry(1.0, 1, 1.0, 40, 5, 4.0, 10.0)
    assert e.epsilon_provable == pytest.approx(200.0) and e.pld_epsilon == pytest.approx(200.0, rel=1e-6)


def test_check_entry_refuses_an_unexplained_infinite_epsilon():
    e = lg.LedgerEntry("x", "paper", "rating", 1.0, 0.0, math.inf, 0.0)
    with pytest.raises(ParameterError):
        lg.check_entry(e)


def test_dpsgd_pnbm_clipped_entry_is_its_stated_epsilon_and_agrees_with_dp_accounting():
    e = lg.dpsgd_pnbm_clipped_entry(1.0, 10, 1.0, 0.1, 4.0)
    assert e.source == "ours" and "(ours)" in e.mechanism
    assert e.epsilon_provable == 1.0
    assert e.extra["epsilon_item_means"] + 10 * e.extra["epsilon_per_iteration"] == pytest.approx(1.0)
    assert e.extra["laplace_scale_t1"] == pytest.approx(2.0 * 10 / 0.9)
    assert e.pld_epsilon <= 1.0 + 1e-2 and e.rdp_epsilon <= 1.0 + 5e-2


def test_dpsgd_pnbm_clipped_audit_stays_below_its_per_iteration_epsilon():
    """On the ledger's ML-100K sub-instance: the worst rating moves the clipped gradient by ≤ 2·clip, so the exact
    loss of the audited pair is ≤ (1 − share)·ε, and the audit's lower bound stays below it."""
    from dpmf_lib.experiments import extra_privacy_ledger as xl
    from dpmf_lib.params import load_params

    p = load_params("extra_privacy_ledger", "smoke")
    sub = xl.sub_instance(xl._ml100k(), 8, 6)
    res, pair, ratio = xl.audit_dpsgd_pnbm_clipped(sub, p, 1.0, 400, 0, 0.95)
    assert ratio <= 2.0 * (1 + 1e-5)
    assert pair <= (1 - p["pnbm_mean_share"]) * 1.0 * (1 + 1e-5)
    assert res.epsilon_lower <= pair


def test_liu_clipped_entry_has_a_finite_provable_epsilon_where_the_paper_has_none():
    ours = lg.liu_clipped_entry(4.0, 125.0, 5)
    paper = lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=False)
    assert ours.source == "ours" and "(ours)" in ours.mechanism and ours.epsilon_provable == 4.0
    assert paper.epsilon_provable == math.inf
    assert ours.extra["epsilon_rating_level"] == pytest.approx(0.8)
