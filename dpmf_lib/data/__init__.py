"""Ratings data: container, loaders, splits, synthetic stand-ins and dataset access.

- :mod:`.ratings`   the ``Ratings`` container and ``from_raw_ids`` validation
- :mod:`.loaders`   file formats (tab, ``::``, CSV, Netflix per-movie, KDD-Cup Yahoo!, binary profiles, fvecs)
- :mod:`.datasets`  ``load_ratings(id)``: real data if fetched (or in ``$DPMF_DATA_MIRROR``), else a labelled stand-in
- :mod:`.standin`   synthetic stand-ins with a dataset's published shape
- :mod:`.splits`    ml-100k folds (mku.sh), random splits, per-user trimming, count filters
"""

from .ratings import CSR, DataSource, Ratings, from_raw_ids

__all__ = ["CSR", "DataSource", "Ratings", "dataset_available", "from_raw_ids", "load_ratings"]


def load_ratings(dataset_id: str, **kwargs):
    """The real dataset when present, else a labelled synthetic stand-in (see :mod:`dpmf_lib.data.datasets`)."""
    from .datasets import load_ratings as _load

    return _load(dataset_id, **kwargs)


def dataset_available(dataset_id: str, **kwargs) -> bool:
    """True when the real dataset can be loaded (see :func:`dpmf_lib.data.datasets.dataset_available`)."""
    from .datasets import dataset_available as _available

    return _available(dataset_id, **kwargs)
