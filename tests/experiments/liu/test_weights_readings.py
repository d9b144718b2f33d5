"""Section 6.6's two readings of m_i in the weights (before / after trimming to τ) and Theorem 2's two readings."""

from __future__ import annotations

import numpy as np
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import posterior_sampling as ps


def ratings_with_counts(counts, n_items=400, seed=0):
    rng = np.random.default_rng(seed)
    users = np.repeat(np.arange(len(counts)), counts)
    items = np.concatenate([rng.choice(n_items, c, replace=False) for c in counts])
    vals = rng.integers(1, 6, len(users)).astype(np.float32)
    return Ratings(users.astype(np.int32), items.astype(np.int32), vals, len(counts), n_items, (1.0, 5.0),
                   DataSource("toy", real=False))


def test_untrimmed_default_and_trimmed_reading_of_m_i():
    tau, kappa = 50, 1.0
    counts = np.array([10, 50, 100, 200])
    r = ratings_with_counts(counts)
    c = (5 - 1 + kappa) ** 2
    un = ps.preprocess(r, tau=tau, kappa=kappa, rho=1.0, seed=0)
    tr = ps.preprocess(r, tau=tau, kappa=kappa, rho=1.0, seed=0, weights_from="trimmed")
    # default: m_i before trimming; heavy users are down-weighted to tau / m_i
    np.testing.assert_allclose(un.w, np.minimum(1.0, tau / counts))
    np.testing.assert_allclose(un.B_i, np.minimum(tau, counts) * un.w * c)
    # other reading: m_i after trimming; every user with m_i >= tau has weight 1 and B_i = B
    np.testing.assert_allclose(tr.w, 1.0)
    np.testing.assert_allclose(tr.B_i, np.minimum(tau, counts) * c)
    for pre in (un, tr):
        assert pre.B == pytest.approx(tau * c) and np.all(pre.B_i <= pre.B + 1e-9)
        np.testing.assert_array_equal(pre.kept, np.minimum(counts, tau))  # trimming itself is the same
    np.testing.assert_array_equal(un.train.users, tr.train.users)  # same seed: same kept ratings
    with pytest.raises(ParameterError, match="weights_from"):
        ps.preprocess(r, tau=tau, kappa=kappa, rho=1.0, seed=0, weights_from="both")


def test_theorem2_both_readings_are_measured_and_differ_by_exactly_two():
    from dpmf_lib.experiments.extra import extra_liu_personalized_privacy as pp
    from dpmf_lib.params import load_params

    p = load_params("extra_liu_personalized_privacy", "smoke")
    assert p["weights_from"] == "untrimmed"
    df = pp.run(p)
    np.testing.assert_allclose(df.eps_hat_over_eps_alt, 2 * df.eps_hat_over_eps)
    np.testing.assert_allclose(df.eps_i_over_eps_alt, df.B_i / df.B)  # eps_i / eps = B_i / B
    counterpart = pp.TYPICAL_CLAIMS["ml-100k"]  # smoke runs real ML-100K
    ms = {m["setting"]: m["value"] for m in df.attrs["measurements"] if m["claim"] == counterpart}
    assert len(ms) == 2
    first, second = (ms[k] for k in sorted(ms, key=lambda k: "2B" not in k))
    assert second == pytest.approx(2 * first)
