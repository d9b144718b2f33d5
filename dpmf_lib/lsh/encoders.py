"""Binary sketch encoders of thesis chapter 5 (Balu 2016): frames and sign-code encoders.

Every encoder maps unit vectors ``X`` (n, d) to sign codes ``b ∈ {−1, +1}^L`` (int8, ``sign(0) = +1``) with respect to a
frame ``W`` (d, L) whose *columns* are the projection vectors ``w_j``; the reconstruction is ``x̂ = Wb / ‖Wb‖``
(eq. 5.4).

- :func:`gaussian_projections` — L i.i.d. directions uniform on the unit sphere (Charikar's LSH, Table 5.1 "LSH").
- :func:`tight_frame` — QR of an L × d Gaussian matrix, ``W = Qᵀ`` so that ``W Wᵀ = I_d`` (eq. 5.9) when L ≥ d
  (orthonormal columns, ``Wᵀ W = I_L``, when L < d).
- :func:`encode_lsh` — project and sign (eq. 5.1); with a tight frame this is "LSH+frame".
- :func:`encode_qolsh` — quantization-optimised LSH (eqs. 5.10–5.12): greedy single-bit flips from the LSH code, each
  maximising ``cos(x, Wb) = xᵀWb / ‖Wb‖``, incremental update of ``Wb`` (eq. 5.11), at most ``M`` flips, stop at a local
  optimum (no single flip strictly improves). numba kernel; :func:`encode_qolsh_reference` is the plain version.
- :func:`encode_antisparse` — anti-sparse coding (eq. 5.8): ``v* = argmin ‖v‖∞ s.t. Wv = x`` as a linear program
  (SciPy ``linprog``, HiGHS; variables (v, t), minimise t, −t ≤ v_j ≤ t), then ``b = sign(v*)``; or exactly by
  enumerating the facets of the zonotope {Wu : ‖u‖∞ ≤ 1} (:func:`encode_antisparse_facets`, LP duality; same codes,
  ~100× faster for d = 8, L = 16).
- :func:`encode_optimal` — the exhaustive optimal quantizer (eqs. 5.5–5.6): the code whose normalised centroid
  ``Wb/‖Wb‖`` has the largest inner product with x, over all 2^L codes (L ≤ 20; ±b are searched as one pair since their
  centroids are opposite).

Choices the thesis leaves open (stated here and in the notebooks): the sign of 0 is +1; qoLSH compares objectives in
float64 and only takes strict improvements; the anti-sparse LP is solved to HiGHS' default tolerances and components of
``v*`` that are exactly 0 get +1.
"""

from __future__ import annotations

import numpy as np

from .. import validate
from ..errors import ParameterError
from . import _kernels as K
from .packing import pack_codes

METHODS = ("lsh", "lsh+frame", "antisparse", "optimal", "qolsh")


# ----------------------------------------------------------------------------------------------------------- checks
def _check_dims(d, L):
    validate.integer(d, "d")
    validate.integer(L, "L")


def as_vectors(X, name="X", d=None) -> np.ndarray:
    """Contiguous float32 (n, d) array, checked finite; raises ParameterError naming ``name``."""
    X = np.asarray(X)
    if X.ndim == 1:
        X = X[None, :]
    if X.ndim != 2:
        raise ParameterError(f"{name} must be a 2-d array (n, d), got shape {X.shape}")
    if d is not None and X.shape[1] != d:
        raise ParameterError(f"{name} has dimension {X.shape[1]} but the frame has d = {d}; encode with a frame of "
                             f"the same dimension")
    X = np.ascontiguousarray(X, dtype=np.float32)
    if not np.isfinite(X).all():
        raise ParameterError(f"{name} contains NaN or infinite values; drop or impute them before encoding")
    return X


def as_frame(W) -> np.ndarray:
    W = np.asarray(W)
    if W.ndim != 2:
        raise ParameterError(f"W must be a (d, L) frame matrix, got shape {W.shape}")
    W = np.ascontiguousarray(W, dtype=np.float32)
    if not np.isfinite(W).all():
        raise ParameterError("W contains NaN or infinite values")
    return W


