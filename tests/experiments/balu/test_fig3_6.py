"""Balu chapter 3, two review findings: the ε = 0 exact-marginal guard must not pass on partial information, and
Figure 3.6's utility noise must depend on the ε value, not its place in the list."""

import math

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.params import load_params


def _summary_at0(err_prior, err_flat):
    rows = [("mcmc_prior", 0.20, err_prior), ("mcmc_flat", 0.21, err_flat), ("single", 0.18, np.nan),
            ("popularity", 0.22, np.nan)]
    return pd.DataFrame([{"dataset": "ml-100k", "mechanism": "blip", "eps": 0.0, "attack": a, "cos_mean": c,
                          "map10": c, "split_rhat_q90": 1.01, "exact_err_mean": e} for a, c, e in rows])


def _eps0_guard(summary):
    from dpmf_lib.experiments import _balu_ch3 as ch3

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
    from dpmf_lib.experiments import _balu_ch3 as ch3

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


@pytest.fixture(scope="module")
def fig36_setup():
    from dpmf_lib.experiments import _balu_ch3 as ch3
    from dpmf_lib.experiments import balu_fig3_6 as e

    params = load_params("balu_fig3_6", "smoke")
    out = {}
    for kind in ("blip", "jlt"):
        p = e._mech_params(params, kind)
        out[kind] = (p, ch3.prepare(p))
    return params, out


@pytest.mark.parametrize("kind, eps, longer", [("blip", 8.0, [59, 28, 8]), ("jlt", 2.0, [600, 2, 0.1])])
def test_fig3_6_utility_row_depends_on_the_eps_value_not_its_place(fig36_setup, kind, eps, longer):
    from dpmf_lib.experiments import balu_fig3_6 as e

    params, setups = fig36_setup
    p, setup = setups[kind]
    alone = e.utility(kind, {**p, "eps": [eps], "knn_k": params["knn_k"]}, setup)
    inside = e.utility(kind, {**p, "eps": longer, "knn_k": params["knn_k"]}, setup)
    assert len(alone) == 1
    pd.testing.assert_frame_equal(alone.reset_index(drop=True),
                                  inside[inside["eps"] == eps].reset_index(drop=True))


def test_fig3_6_utility_sketches_are_the_attacked_releases(fig36_setup, monkeypatch):
    """Same noise seeds as the attacks ([seed, 2, eps_stream(ε), u]): the sketch the utility uses for an attacked user
    is the release the privacy axis attacked."""
    from dpmf_lib.experiments import _balu_ch3 as ch3
    from dpmf_lib.experiments import _balu_ch3_rows as rows
    from dpmf_lib.experiments import balu_fig3_6 as e

    params, setups = fig36_setup
    p, setup = setups["blip"]
    seen = {"utility": set(), "attack": set()}

    def spy(which, real):
        def f(*parts):
            if len(parts) == 4 and parts[1] == 2:
                seen[which].add(tuple(int(x) for x in parts))
            return real(*parts)
        return f

    real = rows._seed
    monkeypatch.setattr(ch3, "_seed", spy("utility", real))
    e.utility("blip", {**p, "eps": [8], "knn_k": params["knn_k"]}, setup)
    monkeypatch.setattr(rows, "_seed", spy("attack", real))
    rows.attack_one_eps("blip", 8.0, {**p, "attacks": ["popularity"]}, setup)
    assert len(seen["attack"]) == len(setup.attacked) and seen["attack"] <= seen["utility"]
    assert len(seen["utility"]) == len(setup.test)


def test_exact_marginal_error_mean_over_users_is_nan_when_a_user_lacks_it():
    """The same at user level: the ε = 0 guard's mean over users must not skip a user whose chain gave no exact-marginal
    error (pandas' mean skips NaN), or the guard passes on the users that happened to have one."""
    from dpmf_lib.experiments import _balu_ch3 as ch3

    base = {"dataset": "ml-100k", "mechanism": "blip", "eps": 0.0, "attack": "mcmc_prior", "cos": 0.2, "ap10": 0.1,
            "c_hat": 10, "c_true": 12, "split_rhat": 1.01, "sweeps": 800, "exact_spearman": 0.9,
            "seconds_all_attacks": 1.0}
    df = pd.DataFrame([{**base, "user": 1, "exact_err": 0.01}, {**base, "user": 2, "exact_err": np.nan}])
    summary = ch3.summarize(df)
    assert math.isnan(summary["exact_err_mean"].iloc[0])
    assert summary["exact_spearman_mean"].iloc[0] == pytest.approx(0.9)  # the neighbouring column is still there
    df.loc[1, "exact_err"] = 0.03
    assert ch3.summarize(df)["exact_err_mean"].iloc[0] == pytest.approx(0.02)
