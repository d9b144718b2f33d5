"""The shared figure style: one look for every notebook, and stand-ins labelled in every title."""

from __future__ import annotations

import matplotlib

if matplotlib.get_backend().lower() not in ("module://matplotlib_inline.backend_inline", "inline"):
    matplotlib.use("Agg")  # headless by default (papermill, CI); JupyterLab keeps its inline backend

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

PALETTE = "colorblind"
STANDIN_MARK = "[synthetic stand-in]"

#: Okabe & Ito's colour-blind-safe colours
OKABE_ITO = {"black": "#000000", "orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73", "yellow": "#F0E442",
             "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "grey": "#999999"}

#: One look per role of a series, the same in every figure: the paper's method (and at another setting), the
#: private method the paper compares against, ours (the provable or corrected variant) and our other readings. Colour,
#: marker and line style all differ, so a series is told apart in grey print too.
ROLES = {
    "paper": {"color": OKABE_ITO["blue"], "marker": "o", "ls": "-"},
    "paper-alt": {"color": OKABE_ITO["sky"], "marker": "o", "ls": "--", "mfc": "white"},
    "compared": {"color": OKABE_ITO["orange"], "marker": "s", "ls": "-"},
    "compared-alt": {"color": OKABE_ITO["vermillion"], "marker": "s", "ls": ":", "mfc": "white"},
    "ours": {"color": OKABE_ITO["green"], "marker": "^", "ls": "--"},
    "ours-alt": {"color": OKABE_ITO["purple"], "marker": "D", "ls": ":"},
    "ours-2": {"color": OKABE_ITO["vermillion"], "marker": "v", "ls": "-."},
}

#: Non-private references (horizontal lines): black and greys, one dash pattern each
REFERENCE_STYLES = [("#000000", (0, (1, 1))), ("#444444", "--"), ("#444444", "-."), ("#777777", ":"),
                    ("#777777", (0, (6, 2))), ("#aaaaaa", "-"), ("#aaaaaa", (0, (3, 1, 1, 1)))]


def style() -> None:
    """Apply the workbook style (call once per notebook; idempotent)."""
    sns.set_theme(context="paper", style="whitegrid", palette=PALETTE, font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "savefig.bbox": "tight", "axes.titlesize": "medium",
                         "figure.figsize": (6.4, 4.2), "svg.hashsalt": "dpmf"})


def figure(ncols: int = 1, nrows: int = 1, *, width: float = 5.0, height: float = 3.8, **kw):
    style()
    return plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False, **kw)


def standin_title(title: str, datasets) -> str:
    """``title`` plus a line naming the data: each dataset's label, and a visible notice for synthetic stand-ins.

    ``datasets``: labels (``Ratings.source.label``) or DataSources. Every figure names its data, so a figure made on
    ML-100K for a paper figure drawn on another dataset says so.
    """
    labels = list(dict.fromkeys(d if isinstance(d, str) else d.label for d in datasets))
    if not labels:
        return title
    line = "data: " + ", ".join(labels)
    if any(STANDIN_MARK in lbl for lbl in labels):
        line += " (stand-ins are not the real data)"
    return f"{title}\n{line}"


def series(ax, x, y, role: str, label: str, *, yerr=None, **kw):
    """One result series in the look of its ``role`` (:data:`ROLES`); ``yerr`` draws error bars."""
    look = {"ms": 5, "lw": 1.6, **ROLES[role], **kw}
    if yerr is not None:
        look.setdefault("capsize", 2)
        return ax.errorbar(x, y, yerr=yerr, label=label, **look)
    return ax.plot(x, y, label=label, **look)


def references(ax, items, *, gap: float = 0.05) -> None:
    """Horizontal lines for non-private references, ``items`` as (label, value): greys, a dash pattern each, each
    value written at the right edge of the panel (spread ``gap`` of the axis apart), so the label stays the same in
    every panel of a figure. Call it after the panel's y-limits are set."""
    import matplotlib.transforms as mtransforms

    items = [(label, float(value)) for label, value in items]
    for (label, value), (color, ls) in zip(items, REFERENCE_STYLES * 2):
        ax.axhline(value, color=color, ls=ls, lw=1.3, label=label)
    lo, hi = ax.get_ylim()
    step, placed = gap * (hi - lo), []
    for label, value in sorted(items, key=lambda kv: kv[1]):
        y = max(value, placed[-1] + step) if placed else value
        placed.append(y)
        ax.text(1.01, y, f"{value:.3f}", transform=mtransforms.blended_transform_factory(ax.transAxes, ax.transData),
                va="center", ha="left", fontsize="x-small", color="#444444", clip_on=False)


def zoom_to(ax, values, pad: float = 0.12) -> None:
    """The y-axis limited to ``values`` (the quantities a figure's claims compare), padded by ``pad`` of their range."""
    import numpy as np

    v = np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)
    if v.size:
        lo, hi = float(v.min()), float(v.max())
        span = (hi - lo) or abs(hi) * 0.05 or 1.0
        ax.set_ylim(lo - pad * span, hi + pad * span)


def legend_below(fig, axes, ncol: int = 3, **kw):
    """One legend for the whole figure, below its panels (outside the data): the entries of ``axes``, each label
    once, the series before the reference lines."""
    handles, labels = [], []
    for ax in (axes.flat if hasattr(axes, "flat") else axes):
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in labels and not lab.startswith("_"):
                handles.append(h)
                labels.append(lab)

    def is_line(h) -> bool:  # a reference or threshold line (no marker): listed after the series
        return hasattr(h, "get_marker") and h.get_marker() in (None, "None", "", " ")

    order = sorted(range(len(handles)), key=lambda i: is_line(handles[i]))
    handles, labels = [handles[i] for i in order], [labels[i] for i in order]
    return fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=ncol, frameon=False,
                      fontsize="small", **kw)
