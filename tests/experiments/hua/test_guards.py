"""Hua's accuracy claims record ``reference_gain_over_bias_only`` (kind ``privacy-cost``): the non-private baseline
MF's gain over the item-means predictor on the ratings Hua evaluates on, whatever the private runs reach; hand-made
runs and ratings."""

import numpy as np
import pytest

from dpmf_lib import baselines
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.experiments.hua import hua_common as hc


def test_reference_gain_reads_the_non_private_baseline_only(monkeypatch):
    r = Ratings(np.array([0, 1, 0, 1], np.int32), np.array([0, 0, 1, 1], np.int32),
                np.array([1, 3, 5, 5], np.float32), 2, 2, (1.0, 5.0), DataSource("ml-100k", real=True))
    base = baselines.item_means_rmse(r, r)
    assert base == pytest.approx(1.0 / np.sqrt(2))  # item 0 mean 2 (errors 1, 1), item 1 mean 5 (errors 0, 0)
    rmse = {"mf": 0.3, "s1": 600.0, "s2": 50.0}
    asked = []
    monkeypatch.setattr(hc, "load_data", lambda key: (r, None))

    def run(params, s, ds, eps, cps, **kw):
        asked.append((s, eps, tuple(cps)))
        return {"results": {cps[0]: {"rmse": rmse[s]}}}

    monkeypatch.setattr(hc, "scenario_run", run)
    params = {"dataset": "ml-100k", "baseline_iterations": 100}
    # private runs thousands of stars off do not enter: their error is the effect the claims measure
    assert hc.reference_gain(params) == pytest.approx(base - 0.3)
    assert asked == [("mf", None, (100,))]
    rmse["mf"] = 9.0  # an untrained baseline fails the guard
    assert hc.reference_gain(params) == pytest.approx(base - 9.0)


def test_iterations_trend_reads_panel_a_first_and_last_with_the_reference_guard(monkeypatch):
    from dpmf_lib.experiments.hua import hua_fig1

    r = Ratings(np.array([0, 1, 0, 1], np.int32), np.array([0, 0, 1, 1], np.int32),
                np.array([1, 3, 5, 5], np.float32), 2, 2, (1.0, 5.0), DataSource("ml-100k", real=True))
    monkeypatch.setattr(hc, "load_data", lambda key: (r, None))
    monkeypatch.setattr(hc, "scenario_run", lambda params, s, ds, eps, cps, **kw: {"results": {cps[0]: {"rmse": 0.4}}})
    params = {"dataset": "ml-100k", "eps_fixed": 0.1, "iterations": [40, 10, 100], "seed": 0,
              "baseline_iterations": 100}
    plan = hc.RunPlan(params)
    key = plan.add("s1", "ml-100k", 0.1, [40, 10, 100])
    plan.results[key] = {"results": {10: {"mean": 2.0, "rmse": 7.0}, 40: {"mean": 9.0, "rmse": 9.0},
                                     100: {"mean": 1.5, "rmse": 8.0}}}
    value, gain, _ = hua_fig1.iterations_trend(params, "s1", plan)
    assert value == pytest.approx(-0.25)  # (1.5 - 2) / 2: 10 -> 100 iterations, 40 not read
    assert gain == pytest.approx(baselines.item_means_rmse(r, r) - 0.4)  # the baseline's, not the private runs'
