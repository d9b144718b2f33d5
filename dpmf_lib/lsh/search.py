"""Search with binary sketches (thesis Section 5.4): packed codes, Hamming scan, asymmetric estimators, two-stage
search.

- packed codes (int8 ±1 codes ↔ uint64 words) come from :mod:`dpmf_lib.lsh.packing`.
- :func:`hamming` — all Hamming distances by hardware popcount (numba); :func:`hamming_reference` unpacks and compares.
- :func:`hamming_knn` — the k nearest codes of each query code (ties → smaller index): a one-pass scan of the database
  in transposed L1 blocks with a vectorised popcount and per-query rejection threshold, then a counting sort on
  distance (``_kernels.hamming_knn_kernel``); :func:`hamming_knn_reference` is a stable argsort.
- :func:`asym_dot` (eq. 5.3, ``Σ_j (yᵀw_j) b_j``) and :func:`asym_cos` (eq. 5.13, the same divided by ``‖Wb‖``): dense
  references over all pairs; :func:`asym_scores` scores given candidates from packed codes (numba, byte lookup tables).
- :class:`SketchIndex` + :func:`two_stage_search` — shortlist the ``shortlist`` (paper: 1,000) database vectors nearest
  to the query *sketch* in Hamming distance (ordering by eq. 2.19 is ordering by Hamming distance), then re-rank the
  shortlist by an asymmetric estimate from the un-quantised query (default eq. 5.13).
- :func:`exact_nn` / :func:`recall_at` — ground truth by exact cosine and recall@R (share of queries whose true nearest
  neighbour is ranked within the first R).

The query sketch used in the Hamming stage is encoded with the same method as the database (for qoLSH, the qoLSH code
of the query) — the thesis does not say; this is the natural reading of "similarities based on the binary codes".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from ..metrics import recall_at  # noqa: F401  (recall@R, in dpmf_lib.metrics; re-exported by dpmf_lib.lsh)
from . import _kernels as K
from .encoders import as_frame, as_vectors, encode, frame_for, normalize_rows
from .packing import _as_packed, _as_signs, pack_codes, unpack_codes


def _check_k(k, n: int, what: str = "k") -> int:
    """k must be an integer (not a bool) in [1, n]."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise ParameterError(f"{what} must be an integer in [1, {n}] (database size), got {k!r}; ask for at most as "
                             f"many neighbours as there are database codes")
    return int(k)


def _check_n_bits(n_bits, Q, D) -> int:
    """``n_bits`` (the code length L) must agree with the packed width: 64·(words−1) < L ≤ 64·words, and the padding
    bits above L in the last word must be 0 in every query and database code (else distances exceed L, and the
    kernels' per-distance buffers, sized L + 2, would be written past their end)."""
    nw = Q.shape[1]
    if n_bits is None:
        return 64 * nw
    if isinstance(n_bits, (bool, np.bool_)) or not isinstance(n_bits, (int, np.integer)):
        raise ParameterError(f"n_bits must be the code length L (an integer), got {n_bits!r}")
    nb = int(n_bits)
    if not 64 * (nw - 1) < nb <= 64 * nw:
        raise ParameterError(f"n_bits={nb} does not match codes of {nw} word(s) of 64 bits: need "
                             f"{64 * (nw - 1) + 1} <= n_bits <= {64 * nw}; pass the L the codes were packed with "
                             f"(or leave n_bits=None)")
    r = nb - 64 * (nw - 1)
    if r < 64:
        mask = ~np.uint64((1 << r) - 1)
        for name, P in (("q_packed", Q), ("db_packed", D)):
            bad = np.flatnonzero(P[:, -1] & mask)
            if len(bad):
                raise ParameterError(f"{name} row {int(bad[0])} has bits set above n_bits={nb} (padding bits must be "
                                     f"0): pass the L the codes were packed with, or pack them with pack_codes")
    return nb