def normalize_rows(X) -> np.ndarray:
    """Rows scaled to unit Euclidean norm (float32); zero rows raise ParameterError (no direction to encode)."""
    X = np.asarray(X, dtype=np.float64)
    nrm = np.linalg.norm(X, axis=1, keepdims=True)
    if (nrm == 0).any():
        raise ParameterError(f"{int((nrm == 0).sum())} zero vector(s) cannot be normalised; drop them first")
    return np.ascontiguousarray(X / nrm, dtype=np.float32)


def random_unit_vectors(n, d, seed) -> np.ndarray:
    """n vectors uniform on the unit sphere of R^d (normal draws, normalised), float32 — the thesis' synthetic set."""
    _check_dims(d, 1)
    return normalize_rows(validate.generator(seed).standard_normal((int(n), d)))


# ----------------------------------------------------------------------------------------------------------- frames
def gaussian_projections(d: int, L: int, seed=0) -> np.ndarray:
    """(d, L) float32: L i.i.d. directions uniform on the unit sphere (columns of unit norm)."""
    _check_dims(d, L)
    G = validate.generator(seed).standard_normal((d, L))
    G /= np.linalg.norm(G, axis=0, keepdims=True)
    return np.ascontiguousarray(G, dtype=np.float32)


def tight_frame(d: int, L: int, seed=0) -> np.ndarray:
    """(d, L) float32 uniform tight frame (eq. 5.9): QR of an L × d Gaussian matrix, W = Qᵀ, so W Wᵀ = I_d (L ≥ d).

    For L < d the L columns are orthonormal instead (WᵀW = I_L), the orthogonal-projection case of Section 5.1.1.
    When L ≥ d the columns' squared norms sum to d (trace of WᵀW), d/L each on average (they are not all equal).
    """
    _check_dims(d, L)
    rng = validate.generator(seed)
    if L >= d:
        Q, R = np.linalg.qr(rng.standard_normal((L, d)))
        Q = Q * np.sign(np.diag(R))  # Haar-uniform Q (sign fix of the QR convention)
        W = Q.T
    else:
        Q, R = np.linalg.qr(rng.standard_normal((d, L)))
        W = Q * np.sign(np.diag(R))
    return np.ascontiguousarray(W, dtype=np.float32)


# ----------------------------------------------------------------------------------------------------------- encoders
def encode_lsh(X, W) -> np.ndarray:
    """Project and sign (eq. 5.1): int8 (n, L) codes ``sign(Wᵀx)``, sign(0) = +1."""
    W = as_frame(W)
    X = as_vectors(X, d=W.shape[0])
    return np.where(X @ W >= 0, 1, -1).astype(np.int8)


def encode_lsh_packed(X, W) -> np.ndarray:
    """Project and sign straight to packed uint64 codes (one BLAS product and one numba pass; no int8 codes)."""
    W = as_frame(W)
    X = as_vectors(X, d=W.shape[0])
    return K.pack_projections_kernel(np.ascontiguousarray(X @ W))


