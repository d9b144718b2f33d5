"""Helpers of the Liu Figure 7 / personalized-privacy experiments (the notebooks themselves run in test_notebooks)."""

import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments import liu_fig7
from dpmf_lib.params import load_params


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