# ----------------------------------------------------------------------------------------------------------- Hamming
def hamming(q_packed, db_packed) -> np.ndarray:
    """(nq, n) int32 Hamming distances between packed codes (numba, popcount)."""
    Q, D = _as_packed(q_packed, "q_packed"), _as_packed(db_packed, "db_packed")
    if Q.shape[1] != D.shape[1]:
        raise ParameterError(f"query codes have {Q.shape[1]} words, database codes {D.shape[1]}: same L needed")
    return K.hamming_matrix_kernel(Q, D)


def hamming_reference(q_codes, db_codes) -> np.ndarray:
    """Unpacked reference: number of differing ±1 entries."""
    A, B = _as_signs(q_codes), _as_signs(db_codes)
    return (A[:, None, :] != B[None, :, :]).sum(2).astype(np.int32)


def hamming_knn(q_packed, db_packed, k: int, n_bits: int | None = None):
    """(indices (nq, k) int64, distances (nq, k) int32) of the k smallest Hamming distances, ties → smaller index.

    ``k`` in [1, len(db)] (so no padding row −1 is ever returned); ``n_bits``: the code length L the codes were packed
    with (default 64 · words); it must satisfy 64·(words−1) < L ≤ 64·words with the padding bits above L zero, else
    :class:`~dpmf_lib.errors.ParameterError`."""
    Q, D = _as_packed(q_packed, "q_packed"), _as_packed(db_packed, "db_packed")
    if Q.shape[1] != D.shape[1]:
        raise ParameterError(f"query codes have {Q.shape[1]} words, database codes {D.shape[1]}: same L needed")
    k = _check_k(k, len(D))
    nb = _check_n_bits(n_bits, Q, D)
    return K.hamming_knn_kernel(Q, D, k, nb)


def hamming_knn_reference(q_codes, db_codes, k: int):
    Dm = hamming_reference(q_codes, db_codes)
    idx = np.argsort(Dm, axis=1, kind="stable")[:, :k]
    return idx.astype(np.int64), np.take_along_axis(Dm, idx, 1)


# ----------------------------------------------------------------------------------------------------------- estimators
def asym_dot(Y, codes, W) -> np.ndarray:
    """Eq. (5.3): d_a(y, b(x)) = Σ_j (yᵀw_j) b_j(x) for all pairs, (nq, n) float64 (dense reference)."""
    W = as_frame(W).astype(np.float64)
    return (np.asarray(Y, np.float64) @ W) @ _as_signs(codes).astype(np.float64).T


def asym_cos(Y, codes, W) -> np.ndarray:
    """Eq. (5.13): cos(y, x̂) = yᵀWb / ‖Wb‖ for all pairs, (nq, n) float64 (dense reference; y of unit norm)."""
    S = _as_signs(codes).astype(np.float64)
    nrm = np.linalg.norm(S @ as_frame(W).astype(np.float64).T, axis=1)
    return asym_dot(Y, S, W) / nrm[None, :]


def recon_norms(packed, W, chunk: int = 65536) -> np.ndarray:
    """‖Wb‖ of every packed code, float32 (n,) — unpack in chunks, BLAS product."""
    P = _as_packed(packed)
    W = as_frame(W)
    out = np.empty(len(P), np.float32)
    for s in range(0, len(P), chunk):
        S = unpack_codes(P[s : s + chunk], W.shape[1]).astype(np.float32)
        out[s : s + chunk] = np.linalg.norm(S @ W.T, axis=1)
    return out


