"""Address and sign hashing for the count sketch (Balu 2016, section 2.3.2.5 / 4.1.1).

Hash function (our choice; the thesis only asks for pairwise-independent families): the **splitmix64 finalizer**
(Stafford's "Mix13" variant, the output function of Java's SplittableRandom / Vigna's splitmix64;
``mix64`` / ``mix64_ref`` here are :func:`dpmf_lib.counter_rng.mix64` / :func:`~dpmf_lib.counter_rng.mix64_np`):

    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31

It is a bijection of 64-bit words with full avalanche. Row ``j`` of side ``s`` (0 = user, 1 = item) gets a 64-bit salt
``salts[s, j]`` drawn from the seed; element ``(id, l)`` (id = user or item index, l = latent component) is keyed as
``key = id * 2**16 + l`` (so ``d < 65536``) and hashed as ``h = mix64(key ^ salt)``. From the one 64-bit word:

- address ``h_j(id, l) = ((h >> 32) * w) >> 32``  (Lemire's multiply-shift range reduction of the high 32 bits, ``w < 2**32``)
- sign    ``s_j(id, l) = +1 if (h & 1) == 0 else -1`` (lowest bit)

Every kernel has a numpy reference (``*_ref``) and tests check that they agree bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ..counter_rng import mix64, mix64_np
from ..errors import ParameterError

S32, S16 = np.uint64(32), np.uint64(16)
ONE = np.uint64(1)
MAX_D = 1 << 16
mix64_ref = mix64_np  # numpy reference of :func:`mix64` (the name the sketch code and its tests use)


@njit(cache=True, inline="always")
def address_sign(ident, l, salt, w):
    """(address in [0, w), sign ±1 as float32) of element (ident, l) under the row hash with ``salt`` (numba)."""
    key = (np.uint64(ident) << S16) | np.uint64(l)
    h = mix64(key ^ salt)
    addr = np.int64(((h >> S32) * np.uint64(w)) >> S32)
    sgn = np.float32(1 - 2 * np.int64(h & ONE))  # integer path: uint64→float conversion is slow on x86
    return addr, sgn


def address_sign_ref(ident, l, salt, w: int) -> tuple[np.ndarray, np.ndarray]:
    """numpy reference of :func:`address_sign` (broadcasts over ``ident``, ``l``, ``salt``)."""
    key = (np.asarray(ident, dtype=np.uint64) << S16) | np.asarray(l, dtype=np.uint64)
    h = mix64_ref(key ^ np.asarray(salt, dtype=np.uint64))
    with np.errstate(over="ignore"):
        addr = (((h >> S32) * np.uint64(w)) >> S32).astype(np.int64)
    sgn = (1.0 - 2.0 * (h & ONE).astype(np.float32)).astype(np.float32)
    return addr, sgn


def make_salts(seed: int, k: int) -> np.ndarray:
    """Per-row salts, shape (2, k) uint64: row 0 for users, row 1 for items. Deterministic in ``seed``.

    Drawn from ``SeedSequence(seed)``, so different seeds give unrelated salts. (A splitmix64 stream started at
    ``seed·φ`` made seeds s and s + 1 share 2k − 1 of their 2k salts: "independent" repetitions were nearly the same
    hash functions, and tests over consecutive seeds had optimistic p-values.)
    """
    if k < 1:
        raise ParameterError(f"sketch depth k must be >= 1, got {k}")
    state = np.random.SeedSequence(int(seed) & 0xFFFFFFFFFFFFFFFF).generate_state(2 * k, dtype=np.uint64)
    return np.ascontiguousarray(state.reshape(2, k))


@njit(cache=True)
def addresses(ids, d, salt, w):
    """Addresses and signs of all (id, l), shape (len(ids), d) — used for tests and collision checks (numba)."""
    n = ids.shape[0]
    a = np.empty((n, d), dtype=np.int64)
    s = np.empty((n, d), dtype=np.float32)
    for r in range(n):
        for l in range(d):
            a[r, l], s[r, l] = address_sign(ids[r], l, salt, w)
    return a, s
