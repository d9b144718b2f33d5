"""Dataset registry and fetcher: ``python -m data_fetch ID`` puts a verified copy of a dataset in ``data/<id>/``.

- :mod:`data_fetch.registry`  every dataset of the papers (source, files, checksums, published shape, licence)
- :mod:`data_fetch.fetch`     download / mirror copy, verification, atomic install
- :mod:`data_fetch.manifest`  the ``.manifest.json`` that marks a dataset directory as complete
"""

from .fetch import fetch, is_present, mirror_dir
from .registry import DATASETS, DatasetSpec, FileSpec, Shape, dataset_ids, get_spec, unavailable_message

__all__ = ["DATASETS", "DatasetSpec", "FileSpec", "Shape", "dataset_ids", "fetch", "get_spec", "is_present",
           "mirror_dir", "unavailable_message"]
