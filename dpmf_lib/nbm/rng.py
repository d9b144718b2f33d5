"""Seeds: every random function of :mod:`dpmf_lib.nbm` takes an int seed, a ``numpy.random.Generator``, or — for the
DP trainers — ``None``, which draws fresh OS entropy (see :mod:`dpmf_lib.privacy.common`)."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..privacy.common import resolve_seed


def as_generator(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))


def seeded(seed) -> tuple[np.random.Generator, int | None, bool]:
    """``(generator, seed_used, seed_was_fixed)``: ``None`` → fresh OS entropy (the DP trainers' default)."""
    seed_used, fixed = resolve_seed(seed)
    return (seed if seed_used is None else np.random.default_rng(seed_used)), seed_used, fixed
