"""Liu Figure 6 (review of dd6066c / 744ec12): the overfitting measure is signed, so curves still improving at their
last epoch differ from the claim instead of reading 0 (inconclusive)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dpmf_lib.claims import DIFFERS, INCONCLUSIVE, Measurement, load_claims
from dpmf_lib.experiments.liu import liu_fig6
from dpmf_lib.params import load_params
from dpmf_lib.verdicts import judge_measurement

CLAIMS = {c.id: c for c in load_claims()}


def test_overfit_gap_is_signed():
    still_improving = [0.99, 0.97, 0.96, 0.955, 0.952]
    assert liu_fig6.overfit_gap(still_improving) == pytest.approx(0.952 - 0.955)  # < 0, not 0
    overfits = [0.99, 0.95, 0.94, 0.95, 0.96]
    assert liu_fig6.overfit_gap(overfits) == pytest.approx(0.02)
    assert math.isnan(liu_fig6.overfit_gap([0.9]))


@pytest.mark.parametrize("claim", ["liu-6.4-sgd-overfits", "liu-6.4-sgd-overfits-ml-100k"])
def test_a_curve_still_improving_in_every_seed_differs(claim):
    # five seeds of curves still improving at their last epoch: the old measure gave 0, 0, 0, 0, 0 (inconclusive)
    values = [liu_fig6.overfit_gap([0.99, 0.96, 0.95, 0.95 - 0.001 * (k + 1)]) for k in range(5)]
    m = Measurement(claim, values[0], "ml-100k" if claim.endswith("ml-100k") else "netflix", True).as_dict()
    m.update(values=values, profile="paper")
    # the trained-model guard of its kind (params/claims.yaml judging:) is not measured: withheld, leaning to differs
    j = judge_measurement(CLAIMS[claim], m)
    assert j.verdict == INCONCLUSIVE and j.lean == DIFFERS and "gain_over_bias_only" in j.reason
    m["guards"] = {"gain_over_bias_only": [0.05] * 5}
    assert judge_measurement(CLAIMS[claim], m).verdict == DIFFERS


def test_fig6_run_measures_the_signed_gap(monkeypatch):
    curve = pd.DataFrame({"solver": "csgd", "d": 16, "threads": 1, "epoch": [1, 2, 3, 4], "seconds": 0.1,
                          "wall": [0.1, 0.2, 0.3, 0.4], "test_rmse": [0.99, 0.97, 0.96, 0.958]})
    monkeypatch.setattr(liu_fig6, "run_csgd", lambda *a, **k: curve.copy())
    p = load_params("liu_fig6", "smoke", {"max_ratings": 5000, "epochs": 4, "threads": 1})
    (m,) = liu_fig6.run(p, sgld=False).attrs["measurements"]
    assert m["value"] == pytest.approx(0.958 - 0.96)
