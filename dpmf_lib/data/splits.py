"""Train/test splits, per-user trimming and count filters used by the papers.

- :func:`ml100k_folds` — the five folds u1..u5 of MovieLens 100K exactly as the dataset's ``mku.sh`` builds them:
  ``u{i}.test`` is lines ``20000·(i-1)+1 … 20000·i`` of ``u.data`` (FILE order), ``u{i}.base`` the other 80,000 lines,
  each then sorted by user id, then item id (``sort -t'\\t' -k1,1n -k2,2n``). The folds returned here have the same rows
  in the same order as the files. For other sizes (stand-ins) the chunk boundaries are ``⌊i·n/5⌋``.
- :func:`random_split` — a seeded random partition with the given fractions (Balu: 0.8/0.1/0.1); part sizes are
  ``round(cumsum(fractions)·n)`` differences; every part keeps the original row order.
- :func:`trim_per_user` — keep at most τ random ratings of each user (Liu et al. τ = 100/200; DP-PNBM τ = 200); users
  with ≤ τ ratings are kept whole. One uniform key per rating from ``numpy.random.default_rng(seed)``; a user keeps the
  τ ratings with the smallest keys (ties by row). A numba kernel (counting sort by user) and a numpy reference
  (lexsort) implement the same rule and agree exactly. Rows keep file order.
- :func:`filter_min_count` — keep users/items with at least a given number of ratings (DP-PNBM: "users who have more
  than 20 ratings" → ``min_user_ratings=21``); a single pass unless ``iterate=True`` (then to a fixed point).
- :func:`drop_rare` — drop rows of an evaluation set whose user or item has fewer than k ratings in a reference set
  (Balu §4.1.5.1: "Ratings with user/item frequency < 10 are removed from the test and validation sets").
- :func:`sample_items` — all ratings of n random items (Hua et al.: 100 random Netflix movies).

Every result keeps the id space of its input (``n_users``/``n_items`` unchanged) so models trained on a split index
the same rows; the operation is appended to ``source.note``.
"""

from __future__ import annotations

import numba
import numpy as np

from .. import validate
from ..errors import ParameterError
from .ratings import Ratings

ML100K_FOLD_SIZE = 20_000


def _sorted_by_user_item(r: Ratings, index: np.ndarray) -> np.ndarray:
    """``index`` reordered by (raw user id, raw item id); contiguous ids are in raw-id order, so these suffice."""
    order = np.lexsort((r.items[index], r.users[index]))
    return index[order]


