"""extra_liu_gap_vs_size: the user subsample is exact, the claim's slope and guards are read as stated, the full-size
ML-100K point is liu_fig7's rating-DP point, and the claims' seeds are the run's own."""

import math

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.extra import extra_liu_gap_vs_size as gv
from dpmf_lib.params import load_params


def hand_made() -> Ratings:
    """8 users × 6 items: users 0-6 rate items {u % 5, (u + 1) % 5, (u + 3) % 5}, user 7 rates item 5 only (so item
    5 stays only when user 7 does); value 1 + (u + item) % 5."""
    rows = [(u, j) for u in range(7) for j in sorted({u % 5, (u + 1) % 5, (u + 3) % 5})] + [(7, 5)]
    users, items = (np.array(x, dtype=np.int32) for x in zip(*rows))
    values = (1 + (users + items) % 5).astype(np.float32)
    return Ratings(users, items, values, 8, 6, (1.0, 5.0), DataSource("hand", True, None, "hand-made"))


def triples(r: Ratings) -> set:
    """Every rating as (raw user, raw item, value)."""
    uid = np.arange(r.n_users) if r.user_ids is None else np.asarray(r.user_ids)
    iid = np.arange(r.n_items) if r.item_ids is None else np.asarray(r.item_ids)
    return {(int(uid[u]), int(iid[i]), float(v)) for u, i, v in zip(r.users, r.items, r.values)}


def test_user_subsample_keeps_the_chosen_users_with_all_their_ratings_and_only_their_items():
    r = hand_made()
    half = gv.user_subsample(r, 0.5, seed=0)
    chosen = np.sort(np.random.default_rng([0, gv.SUBSAMPLE_STREAM]).permutation(8)[:4])
    assert list(half.user_ids) == list(chosen) == [0, 1, 3, 4]  # pinned: the seeded choice must not move
    assert half.n_users == 4 and set(half.users.tolist()) == {0, 1, 2, 3}
    assert triples(half) == {t for t in triples(r) if t[0] in {0, 1, 3, 4}}  # every rating of theirs, no other
    assert list(half.item_ids) == sorted({j for _, j, _ in triples(half)})  # items rated by them, in order
    assert 5 not in half.item_ids  # only user 7 rated item 5
    assert half.n_items == len(half.item_ids) and half.items.max() == half.n_items - 1
    assert "4 of 8 users" in half.source.note and half.source.real


def test_user_subsample_is_nested_rounds_and_returns_the_data_at_fraction_one():
    r = hand_made()
    for seed in range(5):
        users = [set(gv.user_subsample(r, f, seed).user_ids.tolist()) for f in (0.25, 0.5, 0.75)]
        assert [len(u) for u in users] == [2, 4, 6]
        assert users[0] <= users[1] <= users[2]
    assert gv.user_subsample(r, 1.0, 3) is r
    assert gv.user_subsample(r, 0.01, 0).n_users == 1  # at least one user
    for bad in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ParameterError, match="user_fractions"):
            gv.user_subsample(r, bad, 0)


def frame(gaps_by_seed: dict, users=(100, 1000, 10000), dataset="ml-100k", real=True, rhat=1.01, ess=300.0,
          gain=0.02) -> pd.DataFrame:
    rows = []
    for seed, gaps in gaps_by_seed.items():
        for u, g in zip(users, gaps):
            rows.append({"dataset_id": dataset, "dataset": dataset if real else f"{dataset} [synthetic stand-in]",
                         "real": real, "seed": seed, "n_users": u, "tau": 100, "rho": 1.0, "gap": g,
                         "test_rmse_private": 1.0 + g, "test_rmse_reference": 1.0, "rhat_private": rhat,
                         "rhat_reference": 1.0, "ess_private": ess, "ess_reference": 500.0,
                         "reference_gain_over_item_means": gain})
    return pd.DataFrame(rows)


def test_the_claims_value_is_the_slope_per_tenfold_users():
    assert gv.gap_slope(frame({0: [0.3, 0.2, 0.1]})) == pytest.approx(-0.1)
    assert gv.gap_slope(frame({0: [0.1, 0.1, 0.1]})) == pytest.approx(0.0)
    # least squares, not end points: gaps 0.2, 0.0, 0.1 over 1, 2, 3 decades → slope −0.05
    assert gv.gap_slope(frame({0: [0.2, 0.0, 0.1]})) == pytest.approx(-0.05)
    assert math.isnan(gv.gap_slope(frame({0: [0.2]}, users=(100,))))
    assert math.isnan(gv.gap_slope(frame({0: [0.2, float("nan"), 0.1]})))


