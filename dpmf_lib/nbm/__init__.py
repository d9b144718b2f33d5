"""Differentially private probabilistic neighbourhood models (the "pnbm" paper): DPSGD-PNBM, DPPS-PNBM, baselines.

Public API
- :func:`train_pnbm` (SGD eq. 4-5; DPSGD-PNBM with ``epsilon``), :func:`sample_pnbm` (SGLD eq. 11; DPPS-PNBM with
  ``epsilon``), :func:`train_pnbm_clipped` (DPSGD-PNBM with per-user L1 clipping, ours), :func:`train_dpsgd_mf` (DPSGD-MF baseline), :func:`knn_rmse` (non-private PCC / COS kNN);
- :func:`prepare`, :func:`predict`, :func:`gradient`, :func:`rmse`; similarities :func:`pcc`, :func:`cosine`;
- accounting (:mod:`dpmf_lib.nbm.accounting`): ``laplace_scale``, ``epsilon_per_iteration``, ``amplified_epsilon``,
  ``posterior_scale``, ``loglik_bound``, ``pair_inclusion_prob`` (H), ``pair_inclusion_prob_paper``;
- data helpers (:mod:`dpmf_lib.nbm.data`): ``load``, ``folds``, ``users_with_more_than``, ``trim_to_tau``;
- kernels in :mod:`dpmf_lib.nbm.kernels`, plain references in :mod:`dpmf_lib.nbm.reference`.
"""

from . import accounting
from .data import folds, load, trim_to_tau, users_with_more_than
from .model import (MFResult, NBMData, PNBMResult, clipped_gradient, gradient, knn_rmse, predict, prepare, rmse,
                    sample_pnbm, sample_pnbm_batch, train_dpsgd_mf, train_pnbm, train_pnbm_clipped)
from .similarity import cosine, item_means, pcc

__all__ = ["MFResult", "NBMData", "PNBMResult", "accounting", "clipped_gradient", "cosine", "folds", "gradient", "item_means", "knn_rmse",
           "load", "pcc", "predict", "prepare", "rmse", "sample_pnbm", "sample_pnbm_batch", "train_dpsgd_mf", "train_pnbm", "train_pnbm_clipped",
           "trim_to_tau",
           "users_with_more_than"]
