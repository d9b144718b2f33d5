"""Shared drawing of the chapter-4 line figures: a bias-only reference line, error bars over
splits, degenerate points marked, and a footnote on the search's fidelity."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...sketch.runs import search_note

BIAS_LABEL = "bias only (μ + b_u + b_i)"


def bias_line(ax, df: pd.DataFrame, column: str = "bias_only_test_rmse") -> float:
    """Draw the mean over splits of the bias-only test RMSE as a dashed grey line; returns it (nan if absent)."""
    if column not in df.columns:
        return float("nan")
    b = float(df.groupby("split")[column].first().mean()) if "split" in df.columns else float(df[column].mean())
    ax.axhline(b, color="0.4", ls="--", lw=1, label=BIAS_LABEL)
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


def mark_degenerate(ax, x, y, flags):
    """Ring the points whose selection is degenerate (validation RMSE = bias-only)."""
    flags = np.asarray(flags, bool)
    if flags.any():
        label = "selected (η, λ) = bias-only on validation"
        if label in ax.get_legend_handles_labels()[1]:
            label = "_nolegend_"
        ax.scatter(np.asarray(x)[flags], np.asarray(y)[flags], s=90, facecolors="none", edgecolors="r", lw=1.2,
                   zorder=5, label=label)


def footnote(fig, df: pd.DataFrame, extra: str = "") -> None:
    n_splits = int(df.split.nunique()) if "split" in df.columns else 1
    parts = [f"error bars: ± 1 standard error over {n_splits} random splits" if n_splits > 1
             else "one split: no error bars (n_splits = 1 at this profile)"]
    note = search_note(df)
    if note:
        parts.append("search: " + note)
    if extra:
        parts.append(extra)
    text = "\n".join(parts)
    # a strip of its own at the bottom (constrained layout keeps axes, labels and legend above it)
    fig.set_layout_engine("constrained")
    n_lines = text.count("\n") + 1
    fig.get_layout_engine().set(rect=(0, min(0.4, 0.012 + 0.13 * n_lines / fig.get_figheight()), 1, 1))
    fig.text(0.01, 0.005, text, fontsize=7, va="bottom", ha="left")
