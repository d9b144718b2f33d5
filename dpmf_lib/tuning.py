"""Choosing hyper-parameters on validation ratings: the one rule the workbook's selections share.

- :func:`validation_split` — carve a validation part out of a *training* set (a fraction of each user's ratings,
  at least one kept for fitting); the test set is never an argument, so a choice made on it cannot read the test.
- :func:`choose_on_grid` — evaluate a score (a validation RMSE) at every point of a grid and take the lowest; a point
  whose score is not finite (a diverged fit) is kept in the table and never chosen.
- :func:`grid_interior` — the ``selection_off_grid_edge`` guard of the *tuned* kind (:data:`dpmf_lib.verdicts.KINDS`):
  a value chosen on a grid's edge says the optimum may lie outside what was searched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .errors import ParameterError
from .sweep import grid_points


def validation_split(train, fraction: float, seed: int):
    """(fit part, validation part) of ``train``: ``fraction`` of each user's ratings (at least one kept for fitting),
    drawn with a fixed seed; the test fold is not touched."""
    if not 0.0 < float(fraction) < 1.0:
        raise ParameterError(f"validation_fraction must lie in (0, 1), got {fraction!r}")
    rng = np.random.default_rng([int(seed), 0x5A11D])
    order = np.lexsort((rng.random(train.n_ratings), train.users))
    starts = np.searchsorted(train.users[order], np.arange(train.n_users))
    counts = np.bincount(train.users, minlength=train.n_users)
    rank = np.arange(train.n_ratings) - starts[train.users[order]]
    n_val = np.floor(counts * float(fraction)).astype(np.int64)
    is_val = np.zeros(train.n_ratings, bool)
    is_val[order] = rank < np.minimum(n_val, counts - 1)[train.users[order]]
    return (train.subset(~is_val, note="fit part (validation carved out)"),
            train.subset(is_val, note="validation part"))


def grid_interior(value: float, grid, domain_min: float | None = None) -> float:
    """1.0 when ``value`` lies strictly inside its grid's range, 0.0 on an edge (a one-point grid is all edge): a
    selection on the edge says the optimum may lie outside what was searched. ``domain_min``: the smallest value the
    parameter can take (K: 1) — a selection at a lower edge equal to it counts as interior, since nothing below it
    could have been searched (a one-point grid still counts as edge)."""
    grid = [float(g) for g in grid]
    v = float(value)
    if domain_min is not None and len(set(grid)) > 1 and v == min(grid) <= float(domain_min):
        return 1.0
    return 1.0 if min(grid) < v < max(grid) else 0.0


@dataclass(frozen=True)
class GridChoice:
    """What :func:`choose_on_grid` chose: ``chosen`` (name → value), ``table`` (one row per grid point: its values,
    ``score``, ``chosen``) and ``off_grid_edge`` (1.0 when every name searched over more than one value was chosen
    strictly inside its grid, else 0.0; names with one value were not chosen and are not counted)."""

    chosen: dict
    table: pd.DataFrame
    off_grid_edge: float


def choose_on_grid(grid: dict, score) -> GridChoice:
    """The point of ``grid`` (name → list of values, every combination in :func:`dpmf_lib.sweep.grid_points` order)
    with the lowest ``score(point)``; ties go to the first point. A non-finite score (a diverged fit) is never chosen;
    when no point has a finite score a :class:`ParameterError` names the grid."""
    points = grid_points(grid)
    scores = np.array([float(score(dict(p))) for p in points], dtype=float)
    finite = np.isfinite(scores)
    if not finite.any():
        raise ParameterError(f"no point of the grid {grid!r} has a finite validation score (every fit diverged): "
                             "lower its step sizes")
    best = int(np.flatnonzero(finite)[np.argmin(scores[finite])])
    chosen = dict(points[best])
    table = pd.DataFrame(points).assign(score=scores, chosen=np.arange(len(points)) == best)
    searched = [k for k, vals in grid.items() if len({float(v) for v in vals}) > 1]
    off_edge = float(all(grid_interior(chosen[k], grid[k]) == 1.0 for k in searched))
    return GridChoice(chosen, table, off_edge)
