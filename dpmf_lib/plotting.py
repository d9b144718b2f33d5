"""The shared figure style: one look for every notebook, and stand-ins labelled in every title."""

from __future__ import annotations

import matplotlib

if matplotlib.get_backend().lower() not in ("module://matplotlib_inline.backend_inline", "inline"):
    matplotlib.use("Agg")  # headless by default (papermill, CI); JupyterLab keeps its inline backend

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

PALETTE = "colorblind"
STANDIN_MARK = "[synthetic stand-in]"


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
