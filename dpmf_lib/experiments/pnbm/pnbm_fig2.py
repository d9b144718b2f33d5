"""PNBM paper, Figure 2: RMSE vs ε (user level, written x·τ) — DPPS-PNBM, DPPS-MF, non-private PCC and COS.

DPPS-PNBM: SGLD (eq. 11) on the log-posterior scaled by κ = min(1, ε/(4B)), B = (5 - 1)² τ, τ = 200, one released
sample (the last state). DPPS-MF is Liu et al.'s posterior-sampling MF from :mod:`dpmf_lib.privacy` (never a second
implementation here; the grid mapping is in :func:`dpmf_lib.nbm.runs.dpps_mf_rmse`). The non-private SGLD sample
(κ = 1, same grid) and the chains' common data-independent start S⁰ (its predictor, no training: column
``rmse_start``) are drawn as reference lines: at the paper's step sizes the chains barely leave S⁰, so the SGLD line
lies on the S⁰ line; the legend gives both numbers. The number of SGLD steps T and the minibatch size L are not in the
paper (our choice, in params/pnbm_fig2.yaml).

Claims over seeds (:func:`rerun_selected`, our choice): the claims' seeds
(:meth:`SelectedRerun.replicate <dpmf_lib.experiments.pnbm._pnbm_common.SelectedRerun.replicate>`) re-evaluate only the
configurations the first seed selected for the claims' inputs (:func:`claim_inputs`: PCC, COS, DPPS-PNBM and DPPS-MF
at x = 0.1), on the same folds, at the new seed, and :func:`measurements` computes the claims from them exactly as in
:func:`run`. The interval over seeds is then the seed-to-seed spread (DP noise, initialisation, minibatches) of the
selected configuration, free of the winner's curse of re-selecting on the test folds at every seed, and the claim
values come from fresh seeds seed + 1 … seed + n, not from the first seed, whose value made the selection
(SelectedRerun.replicate); the selection itself is made once (first seed) and is not replicated. Details:
:mod:`dpmf_lib.experiments.pnbm._pnbm_common`.

Guards by kind (:data:`dpmf_lib.verdicts.KINDS`), recorded at every seed: ``gain_over_bias_only`` (the smaller test
RMSE gain of the two sides compared — the better of PCC and COS, and the DPPS sample — over item means, same folds),
``selection_off_grid_edge`` (every hyper-parameter of the DPPS configuration selected on a grid of ≥ 2 values lies
strictly inside it), ``chain_moved`` (DPPS-PNBM: the selected rows, mean over folds; DPPS-MF: its chain on the first
fold) and the chains' ``chain_split_rhat`` and ``chain_ess``: for the selected DPPS-PNBM and DPPS-MF configurations at
x = 0.1 only, their released chain on the first fold beside ``n_chains − 1`` independent chains from wider
data-independent starts, R̂ and ESS over the chains' second halves of the sample's test RMSE and its mean squared
entry (rows with method ``"chains"``, :func:`~dpmf_lib.experiments.pnbm._pnbm_common.chain_rows`). The released
sample stays the first chain's.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claims import Measurement
from ...nbm import runs
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title
from ._pnbm_common import GridSpec, SelectedRerun, run_specs, with_chains
from .pnbm_fig1 import knn_specs, sources_of

CLAIM_DPPS_KNN = "pnbm-5.2-dpps-pnbm-beats-knn-x0.1"
CLAIM_DPPSMF_KNN = "pnbm-5.2-dpps-mf-beats-knn-x0.1"


def dpps_fixed(p: dict) -> dict:
    return {"tau": p["tau"], "T": p["T"], "L": p["L"], "xi": p["xi"], "Nk": p["pnbm_Nk"], "init_high": p["init_high"]}


def dpps_grid(p: dict) -> dict:
    return {"eta1": p["dpps_eta1"], "lam": p["dpps_lam"], "rho": p["dpps_rho"]}


def dpps_mf_grid(p: dict) -> dict:
    return {"eta": p["mf_eta"], "lam": p["mf_lam"], "rho": p["mf_rho"], "d": p["mf_d"]}


def _eps(p: dict, xs) -> list[float]:
    return [float(x) * p["tau"] for x in xs]  # user-level ε = x·τ


def specs(ds: str, p: dict) -> list[GridSpec]:
    """Every grid search of the figure on ``ds``, in the order of the CSV's rows."""
    hk = p["fold_halving_keep"]
    eps = _eps(p, p["xs"])
    return knn_specs(ds, p) + [
        GridSpec("dpps-pnbm", eps, dpps_grid(p), dpps_fixed(p), hk),
        GridSpec("sgld-pnbm", [None], dpps_grid(p), dpps_fixed(p), hk),
        GridSpec("dpps-mf", eps, dpps_mf_grid(p),
                 {"xi": p["xi"], "tau": p["tau"], "rounds": p["mf_rounds"]}, hk)]


def chain_inputs(p: dict) -> list[tuple]:
    """The DPPS (method, ε) whose selected configuration gets the extra chains of the chain guards."""
    return [(m, e) for m, e in claim_inputs(p) if m in ("dpps-pnbm", "dpps-mf")]


