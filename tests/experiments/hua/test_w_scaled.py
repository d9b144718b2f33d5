"""Hua et al.: the W-scaled noise variant (issue #16) is exactly eta / W and is flagged as not DP-valid; the
multi-seed Figures 9-10 share their seed block with the claim replicates."""

from dpmf_lib.experiments import module_name
import numpy as np
import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.hua import hua_common as hc
from dpmf_lib.objpert import mf
from dpmf_lib.objpert import noise as nz
from tests.lib.objpert.test_core import small_ratings

EPS, SEED = 0.3, 11


@pytest.fixture(scope="module")
def prob():
    return mf.Problem.from_ratings(small_ratings())


def cfgs(**kw):
    return mf.HuaConfig(d=6, **kw), mf.HuaConfig(d=6, noise_scale="w_scaled", **kw)


def test_noise_factor_is_one_over_the_number_of_ratings(prob):
    t1, w = cfgs()
    assert mf.noise_factor(prob, t1) == 1.0
    assert mf.noise_factor(prob, w) == 1.0 / len(prob.values) and len(prob.values) == 80 * 8


def test_s1_w_scaled_is_the_exact_minimiser_with_eta_over_w(prob):
    t1, w = cfgs()
    res = mf.run_s1(prob, w, EPS, [5], SEED, keep_factors=True)
    # the same draw as run_s1 makes, divided by W, through the Theorem-1 solver
    rng_noise = mf._streams(SEED)[0]
    eta = nz.sample_eta(prob.n_items, 6, EPS, prob.delta, "norm_gamma", rng_noise, np.float32)
    _, states = mf.train_mf(prob, t1, [5], SEED, states=True)
    U, V = states[5]
    V_expected = mf.s1_reoptimize(prob, t1, U, V, (eta * np.float32(1.0 / len(prob.values))).astype(np.float32), 5)
    np.testing.assert_array_equal(res.factors[5][1], V_expected)
    # and it is not the Theorem-1 release (the test has power)
    V_t1 = mf.s1_reoptimize(prob, t1, U, V, eta, 5)
    assert np.abs(V_t1 - V_expected).max() > 1e-3


@pytest.mark.parametrize("scenario", ["s2", "s3"])
def test_s2_s3_w_scaled_rounds_receive_exactly_the_noise_over_w(prob, scenario, monkeypatch):
    seen = {"theorem1": [], "w_scaled": []}
    real = mf.mf_round
    key = {"k": None}

    def spy(prob_, cfg, U, V, participants, item_noise, *a, **kw):
        seen[key["k"]].append(np.array(item_noise, copy=True))
        return real(prob_, cfg, U, V, participants, item_noise, *a, **kw)

    monkeypatch.setattr(mf, "mf_round", spy)
    run = getattr(mf, f"run_{scenario}")
    kw = {"max_online": 20} if scenario == "s3" else {}
    for cfg in cfgs():
        key["k"] = cfg.noise_scale
        run(prob, cfg, EPS, [4], SEED, **kw)
    assert len(seen["theorem1"]) == len(seen["w_scaled"]) == 4
    f = np.float32(1.0 / len(prob.values))
    for t1, w in zip(seen["theorem1"], seen["w_scaled"]):
        assert np.abs(t1).max() > 0
        np.testing.assert_array_equal(w, (t1 * f).astype(np.float32))


@pytest.mark.parametrize("scenario", ["s1", "s2", "s3"])
def test_w_scaled_release_is_flagged_not_dp_valid(prob, scenario):
    t1, w = cfgs()
    run = getattr(mf, f"run_{scenario}")
    rw = run(prob, w, EPS, [3], SEED)
    assert rw.privacy["epsilon_stated"] == EPS and rw.privacy["epsilon_effective"] is None
    assert any("W-scaled noise (not covered by Theorem 1)" in c for c in rw.privacy["caveats"])
    assert not hc.eps_holds({"results": rw})
    if scenario == "s1":  # the W-scaled flag is the variant's; the Theorem-1 release of S1 holds no ε either, for
        r1 = run(prob, t1, EPS, [3], SEED)  # another reason (U is non-private MF on the same ratings)
        assert r1.privacy["epsilon_effective"] is None and not hc.eps_holds({"results": r1})
        assert not any("W-scaled" in c for c in r1.privacy["caveats"])
        assert any("premise broken" in c for c in r1.privacy["caveats"])


def test_noise_scale_is_checked():
    with pytest.raises(ParameterError, match="noise_scale"):
        mf.HuaConfig(noise_scale="tiny")


def test_figure_seeds_are_a_block_shared_by_the_replicates():
    blocks = {s: hc.figure_seeds({"seed": s, "n_seeds": 5}) for s in range(7)}
    assert all(blocks[s] == [0, 1, 2, 3, 4] for s in range(5))
    assert blocks[5] == blocks[6] == [5, 6, 7, 8, 9]
    assert all(s in blocks[s] for s in blocks)
    with pytest.raises(ParameterError, match="n_seeds"):
        hc.figure_seeds({"seed": 0, "n_seeds": 0})


