"""Balu 2016, Figure 4.4: the dynamic setting — one pass over the training data, test RMSE against model size, EachMovie.

Regular factorization uses d_r ∈ {1, …, 32}; the two sketches keep d_s = 32 and match its space with γ = 32/d_r
(eq. 4.9), so all three have the same number of float32 cells at every point. (η, λ) are tuned on validation per
point. The thesis: "the performance of count sketch is better than other approaches for d_r > 7". Measured: mean over
d_r ≥ 8 of RMSE(count sketch) − min(RMSE(regular), RMSE(feature hashing)) (claimed < 0).

Which claim: the thesis's is about EachMovie (``balu-4.1.5.4-cs-best-one-pass-eachmovie``, a stand-in here, never
judged); a run on real ML-100K (``ci``, ``paper``) measures our counterpart (``…-ml-100k``). Guards: kind
*trained-model* by ``cells_not_degenerate`` (the share of the points d_r ≥ 8 where no method's selection is
degenerate); kind *tuned* by ``cells_off_grid_edge`` (:mod:`._balu_ch4_guards`), the share of those points where the
two models the comparison reads — count sketch and the better of regular and feature hashing — both selected (η, λ)
inside what their search evaluated (a share, as ``cells_not_degenerate``; the claim asks ≥ 0.9). Claims over seeds: each
fresh seed is the whole figure again on new splits (:func:`fresh_seeds`; see :mod:`.balu_fig4_3` for why not
``nb.replicate``).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claims import Measurement
from ...outputs import attach
from ...plotting import figure, standin_title
from ...sketch.runs import load, make_splits
from . import _balu_ch4_guards, _balu_ch4_runs
from ._balu_ch4_plot import bias_line, degenerate_strip, footnote, line_with_bars, method_look
from .balu_table4_2 import METHOD_LABELS

# dataset loaded -> claim measured (the thesis's claim is about EachMovie; ML-100K runs measure our counterpart)
CLAIMS = {"eachmovie": "balu-4.1.5.4-cs-best-one-pass-eachmovie", "ml-100k": "balu-4.1.5.4-cs-best-one-pass-ml-100k"}
CLAIM = CLAIMS["eachmovie"]


def configs_for(params: dict) -> list[dict]:
    ds = int(params["d_sketch"])
    out = []
    for dr in params["d_regular"]:
        for m in params["methods"]:
            if m == "regular":
                out.append({"method": m, "d": int(dr), "gamma": 1.0, "d_r": int(dr)})
            else:
                out.append({"method": m, "d": ds, "gamma": ds / float(dr), "d_r": int(dr)})
    return out


def run(params: dict) -> pd.DataFrame:
    r = load(params)
    return run_on(r, make_splits(r, params), params)


def run_on(r, splits: list, params: dict) -> pd.DataFrame:
    """The figure (search, refits, claim) on the given splits of the ratings ``r``."""
    # through the result cache: a run stopped by its time budget resumes from the runs it finished
    df = _balu_ch4_runs.run_configs(configs_for(params), splits, params, r)
    df["dataset"] = r.source.label
    df["real"] = r.source.real
    mean = df.groupby(["d_r", "method"]).test_rmse.mean().unstack("method")
    meas = []
    if {"count_sketch", "regular", "feature_hashing"} <= set(mean.columns):
        big = mean[mean.index >= 8]
        if len(big):
            gap = big["count_sketch"] - big[["regular", "feature_hashing"]].min(axis=1)
            deg = df[df.d_r >= 8].groupby("d_r").degenerate.any()  # a point where any method learned nothing
            other = big[["regular", "feature_hashing"]].idxmin(axis=1)  # the side the comparison reads per d_r
            read = df[(df.d_r >= 8) & ((df.method == "count_sketch") | (df.method == df.d_r.map(other)))]
            claim = _balu_ch4_runs.claim_for(CLAIMS, r, "eachmovie")
            meas.append(Measurement(claim, float(gap.mean()), r.source.label, r.source.real,
                                    note="one pass; mean over d_r >= 8 of RMSE(cs) - min(RMSE(regular), RMSE(fh)); "
                                         f"{int(deg.sum())} of {len(deg)} of those points have a degenerate selection "
                                         "(val RMSE = bias-only)",
                                    guards={"cells_not_degenerate": float(1.0 - deg.mean()),
                                            "cells_off_grid_edge": _balu_ch4_guards.cells_off_grid_edge(
                                                read, ["d_r", "method"], cell=["d_r"])}))
    return attach(df, sources=[r.source], measurements=meas)


fresh_seeds = _balu_ch4_runs.FreshSeeds.whole_figure(run_on)  # the claims at 5 fresh seeds


def plot(df: pd.DataFrame, params: dict):
    fig, axes = figure(nrows=2, width=5.8, height=2.2, sharex=True, gridspec_kw={"height_ratios": [3.2, 1]})
    ax, strip = axes[0][0], axes[1][0]
    rows = []
    for m, g in df.groupby("method", sort=False):
        sizes = sorted(g.model_bytes.unique())
        line_with_bars(ax, np.array(sizes) / 1024, [g[g.model_bytes == b].test_rmse for b in sizes],
                       label=METHOD_LABELS.get(m, m), **method_look(m))
        if "degenerate" in g:
            rows.append((m, np.array(sizes) / 1024, g.groupby("model_bytes").degenerate.any().reindex(sizes).values))
    ax.set_xscale("log", base=2)
    ax.set_ylabel("test RMSE after one pass")
    ax.ticklabel_format(axis="y", useOffset=False)
    bias_line(ax, df)
    ax.set_title(standin_title(f"Balu 2016, Figure 4.4: one pass, d_r = 1..32 vs d_s = {params['d_sketch']}",
                               df.dataset.unique()), fontsize=9)
    if rows:
        degenerate_strip(strip, rows[0][1], [(m, f) for m, _, f in rows], METHOD_LABELS)
    else:
        strip.set_axis_off()
    strip.set_xlabel("model size (KiB of float32 cells)")
    footnote(fig, df, legend_axes=[ax])
    return fig
