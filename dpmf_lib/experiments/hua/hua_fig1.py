"""Hua, Xia, Zhong (2015), Figure 1: CDF of prediction errors for Netflix in S1 (trusted recommender).

Panel (a): the CDF of ``|r'_ij - r_ij|`` over the rated pairs for several iteration counts at a fixed eps; panel (b):
the same after a fixed number of iterations for several eps; both with the non-private baseline (MF, 100 iterations).
The paper does not list the eps and iteration values of its curves; ours are in ``params/hua_fig1.yaml``. The
simulation and every reconstruction choice are described in :mod:`dpmf_lib.objpert.mf` and the notebook.
With ``w_scaled_variant`` panel (c) shows the labelled variant that divides eta by ``W = |R|`` (not covered by
Theorem 1; its stated eps does not hold); claims are judged on the Theorem-1 mechanism only.
"""

from __future__ import annotations

import pandas as pd

from ...claims import Measurement
from ...outputs import attach
from . import hua_common as hc
from . import hua_plots

SCENARIO = "s1"
FIGURE = 1
CLAIM_TREND = "hua-5-fig1-precision-grows-with-iterations-netflix"


def iterations_trend(params: dict, scenario: str, plan: hc.RunPlan) -> tuple[float, float, str]:
    """Panel (a)'s trend over the iterations: (mean |error| after the last iteration count − after the first) / after
    the first, at ``eps_fixed`` (< 0: the precision increases), with the ``reference_gain_over_bias_only`` guard
    (:func:`~.hua_common.reference_gain`) and a note. Reads the panel's run from ``plan`` (computed by
    :func:`~.hua_common.cdf_experiment`)."""
    ds, e = params["dataset"], float(params["eps_fixed"])
    its = sorted(int(t) for t in params["iterations"])
    res = plan.results[plan.add(scenario, ds, params["eps_fixed"], params["iterations"])]["results"]
    first, last = res[its[0]], res[its[-1]]
    value = (last["mean"] - first["mean"]) / first["mean"]
    gain = hc.reference_gain(params)
    note = (f"{scenario.upper()} relative change of the mean |error| from {its[0]} to {its[-1]} iterations at "
            f"eps={e:g} ({first['mean']:.4g} -> {last['mean']:.4g})")
    return float(value), float(gain), note


def run(params: dict) -> pd.DataFrame:
    plan = hc.RunPlan(params)
    df, sources = hc.cdf_experiment(params, SCENARIO, plan)
    label = df["dataset"].iloc[0]
    real = bool(list(sources.values())[0]["real"])
    # Sec. 5: "the precision increases with the iteration number" (Figs 1-2)
    value, gain, note = iterations_trend(params, SCENARIO, plan)
    meas = [Measurement(CLAIM_TREND, value, label, real, note, guards={"reference_gain_over_bias_only": gain})]
    return attach(df, sources=hc.sources_of(sources), measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    return hua_plots.plot_cdf(df, params, SCENARIO, FIGURE)
