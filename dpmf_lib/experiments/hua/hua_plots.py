"""The drawing of the Hua, Xia, Zhong (2015) figures, kept out of :mod:`.hua_common`: that module's code digest keys
the Hua result cache, so a restyle here leaves the cached runs valid.

The paper's scenarios in the shared roles (:data:`dpmf_lib.plotting.ROLES`; S1 and S3 the paper's look, S2 its
alternative), the W-scaled variant (not covered by Theorem 1) in a panel of its own, the non-private baseline black,
legends outside the data."""

from __future__ import annotations

import numpy as np
import pandas as pd

from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ...plotting import OKABE_ITO, ROLES, figure, legend_below, standin_title
from .hua_common import NAMES, PAPER_POINTS, SCEN, W_LABEL, seed_summary

#: the look of each scenario's curve
SCENARIO_ROLES = {"s1": "paper", "s2": "paper-alt", "s3": "paper"}
#: a ramp of four colour-blind-safe colours (light to dark, Okabe–Ito) for the levels of one parameter, and markers
LEVEL_COLORS = [OKABE_ITO["sky"], OKABE_ITO["green"], OKABE_ITO["orange"], OKABE_ITO["vermillion"],
                OKABE_ITO["purple"], OKABE_ITO["blue"]]
LEVEL_MARKERS = "o^sDvP"
BASELINE = {"color": "#000000", "ls": "--", "lw": 1.4}


#: curves whose CDFs differ by less than this everywhere (on the same grid) are drawn as one: apart they overprint
SAME_CURVE_CDF = 0.005


def _same_curves(groups: list[pd.DataFrame]) -> bool:
    """Whether the curves of ``groups`` coincide on the plot (the same |error| grid, CDFs within
    :data:`SAME_CURVE_CDF`)."""
    first = groups[0]
    return len(groups) > 1 and all(len(g) == len(first) and np.allclose(g.abs_error, first.abs_error, rtol=1e-9)
                                   and np.abs(g.cdf.to_numpy() - first.cdf.to_numpy()).max() < SAME_CURVE_CDF
                                   for g in groups[1:])


