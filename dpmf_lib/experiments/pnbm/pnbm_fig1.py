"""PNBM paper, Figure 1: RMSE vs ε — DPSGD-PNBM, DPSGD-MF, non-private PCC and COS (ML-100K; ML-1M when fetched);
beside them, labelled as ours, DPSGD-PNBM with per-user L1 clipping (a DP-valid variant).

Every (method, ε) point is the best configuration of the paper's grid (section 5.1) by RMSE averaged over the folds
evaluated (5-fold CV at the paper profile). Beside the paper's ε, the CSV and the right panel give the standard
amplification-by-subsampling bound K ln(1 + γ(e^{ε/(Kγ)} - 1)) for the selected DPSGD-PNBM configuration. Noise-free
PNBM and MF (same grids, no noise) are drawn as reference lines. Reconstruction choices: :mod:`dpmf_lib.nbm.model`.

Extra series (ours, not in the paper): "DPSGD-PNBM, per-user clipped (ours)" —
:func:`dpmf_lib.nbm.model.train_pnbm_clipped`: each user's summed gradient contribution clipped to ``clipped_l1`` in
L1, Laplace noise calibrated to that clip, item means privatised with a ``clipped_mean_share`` of ε; its ε is the one
that provably holds at rating level (basic composition, no subsampling amplification), unlike the paper's series,
whose ε is the paper's accounting. Grid: ``clipped_grid`` (null: the DPSGD-PNBM grid; ci: one configuration).

Extra series (ours, a labelled deviation): "DPSGD-MF, larger η" and its noise-free reference
"MF, larger η" — the same trainers on the MF grid with ``mf_lr_eta`` in place of the paper's η ∈ {6, 8}·10⁻⁴, at
which MF does not move from its N(0, 0.1²) start (noise-free ≈ item means); at η = 0.01 it trains. The paper's
series stay as they are; the deviation is drawn beside them, never in their place. ``mf_lr_eta: []`` turns it off.

Claims over seeds (:func:`rerun_selected`, our choice): the claims' seeds
(:meth:`SelectedRerun.replicate <dpmf_lib.experiments.pnbm._pnbm_common.SelectedRerun.replicate>`) re-evaluate only the
configurations the first seed selected for the claims' inputs (:func:`claim_inputs`: PCC, COS, noise-free MF, DPSGD-
PNBM at ε = 1, DPSGD-MF at ε = 1 and 20), on the same folds, at the new seed, and :func:`measurements` computes the
claims from them exactly as in :func:`run`. The interval over seeds is then the seed-to-seed spread (DP noise,
initialisation, minibatches) of the selected configuration, free of the winner's curse of re-selecting on the test
folds at every seed, and the claim values come from fresh seeds seed + 1 … seed + n, not from the first seed, whose
value made the selection (SelectedRerun.replicate); the selection itself is made once (first seed) and is not
replicated. Details: :mod:`dpmf_lib.experiments.pnbm._pnbm_common`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claims import Measurement
from ...data.ratings import DataSource
from ...nbm import runs
from ...plotting import figure, standin_title
from ._pnbm_common import GridSpec, SelectedRerun, full_run

CLAIM_PNBM_KNN = "pnbm-5.2-dpsgd-pnbm-beats-knn-eps1"
CLAIM_MF_KNN = "pnbm-5.2-dpsgd-mf-beats-knn-eps20"
CLAIM_PNBM_MF = "pnbm-5.2-dpsgd-pnbm-beats-dpsgd-mf-eps1"


def pnbm_fixed(p: dict) -> dict:
    return {"Nk": p["pnbm_Nk"], "gamma": p["gamma"], "min_user_ratings": p["min_user_ratings"],
            "init_high": p["init_high"]}


def pnbm_grid(p: dict) -> dict:
    return {"eta": p["pnbm_eta"], "K": p["pnbm_K"], "lam": p["pnbm_lam"], "beta": p["pnbm_beta"], "C": p["pnbm_C"]}


def clipped_grid(p: dict) -> dict:
    """The grid of the per-user clipped variant (ours): ``clipped_grid`` if given, else the DPSGD-PNBM grid."""
    g = p.get("clipped_grid")
    return pnbm_grid(p) if g is None else {k: list(v) for k, v in g.items()}


def mf_grid(p: dict) -> dict:
    return {"eta": p["mf_eta"], "K": p["mf_K"], "lam": p["mf_lam"], "d": p["mf_d"]}


def knn_specs(ds: str, p: dict) -> list[GridSpec]:
    """PCC and COS (non-private kNN, no grid): the reference of every PNBM figure."""
    nk = p["knn_Nk"].get(ds, max(p["knn_Nk"].values()))
    return [GridSpec(m, [None], {}, {"Nk": nk}, p["fold_halving_keep"]) for m in ("pcc", "cos")]


def sources_of(datasets) -> list[DataSource]:
    return [runs._dataset(ds).source for ds in datasets]


def specs(ds: str, p: dict) -> list[GridSpec]:
    """Every grid search of the figure on ``ds``, in the order of the CSV's rows."""
    hk = p["fold_halving_keep"]
    fx = pnbm_fixed(p)
    cfx = {**fx, "clip_l1": p["clipped_l1"], "mean_share": p["clipped_mean_share"]}  # ours: DP-valid clipped variant
    mfx = {"e_max": p["mf_e_max"]}
    out = knn_specs(ds, p) + [
        GridSpec("dpsgd-pnbm", p["epsilons"], pnbm_grid(p), fx, hk),
        GridSpec("pnbm", [None], pnbm_grid(p), fx, hk),
        GridSpec("dpsgd-pnbm-clipped", p["epsilons"], clipped_grid(p), cfx, hk),
        GridSpec("dpsgd-mf", p["epsilons"], mf_grid(p), mfx, hk),
        GridSpec("mf", [None], mf_grid(p), mfx, hk)]
    if p["mf_lr_eta"]:  # ours: the MF baselines with a learning rate at which MF trains
        lr = {**mf_grid(p), "eta": p["mf_lr_eta"]}
        out += [GridSpec("dpsgd-mf-lr", p["epsilons"], lr, mfx, hk), GridSpec("mf-lr", [None], lr, mfx, hk)]
    return out


