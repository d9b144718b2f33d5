"""Balu (2016) thesis, Figure 3.3: cosine of JLT profile reconstructions vs ε (MCMC with/without prior, single, popularity).

ML-100K: 600 training users give the item priors, the 343 test users are sanitized with JLT and attacked (Section
3.5.1). The Digg panel of the thesis cannot be reproduced (the crawl is not available): the figure says so.
All logic lives in :mod:`dpmf_lib.experiments.balu._balu_ch3` and :mod:`dpmf_lib.attacks`; choices the thesis leaves open are
listed in :mod:`dpmf_lib.attacks.decoders` (c_hat at ε = 0, c_max, flat prior, prefilter, coding multiplicity).
"""

from __future__ import annotations

import pandas as pd

from . import _balu_ch3 as ch3

KIND = "jlt"
METRIC = "cos"


def run(params: dict) -> pd.DataFrame:
    """Per-(ε, user, attack) rows: cos, ap10, c_hat, c_true (summarise with :func:`summarize`)."""
    return ch3.attack_figure_run(KIND, METRIC, params)


def replicate_run(params: dict) -> pd.DataFrame:
    """What ``nb.replicate`` re-runs at the further seeds: :func:`run` with ``n_attacked`` replaced by
    ``replicate_n_attacked`` (a seeded subsample of the test users; null: the same users as the figure). The figure's
    seed keeps its full setting. See :func:`dpmf_lib.experiments.balu._balu_ch3.replicate_params`: the interval over seeds
    is wider than five full seeds would give, the mean over seeds unbiased for the claims that are means over users."""
    return ch3.attack_figure_run(KIND, METRIC, ch3.replicate_params(params))


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    return ch3.summarize(df)


def plot(df: pd.DataFrame, params: dict):
    return ch3.plot_metric(ch3.summarize(df), params, METRIC, "cosine(P, P̂): mean (solid),\n10 % and 90 % quantiles (dotted)",
                           "Balu 2016 Figure 3.3: JLT (cosine)")
