"""Cholesky factorisation and triangular solves (numba, float64): the one copy that the local ridge of
:mod:`~dpmf_lib.privacy.posterior_sampling` and the exact Gibbs blocks of :mod:`~dpmf_lib.privacy.exact_gibbs` share."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _cholesky(A):
    """Lower-triangular L with A = L Lᵀ for symmetric positive definite A (float64): the one factorisation of the
    local ridge and the exact Gibbs blocks."""
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = A[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                L[i, i] = np.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    return L


@njit(cache=True)
def _solve_lower(L, b):
    """y with L y = b, L lower triangular (forward substitution)."""
    n = L.shape[0]
    y = np.empty(n)
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= L[i, k] * y[k]
        y[i] = s / L[i, i]
    return y


@njit(cache=True)
def _solve_upper_t(L, y):
    """x with Lᵀ x = y, L lower triangular (back substitution)."""
    n = L.shape[0]
    x = np.empty(n)
    for i in range(n - 1, -1, -1):
        s = y[i]
        for k in range(i + 1, n):
            s -= L[k, i] * x[k]
        x[i] = s / L[i, i]
    return x


@njit(cache=True)
def _cholesky_solve(A, b):
    """Solve A x = b for symmetric positive definite A (Cholesky, then two triangular solves; float64)."""
    L = _cholesky(A)
    return _solve_upper_t(L, _solve_lower(L, b))
