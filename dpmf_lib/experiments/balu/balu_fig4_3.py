"""Balu 2016, Figure 4.3: convergence — test RMSE after every epoch of regular factorization, count sketch (k = 4)
and feature hashing in the setting of Table 4.2 (d = 32, γ = 1: the three take the same space), MovieLens 10M.

(η, λ) come from the line search on validation RMSE after the last epoch; the curve is that of the chosen model,
averaged over splits. The thesis: "convergence of count sketch is faster than the other two algorithms". Measured:
mean over the first ``early_epochs`` epochs of RMSE(count sketch) − RMSE(regular) (claimed < 0).

Guards (:mod:`._balu_ch4_guards`), of the two models the claim compares (count sketch and regular; feature hashing is
drawn, not compared): ``selection_off_grid_edge``, both selected (η, λ) inside what their search evaluated (kind
*tuned*), and ``gain_over_bias_only``, the smaller gain of the two trained models (their test RMSE after the last
epoch) over the bias-only model (kind *trained-model*): the early epochs are the same models on their way, and a
model that never beats bias-only has no convergence to compare.

Which claim: the thesis's is about ML-10M (``balu-4.1.5.4-cs-converges-faster-ml-10m``, a stand-in here, never
judged); a run on real ML-100K (``ci``, ``paper``) measures our counterpart (``…-ml-100k``).

Claims over seeds (:func:`fresh_seeds`): each fresh seed is the whole figure again — search and refits — on
``claim_splits`` new random splits whose split seeds are distinct from the full run's and from every other fresh
seed's (:class:`~dpmf_lib.experiments.balu._balu_ch4_runs.FreshSeeds`). ``nb.replicate(run)`` would re-run at seed + 1, whose
splits are the full run's splits 1, 2, … shifted by one: consecutive seeds would share all but one split, and the
interval over seeds would be far too narrow.
"""

from __future__ import annotations

import pandas as pd

from ...claims import Measurement
from ...outputs import attach
from ...plotting import figure, standin_title
from ...sketch.runs import load, make_splits
from . import _balu_ch4_guards, _balu_ch4_runs
from ._balu_ch4_plot import bias_line, footnote, line_with_bars, method_look
from .balu_table4_2 import METHOD_LABELS

# dataset loaded -> claim measured (the thesis's claim is about ML-10M; ML-100K runs measure our counterpart)
CLAIMS = {"ml-10m": "balu-4.1.5.4-cs-converges-faster-ml-10m", "ml-100k": "balu-4.1.5.4-cs-converges-faster-ml-100k"}
CLAIM = CLAIMS["ml-10m"]


def run(params: dict) -> pd.DataFrame:
    r = load(params)
    return run_on(r, make_splits(r, params), params)


def run_on(r, splits: list, params: dict) -> pd.DataFrame:
    """The figure (search, refits, claim) on the given splits of the ratings ``r``."""
    configs = [{"method": m, "d": params["d"], "gamma": params["gamma"]} for m in params["methods"]]
    # through the result cache: a run stopped by its time budget resumes from the runs it finished
    res = _balu_ch4_runs.run_configs(configs, splits, params, r, track=("test",))
    rows = []
    for _, row in res.iterrows():
        for h in row["history"]:
            rows.append({"method": row["method"], "d": row["d"], "gamma": row["gamma"], "k": row["k"], "w": row["w"],
                         "eta": row["eta"], "lam": row["lam"], "split": row["split"], "epoch": h["epoch"],
                         "eta_t": h["eta_t"], "train_loss": h["train_loss"], "test_rmse": h["test_rmse"],
                         "bias_only_test_rmse": row["bias_only_test_rmse"], "degenerate": row["degenerate"],
                         "search_refined": row["search_refined"], "eta_on_edge": row["eta_on_edge"],
                         "lam_on_edge": row["lam_on_edge"]})
    df = pd.DataFrame(rows)
    df["dataset"] = r.source.label
    df["real"] = r.source.real
    meas = []
    curve = df.groupby(["method", "epoch"]).test_rmse.mean().unstack("method")
    if {"count_sketch", "regular"} <= set(curve.columns):
        early = curve.iloc[: int(params["early_epochs"])]
        claim = _balu_ch4_runs.claim_for(CLAIMS, r, "ml-10m")
        compared = res[res.method.isin(["count_sketch", "regular"])]
        meas.append(Measurement(claim, float((early["count_sketch"] - early["regular"]).mean()), r.source.label,
                                r.source.real, note=f"mean over epochs 1..{params['early_epochs']} of "
                                                    "RMSE(count sketch) - RMSE(regular)",
                                guards=_balu_ch4_guards.compared(compared, ["method"])))
    return attach(df, sources=[r.source], measurements=meas)


fresh_seeds = _balu_ch4_runs.FreshSeeds.whole_figure(run_on)  # the claims at 5 fresh seeds


def plot(df: pd.DataFrame, params: dict):
    from matplotlib.ticker import MaxNLocator

    fig, axes = figure(width=5.6, height=4.0)
    ax = axes[0][0]
    for m, g in df.groupby("method", sort=False):
        ep = sorted(g.epoch.unique())
        line_with_bars(ax, ep, [g[g.epoch == e].test_rmse for e in ep], label=METHOD_LABELS.get(m, m), ms=4,
                       **method_look(m))
    ax.set_xlabel("epoch")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("test RMSE")
    ax.ticklabel_format(axis="y", useOffset=False)
    bias_line(ax, df)
    ax.set_title(standin_title(f"Balu 2016, Figure 4.3: convergence, d = {params['d']}, γ = {params['gamma']}",
                               df.dataset.unique()), fontsize=9)
    footnote(fig, df.drop_duplicates(["method", "split"]), legend_axes=[ax])
    return fig