def test_the_guards_are_the_worst_point_and_an_unmeasured_chain_fails():
    g = frame({0: [0.3, 0.2, 0.1]})
    g.loc[1, "rhat_reference"], g.loc[2, "ess_private"], g.loc[0, "reference_gain_over_item_means"] = 1.2, 150, -0.04
    m = gv.slope_measurement(g, "c")
    assert m.guards == {"chain_split_rhat": 1.2, "chain_ess": 150.0, "reference_gain_over_bias_only": -0.04}
    assert m.value == pytest.approx(-0.1) and m.real and "100 users: 1.3000 − 1.0000 = 0.3000" in m.note
    g.loc[0, "rhat_private"], g.loc[0, "ess_reference"] = np.nan, np.nan
    bad = gv.slope_measurement(g, "c").guards
    assert bad["chain_split_rhat"] == math.inf and bad["chain_ess"] == 0.0


def test_measurements_merge_each_series_over_its_own_seeds():
    df = pd.concat([frame({0: [0.3, 0.2, 0.1], 1: [0.5, 0.3, 0.1]}),
                    frame({0: [0.1, 0.1, 0.1]}, users=(960, 3842, 15366), dataset="netflix", real=False)])
    ms = {m["claim"]: m for m in gv.measurements(df)}
    a, b = ms[gv.CLAIMS["ml-100k"]], ms[gv.CLAIMS["netflix"]]
    assert a["values"] == pytest.approx([-0.1, -0.2]) and a["seeds"] == [0, 1] and a["real"]
    assert b["values"] == pytest.approx([0.0]) and b["seeds"] == [0] and not b["real"]  # no NaN for seed 1
    assert a["guards"]["chain_split_rhat"] == [1.01, 1.01]


class FakeNb:
    name, profile = "extra_liu_gap_vs_size", "paper"

    def __init__(self, need):
        self.need, self.params, self.measurements = need, {"seed": 0}, None

    def seeds_needed(self, ms):
        return self.need

    def claims_table(self):
        return self.measurements


def test_the_claims_seeds_are_the_runs_own_and_too_few_are_refused():
    df = frame({s: [0.3, 0.2, 0.1] for s in range(5)})
    df.attrs["measurements"] = gv.measurements(df)
    nb = FakeNb(5)
    assert gv.seeds_in_run(df).replicate(nb)[0]["values"] == pytest.approx([-0.1] * 5)
    assert nb.replicate_seeds == [0, 1, 2, 3, 4]
    short = frame({s: [0.3, 0.2, 0.1] for s in range(3)})
    short.attrs["measurements"] = gv.measurements(short)
    with pytest.raises(ParameterError, match="need 5 seeds .* measured 3"):
        gv.seeds_in_run(short).replicate(FakeNb(5))


def test_params_resolve_chain_lengths_per_dataset():
    p = load_params("extra_liu_gap_vs_size", "paper")
    ml = gv.fig7_params(p, 3, "ml-100k")
    assert {k: ml["gibbs"][k] for k in ("sweeps", "burn_in", "n_chains")} == {"sweeps": 600, "burn_in": 200,
                                                                             "n_chains": 2}
    assert ml["seed"] == 3 and ml["rho"] == [1.0] and ml["gibbs"]["private_series"]
    assert (gv.fig7_params(p, 3, "netflix")["gibbs"]["sweeps"], gv.fig7_params(p, 3, "netflix")["gibbs"]["burn_in"]) \
        == (300, 100)
    with pytest.raises(ParameterError, match="burn_in must lie in"):
        gv.fig7_params({**p, "gibbs": {"sweeps": 10, "burn_in": 10, "n_chains": 2}}, 0, "ml-100k")


@pytest.mark.slow
def test_the_full_size_ml100k_point_is_liu_fig7s_rating_dp_point():
    """At fraction 1 the data, split, priors and chains are liu_fig7's: the gap is its claim's value, bit for bit."""
    from dpmf_lib.experiments.liu import liu_fig7

    p = load_params("extra_liu_gap_vs_size", "smoke")
    row = gv.size_point("ml-100k", 1.0, 0, p)
    f7 = load_params("liu_fig7", "smoke", {"sgld": p["sgld"], "n_threads": 1,
                                           "gibbs": {**p["gibbs"], "datasets": ["ml-100k"], "private_series": True}})
    m = next(m for m in liu_fig7.replicate_run(f7).attrs["measurements"]
             if m["claim"] == liu_fig7.RATING_DP_CLAIMS["ml-100k"])
    assert row["gap"] == m["value"]
    assert row["reference_gain_over_item_means"] == m["guards"]["reference_gain_over_bias_only"]
    assert row["n_users"] == 943 and row["real"]
