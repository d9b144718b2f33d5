"""Random numbers for the kernels: a splitmix64 stream (:mod:`dpmf_lib.counter_rng`; ``splitmix_next`` is re-exported
here for :mod:`dpmf_lib.mf.sgld` and :mod:`dpmf_lib.mf.reference`), Box–Muller normals, and the Gaussian lookup table.

Every stream is derived from ``(seed, round, block)`` with :func:`stream_seed`, so results do not depend on numba's global
RNG state or on which thread ran a block. Same seed + one thread → identical bytes.

Gaussian lookup table (Liu et al. 2015, Section 5.4): ``size`` standard normals are drawn once (float32). A noise vector
of length ``m`` is the contiguous segment ``table[o : o + m]`` starting at a uniformly random offset ``o``; the table is
padded by wrapping its start so segments never need a modulo (``GaussianTable.extended(m)``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..counter_rng import MIX_M1, splitmix_next
from ..errors import ParameterError

_S11 = np.uint64(11)
_TWO_M53 = 1.0 / 9007199254740992.0


@njit(cache=True, inline="always")
def uniform01(state):
    """``(new_state, u)`` with ``u`` uniform on (0, 1) (53-bit, never exactly 0)."""
    state, z = splitmix_next(state)
    return state, ((z >> _S11) + np.uint64(1)) * _TWO_M53 * (1.0 - _TWO_M53)


@njit(cache=True, inline="always")
def randint_below(state, n):
    """``(new_state, k)`` with ``k`` uniform on ``0..n-1`` (multiply-shift; bias < n / 2**32)."""
    state, z = splitmix_next(state)
    return state, np.int64(((z >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


@njit(cache=True)
def standard_normals(state, out):
    """Fill ``out`` (float32) with N(0, 1) draws by Box–Muller; returns the new state."""
    n = out.shape[0]
    k = 0
    while k < n:
        state, u1 = uniform01(state)
        state, u2 = uniform01(state)
        rad = np.sqrt(-2.0 * np.log(u1))
        out[k] = rad * np.cos(2.0 * np.pi * u2)
        if k + 1 < n:
            out[k + 1] = rad * np.sin(2.0 * np.pi * u2)
        k += 2
    return state


@njit(cache=True)
def _mix(a, b):
    s = np.uint64(a) ^ (np.uint64(b) * MIX_M1)
    s, z = splitmix_next(s)
    return z


def stream_seed(seed: int, *keys: int) -> np.uint64:
    """A 64-bit stream state derived from ``seed`` and integer keys (round, block, ...)."""
    s = np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF)
    for k in keys:
        s = np.uint64(_mix(s, np.uint64(int(k) & 0xFFFFFFFFFFFFFFFF)))
    return s


@dataclass(frozen=True)
class GaussianTable:
    """A table of ``size`` float32 standard normals (Section 5.4 of Liu et al.)."""

    values: np.ndarray
    seed: int

    @classmethod
    def create(cls, size: int, seed: int = 0) -> "GaussianTable":
        if not isinstance(size, (int, np.integer)) or size < 1:
            raise ParameterError(f"noise_table_size must be a positive integer, got {size!r}")
        vals = np.empty(int(size), dtype=np.float32)
        standard_normals(stream_seed(seed, 0x7AB1E), vals)
        return cls(vals, int(seed))

    @property
    def size(self) -> int:
        return len(self.values)

    def extended(self, segment: int) -> np.ndarray:
        """The table followed by its own start (wrapped as often as needed) so any ``[o, o + segment)`` with
        ``0 <= o < size`` is a contiguous slice."""
        reps = int(np.ceil((self.size + segment) / self.size))
        return np.ascontiguousarray(np.tile(self.values, reps)[: self.size + segment])

    def draw(self, n_segments: int, segment: int, seed: int = 0) -> np.ndarray:
        """``n_segments`` noise vectors of length ``segment``, read as the kernels read them (for tests and Fig. 4)."""
        return _table_segments(self.extended(segment), self.size, n_segments, segment, stream_seed(seed, 0x5E6))


@njit(cache=True)
def _table_segments(ext, size, n, m, state):
    out = np.empty((n, m), dtype=np.float32)
    for r in range(n):
        state, o = randint_below(state, size)
        for k in range(m):
            out[r, k] = ext[o + k]
    return out
