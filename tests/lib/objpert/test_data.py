"""dpmf_lib.objpert.data: the Netflix-subset restriction of Hua et al. (2015) keeps every rating of the chosen items."""

import numpy as np

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.objpert.data import restrict_items


def test_restrict_items_keeps_all_ratings_of_chosen_items():
    rng = np.random.default_rng(0)
    n, m = 50, 40
    users = rng.integers(0, n, 600)
    items = rng.integers(0, m, 600)
    key = np.unique(users * m + items)
    users, items = (key // m).astype(np.int32), (key % m).astype(np.int32)
    r = Ratings(users=users, items=items, values=np.ones(len(users), np.float32), n_users=n, n_items=m,
                rating_scale=(1.0, 5.0), source=DataSource("netflix", False, None, "toy"),
                user_ids=np.arange(100, 100 + n), item_ids=np.arange(1000, 1000 + m))
    s = restrict_items(r, 7, seed=3, note="7 random movies")
    assert s.n_items == 7 and s.source.label == "netflix [synthetic stand-in]" and "7 random movies" in s.source.note
    chosen = s.item_ids - 1000
    assert len(s) == int(np.isin(items, chosen).sum())
    assert s.n_users == len(np.unique(users[np.isin(items, chosen)]))  # every kept user rated a chosen item
    assert np.all(s.user_counts() > 0)
    # pairs map back to original ids exactly
    orig = set(zip(users[np.isin(items, chosen)] + 100, items[np.isin(items, chosen)] + 1000))
    assert set(zip(s.user_ids[s.users], s.item_ids[s.items])) == orig
