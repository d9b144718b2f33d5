"""Ratings data: container, loaders, splits, synthetic stand-ins and dataset access."""

from .ratings import CSR, DataSource, Ratings, from_raw_ids

__all__ = ["CSR", "DataSource", "Ratings", "from_raw_ids", "load_ratings"]


def load_ratings(dataset_id: str, **kwargs):
    """The real dataset when present, else a labelled synthetic stand-in (see :mod:`dpmf_lib.data.datasets`)."""
    from .datasets import load_ratings as _load

    return _load(dataset_id, **kwargs)
