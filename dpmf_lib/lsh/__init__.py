"""Binary sketches for cosine similarity (Balu 2016 thesis, chapter 5): encoders and search.

Encoders (:mod:`dpmf_lib.lsh.encoders`): ``gaussian_projections``, ``tight_frame``, ``encode_lsh``,
``encode_lsh_packed``, ``encode_qolsh``, ``encode_antisparse`` (LP or facet solver), ``encode_optimal``,
``encode(X, W, method, M)``, ``frame_for``; code statistics ``mse``, ``code_entropy``, ``objective``, ``reconstruct``.

Packing (:mod:`dpmf_lib.lsh.packing`): ``pack_codes``/``unpack_codes``, ``pack_codes_reference``.

Search (:mod:`dpmf_lib.lsh.search`): ``hamming``, ``hamming_knn``, ``asym_dot``
(eq. 5.3), ``asym_cos`` (eq. 5.13), ``asym_scores``, ``build_index``/``SketchIndex``, ``two_stage_search``,
``exact_nn``, ``recall_at``.
"""

from .encoders import (METHODS, code_entropy, encode, encode_antisparse, encode_lsh, encode_lsh_packed,
                       encode_optimal,
                       encode_optimal_reference, encode_qolsh, encode_qolsh_reference, frame_for, gaussian_projections,
                       mse, normalize_rows, objective, random_unit_vectors, reconstruct, tight_frame)
from .packing import pack_codes, pack_codes_reference, unpack_codes
from .search import (SketchIndex, asym_cos, asym_dot, asym_scores, build_index, exact_nn, hamming, hamming_knn,
                     hamming_knn_reference, hamming_reference, recall_at, recon_norms, two_stage_search)

__all__ = [
    "METHODS", "SketchIndex", "asym_cos", "asym_dot", "asym_scores", "build_index", "code_entropy", "encode",
    "encode_antisparse", "encode_lsh", "encode_lsh_packed", "encode_optimal", "encode_optimal_reference",
    "encode_qolsh",
    "encode_qolsh_reference", "exact_nn", "frame_for", "gaussian_projections", "hamming", "hamming_knn",
    "hamming_knn_reference", "hamming_reference", "mse", "normalize_rows", "objective", "pack_codes",
    "pack_codes_reference", "random_unit_vectors", "recall_at", "recon_norms", "reconstruct", "tight_frame",
    "two_stage_search", "unpack_codes",
]
