"""The two data sets of Sec. 5: MovieLens 100K and the Netflix subset of 100 random movies with all their raters.

``load_hua_dataset("ml-100k")`` is the real ML-100K through :func:`dpmf_lib.data.load_ratings`.
``load_hua_dataset("netflix", n_movies=100)`` draws ``n_movies`` items uniformly at random (``subset_seed``) from
``load_ratings("netflix")`` — the real data when fetched, else its labelled synthetic stand-in — keeps all their
ratings and renumbers the raters (users with no rating of those movies are dropped, as in the paper's "191668 users'
ratings of 100 movies").
"""

from __future__ import annotations

import numpy as np

from ..data.ratings import Ratings
from ..errors import ParameterError


def _load(dataset_id: str, **kw) -> Ratings:
    from ..data import load_ratings

    return load_ratings(dataset_id, **kw)


def restrict_items(r: Ratings, n_items: int, seed: int, note: str) -> Ratings:
    """``n_items`` random items with all their ratings; users and items renumbered to the subset."""
    if not (1 <= int(n_items) <= r.n_items):
        raise ParameterError(f"parameter 'n_movies' must be in [1, {r.n_items}], got {n_items!r}")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 3]))
    chosen = np.sort(rng.choice(r.n_items, size=int(n_items), replace=False))
    keep = np.isin(r.items, chosen)
    users, u_new = np.unique(r.users[keep], return_inverse=True)
    i_new = np.searchsorted(chosen, r.items[keep])
    from dataclasses import replace

    src = replace(r.source, note=(r.source.note + "; " + note).strip("; "))
    return Ratings(users=u_new.astype(np.int32), items=i_new.astype(np.int32), values=r.values[keep],
                   n_users=len(users), n_items=int(n_items), rating_scale=r.rating_scale, source=src,
                   user_ids=None if r.user_ids is None else r.user_ids[users],
                   item_ids=None if r.item_ids is None else r.item_ids[chosen])


def load_hua_dataset(name: str, *, n_movies: int = 100, subset_seed: int = 0, standin_scale: float = 1.0,
                     seed: int = 0) -> Ratings:
    """``ml-100k`` or ``netflix`` (the 100-random-movies subset) as used in the paper's Section 5."""
    if name == "ml-100k":
        return _load("ml-100k")
    if name == "netflix":
        from ..data.datasets import standin_permitted

        full = _load("netflix", allow_standin=standin_permitted("netflix"), seed=seed, standin_scale=standin_scale)
        return restrict_items(full, n_movies, subset_seed, f"{n_movies} random movies (seed {subset_seed}) with all "
                              "their raters (Hua et al. Sec. 5)")
    raise ParameterError(f"parameter 'dataset' must be 'ml-100k' or 'netflix', got {name!r}")