def asym_scores(Y, packed, W, candidates, estimator: str = "cos", norms=None) -> np.ndarray:
    """Asymmetric scores of candidate ids (nq, S) (−1 = none → −inf): eq. 5.13 (``cos``) or eq. 5.3 (``dot``)."""
    if estimator not in ("cos", "dot"):
        raise ParameterError(f"estimator must be 'cos' (eq. 5.13) or 'dot' (eq. 5.3), got {estimator!r}")
    W = as_frame(W)
    Y = as_vectors(Y, "Y", d=W.shape[0])
    P = _as_packed(packed)
    if norms is None:
        norms = recon_norms(P, W) if estimator == "cos" else np.ones(len(P), np.float32)
    if P.shape[1] != (W.shape[1] + 63) // 64:
        raise ParameterError(f"packed codes have {P.shape[1]} word(s) but the frame W has L = {W.shape[1]} columns "
                             f"({(W.shape[1] + 63) // 64} word(s)): pass the codes packed from this frame")
    norms = np.ascontiguousarray(norms, np.float32)
    if norms.shape != (len(P),):
        raise ParameterError(f"norms must hold one value per packed code, shape ({len(P)},), got {norms.shape}")
    cand = np.ascontiguousarray(candidates, dtype=np.int64)
    if cand.ndim != 2 or len(cand) != len(Y):
        raise ParameterError(f"candidates must be (n_queries, S) = ({len(Y)}, S), got {cand.shape}")
    if cand.size and (cand.min() < -1 or cand.max() >= len(P)):
        raise ParameterError(f"candidates must be database ids in [0, {len(P) - 1}] or -1 (none), got values in "
                             f"[{cand.min()}, {cand.max()}]")
    C8 = P.view(np.uint8)
    return K.asym_scores_kernel(np.ascontiguousarray(Y @ W), C8, norms, cand, estimator == "cos")


# ----------------------------------------------------------------------------------------------------------- search
@dataclass(frozen=True)
class SketchIndex:
    """Database sketches: frame W (d, L), packed codes (n, words), ‖Wb‖ per code, and how they were made."""

    W: np.ndarray
    codes: np.ndarray
    norms: np.ndarray
    method: str
    M: int = 0
    antisparse_solver: str = "lp"

    @property
    def L(self) -> int:
        return self.W.shape[1]

    @property
    def n(self) -> int:
        return self.codes.shape[0]

    def encode(self, X) -> np.ndarray:
        """Packed codes of new vectors with the index' method and frame."""
        return pack_codes(encode(X, self.W, self.method, self.M, self.antisparse_solver))


def build_index(X, method: str, L: int | None = None, *, W=None, M: int = 5, seed=0,
                antisparse_solver: str = "lp") -> SketchIndex:
    """Encode database vectors X (unit norm) with ``method``; the frame is ``W`` or :func:`frame_for` (method, d, L)."""
    X = as_vectors(X)
    if W is None:
        if L is None:
            raise ParameterError("give either the number of bits L or a frame W")
        W = frame_for(method, X.shape[1], int(L), seed)
    W = as_frame(W)
    packed = pack_codes(encode(X, W, method, M, antisparse_solver))
    return SketchIndex(W=W, codes=packed, norms=recon_norms(packed, W), method=method, M=int(M),
                       antisparse_solver=antisparse_solver)


def two_stage_search(index: SketchIndex, Y, shortlist: int = 1000, R: int | None = None, estimator: str = "cos",
                     q_codes=None) -> np.ndarray:
    """Two-stage search: Hamming shortlist of ``shortlist`` codes, re-ranked by the asymmetric estimator.

    Returns (nq, R) int64 database ids in final rank order (R ≤ shortlist; default R = shortlist). ``q_codes``: packed
    query sketches if already computed (else encoded with the index' method).
    """
    Y = as_vectors(Y, "Y", d=index.W.shape[0])
    S = min(int(shortlist), index.n)
    R = S if R is None else int(R)
    if not 1 <= R <= S:
        raise ParameterError(f"R must be in [1, shortlist={S}], got {R}")
    Qc = index.encode(Y) if q_codes is None else _as_packed(q_codes, "q_codes")
    cand, _ = hamming_knn(Qc, index.codes, S, n_bits=index.L)
    sc = asym_scores(Y, index.codes, index.W, cand, estimator, norms=index.norms)
    order = np.argsort(-sc, axis=1, kind="stable")[:, :R]
    return np.take_along_axis(cand, order, 1)


def exact_nn(Y, X, chunk: int = 256) -> np.ndarray:
    """Index of the database vector with the largest cosine to each query (rows normalised here), int64 (nq,)."""
    Xn = normalize_rows(X)
    Yn = normalize_rows(Y)
    out = np.empty(len(Yn), np.int64)
    for s in range(0, len(Yn), chunk):
        out[s : s + chunk] = np.argmax(Yn[s : s + chunk] @ Xn.T, axis=1)
    return out
