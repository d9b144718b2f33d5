"""Chapter-3 chains sized to mix (#15): chain length scaled with c_max, and the exact check at a flat likelihood."""

import math

import numpy as np
import pytest

from dpmf_lib.attacks import BLIP, bloom_codebook, decoders
from dpmf_lib.errors import ParameterError


def test_chain_length_keeps_the_thesis_length_when_enough_and_scales_otherwise():
    assert decoders.chain_length(1000, 19000, 100, None) == (1000, 19000)
    assert decoders.chain_length(1000, 19000, 100, 50) == (1000, 19000)  # 200 updates per slot already
    T, M = decoders.chain_length(1000, 19000, 400, 500)  # needs 200,000 transitions
    assert T + M >= 500 * 400 and T + M <= 500 * 400 + 2
    assert T / (T + M) == pytest.approx(0.05, abs=1e-4)  # T : M kept
    for bad in (0, -1, math.inf, float("nan"), "500"):
        with pytest.raises(ParameterError, match="min_sweeps"):
            decoders.chain_length(10, 10, 5, bad)


def _eps0_user(seed=0, n_items=60, L=400, K=5):
    cb = bloom_codebook(n_items, L, K, seed=seed)
    m = BLIP(cb, 0.0)
    obs = m.sanitize(np.array([1, 5, 9]), seed=seed)
    q = np.random.default_rng(seed).uniform(0.02, 0.4, n_items)
    return m, obs, q


def test_exact_check_at_eps0_measures_how_far_the_chain_is_from_the_prior():
    """At ε = 0 the likelihood is flat and c_max = |candidates|: the exact marginals are the priors q. A long chain
    gets close to them (error small, ranks agree), a very short one does not; the error shrinks with chain length."""
    m, obs, q = _eps0_user()
    out = {}
    for sweeps in (2, 3000):
        d = {}
        decoders.attack(m, obs, q, attacks=("mcmc_prior", "mcmc_flat"), f=4, burn_in=1, n_samples=1,
                        c_fallback=6.0, min_sweeps=sweeps, seed=1, diagnostics=d)
        assert d["mcmc_prior:sweeps"] >= sweeps
        out[sweeps] = d
    assert out[3000]["mcmc_prior:exact_err"] < 0.03 and out[3000]["mcmc_prior:exact_spearman"] > 0.9
    assert out[2]["mcmc_prior:exact_err"] > 2 * out[3000]["mcmc_prior:exact_err"]
    assert np.isnan(out[3000]["mcmc_flat:exact_spearman"])  # the flat prior's exact marginals are all equal
    assert out[3000]["mcmc_flat:exact_err"] < 0.03


def test_exact_check_matches_a_direct_computation():
    m, obs, q = _eps0_user(seed=3)
    lr = decoders.log_odds(q)
    cand = np.arange(10, 30)
    res = decoders.mcmc_blip(obs, m, cand, lr, c_max=len(cand), c_init=3, burn_in=50, n_samples=3000, seed=0)
    err, rho = decoders.flat_likelihood_check(m, res, lr)
    assert err == pytest.approx(np.mean(np.abs(res.marginals - q[cand])), rel=1e-9)
    from scipy import stats
    assert rho == pytest.approx(stats.spearmanr(res.marginals, q[cand])[0])
    # not applicable: truncated profile (c_max < |candidates|) or an informative likelihood (ε > 0)
    short = decoders.mcmc_blip(obs, m, cand, lr, c_max=5, c_init=3, burn_in=5, n_samples=50, seed=0)
    assert decoders.flat_likelihood_check(m, short, lr) is None
    m8 = BLIP(m.codebook, 8.0)
    assert decoders.flat_likelihood_check(m8, res, lr) is None


def test_attack_grid_rejects_a_bad_min_sweeps():
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3
    from dpmf_lib.params import load_params

    p = load_params("balu_fig3_2", "smoke")
    with pytest.raises(ParameterError, match="min_sweeps"):
        ch3.run_attack_grid("blip", {**p, "min_sweeps": -3})


def test_fig3_6_gives_jlt_its_own_users_and_chain_length():
    from dpmf_lib.experiments.balu import balu_fig3_6 as e
    from dpmf_lib.params import load_params

    p = load_params("balu_fig3_6", "paper")
    b, j = e._mech_params(p, "blip"), e._mech_params(p, "jlt")
    q2, q3 = load_params("balu_fig3_2", "paper"), load_params("balu_fig3_3", "paper")
    # the same settings as Figures 3.2 / 3.3 at `paper`, so the result cache is shared
    assert (b["n_attacked"], b["min_sweeps"]) == (q2["n_attacked"], q2["min_sweeps"])
    assert (j["n_attacked"], j["min_sweeps"]) == (q3["n_attacked"], q3["min_sweeps"])
    c = load_params("balu_fig3_6", "ci")
    assert e._mech_params(c, "jlt")["n_attacked"] == c["n_attacked"]  # 'same'
