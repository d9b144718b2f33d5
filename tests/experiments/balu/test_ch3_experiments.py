"""Chapter-3 experiments at the smoke profile: data split, Table 3.1, Figure 3.1, attack grid and its cache."""

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.attacks import item_priors, load_dataset, profiles_from_ratings, train_test_split
from dpmf_lib.params import load_params


@pytest.fixture(scope="module")
def profiles():
    return profiles_from_ratings(load_dataset("ml-100k"))


def test_split_is_seeded_and_disjoint(profiles):
    tr, te = train_test_split(profiles, 600, seed=0)
    tr2, te2 = train_test_split(profiles, 600, seed=0)
    assert (len(tr), len(te)) == (600, 343)
    assert np.array_equal(tr.users, tr2.users) and np.array_equal(te.items, te2.items)
    assert not set(tr.users) & set(te.users)
    q = item_priors(tr)
    assert np.all((q > 0) & (q < 1))
    assert q.sum() == pytest.approx((tr.sizes().sum() + 0.5 * tr.n_items) / 601, rel=1e-9)  # alpha = 0.5 smoothing


def test_table3_1_movielens_row():
    from dpmf_lib.experiments import balu_table3_1 as e

    df = e.run(load_params("balu_table3_1", "smoke"))
    ml = df[df["row"] == "MovieLens"].set_index("column")["ours"]
    assert ml["users"] == 943 and ml["train"] == 600 and ml["test"] == 343 and ml["N"] == 1682
    assert ml["c_avg"] == pytest.approx(106.04, abs=0.01)
    assert df[df["row"] == "Digg"]["ours"].isna().all()


def test_fig3_1_ratio_measurement():
    from dpmf_lib.experiments import balu_fig3_1 as e

    df = e.run(load_params("balu_fig3_1", "smoke"))
    m = {x["claim"]: x["value"] for x in df.attrs["measurements"]}
    assert m["balu-3.3-joint-single-ratio"] == pytest.approx(1 / np.log(2), rel=0.02)
    assert (df["difference"] >= -1e-12).all()


def test_attack_grid_smoke_and_cache(tmp_path, monkeypatch):
    from dpmf_lib.experiments import _balu_ch3 as ch3

    monkeypatch.setenv("DPMF_FIGURES_DIR", str(tmp_path))
    p = load_params("balu_fig3_2", "smoke", {"eps": [59, 0], "n_attacked": 3, "n_samples": 200})
    a = ch3.run_attack_grid("blip", p)
    assert set(a["attack"]) == {"popularity", "single", "single_prior", "mcmc_prior", "mcmc_flat"} and a["user"].nunique() == 3
    assert (a["dataset"] == "ml-100k").all()
    assert list((tmp_path / ".cache" / "joblib").rglob("output.pkl"))  # the one result cache (dpmf_lib.cache)
    b = ch3.run_attack_grid("blip", {**p, "attacks": ["mcmc_prior"]})  # served from the cache
    pd.testing.assert_series_equal(a[a["attack"] == "mcmc_prior"]["cos"].reset_index(drop=True),
                                   b["cos"].reset_index(drop=True))
    monkeypatch.setenv("DPMF_CACHE", "off")
    c = ch3.run_attack_grid("blip", {**p, "attacks": ["mcmc_prior"]})  # recomputed: same seeds, same numbers
    np.testing.assert_allclose(c["cos"].to_numpy(), b["cos"].to_numpy())
    s = ch3.summarize(a)
    hi = s[(s["eps"] == 59) & (s["attack"] == "single")]["cos_mean"].iloc[0]
    lo = s[(s["eps"] == 0) & (s["attack"] == "single")]["cos_mean"].iloc[0]
    assert hi > 0.8 > lo


def test_results_of_an_eps_do_not_depend_on_the_eps_list(monkeypatch):
    """The per-ε cache is keyed by the ε value, so the seeds must be too: ε = 0 computed inside [59, 0] must equal ε = 0
    computed alone (it did not when seeds followed the ε's index: up to 0.11 cosine apart)."""
    from dpmf_lib.experiments import _balu_ch3
    from dpmf_lib.params import load_params

    monkeypatch.setenv("DPMF_CACHE", "off")
    p = load_params("balu_fig3_2", "smoke", {"n_attacked": 3, "burn_in": 5, "n_samples": 40})
    setup = _balu_ch3.prepare(p)
    both = _balu_ch3.run_attack_grid("blip", {**p, "eps": [59, 0]}, setup)
    alone = _balu_ch3.run_attack_grid("blip", {**p, "eps": [0]}, setup)
    cols = ["user", "attack", "cos", "ap10", "c_hat"]
    a = both[both.eps == 0][cols].reset_index(drop=True)
    b = alone[cols].reset_index(drop=True)
    assert a.equals(b)
