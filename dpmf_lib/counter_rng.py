"""SplitMix64 (Steele, Lea & Flood 2014; Vigna's ``splitmix64.c``): the one implementation of its mix for every kernel.

The sequential generator seeded with ``s`` keeps ``state_n = s + n·γ`` (γ = 0x9E3779B97F4A7C15, uint64 arithmetic) and
outputs ``mix64(state_n)`` for ``n = 1, 2, ...``, where ``mix64`` is the finalizer (Stafford's "Mix13")

    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27; z *= 0x94D049BB133111EB; z ^= z >> 31

a bijection of 64-bit words with full avalanche. Because the state is a counter, output ``n`` can be computed on its
own: ``counter_mix(key, c) = mix64(key + (c + 1)·γ)`` is output ``c + 1`` of the generator seeded with ``key`` (so the
bytes of a kernel that keys each entry by its index do not depend on the thread count or schedule).

Users: the C-SGD layout's shuffle draws (:mod:`dpmf_lib.mf._layout_kernels`, :func:`dpmf_lib.mf.layout.draw_index_np`),
the fused NBM noise (:mod:`dpmf_lib.nbm.kernels`), the SGLD streams (:mod:`dpmf_lib.mf.noise`) and the count-sketch hash
(:mod:`dpmf_lib.sketch.hashing`, ``mix64`` of ``key ^ salt``).

numba scalars (``@njit(inline="always")``, so the mix is inlined into the callers' loops): :func:`mix64`,
:func:`counter_mix`, :func:`splitmix_next`. numpy references (vectorised, uint64 wrap-around): :func:`mix64_np`,
:func:`counter_mix_np`, :func:`splitmix_np`. ``tests/lib/test_counter_rng.py`` checks them against each other and
against the published outputs for seeds 0 and 1234567.
"""

from __future__ import annotations

import numpy as np
from numba import njit

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MIX_M1 = np.uint64(0xBF58476D1CE4E5B9)
MIX_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)
_ONE = np.uint64(1)


@njit(cache=True, inline="always")
def mix64(z):
    """The splitmix64 finalizer of a uint64 (numba)."""
    z = (z ^ (z >> _S30)) * MIX_M1
    z = (z ^ (z >> _S27)) * MIX_M2
    return z ^ (z >> _S31)


@njit(cache=True, inline="always")
def counter_mix(key, ctr):
    """Output ``ctr + 1`` of the splitmix64 generator seeded with ``key``: ``mix64(key + (ctr + 1)·γ)`` (numba;
    ``ctr`` any integer, taken as uint64)."""
    return mix64(np.uint64(key) + (np.uint64(ctr) + _ONE) * GOLDEN)


@njit(cache=True, inline="always")
def splitmix_next(state):
    """Advance a splitmix64 state; returns ``(new_state, 64 random bits)`` (numba; a plain call works too)."""
    state = state + GOLDEN
    return state, mix64(state)


def mix64_np(z) -> np.ndarray:
    """numpy reference of :func:`mix64` (uint64 arrays wrap on overflow)."""
    z = np.asarray(z, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> _S30)) * MIX_M1
        z = (z ^ (z >> _S27)) * MIX_M2
    return z ^ (z >> _S31)


def counter_mix_np(key, ctr) -> np.ndarray:
    """numpy reference of :func:`counter_mix` (broadcasts over ``key`` and ``ctr``)."""
    key = np.asarray(key, dtype=np.uint64)
    ctr = np.asarray(ctr, dtype=np.uint64)
    with np.errstate(over="ignore"):
        return mix64_np(key + (ctr + _ONE) * GOLDEN)


def splitmix_np(seed: int, n: int) -> np.ndarray:
    """The first ``n`` outputs (uint64) of the sequential splitmix64 generator seeded with ``seed`` (mod 2**64)."""
    return counter_mix_np(np.uint64(int(seed) & 0xFFFFFFFFFFFFFFFF), np.arange(n, dtype=np.uint64))
