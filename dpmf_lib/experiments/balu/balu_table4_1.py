"""Balu 2016, Table 4.1: characteristics of the chapter-4 datasets (users, items, ratings, rating scale), ours beside
the thesis' values. Each dataset is the real one when present (ML-100K is; the others after ``python -m data_fetch``),
else a labelled synthetic stand-in of the published shape (``standin_scale`` shrinks stand-ins for CI)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...claims import Measurement
from ...errors import DatasetUnavailable
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title
from ...sketch.runs import load

# Table 4.1 of the thesis: |U|, |I|, |R|, rating range (number of levels)
PAPER = {"ml-1m": (6040, 3952, 1000209, "1:5 (5)"), "eachmovie": (61265, 1623, 2811718, "1:6 (6)"),
         "ml-10m": (69878, 10677, 10000054, "0.5:5 (10)"), "netflix": (480136, 17167, 96649938, "1:5 (5)")}
CLAIM = "balu-table4.1-ratings-{dataset}"


def run(params: dict) -> pd.DataFrame:
    require_datasets(params)  # first: before any data is loaded or model trained
    rows, sources, meas = [], [], []
    for ds in params["datasets"]:
        try:
            r = load(params, ds)
        except (DatasetUnavailable, ImportError, FileNotFoundError) as exc:
            rows.append({"dataset": f"{ds} [unavailable]", "dataset_id": ds, "real": False, "note": str(exc)[:200]})
            continue
        # distinct rating values (np.unique, not a Python set: a full-size Netflix stand-in has 96.6 M ratings,
        # ~3 GB as Python floats)
        levels = int(np.unique(r.values).size) if r.n_ratings else 0
        p = PAPER.get(ds)
        rows.append({"dataset": r.source.label, "dataset_id": ds, "real": r.source.real, "users": r.n_users,
                     "items": r.n_items, "ratings": r.n_ratings,
                     "rating": f"{r.rating_scale[0]:g}:{r.rating_scale[1]:g} ({levels})",
                     "density": r.n_ratings / max(1, r.n_users * r.n_items),
                     "paper_users": p[0] if p else None, "paper_items": p[1] if p else None,
                     "paper_ratings": p[2] if p else None, "paper_rating": p[3] if p else None,
                     "note": r.source.note})
        sources.append(r.source)
        if p:
            meas.append(Measurement(CLAIM.format(dataset=ds), float(r.n_ratings), r.source.label, r.source.real,
                                    note="number of ratings"))
    df = pd.DataFrame(rows)
    return attach(df, sources=sources, measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    fig, axes = figure(width=8.0, height=0.6 + 0.45 * (len(df) + 1))
    ax = axes[0][0]
    ax.axis("off")
    cols = [c for c in ("dataset", "users", "paper_users", "items", "paper_items", "ratings", "paper_ratings", "rating",
                        "paper_rating") if c in df.columns]
    cells = [[("—" if pd.isna(v) else f"{int(v):,}" if isinstance(v, (int, float)) and c != "dataset" else str(v))
              for c, v in zip(cols, row)] for row in df[cols].itertuples(index=False)]
    t = ax.table(cellText=cells, colLabels=[c.replace("paper_", "paper\n") for c in cols], loc="center")
    t.auto_set_font_size(False)
    t.set_fontsize(7)
    t.scale(1.0, 1.8)
    t.auto_set_column_width(list(range(len(cols))))
    ax.set_title(standin_title("Balu 2016, Table 4.1: dataset characteristics (ours beside the thesis)",
                               [d for d in df.dataset if "[unavailable]" not in d]), fontsize=9)
    return fig
