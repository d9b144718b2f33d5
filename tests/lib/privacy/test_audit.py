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
