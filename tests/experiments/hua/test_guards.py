"""Hua Fig 8's claims record ``gain_over_bias_only`` over the item-means predictor on the ratings Hua evaluates on:
hand-made runs and ratings."""

import numpy as np
import pytest

from dpmf_lib import baselines
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.experiments.hua import hua_common as hc
from dpmf_lib.experiments.hua import hua_fig8


def test_gain_is_the_worst_model_compared_over_item_means(monkeypatch):
    r = Ratings(np.array([0, 1, 0, 1], np.int32), np.array([0, 0, 1, 1], np.int32),
                np.array([1, 3, 5, 5], np.float32), 2, 2, (1.0, 5.0), DataSource("ml-100k", real=True))
    base = baselines.item_means_rmse(r, r)
    assert base == pytest.approx(1.0 / np.sqrt(2))  # item 0 mean 2 (errors 1, 1), item 1 mean 5 (errors 0, 0)
    rmse = {"mf": 0.3, "s1": 0.6, "s2": 0.5}
    monkeypatch.setattr(hc, "load_data", lambda key: (r, None))
    monkeypatch.setattr(hc, "scenario_run",
                        lambda params, s, ds, eps, cps, **kw: {"results": {cps[0]: {"rmse": rmse[s]}}})
    params = {"dataset": "ml-100k", "baseline_iterations": 100}
    assert hua_fig8.gain_over_item_means(params, ["s2"], 0.15, 100) == pytest.approx(base - 0.5)
    assert hua_fig8.gain_over_item_means(params, ["s1", "s2"], 0.15, 100) == pytest.approx(base - 0.6)
    rmse["mf"] = 9.0  # the non-private baseline compared is a trained model too
    assert hua_fig8.gain_over_item_means(params, ["s2"], 0.15, 100) == pytest.approx(base - 9.0)


def test_iterations_trend_reads_panel_a_first_and_last_with_the_guard_of_both(monkeypatch):
    from dpmf_lib.experiments.hua import hua_fig1

    r = Ratings(np.array([0, 1, 0, 1], np.int32), np.array([0, 0, 1, 1], np.int32),
                np.array([1, 3, 5, 5], np.float32), 2, 2, (1.0, 5.0), DataSource("ml-100k", real=True))
    monkeypatch.setattr(hc, "load_data", lambda key: (r, None))
    params = {"dataset": "ml-100k", "eps_fixed": 0.1, "iterations": [40, 10, 100], "seed": 0}
    plan = hc.RunPlan(params)
    key = plan.add("s1", "ml-100k", 0.1, [40, 10, 100])
    plan.results[key] = {"results": {10: {"mean": 2.0, "rmse": 0.2}, 40: {"mean": 9.0, "rmse": 9.0},
                                     100: {"mean": 1.5, "rmse": 0.4}}}
    value, gain, _ = hua_fig1.iterations_trend(params, "s1", plan)
    assert value == pytest.approx(-0.25)  # (1.5 - 2) / 2: 10 -> 100 iterations, 40 not read
    assert gain == pytest.approx(baselines.item_means_rmse(r, r) - 0.4)
