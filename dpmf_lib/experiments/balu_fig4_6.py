"""Balu 2016, Figure 4.6: the λ chosen on validation for each (d, γ) of the count sketch (k = 4), MovieLens 1M.

The thesis: "The optimal value is often lower than 10⁻² ... The λ value diminishes with d ... λ lowers with increase
in γ". Same sweep as Figure 4.1 restricted to k = 4 with a finer λ grid. Measured: the Spearman correlation of the
chosen λ with γ (claimed negative) and with d (claimed positive).
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from ..claims import Measurement
from ..outputs import attach
from ..plotting import figure, standin_title
from ..sketch.runs import degenerate_cells, search_note
from ._balu_ch4_plot import mean_se
from .balu_fig4_1 import sweep

CLAIM_GAMMA = "balu-4.1.5.5-lambda-falls-with-gamma-ml-1m"
CLAIM_D = "balu-4.1.5.5-lambda-grows-with-d-ml-1m"


def best_lambda(df: pd.DataFrame) -> pd.DataFrame:
    """Median over splits of the chosen λ per (d, γ)."""
    return df.groupby(["d", "gamma"]).lam.median().reset_index()


def run(params: dict) -> pd.DataFrame:
    df, r = sweep(params)
    b = best_lambda(df)
    lo, hi = min(params["lam_grid"]), max(params["lam_grid"])
    # a cell whose chosen lambda sits on the grid's edge only says "the optimum is at or beyond the edge"
    off_edge = {"cells_off_grid_edge": float(((b.lam > lo) & (b.lam < hi)).mean()),
                # a degenerate cell (val RMSE = bias-only) chose its lambda among ties: its lambda says nothing
                "cells_not_degenerate": float(1.0 - degenerate_cells(df, ["d", "gamma"]).mean())}
    meas = []
    if b.gamma.nunique() > 1 and b.lam.nunique() > 1:
        meas.append(Measurement(CLAIM_GAMMA,
                                float(stats.spearmanr(b.gamma, b.lam).statistic), r.source.label, r.source.real,
                                note="Spearman correlation of chosen lambda with gamma over the (d, gamma) grid",
                                guards=off_edge))
    if b.d.nunique() > 1 and b.lam.nunique() > 1:
        meas.append(Measurement(CLAIM_D,
                                float(stats.spearmanr(b.d, b.lam).statistic), r.source.label, r.source.real,
                                note="Spearman correlation of chosen lambda with d over the (d, gamma) grid",
                                guards=off_edge))
    return attach(df, sources=[r.source], measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    fig, axes = figure(width=5.6, height=5.0, layout="constrained")
    ax = axes[0][0]
    grid = best_lambda(df).pivot(index="gamma", columns="d", values="lam").sort_index(ascending=False)
    with np.errstate(divide="ignore"):
        logv = np.log10(grid.values.astype(float))
    im = ax.imshow(logv, cmap="magma", aspect="auto")
    ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [f"{g:.3g}" for g in grid.index])
    deg = degenerate_cells(df, ["gamma", "d"]).unstack("d").reindex(index=grid.index, columns=grid.columns)
    deg = deg.fillna(False).values
    n_splits = int(df.split.nunique()) if "split" in df.columns else 1
    rm = df.groupby(["gamma", "d"]).test_rmse.agg(lambda v: mean_se(v)[0]).unstack("d")
    rs = df.groupby(["gamma", "d"]).test_rmse.agg(lambda v: mean_se(v)[1]).unstack("d")
    rm, rs = (t.reindex(index=grid.index, columns=grid.columns).values for t in (rm, rs))
    for (a, b), v in np.ndenumerate(grid.values):
        # under the lambda: the chosen model's test RMSE, ± 1 standard error over splits when there are several
        rmse = f"\n{rm[a, b]:.3f}" + (f"±{rs[a, b]:.3f}" if n_splits > 1 else "")
        ax.text(b, a, f"{v:.2g}" + rmse + ("\nbias-only" if deg[a, b] else ""), ha="center", va="center",
                fontsize=6, color="k", bbox=dict(fc="w", ec="none", alpha=0.8, pad=1.5))
        if deg[a, b]:
            ax.add_patch(plt.Rectangle((b - 0.5, a - 0.5), 1, 1, fill=False, hatch="///", ec="r", lw=0))
    ax.set_xlabel("d")
    ax.set_ylabel("space gain γ")
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="log10 best λ")
    ax.set_title(standin_title("Balu 2016, Figure 4.6: best λ over (d, γ), count sketch k = 4", df.dataset.unique()),
                 fontsize=9)
    note = search_note(df)
    fig.get_layout_engine().set(rect=(0, 0.2, 1, 0.8))
    spl = (f"cells: λ (searched on the first split), then the test RMSE of the chosen model, mean ± 1 standard error "
           f"over {n_splits} random splits" if n_splits > 1 else "cells: λ, then the chosen model's test RMSE (one split)")
    fig.text(0.01, 0.005, "hatched 'bias-only': the selected (η, λ) is no better than μ + b_u + b_i on validation\n"
             "(any larger λ ties, so its λ is not a choice)\n" + spl + (f"\nsearch: {note}" if note else ""),
             fontsize=7, va="bottom", ha="left")
    return fig
