"""Balu 2016, Figures 4.7 and 4.8: data-clipped factorization (section 4.2.1) — test RMSE (4.7) and the
KL-divergence leakage of eq. 4.15 (4.8) against the clipping threshold ∈ {2, 4, 8, ∞} (the thesis calls it ε), for
d ∈ {8, 16, 32}, MovieLens.

Clipping: a rating whose loss ½(r − r̂)² on mean-corrected ratings exceeds the threshold is skipped for that epoch
(4.2.1 states "L ≤ ε"; 4.2.2 writes the bound on (r − r̂)² — we follow 4.2.1 and the loss of eq. 2.7). Count sketch
(k = 4) at the space gains ``gammas`` and regular factorization run with the same thresholds ("regular MF, clipped"
in the CSV and legends); regular at ∞ ("regular MF, unclipped") is "regular
factorization without any differential privacy mechanism". KLD (4.15): Gaussians fitted to the prediction errors r̂ − r
on the training and the test set. The thesis uses T = 100 epochs here and η_t = η/(1 + b·t/T); b is not given (we use 1).

No finite ε holds for this "data-clipped privacy": clipping adds no noise — the same data and seed give a bit-identical
release (tests/test_dp_release_properties.py checks it), so a neighbouring dataset that changes the release is
distinguished with certainty. The parameter is therefore called a clipping threshold here (params ``clip_grid``, CSV
column ``clip_threshold``, axis labels), not ε; the CSV's ``privacy_guarantee`` column says "none".
"""

from __future__ import annotations

import math

import pandas as pd
from scipy import stats

from ..claims import Measurement
from ..outputs import attach
from ..plotting import figure, standin_title
from ..sketch.runs import as_clip, load, make_splits
from . import _balu_ch4_runs
from ._balu_ch4_plot import line_with_bars, mean_se

CLAIM_RMSE = "balu-4.2.4.2-rmse-falls-with-eps-ml-1m"
CLAIM_KLD = "balu-4.2.4.3-kld-grows-with-eps-ml-1m"
CLAIM_KLD_REG = "balu-4.2.4.3-regular-leaks-more-ml-1m"
CLAIM_KLD_SMALL = "balu-4.2.4.3-kld-below-eps-ml-1m"  # id kept; it compares KLD with the clipping threshold
NO_GUARANTEE = "none: clipping adds no noise, no finite epsilon"


def configs_for(params: dict) -> list[dict]:
    out = []
    for d in params["d_grid"]:
        for clip in params["clip_grid"]:
            for m in params["methods"]:
                gammas = params["gammas"] if m != "regular" else [1.0]
                for g in gammas:
                    out.append({"method": m, "d": int(d), "gamma": float(g), "k": 4 if m == "count_sketch" else None,
                                "clip": as_clip(clip)})
    return out


REGULAR_CLIPPED = "regular MF, clipped"
REGULAR_UNCLIPPED = "regular MF, unclipped (thesis's baseline)"


def series_name(method: str, gamma: float, clip: float) -> str:
    """The legend / CSV name of a run. Regular MF trained with a finite clipping threshold is *clipped* regular MF,
    not the thesis's "regular factorization without any differential privacy mechanism" (which is the ∞ point)."""
    if method == "regular":
        return REGULAR_UNCLIPPED if clip == math.inf else REGULAR_CLIPPED
    return f"{method} γ={gamma:g}"


def within_spearman(cells: pd.DataFrame, value: str, sign: float = 1.0) -> float:
    """Mean over (d, γ) series of the Spearman correlation between the clipping threshold (∞ ranked last) and
    ``sign · value``."""
    rhos = []
    for _, g in cells.groupby(["d", "gamma"]):
        if g.clip_threshold.nunique() > 1 and g[value].nunique() > 1:
            rhos.append(stats.spearmanr(g.clip_threshold.replace(math.inf, 1e300), sign * g[value]).statistic)
    return float(sum(rhos) / len(rhos)) if rhos else float("nan")


