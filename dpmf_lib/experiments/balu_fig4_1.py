"""Balu 2016, Figure 4.1 (MovieLens 1M; Figure 4.2 is the same on EachMovie): heatmaps of test RMSE over the latent
dimension d and the space gain γ, for feature hashing (k = 1, left) and count sketch (k = 4, right).

Every (k, d, γ) cell gets its own (η, λ) from the line search on validation (the thesis: "The best λ and η depends on γ
and d"), sketch width from eq. (4.9). Claims measured: the mean over the grid of RMSE(k = 1) − RMSE(k = 4) (the thesis:
"there is an improvement in RMSE score with higher k"), and the RMSE change from the largest to the smallest model.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..claims import Measurement
from ..outputs import attach
from ..plotting import figure, standin_title
from ..sketch.runs import degenerate_cells, load, make_splits, run_configs, search_note
from . import _balu_ch4_runs
from ._balu_ch4_plot import mean_se

FIGURE = "Figure 4.1"

CLAIM_K = "balu-4.1.5.3-k4-beats-k1-ml-1m"  # the claim is about MovieLens 1M; measured on whatever runs
SHARED_K = (4,)  # Figure 4.6's ks (params/balu_fig4_6.yaml, every profile): only these cells go through the cache


def sweep(params: dict, *, cached: bool = True) -> tuple[pd.DataFrame, object]:
    """One row per (k, d, γ, split). ``cached``: the training runs of the k ∈ ``SHARED_K`` cells go through the result
    cache (:mod:`dpmf_lib.experiments._balu_ch4_runs`): Figure 4.6 sweeps 4.1's k = 4 cells on the same splits and
    reads the runs they share from it (the k = 1 cells are nobody else's: trained directly). Figure 4.2 (other data:
    nothing to share) passes False."""
    r = load(params)
    splits = make_splits(r, params)
    configs = [{"method": "feature_hashing" if k == 1 else "count_sketch", "k": int(k), "d": int(d), "gamma": float(g)}
               for k in params["ks"] for d in params["d_grid"] for g in params["gamma_grid"]]
    df = (_balu_ch4_runs.run_configs(configs, splits, params, r, shared=[c["k"] in SHARED_K for c in configs])
          if cached else run_configs(configs, splits, params))
    df["dataset"] = r.source.label
    df["real"] = r.source.real
    return df, r


def k_gain(df: pd.DataFrame) -> float:
    """Mean over the (d, γ) grid of mean-over-splits RMSE(k = 1) − RMSE(k = 4)."""
    m = df.groupby(["k", "d", "gamma"]).test_rmse.mean().unstack("k")
    if 1 not in m.columns or len(m.columns) < 2:
        return float("nan")
    other = [c for c in m.columns if c != 1][-1]
    return float((m[1] - m[other]).mean())


def run(params: dict, claim: str = CLAIM_K, *, cached: bool = True) -> pd.DataFrame:
    df, r = sweep(params, cached=cached)
    deg = degenerate_cells(df, ["k", "d", "gamma"])
    both = deg.groupby(["d", "gamma"]).any()  # a (d, gamma) cell is compared only when neither k is degenerate
    live = both[~both].index
    gain_live = k_gain(df.set_index(["d", "gamma"]).loc[live].reset_index()) if len(live) else float("nan")
    meas = [Measurement(claim, k_gain(df), r.source.label, r.source.real,
                        note=f"mean over d={params['d_grid']}, gamma={params['gamma_grid']} of RMSE(k=1) - RMSE(k=4); "
                             f"{int(both.sum())} of {len(both)} (d, gamma) cells degenerate for some k (selected val "
                             f"RMSE = bias-only: they add 0 to the mean); over the others only: {gain_live:.4f}",
                        guards={"cells_not_degenerate": float(1.0 - both.mean())})]
    return attach(df, sources=[r.source], measurements=meas)


def plot(df: pd.DataFrame, params: dict, figure_label: str = FIGURE):
    ks = sorted(df.k.unique())
    fig, axes = figure(ncols=len(ks), width=4.6, height=4.6, layout="constrained")
    mean = df.groupby(["k", "gamma", "d"]).test_rmse.mean()
    # ± 1 standard error over splits (the (eta, lambda) of a cell is searched on the first split, then refit per split)
    se = df.groupby(["k", "gamma", "d"]).test_rmse.agg(lambda v: mean_se(v)[1])
    n_splits = int(df.split.nunique()) if "split" in df.columns else 1
    deg = degenerate_cells(df, ["k", "gamma", "d"])
    lo, hi = float(mean.min()), float(mean.max())
    for ax, k in zip(axes[0], ks):
        grid = mean.loc[k].unstack("d").sort_index(ascending=False)
        im = ax.imshow(grid.values, cmap="viridis_r", vmin=lo, vmax=hi, aspect="auto")
        ax.set_xticks(range(grid.shape[1]), [f"{c:g}" for c in grid.columns])
        ax.set_yticks(range(grid.shape[0]), [f"{g:.3g}" for g in grid.index])
        dgrid = deg.loc[k].unstack("d").reindex(index=grid.index, columns=grid.columns).fillna(False)
        sgrid = se.loc[k].unstack("d").reindex(index=grid.index, columns=grid.columns)
        for (a, b), v in np.ndenumerate(grid.values):
            mark = "\n(bias-only)" if dgrid.values[a, b] else ""
            err = f"\n±{sgrid.values[a, b]:.3f}" if n_splits > 1 else ""
            ax.text(b, a, f"{v:.3f}{err}{mark}", ha="center", va="center", fontsize=6 if (mark or err) else 7,
                    color="w" if v > (lo + hi) / 2 else "k")
            if mark:
                ax.add_patch(plt.Rectangle((b - 0.5, a - 0.5), 1, 1, fill=False, hatch="///", ec="r", lw=0))
        ax.set_xlabel("d (log2 spaced)")
        ax.set_ylabel("space gain γ (log2 spaced)")
        ax.set_title("feature hashing (k = 1)" if k == 1 else f"count sketch (k = {k})")
        ax.grid(False)
    fig.colorbar(im, ax=axes[0].tolist(), label="test RMSE", shrink=0.85)
    # constrained layout keeps the two-line suptitle above the panel titles (it overprinted them) and the colorbar
    # beside, not over, the right panel; the footnote gets its own strip at the bottom
    fig.get_layout_engine().set(rect=(0, 0.16, 1, 0.84))
    fig.suptitle(standin_title(f"Balu 2016, {figure_label}: test RMSE over (d, γ)", df.dataset.unique()), fontsize=10)
    b = float(df.bias_only_test_rmse.mean()) if "bias_only_test_rmse" in df else float("nan")
    note = search_note(df)
    foot = (f"bias-only (μ + b_u + b_i) test RMSE {b:.4f}; hatched 'bias-only' = the selected (η, λ) is no better than "
            "bias-only on validation\n" + (f"cells: mean ± 1 standard error over {n_splits} random splits"
                                             if n_splits > 1 else "one split: no error (n_splits = 1 at this profile)"))
    fig.text(0.01, 0.005, foot + (f"\nsearch: {note}" if note else ""), fontsize=7, va="bottom", ha="left")
    return fig
