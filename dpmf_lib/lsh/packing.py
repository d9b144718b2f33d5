"""Packed binary codes (thesis Section 5.4): int8 ±1 sign codes ↔ uint64 words (bit j = word j//64, bit j%64; set for
+1; padding bits of the last word 0).

- :func:`pack_codes` / :func:`unpack_codes` (numba kernels of :mod:`dpmf_lib.lsh._kernels`) and
  :func:`pack_codes_reference` (numpy ``packbits``);
- ``_as_signs`` / ``_as_packed`` — the checks of a sign code and of a packed code, shared by the encoders and the
  search.

Used by :mod:`dpmf_lib.lsh.encoders` (code statistics) and :mod:`dpmf_lib.lsh.search` (Hamming scans, estimators).
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from . import _kernels as K


def _as_signs(codes) -> np.ndarray:
    S = np.asarray(codes)
    if S.ndim == 1:
        S = S[None, :]
    if S.ndim != 2:
        raise ParameterError(f"codes must be a (n, L) array of ±1, got shape {S.shape}")
    if S.dtype != np.int8:
        if not np.isin(S, (-1, 1)).all():
            raise ParameterError("codes must contain only -1 and +1 (use encode_* to produce them)")
        S = S.astype(np.int8)
    return np.ascontiguousarray(S)


def pack_codes(codes) -> np.ndarray:
    """(n, L) ±1 → (n, ceil(L/64)) uint64, padding bits 0."""
    return K.pack_signs_kernel(_as_signs(codes))


def pack_codes_reference(codes) -> np.ndarray:
    S = _as_signs(codes)
    n, L = S.shape
    nw = (L + 63) // 64
    bits = np.zeros((n, nw * 64), np.uint8)
    bits[:, :L] = S > 0
    return np.packbits(bits, axis=1, bitorder="little").view("<u8").astype(np.uint64).reshape(n, nw)


def unpack_codes(packed, L: int) -> np.ndarray:
    P = _as_packed(packed)
    if not 0 < L <= 64 * P.shape[1]:
        raise ParameterError(f"L={L} does not fit {P.shape[1]} words of 64 bits")
    return K.unpack_codes_kernel(P, int(L))


def _as_packed(P, name="codes") -> np.ndarray:
    P = np.asarray(P)
    if P.ndim == 1:
        P = P[None, :]
    if P.dtype != np.uint64 or P.ndim != 2:
        raise ParameterError(f"{name} must be packed codes: a (n, words) uint64 array (see pack_codes); got "
                             f"{P.dtype} {P.shape}")
    if P.shape[1] == 0:
        raise ParameterError(f"{name} has 0 words per code: packed codes need ceil(L / 64) >= 1 words (see pack_codes)")
    return np.ascontiguousarray(P)
