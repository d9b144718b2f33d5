"""User profiles as rated-item sets (Balu 2016, thesis chapter 3, Section 3.5.1 and Table 3.1).

A profile is the set of items a user rated (Table 3.1: ML-100K has c_avg = 106 and sparsity 6.30 % = 106/1682, i.e. every
rated item counts, whatever the rating). 600 users are drawn (seeded) for training — they give the adversary's item
priors — and the other 343 are attacked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import validate
from ..data.ratings import Ratings
from ..errors import ParameterError



@dataclass(frozen=True)
class Profiles:
    """Item sets in CSR form: the items of profile ``k`` are ``items[indptr[k]:indptr[k+1]]`` (ascending, distinct)."""

    indptr: np.ndarray  # int64, length n + 1
    items: np.ndarray  # int32
    n_items: int
    users: np.ndarray  # int32: the Ratings user id each profile comes from

    def __len__(self) -> int:
        return len(self.indptr) - 1

    def profile(self, k: int) -> np.ndarray:
        return self.items[self.indptr[k]:self.indptr[k + 1]]

    def sizes(self) -> np.ndarray:
        return np.diff(self.indptr)

    def subset(self, idx) -> "Profiles":
        idx = np.asarray(idx)
        parts = [self.profile(int(k)) for k in idx]
        indptr = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=indptr[1:])
        items = np.ascontiguousarray(np.concatenate(parts) if parts else np.zeros(0), dtype=np.int32)
        return Profiles(indptr, items, self.n_items, np.ascontiguousarray(self.users[idx], dtype=np.int32))

    def item_counts(self) -> np.ndarray:
        """Number of profiles holding each item (int64, length ``n_items``)."""
        return np.bincount(self.items, minlength=self.n_items)

    def indicator(self) -> np.ndarray:
        """Dense 0/1 matrix (n_profiles x n_items, float32)."""
        out = np.zeros((len(self), self.n_items), dtype=np.float32)
        rows = np.repeat(np.arange(len(self)), self.sizes())
        out[rows, self.items] = 1.0
        return out


def profiles_from_ratings(r: Ratings) -> Profiles:
    """One profile per user: the set of items the user rated."""
    csr = r.user_csr()
    return Profiles(np.ascontiguousarray(csr.indptr, dtype=np.int64), np.ascontiguousarray(csr.indices, dtype=np.int32),
                    int(r.n_items), np.arange(r.n_users, dtype=np.int32))


def train_test_split(p: Profiles, n_train: int = 600, n_test: int | None = None,
                     seed: int | np.random.Generator = 0) -> tuple[Profiles, Profiles]:
    """Random disjoint train/test users (Table 3.1: 600 / 343 for ML-100K). ``n_test=None``: all the others."""
    n = len(p)
    if not (0 < n_train < n):
        raise ParameterError(f"n_train must lie in (0, {n}) for {n} profiles, got {n_train}")
    n_test = n - n_train if n_test is None else int(n_test)
    if not (0 < n_test <= n - n_train):
        raise ParameterError(f"n_test must lie in (0, {n - n_train}] after {n_train} training users, got {n_test}")
    rng = validate.generator(seed)
    perm = rng.permutation(n)
    return p.subset(np.sort(perm[:n_train])), p.subset(np.sort(perm[n_train:n_train + n_test]))


def item_priors(train: Profiles, alpha: float = 0.5) -> np.ndarray:
    """Adversary's item popularity q_j = (count_j + alpha) / (n_train + 2 alpha) (float64).

    The thesis uses "the frequencies of items" in the training set; alpha = 0.5 (Krichevsky–Trofimov) keeps items
    unseen in training at a small positive prior instead of an impossible one (our choice).
    """
    if alpha < 0:
        raise ParameterError(f"prior smoothing alpha must be >= 0, got {alpha}")
    return (train.item_counts() + alpha) / (len(train) + 2.0 * alpha)


def load_dataset(dataset_id: str = "ml-100k", seed: int = 0) -> Ratings:
    """The dataset through :func:`dpmf_lib.data.load_ratings`: real when fetched or mirrored; a labelled synthetic
    stand-in only for datasets that cannot be had here (:func:`dpmf_lib.data.datasets.standin_permitted`)."""
    from ..data import load_ratings
    from ..data.datasets import standin_permitted

    return load_ratings(dataset_id, allow_standin=standin_permitted(dataset_id), seed=seed)
