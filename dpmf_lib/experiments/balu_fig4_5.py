"""Balu 2016, Figure 4.5: test RMSE against the regularization λ (from 10 down to 0), d = 32, γ = 1, EachMovie.

For each λ, η is tuned on validation (log grid). The thesis: "The optimal λ is around 0.1 ... Even when the
regularization is turned off (λ = 0), our scheme performs better than the other two". Measured: the λ minimising
the count-sketch test RMSE, and RMSE(count sketch, λ = 0) − min(RMSE(regular, 0), RMSE(feature hashing, 0)).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..claims import Measurement
from ..outputs import attach
from ..plotting import figure, standin_title
from ..sketch.runs import load, make_splits
from . import _balu_ch4_runs
from ._balu_ch4_plot import bias_line, footnote, line_with_bars, mark_degenerate
from .balu_table4_2 import METHOD_LABELS

CLAIM_BEST = "balu-4.1.5.5-best-lambda-eachmovie"
CLAIM_ZERO = "balu-4.1.5.5-cs-best-at-lambda0-eachmovie"


def run(params: dict) -> pd.DataFrame:
    r = load(params)
    splits = make_splits(r, params)
    configs = [{"method": m, "d": params["d"], "gamma": params["gamma"], "lam_grid": [float(lam)], "lam": float(lam)}
               for m in params["methods"] for lam in params["lambdas"]]
    # through the result cache: a run stopped by its time budget resumes from the runs it finished
    df = _balu_ch4_runs.run_configs(configs, splits, params, r)
    df["dataset"] = r.source.label
    df["real"] = r.source.real
    mean = df.groupby(["method", "lam"]).test_rmse.mean().unstack("method")
    meas = []
    if "count_sketch" in mean.columns:
        best = float(mean["count_sketch"].idxmin())
        interior = 1.0 if min(params["lambdas"]) < best < max(params["lambdas"]) else 0.0
        meas.append(Measurement(CLAIM_BEST, best, r.source.label, r.source.real,
                                note="lambda with the lowest mean test RMSE of count sketch (k=4)",
                                guards={"lambda_grid_interior": interior}))
        if 0.0 in mean.index and {"regular", "feature_hashing"} <= set(mean.columns):
            z = mean.loc[0.0]
            meas.append(Measurement(CLAIM_ZERO, float(z["count_sketch"] - min(z["regular"], z["feature_hashing"])),
                                    r.source.label, r.source.real,
                                    note="lambda = 0: RMSE(cs) - min(RMSE(regular), RMSE(fh))"))
    return attach(df, sources=[r.source], measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    fig, axes = figure(width=5.6, height=4.6)
    ax = axes[0][0]
    pos = sorted(x for x in df.lam.unique() if x > 0)
    zero_at = pos[0] / 10 if pos else 1e-5  # λ = 0 drawn one decade left of the smallest positive λ
    for m, g in df.groupby("method", sort=False):
        lams = sorted(g.lam.unique())
        x = np.where(np.array(lams) > 0, lams, zero_at)
        line_with_bars(ax, x, [g[g.lam == lam].test_rmse for lam in lams], label=METHOD_LABELS.get(m, m))
        if "degenerate" in g:
            mark_degenerate(ax, x, g.groupby("lam").test_rmse.mean().reindex(lams),
                            g.groupby("lam").degenerate.any().reindex(lams).values)
    bias_line(ax, df)
    ax.set_xscale("log")
    ticks = [zero_at] + pos
    ax.set_xticks(ticks, ["0"] + [f"{t:g}" for t in pos])
    ax.set_xlabel("λ (λ = 0 at the left end)")
    ax.set_ylabel("test RMSE")
    ax.legend(fontsize=7)
    ax.set_title(standin_title(f"Balu 2016, Figure 4.5: RMSE vs λ, d = {params['d']}, γ = {params['gamma']}",
                               df.dataset.unique()), fontsize=9)
    footnote(fig, df, extra="ringed: degenerate (validation RMSE = bias-only: the factors learned nothing)")
    return fig