def claim_inputs(p: dict) -> list[tuple]:
    """The (method, ε) whose selected configuration the claims and guards of this figure read."""
    out = [("pcc", None), ("cos", None)]
    if 0.1 in [float(x) for x in p["xs"]]:
        e = _eps(p, [0.1])[0]
        out += [("dpps-pnbm", e), ("dpps-mf", e)]  # dpps-pnbm's rows also carry the chain_moved guard's inputs
    return out


def finish(agg: pd.DataFrame, p: dict, notes: list) -> pd.DataFrame:
    agg["selected"] = agg["selected"].astype(bool)
    agg["x"] = agg["epsilon"] / p["tau"]
    agg["folds"] = ",".join(map(str, p["folds"]))
    agg["note"] = "; ".join(notes)
    return agg


def measurements(agg: pd.DataFrame, p: dict, datasets) -> list[Measurement]:
    """The claims of Figure 2 from the selected rows of ``agg`` — the one function of the full run and the replicate
    run (:func:`rerun_selected`)."""
    meas = []
    for ds in datasets:
        real = runs._dataset(ds).source.real
        knn = min(runs.best_rmse(agg, ds, "pcc"), runs.best_rmse(agg, ds, "cos"))
        note = f"folds {p['folds']}, profile {p['profile']}, T={p['T']}, L={p['L']}; grid selected on test folds"
        if 0.1 in [float(x) for x in p["xs"]]:
            e = _eps(p, [0.1])[0]
            # guards by kind (dpmf_lib.verdicts.KINDS): the chain moved and converged (split-R-hat and ESS over
            # chains from different starts, module docstring); every model compared beats item means; every
            # hyper-parameter selected on its grid lies inside it
            pn, mf = runs.chain_guards(agg, ds, "dpps-pnbm", e), runs.chain_guards(agg, ds, "dpps-mf", e)
            meas.append(Measurement(CLAIM_DPPS_KNN, knn - runs.best_rmse(agg, ds, "dpps-pnbm", e), ds, real, note,
                                    guards={"chain_moved": runs.chain_movement(agg, ds, "dpps-pnbm", e),
                                            "chain_split_rhat": pn["chain_split_rhat"], "chain_ess": pn["chain_ess"],
                                            "gain_over_bias_only": runs.gain_over_item_means(
                                                agg, ds, p["folds"], [("knn", None), ("dpps-pnbm", e)]),
                                            "selection_off_grid_edge": runs.selection_interior(
                                                agg, ds, "dpps-pnbm", e, dpps_grid(p))}))
            meas.append(Measurement(CLAIM_DPPSMF_KNN, knn - runs.best_rmse(agg, ds, "dpps-mf", e), ds, real, note,
                                    guards={**mf, "gain_over_bias_only": runs.gain_over_item_means(
                                                agg, ds, p["folds"], [("knn", None), ("dpps-mf", e)]),
                                            "selection_off_grid_edge": runs.selection_interior(
                                                agg, ds, "dpps-mf", e, dpps_mf_grid(p))}))
    return meas


def run(params: dict) -> pd.DataFrame:
    require_datasets(params)  # first: before any data is loaded or model trained
    p = params
    datasets, notes = runs.available(p["datasets"])
    frames = [f for ds in datasets for f in run_specs(ds, specs(ds, p), p)]
    agg = runs.select_best(pd.concat(frames, ignore_index=True))
    # movement traces of the selected chains on the first fold: rows with method "trace"
    traces = [runs.chain_traces(agg, ds, p["folds"][0], dpps_fixed(p), p["seed"]) for ds in datasets]
    agg = with_chains(pd.concat([agg, *[t for t in traces if len(t)]], ignore_index=True), p, datasets, specs,
                      chain_inputs)
    agg = finish(agg, p, notes)
    return attach(agg, sources=sources_of(datasets), measurements=measurements(agg, p, datasets))


def rerun_selected(df: pd.DataFrame) -> SelectedRerun:
    """``params -> DataFrame`` for :meth:`~dpmf_lib.outputs.NotebookRun.replicate`: only the configurations ``df``
    (the full run at the first seed) selected for the claims' inputs (:func:`claim_inputs`), re-evaluated on the same
    folds at ``params['seed']``, with the chain guards' chains (:func:`chain_inputs`), measured by
    :func:`measurements` (no movement traces: they are the figure's). The selection is not replicated (see
    :mod:`dpmf_lib.experiments.pnbm._pnbm_common`)."""
    return SelectedRerun(df, specs, claim_inputs, finish, measurements, chains=chain_inputs)


