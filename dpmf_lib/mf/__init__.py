"""Matrix-factorization kernels of Liu, Wang & Smola (2015): C-SGD, naive SGD, fast SGLD, serving, peers.

Public API
- :func:`train_sgd` (C-SGD with ``Schedule(order="tiered")``, naive baseline with ``order="naive"``;
  ``hot_rows="private"``: per-thread copies of the top tier's item rows, :mod:`dpmf_lib.mf.hot_rows`)
  → :class:`TrainResult`
- :class:`Schedule` — order, block and tier sizes, prefetch stride, threads (and hot rows) of a run
- :func:`sample_sgld` (fast: lookup-table + lazy noise; ``mode="exact"``: fresh normals + eager noise) → :class:`SGLDResult`
- :class:`MFModel`, :func:`init_model`; :class:`GaussianTable`; :func:`top_k`, :func:`serving_throughput`
- layouts: :func:`tiered_layout`, :func:`naive_layout`; references in :mod:`dpmf_lib.mf.reference`;
  peers (libmf, surprise) in :mod:`dpmf_lib.mf.peers`
"""

from .csgd import TrainResult, num_threads, sgd_flops_bytes, train_sgd
from .layout import Layout, naive_layout, tiered_layout
from .model import MFModel, init_model
from .noise import GaussianTable
from .schedule import Schedule
from .serving import serving_throughput, top_k
from .sgld import SGLDResult, sample_sgld

__all__ = ["GaussianTable", "Layout", "MFModel", "SGLDResult", "Schedule", "TrainResult", "init_model",
           "naive_layout", "num_threads", "sample_sgld", "serving_throughput", "sgd_flops_bytes", "tiered_layout",
           "top_k", "train_sgd", "warmup"]


def warmup() -> None:
    """Compile (or load from cache) every kernel on a tiny problem, so timings exclude compilation."""
    from dataclasses import replace

    import numpy as np

    from ..data.ratings import DataSource, Ratings

    rng = np.random.default_rng(0)
    u = rng.integers(0, 20, 200).astype(np.int32)
    i = rng.integers(0, 30, 200).astype(np.int32)
    key = np.unique(u.astype(np.int64) * 30 + i)
    r = Ratings((key // 30).astype(np.int32), (key % 30).astype(np.int32), rng.uniform(1, 5, len(key)).astype(np.float32),
                20, 30, (1.0, 5.0), DataSource("warmup", False))
    small = Schedule(tiers=(5, 10), block_users=5)
    for order in ("tiered", "naive"):
        train_sgd(r, d=4, epochs=1, schedule=replace(small, order=order), test=r)
    import numba

    if numba.config.NUMBA_NUM_THREADS >= 2:  # private hot rows run their own kernel only on more than one thread
        train_sgd(r, d=4, epochs=1, schedule=replace(small, n_threads=2, hot_rows="private"))
    for mode in ("fast", "exact"):
        sample_sgld(r, d=4, epochs=1, mode=mode, schedule=small, noise_table_size=64, test=r)
    top_k(init_model(20, 30, 4), 3, seen=r.user_csr())
