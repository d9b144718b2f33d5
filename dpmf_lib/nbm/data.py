"""Data access for the PNBM experiments: ML-100K (u1..u5 folds), ML-1M (5 random folds), preprocessing.

Uses :mod:`dpmf_lib.data` (``load_ratings``, ``splits.ml100k_folds``, ``random_split``, ``trim_per_user``) when those
exist; until then a local fallback parses ``u.data`` from ``$DPMF_DATA_MIRROR`` (or ``../shared/data``) into the same
:class:`~dpmf_lib.data.ratings.Ratings` container and cuts the folds exactly as MovieLens' ``mku.sh`` does (fold k tests
on rows ``20000(k-1) .. 20000k-1`` of ``u.data`` in file order, trains on the other 80,000 rows).

Preprocessing (paper, section 3 and 4.3):
- :func:`users_with_more_than` keeps the ratings of users with more than ``n`` ratings (DPSGD-PNBM trains only on users
  with > 20 ratings *in the training fold*; every test rating is still predicted, from the user's training ratings).
- :func:`trim_to_tau` randomly keeps at most ``tau`` ratings per user (DPPS-PNBM, τ = 200).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from .. import validate
from ..errors import DatasetUnavailable, ParameterError
from ..paths import REPO_ROOT
from ..data.ratings import DataSource, Ratings, from_raw_ids

ML100K_FOLD = 20000


def _mirror() -> Path:
    return Path(os.environ.get("DPMF_DATA_MIRROR") or (REPO_ROOT.parent / "shared" / "data"))


def _fallback_ml100k() -> Ratings:
    path = _mirror() / "ml-100k" / "u.data"
    if not path.exists():
        raise DatasetUnavailable(f"{path}: ML-100K u.data not found — set DPMF_DATA_MIRROR or run `python -m data_fetch "
                                 "ml-100k`")
    raw = path.read_bytes()
    a = np.loadtxt(path, dtype=np.int64)
    src = DataSource("ml-100k", True, hashlib.sha256(raw).hexdigest(), "u.data (nbm fallback reader)")
    return from_raw_ids(a[:, 0], a[:, 1], a[:, 2].astype(np.float64), rating_scale=(1.0, 5.0), source=src,
                        path=str(path), timestamps=a[:, 3])


def load(dataset: str, seed: int = 0, *, real_only: bool = True) -> Ratings:
    """The dataset via :func:`dpmf_lib.data.load_ratings`; for ml-100k a local reader while that is unavailable.

    With ``real_only`` a synthetic stand-in is refused (:class:`DatasetUnavailable`): the PNBM figures are about
    ML-100K / ML-1M and are run on real data only (ML-1M is skipped until fetched).
    """
    try:
        from ..data import load_ratings

        r = load_ratings(dataset, allow_standin=not real_only, seed=seed)
        return r
    except (ImportError, ModuleNotFoundError):
        if dataset == "ml-100k":
            return _fallback_ml100k()
        raise DatasetUnavailable(f"{dataset}: dpmf_lib.data.load_ratings is not available yet and only ml-100k has a "
                                 "local fallback") from None


def folds(r: Ratings, n_folds: int = 5, seed: int = 0) -> list[tuple[Ratings, Ratings]]:
    """5-fold CV: ML-100K's u1..u5 (mku.sh); other datasets a seeded random 5-way partition."""
    if r.source.dataset == "ml-100k" and r.n_ratings == 100000:
        try:
            from ..data.splits import ml100k_folds

            out = list(ml100k_folds(r))
            return [(a, b) for a, b in out][:n_folds]
        except (ImportError, ModuleNotFoundError):
            out = []
            for k in range(n_folds):
                test = np.zeros(r.n_ratings, dtype=bool)
                test[k * ML100K_FOLD:(k + 1) * ML100K_FOLD] = True
                out.append((r.subset(~test, note=f"u{k + 1}.base"), r.subset(test, note=f"u{k + 1}.test")))
            return out
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
    """Keep at most ``tau`` ratings per user, chosen uniformly at random (paper section 4.3, τ = 200).

    :func:`dpmf_lib.data.splits.trim_per_user` when available, else the same rule here."""
    validate.integer(tau, "tau")
    rng = validate.generator(seed, allow_none=False)
    try:
        from ..data.splits import trim_per_user

        return trim_per_user(r, int(tau), rng)
    except (ImportError, ModuleNotFoundError):
        pass
    key = rng.random(r.n_ratings)
    order = np.lexsort((key, r.users))  # users ascending, random order within a user
    counts = r.user_counts()
    start = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(r.n_ratings, dtype=np.int64)
    rank[order] = np.arange(r.n_ratings) - start[r.users[order]]
    return r.subset(np.flatnonzero(rank < tau))
