"""Accuracy metrics of the workbook: RMSE (plain and clipped to a rating scale), root mean square, recall@R.

The RMSE arithmetic is fixed, because saved results are compared byte for byte: both sides are cast to float64 (an
exact cast), then ``sqrt(mean((pred - truth) ** 2))`` with numpy's pairwise ``mean``. Every copy this replaced did
exactly these operations in this order, so its results are unchanged to the last bit. Code whose arithmetic differs
keeps it where it is and says so: :meth:`dpmf_lib.mf.MFModel.rmse` clips in float32 inside ``predict`` before the
cast (the same values whenever the scale's bounds are float32-exact, as every scale here is, but not the same
operations); RMSEs computed inside numba kernels stay in their kernels.
"""

from __future__ import annotations

import numpy as np

from .errors import ParameterError


def rms(x) -> float:
    """Root mean square of ``x`` in float64 (NaN for an empty ``x``, with numpy's warning)."""
    return float(np.sqrt(np.mean(np.asarray(x, dtype=np.float64) ** 2)))


def rmse(pred, truth) -> float:
    """Root-mean-square error of predictions ``pred`` against ``truth`` (module docstring: float64, fixed order)."""
    return rms(np.asarray(pred, dtype=np.float64) - np.asarray(truth, dtype=np.float64))


def clipped_rmse(pred, truth, lo: float, hi: float) -> float:
    """RMSE of ``pred`` clipped to ``[lo, hi]`` (in float64) against ``truth``: what a recommender that knows its
    rating scale reports."""
    return rmse(np.clip(np.asarray(pred, dtype=np.float64), lo, hi), truth)


def recall_at(ranked, truth, Rs=None) -> np.ndarray:
    """recall@R: share of queries whose true nearest neighbour ``truth[q]`` is among ``ranked[q, :R]``, for each R in
    ``Rs`` (default 1..ranked.shape[1]). A neighbour missing from the list counts as a miss at every R."""
    ranked = np.asarray(ranked)
    truth = np.asarray(truth).reshape(-1)
    if ranked.ndim != 2 or len(ranked) != len(truth):
        raise ParameterError(f"ranked must be (n_queries, R) with n_queries = len(truth) = {len(truth)}, got "
                             f"{ranked.shape}")
    Rmax = ranked.shape[1]
    Rs = np.arange(1, Rmax + 1) if Rs is None else np.asarray(Rs, dtype=np.int64)
    if len(Rs) and (Rs.min() < 1 or Rs.max() > Rmax):
        raise ParameterError(f"every R must lie in [1, {Rmax}], got [{Rs.min()}, {Rs.max()}]")
    hit = ranked == truth[:, None]
    pos = np.where(hit.any(1), hit.argmax(1) + 1, Rmax + 1)  # 1-based rank of the neighbour
    return (pos[None, :] <= Rs[:, None]).mean(1)
