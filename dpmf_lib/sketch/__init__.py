"""Count-sketch matrix factorization with data clipping (Balu 2016, thesis chapter 4).

The thesis's "data-clipped privacy" (4.2) skips ratings whose loss exceeds a threshold it calls ε. No noise is added:
the same data and seed give a bit-identical release, so no finite differential-privacy ε holds. The workbook calls the
parameter a clipping threshold (``clip``), never ε.

Public API
- hashing:  :func:`hashing.make_salts`, :func:`hashing.address_sign` (numba) / :func:`hashing.address_sign_ref`,
            :func:`hashing.mix64` / :func:`hashing.mix64_ref` — splitmix64 finalizer.
- models:   :func:`make_model` (``regular`` | ``count_sketch`` | ``feature_hashing``), :class:`MFModel`,
            :func:`width_from_gain` (eq. 4.9).
- kernels:  :mod:`dpmf_lib.sketch.kernels` (numba) with references in :mod:`dpmf_lib.sketch.reference`.
- protocol: :func:`load_dataset`, :func:`prepare_split`, :func:`train`, :func:`fit_eval`, :func:`line_search`,
            :func:`rmse`, :func:`kld_gaussian` (eq. 4.15); :func:`fit_eval_many` / :func:`protocol.fit_runs`: the
            runs of a search stage trained together, bit for bit ``fit_eval``'s results.
"""

from .hashing import make_salts
from .model import METHODS, MFModel, make_model, width_from_gain
from .protocol import (PreparedSplit, Triples, fit_eval, fit_eval_many, kld_gaussian, line_search, load_dataset,
                       mean_correction, prediction_errors, prepare_split, rmse, train)

__all__ = ["METHODS", "MFModel", "PreparedSplit", "Triples", "fit_eval", "fit_eval_many", "kld_gaussian", "line_search",
           "load_dataset", "make_model", "make_salts", "mean_correction", "prediction_errors", "prepare_split", "rmse",
           "train", "width_from_gain"]