def plot_cdf(df: pd.DataFrame, params: dict, scenario: str, fig_no: int):
    """Panels (a), (b) (and (c), the W-scaled variant, when present) on a log |error| axis with the legend below each
    panel: the private CDFs of the paper's noise scale lie far right of [0, 5] and would hide under an inner legend.
    The levels of a panel (iterations, ε) in a light-to-dark ramp with a marker each, the non-private baseline black
    dashed; curves that coincide (the W-scaled variant at every ε) are drawn once."""
    panels = [p for p in ("a", "b", "c") if (df.panel == p).any()]
    fig, axes = figure(len(panels), 1, width=4.6, height=5.0)
    ds = params["dataset"]
    pos = df[(df.abs_error > 0)]
    # the x range: from where the first curve leaves 0 to where the last reaches 1 (on the grid), at least [1e-2, 5]
    lo = pos[pos.cdf > 0.001].abs_error.min() if (pos.cdf > 0.001).any() else 1e-2
    hi = pos[pos.cdf < 0.999].abs_error.max() if (pos.cdf < 0.999).any() else 5.0
    xlo, xhi = min(1e-2, max(lo, 1e-3) / 1.5), max(5.0, hi * 1.5)
    for ax, panel in zip(axes[0], panels):
        sub = df[(df.panel == panel) & (df.abs_error > 0)]
        curves = [(curve, g) for curve, g in sub.groupby("curve", sort=False)]
        private = [(c, g) for c, g in curves if not c.startswith("baseline") and "without noise" not in c]
        if _same_curves([g for _, g in private]):  # one curve for all: one line, its levels in the label
            levels = ", ".join(c.split(" (")[0].replace("ε = ", "") for c, _ in private)
            note = " (stated; does not hold)" if "does not hold" in private[0][0] else ""
            means = sorted({f"{g.mean_abs_error.iloc[0]:.3g}" for _, g in private})
            private = [(f"ε = {levels}{note}:\none curve (CDFs within {SAME_CURVE_CDF:g}; mean "
                        f"{'–'.join(means[::max(1, len(means) - 1)])})", private[0][1])]
        for i, (curve, g) in enumerate(private):
            label = curve if curve.endswith(")") and "one curve" in curve else \
                f"{curve} (mean {g.mean_abs_error.iloc[0]:.3g})"
            ax.plot(g.abs_error, g.cdf, color=LEVEL_COLORS[i % len(LEVEL_COLORS)], lw=1.5,
                    ls="-." if panel == "c" else "-", marker=LEVEL_MARKERS[i % len(LEVEL_MARKERS)], ms=4,
                    markevery=(0.05 + 0.03 * i, 0.12), label=label)
        for curve, g in curves:
            if curve.startswith("baseline"):
                ax.plot(g.abs_error, g.cdf, **BASELINE, label=f"{curve} (mean {g.mean_abs_error.iloc[0]:.3g})")
            elif "without noise" in curve:
                ax.plot(g.abs_error, g.cdf, color="#777777", ls=":", lw=1.6,
                        label=f"{curve} (mean {g.mean_abs_error.iloc[0]:.3g})")
        ax.set_xscale("log")
        ax.set_xlim(xlo, xhi)
        ax.axvspan(xlo, 5.0, color="0.93", zorder=0, lw=0)
        ax.set_xlabel("|prediction error| (log; grey: the paper's axis [0, 5])")
        ax.set_ylabel("CDF")
        ax.set_ylim(0, 1.01)
        ax.legend(fontsize="x-small", loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
        ax.set_title(f"({panel}) ε = {params['eps_fixed']:g}, change iterations" if panel == "a"
                     else f"({panel}) {params['iterations_fixed']} iterations, change ε" if panel == "b"
                     else f"({panel}) {W_LABEL},\n{params['iterations_fixed']} iterations: η / W, W = |R|",
                     fontsize="small")
    fig.suptitle(standin_title(f"Hua et al. Fig. {fig_no}: CDF of prediction errors, {NAMES[ds]}, {SCEN[scenario]}",
                               df["dataset"].unique()), fontsize="medium")
    fig.tight_layout()
    return fig


def plot_increase(df: pd.DataFrame, params: dict, fig_no: int):
    """Top row: the mechanism Theorem 1 is about, on a log axis, with the paper's numbers as its text gives them
    (black stars; a number the text gives as 0 sits on the bottom edge). Bottom row: the W-scaled variant (its stated ε
    does not hold) on a linear axis around 0. One legend below."""
    fig, axes = figure(2, 2, width=4.8, height=2.9, gridspec_kw={"height_ratios": [1.6, 1]})
    noise = df["noise"] if "noise" in df else pd.Series("Theorem 1", index=df.index)
    for col, panel in enumerate(("a", "b")):
        top, bottom = axes[0][col], axes[1][col]
        sub = df[df.panel == panel]
        for (scen, ns), g in sub.groupby([sub.scenario, noise[sub.index]], sort=True):
            look = {"ms": 5, "lw": 1.6, **ROLES[SCENARIO_ROLES.get(scen, "ours-2")]}
            if ns == "Theorem 1":
                top.plot(g.eps, g.mean_increase, label=SCEN[scen], **look)
            else:
                bottom.plot(g.eps, g.mean_increase, **{**look, "ls": "-.", "mfc": "white"},
                            label=f"{SCEN[scen].split(' ')[0]}, W-scaled noise (not covered by Theorem 1; ε does "
                                  "not hold)")
        th = sub[noise[sub.index] == "Theorem 1"].mean_increase
        if len(th) and (th > 0).all():
            top.set_yscale("log")
        stars = [(e, v, rel, scen) for p, scen, e, v, rel in PAPER_POINTS.get(fig_no, []) if p == panel]
        if top.get_yscale() == "log":
            vals = [*th[th > 0], *(v for _, v, _, _ in stars if v > 0)]
            if vals:
                top.set_ylim(min(vals) / 3, max(vals) * 3)
            top.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
            top.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
            top.yaxis.set_minor_formatter(NullFormatter())
        for e, v, rel, scen in stars:
            on_edge = v <= 0 and top.get_yscale() == "log"  # 0 has no place on a log axis: on the bottom edge
            y = top.get_ylim()[0] if on_edge else v
            top.plot([e], [y], "*", color="#000000", ms=11, zorder=5, ls="none", clip_on=not on_edge,
                     label="the paper's number (its text; 0 on a log axis: on the bottom edge)")
            x0, x1 = top.get_xlim()
            left = (e - x0) < 0.4 * (x1 - x0)  # the label on the side with room
            top.annotate(f"paper: {SCEN[scen].split(' ')[0]} {rel} {v:g}", (e, y), xytext=(6 if left else -6, 4),
                         textcoords="offset points", ha="left" if left else "right", va="bottom", fontsize=7)
        its = sub.iterations.iloc[0] if len(sub) else ""
        top.set_title(f"({panel}) {'Scenarios 1 and 2' if panel == 'a' else 'Scenario 3'} ({its} iterations)",
                      fontsize=9)
        top.set_ylabel("mean increase of |error|\n(Theorem 1 noise"
                       + (", log)" if top.get_yscale() == "log" else ")"), fontsize=8)
        bottom.axhline(0, color="#777777", lw=0.8)
        bottom.set_ylabel("mean increase\n(W-scaled variant)", fontsize=8)
        bottom.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3), useOffset=False)
        bottom.set_xlabel("stated ε (S2/S3: per round); no ε holds as run")
        if not bottom.lines[1:]:
            bottom.set_axis_off()
    fig.suptitle(standin_title(f"Hua et al. Fig. {fig_no}: mean increase of prediction errors over the baseline, "
                               f"{NAMES[params['dataset']]}", df["dataset"].unique()), fontsize="medium")
    fig.tight_layout()
    legend = legend_below(fig, axes, ncol=2)
    fig.canvas.draw()
    y = fig.transFigure.inverted().transform(legend.get_window_extent())[0][1]
    fig.text(0.5, y - 0.01, "No ε holds as run: U is fit to the same ratings (privacy ledger). Baseline: non-private MF, "
             f"{params.get('baseline_iterations', 100)} iterations.", ha="center", va="top", fontsize=7,
             color="#444444")
    return fig


