"""dpmf_lib.nbm models: determinism, SGLD noise, grid selection, and noise-free PNBM vs PCC / COS on ML-100K fold 1."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpmf_lib import nbm
from dpmf_lib.errors import DatasetUnavailable
from dpmf_lib.nbm import runs
from dpmf_lib.nbm.model import init_similarity
from dpmf_lib.validate import generator as as_generator

from tests.lib.nbm.test_accounting import flat_ratings
from tests.lib.nbm.test_kernels import toy


def test_same_seed_same_bytes():
    r = toy(seed=1, nu=40, ni=15, density=0.8)
    a = nbm.train_pnbm(r, epsilon=1.0, K=3, gamma=0.5, min_user_ratings=5, seed=4).S
    b = nbm.train_pnbm(r, epsilon=1.0, K=3, gamma=0.5, min_user_ratings=5, seed=4).S
    c = nbm.train_pnbm(r, epsilon=1.0, K=3, gamma=0.5, min_user_ratings=5, seed=5).S
    assert a.tobytes() == b.tobytes() and a.tobytes() != c.tobytes()
    s1 = nbm.sample_pnbm(r, epsilon=20.0, T=5, L=50, seed=2).S
    s2 = nbm.sample_pnbm(r, epsilon=20.0, T=5, L=50, seed=2).S
    assert s1.tobytes() == s2.tobytes()
    m1 = nbm.train_dpsgd_mf(r, epsilon=1.0, K=2, seed=3)
    m2 = nbm.train_dpsgd_mf(r, epsilon=1.0, K=2, seed=3)
    assert m1.P.tobytes() == m2.P.tobytes() and m1.noise_scale == 2 * 4.0 / 1.0


def test_sgld_noise_has_the_stated_variance():
    """Zero gradient and λ = 0: S_T - S_0 = Σ_t sqrt(ϱ η_t) z_t, η_t = η_1 t^(-ξ)."""
    r = flat_ratings(n_items=40)
    T, eta1, rho, xi = 4, 1e-2, 0.5, 0.3
    res = nbm.sample_pnbm(r, epsilon=None, T=T, L=20, eta1=eta1, rho=rho, xi=xi, lam=0.0, seed=7)
    sds = [math.sqrt(rho * eta1 * t ** (-xi)) for t in range(1, T + 1)]
    np.testing.assert_allclose(res.noise_scales, sds)
    rng = as_generator(7)
    nbm.trim_to_tau(r, 200, rng)  # same draw order as sample_pnbm: trimming, then the start
    S0 = init_similarity(r.n_items, 1.0, 0.2, rng)
    off = ~np.eye(r.n_items, dtype=bool)
    z = (res.S - S0)[off] / math.sqrt(sum(s * s for s in sds))
    assert stats.kstest(z, "norm").pvalue > 1e-3
    assert stats.kstest(z, "norm", args=(0, 1.3)).pvalue < 1e-3


def test_select_best_picks_lowest_mean_over_folds():
    df = pd.DataFrame({"dataset": "d", "method": "m", "epsilon": 1.0, "config": ["a", "a", "b", "b"],
                       "fold": [1, 2, 1, 2], "rmse": [0.9, 1.1, 0.95, 0.96], "epsilon_amplified": 1.2,
                       "seconds": 1.0})
    agg = runs.select_best(df)
    best = agg[agg.selected]
    assert best.config.tolist() == ["b"] and best.rmse.iloc[0] == pytest.approx(0.955)
    assert runs.best_rmse(agg, "d", "m", 1.0) == pytest.approx(0.955)


def test_a_grid_whose_every_configuration_diverged_names_the_step_size():
    """A selected RMSE of inf reached the figure; one diverged configuration beside finite ones is passed by."""
    from dpmf_lib.errors import ParameterError

    df = pd.DataFrame({"dataset": "d", "method": "sgld-pnbm", "epsilon": 1.0, "config": ["a", "a", "b", "b"],
                       "fold": [1, 2, 1, 2], "rmse": [np.inf, np.inf, np.nan, np.inf], "epsilon_amplified": 1.2,
                       "seconds": 1.0})
    with pytest.raises(ParameterError, match=r"every configuration of its grid diverged .* lower its step size 'eta1'"):
        runs.select_best(df)
    df.loc[2:3, "rmse"] = [0.9, 1.0]
    assert runs.select_best(df).query("selected").config.tolist() == ["b"]


@pytest.fixture(scope="module")
def ml100k_fold1():
    try:
        return runs.fold_data("ml-100k", 1)
    except DatasetUnavailable:
        pytest.skip("ML-100K not available")


@pytest.fixture(scope="module")
def noise_free(ml100k_fold1):
    tr, te = ml100k_fold1
    # one point of the paper's grid (η 0.4, λ 0.05, β 10, C 10, K 20), our a-priori γ = 0.2 and S0 ~ U(0, 0.2)
    res = nbm.train_pnbm(tr, epsilon=None, K=20, eta=0.4, lam=0.05, beta=10, C=10, gamma=0.2, seed=0, test=te)
    return res.info["rmse"], nbm.knn_rmse(tr, te, "pcc", 900), nbm.knn_rmse(tr, te, "cos", 900)


def test_noise_free_pnbm_beats_pcc_on_ml100k_fold1(noise_free):
    pnbm_rmse, pcc_rmse, _ = noise_free
    assert pnbm_rmse < pcc_rmse


@pytest.mark.xfail(strict=True, reason="measured 2026-11-21: noise-free PNBM 0.949 vs COS 0.946 on u1 under our "
                                       "reconstruction (K <= 20, data-independent start); the paper's claim is not "
                                       "reproduced here — see notebooks/pnbm_fig1.ipynb")
def test_noise_free_pnbm_beats_cos_on_ml100k_fold1(noise_free):
    pnbm_rmse, _, cos_rmse = noise_free
    assert pnbm_rmse < cos_rmse
