"""PNBM paper, Figure 3: DPSGD-PNBM vs DPPS-PNBM at rating level.

DPSGD-PNBM is ε-DP per rating; DPPS-PNBM is ε_user-DP per user, and the paper compares it at the *average* rating
level x = ε_user / τ. For every x on the axis we run DPSGD-PNBM at ε = x and DPPS-PNBM at ε_user = x·τ (τ = 200), each
with its paper grid (section 5.1) and best-of-grid selection. Note: "average rating level" is the paper's framing; a
user-level ε of x·τ is not an x-DP guarantee for a single rating in general (group privacy runs the other way).

Claims over seeds (:func:`rerun_selected`, our choice): the claims' seeds
(:meth:`SelectedRerun.replicate <dpmf_lib.experiments.pnbm._pnbm_common.SelectedRerun.replicate>`) re-evaluate only the
configurations the first seed selected for the claim's inputs (:func:`claim_inputs`: DPSGD-PNBM and DPPS-PNBM at x =
1), on the same folds, at the new seed, and :func:`measurements` computes the claims from them exactly as in
:func:`run`. The interval over seeds is then the seed-to-seed spread (DP noise, initialisation, minibatches) of the
selected configuration, free of the winner's curse of re-selecting on the test folds at every seed, and the claim
values come from fresh seeds seed + 1 … seed + n, not from the first seed, whose value made the selection
(SelectedRerun.replicate); the selection itself is made once (first seed) and is not replicated. Details:
:mod:`dpmf_lib.experiments.pnbm._pnbm_common`.

Chain guards (:data:`dpmf_lib.verdicts.KINDS`, kind ``chain``), recorded at every seed: ``chain_moved`` (the selected
DPPS-PNBM rows, mean over folds) and ``chain_split_rhat`` / ``chain_ess`` of the selected DPPS-PNBM configuration at
x = 1 only: its released chain on the first fold beside ``n_chains − 1`` independent chains from wider
data-independent starts (:func:`~dpmf_lib.experiments.pnbm._pnbm_common.chain_rows`). The released sample stays the
first chain's.
"""

from __future__ import annotations

import pandas as pd

from ...claims import Measurement
from ...nbm import runs
from ...plotting import figure, standin_title
from ._pnbm_common import GridSpec, SelectedRerun, full_run
from .pnbm_fig1 import pnbm_fixed, pnbm_grid
from .pnbm_fig2 import dpps_fixed, dpps_grid, note_below

CLAIM_DPPS_DPSGD = "pnbm-5.2-dpps-beats-dpsgd-rating-level-x1"


def specs(ds: str, p: dict) -> list[GridSpec]:
    """Both grid searches of the figure on ``ds``: DPSGD-PNBM at ε = x, DPPS-PNBM at ε_user = x·τ."""
    return [GridSpec("dpsgd-pnbm", [float(x) for x in p["xs"]], pnbm_grid(p), pnbm_fixed(p), p["fold_halving_keep"]),
            GridSpec("dpps-pnbm", [float(x) * p["tau"] for x in p["xs"]], dpps_grid(p), dpps_fixed(p),
                     p["dpps_halving_keep"])]


def chain_inputs(p: dict) -> list[tuple]:
    """The DPPS (method, ε) whose selected configuration gets the extra chains of the chain guards."""
    return [(m, e) for m, e in claim_inputs(p) if m == "dpps-pnbm"]


def claim_inputs(p: dict) -> list[tuple]:
    """The (method, ε) whose selected configuration the claim and its guards read."""
    return [("dpsgd-pnbm", 1.0), ("dpps-pnbm", 1.0 * p["tau"])] if 1.0 in [float(x) for x in p["xs"]] else []


def finish(agg: pd.DataFrame, p: dict, notes: list) -> pd.DataFrame:
    agg["x"] = agg["epsilon"].where(agg.method == "dpsgd-pnbm", agg["epsilon"] / p["tau"])
    agg["folds"] = ",".join(map(str, p["folds"]))
    agg["note"] = "; ".join(notes)
    return agg


