"""Chapter-4 heatmaps at the thesis's 10 × 10 (d, γ) grid (paper): every cell's label stays inside its cell and no two
labels overlap (issue #15: "(bias-only)" and "±0.002" ran into the neighbouring cells of Figs 4.1/4.2 at paper,
unreadable); a small grid (ci) keeps the per-cell standard error; degenerate cells are shown in a panel of their own."""

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from dpmf_lib.experiments.balu import balu_fig4_1 as f1  # noqa: E402
from dpmf_lib.experiments.balu import balu_fig4_6 as f6  # noqa: E402

PAPER_D = [1, 2, 3, 4, 6, 8, 11, 16, 23, 32]
PAPER_GAMMA = [1, 2, 2.83, 4, 5.66, 8, 11.3, 16, 23, 32]


def _frame(ds, gs, splits=3):
    return pd.DataFrame([{"dataset": "ml-100k", "k": k, "d": d, "gamma": g, "split": s, "degenerate": (d * g) % 3 == 0,
                          "test_rmse": 1.0 - 0.0011 * d / k + 0.0007 * s + 0.0001 * g,
                          "lam": 10 ** (-3 + math.log2(d) / 3 - math.log2(g) / 3), "lam_on_edge": False,
                          "bias_only_test_rmse": 1.1}
                         for k in (1, 4) for d in ds for g in gs for s in range(splits)])


def _cell_labels(fig):
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    out = []
    for ax in fig.axes:
        for t in ax.texts:
            if t.get_text():
                out.append((ax, t, t.get_window_extent(r)))
    return out


def _overlaps(labels):
    return [(a.get_text(), b.get_text()) for i, (ax1, a, ba) in enumerate(labels)
            for ax2, b, bb in labels[i + 1:] if ax1 is ax2 and ba.overlaps(bb)]


@pytest.mark.parametrize("plot", [lambda df: f1.plot(df, {}), lambda df: f6.plot(df[df.k == 4], {})],
                         ids=["fig4_1", "fig4_6"])
def test_paper_grid_labels_do_not_overlap(plot):
    fig = plot(_frame(PAPER_D, PAPER_GAMMA))
    labels = _cell_labels(fig)
    assert len(labels) >= 100
    assert not _overlaps(labels)
    for ax, t, box in labels:  # each label inside its own cell
        x, y = t.get_position()
        cell = ax.transData.transform([[x - 0.5, y - 0.5], [x + 0.5, y + 0.5]])
        assert min(cell[:, 0]) <= box.x0 and box.x1 <= max(cell[:, 0]), t.get_text()
        assert min(cell[:, 1]) <= box.y0 and box.y1 <= max(cell[:, 1]), t.get_text()
    plt.close(fig)


def test_small_grid_keeps_the_standard_error_in_the_cell_and_degenerate_cells_in_their_own_panel():
    fig = f1.plot(_frame([3, 8], [1.0, 4.0]), {})  # d = 3: degenerate cells
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert any("±" in t for t in texts) and not any("bias-only" in t for t in texts)
    diagnostic = next(ax for ax in fig.axes if ax.get_title().startswith("diagnostic: degenerate cells"))
    assert any("degenerate for both k" in t.get_text() for t in diagnostic.get_legend().get_texts())
    assert not [p for ax in fig.axes for p in ax.patches if p.get_hatch()]  # no hatching over the results
    plt.close(fig)