def run(params: dict) -> pd.DataFrame:
    r = load(params)
    splits = make_splits(r, params)
    # through the result cache: Figure 4.8 (the same runs, plotted as KLD) reads them from there
    df = _balu_ch4_runs.run_configs(configs_for(params), splits, params, r, with_kld=True)
    df["dataset"] = r.source.label
    df["real"] = r.source.real
    df = df.rename(columns={"clip": "clip_threshold"})
    df["privacy_guarantee"] = NO_GUARANTEE
    df["series"] = [series_name(m, g, c) for m, g, c in zip(df.method, df.gamma, df.clip_threshold)]
    lab, real = r.source.label, r.source.real
    cs = (df[df.method == "count_sketch"].groupby(["d", "gamma", "clip_threshold"])[["test_rmse", "kld"]].mean()
          .reset_index())
    meas = []
    if cs.clip_threshold.nunique() > 1:
        meas.append(Measurement(CLAIM_RMSE, within_spearman(cs, "test_rmse", sign=-1.0), lab, real,
                                note="mean over count-sketch (d, gamma) series of Spearman(clipping threshold, "
                                     "-test RMSE)"))
        meas.append(Measurement(CLAIM_KLD, within_spearman(cs, "kld"), lab, real,
                                note="mean over count-sketch (d, gamma) series of Spearman(clipping threshold, KLD)"))
    reg = df[(df.method == "regular") & (df.clip_threshold == math.inf)].groupby("d").kld.mean()
    if len(reg) and len(cs):
        fin = cs[cs.clip_threshold < math.inf].groupby("d").kld.mean()
        both = fin.index.intersection(reg.index)
        if len(both):
            meas.append(Measurement(CLAIM_KLD_REG, float((reg[both] > fin[both]).mean()), lab, real,
                                    note="share of d where KLD(regular, no clipping) > mean KLD of clipped count "
                                         "sketch"))
        finite = cs[cs.clip_threshold < math.inf]
        if len(finite):
            meas.append(Measurement(CLAIM_KLD_SMALL, float((finite.kld / finite.clip_threshold).max()), lab, real,
                                    note="max over clipped count-sketch cells of KLD / clipping threshold (not a "
                                         "DP epsilon: no finite epsilon holds)"))
    return attach(df, sources=[r.source], measurements=meas)


def _plot(df: pd.DataFrame, params: dict, value: str, ylabel: str, label: str):
    ds = sorted(df.d.unique())
    fig, axes = figure(ncols=len(ds), width=3.8, height=3.6, sharey=True)
    finite = sorted(e for e in df.clip_threshold.unique() if e < math.inf)
    inf_at = (finite[-1] * 2) if finite else 1.0
    for ax, d in zip(axes[0], ds):
        g = df[df.d == d]
        for s, gs in g.groupby("series", sort=False):
            per = [v for _, v in gs.groupby("clip_threshold")[value]]  # one value per split at each threshold
            thr = sorted(gs.clip_threshold.unique())
            x = [e if e < math.inf else inf_at for e in thr]
            if s == REGULAR_UNCLIPPED:  # one point (no threshold): drawn as a reference level across the panel
                m, h = mean_se(per[0])
                ax.axhline(m, color="k", ls=":", lw=1.2, label=s)
                ax.errorbar(x, [m], yerr=[h] if h else None, marker="*", ms=9, color="k", ls="none", capsize=3)
                continue
            line_with_bars(ax, x, per, label=s, ls="--" if s == REGULAR_CLIPPED else "-")
        if value == "test_rmse" and "bias_only_test_rmse" in g:
            ax.axhline(float(g.groupby("split").bias_only_test_rmse.first().mean()), color="0.5", ls="--", lw=1,
                       label="bias only (μ + b_u + b_i)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(finite + [inf_at], [f"{e:g}" for e in finite] + ["∞"])
        ax.set_xlabel("clipping threshold on ½(r − r̂)²\n(thesis: \"ε\"; no noise, no finite ε)")
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.set_title(f"d = {d}")
    axes[0][0].set_ylabel(ylabel)
    handles, labels = axes[0][-1].get_legend_handles_labels()
    # below the panels: inside one it covered a curve
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(5, len(labels)), fontsize=7)
    n_splits = int(df.split.nunique()) if "split" in df.columns else 1
    bars = (f"mean ± 1 standard error over {n_splits} random splits" if n_splits > 1
            else "one split: no error bars (n_splits = 1 at this profile)")
    fig.suptitle(standin_title(f"Balu 2016, {label}\n{bars}", df.dataset.unique()), fontsize=10)
    fig.tight_layout()
    return fig


def plot(df: pd.DataFrame, params: dict):
    return _plot(df, params, "test_rmse", "test RMSE",
                 "Figure 4.7: RMSE vs clipping threshold (data-clipped factorization)")
