"""Seeds: every random function of :mod:`dpmf_lib.nbm` takes an int seed or a ``numpy.random.Generator``."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError


def as_generator(seed) -> np.random.Generator:
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None or isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative int or a numpy Generator, got {seed!r}")
    return np.random.default_rng(int(seed))
