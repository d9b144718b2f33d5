"""Liu Fig 7's claims at ε = τ and ε = 4B record the guards of their kinds (chain, trained-model): hand-made points."""

import math

import pytest

from dpmf_lib.data.ratings import DataSource
from dpmf_lib.experiments.liu import liu_fig7

TAU, B = 100, 2500.0


def _row(rmse, rhat=1.01, ess=400.0):
    return {"test_rmse": rmse, "rhat": rhat, "ess": ess, "epsilon_rating_stated": 1.0, "constraint_satisfied": True}


def _pts(a, b):
    return {("gibbs", float(TAU)): a, ("gibbs", 4.0 * B): b}


def _measure(pts, item_means):
    return liu_fig7.rating_dp_measurements(pts, TAU, B, 1.0, DataSource("ml-100k", real=True),
                                           {"private": {"max_resamples": 1}}, item_means)


def test_both_claims_carry_the_gain_over_item_means_of_the_worse_release():
    loss, modest = _measure(_pts(_row(1.10), _row(1.00)), item_means=1.05)
    assert loss.claim == "liu-6.7-rating-dp-small-accuracy-loss-ml-100k"
    assert modest.claim == "liu-6.7-modest-accuracy-decrease-ml-100k"
    assert loss.value == pytest.approx(0.10) and modest.value == pytest.approx(0.10)  # (1.10 − 1.00) / 1.00
    # the ε = τ release is worse than item means: the guard is 1.05 − 1.10 < 0 and fails
    assert loss.guards["gain_over_bias_only"] == pytest.approx(-0.05)
    assert modest.guards == loss.guards
    assert set(loss.guards) == {"chain_split_rhat", "chain_ess", "gain_over_bias_only"}


def test_gain_unmeasured_is_nan_and_no_points_no_claims():
    loss, _ = _measure(_pts(_row(0.95), _row(0.90)), item_means=float("nan"))
    assert math.isnan(loss.guards["gain_over_bias_only"])
    loss, _ = _measure(_pts(_row(0.95), _row(0.90)), item_means=1.0)
    assert loss.guards["gain_over_bias_only"] == pytest.approx(0.05)
    assert _measure({("gibbs", float(TAU)): _row(1.0)}, item_means=1.0) == []
