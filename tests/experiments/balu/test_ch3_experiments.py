"""Chapter-3 experiments at the smoke profile: data split, Table 3.1, Figure 3.1, attack grid and its cache; the ε = 0
exact-marginal guard (Figures 3.2-3.5) fails on partial information."""

import math

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
    from dpmf_lib.experiments.balu import balu_table3_1 as e

    df = e.run(load_params("balu_table3_1", "smoke"))
    ml = df[df["row"] == "MovieLens"].set_index("column")["ours"]
    assert ml["users"] == 943 and ml["train"] == 600 and ml["test"] == 343 and ml["N"] == 1682
    assert ml["c_avg"] == pytest.approx(106.04, abs=0.01)
    assert df[df["row"] == "Digg"]["ours"].isna().all()


def test_fig3_1_ratio_measurement():
    from dpmf_lib.experiments.balu import balu_fig3_1 as e

    df = e.run(load_params("balu_fig3_1", "smoke"))
    m = {x["claim"]: x["value"] for x in df.attrs["measurements"]}
    assert m["balu-3.3-joint-single-ratio"] == pytest.approx(1 / np.log(2), rel=0.02)
    assert (df["difference"] >= -1e-12).all()


def test_attack_grid_smoke_and_cache(tmp_path, monkeypatch):
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

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
    from dpmf_lib.experiments.balu import _balu_ch3
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


# ---- the ε = 0 exact-marginal guard must not pass on partial information (review) ----

def _summary_at0(err_prior, err_flat):
    rows = [("mcmc_prior", 0.20, err_prior), ("mcmc_flat", 0.21, err_flat), ("single", 0.18, np.nan),
            ("popularity", 0.22, np.nan)]
    return pd.DataFrame([{"dataset": "ml-100k", "mechanism": "blip", "eps": 0.0, "attack": a, "cos_mean": c,
                          "map10": c, "split_rhat_q90": 1.01, "exact_err_mean": e} for a, c, e in rows])


def _eps0_guard(summary):
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    got = []
    ch3._add_eps0(lambda claim, value, extra="", rhat=None, exact_err=None: got.append((value, exact_err)),
                  summary, "cos_mean", "balu-3.5-blip-eps0-max-cos", lambda attacks, eps=None: 1.01)
    (value, guard), = got
    assert value == pytest.approx(0.21)
    return guard


def test_eps0_exact_marginal_guard_is_nan_when_one_mcmc_attack_lacks_it():
    """pandas' max skips NaN: with one MCMC attack's exact-marginal error missing the old guard took the other's
    value and passed on half the information. A missing value must fail the guard (NaN)."""
    assert math.isnan(_eps0_guard(_summary_at0(0.01, np.nan)))
    assert math.isnan(_eps0_guard(_summary_at0(np.nan, 0.01)))
    assert math.isnan(_eps0_guard(_summary_at0(np.nan, np.nan)))
    assert _eps0_guard(_summary_at0(0.01, 0.02)) == pytest.approx(0.02)  # both present: the worst


def test_eps0_guard_reaches_the_measurement_and_fails_the_claim_guard():
    from dpmf_lib.claims import load_claims
    from dpmf_lib.data.ratings import DataSource
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    p = load_params("balu_fig3_2", "smoke")
    ms = ch3.attack_measurements(_summary_at0(0.01, np.nan), "blip", DataSource("ml-100k", True, "x"), p,
                                 metric="cos")
    m = next(m for m in ms if m.claim == "balu-3.5-blip-eps0-max-cos")
    g = (m.guards or {})["exact_marginal_err"]
    assert math.isnan(g)
    claim = next(c for c in load_claims() if c.id == m.claim)
    guard = next(g for g in claim.guards if g.name == "exact_marginal_err")
    assert not guard.holds(g)  # NaN fails the claim's guard
    assert guard.holds(0.01)  # the value the old code let through


def test_exact_marginal_error_mean_over_users_is_nan_when_a_user_lacks_it():
    """The same at user level: the ε = 0 guard's mean over users must not skip a user whose chain gave no exact-marginal
    error (pandas' mean skips NaN), or the guard passes on the users that happened to have one."""
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    base = {"dataset": "ml-100k", "mechanism": "blip", "eps": 0.0, "attack": "mcmc_prior", "cos": 0.2, "ap10": 0.1,
            "c_hat": 10, "c_true": 12, "split_rhat": 1.01, "sweeps": 800, "exact_spearman": 0.9,
            "seconds_all_attacks": 1.0}
    df = pd.DataFrame([{**base, "user": 1, "exact_err": 0.01}, {**base, "user": 2, "exact_err": np.nan}])
    summary = ch3.summarize(df)
    assert math.isnan(summary["exact_err_mean"].iloc[0])
    assert summary["exact_spearman_mean"].iloc[0] == pytest.approx(0.9)  # the neighbouring column is still there
    df.loc[1, "exact_err"] = 0.03
    assert ch3.summarize(df)["exact_err_mean"].iloc[0] == pytest.approx(0.02)
