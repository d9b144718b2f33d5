"""Data access for the PNBM experiments: ML-100K (u1..u5 folds), ML-1M (5 random folds), preprocessing.

Through :mod:`dpmf_lib.data`: ``load_ratings``, ``splits.ml100k_folds`` (MovieLens' ``mku.sh`` folds) and
``splits.trim_per_user``.

Preprocessing (paper, section 3 and 4.3):
- :func:`users_with_more_than` keeps the ratings of users with more than ``n`` ratings (DPSGD-PNBM trains only on users
  with > 20 ratings *in the training fold*; every test rating is still predicted, from the user's training ratings).
- :func:`trim_to_tau` randomly keeps at most ``tau`` ratings per user (DPPS-PNBM, τ = 200).
"""

from __future__ import annotations

import numpy as np

from .. import validate
from ..data import load_ratings
from ..data.ratings import Ratings
from ..data.splits import ml100k_folds, trim_per_user
from ..errors import ParameterError


def load(dataset: str, seed: int = 0, *, real_only: bool = True) -> Ratings:
    """The dataset via :func:`dpmf_lib.data.load_ratings`.

    With ``real_only`` a synthetic stand-in is refused (:class:`~dpmf_lib.errors.DatasetUnavailable`): the PNBM
    figures are about ML-100K / ML-1M and are run on real data only (ML-1M is skipped until fetched).
    """
    return load_ratings(dataset, allow_standin=not real_only, seed=seed)


def folds(r: Ratings, n_folds: int = 5, seed: int = 0) -> list[tuple[Ratings, Ratings]]:
    """5-fold CV: ML-100K's u1..u5 (mku.sh); other datasets a seeded random 5-way partition."""
    if r.source.dataset == "ml-100k" and r.n_ratings == 100000:
        out = list(ml100k_folds(r))
        return [(a, b) for a, b in out][:n_folds]
    rng = validate.generator(seed, allow_none=False)
    part = rng.permutation(r.n_ratings) % 5
    return [(r.subset(part != k, note=f"fold {k + 1} train"), r.subset(part == k, note=f"fold {k + 1} test"))
            for k in range(n_folds)]


def users_with_more_than(r: Ratings, n: int) -> Ratings:
    """Ratings of users with more than ``n`` ratings (paper section 3: 'users who have more than 20 ratings')."""
    if n < 0:
        raise ParameterError(f"min_user_ratings must be >= 0, got {n}")
    keep = r.user_counts()[r.users] > n
    return r.subset(np.flatnonzero(keep))


def trim_to_tau(r: Ratings, tau: int, seed=0) -> Ratings:
    """Keep at most ``tau`` ratings per user, chosen uniformly at random (paper section 4.3, τ = 200), by
    :func:`dpmf_lib.data.splits.trim_per_user`."""
    validate.integer(tau, "tau")
    rng = validate.generator(seed, allow_none=False)
    return trim_per_user(r, int(tau), rng)