def _has(eps, value: float) -> bool:
    return value in [float(e) for e in eps]


def claim_inputs(p: dict) -> list[tuple]:
    """The (method, ε) whose selected configuration the claims and guards of this figure read."""
    out = [("pcc", None), ("cos", None), ("mf", None)]  # kNN reference; noise-free MF: the baseline-gain guard
    if _has(p["epsilons"], 1.0):
        out += [("dpsgd-pnbm", 1.0), ("dpsgd-mf", 1.0)]
    if _has(p["epsilons"], 20.0):
        out.append(("dpsgd-mf", 20.0))
    return out


def finish(agg: pd.DataFrame, p: dict, notes: list) -> pd.DataFrame:
    agg["folds"] = ",".join(map(str, p["folds"]))
    agg["note"] = "; ".join(notes)
    return agg


def measurements(agg: pd.DataFrame, p: dict, datasets) -> list[Measurement]:
    """The claims of Figure 1 from the selected rows of ``agg`` — the one function of the full run and the replicate
    run (:func:`rerun_selected`)."""
    meas = []
    for ds in datasets:
        real = runs._dataset(ds).source.real
        knn = min(runs.best_rmse(agg, ds, "pcc"), runs.best_rmse(agg, ds, "cos"))
        note = f"folds {p['folds']}, profile {p['profile']}; grid selected on test folds"
        # guards (params/claims.yaml): the noise-free MF must have trained, the selected K must be off its grid's edge
        mf_gain = runs.item_means_rmse(ds, p["folds"]) - runs.best_rmse(agg, ds, "mf")
        k_interior = runs.grid_interior(runs.selected_config(agg, ds, "dpsgd-pnbm", 1.0).get("K", float("nan")),
                                        p["pnbm_K"], domain_min=1) if _has(p["epsilons"], 1.0) else float("nan")
        # guards by kind (dpmf_lib.verdicts.KINDS): the gain over item means of every model a claim compares, and
        # whether every hyper-parameter selected on a grid lies inside it
        if _has(p["epsilons"], 1.0):
            meas.append(Measurement(CLAIM_PNBM_KNN, knn - runs.best_rmse(agg, ds, "dpsgd-pnbm", 1.0), ds, real, note,
                                    guards={"k_grid_interior": k_interior,
                                            "gain_over_bias_only": runs.gain_over_item_means(
                                                agg, ds, p["folds"], [("knn", None), ("dpsgd-pnbm", 1.0)])}))
            meas.append(Measurement(CLAIM_PNBM_MF, runs.best_rmse(agg, ds, "dpsgd-mf", 1.0)
                                    - runs.best_rmse(agg, ds, "dpsgd-pnbm", 1.0), ds, real, note,
                                    guards={"baseline_gain_over_item_means": mf_gain, "k_grid_interior": k_interior,
                                            "gain_over_bias_only": runs.gain_over_item_means(
                                                agg, ds, p["folds"], [("dpsgd-mf", 1.0), ("dpsgd-pnbm", 1.0)]),
                                            "selection_off_grid_edge": float(np.min([
                                                runs.selection_interior(agg, ds, "dpsgd-pnbm", 1.0, pnbm_grid(p),
                                                                        domain_min={"K": 1}),
                                                runs.selection_interior(agg, ds, "dpsgd-mf", 1.0, mf_grid(p),
                                                                        domain_min={"K": 1})]))}))
        if _has(p["epsilons"], 20.0):
            meas.append(Measurement(CLAIM_MF_KNN, knn - runs.best_rmse(agg, ds, "dpsgd-mf", 20.0), ds, real, note,
                                    guards={"baseline_gain_over_item_means": mf_gain,
                                            "gain_over_bias_only": runs.gain_over_item_means(
                                                agg, ds, p["folds"], [("knn", None), ("dpsgd-mf", 20.0)]),
                                            "selection_off_grid_edge": runs.selection_interior(
                                                agg, ds, "dpsgd-mf", 20.0, mf_grid(p), domain_min={"K": 1})}))
    return meas


