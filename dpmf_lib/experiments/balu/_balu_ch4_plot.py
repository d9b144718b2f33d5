"""Shared drawing of the chapter-4 figures: the methods in the shared roles, a bias-only reference line, error bars
over splits, degenerate selections in a diagnostic panel of their own, and a footnote on the search's fidelity."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...sketch.runs import search_note

BIAS_LABEL = "bias only (μ + b_u + b_i, non-private)"
#: the shared figure roles (dpmf_lib.plotting.ROLES): the thesis's count sketch, the methods it is compared with
METHOD_ROLES = {"count_sketch": "paper", "regular": "compared", "feature_hashing": "compared-alt"}


def method_look(method: str) -> dict:
    """Colour, marker, line style (and marker face) of a chapter-4 method in its shared role."""
    from ...plotting import ROLES

    return dict(ROLES[METHOD_ROLES.get(method, "ours-2")])


def bias_line(ax, df: pd.DataFrame, column: str = "bias_only_test_rmse") -> float:
    """The mean over splits of the bias-only test RMSE as a reference line with its value at the right edge (call it
    once the y-limits are set); returns it (nan if absent)."""
    from ...plotting import references

    if column not in df.columns:
        return float("nan")
    b = float(df.groupby("split")[column].first().mean()) if "split" in df.columns else float(df[column].mean())
    references(ax, [(BIAS_LABEL, b)])
    return b


def mean_se(values: pd.Series) -> tuple[float, float]:
    """Mean and standard error over splits (0 with one split). A 95 % t-interval over the 2–3 splits of ``ci``
    (t = 12.7 for 2) would swamp the axis; the per-split values are in the CSV."""
    v = np.asarray(values, float)
    if len(v) < 2:
        return float(v.mean()), 0.0
    return float(v.mean()), float(v.std(ddof=1) / np.sqrt(len(v)))


def line_with_bars(ax, x, groups, *, label, marker="o", ms=4, **kw):
    """Plot mean ± 1 standard error over splits; ``groups`` is an iterable of per-x value Series (one value per split)."""
    stats_ = [mean_se(g) for g in groups]
    m = np.array([s[0] for s in stats_])
    h = np.array([s[1] for s in stats_])
    if h.any():
        return ax.errorbar(x, m, yerr=h, marker=marker, ms=ms, capsize=3, label=label, **kw)
    return ax.plot(x, m, marker=marker, ms=ms, label=label, **kw)


def degenerate_strip(ax, x, rows: list[tuple[str, np.ndarray]], labels: dict) -> None:
    """A diagnostic panel under a line plot: one row per method (``rows``: (method, flags per x)), its marker filled
    where its selection is degenerate (validation RMSE = bias-only: the factors learned nothing), a dot where not."""
    x = np.asarray(x, float)
    for i, (method, flags) in enumerate(rows):
        flags = np.asarray(flags, bool)
        look = method_look(method)
        ax.plot(x[~flags], np.full((~flags).sum(), i), ".", color="#bbbbbb", ms=4, ls="none")
        ax.plot(x[flags], np.full(flags.sum(), i), look["marker"], color=look["color"], ms=6, ls="none")
    ax.set_yticks(range(len(rows)), [labels.get(m, m) for m, _ in rows], fontsize=7)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    ax.grid(axis="y", visible=False)
    ax.set_title("diagnostic: degenerate selection (marker; dot: not), (η, λ) no better than bias-only on validation",
                 fontsize=7, loc="left")


def footnote(fig, df: pd.DataFrame, extra: str = "", legend_axes=None) -> None:
    """Below the panels: the legend of ``legend_axes`` (series first, reference lines after; none: no legend), then
    the error bars' meaning and the search's fidelity."""
    from ...plotting import legend_below

    n_splits = int(df.split.nunique()) if "split" in df.columns else 1
    parts = [f"error bars: ± 1 standard error over {n_splits} random splits" if n_splits > 1
             else "one split: no error bars (n_splits = 1 at this profile)"]
    note = search_note(df)
    if note:
        parts.append("search: " + note)
    if extra:
        parts.append(extra)
    fig.tight_layout()
    y = 0.0
    if legend_axes is not None:
        legend = legend_below(fig, legend_axes, ncol=2)
        fig.canvas.draw()
        y = fig.transFigure.inverted().transform(legend.get_window_extent())[0][1] - 0.01
    fig.text(0.02, y, "\n".join(parts), fontsize=7, va="top", ha="left", color="#444444")


def category_map(ax, codes: np.ndarray, names: list[str], colors: list[str], xticks, yticks, title: str):
    """A diagnostic panel beside a heatmap: each (γ, d) cell coloured by its category (``codes``: indices into
    ``names``/``colors``), a legend of the categories present below the panel, no numbers in the cells."""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    ax.imshow(codes, cmap=ListedColormap(colors), norm=BoundaryNorm(np.arange(len(colors) + 1) - 0.5, len(colors)),
              aspect="auto")
    ax.set_xticks(range(codes.shape[1]), xticks)
    ax.set_yticks(range(codes.shape[0]), yticks)
    ax.set_xticks(np.arange(codes.shape[1] + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(codes.shape[0] + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", lw=0.8)
    ax.grid(which="major", visible=False)
    ax.tick_params(which="minor", length=0)
    ax.set_title(title, fontsize=9)
    n = np.bincount(codes.ravel().astype(int), minlength=len(names))
    ax.legend(handles=[Patch(fc=c, ec="#999999", lw=0.5, label=f"{name} ({k})")
                       for name, c, k in zip(names, colors, n) if k],
              loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False, fontsize=7, ncol=1)
