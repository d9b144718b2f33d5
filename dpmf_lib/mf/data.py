"""Data access for the MF experiments and benchmarks: ``dpmf_lib.data.load_ratings`` (the real dataset if fetched,
else its labelled stand-in), optionally subsampled, and a seeded train/test split."""

from __future__ import annotations

from ..data import load_ratings
from ..data.datasets import standin_permitted
from ..data.ratings import Ratings
from ..data.splits import random_split, subsample
from ..errors import ParameterError


def load_for_mf(dataset: str, *, seed: int = 0, standin_scale: float = 1.0, max_ratings: int | None = None) -> Ratings:
    """The dataset for an MF experiment; ``max_ratings`` keeps a seeded random subset (noted in ``source.note``)."""
    r = load_ratings(dataset, allow_standin=standin_permitted(dataset), seed=seed, standin_scale=standin_scale)
    return subsample(r, max_ratings, seed)


def train_test(r: Ratings, test_fraction: float = 0.1, seed: int = 0) -> tuple[Ratings, Ratings]:
    """Seeded random split (``dpmf_lib.data.splits.random_split``)."""
    if not 0 < test_fraction < 1:
        raise ParameterError(f"test_fraction must lie in (0, 1), got {test_fraction!r}")
    tr, te = random_split(r, (1 - test_fraction, test_fraction), seed=seed)
    return tr, te