def run(params: dict) -> pd.DataFrame:
    """Every grid of :func:`specs`, best-of-grid per (method, ε), the claims by :func:`measurements`
    (:func:`~dpmf_lib.experiments.pnbm._pnbm_common.full_run`)."""
    return full_run(params, specs, finish, measurements, epsilons=True)


def rerun_selected(df: pd.DataFrame) -> SelectedRerun:
    """``params -> DataFrame`` for :meth:`~dpmf_lib.outputs.NotebookRun.replicate`: only the configurations ``df``
    (the full run at the first seed) selected for the claims' inputs (:func:`claim_inputs`), re-evaluated on the same
    folds at ``params['seed']``, measured by :func:`measurements`. The selection is not replicated (see
    :mod:`dpmf_lib.experiments.pnbm._pnbm_common`)."""
    return SelectedRerun(df, specs, claim_inputs, finish, measurements)


def plot(df: pd.DataFrame, params: dict):
    """Per dataset: (a) the paper's comparison with the y-axis on the RMSEs it compares, (b) our per-user clipped
    DPSGD-PNBM (its ε provable; it needs a larger ε) beside DPSGD-PNBM, (c) what the paper's ε means under
    subsampling; one legend below the panels."""
    from ...plotting import legend_below, references, series, zoom_to

    datasets = list(df.dataset.unique())
    fig, axes = figure(ncols=3, nrows=max(1, len(datasets)), width=4.3, height=3.6)
    roles = {"dpsgd-pnbm": "paper", "dpsgd-mf": "compared", "dpsgd-mf-lr": "ours-alt",
             "dpsgd-pnbm-clipped": "ours"}
    for r, ds in enumerate(datasets):
        ax, ax_ours, ax_eps = axes[r]
        sel = df[(df.dataset == ds) & df.selected]
        nf = int(sel.n_folds.max()) if len(sel) else 1
        ylabel = f"test RMSE (mean over {nf} folds)" if nf > 1 else f"test RMSE (fold u{df.folds.iloc[0]})"
        compared = []
        for m in ("dpsgd-pnbm", "dpsgd-mf", "dpsgd-mf-lr"):
            g = sel[sel.method == m].sort_values("epsilon")
            if len(g):
                series(ax, g.epsilon, g.rmse, roles[m], runs.LABELS[m], yerr=g.rmse_std.fillna(0) if nf > 1 else None)
                compared += list(g.rmse)
        refs = [(runs.LABELS[m], float(sel[sel.method == m].rmse.iloc[0]))
                for m in ("pcc", "cos", "pnbm", "mf", "mf-lr") if (sel.method == m).any()]
        zoom_to(ax, compared + [v for _, v in refs])
        references(ax, refs)
        ax.set_title(f"(a) {ds}: the paper's comparison (folds {df.folds.iloc[0]})")
        for m in ("dpsgd-pnbm", "dpsgd-pnbm-clipped"):
            g = sel[sel.method == m].sort_values("epsilon")
            if len(g):
                series(ax_ours, g.epsilon, g.rmse, roles[m], runs.LABELS[m],
                       yerr=g.rmse_std.fillna(0) if nf > 1 else None)
        ax_ours.set_title("(b) ours: per-user clipped, ε provable")
        for a in (ax, ax_ours):
            a.set_xscale("log")
            a.set_xlabel("ε, rating level (paper's accounting)")
            a.set_ylabel(ylabel)
        g = sel[sel.method == "dpsgd-pnbm"].sort_values("epsilon")
        ax_eps.loglog(g.epsilon, g.epsilon_amplified, "o-", color="#0072B2", label="subsampling bound, selected K, γ")
        lim = [g.epsilon.min(), g.epsilon.max()]
        ax_eps.loglog(lim, lim, "k:", lw=1, label="paper's ε (y = x)")
        ax_eps.set_xlabel("paper's ε")
        ax_eps.set_ylabel("K·ln(1 + γ·(exp(ε/(Kγ)) − 1))")
        ax_eps.set_title("(c) what the paper's ε means (DPSGD-PNBM)")
    fig.suptitle(standin_title("PNBM paper, Figure 1: DPSGD-PNBM vs DPSGD-MF vs PCC/COS", datasets))
    fig.tight_layout()
    legend_below(fig, axes, ncol=3)
    return fig