def objective(X, W, codes) -> np.ndarray:
    """The qoLSH objective (eq. 5.10) ``xᵀWb / ‖Wb‖`` of each row (float64): cos(x, x̂) for a unit x."""
    X = np.asarray(X, np.float64)
    Wb = np.asarray(codes, np.float64) @ np.asarray(W, np.float64).T
    nrm = np.linalg.norm(Wb, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(nrm > 0, (X * Wb).sum(1) / nrm, -np.inf)


def reconstruct(codes, W) -> np.ndarray:
    """x̂ = Wb / ‖Wb‖ (eq. 5.4), float32 (n, d)."""
    Wb = np.asarray(codes, np.float32) @ as_frame(W).T
    nrm = np.linalg.norm(Wb, axis=1, keepdims=True)
    nrm[nrm == 0] = 1.0
    return np.ascontiguousarray(Wb / nrm, dtype=np.float32)


def _check_M(M):
    return validate.integer(M, "M", lo=0, what="qoLSH (maximum number of bit flips)")


def encode_qolsh(X, W, M: int = 5, return_flips: bool = False):
    """qoLSH codes (eqs. 5.10–5.12), numba kernel. int8 (n, L); with ``return_flips`` also the flips made per vector."""
    W = as_frame(W)
    X = as_vectors(X, d=W.shape[0])
    M = _check_M(M)
    WT = np.ascontiguousarray(W.T, dtype=np.float64)
    G = np.ascontiguousarray(WT @ WT.T)
    from numba import get_num_threads

    n_chunks = max(1, min(len(X), 8 * get_num_threads()))
    codes, flips = K.qolsh_kernel(X, WT, G, M, n_chunks)
    return (codes, flips) if return_flips else codes


def encode_qolsh_reference(X, W, M: int = 5, return_trace: bool = False):
    """Plain numpy qoLSH (no incremental update: every candidate flip is re-evaluated with eq. 5.10 from scratch).

    With ``return_trace`` also returns, per vector, the list of objective values after each accepted flip (first entry:
    the LSH code's objective)."""
    W = as_frame(W)
    X = as_vectors(X, d=W.shape[0])
    M = _check_M(M)
    W64 = W.astype(np.float64)
    out = np.empty((len(X), W.shape[1]), np.int8)
    traces = []
    for i, x in enumerate(X.astype(np.float64)):
        p = x @ W64
        b = np.where(p >= 0, 1.0, -1.0)

        def obj(bb):
            xh = W64 @ bb
            nn = np.sqrt(xh @ xh)
            return (x @ xh) / nn if nn > np.sqrt(1e-12) else -np.inf

        cur = obj(b)
        tr = [cur]
        for _ in range(M):
            cands = np.empty(len(b))
            for j in range(len(b)):
                b[j] = -b[j]
                cands[j] = obj(b)
                b[j] = -b[j]
            j = int(np.argmax(cands))
            if not cands[j] > cur:
                break
            b[j] = -b[j]
            cur = cands[j]
            tr.append(cur)
        out[i] = b.astype(np.int8)
        traces.append(tr)
    return (out, traces) if return_trace else out


def encode_antisparse(X, W, return_linf: bool = False, solver: str = "lp"):
    """Anti-sparse coding (eq. 5.8) then sign.

    ``solver="lp"``: one HiGHS LP per vector (SciPy ``linprog``; ~1–3 ms per vector, like the thesis' 1.3 ms).
    ``solver="facets"``: the exact solution by enumerating the zonotope's facets (:func:`encode_antisparse_facets`),
    practical for small L and d only (C(L, d−1) facets), same codes up to measure-zero ties.
    """
    if solver == "facets":
        return encode_antisparse_facets(X, W, return_linf)
    if solver != "lp":
        raise ParameterError(f"anti-sparse solver must be 'lp' or 'facets', got {solver!r}")
    from scipy.optimize import linprog

    W = as_frame(W)
    X = as_vectors(X, d=W.shape[0])
    d, L = W.shape
    if L < d:
        raise ParameterError(f"anti-sparse coding needs an over-complete frame (L >= d), got d={d}, L={L}")
    W64 = W.astype(np.float64)
    c = np.zeros(L + 1)
    c[-1] = 1.0
    A_eq = np.hstack([W64, np.zeros((d, 1))])
    eye = np.eye(L)
    A_ub = np.vstack([np.hstack([eye, -np.ones((L, 1))]), np.hstack([-eye, -np.ones((L, 1))])])
    b_ub = np.zeros(2 * L)
    bounds = [(None, None)] * L + [(0, None)]
    out = np.empty((len(X), L), np.int8)
    linf = np.empty(len(X))
    for i, x in enumerate(X.astype(np.float64)):
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=x, bounds=bounds, method="highs")
        if res.status != 0:
            raise ParameterError(f"anti-sparse LP failed for vector {i}: {res.message} (is W of full row rank?)")
        v = res.x[:L]
        out[i] = np.where(v >= 0, 1, -1)
        linf[i] = res.x[-1]
    return (out, linf) if return_linf else out