def measurements(agg: pd.DataFrame, p: dict, datasets) -> list[Measurement]:
    """The claim of Figure 3 from the selected rows of ``agg`` — the one function of the full run and the replicate
    run (:func:`rerun_selected`). ``k_grid_interior`` reads the selected K, which the replicate run keeps."""
    meas = []
    for ds in datasets:
        if 1.0 in [float(x) for x in p["xs"]]:
            v = runs.best_rmse(agg, ds, "dpsgd-pnbm", 1.0) - runs.best_rmse(agg, ds, "dpps-pnbm", 1.0 * p["tau"])
            k = runs.selected_config(agg, ds, "dpsgd-pnbm", 1.0).get("K", float("nan"))
            note = f"folds {p['folds']}, profile {p['profile']}, DPPS T={p['T']}; selected on test folds"
            ch = runs.chain_guards(agg, ds, "dpps-pnbm", 1.0 * p["tau"])
            meas.append(Measurement(CLAIM_DPPS_DPSGD, v, ds, runs._dataset(ds).source.real, note,
                                    guards={"chain_moved": runs.chain_movement(agg, ds, "dpps-pnbm", 1.0 * p["tau"]),
                                            "chain_split_rhat": ch["chain_split_rhat"], "chain_ess": ch["chain_ess"],
                                            "gain_over_bias_only": runs.gain_over_item_means(
                                                agg, ds, p["folds"], [("dpsgd-pnbm", 1.0),
                                                                      ("dpps-pnbm", 1.0 * p["tau"])]),
                                            "k_grid_interior": runs.grid_interior(k, p["pnbm_K"], domain_min=1)}))
    return meas


def run(params: dict) -> pd.DataFrame:
    """Both grids of :func:`specs`, best-of-grid per (method, x), the chain guards' chains (:func:`chain_inputs`),
    the claim by :func:`measurements` (:func:`~dpmf_lib.experiments.pnbm._pnbm_common.full_run`)."""
    return full_run(params, specs, finish, measurements, chains=chain_inputs)


def rerun_selected(df: pd.DataFrame) -> SelectedRerun:
    """``params -> DataFrame`` for :meth:`~dpmf_lib.outputs.NotebookRun.replicate`: only the two configurations ``df``
    (the full run at the first seed) selected at x = 1, re-evaluated on the same folds at ``params['seed']``, measured
    by :func:`measurements`, with the chain guards' chains. The selection is not replicated (see
    :mod:`dpmf_lib.experiments.pnbm._pnbm_common`)."""
    return SelectedRerun(df, specs, claim_inputs, finish, measurements, chains=chain_inputs)


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import legend_below, references, series, zoom_to

    datasets = list(df.dataset.unique())
    fig, axes = figure(ncols=1, nrows=max(1, len(datasets)), width=5.6, height=3.6)
    for r, ds in enumerate(datasets):
        ax = axes[r][0]
        sel = df[(df.dataset == ds) & df.selected]
        nf = int(sel.n_folds.max()) if len(sel) else 1
        compared = []
        for m, role, lab in (("dpsgd-pnbm", "paper", "DPSGD-PNBM (ε = x per rating)"),
                             ("dpps-pnbm", "compared", "DPPS-PNBM (ε = x·τ per user)")):
            g = sel[sel.method == m].sort_values("x")
            yerr = g.rmse_std.fillna(0) if nf > 1 else None  # one fold: no spread to show
            series(ax, g.x, g.rmse, role, lab, yerr=yerr, ms=4)
            compared += list(g.rmse - (yerr if yerr is not None else 0))
            compared += list(g.rmse + (yerr if yerr is not None else 0))
        st = sel[sel.method == "dpps-pnbm"]
        refs = []
        if "rmse_start" in st and st.rmse_start.notna().any():
            refs.append(("DPPS start S⁰ (data-independent, no training)", float(st.rmse_start.dropna().iloc[0])))
        zoom_to(ax, compared + [v for _, v in refs])
        references(ax, refs)
        ax.set_xscale("log")
        ax.set_xlabel("x: stated rating-level ε (DPPS: average, ε_user / τ); no ε holds as run")
        ax.set_ylabel(f"test RMSE (mean over {nf} folds)" if nf > 1 else f"test RMSE (fold u{df.folds.iloc[0]})")
        ax.set_title(f"{ds} (folds {df.folds.iloc[0]})", fontsize=9)
    fig.suptitle(standin_title("PNBM paper, Figure 3: DPSGD-PNBM vs DPPS-PNBM at rating level", datasets),
                 fontsize=10)
    fig.tight_layout()
    note_below(fig, legend_below(fig, axes, ncol=2), "Neither ε holds as run (privacy ledger): both predictors also "
               "release the item means r̄, computed without noise.")
    return fig
