"""The trivial predictor a trained model has to beat — each item's training mean — and a model's gain over it: the
arithmetic of the ``gain_over_bias_only`` guard (:data:`dpmf_lib.verdicts.KINDS`, kind ``trained-model``).

A module of its own (not :mod:`dpmf_lib.metrics`) so that only the experiments that record the guard import it."""

from __future__ import annotations

import numpy as np

from .errors import ParameterError
from .metrics import clipped_rmse


def item_means_rmse(train, test) -> float:
    """Test RMSE of the item-means predictor (each item's training mean, the global training mean for an item without
    training ratings), clipped to the training scale. ``train``, ``test``: :class:`~dpmf_lib.data.ratings.Ratings`
    of one split (the same set twice for a paper that evaluates on the ratings it learns from)."""
    counts = np.bincount(train.items, minlength=train.n_items)
    sums = np.bincount(train.items, weights=train.values, minlength=train.n_items)
    mu = float(train.values.mean())
    means = np.where(counts > 0, sums / np.maximum(counts, 1), mu)
    return clipped_rmse(means[test.items], test.values, *train.rating_scale)


def smallest_gain(baseline_rmse: float, rmses) -> float:
    """The smallest test-RMSE gain ``baseline_rmse − rmse`` over ``rmses`` (the trained models a claim compares). NaN
    when any RMSE (or the baseline) is NaN — an unmeasured side fails the guard, never passes it; an empty ``rmses``
    raises."""
    r = np.asarray(list(rmses), dtype=np.float64)
    if r.size == 0:
        raise ParameterError("smallest_gain needs at least one trained model's RMSE")
    return float(np.min(float(baseline_rmse) - r))