class _Facets:
    """Facets of the zonotope Z = {Wu : ‖u‖∞ ≤ 1}, cached per frame (see :func:`encode_antisparse_facets`)."""

    cache: dict = {}

    @classmethod
    def of(cls, W):
        key = (W.shape, W.tobytes())
        if key not in cls.cache:
            from itertools import combinations

            d, L = W.shape
            W64 = W.astype(np.float64)
            F = np.array(list(combinations(range(L), d - 1)), dtype=np.int64)  # (C, d-1)
            A = np.transpose(W64[:, F], (1, 2, 0))  # (C, d-1, d): rows w_j^T, j in F
            _, sv, Vt = np.linalg.svd(A)
            Y = Vt[:, -1, :]  # normal to the d-1 generators of the facet
            ok = sv[:, -1] > 1e-9 if d > 1 else np.ones(len(F), bool)
            F, Y = F[ok], Y[ok]
            Y = Y / np.abs(Y @ W64).sum(1, keepdims=True)  # ‖Wᵀy‖₁ = 1: vertices of the polar of Z
            P = np.linalg.pinv(W64[:, F].transpose(1, 0, 2))  # (C, d-1, d): pseudo-inverse of W_F
            cls.cache = {key: (F, np.ascontiguousarray(Y), P)}  # keep one frame only
        return cls.cache[key]


def encode_antisparse_facets(X, W, return_linf: bool = False, chunk: int = 4096):
    """Exact anti-sparse coding (eq. 5.8) by facet enumeration — a documented alternative to the LP.

    LP duality: min ‖v‖∞ s.t. Wv = x equals max xᵀy s.t. ‖Wᵀy‖₁ ≤ 1, a polytope whose vertices are the normals y_F of
    the zonotope's facets (orthogonal to d−1 columns w_j, j ∈ F), scaled to ‖Wᵀy_F‖₁ = 1. So ‖v*‖∞ = max_F |xᵀy_F|;
    by complementary slackness the L−d+1 components outside the best F sit at the limit with the sign of w_jᵀy*
    (the thesis: "L − d + 1 components of v* are stuck to the limit"), and the d−1 free ones solve
    W_F v_F = x − Σ_{j∉F} v_j w_j. All C(L, d−1) facets are scored with one matrix product (11,440 for d=8, L=16).
    """
    W = as_frame(W)
    X = as_vectors(X, d=W.shape[0])
    d, L = W.shape
    if L < d or d < 2:
        raise ParameterError(f"facet enumeration needs 2 <= d <= L, got d={d}, L={L} (use solver='lp')")
    from math import comb

    if comb(L, d - 1) > 2_000_000:
        raise ParameterError(f"facet enumeration needs C(L, d-1) <= 2e6 facets, got C({L}, {d - 1}); "
                             f"use solver='lp'")
    F, Y, P = _Facets.of(W)
    YT = np.ascontiguousarray(Y.T)
    from numba import get_num_threads

    n_chunks = 4 * get_num_threads()
    W64 = W.astype(np.float64)
    out = np.empty((len(X), L), np.int8)
    linf = np.empty(len(X))
    for s in range(0, len(X), chunk):
        Xc = X[s : s + chunk].astype(np.float64)
        f, sv = K.best_facet_kernel(X[s : s + chunk], YT, n_chunks)  # argmax_F |xᵀy_F| (numba)
        t = np.abs(sv)
        y = Y[f] * np.sign(sv)[:, None]  # (c, d), xᵀy = t
        v = t[:, None] * np.where(y @ W64 >= 0, 1.0, -1.0)  # saturated components
        Fi = F[f]  # (c, d-1)
        rows = np.arange(len(f))[:, None]
        v[rows, Fi] = 0.0
        r = Xc - v @ W64.T  # x minus the saturated part
        v[rows, Fi] = np.einsum("cij,cj->ci", P[f], r)
        out[s : s + chunk] = np.where(v >= 0, 1, -1)
        linf[s : s + chunk] = t
    return (out, linf) if return_linf else out


def all_codes(L: int) -> np.ndarray:
    """All 2^(L−1) sign codes with b_{L−1} = +1 (one of each ± pair), int8 (2^(L−1), L)."""
    if L > 20:
        raise ParameterError(f"the exhaustive optimal quantizer is limited to L <= 20 (2^L centroids), got L={L}")
    m = np.arange(2 ** (L - 1), dtype=np.int64)
    bits = (m[:, None] >> np.arange(L - 1)) & 1
    B = np.empty((len(m), L), np.int8)
    B[:, : L - 1] = np.where(bits == 1, 1, -1)
    B[:, L - 1] = 1
    return B


