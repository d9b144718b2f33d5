import numpy as np
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings


@pytest.fixture(scope="session")
def toy_ratings():
    """A factory of small random rating matrices (ratings 1..5 at the given density)."""
    def make(seed=1, nu=30, ni=12, density=0.6) -> Ratings:
        rng = np.random.default_rng(seed)
        u, i = np.nonzero(rng.random((nu, ni)) < density)
        v = rng.integers(1, 6, len(u)).astype(np.float32)
        return Ratings(u.astype(np.int32), i.astype(np.int32), v, nu, ni, (1.0, 5.0), DataSource("toy", False))
    return make
