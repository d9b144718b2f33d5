"""liu_fig7: the non-private SGLD run that fixes Λ has a seed namespace of its own (issue #14 review): it must not
replay the noise of any private chain (chain 0's burn-in was seeded with the run's seed, as the Λ run was); and the
helpers of the Liu Figure 7 / personalized-privacy experiments (ε grid, τ per dataset; the notebooks themselves run in
tests/workbook/test_notebooks.py)."""

import pytest

import dpmf_lib.mf as mf
from dpmf_lib.data.splits import random_split
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.liu import liu_fig7
from dpmf_lib.params import load_params
from dpmf_lib.privacy import posterior_sampling as ps
from tests.mf_toys import dense_toy

PARAMS = {"seed": 3, "d": 2, "lambda_r": 2.0, "n_threads": 1,
          "sgld": {"rounds": 4, "eta_n": 0.02, "gamma": 0.6, "burn_in": 2},
          "private": {"rounds": 4, "burn_in": 2, "n_chains": 2, "thin": 1, "redraw": "fresh", "eta_n_max": 0.2,
                      "max_resamples": 1, "resample_rounds": 1}}


def test_the_prior_run_does_not_share_a_seed_with_any_private_chain(monkeypatch):
    real, calls = mf.sample_sgld, []

    def spy(*a, **kw):
        calls.append({"seed": int(kw["seed"]), "private": kw.get("fixed_lambda") is not None})
        return real(*a, **kw)

    monkeypatch.setattr(mf, "sample_sgld", spy)
    train, test = random_split(dense_toy(n_users=20, n_items=10), (0.8, 0.2), seed=0)
    priors = ps.fixed_priors(liu_fig7.nonprivate_sgld(train, test, PARAMS))
    pre = ps.preprocess(train, tau=5, kappa=1.0, rho=1.0, seed=PARAMS["seed"])
    liu_fig7.private_point(pre, 0.01, priors, train, test, PARAMS)  # broad posterior: the redraw runs a third chain
    prior = [c["seed"] for c in calls if not c["private"]]
    private = {c["seed"] for c in calls if c["private"]}
    assert len(prior) == 1 and len(private) >= 4  # ≥ 2 chains × (burn-in, sampling phase)
    assert ps.chain_seed(PARAMS["seed"], 0) in private  # chain 0's burn-in is seeded with the run's seed ...
    assert prior[0] not in private  # ... and the Λ run is not
    assert prior[0] == ps.prior_run_seed(PARAMS["seed"]) != PARAMS["seed"]


def test_epsilon_grid_ends_at_4B_and_accepts_the_4B_token():
    p = {"epsilons": [10, 0.1, 20000, "4B"]}
    assert liu_fig7.epsilon_grid(p, 2500.0) == [0.1, 10.0, 10000.0]
    assert liu_fig7.resolve_epsilons(["4B", 3], 5.0) == [20.0, 3.0]
    with pytest.raises(ParameterError, match="epsilons"):
        liu_fig7.resolve_epsilons(["4C"], 1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        liu_fig7.epsilon_grid({"epsilons": [0.0]}, 1.0)


def test_tau_per_dataset_and_paper_values_in_params():
    p = load_params("liu_fig7", "paper")
    assert liu_fig7.tau_for("netflix", p) == 100 and liu_fig7.tau_for("yahoo-music", p) == 200
    assert p["kappa"] == 1.0 and p["rho"] == [1.0, 10.0] and p["d"] == 16
    with pytest.raises(ParameterError, match="tau"):
        liu_fig7.tau_for("eachmovie", p)
    with pytest.raises(ParameterError, match="tau"):
        liu_fig7.tau_for("netflix", {"tau": {"netflix": 0}})
    for prof in ("smoke", "ci"):
        load_params("extra_liu_personalized_privacy", prof)