def encode_optimal(X, W, chunk: int = 256) -> np.ndarray:
    """Exhaustive optimal quantizer (eqs. 5.5–5.6), L ≤ 20: argmax over all codes of xᵀ(Wb/‖Wb‖).

    Codes come in ± pairs with opposite centroids, so half of them are scored and the sign of the best inner product
    picks the member of the pair. Degenerate codes (Wb = 0) are never selected. Vectorised with BLAS in chunks.
    """
    W = as_frame(W)
    X = as_vectors(X, d=W.shape[0])
    L = W.shape[1]
    B = all_codes(L)
    Cn = B.astype(np.float32) @ W.T  # (2^(L-1), d)
    nrm = np.linalg.norm(Cn, axis=1)
    ok = nrm > 1e-6
    Cn[ok] /= nrm[ok, None]
    Cn[~ok] = 0.0
    Cn = np.ascontiguousarray(Cn.T)  # (d, 2^(L-1))
    out = np.empty((len(X), L), np.int8)
    for s in range(0, len(X), chunk):
        S = X[s : s + chunk] @ Cn
        j = np.argmax(np.abs(S), axis=1)
        sg = np.where(S[np.arange(len(j)), j] >= 0, 1, -1).astype(np.int8)
        out[s : s + chunk] = B[j] * sg[:, None]
    return out


def encode_optimal_reference(X, W) -> np.ndarray:
    """Plain reference: loops over all 2^L codes in float64 (for small L in tests)."""
    W = as_frame(W).astype(np.float64)
    L = W.shape[1]
    if L > 14:
        raise ParameterError("encode_optimal_reference is for L <= 14 (tests); use encode_optimal")
    m = np.arange(2**L)
    B = np.where(((m[:, None] >> np.arange(L)) & 1) == 1, 1.0, -1.0)
    C = B @ W.T
    nrm = np.linalg.norm(C, axis=1)
    out = np.empty((len(X), L), np.int8)
    for i, x in enumerate(np.asarray(X, np.float64)):
        with np.errstate(divide="ignore", invalid="ignore"):
            val = np.where(nrm > 1e-9, (C @ x) / nrm, -np.inf)
        out[i] = B[int(np.argmax(val))]
    return out


def encode(X, W, method: str, M: int = 5, antisparse_solver: str = "lp") -> np.ndarray:
    """Dispatch by name: ``lsh`` / ``lsh+frame`` (both project-and-sign with the given W), ``qolsh``, ``antisparse``
    (``antisparse_solver`` "lp" or "facets": same codes), ``optimal``. The frame (Gaussian for "lsh", tight for the
    others) is the caller's choice."""
    if method in ("lsh", "lsh+frame"):
        return encode_lsh(X, W)
    if method == "qolsh":
        return encode_qolsh(X, W, M)
    if method == "antisparse":
        return encode_antisparse(X, W, solver=antisparse_solver)
    if method == "optimal":
        return encode_optimal(X, W)
    raise ParameterError(f"unknown encoding method {method!r}; choose one of {METHODS}")


def frame_for(method: str, d: int, L: int, seed=0) -> np.ndarray:
    """The frame the thesis pairs with a method: Gaussian projections for "lsh", a tight frame for all others."""
    if method not in METHODS:
        raise ParameterError(f"unknown encoding method {method!r}; choose one of {METHODS}")
    return gaussian_projections(d, L, seed) if method == "lsh" else tight_frame(d, L, seed)


# ----------------------------------------------------------------------------------------------------------- code stats
def mse(X, W, codes) -> float:
    """Mean squared reconstruction error E‖x − Wb/‖Wb‖‖² (squared Euclidean distance per vector, averaged)."""
    Xh = reconstruct(codes, W).astype(np.float64)
    return float(((np.asarray(X, np.float64) - Xh) ** 2).sum(1).mean())


def code_entropy(codes) -> float:
    """Empirical (plug-in) entropy in bits of the code distribution: −Σ p̂ log2 p̂ over distinct codes."""
    P = pack_codes(codes) if np.asarray(codes).dtype == np.int8 else np.asarray(codes)
    _, cnt = np.unique(P, axis=0, return_counts=True)
    p = cnt / cnt.sum()
    return float(-(p * np.log2(p)).sum())