def plot(df: pd.DataFrame, params: dict):
    """Per dataset: (a) the paper's comparison (DPPS-PNBM, DPPS-MF, the non-private references at the right edge),
    (b) the diagnostic of the chains (how far S moved from its start); one legend below the panels."""
    from ...plotting import legend_below, references, series, zoom_to

    datasets = list(df.dataset.unique())
    fig, axes = figure(ncols=2, nrows=max(1, len(datasets)), width=5.0, height=3.6)
    roles = {"dpps-pnbm": "paper", "dpps-mf": "compared"}
    for r, ds in enumerate(datasets):
        ax = axes[r][0]
        _plot_traces(axes[r][1], df[(df.dataset == ds) & (df.method == "trace")], params)
        sel = df[(df.dataset == ds) & df.selected]
        nf = int(sel.n_folds.max()) if len(sel) else 1
        compared = []
        for m in ("dpps-pnbm", "dpps-mf"):
            g = sel[sel.method == m].sort_values("epsilon")
            if len(g):
                yerr = g.rmse_std.fillna(0) if nf > 1 else None  # one fold: no spread to show
                series(ax, g.x, g.rmse, roles[m], runs.LABELS[m], yerr=yerr, ms=4)
                compared += list(g.rmse - (yerr if yerr is not None else 0))
                compared += list(g.rmse + (yerr if yerr is not None else 0))
        refs = [(runs.LABELS[m], float(sel[sel.method == m].rmse.iloc[0]))
                for m in ("pcc", "cos", "sgld-pnbm") if (sel.method == m).any()]
        st = sel[sel.method.isin(["sgld-pnbm", "dpps-pnbm"])]
        if "rmse_start" in st and st.rmse_start.notna().any():  # one start S⁰ for every chain of a fold
            refs.append((f"start S⁰ ~ U(0, {params['init_high']}), no training",
                         float(st.rmse_start.dropna().iloc[0])))
        zoom_to(ax, compared + [v for _, v in refs])
        references(ax, refs)
        ax.set_xscale("log")
        ax.set_xlabel(f"x (stated user-level ε = x · τ, τ = {params['tau']}; no ε holds as run)")
        ax.set_ylabel(f"test RMSE (mean over {nf} folds)" if nf > 1 else f"test RMSE (fold u{df.folds.iloc[0]})")
        ax.set_title(f"(a) {ds}: DPPS (folds {df.folds.iloc[0]}, T = {params['T']} SGLD steps)", fontsize=9)
    fig.suptitle(standin_title("PNBM paper, Figure 2: DPPS-PNBM vs DPPS-MF vs PCC/COS", datasets), fontsize=10)
    fig.tight_layout(w_pad=3)
    note_below(fig, legend_below(fig, axes, ncol=2),
               "No ε holds as run: the predictor also releases the noiseless item means r̄ (privacy ledger).")
    return fig


def note_below(fig, legend, text: str) -> None:
    """``text`` as a small grey footnote under ``legend`` (a figure legend below the panels)."""
    fig.canvas.draw()
    y = fig.transFigure.inverted().transform(legend.get_window_extent())[0][1]
    fig.text(0.5, y - 0.01, text, ha="center", va="top", fontsize=7, color="#444444")


def _plot_traces(ax, tr: pd.DataFrame, params: dict) -> None:
    """‖S_t − S⁰‖_F / ‖S⁰‖_F against the SGLD step for the selected chains (fold of the first evaluation)."""
    from ...plotting import OKABE_ITO

    if not len(tr):
        ax.set_axis_off()
        return
    colors = [OKABE_ITO[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky", "yellow")]
    markers = "os^vDP*X"
    chains = [((m, e), g.sort_values("t")) for (m, e), g in tr.groupby(["traced", "epsilon"], dropna=False, sort=False)]
    first = chains[0][1]
    if len(chains) > 1 and all(len(g) == len(first) and np.allclose(g.moved, first.moved, rtol=1e-6, atol=0)
                               and np.allclose(g.rmse, first.rmse, rtol=1e-6, atol=0) for _, g in chains):
        ax.plot(first.t, first.moved.clip(lower=1e-12), marker="o", ms=4, lw=1.2, color=OKABE_ITO["blue"],
                label=f"(b) all {len(chains)} chains (DPPS-PNBM at every x, non-private SGLD): one curve,\n"
                      f"RMSE {first.rmse.iloc[0]:.4f} → {first.rmse.iloc[-1]:.4f}")
        chains = []
    for i, ((m, e), g) in enumerate(chains):
        lab = "non-private SGLD" if m == "sgld-pnbm" else f"DPPS-PNBM x = {float(e) / params['tau']:g}"
        look = {"color": "#000000", "ls": "--"} if m == "sgld-pnbm" else {"color": colors[i % len(colors)], "ls": "-"}
        ax.plot(g.t, g.moved.clip(lower=1e-12), marker=markers[i % len(markers)], ms=4, lw=1, mfc="none", **look,
                label=f"chain: {lab} (RMSE {g.rmse.iloc[0]:.4f} → {g.rmse.iloc[-1]:.4f})")
    ax.set_yscale("log")
    ax.set_xlabel("SGLD step t")
    ax.set_ylabel("‖S_t − S⁰‖_F / ‖S⁰‖_F")
    ax.set_title(f"(b) diagnostic: do the chains move? (selected configs, fold u{int(tr.fold.iloc[0])})",
                 fontsize=9)
