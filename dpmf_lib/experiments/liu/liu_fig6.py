"""Liu, Wang & Smola (2015), Figure 6: convergence of C-SGD vs fast SGLD per epoch at d = 16.

The paper: "the C-SGD can find a MAP estimate using several rounds and then begin overfitting. While SGLD first needs
to burn-in and then start sampling procedure." We plot test RMSE per epoch for C-SGD, for the current SGLD sample and
for SGLD's posterior-mean prediction (average over samples after ``sgld_burn_in`` rounds). Settings as in Figure 2.

**Measure.** :func:`overfit_gap`: C-SGD's test RMSE after the last epoch minus its best over the epochs before it,
signed, so a curve still improving at its last epoch gives a negative value and the claim ("begin overfitting", read
as a rise of more than 0.005) can be found to differ.

**Settings per dataset.** The paper set C-SGD's η0 and λ for each of its datasets (Netflix's are the flat values
here; the Netflix stand-in runs them). On a dataset in ``sgd_select_on`` (ML-100K) they are chosen as the paper chose
its own: the lowest validation RMSE after the run's ``epochs`` on ``sgd_grid``, on a validation part of the training
split (:mod:`._liu_select`; the test split is never read; the grid's untimed fits on one thread, so a seed gives one
choice); the chosen run is solver ``csgd`` (what the claim reads)
and the paper's Netflix values run beside it as ``csgd (Netflix constants)`` (shown). The grid's rows are solver
``csgd (validation grid)``. SGLD keeps the paper's Netflix settings everywhere (shown, not judged).

**Guards** (the claim's kinds *trained-model* and *tuned*): ``gain_over_bias_only``, the item-means predictor's test
RMSE minus C-SGD's last-epoch test RMSE (:func:`dpmf_lib.baselines.item_means_rmse`); ``selection_off_grid_edge``,
1 when every searched setting was chosen strictly inside its grid (on a chosen dataset only).

**Which claim.** The paper's is about Netflix (a stand-in here, never judged); a run on real ML-100K measures our
ML-100K counterpart ``liu-6.4-sgd-overfits-ml-100k`` (judged at ``paper``, 5 seeds). The further seeds
(:func:`replicate_run`) re-run ML-100K only, C-SGD only (the claim reads C-SGD's curve), each choosing its settings
anew on its own validation split.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ... import baselines
from ...claims import Measurement
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title
from ._liu_mf import ML100KSeeds, claim_for, dataset_params, load_split, ml100k_params, run_csgd, run_sgld
from ._liu_select import GRID_SOLVER, choose_sgd, grid_rows, selected_on

# dataset loaded -> claim measured (the paper's is about Netflix; real ML-100K measures our counterpart)
CLAIMS = {"netflix": "liu-6.4-sgd-overfits", "ml-100k": "liu-6.4-sgd-overfits-ml-100k"}
CLAIM = CLAIMS["netflix"]


#: on a dataset whose settings are chosen on validation: the run at the paper's Netflix values, shown beside it
PAPER_CONSTANTS = "csgd (Netflix constants)"


def run(params: dict, *, sgld: bool = True) -> pd.DataFrame:
    """C-SGD and fast SGLD per dataset (``sgld=False``: C-SGD only, what the claim reads — :func:`replicate_run`)."""
    require_datasets(params)  # first: before any data is loaded or model trained
    frames, sources, meas = [], [], []
    d, epochs = params["d"], params["epochs"]
    for ds in params["datasets"]:
        p = dataset_params(params, ds)
        train, test = load_split(ds, p)  # real Netflix: its probe.txt is the test set
        label = train.source.label
        sources.append(train.source)
        parts, guards = [], {}
        how = f"η0 = {p['sgd_eta0']:g}, λ = {p['sgd_lambda']:g}, γ = {p['sgd_gamma']:g} as given, not chosen here"
        if selected_on(params, ds):
            choice = choose_sgd(train, d, epochs, p)  # its fits on one thread (untimed: the same choice per seed)
            parts.append(grid_rows(choice, d, epochs))
            const = run_csgd(train, test, d, epochs, p, threads=params["threads"], label=PAPER_CONSTANTS)
            parts.append(const.assign(**_settings(p)))
            p = {**p, **choice.chosen}
            guards["selection_off_grid_edge"] = choice.off_grid_edge
            how = (f"η0 = {p['sgd_eta0']:g}, λ = {p['sgd_lambda']:g}, γ = {p['sgd_gamma']:g} chosen on a "
                   f"{p['validation_fraction']:g} validation part of the training split (lowest validation RMSE after "
                   f"{epochs} epochs of {len(choice.table)} grid points, on the grid's edge: "
                   f"{'no' if choice.off_grid_edge == 1.0 else 'yes'}); with the paper's Netflix values the same "
                   f"measure is {overfit_gap(const.sort_values('epoch').test_rmse):+.5f}")
        a = run_csgd(train, test, d, epochs, p, threads=params["threads"]).assign(**_settings(p))
        parts.insert(0, a)
        if sgld:
            b = run_sgld(train, test, d, epochs, p, threads=params["threads"])
            avg = b.assign(solver="sgld (posterior mean)", test_rmse=b["test_rmse_avg"])
            parts += [b.assign(solver="sgld (sample)"), avg]
        frames.append(pd.concat(parts, ignore_index=True).assign(dataset=label, real=train.source.real))
        last = float(a.sort_values("epoch").test_rmse.iloc[-1])
        guards["gain_over_bias_only"] = baselines.smallest_gain(baselines.item_means_rmse(train, test), [last])
        meas.append(Measurement(claim_for(CLAIMS, train.source), overfit_gap(a.sort_values("epoch").test_rmse), label,
                                train.source.real, guards=guards,
                                note=f"C-SGD d={d} ({how}): test RMSE after the last of {epochs} epochs minus the best "
                                     "over the epochs before it (negative: still improving)"))
    return attach(pd.concat(frames, ignore_index=True), sources=sources, measurements=meas)


def _settings(p: dict) -> dict:
    """The C-SGD settings a run used, as columns of its rows."""
    return {"sgd_eta0": p["sgd_eta0"], "sgd_lambda": p["sgd_lambda"], "sgd_gamma": p["sgd_gamma"]}


def overfit_gap(rmse) -> float:
    """Signed overfitting of a per-epoch test-RMSE curve: the last epoch's RMSE minus the best of epochs 1..E−1.

    Positive: the curve has turned up (overfitting after its best epoch); negative: the last epoch is still the best
    (still improving, by that much). The earlier "final minus best over all epochs" was ≥ 0 by construction and
    exactly 0 for a curve still improving at its last epoch, so the claim could never read "differs". NaN for a
    curve of one epoch."""
    r = np.asarray(rmse, dtype=float)
    return float(r[-1] - r[:-1].min()) if len(r) >= 2 else float("nan")


def replicate_run(params: dict) -> pd.DataFrame:
    """What the claims' further seeds re-run: C-SGD on real ML-100K only (the claim reads C-SGD's curve alone; the
    SGLD run would not change it: each solver is seeded by ``seed`` alone). Tested to give :func:`run`'s value."""
    return run(ml100k_params(params), sgld=False)


