"""Liu Figure 1: items per rating count, popularity tiers, cache fit, and the stand-in's floor shown on the figure."""

import numpy as np

from dpmf_lib.experiments.liu.liu_fig1 import cache_fit, count_distribution, tier_shares, top_share


def test_distribution_counts_items_per_rating_count():
    counts = np.array([1, 1, 2, 5, 0, 5, 5])
    d = count_distribution(counts)
    assert d.ratings_per_item.tolist() == [1, 2, 5] and d.n_items.tolist() == [2, 1, 3]


def test_top_share_and_tiers_on_hand_made_counts():
    counts = np.array([10, 40, 30, 20])  # total 100; sorted 40, 30, 20, 10
    assert top_share(counts, 1) == 0.4 and top_share(counts, 2) == 0.7 and top_share(counts, 10) == 1.0
    t = tier_shares(counts, [1, 2])
    assert t.tier.tolist() == ["top 1", "next 2", "tail"]
    assert np.allclose(t.share, [0.4, 0.5, 0.1]) and t.n_items.tolist() == [1, 2, 1]


def test_cache_fit_counts_vectors_with_bias():
    counts = np.array([50, 30, 20])
    f = cache_fit(counts, [3], {"L1d": 32})  # 32 bytes / (4 * (3 + 1)) = 2 vectors
    assert f.items_fitting.tolist() == [2] and np.isclose(f.share.iloc[0], 0.8)


def test_log_binning_keeps_every_item():
    from dpmf_lib.experiments.liu.liu_fig1 import log_binned

    counts = np.array([1, 1, 2, 3, 9, 10, 11, 99, 100, 1000])
    b = log_binned(count_distribution(counts), bins_per_decade=1)
    assert b.n_items.sum() == len(counts)
    assert b.n_items.tolist() == [5, 3, 1, 1]  # [1,10), [10,100), [100,1000), [1000,...)


def _fig1_frame():
    import pandas as pd

    from dpmf_lib.experiments.liu.liu_fig1 import tier_shares

    frames = []
    for label, real, counts in (("ml-100k", True, np.array([1, 3, 50, 400])),
                                ("netflix [synthetic stand-in]", False, np.array([137, 140, 900, 5000]))):
        frames += [count_distribution(counts).assign(table="distribution", dataset=label, real=real),
                   tier_shares(counts, [1, 2]).assign(table="tiers", dataset=label, real=real)]
    return pd.concat(frames, ignore_index=True)


def test_standin_floor_is_measured_from_the_plotted_data_and_shown_on_the_figure():
    """#14 F8: the stand-in has no movie in the caption's "100 ratings or less" region; the figure says so."""
    import matplotlib

    matplotlib.use("Agg")
    from dpmf_lib.experiments.liu.liu_fig1 import plot, standin_floor_notes

    df = _fig1_frame()
    notes = standin_floor_notes(df)
    assert [(label, floor) for label, floor, _ in notes] == [("netflix [synthetic stand-in]", 137)]  # real data: none
    assert "no item below 137 ratings" in notes[0][2] and "real tail goes to 3" in notes[0][2]  # registry: Netflix min 3
    assert "×0.5" in standin_floor_notes(df, 0.5)[0][2]
    fig = plot(df, {"standin_scale": 1.0})
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    assert "no item below 137 ratings" in texts and "100 ratings" in texts