def plot_joinleave(df: pd.DataFrame, params: dict, fig_no: int):
    """Mean over the seeds ± 95 % Student-t interval, one grey dot per seed, the y axis from 0: a spread that is small
    against the increase itself is not drawn as a trend. One legend below."""
    fig, axes = figure(2, 1, width=4.8, height=3.4)
    summ = seed_summary(df)
    n = int(summ.n_seeds.min()) if len(summ) else 0
    for ax, panel in zip(axes[0], ("a", "b")):
        g = df[df.panel == panel]
        m = summ[summ.panel == panel].sort_values("probability")
        ax.plot(g.probability, g.mean_increase, "o", color="#999999", ms=3, ls="none", label="one seed")
        ax.errorbar(m.probability, m["mean"], yerr=m["ci95"] if n > 1 else None, capsize=3, ms=5, lw=1.6,
                    **ROLES["paper"], label=f"S3, mean over {n} seeds" + (" ± 95 % t-interval" if n > 1 else ""))
        top = float(np.nanmax(np.r_[g.mean_increase.to_numpy(float), (m["mean"] + m["ci95"].fillna(0)).to_numpy()]))
        bottom = float(np.nanmin(np.r_[g.mean_increase.to_numpy(float), (m["mean"] - m["ci95"].fillna(0)).to_numpy()]))
        ax.set_ylim(min(0.0, bottom * 1.1), max(0.0, top * 1.1) or 1.0)
        ax.axhline(0, color="#777777", lw=0.8)
        ax.set_xlabel("joining probability" if panel == "a" else "leaving probability")
        ax.set_ylabel("mean increase of |prediction error|")
        ax.set_title(f"({panel}) " + (f"leaving probability = {params['p_leave']:g}" if panel == "a"
                                      else f"joining probability = {params['p_join']:g}"), fontsize=9)
    fig.suptitle(standin_title(f"Hua et al. Fig. {fig_no}: joining/leaving probabilities in S3, "
                               f"{NAMES[params['dataset']]} ({params['iterations_s3']} iterations, "
                               f"ε = {params['eps_fixed']:g})", df["dataset"].unique()), fontsize="medium")
    fig.tight_layout()
    legend_below(fig, axes, ncol=2)
    return fig
