"""Fixed-point integers modulo P and additive masking (Hua et al. 2015, Sec. 4.2 steps 1-4 and the S3 initialisation).

Real vectors are encoded as ``round(x * 2^frac_bits)`` in two's complement modulo ``P = 2^bits`` (``bits <= 64``), held
in ``uint64`` arrays. Additive masks are uniform on ``[0, P)``. Because encoding, masking, summing and unmasking are all
exact integer operations modulo P, the unmasked aggregate equals the sum of the encoded contributions *exactly*; it
decodes to the real sum up to ``k * 2^-(frac_bits+1)`` (rounding of each of the k inputs) provided the true sum lies in
``(-P/2, P/2) / 2^frac_bits`` (checked by :meth:`FixedPoint.encode` per contribution with the group size ``k``).

The paper only says "P a big integer"; we use ``P = 2^64`` and 24 fractional bits by default (range ±5.5e11 for the
aggregate, resolution 6e-8), and count 8 bytes per masked element; the message table also gives the 4-byte (P = 2^32)
figure that the paper's byte counts imply.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError


@dataclass(frozen=True)
class FixedPoint:
    bits: int = 64
    frac_bits: int = 24

    def __post_init__(self):
        if not (8 <= int(self.bits) <= 64):
            raise ParameterError(f"parameter 'modulus_bits' must be in [8, 64] (P = 2^bits), got {self.bits!r}")
        if not (0 <= int(self.frac_bits) < int(self.bits) - 1):
            raise ParameterError(f"parameter 'frac_bits' must be in [0, modulus_bits - 2], got {self.frac_bits!r}")

    @property
    def P(self) -> int:
        return 1 << self.bits

    @property
    def bytes_per_element(self) -> int:
        return (self.bits + 7) // 8

    @property
    def _mask(self) -> np.uint64:
        return np.uint64((1 << self.bits) - 1) if self.bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)

    def reduce(self, a: np.ndarray) -> np.ndarray:
        """``a mod P`` for uint64 ``a`` (uint64 arithmetic already wraps modulo 2^64)."""
        return a if self.bits == 64 else (a & self._mask)

    def encode(self, x, k: int = 1) -> np.ndarray:
        """Real array -> uint64 residues mod P. ``k``: how many such values will be summed (overflow check)."""
        x = np.asarray(x, dtype=np.float64)
        if not np.all(np.isfinite(x)):
            raise ParameterError("fixed-point encode: the vector holds NaN/inf (a diverged gradient?) — lower 'gamma'")
        scaled = np.rint(x * float(1 << self.frac_bits))
        limit = float(1 << (self.bits - 1)) / max(int(k), 1)
        if scaled.size and np.max(np.abs(scaled)) >= limit:
            raise ParameterError(
                f"fixed-point encode: |value| up to {np.max(np.abs(x)):.3g} overflows P = 2^{self.bits} with "
                f"{self.frac_bits} fractional bits for a sum of {k} — raise 'modulus_bits' or lower 'frac_bits'")
        return self.reduce(scaled.astype(np.int64).view(np.uint64))

    def decode(self, a: np.ndarray) -> np.ndarray:
        """uint64 residues mod P -> real values in ``[-P/2, P/2) / 2^frac_bits``."""
        a = self.reduce(np.asarray(a, dtype=np.uint64))
        if self.bits == 64:
            signed = a.view(np.int64)
        else:
            signed = a.astype(np.int64)
            signed = np.where(signed >= (1 << (self.bits - 1)), signed - (1 << self.bits), signed)
        return signed.astype(np.float64) / float(1 << self.frac_bits)

    def random(self, size, rng: np.random.Generator) -> np.ndarray:
        """Uniform residues on ``[0, P)`` (masks psi, beta, alpha)."""
        if self.bits == 64:
            return rng.integers(0, np.iinfo(np.uint64).max, size=size, dtype=np.uint64, endpoint=True)
        return rng.integers(0, 1 << self.bits, size=size, dtype=np.uint64)

    def add(self, *arrays) -> np.ndarray:
        out = np.zeros(np.broadcast_shapes(*[np.shape(a) for a in arrays]), dtype=np.uint64)
        for a in arrays:
            out = self.reduce(out + np.asarray(a, dtype=np.uint64))
        return out

    def sub(self, a, b) -> np.ndarray:
        return self.reduce(np.asarray(a, dtype=np.uint64) - np.asarray(b, dtype=np.uint64))

    def sum(self, a: np.ndarray, axis=0) -> np.ndarray:
        """Sum modulo P along ``axis`` (uint64 sums wrap modulo 2^64, which P divides)."""
        return self.reduce(np.sum(np.asarray(a, dtype=np.uint64), axis=axis, dtype=np.uint64))

    def split(self, value: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
        """``k`` uniformly random residues summing to ``value`` mod P (the recommender's pieces of tau_hat)."""
        value = np.asarray(value, dtype=np.uint64)
        if int(k) < 1:
            raise ParameterError(f"cannot split into k = {k} pieces (k >= 1)")
        pieces = self.random((int(k) - 1,) + value.shape, rng)
        last = self.sub(value, self.sum(pieces, axis=0)) if k > 1 else value
        return np.concatenate([pieces, last[None]], axis=0)
