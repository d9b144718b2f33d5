"""The guards the judging rules require of the chapter-4 claims (:data:`dpmf_lib.verdicts.KINDS`), read off the rows of
:func:`dpmf_lib.sketch.runs.run_configs` (one row per configuration and split). Each figure passes the rows of the
configurations its claim reads — where the thesis's comparison reads only some of them (the winner of two methods,
the best λ of the rest), those only; its module docstring says which.

- ``selection_off_grid_edge`` (kind *tuned*): 1.0 when the selected η and λ of every configuration compared lie
  strictly inside the values its search evaluated, else 0.0. The edge test is the search's own
  (:func:`dpmf_lib.sketch.runs.search_flags`: the rows' ``eta_on_edge`` / ``lam_on_edge``, stage 2 included); a value
  the search did not vary (a λ fixed per point, no search at all) was not chosen and counts as inside.
- ``cells_off_grid_edge`` (kind *tuned*), for a claim that reads many cells (a mean over a grid, a trend over
  series): the share of those cells whose every selection is inside, as Figure 4.6's guard of that name. A share, not
  every cell, as the chapter's other many-cell guards (``cells_not_degenerate``, ``live_cells``): one cell of a
  36-cell mean on the edge does not make the mean a statement about the grid. The claim states the share it needs
  (0.9, as ``cells_not_degenerate``: at most one cell in ten).
- ``gain_over_bias_only`` (kind *trained-model*): the smallest test-RMSE gain of the configurations compared over
  the chapter's bias-only model μ + b_u + b_i (the rows' ``bias_only_test_rmse``: the reference line of the figures
  and the ``degenerate`` test), each side's mean over the splits against the bias-only mean over the same splits
  (:func:`dpmf_lib.baselines.smallest_gain`). Every model compared, not a share: a cell that learned nothing puts a
  baseline into the comparison.

A claim at a fresh seed that re-fits the first seed's selection without a search (Figures 4.1, 4.7, 4.8) reads the
grid-edge guards from the full run's rows — the re-fit rows ran no search, so their flags say nothing; the guard is a
fact of the selection every seed re-fits — and the gain from its own re-fits on its own splits.
"""

from __future__ import annotations

import pandas as pd

from ... import baselines

FLAGS = ["eta_on_edge", "lam_on_edge"]


def off_edge(rows: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per configuration (``keys``): True when neither its selected η nor its λ lies on the edge of what its search
    evaluated, on any split (with ``search_each_split`` every split searched; otherwise the rows of a configuration
    carry the first split's flags)."""
    flags = rows.groupby(keys, sort=False, dropna=False)[FLAGS].any()
    return ~flags.any(axis=1)


def selection_off_grid_edge(rows: pd.DataFrame, keys: list[str]) -> float:
    """1.0 when every configuration of ``rows`` selected (η, λ) off the edge, 0.0 when any did not; NaN without rows
    or without the search's flags (not measured: the guard fails, never passes)."""
    if not len(rows) or not set(FLAGS) <= set(rows.columns):
        return float("nan")
    return float(off_edge(rows, keys).all())


def cells_off_grid_edge(rows: pd.DataFrame, keys: list[str], cell: list[str] | None = None) -> float:
    """The share of the cells of ``rows`` whose every configuration selected (η, λ) off the edge; a cell is a value of
    ``cell`` (a part of ``keys``, e.g. (d, γ) holding the k = 1 and k = 4 configurations), by default one
    configuration. NaN without rows or without the search's flags."""
    if not len(rows) or not set(FLAGS) <= set(rows.columns):
        return float("nan")
    ok = off_edge(rows, keys)
    if cell is not None:
        ok = ok.groupby(level=cell, sort=False, dropna=False).all()
    return float(ok.mean())


def gain_over_bias_only(rows: pd.DataFrame, keys: list[str]) -> float:
    """The smallest gain of the configurations of ``rows`` (mean test RMSE over their splits) over the bias-only model
    (its mean test RMSE over the same splits); NaN without rows or without the bias-only RMSE."""
    if not len(rows) or "bias_only_test_rmse" not in rows.columns:
        return float("nan")
    base = float(rows.groupby("split").bias_only_test_rmse.first().mean())
    return baselines.smallest_gain(base, rows.groupby(keys, sort=False, dropna=False).test_rmse.mean())


def compared(rows: pd.DataFrame, keys: list[str]) -> dict:
    """Both guards of a claim that compares a few configurations (``rows``, told apart by ``keys``):
    ``selection_off_grid_edge`` and ``gain_over_bias_only``."""
    return {"selection_off_grid_edge": selection_off_grid_edge(rows, keys),
            "gain_over_bias_only": gain_over_bias_only(rows, keys)}
