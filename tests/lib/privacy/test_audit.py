"""dpmf_lib.privacy.audit's pieces (issue #13): the numba kernels against their plain references, Clopper-Pearson's
closed form. The audits themselves, on mechanisms with a known ε and on broken ones, are in
tests/properties/test_audits.py."""

import numpy as np
import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import audit as au


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


# ---- validity of the procedure: disjoint calibration and evaluation, the two-sided confidence correction ----


def test_epsilon_from_counts_is_the_alpha_over_2_clopper_pearson_bound():
    """ε_lower = max(0, ln((1 − FNR_u)/FPR_u), ln((1 − FPR_u)/FNR_u)) with each rate's one-sided Clopper–Pearson
    upper bound at (1 − confidence)/2 (a union bound over the two rates), computed here from the Beta quantile."""
    from scipy.stats import beta

    for fp, n0, fn, n1, conf in ((0, 100, 0, 100, 0.95), (3, 500, 40, 400, 0.95), (10, 1000, 2, 1000, 0.99)):
        a = (1 - conf) / 2
        fpr, fnr = beta.ppf(1 - a, fp + 1, n0 - fp), beta.ppf(1 - a, fn + 1, n1 - fn)
        want = max(0.0, np.log((1 - fnr) / fpr), np.log((1 - fpr) / fnr))
        assert au.epsilon_from_counts(fp, n0, fn, n1, confidence=conf) == pytest.approx(want, rel=1e-10)
    # no errors: the largest certifiable ε at n runs, ln((1 − u)/u) with u = 1 − (α/2)^{1/n}
    u = 1 - 0.025 ** (1 / 200)
    assert au.reach(200) == pytest.approx(np.log((1 - u) / u), rel=1e-10)


def test_evaluation_counts_come_from_the_evaluation_half_only():
    """Calibration half perfectly separable, evaluation half identical laws: a valid audit finds ≈ 0 (the threshold
    chosen on the first half separates nothing on the second); counting on the calibration half would certify a lot."""
    rng = np.random.default_rng(7)
    n = 2000
    s0 = np.concatenate([np.zeros(n // 2), rng.normal(size=n // 2)])
    s1 = np.concatenate([np.ones(n // 2), rng.normal(size=n // 2)])
    res = au.audit_statistics(s0, s1)
    assert res.n_calibration == res.n_evaluation == n // 2 and res.n0 == res.n1 == n // 2
    assert res.epsilon_lower < 0.2


def test_projection_is_learned_on_the_calibration_half_only():
    """The linear test of a black-box audit depends on the calibration rows alone: rewriting the evaluation rows
    leaves the calibration rows' statistics unchanged."""
    rng = np.random.default_rng(8)
    R0, R1 = rng.normal(size=(400, 5)), rng.normal(0.3, 1, size=(400, 5))
    a0, a1 = au.projection_statistic(R0, R1)
    R0b, R1b = R0.copy(), R1.copy()
    R0b[200:] = rng.normal(5, 3, size=(200, 5))
    R1b[200:] = rng.normal(-5, 3, size=(200, 5))
    b0, b1 = au.projection_statistic(R0b, R1b)
    np.testing.assert_allclose(a0[:200], b0[:200])
    np.testing.assert_allclose(a1[:200], b1[:200])


def test_audits_of_an_eps_dp_mechanism_exceed_eps_at_most_at_the_confidence_level():
    """Validity end to end: 300 independent audits (100 runs a side) of a mechanism that is exactly 1-DP — randomized
    response at ε = 1, the pair whose threshold tests are tight — exceed ε = 1 in at most 5 % of the audits (binomial
    test at 10⁻³). Dropping the confidence correction or reusing the calibration runs for evaluation breaks this."""
    from scipy import stats

    rng = np.random.default_rng(9)
    eps, n, reps = 1.0, 100, 300
    p = 1 / (1 + np.exp(eps))
    over = 0
    for _ in range(reps):
        s0 = (rng.random(n) < p).astype(float)  # says "D′" with probability p on D
        s1 = (rng.random(n) >= p).astype(float)
        over += au.audit_statistics(s0, s1).epsilon_lower > eps
    assert stats.binomtest(over, reps, 0.05, alternative="greater").pvalue > 1e-3, over


def test_detectable_epsilon_is_consistent_with_the_bound():
    for n in (100, 2000):
        e0 = au.detectable_epsilon(n)
        e1 = au.detectable_epsilon(n, 1.0)
        assert 0 < e0 < e1 < au.reach(n)
        p = 1 / (1 + np.exp(e1 * 1.05))  # a little above: the expected counts certify more than 1
        k = int(round(p * n))
        assert au.epsilon_from_counts(k, n, k, n) > 1.0
    assert au.detectable_epsilon(100, au.reach(100)) == np.inf