def contiguous_folds(r: Ratings, k: int = 5, *, sort: bool = True) -> list[tuple[Ratings, Ratings]]:
    """k folds whose test sets are contiguous chunks of the rows (boundaries ``⌊i·n/k⌋``)."""
    if not isinstance(k, (int, np.integer)) or k < 2:
        raise ParameterError(f"k must be an integer ≥ 2, got {k!r}")
    n = r.n_ratings
    if n < k:
        raise ParameterError(f"cannot make {k} folds of {n} ratings")
    bounds = [(i * n) // k for i in range(k + 1)]
    rows = np.arange(n)
    folds = []
    for i in range(k):
        test = rows[bounds[i]:bounds[i + 1]]
        train = np.concatenate([rows[:bounds[i]], rows[bounds[i + 1]:]])
        if sort:
            test, train = _sorted_by_user_item(r, test), _sorted_by_user_item(r, train)
        folds.append((r.subset(train, note=f"fold {i + 1}/{k} base"), r.subset(test, note=f"fold {i + 1}/{k} test")))
    return folds


def ml100k_folds(r: Ratings) -> list[tuple[Ratings, Ratings]]:
    """``[(u1.base, u1.test), …, (u5.base, u5.test)]`` as ``mku.sh`` builds them from ``u.data`` (rows in file order).

    On the real data (100,000 rows) the chunks are exactly 20,000 lines; on a stand-in the same rule is applied to its
    rows (boundaries ``⌊i·n/5⌋``).
    """
    if r.source.real and r.source.dataset == "ml-100k" and r.n_ratings != 5 * ML100K_FOLD_SIZE:
        raise ParameterError(f"ml100k_folds needs the full u.data (100,000 rows in file order); got {r.n_ratings} rows "
                             "— pass the Ratings returned by load_ratings('ml-100k') before any filtering")
    return contiguous_folds(r, 5, sort=True)


def random_split(r: Ratings, fractions=(0.8, 0.1, 0.1), seed=0) -> tuple[Ratings, ...]:
    """A seeded random partition of the rows into ``len(fractions)`` parts (each in original row order)."""
    f = np.asarray(fractions, dtype=np.float64)
    if f.ndim != 1 or len(f) < 2 or not np.all(np.isfinite(f)) or np.any(f < 0) or abs(f.sum() - 1.0) > 1e-9:
        raise ParameterError(f"fractions must be ≥ 2 non-negative numbers summing to 1, got {fractions!r}")
    rng = validate.generator(seed, allow_none=False)
    n = r.n_ratings
    perm = rng.permutation(n)
    cuts = np.rint(np.cumsum(f) * n).astype(np.int64)
    cuts[-1] = n
    sizes = np.diff(np.concatenate([[0], cuts]))
    empty = [k for k in range(len(f)) if f[k] > 0 and sizes[k] == 0]
    if empty:  # an empty test part gave no error, then a wrong one (a "diverged" model judged on nothing)
        need = int(np.ceil(1.0 / min(f[k] for k in range(len(f)) if f[k] > 0)))
        shares = "/".join(f"{x:g}" for x in f)
        raise ParameterError(f"{r.source.dataset or 'the ratings'}: {n} rating(s) cannot be split {shares}: "
                             + ", ".join(f"part {k + 1} ({f[k]:g}) would hold 0 ratings" for k in empty)
                             + f" — give a dataset of at least {need} ratings (more for a meaningful test)")
    parts, start = [], 0
    for k, end in enumerate(cuts):
        idx = np.sort(perm[start:end])
        parts.append(r.subset(idx, note=f"random split part {k + 1}/{len(f)} ({f[k]:g}), seed {seed}"
                              if not isinstance(seed, np.random.Generator) else
                              f"random split part {k + 1}/{len(f)} ({f[k]:g})"))
        start = end
    return tuple(parts)


@numba.njit(cache=True)
def _trim_keep_mask(users, keys, n_users, tau):
    """Keep mask: for each user with more than ``tau`` rows, the ``tau`` rows with the smallest keys (ties by row)."""
    n = len(users)
    counts = np.zeros(n_users + 1, np.int64)
    for k in range(n):
        counts[users[k] + 1] += 1
    for u in range(n_users):
        counts[u + 1] += counts[u]
    pos = counts[:-1].copy()
    rows = np.empty(n, np.int64)  # counting sort by user; rows ascending within a user
    for k in range(n):
        u = users[k]
        rows[pos[u]] = k
        pos[u] += 1
    keep = np.ones(n, np.bool_)
    for u in range(n_users):
        a, b = counts[u], counts[u + 1]
        if b - a > tau:
            seg = rows[a:b]
            order = np.argsort(keys[seg], kind="mergesort")  # stable: ties by row
            for j in range(tau, b - a):
                keep[seg[order[j]]] = False
    return keep


def _trim_keep_mask_reference(users, keys, tau):
    """numpy reference of :func:`_trim_keep_mask`."""
    order = np.lexsort((np.arange(len(users)), keys, users))
    su = users[order]
    starts = np.r_[0, np.flatnonzero(su[1:] != su[:-1]) + 1]
    rank = np.arange(len(su)) - np.repeat(starts, np.diff(np.r_[starts, len(su)]))
    keep = np.empty(len(users), bool)
    keep[order] = rank < tau
    return keep


def trim_per_user(r: Ratings, tau: int, seed=0) -> Ratings:
    """Keep at most ``tau`` randomly chosen ratings per user (seeded); users with ≤ ``tau`` ratings are untouched."""
    if isinstance(tau, bool) or not isinstance(tau, (int, np.integer)) or tau < 1:
        raise ParameterError(f"tau (max ratings per user) must be an integer ≥ 1, got {tau!r}")
    keys = validate.generator(seed, allow_none=False).random(r.n_ratings, dtype=np.float32)
    keep = _trim_keep_mask(r.users, keys, r.n_users, int(tau))
    how = "" if isinstance(seed, np.random.Generator) else f" (seed {seed})"
    return r.subset(keep, note=f"trimmed to ≤ {tau} ratings per user{how}")


def _counts_ok(counts: np.ndarray, minimum: int) -> np.ndarray:
    return counts >= minimum


def filter_min_count(r: Ratings, *, min_user_ratings: int = 0, min_item_ratings: int = 0,
                     iterate: bool = False) -> Ratings:
    """Keep ratings whose user has ≥ ``min_user_ratings`` and whose item has ≥ ``min_item_ratings`` ratings.

    Counts are taken on ``r`` (one pass); with ``iterate=True`` the filter is repeated until nothing changes.
    """
    for name, v in (("min_user_ratings", min_user_ratings), ("min_item_ratings", min_item_ratings)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise ParameterError(f"{name} must be an integer ≥ 0, got {v!r}")
    keep = np.ones(r.n_ratings, bool)
    while True:
        uc = np.bincount(r.users[keep], minlength=r.n_users)
        ic = np.bincount(r.items[keep], minlength=r.n_items)
        new = keep & _counts_ok(uc, min_user_ratings)[r.users] & _counts_ok(ic, min_item_ratings)[r.items]
        done = not iterate or np.array_equal(new, keep)
        keep = new
        if done:
            break
    return r.subset(keep, note=f"users with ≥ {min_user_ratings} and items with ≥ {min_item_ratings} ratings"
                    + (" (iterated)" if iterate else ""))


def drop_rare(evaluation: Ratings, reference: Ratings, min_count: int) -> Ratings:
    """Rows of ``evaluation`` whose user and item each have ≥ ``min_count`` ratings in ``reference`` (same id space)."""
    if evaluation.n_users != reference.n_users or evaluation.n_items != reference.n_items:
        raise ParameterError("evaluation and reference must share the id space (split them from the same Ratings)")
    uc = reference.user_counts()
    ic = reference.item_counts()
    keep = (uc[evaluation.users] >= min_count) & (ic[evaluation.items] >= min_count)
    return evaluation.subset(keep, note=f"users/items with ≥ {min_count} reference ratings")


def sample_items(r: Ratings, n_items: int, seed=0) -> Ratings:
    """All ratings of ``n_items`` items drawn uniformly without replacement among the rated items (seeded)."""
    rated = np.flatnonzero(r.item_counts() > 0)
    if isinstance(n_items, bool) or not isinstance(n_items, (int, np.integer)) or not 1 <= n_items <= len(rated):
        raise ParameterError(f"n_items must be an integer in [1, {len(rated)}], got {n_items!r}")
    chosen = np.zeros(r.n_items, bool)
    chosen[validate.generator(seed, allow_none=False).choice(rated, size=n_items, replace=False)] = True
    return r.subset(chosen[r.items], note=f"{n_items} random items (seed {seed})")


def subsample(r: Ratings, max_ratings: int | None, seed=0) -> Ratings:
    """A seeded random subset of at most ``max_ratings`` ratings (file order kept; the note says so); ``None`` or a
    bound at or above the size returns ``r`` unchanged. Used by smoke/ci profiles to shrink a dataset honestly."""
    if max_ratings is None or max_ratings >= r.n_ratings:
        return r
    if max_ratings < 1:
        raise ParameterError(f"max_ratings must be ≥ 1 (or null for all ratings), got {max_ratings!r}")
    idx = np.sort(validate.generator(seed, allow_none=False).choice(r.n_ratings, size=int(max_ratings), replace=False))
    if not r.source.real:
        return r.subset(idx, note=f"random subset of {int(max_ratings):,} ratings (seed {seed})")
    # real data (a fetched dataset, your own file): said in the notebook's output as well as in the provenance
    note = (f"random subset of {int(max_ratings):,} ratings (seed {seed}) of its {r.n_ratings:,}: set max_ratings: "
            "null for all")
    print(f"note: {r.source.label} uses {int(max_ratings):,} of its {r.n_ratings:,} ratings (a seeded random subset, "
          f"max_ratings = {int(max_ratings)}): set max_ratings: null for all", flush=True)
    return r.subset(idx, note=note)
