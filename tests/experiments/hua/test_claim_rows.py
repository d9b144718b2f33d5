"""Hua claims are measured on the rows they quote (review of issue #16's W-scaled variant and Figs 9–10)."""

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.experiments.hua import hua_common as hc
from dpmf_lib.experiments.hua import hua_fig7, hua_fig9


def _sources():
    return {"netflix": {"dataset": "netflix", "real": False, "label": "Netflix (stand-in)", "checksum": None}}


def test_fig7_claims_read_theorem1_rows_even_when_the_w_scaled_row_comes_first(monkeypatch):
    rows = []
    for noise, inc in ((hc.NOISE_LABEL["w_scaled"], 0.001), (hc.NOISE_LABEL["theorem1"], 250.0)):
        for scen in ("s1", "s2"):
            rows.append({"panel": "a", "scenario": scen, "noise": noise, "eps": 0.15, "iterations": 100,
                         "mean_increase": inc, "dataset": "Netflix (stand-in)"})
    df = pd.DataFrame(rows)
    monkeypatch.setattr(hc, "increase_experiment", lambda params: (df, _sources()))
    monkeypatch.setattr(hc, "sources_of", lambda s: [])
    monkeypatch.setattr(hua_fig7, "attach", lambda d, sources, measurements: measurements)
    monkeypatch.setattr(hc, "reference_gain", lambda params: 0.1)
    ms = hua_fig7.run({})
    assert [(m.claim, m.value) for m in ms] == [("hua-5-fig7a-s1-netflix-eps015", 250.0),
                                                ("hua-5-fig7a-s2-netflix-eps015", 250.0),
                                                (hua_fig7.CLAIM_S2_NEAR_S1, 0.0)]
    assert ms[2].guards == {"reference_gain_over_bias_only": 0.1}


def test_join_probability_claim_is_unmeasured_when_the_base_increase_is_not_positive(monkeypatch):
    df = pd.DataFrame({"panel": "a", "seed": 0, "probability": [0.005, 0.02], "mean_increase": [-2.0, 1.0],
                       "dataset": "Netflix (stand-in)"})
    monkeypatch.setattr(hc, "joinleave_experiment", lambda params: (df, _sources()))
    monkeypatch.setattr(hc, "joinleave_difference", lambda d, seed: (3.0, "note"))
    monkeypatch.setattr(hc, "sources_of", lambda s: [])
    monkeypatch.setattr(hua_fig9, "attach", lambda d, sources, measurements: measurements)
    monkeypatch.setattr(hc, "reference_gain", lambda params: 0.1)
    ms = hua_fig9.run({"seed": 0, "iterations_s3": 10000})
    assert len(ms) == 1 and np.isnan(ms[0].value)  # judged inconclusive (a seed without a finite value)


def test_fig6_claim_reads_the_theorem1_row_even_when_a_w_scaled_row_comes_first(monkeypatch):
    from dpmf_lib.experiments.hua import hua_fig6

    rows = []
    for noise, mean in ((hc.NOISE_LABEL["w_scaled"], 0.301), (hc.NOISE_LABEL["theorem1"], 42.0)):
        rows.append({"dataset": "ml-100k", "panel": "b", "scenario": "s3", "noise": noise, "eps": 0.05,
                     "iterations": 10000, "mean_abs_error": mean, "baseline_mean_abs_error": 0.3})
    df = pd.DataFrame(rows)
    src = {"ml-100k": {"dataset": "ml-100k", "real": True, "label": "ml-100k", "checksum": None}}
    monkeypatch.setattr(hc, "cdf_experiment", lambda params, scenario: (df, src))
    monkeypatch.setattr(hc, "sources_of", lambda s: [])
    monkeypatch.setattr(hua_fig6, "attach", lambda d, sources, measurements: measurements)
    monkeypatch.setattr(hc, "reference_gain", lambda params: 0.1)
    ms = hua_fig6.run({"iterations_fixed": 10000, "claim_eps": 0.05})
    assert [m.value for m in ms] == [pytest.approx(41.7)]
    assert ms[0].guards == {"reference_gain_over_bias_only": 0.1}


def test_fig6_claim_through_the_real_table_reads_panel_b_theorem1(monkeypatch):
    from dpmf_lib.experiments.hua import hua_fig6
    from dpmf_lib.params import load_params
    from tests.experiments.hua.test_w_scaled import fake_scenario_run

    monkeypatch.setattr(hc, "scenario_run", fake_scenario_run([]))
    monkeypatch.setattr(hc, "reference_gain", lambda params: 0.1)
    params = {**load_params("hua_fig6", "paper"), "cache": False, "n_jobs": 1}  # the fake lives in this process
    df = hua_fig6.run(params)
    (m,) = df.attrs["measurements"]
    # the fake's Theorem-1 S3 mean at eps = 0.05, T = 10^4 (10 / eps * 2 + 1) minus its baseline 0.3
    assert m["claim"] == hua_fig6.CLAIM and m["value"] == pytest.approx(401.0 - 0.3)
    w = df[(df.noise == hc.W_LABEL) & (df.eps == 0.05)]
    assert len(w) and abs(float(w.mean_abs_error.iloc[0]) - 0.3) < 0.01  # the W-scaled row exists and is not read


def test_fig6_claims_run_gives_the_claims_row_of_the_full_run_and_runs_nothing_else():
    """The further seeds of Fig 6's claim run only the claim's curve (hua_fig6.claims_run): the panel-(b) Theorem-1
    row at claim_eps must be byte-identical to the full run's, and no other ε or iteration count, nor panel (c), may
    be computed."""
    from dpmf_lib.experiments.hua import hua_fig6
    from dpmf_lib.params import load_params

    p = {**load_params("hua_fig6", "smoke"), "claim_eps": 1.0, "w_scaled_variant": True}
    full = hua_fig6.run(p)
    fast = hua_fig6.claims_run(p)

    def claim_row(df):
        return df[(df.panel == "b") & (df.scenario == "s3") & (df.noise == hc.NOISE_LABEL["theorem1"])
                  & (df.eps == 1.0)].reset_index(drop=True)

    pd.testing.assert_frame_equal(claim_row(fast), claim_row(full))
    private = fast[fast.noise != "none"]
    assert set(private.eps) == {1.0} and set(private.iterations) == {int(p["iterations_fixed"])}
    assert "c" not in set(fast.panel) and "c" in set(full.panel)


@pytest.mark.parametrize("how", ["params", "env-off"])
def test_fig6_claims_run_computes_the_claim_curve_once_without_the_cache(monkeypatch, how):
    """claims_run sets panel (a) to the claim's ε and iterations, i.e. the very run of panel (b): it must be computed
    once even when the result cache cannot merge the two (``cache: false``, ``$DPMF_CACHE=off`` or ``refresh``)."""
    from dpmf_lib.experiments.hua import hua_fig6
    from dpmf_lib.params import load_params

    real, calls = hc._compute, []

    def spy(scenario, dkey, eps, checkpoints, *rest):
        calls.append((scenario, eps, tuple(checkpoints)))
        return real(scenario, dkey, eps, checkpoints, *rest)

    monkeypatch.setattr(hc, "_compute", spy)
    p = {**load_params("hua_fig6", "smoke"), "claim_eps": 1.0}
    if how == "params":
        p["cache"] = False
    else:
        monkeypatch.setenv("DPMF_CACHE", "off")
    hua_fig6.claims_run(p)
    claim = ("s3", 1.0, (int(p["iterations_fixed"]),))
    assert calls.count(claim) == 1, calls
    assert len(calls) == len(set(calls)) == 3  # the claim's run, the baseline, S3 without noise
