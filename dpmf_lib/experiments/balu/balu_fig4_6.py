"""Balu 2016, Figure 4.6: the λ chosen on validation for each (d, γ) of the count sketch (k = 4), MovieLens 1M.

The thesis: "The optimal value is often lower than 10⁻² ... The λ value diminishes with d ... λ lowers with increase
in γ and it is true even for a fixed d". Same sweep as Figure 4.1 restricted to k = 4 with a finer λ grid.

Measured over the *live* cells only: a cell whose selection is degenerate on the split its λ
was chosen on (the first; validation RMSE within 5e-4 of the bias-only model — any larger λ ties there, so its λ is
not a choice) is left out. Leaving cells out unbalances the (d, γ) grid: at ``paper`` on ML-100K the degenerate cells
cluster where d and γ are both large, so among the live cells d and γ are negatively correlated and a correlation
pooled over all live cells would credit γ with the λ–d trend (and the reverse: on the 10 × 10 grid with λ depending
on d only and cells with index(d) + index(γ) ≥ 12 degenerate, the pooled Spearman(γ, λ) is −0.37). The thesis's γ
statement is within d ("even for a fixed d"), so each claim is a mean of within-series correlations
(:func:`within_series`, the shape of :func:`dpmf_lib.experiments.balu.balu_fig4_7.within_spearman`):

- γ claim: the mean over d of Spearman(γ, λ) over the live cells of that d (claimed < 0);
- d claim: the mean over γ of Spearman(d, λ) over the live cells of that γ (claimed > 0).

A series with fewer than 3 live cells, or whose live cells all chose the same λ (Spearman undefined), gives no
correlation and is left out of the mean; no series left: NaN. Guards: ``live_cells`` ≥ 30; ``cells_off_grid_edge`` ≥
0.5, the share of the live cells whose λ is off the edge of what the search evaluated (``lam_on_edge`` of
:func:`dpmf_lib.sketch.runs.search_flags`, which counts the stage-2 values: a λ at the stage-1 grid's end that stage 2
bracketed is not on the edge); and ``d_series_defined`` (γ claim) / ``gamma_series_defined`` (d claim) ≥ 0.5, the
share of the d values (γ values) whose series gave a defined correlation — a mean resting on a few series, the others
flat or all but dead, is no statement about "a fixed d". A share of cells would always fail at ``paper`` on ML-100K
(a large share of the cells is degenerate; the figure states it), so there is none.

Which claims: the thesis's are about ML-1M (``…-ml-1m``); a run on real ML-100K (``ci``, ``paper``) measures our
ML-100K counterparts (``…-ml-100k``).

Claims over seeds (:func:`fresh_seeds`, our choice): the claims are about the selection itself, so re-fitting the
selected (η, λ) at a fresh seed would give the same λ every time. At each of 5 fresh seeds each (d, γ) cell instead
re-selects λ on ``claim_splits`` (1) new random split, over the stage-1 λ grid (``lam_grid``, no stage 2) at the η
the first seed's search selected for that cell (9 runs per cell instead of 53); the correlations, the live cells and
the edge guard come from the same measurement function. At the first seed with ``refine = 0`` this reproduces the full
run's values exactly (tested); with stage 2 the fresh seeds choose among the half-decade grid values only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy import stats

from ...claims import Measurement
from ...outputs import attach
from ...plotting import figure, standin_title
from ...sketch.runs import degenerate_cells, search_note
from . import _balu_ch4_runs
from ._balu_ch4_plot import category_map, mean_se
from .balu_fig4_1 import _label, configs_for, sweep

# dataset loaded -> claim measured (the thesis's claims are about ML-1M; ML-100K runs measure our counterparts)
CLAIMS_GAMMA = {"ml-1m": "balu-4.1.5.5-lambda-falls-with-gamma-ml-1m",
                "ml-100k": "balu-4.1.5.5-lambda-falls-with-gamma-ml-100k"}
CLAIMS_D = {"ml-1m": "balu-4.1.5.5-lambda-grows-with-d-ml-1m", "ml-100k": "balu-4.1.5.5-lambda-grows-with-d-ml-100k"}
CLAIM_GAMMA, CLAIM_D = CLAIMS_GAMMA["ml-1m"], CLAIMS_D["ml-1m"]


def best_lambda(df: pd.DataFrame) -> pd.DataFrame:
    """Median over splits of the chosen λ per (d, γ)."""
    return df.groupby(["d", "gamma"]).lam.median().reset_index()


def search_cells(df: pd.DataFrame) -> pd.DataFrame:
    """Per (d, γ) on the split the search ran on (the first): the chosen λ, whether that selection is degenerate and
    whether λ sits on the edge of what the search evaluated (stage 2 included)."""
    first = df[df.split == df.split.min()]
    return (first.groupby(["d", "gamma"])
            .agg(lam=("lam", "first"), degenerate=("degenerate", "any"), lam_on_edge=("lam_on_edge", "any"))
            .reset_index())


def within_series(cells: pd.DataFrame, by: str, x: str) -> tuple[float, int]:
    """(mean over the values of ``by`` of the Spearman correlation of ``x`` with the chosen λ over the ``cells`` of
    that value, number of series that gave one). A series with fewer than 3 cells, a constant ``x`` or a constant λ
    (Spearman undefined: no ranks to correlate) is left out; none left: NaN."""
    rhos = []
    for _, g in cells.groupby(by):
        if len(g) < 3 or g[x].nunique() < 2 or g.lam.nunique() < 2:
            continue
        rhos.append(float(stats.spearmanr(g[x], g.lam).statistic))
    return (float(np.mean(rhos)) if rhos else float("nan")), len(rhos)


def measure(df: pd.DataFrame, r) -> list:
    cells = search_cells(df)
    live = cells[~cells.degenerate]
    common = {"live_cells": float(len(live)),
              "cells_off_grid_edge": float(1.0 - live.lam_on_edge.mean()) if len(live) else float("nan")}
    n_d, n_g = int(cells.d.nunique()), int(cells.gamma.nunique())
    rho_g, k_g = within_series(live, "d", "gamma")
    rho_d, k_d = within_series(live, "gamma", "d")
    note = (f"over the {len(live)} of {len(cells)} (d, gamma) cells whose selection is not degenerate on the search "
            f"split ({int(cells.degenerate.sum())} left out; {int(live.lam_on_edge.sum())} of the others chose lambda "
            "on the edge of the evaluated values); a series with < 3 live cells or one lambda is left out")
    lab, real = r.source.label, r.source.real
    return [Measurement(_balu_ch4_runs.claim_for(CLAIMS_GAMMA, r, "ml-1m"), rho_g, lab, real,
                        note=f"mean over d of the within-d Spearman(gamma, chosen lambda), {k_g} of {n_d} d values "
                             "with a defined correlation, " + note,
                        guards={**common, "d_series_defined": k_g / n_d if n_d else float("nan")}),
            Measurement(_balu_ch4_runs.claim_for(CLAIMS_D, r, "ml-1m"), rho_d, lab, real,
                        note=f"mean over gamma of the within-gamma Spearman(d, chosen lambda), {k_d} of {n_g} gamma "
                             "values with a defined correlation, " + note,
                        guards={**common, "gamma_series_defined": k_d / n_g if n_g else float("nan")})]


def run(params: dict) -> pd.DataFrame:
    df, r = sweep(params)
    return attach(df, sources=[r.source], measurements=measure(df, r))


def reselect_lambda(df: pd.DataFrame, params: dict, r, splits: list) -> pd.DataFrame:
    """The claims at a fresh seed: each cell of the full run ``df`` re-selects λ over the stage-1 grid ``lam_grid``
    (no stage 2) at the η it selected, on ``splits`` (see
    :class:`~dpmf_lib.experiments.balu._balu_ch4_runs.FreshSeeds`)."""
    sel = _balu_ch4_runs.selected(df, ["k", "d", "gamma"])
    configs = [{**c, "search": True, "eta_grid": [sel[(c["k"], c["d"], c["gamma"])][0]],
                "lam_grid": [float(x) for x in params["lam_grid"]], "refine": 0.0} for c in configs_for(params)]
    out = _label(_balu_ch4_runs.run_configs(configs, splits, params, r), r)
    return attach(out, sources=[r.source], measurements=measure(out, r))


def fresh_seeds(df: pd.DataFrame, params: dict) -> _balu_ch4_runs.FreshSeeds:
    """``fresh_seeds(df, nb.params).replicate(nb)``: the claims at 5 fresh seeds (module docstring)."""
    return _balu_ch4_runs.FreshSeeds(df, params, reselect_lambda)


#: above this many (d, γ) cells a cell shows its λ only (as Figure 4.1's heatmap)
CROWDED_CELLS = 36


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import OKABE_ITO

    fig, axes = figure(ncols=2, width=4.6, height=4.8, layout="constrained", gridspec_kw={"width_ratios": [1, 0.8]})
    ax = axes[0][0]
    grid = best_lambda(df).pivot(index="gamma", columns="d", values="lam").sort_index(ascending=False)
    with np.errstate(divide="ignore"):
        logv = np.log10(grid.values.astype(float))
    im = ax.imshow(logv, cmap="magma", aspect="auto")
    xt, yt = [f"{c:g}" for c in grid.columns], [f"{g:.3g}" for g in grid.index]
    ax.set_xticks(range(grid.shape[1]), xt)
    ax.set_yticks(range(grid.shape[0]), yt)
    deg = degenerate_cells(df, ["gamma", "d"]).unstack("d").reindex(index=grid.index, columns=grid.columns)
    deg = deg.fillna(False).values
    cells = search_cells(df)
    on_search = (cells.set_index(["gamma", "d"]).degenerate.unstack("d")
                 .reindex(index=grid.index, columns=grid.columns).fillna(False).values.astype(bool))
    n_splits = int(df.split.nunique()) if "split" in df.columns else 1
    rm = df.groupby(["gamma", "d"]).test_rmse.agg(lambda v: mean_se(v)[0]).unstack("d")
    rs = df.groupby(["gamma", "d"]).test_rmse.agg(lambda v: mean_se(v)[1]).unstack("d")
    rm, rs = (t.reindex(index=grid.index, columns=grid.columns).values for t in (rm, rs))
    # the thesis's 10 × 10 grid (paper) leaves a cell room for its λ only: the chosen models' RMSE goes to the
    # footnote (range) and the CSV (three lines per cell overprinted); degenerate cells in their own panel
    crowded = grid.size > CROWDED_CELLS
    for (a, b), v in np.ndenumerate(grid.values):
        # under the lambda: the chosen model's test RMSE, ± 1 standard error over splits when there are several
        rmse = "" if crowded else f"\n{rm[a, b]:.3f}" + (f"±{rs[a, b]:.3f}" if n_splits > 1 else "")
        ax.text(b, a, f"{v:.2g}" + rmse, ha="center", va="center", fontsize=5.5 if crowded else 6, color="k",
                bbox=dict(fc="w", ec="none", alpha=0.8, pad=0.8 if crowded else 1.5))
    ax.set_xlabel("d")
    ax.set_ylabel("space gain γ")
    ax.set_title("best λ (count sketch k = 4)", fontsize=9)
    ax.grid(False)
    fig.colorbar(im, ax=ax, label="log10 best λ")
    codes = np.where(on_search, 2, np.where(deg, 1, 0))
    category_map(axes[0][1], codes, ["live", "degenerate on another split only", "degenerate on the search split"],
                 ["#f2f2f2", OKABE_ITO["orange"], OKABE_ITO["vermillion"]], xt, yt,
                 "diagnostic: degenerate cells (selected\n(η, λ) no better than bias-only on validation)")
    axes[0][1].set_xlabel("d")
    fig.suptitle(standin_title("Balu 2016, Figure 4.6: best λ over (d, γ), count sketch k = 4", df.dataset.unique()),
                 fontsize=10)
    note = search_note(df)
    fig.get_layout_engine().set(rect=(0, 0.2, 1, 0.8), wspace=0.06)
    if crowded:
        spl = (f"cells: λ (searched on the first split); the chosen models' test RMSE {np.nanmin(rm):.3f}–"
               f"{np.nanmax(rm):.3f}" + (f" (mean over {n_splits} splits, 1 standard error ≤ {np.nanmax(rs):.3f})"
                                         if n_splits > 1 else "") + ", per cell in the CSV")
    else:
        spl = (f"cells: λ (searched on the first split), then the test RMSE of the chosen model, mean ± 1 standard "
               f"error over {n_splits} random splits" if n_splits > 1 else
               "cells: λ, then the chosen model's test RMSE (one split)")
    n_deg, n_all = int(cells.degenerate.sum()), len(cells)
    live = cells[~cells.degenerate]
    share = (f"{n_deg} of {n_all} cells ({n_deg / max(1, n_all):.0%}) degenerate on the search split, "
             f"{int(deg.sum())} on some split; the claims (mean within-d Spearman(γ, λ), mean within-γ\n"
             f"Spearman(d, λ)) use the {len(live)} others ({int(live.lam_on_edge.sum())} of them with λ on the edge "
             "of the evaluated values)")
    fig.text(0.01, 0.005, "degenerate: the selected (η, λ) is no better than μ + b_u + b_i on validation (any larger λ "
             "ties, so its λ is not a choice)\n" + share + "\n" + spl
             + (f"\nsearch: {note}" if note else ""), fontsize=7, va="bottom", ha="left")
    return fig
