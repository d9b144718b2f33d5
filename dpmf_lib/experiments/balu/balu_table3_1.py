"""Balu (2016) thesis, Table 3.1: dataset characteristics (users, training/testing sizes, N, c_avg, sparsity).

MovieLens (ML-100K): profiles are the rated-item sets (c_avg = 106 and sparsity 6.30 % = c_avg / N in the thesis match
"every rated item", not only liked ones); the 600/343 split is seeded. Digg (531 users, 1,237 news) cannot be obtained
— the crawl was never published in a form we can fetch — so its row keeps the thesis's numbers and says "not available".
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claims import Measurement
from ...outputs import attach
from . import _balu_ch3 as ch3

PAPER = {
    "Digg": {"users": 531, "train": 331, "test": 200, "N": 1237, "c_avg": 317, "sparsity_pct": 25.63},
    "MovieLens": {"users": 943, "train": 600, "test": 343, "N": 1682, "c_avg": 106, "sparsity_pct": 6.30},
}


def run(params: dict) -> pd.DataFrame:
    setup = ch3.prepare({**params, "n_attacked": None})
    sizes = np.concatenate([setup.train.sizes(), setup.test.sizes()])
    N = setup.train.n_items
    ours = {"users": len(sizes), "train": len(setup.train), "test": len(setup.test), "N": N,
            "c_avg": float(sizes.mean()), "sparsity_pct": 100.0 * float(sizes.mean()) / N}
    rows = []
    for name, paper in PAPER.items():
        for col, ref in paper.items():
            if name == "MovieLens":
                val, label, note = ours[col], setup.source.label, ""
            else:
                val, label, note = float("nan"), "digg (not available)", "Digg crawl not available: not reproduced"
            rows.append({"dataset": label, "row": name, "column": col, "paper": ref, "ours": val, "note": note})
    df = pd.DataFrame(rows)
    src = setup.source
    meas = [Measurement("balu-3.5-ml100k-cavg", ours["c_avg"], src.label, src.real, "mean rated items per user"),
            Measurement("balu-3.5-ml100k-sparsity", ours["sparsity_pct"], src.label, src.real, "100 c_avg / N")]
    df.attrs["extra"] = {"train_c_avg": float(setup.train.sizes().mean()), "test_c_avg": float(setup.test.sizes().mean())}
    return attach(df, sources=[src], measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import figure, standin_title

    fig, axes = figure(1, 1, width=9.0, height=2.2)
    ax = axes[0, 0]
    ax.set_axis_off()
    cols = ["users", "train", "test", "N", "c_avg", "sparsity_pct"]
    header = ["Dataset", "Nb of users", "Training set", "Testing set", "N", "c_avg", "Sparsity %"]
    cells = []
    for name in ("Digg", "MovieLens"):
        sub = df[df["row"] == name].set_index("column")
        paper = [f"{sub.loc[c, 'paper']:g}" for c in cols]
        ours = ["n/a" if np.isnan(sub.loc[c, "ours"]) else f"{sub.loc[c, 'ours']:.4g}" for c in cols]
        cells.append([f"{name} (thesis)"] + paper)
        cells.append([f"{name} (ours" + (": not available)" if name == "Digg" else ")")] + ours)
    t = ax.table(cellText=cells, colLabels=header, loc="center", colWidths=[0.28] + [0.12] * 6)
    t.auto_set_font_size(False)
    t.set_fontsize(8)
    labels = [d for d in df["dataset"].unique() if "not available" not in d]
    ax.set_title(standin_title("Balu 2016 Table 3.1: dataset characteristics", labels), fontsize="small")
    return fig
