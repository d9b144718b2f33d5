"""Small synthetic problems shared by the tests of dpmf_lib.nbm (tests/lib/nbm/)."""

import numpy as np

from dpmf_lib.data.ratings import DataSource, Ratings


def toy(seed=1, nu=15, ni=12, density=0.6) -> Ratings:
    """A random ``nu`` × ``ni`` rating matrix of the given density, ratings 1..5."""
    rng = np.random.default_rng(seed)
    u, i = np.nonzero(rng.random((nu, ni)) < density)
    v = rng.integers(1, 6, len(u)).astype(np.float32)
    return Ratings(u.astype(np.int32), i.astype(np.int32), v, nu, ni, (1.0, 5.0), DataSource("toy", False))


def rows_of(d):
    """user → (items, centred ratings as float64) of a prepared NBMData."""
    return {u: (d.uitems[d.uptr[u]:d.uptr[u + 1]], d.ucent[d.uptr[u]:d.uptr[u + 1]].astype(np.float64))
            for u in range(d.n_users)}


def signed_similarity(ni, seed=2, dtype=np.float64) -> np.ndarray:
    """A non-flat similarity matrix with both signs and a zero diagonal (float64 for finite differences; the
    kernels' float32 on request)."""
    S = np.random.default_rng(seed).normal(0.3, 0.5, (ni, ni))
    np.fill_diagonal(S, 0.0)
    return S.astype(dtype)
