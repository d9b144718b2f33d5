"""Hua, Xia, Zhong (2015), Figure 4: CDF of prediction errors for MovieLens in S2 (untrusted recommender, static users).

Panel (a): the CDF of ``|r'_ij - r_ij|`` over the rated pairs for several iteration counts at a fixed eps; panel (b):
the same after a fixed number of iterations for several eps; both with the non-private baseline (MF, 100 iterations).
The paper does not list the eps and iteration values of its curves; ours are in ``params/hua_fig4.yaml``. The
simulation and every reconstruction choice are described in :mod:`dpmf_lib.objpert.mf` and the notebook.
With ``w_scaled_variant`` panel (c) shows the labelled variant that divides the noise by ``W = |R|`` (not covered by
Theorem 1; its stated eps does not hold), beside the Theorem-1 panels, never in their place; no claim is measured
here.
"""

from __future__ import annotations

import pandas as pd

from ...outputs import attach
from . import hua_common as hc
from . import hua_plots

SCENARIO = "s2"
FIGURE = 4


def run(params: dict) -> pd.DataFrame:
    df, sources = hc.cdf_experiment(params, SCENARIO)
    return attach(df, sources=hc.sources_of(sources))


def plot(df: pd.DataFrame, params: dict):
    return hua_plots.plot_cdf(df, params, SCENARIO, FIGURE)
