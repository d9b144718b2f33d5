"""The DPPS chain guards (dpmf_lib.nbm.runs.dpps_pnbm_chains / dpps_mf_chains): the released chain is the grid's,
the extra chains are independent ones on the same data from wider starts, and split-R̂ over them catches chains that
did not mix."""

import math

import numpy as np
import pandas as pd
import pytest

from dpmf_lib import nbm
from dpmf_lib.errors import ParameterError
from dpmf_lib.nbm import runs
from dpmf_lib.privacy.chains import chain_diagnostics
from tests.nbm_toys import toy

FIXED = dict(tau=20, T=16, L=40, xi=0.3, Nk=6, init_high=0.2)


def _trace(levels, n=40, seed=0):
    """Two chains of ``n`` draws of two statistics, chain k's second half around ``levels[k]`` (first halves far)."""
    rng = np.random.default_rng(seed)
    rows = []
    for k, level in enumerate(levels):
        for t in range(1, n + 1):
            base = level if t > n // 2 else 100.0 * (k + 1)  # the first half is discarded: no burn-in phase
            rows.append({"chain": k, "draw": t, "sample_rmse": base + rng.normal(0, 0.1),
                         "s_norm2": base + rng.normal(0, 0.1)})
    return pd.DataFrame(rows)


def test_split_rhat_catches_two_chains_that_did_not_mix():
    stuck = runs._second_half(_trace([0.0, 1.0]), 40, runs.PNBM_CHAIN_STATS)
    assert stuck["n_chains"] == 2 and stuck["n_draws"] == 20
    assert stuck["rhat"] > 1.5  # chains stuck 10 within-sds apart
    mixed = runs._second_half(_trace([0.0, 0.0], n=800), 800, runs.PNBM_CHAIN_STATS)
    assert mixed["rhat"] < 1.01 and mixed["ess"] > 400  # the first halves (far apart) are not read
    # the guard reads the larger R̂ of the statistics: one statistic apart is enough
    tr = _trace([0.0, 0.0], n=800)
    tr.loc[tr.chain == 1, "s_norm2"] += 1.0
    assert runs._second_half(tr, 800, runs.PNBM_CHAIN_STATS)["rhat"] > 1.5


def test_the_released_chain_is_the_grids_and_the_extra_chain_is_independent():
    r, te = toy(seed=2, nu=50, ni=30, density=0.6), toy(seed=3, nu=50, ni=30, density=0.2)
    chain = {"epsilon": 5.0, "eta1": 1e-2, "rho": 0.5, "lam": 0.02}
    got = runs.dpps_pnbm_chains(r, te, chain, FIXED, seed=8)
    one = nbm.sample_pnbm(r, **chain, **FIXED, seed=8, test=te)  # what evaluate() runs for this grid point
    assert got["rmse"] == one.info["rmse"] and got["rmse_start"] == one.info["rmse_start"]
    assert got["moved"] == abs(one.info["rmse"] - one.info["rmse_start"])
    assert got["n_chains"] == 2 and got["n_draws"] == FIXED["T"] - FIXED["T"] // 2
    assert math.isfinite(got["rhat"]) and math.isfinite(got["ess"])
    # noise_seed: the same trimmed data, another start, other minibatches and noise
    a, = nbm.sample_pnbm_batch(r, [chain], **FIXED, seed=8, noise_seed=123)
    b, = nbm.sample_pnbm_batch(r, [chain], **FIXED, seed=8, noise_seed=123)
    assert a.S.tobytes() == b.S.tobytes() != one.S.tobytes()
    assert a.info["n_trimmed"] == one.info["n_trimmed"]


def test_chains_that_barely_move_from_different_starts_fail_rhat():
    """At a step as small as the paper's, the chain from the 10× wider start keeps its mean squared entry (100× the
    released chain's): R̂ is far above 1.05."""
    r, te = toy(seed=2, nu=50, ni=30, density=0.6), toy(seed=3, nu=50, ni=30, density=0.2)
    got = runs.dpps_pnbm_chains(r, te, {"epsilon": 5.0, "eta1": 1e-8, "rho": 0.001, "lam": 0.02}, FIXED, seed=8)
    assert got["rhat_s_norm2"] > 10 and got["rhat"] >= got["rhat_s_norm2"]
    assert got["moved"] < 1e-3


def test_the_chain_settings_are_checked():
    r, te = toy(seed=2, nu=20, ni=10), toy(seed=3, nu=20, ni=10, density=0.2)
    chain = {"epsilon": 5.0, "eta1": 1e-2, "rho": 0.5, "lam": 0.02}
    with pytest.raises(ParameterError, match="n_chains"):
        runs.dpps_pnbm_chains(r, te, chain, FIXED, seed=1, n_chains=1)  # one chain cannot show it mixed
    with pytest.raises(ParameterError, match="chain_spread"):
        runs.dpps_pnbm_chains(r, te, chain, FIXED, seed=1, spread=0.0)


def test_dpps_mf_chains_release_the_grids_sample_and_trace_both_statistics():
    from dpmf_lib.mf import init_model
    from dpmf_lib.privacy import posterior_sampling as ps

    r, te = toy(seed=2, nu=60, ni=30, density=0.6), toy(seed=3, nu=60, ni=30, density=0.2)
    kw = dict(epsilon=50.0, seed=11, eta=1e-3, lam=0.1, rho=0.5, d=3, xi=0.3, tau=20, rounds=16)
    got = runs.dpps_mf_chains(r, te, **kw)
    assert got["rmse"] == runs.dpps_mf_rmse(r, te, **kw)  # the test set only adds the trace
    assert got["n_chains"] == 2 and got["n_draws"] == 8
    assert all(math.isfinite(got[k]) for k in ("rhat_v_norm2", "rhat_sample_rmse", "ess", "rmse_start"))
    assert got["moved"] == abs(got["rmse"] - got["rmse_start"])
    # the start the guard compares with is the released chain's own (init_model's default scale)
    pre = ps.preprocess(r, tau=20, kappa=1.0, rho=1.0, seed=11)
    m0 = ps.chain_start(pre, 3, 11)
    assert np.array_equal(m0.V, ps.chain_start(pre, 3, 11, init_scale=runs._MF_START_SD).V)
    assert np.array_equal(m0.V, init_model(60, 30, 3, seed=[ps.chain_seed(11, 0), 0xD9]).V)
