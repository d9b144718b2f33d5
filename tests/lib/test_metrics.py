"""dpmf_lib.metrics: exact hand-made values, the fixed float64 arithmetic, and the callers that use it."""

import math

import numpy as np
import pytest

from dpmf_lib import metrics
from dpmf_lib.errors import ParameterError
from tests.nbm_toys import toy


def test_rmse_hand_made():
    assert metrics.rmse([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]) == 0.0
    assert metrics.rmse([0.0, 0.0], [3.0, 4.0]) == math.sqrt(12.5)
    assert metrics.rmse(np.array([2], np.int32), np.array([5.0], np.float32)) == 3.0
    assert metrics.rms([3.0, -4.0]) == math.sqrt(12.5)


def test_clipped_rmse_clips_the_predictions_only():
    # predictions 0 and 9 on the scale [1, 5] become 1 and 5; the truth is not clipped
    assert metrics.clipped_rmse([0.0, 9.0], [1.0, 6.0], 1.0, 5.0) == math.sqrt(0.5)


def test_rmse_is_the_float64_arithmetic_to_the_last_bit():
    rng = np.random.default_rng(3)
    pred = (rng.random(10_001) * 5).astype(np.float32)
    truth = rng.integers(1, 6, 10_001).astype(np.float32)
    want = float(np.sqrt(np.mean((pred.astype(np.float64) - truth) ** 2)))
    assert metrics.rmse(pred, truth) == want
    assert metrics.rmse(list(pred), truth) == want  # any array-like
    f32 = float(np.sqrt(np.mean((pred - truth) ** 2, dtype=np.float32)))
    assert f32 != want  # float32 arithmetic is a different number: the cast is not optional


def test_rms_of_a_residual_is_the_rmse_against_zero():
    v = np.random.default_rng(1).standard_normal(999).astype(np.float32)
    assert metrics.rms(v) == float(np.sqrt(np.mean(v.astype(np.float64) ** 2)))
    assert metrics.rms(v) == metrics.rmse(np.zeros_like(v), v)


def test_the_callers_give_the_metric_s_bits():
    from dpmf_lib import nbm
    from dpmf_lib.mf import init_model

    r = toy(seed=0, nu=20, ni=15, density=0.5)
    m = init_model(r.n_users, r.n_items, 4, seed=1, b0=3.0)
    p = m.predict(r.users, r.items)
    assert m.rmse(r) == metrics.rmse(p, r.values)
    assert m.rmse(r, clip=True) == metrics.rmse(np.clip(p, 1.0, 5.0), r.values)
    assert nbm.rmse(p, r) == metrics.rmse(p, r.values)


def test_recall_at_hand_made():
    ranked = np.array([[3, 1, 2], [0, 4, 1], [7, 8, 9], [5, 6, 2]])
    truth = np.array([3, 4, 1, 2])  # ranks 1, 2, missing, 3
    np.testing.assert_allclose(metrics.recall_at(ranked, truth), [0.25, 0.5, 0.75])
    np.testing.assert_allclose(metrics.recall_at(ranked, truth, [2]), [0.5])
    with pytest.raises(ParameterError, match="every R"):
        metrics.recall_at(ranked, truth, [4])
    with pytest.raises(ParameterError, match="n_queries"):
        metrics.recall_at(ranked, truth[:2])
