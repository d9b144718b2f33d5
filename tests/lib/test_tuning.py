"""The shared selection rule (dpmf_lib.tuning) on hand-made cases: the chosen point is the argmin of the score, a
diverged point is never chosen, the edge guard counts only searched names, and the validation part is carved out of
the training set alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.tuning import choose_on_grid, grid_interior, validation_split


def test_the_chosen_point_is_the_argmin_and_the_edge_guard_counts_searched_names_only():
    grid = {"eta": [0.1, 0.2, 0.4], "lam": [1.0, 2.0, 3.0], "gamma": [1.0]}
    c = choose_on_grid(grid, lambda p: (p["eta"] - 0.2) ** 2 + (p["lam"] - 2.0) ** 2)
    assert c.chosen == {"eta": 0.2, "lam": 2.0, "gamma": 1.0} and c.off_grid_edge == 1.0  # γ: one value, not counted
    assert c.table.chosen.sum() == 1 and c.table.loc[c.table.chosen, "score"].item() == 0.0
    assert len(c.table) == 9 and c.table.score.min() == 0.0
    edge = choose_on_grid(grid, lambda p: p["eta"] + (p["lam"] - 2.0) ** 2)
    assert edge.chosen["eta"] == 0.1 and edge.off_grid_edge == 0.0


def test_a_diverged_point_is_never_chosen_and_ties_go_to_the_first():
    scores = {0.1: 0.95, 0.2: 0.90, 0.4: math.inf}
    c = choose_on_grid({"eta": [0.1, 0.2, 0.4]}, lambda p: scores[p["eta"]])
    assert c.chosen == {"eta": 0.2} and c.off_grid_edge == 1.0  # inside: the diverged top was searched
    assert choose_on_grid({"eta": [1.0, 2.0, 3.0]}, lambda p: 0.5).chosen == {"eta": 1.0}
    with pytest.raises(ParameterError, match="diverged"):
        choose_on_grid({"eta": [1.0, 2.0]}, lambda p: math.nan)


def test_grid_interior():
    assert grid_interior(2, [1, 2, 3]) == 1.0 and grid_interior(3, [1, 2, 3]) == 0.0
    assert grid_interior(1, [1]) == 0.0 and grid_interior(1, [1, 2, 3], domain_min=1) == 1.0


def _ratings(counts):
    users = np.repeat(np.arange(len(counts)), counts).astype(np.int32)
    n = len(users)
    # each rating's value is its row number: which rows went where can be read back
    return Ratings(users, (np.arange(n) % 7).astype(np.int32), np.arange(n, dtype=np.float32), len(counts), 7,
                   (0.0, float(n)), DataSource("toy", False))


def test_validation_split_carves_each_users_share_out_of_training_only():
    train = _ratings([1, 2, 10, 25])
    fit, val = validation_split(train, 0.2, seed=3)
    assert fit.n_ratings + val.n_ratings == train.n_ratings
    assert np.bincount(val.users, minlength=4).tolist() == [0, 0, 2, 5]  # floor(0.2·n), one kept for fitting
    assert (np.bincount(fit.users, minlength=4) >= 1).all()
    assert sorted(fit.values.tolist() + val.values.tolist()) == list(range(train.n_ratings))  # a partition of train
    again = validation_split(train, 0.2, seed=3)
    assert np.array_equal(again[1].users, val.users) and np.array_equal(again[1].items, val.items)
    with pytest.raises(ParameterError, match="validation_fraction"):
        validation_split(train, 1.0, seed=0)
