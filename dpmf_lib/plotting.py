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
    """``title`` plus a visible stand-in notice when any of ``datasets`` (labels or DataSources) is synthetic."""
    labels = [d if isinstance(d, str) else d.label for d in datasets]
    synthetic = [lbl.split(" [")[0] for lbl in labels if STANDIN_MARK in lbl]
    if synthetic:
        title += f"\n{STANDIN_MARK[1:-1]}: {', '.join(dict.fromkeys(synthetic))} (not the real data)"
    return title


def paper_caption(paper: str, label: str) -> str:
    return f"reproduces {paper} {label}"
