"""The two non-interactive sanitizers of thesis chapter 3: BLIP (Bloom filter + bit flips) and JLT (Gaussian sketch).

BLIP (Section 3.1): item j has K hash positions h_k(j) in [0, L); its codeword X_j has ones at those positions (3.1);
the Bloom filter is the OR of the profile's codewords (3.2); each bit is then XOR-ed with Bernoulli(p_eps) noise (3.3),
p_eps = 1 / (1 + e^{eps/K}) (3.4). The hash functions are simulated by a seeded generator (positions i.i.d. uniform on
[0, L), with replacement — the "simple model" of Section 3.1.2 assumes exactly this); the codebook is public.

eps = 0 is the limit of (3.4): p_eps = 1/2, every bit is a fair coin and the output carries no information about the
profile (the thesis: "When eps = 0, observing the BLIP is useless"). We accept eps = 0 for BLIP for that reason; eps < 0
or NaN raise.

JLT (Section 3.2): public codebook X_j(i) ~ N(0, 1/L) i.i.d.; the user publishes Y = sum_{j in P} X_j + N(0, sigma^2 I).
sigma = 4/eps * sqrt(log(1/delta)) (3.10). The thesis's table eps {600,6,3,2,1,0.75,0.5,0.25,0.1} -> sigma
{0,1,2,3,6,8,12,24,61} is reproduced by delta = 0.1 (sqrt(log 10) = 1.517; e.g. eps = 0.1 -> 60.7), so delta = 0.1 is our
default. (3.10) also asks eps < log(1/delta) = 2.3, which the thesis's own grid violates for eps >= 3 (600, 6, 3): we
follow the grid, and :func:`jlt_guarantee_void` marks those points (the figures' CSV column
``eps_ge_ln_1_over_delta`` and a shaded band / cross on the plots): for them (3.10) gives no (eps, delta) guarantee.

Seeds: ``sanitize(items, seed=None)`` — the default — draws the noise from fresh OS entropy; a fixed seed (what the
experiments pass, for reproducible figures) makes the release replayable by anyone who knows it. The codebooks are
public by design, so their seed is not a privacy parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import validate
from ..errors import ParameterError


def blip_flip_probability(eps: float, K: int) -> float:
    """p_eps = 1 / (1 + exp(eps / K)) (3.4); eps = 0 gives 1/2 (no information)."""
    e = validate.epsilon(eps, "eps", allow_zero=True, what="BLIP")
    validate.integer(K, "K", what="BLIP (the number of hash functions)")
    return 1.0 / (1.0 + math.exp(e / K))


@dataclass(frozen=True)
class BloomCodebook:
    """Hash positions of every item. ``bits[j, :nbits[j]]`` are the distinct positions of codeword X_j (sorted);
    the rest of the row is -1."""

    L: int
    K: int
    positions: np.ndarray  # (N, K) int32, raw hash outputs (may repeat within a row)
    bits: np.ndarray  # (N, K) int32, distinct sorted positions, -1 padded
    nbits: np.ndarray  # (N,) int32
    seed: int | None = None

    @property
    def n_items(self) -> int:
        return self.positions.shape[0]

    def dense(self) -> np.ndarray:
        """Codewords as an (N, L) uint8 0/1 matrix."""
        out = np.zeros((self.n_items, self.L), dtype=np.uint8)
        rows = np.repeat(np.arange(self.n_items), self.K)
        out[rows, self.positions.ravel()] = 1
        return out


def bloom_codebook(n_items: int, L: int, K: int, seed=0) -> BloomCodebook:
    validate.integer(L, "L", what="BLIP (the filter length)")
    validate.integer(K, "K", what="BLIP (the number of hash functions)")
    pos = validate.generator(seed).integers(0, L, size=(n_items, K)).astype(np.int32)
    srt = np.sort(pos, axis=1)
    dup = np.zeros_like(srt, dtype=bool)
    dup[:, 1:] = srt[:, 1:] == srt[:, :-1]
    nbits = (~dup).sum(axis=1).astype(np.int32)
    bits = np.full_like(srt, -1)
    for j in range(n_items):  # N x K, once per codebook
        u = srt[j][~dup[j]]
        bits[j, :len(u)] = u
    return BloomCodebook(int(L), int(K), np.ascontiguousarray(pos), np.ascontiguousarray(bits),
                         np.ascontiguousarray(nbits), seed if isinstance(seed, int) else None)


def bloom_filter(items: np.ndarray, codebook: BloomCodebook) -> np.ndarray:
    """B_P = OR of the codewords of ``items`` (3.2), as uint8 0/1 of length L."""
    b = np.zeros(codebook.L, dtype=np.uint8)
    if len(items):
        b[codebook.positions[np.asarray(items)].ravel()] = 1
    return b


@dataclass(frozen=True)
class BLIP:
    codebook: BloomCodebook
    eps: float
    p_eps: float = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "p_eps", blip_flip_probability(self.eps, self.codebook.K))

    @property
    def L(self) -> int:
        return self.codebook.L

    def sanitize(self, items: np.ndarray, seed=None) -> np.ndarray:
        """B~_P = B_P XOR N, N(l) ~ Bernoulli(p_eps) i.i.d. (3.3), every bit flipped with the same p_eps whether set or
        not (that symmetry is what bounds the likelihood ratio by e^{eps/K} per bit). uint8 0/1 of length L.
        ``seed=None`` (default): fresh OS entropy."""
        noise = (validate.generator(seed).random(self.L) < self.p_eps).astype(np.uint8)
        return bloom_filter(items, self.codebook) ^ noise


def jlt_guarantee_void(eps: float, delta: float = 0.1) -> bool:
    """True when eps >= ln(1/delta): outside the range where (3.10) gives (eps, delta)-DP for
    sigma = 4/eps sqrt(ln 1/delta)."""
    e = validate.epsilon(eps, "eps", what="JLT")
    if not (0 < delta < 1):
        raise ParameterError(f"JLT: delta must lie in (0, 1), got {delta!r}")
    return e >= math.log(1.0 / delta)


def jlt_sigma(eps: float, delta: float = 0.1) -> float:
    """sigma = 4/eps * sqrt(log(1/delta)) — the smallest noise (3.10) allows."""
    e = validate.epsilon(eps, "eps", what="JLT")
    if not (0 < delta < 1):
        raise ParameterError(f"JLT: delta must lie in (0, 1), got {delta!r}")
    return 4.0 / e * math.sqrt(math.log(1.0 / delta))


@dataclass(frozen=True)
class JLTCodebook:
    X: np.ndarray  # (N, L) float32, X_j(i) ~ N(0, 1/L)
    seed: int | None = None

    @property
    def L(self) -> int:
        return self.X.shape[1]

    @property
    def n_items(self) -> int:
        return self.X.shape[0]

    def x64(self) -> np.ndarray:
        """The codebook in float64 (cached): the single decoder's X y and the Gram matrix use it."""
        x = getattr(self, "_x64", None)
        if x is None:
            x = np.ascontiguousarray(self.X, dtype=np.float64)
            object.__setattr__(self, "_x64", x)
        return x

    def gram(self) -> np.ndarray:
        """X X^T (N x N, float64), cached: the joint decoder's incremental updates read rows of it."""
        g = getattr(self, "_gram", None)
        if g is None:
            x = self.x64()
            g = np.ascontiguousarray(x @ x.T)
            object.__setattr__(self, "_gram", g)
        return g


def jlt_codebook(n_items: int, L: int, seed=0) -> JLTCodebook:
    validate.integer(L, "L", what="JLT (the sketch length)")
    X = (validate.generator(seed).standard_normal((n_items, L)) / math.sqrt(L)).astype(np.float32)
    return JLTCodebook(np.ascontiguousarray(X), seed if isinstance(seed, int) else None)


@dataclass(frozen=True)
class JLT:
    codebook: JLTCodebook
    eps: float
    delta: float = 0.1
    sigma: float = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "sigma", jlt_sigma(self.eps, self.delta))

    @property
    def L(self) -> int:
        return self.codebook.L

    def sanitize(self, items: np.ndarray, seed=None) -> np.ndarray:
        """Y~_P = sum_{j in P} X_j + N(0, sigma^2 I) (float64, length L). ``seed=None`` (default): fresh OS entropy."""
        y = self.codebook.X[np.asarray(items, dtype=np.int64)].astype(np.float64).sum(axis=0)
        return y + self.sigma * validate.generator(seed).standard_normal(self.L)
