"""Liu Fig 7's claims at ε = τ and ε = 4B record the guards of their kinds (chain, privacy-cost): hand-made points.
The privacy-cost guard reads the ε = 4B reference only, so a release worse than item means is judged, not withheld."""

import math

import pytest

from dpmf_lib.claims import DIFFERS, INCONCLUSIVE, load_claims
from dpmf_lib.data.ratings import DataSource
from dpmf_lib.experiments.liu import liu_fig7
from dpmf_lib.verdicts import judge_measurement

TAU, B = 100, 2500.0
CLAIMS = {c.id: c for c in load_claims()}


def _row(rmse, rhat=1.01, ess=400.0):
    return {"test_rmse": rmse, "rhat": rhat, "ess": ess, "epsilon_rating_stated": 1.0, "constraint_satisfied": True}


def _pts(a, b):
    return {("gibbs", float(TAU)): a, ("gibbs", 4.0 * B): b}


def _measure(pts, item_means):
    return liu_fig7.rating_dp_measurements(pts, TAU, B, 1.0, DataSource("ml-100k", real=True),
                                           {"private": {"max_resamples": 1}}, item_means)


def _judge(m, seeds=5):
    d = m.as_dict()
    d.update(values=[m.value + 0.002 * k for k in range(seeds)], profile="paper",
             guards={k: [v] * seeds for k, v in m.guards.items()})
    return judge_measurement(CLAIMS[m.claim], d)


def test_both_claims_guard_the_reference_not_the_release():
    loss, modest = _measure(_pts(_row(1.10), _row(1.00)), item_means=1.05)
    assert loss.claim == "liu-6.7-rating-dp-small-accuracy-loss-ml-100k"
    assert modest.claim == "liu-6.7-modest-accuracy-decrease-ml-100k"
    assert loss.value == pytest.approx(0.10) and modest.value == pytest.approx(0.10)  # (1.10 − 1.00) / 1.00
    # the ε = τ release is worse than item means; the guard reads the reference: 1.05 − 1.00
    assert loss.guards["reference_gain_over_bias_only"] == pytest.approx(0.05)
    assert modest.guards == loss.guards
    assert set(loss.guards) == {"chain_split_rhat", "chain_ess", "reference_gain_over_bias_only"}
    # and so the loss is judged: 0.10 is beyond 'almost no loss' (≤ 0.02) and 10 % beyond 'modest' (≤ 5 %)
    assert _judge(loss).verdict == DIFFERS and _judge(modest).verdict == DIFFERS


def test_an_untrained_reference_withholds_the_verdict():
    loss, _ = _measure(_pts(_row(1.10), _row(1.049)), item_means=1.05)  # the reference gains 0.001 < 0.005
    j = _judge(loss)
    assert j.verdict == INCONCLUSIVE and "reference_gain_over_bias_only" in j.reason


def test_gain_unmeasured_is_nan_and_no_points_no_claims():
    loss, _ = _measure(_pts(_row(0.95), _row(0.90)), item_means=float("nan"))
    assert math.isnan(loss.guards["reference_gain_over_bias_only"])
    assert _judge(loss).verdict == INCONCLUSIVE
    loss, _ = _measure(_pts(_row(0.95), _row(0.90)), item_means=1.0)
    assert loss.guards["reference_gain_over_bias_only"] == pytest.approx(0.10)
    assert _measure({("gibbs", float(TAU)): _row(1.0)}, item_means=1.0) == []
