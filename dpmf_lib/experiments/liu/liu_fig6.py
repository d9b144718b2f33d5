"""Liu, Wang & Smola (2015), Figure 6: convergence of C-SGD vs fast SGLD per epoch at d = 16.

The paper: "the C-SGD can find a MAP estimate using several rounds and then begin overfitting. While SGLD first needs
to burn-in and then start sampling procedure." We plot test RMSE per epoch for C-SGD, for the current SGLD sample and
for SGLD's posterior-mean prediction (average over samples after ``sgld_burn_in`` rounds). Settings as in Figure 2.

**Measure.** :func:`overfit_gap`: C-SGD's test RMSE after the last epoch minus its best over the epochs before it,
signed, so a curve still improving at its last epoch gives a negative value and the claim ("begin overfitting", read
as a rise of more than 0.005) can be found to differ. Step sizes stay the paper's Netflix values.

**Which claim.** The paper's is about Netflix (a stand-in here, never judged); a run on real ML-100K measures our
ML-100K counterpart ``liu-6.4-sgd-overfits-ml-100k`` (judged at ``paper``, 5 seeds). The further seeds
(:func:`replicate_run`) re-run ML-100K only, C-SGD only (the claim reads C-SGD's curve).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claims import Measurement
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title
from ._liu_mf import ML100KSeeds, claim_for, dataset_params, load_split, ml100k_params, run_csgd, run_sgld

# dataset loaded -> claim measured (the paper's is about Netflix; real ML-100K measures our counterpart)
CLAIMS = {"netflix": "liu-6.4-sgd-overfits", "ml-100k": "liu-6.4-sgd-overfits-ml-100k"}
CLAIM = CLAIMS["netflix"]


def run(params: dict, *, sgld: bool = True) -> pd.DataFrame:
    """C-SGD and fast SGLD per dataset (``sgld=False``: C-SGD only, what the claim reads — :func:`replicate_run`)."""
    require_datasets(params)  # first: before any data is loaded or model trained
    frames, sources, meas = [], [], []
    d = params["d"]
    for ds in params["datasets"]:
        train, test = load_split(ds, dataset_params(params, ds))  # real Netflix: its probe.txt is the test set
        label = train.source.label
        sources.append(train.source)
        a = run_csgd(train, test, d, params["epochs"], params, threads=params["threads"])
        parts = [a]
        if sgld:
            b = run_sgld(train, test, d, params["epochs"], params, threads=params["threads"])
            avg = b.assign(solver="sgld (posterior mean)", test_rmse=b["test_rmse_avg"])
            parts += [b.assign(solver="sgld (sample)"), avg]
        frames.append(pd.concat(parts, ignore_index=True).assign(dataset=label, real=train.source.real))
        meas.append(Measurement(claim_for(CLAIMS, train.source), overfit_gap(a.sort_values("epoch").test_rmse), label,
                                train.source.real,
                                note=f"C-SGD d={d}: test RMSE after the last of {params['epochs']} epochs minus the best "
                                     "over the epochs before it (negative: still improving)"))
    return attach(pd.concat(frames, ignore_index=True), sources=sources, measurements=meas)


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
SOLVERS = {"csgd": ("C-SGD", "paper"), "sgld (posterior mean)": ("fast SGLD (posterior average)", "ours"),
           "sgld (sample)": ("fast SGLD (last sample)", "ours-alt")}


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import legend_below, series

    dsets = list(dict.fromkeys(df.dataset))
    fig, axes = figure(ncols=len(dsets), width=4.4, height=3.4)
    for ax, ds in zip(axes[0], dsets):
        for s, g in df[df.dataset == ds].groupby("solver", sort=False):
            name, role = SOLVERS.get(s, (s, "ours-2"))
            series(ax, g.epoch, g.test_rmse, role, name, ms=3, lw=1.3)
        ax.set_xlabel("epoch")
        ax.set_ylabel("test RMSE")
        ax.set_title(f"{ds}, d = {params['d']}", fontsize=9)
    fig.tight_layout()
    fig.suptitle(standin_title("Liu et al. Fig. 6: convergence of SGD vs SGLD", df.dataset.unique()), fontsize=10,
                 y=1.1)
    legend_below(fig, axes, ncol=3)
    return fig
