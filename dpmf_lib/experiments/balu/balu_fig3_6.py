"""Balu (2016) thesis, Figure 3.6: utility against privacy for BLIP and JLT over their ε grids (ML-100K).

Utility (Section 3.5.4): recall of the true k = 10 nearest neighbours (cosine of the raw item sets) when neighbours are
found from the sanitized representations, among the 343 test users. Similarities from sketches (our choice, the
thesis does not spell them out): BLIP — cosine of the debiased bits (b~ - p)/(1 - 2p) (unbiased for the Bloom
filters' inner products), JLT — y_u . y_v / sqrt(c_hat_u c_hat_v) with c_hat = ||y||^2 - L sigma^2.
Privacy: 1 - mean cos(P, P^) of the joint decoder (MCMC with prior) — the same attack as Figures 3.2/3.3.
JLT points with eps >= ln(1/delta) (outside (3.10)'s range, no DP guarantee) are marked: CSV column
``eps_ge_ln_1_over_delta`` and a red cross on the plot.
The Digg panel cannot be reproduced (no data); the figure says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...attacks import metrics
from ...attacks.mechanisms import jlt_guarantee_void
from ...outputs import attach
from . import _balu_ch3 as ch3


def _mech_params(params: dict, kind: str) -> dict:
    p = {"seed": params["seed"], "dataset": params["dataset"], "n_train": params["n_train"], "n_test": params["n_test"],
         "n_attacked": params["n_attacked"], "burn_in": params["burn_in"], "n_samples": params["n_samples"],
         "prefilter_f": params["prefilter_f"], "prior_alpha": params["prior_alpha"], "attacks": ["mcmc_prior"],
         "map_R": 10, "n_jobs": params["n_jobs"], "profile": params.get("profile", "?")}
    p["min_sweeps"] = params.get("min_sweeps")
    if kind == "blip":
        p.update(L=params["blip_L"], K=params["blip_K"], eps=params["blip_eps"])
    else:
        p.update(L=params["jlt_L"], delta=params["jlt_delta"], eps=params["jlt_eps"])
        # ours: JLT's users and chain rule may differ from BLIP's (`paper`: the same users, 600 vs 750 updates per slot)
        for own, shared in (("jlt_n_attacked", "n_attacked"), ("jlt_min_sweeps", "min_sweeps")):
            v = params.get(own, "same")
            if v != "same":
                p[shared] = v
    return p


def utility(kind: str, params: dict, setup: ch3.Setup) -> pd.DataFrame:
    """k-NN recall from sanitized sketches of all test users, per ε.

    The noise of user u at ε is seeded by the ε's *value* ([seed, 2, eps_stream(ε), u], as the attacks): a row depends
    on ε, never on its place in the ε list. It is the same stream as the
    attacks', so an attacked user's sketch here is the very release the privacy axis attacked."""
    true_sim = metrics.cosine_matrix(setup.test.indicator())
    rows = []
    for eps in params["eps"]:
        mech = ch3.make_mechanism(kind, float(eps), params, setup.test.n_items)
        stream = ch3.eps_stream(eps)
        obs = np.stack([mech.sanitize(setup.test.profile(u), seed=ch3._seed(params["seed"], 2, stream, u))
                        for u in range(len(setup.test))])
        est = metrics.blip_similarity(obs, mech.p_eps) if kind == "blip" else metrics.jlt_similarity(obs, mech.sigma)
        rows.append({"mechanism": kind, "eps": float(eps), "utility_recall": metrics.knn_recall(true_sim, est,
                                                                                             params["knn_k"]),
                     # k random neighbours among the n - 1 others find k/(n-1) of the true ones on average
                     "utility_chance": params["knn_k"] / (len(setup.test) - 1)})
    return pd.DataFrame(rows)


def run(params: dict) -> pd.DataFrame:
    rows = []
    source = None
    for kind in ("blip", "jlt"):
        p = _mech_params(params, kind)
        setup = ch3.prepare(p)
        source = setup.source
        att = ch3.summarize(ch3.run_attack_grid(kind, p, setup))
        att = att[att["attack"] == "mcmc_prior"][["dataset", "mechanism", "eps", "cos_mean", "n_users"]]
        u = utility(kind, {**p, "knn_k": params["knn_k"]}, setup)
        m = att.merge(u, on=["mechanism", "eps"])
        m["privacy"] = 1.0 - m["cos_mean"]
        # JLT only: (3.10) needs eps < ln(1/delta); BLIP is pure eps-DP for every eps >= 0 (always False)
        m[ch3.VOID_COL] = [kind == "jlt" and jlt_guarantee_void(e, p["delta"]) for e in m["eps"]]
        rows.append(m)
    df = pd.concat(rows, ignore_index=True)
    return attach(df, sources=[source])


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import figure, standin_title

    fig, axes = figure(2, 1, width=4.2, height=3.9, gridspec_kw={"width_ratios": [3, 1]})
    ax = axes[0, 0]
    # ε labels only where they do not collide (JLT's and BLIP's low-ε points pile up at chance utility and their
    # labels overprinted); every point's ε, privacy and utility is listed in the side panel
    placed = []
    for kind, label in (("blip", "BLIP (L = 5,000 bits, K = 20)"), ("jlt", "JLT (L = 1,000 reals)")):
        s = df[df["mechanism"] == kind]
        line, = ax.plot(s["privacy"], s["utility_recall"], marker="o", label=label)
        for _, r in s.iterrows():
            xy = (float(r["privacy"]) / 1.02, float(r["utility_recall"]) / 1.02)
            if all((xy[0] - a) ** 2 + (xy[1] - b) ** 2 > 0.045 ** 2 for a, b in placed):
                placed.append(xy)
                ax.annotate(f"{r['eps']:g}", (r["privacy"], r["utility_recall"]), fontsize=7,
                            color=line.get_color(), xytext=(4, 4), textcoords="offset points")
        void = s[s[ch3.VOID_COL].astype(bool)] if ch3.VOID_COL in s else s.iloc[:0]
        if len(void):
            ax.plot(void["privacy"], void["utility_recall"], "x", color="tab:red", ms=9, mew=1.5,
                    label=f"JLT, {ch3.VOID_LABEL}")
    if "utility_chance" in df:
        ax.axhline(float(df["utility_chance"].iloc[0]), color="0.4", ls=":", lw=1,
                   label=f"chance: {params['knn_k']} random neighbours ({df['utility_chance'].iloc[0]:.3f})")
    ax.set_xlabel("privacy = 1 − cos(P, P̂) (MCMC with prior)")
    ax.set_ylabel(f"utility = recall of true {params['knn_k']}-NN")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize="small")
    labels = list(df["dataset"].unique())
    note = ch3.subsample_note(_mech_params(params, "blip"))
    ax.set_title(standin_title("Balu 2016 Figure 3.6: utility vs privacy (labels: ε)" + (f"\n{note}" if note else ""),
                               labels), fontsize="small")
    ax2 = axes[0, 1]
    ax2.text(0.0, 1.0, "Digg: not available (the 2016 Digg\ncrawl cannot be obtained; see Table 3.1)", ha="left",
             va="top", transform=ax2.transAxes, fontsize=7)
    rows = ["every point (ε: privacy, utility)"]
    for kind, name in (("blip", "BLIP"), ("jlt", "JLT")):
        s = df[df["mechanism"] == kind].sort_values("eps", ascending=False)
        rows.append(name + ":")
        rows += [f"  {r['eps']:g}: {r['privacy']:.2f}, {r['utility_recall']:.3f}"
                 + (" ×" if bool(r.get(ch3.VOID_COL, False)) else "") for _, r in s.iterrows()]
    rows.append("× : no DP guarantee (ε ≥ ln(1/δ))")
    ax2.text(0.0, 0.86, "\n".join(rows), ha="left", va="top", transform=ax2.transAxes, fontsize=6.5,
             family="monospace")
    ax2.set_axis_off()
    fig.tight_layout()
    return fig
