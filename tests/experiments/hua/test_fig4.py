"""Hua et al. (2015) experiments: the Netflix-subset restriction and the notebooks' run() at the smoke profile."""

import numpy as np

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.objpert.data import restrict_items
from dpmf_lib.params import load_params


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


def test_movielens_notebooks_run_at_smoke():
    import dpmf_lib.experiments.extra_hua_message_sizes as msg
    import dpmf_lib.experiments.hua_common as hc
    import dpmf_lib.experiments.hua_fig4 as fig4

    p = load_params("hua_fig4", "smoke")
    df = fig4.run(p)
    assert (df.dataset == "ml-100k").all()
    # panel (c): the labelled W-scaled variant (not covered by Theorem 1) when the params ask for it, never in (a)/(b)
    assert set(df.panel) == ({"a", "b", "c"} if p["w_scaled_variant"] else {"a", "b"})
    assert set(df[df.panel == "c"].noise) <= {hc.W_LABEL, "none"} and hc.W_LABEL not in set(df[df.panel != "c"].noise)
    assert np.all(np.diff(df[df.curve == df.curve.iloc[0]].cdf.to_numpy()) >= 0)  # a CDF
    fig4.plot(df, p)
    p = load_params("extra_hua_message_sizes", "smoke")
    t = msg.run(p).set_index("quantity")
    assert t.loc["all_exact", "measured_P2^64"] == 1.0 and t.loc["all_exact", "measured_P2^32"] == 1.0
    assert t.loc["user_up_20_items", "measured_P2^64"] == 20 * 50 * 8
    assert t.loc["user_up_20_items", "measured_P2^32"] == 20 * 50 * 4