def ml100k_seeds(df: pd.DataFrame) -> ML100KSeeds:
    """The notebook's claims cell: ``experiment.ml100k_seeds(df).replicate(nb)`` (see :class:`._liu_mf.ML100KSeeds`)."""
    return ML100KSeeds(df, replicate_run)


#: readable solver names and their shared figure roles (dpmf_lib.plotting.ROLES), as in Figure 2
SOLVERS = {"csgd": ("C-SGD", "paper"), PAPER_CONSTANTS: ("C-SGD (Netflix constants)", "paper-alt"),
           "sgld (posterior mean)": ("fast SGLD (posterior average)", "ours"),
           "sgld (sample)": ("fast SGLD (last sample)", "ours-alt")}


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import legend_below, series

    dsets = list(dict.fromkeys(df.dataset))
    fig, axes = figure(ncols=len(dsets), width=4.4, height=3.4)
    for ax, ds in zip(axes[0], dsets):
        chosen = bool((df[df.dataset == ds].solver == GRID_SOLVER).any())
        for s, g in df[(df.dataset == ds) & (df.solver != GRID_SOLVER)].groupby("solver", sort=False):
            name, role = SOLVERS.get(s, (s, "ours-2"))
            if s in ("csgd", PAPER_CONSTANTS) and "sgd_eta0" in g and g.sgd_eta0.notna().any():  # which settings ran
                how = "chosen on validation: " if s == "csgd" and chosen else "Netflix " if s != "csgd" else ""
                name = f"C-SGD ({how}η0 = {g.sgd_eta0.iloc[0]:g}, λ = {g.sgd_lambda.iloc[0]:g})"
            series(ax, g.epoch, g.test_rmse, role, name, ms=3, lw=1.3)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test RMSE")
        ax.set_title(f"{ds}, d = {params['d']}", fontsize=9)
    fig.tight_layout()
    fig.suptitle(standin_title("Liu et al. Fig. 6: convergence of SGD vs SGLD", df.dataset.unique()), fontsize=10,
                 y=1.1)
    legend_below(fig, axes, ncol=3)
    return fig