def test_seed_summary_is_a_student_t_interval():
    import pandas as pd
    from scipy import stats

    x = np.array([1.0, 2.0, 4.0, 3.0, 5.0])
    df = pd.DataFrame({"panel": "a", "probability": 0.01, "mean_increase": x})
    s = hc.seed_summary(df).iloc[0]
    lo, hi = stats.t.interval(0.95, 4, loc=x.mean(), scale=stats.sem(x))
    assert s["mean"] == pytest.approx(3.0) and s["ci95"] == pytest.approx((hi - lo) / 2) and s["n_seeds"] == 5


def test_w_scaled_variant_parameter_selects_scenarios():
    assert hc.w_scaled_for({"w_scaled_variant": True}, "s3") and not hc.w_scaled_for({}, "s1")
    assert hc.w_scaled_for({"w_scaled_variant": ["s1", "s2"]}, "s2")
    assert not hc.w_scaled_for({"w_scaled_variant": ["s1", "s2"]}, "s3")
    with pytest.raises(ParameterError, match="w_scaled_variant"):
        hc.w_scaled_for({"w_scaled_variant": ["s4"]}, "s1")


def test_explicit_protocol_refuses_the_w_scaled_variant(prob):
    from dpmf_lib.objpert.protocol import Protocol

    with pytest.raises(ParameterError, match="noise_scale"):
        Protocol(prob, mf.HuaConfig(d=6, noise_scale="w_scaled"), EPS, seed=1)


# ---- Figures 3-6 (S2, S3): the W-scaled panel (c) beside the Theorem-1 panels, never in their place -----------------
def fake_scenario_run(calls: list):
    """A stand-in for :func:`hua_common.scenario_run` (no MF): means that differ by scenario, eps, T and noise scale,
    CDFs of a uniform law on [0, 2 * mean], and the privacy record each release carries."""
    def fake(params, scenario, dataset, eps, checkpoints, *, s3=None, noise_scale="theorem1", seed=None):
        calls.append((scenario, eps, tuple(int(t) for t in checkpoints), noise_scale))
        out = {}
        for T in checkpoints:
            if eps is None:
                mean = 0.3 if scenario == "mf" else 0.5
            elif noise_scale == "w_scaled":
                mean = 0.3 + 1e-3 * eps
            else:
                mean = 10.0 / eps * (1.0 + int(T) / 1e4) + (1.0 if scenario == "s3" else 0.0)
            out[int(T)] = {"cdf": np.clip(mf.CDF_GRID / (2 * mean), 0, 1), "mean": mean, "median": mean,
                          "rmse": mean}
        priv = {} if eps is None else {"epsilon_stated": eps,
                                       "epsilon_effective": None if noise_scale == "w_scaled" else eps}
        src = {"dataset": dataset, "real": dataset == "ml-100k", "checksum": None, "note": "",
               "label": "ml-100k" if dataset == "ml-100k" else "netflix [synthetic stand-in]"}
        return {"source": src, "results": mf.ScenarioResult(out, privacy=priv), "online_mean": 50.0,
                "participants_mean": 40.0}
    return fake


@pytest.mark.parametrize("name", ["hua_fig3", "hua_fig4", "hua_fig5", "hua_fig6"])
def test_figs_3_to_6_add_the_w_scaled_panel_beside_the_theorem1_panels(name, monkeypatch):
    import importlib

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from dpmf_lib.params import load_params

    mod = importlib.import_module(module_name(name))
    calls: list = []
    monkeypatch.setattr(hc, "scenario_run", fake_scenario_run(calls))
    params = {**load_params(name, "paper"), "cache": False, "n_jobs": 1}  # the fake lives in this process
    assert params["w_scaled_variant"] is True
    # ci draws it too, except hua_fig6 (its S3 runs on ML-100K are the expensive ones, as in hua_fig7/8)
    assert hc.w_scaled_for(load_params(name, "ci"), mod.SCENARIO) == (name != "hua_fig6")
    df = mod.run(params)
    df0 = mod.run({**params, "w_scaled_variant": False})
    # the Theorem-1 panels (a), (b) are the same rows with and without the variant
    keep = df[df.panel != "c"].reset_index(drop=True)
    pd.testing.assert_frame_equal(keep, df0.reset_index(drop=True), check_like=False)
    # panel (c): one W-scaled curve per eps of panel (b), at its iterations, labelled; the baseline beside it
    c = df[(df.panel == "c") & (df.scenario != "baseline")]
    assert set(c.noise) == {hc.W_LABEL} and set(c.scenario) == {f"{mod.SCENARIO}-w_scaled"}
    assert sorted(c.eps.unique()) == sorted(float(e) for e in params["eps_values"])
    assert set(c.iterations) == {int(params["iterations_fixed"])}
    assert all("does not hold" in s for s in c.curve.unique())
    assert (df[df.panel != "c"].noise != hc.W_LABEL).all()
    w_calls = [k for k in calls if k[3] == "w_scaled"]
    assert len(w_calls) == len(params["eps_values"]) and all(k[0] == mod.SCENARIO for k in w_calls)
    # legible: three panels on a log |error| axis, each legend below (outside) its panel
    fig = mod.plot(df, params)
    try:
        axes = [ax for ax in fig.axes if ax.get_legend() is not None]
        assert len(axes) == 3 and all(ax.get_xscale() == "log" for ax in axes)
        fig.canvas.draw()
        for ax in axes:
            assert ax.get_legend().get_window_extent().y1 <= ax.get_window_extent().y0 + 1
        assert any("W-scaled" in ax.get_title() for ax in axes)
    finally:
        plt.close(fig)
