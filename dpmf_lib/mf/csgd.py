"""Cache-efficient SGD (C-SGD, Liu et al. 2015 Algorithm 2 and Sections 5.1–5.3) and the naive SGD baseline.

Update per rating (eq. 3, with biases; u_j uses the old u_i):
    e   = r_ij − (<u_i, v_j> + b_i + b_j + b_0)
    u_i ← (1 − ηλ) u_i + η e v_j,     v_j ← (1 − ηλ) v_j + η e u_i
    b_i ← b_i + η (e − λ_b b_i),      b_j ← b_j + η (e − λ_b b_j),      b_0 = training mean (fixed)
with η_t = η0 / t^γ per round t = 1, 2, ... (Section 6.3). Choices not fixed by the paper: b_0 fixed at the training
mean; bias regularizer λ_b = λ unless given; factors initialised N(0, 0.1²).

Both orders run the same kernel ``_sgd_epoch`` (``prange`` over segments, see :mod:`dpmf_lib.mf.layout`); C-SGD uses
the tiered user-block layout and software prefetch of the item and user vectors ``prefetch_stride`` ratings ahead
(Section 6.5 uses stride 2), naive SGD a random permutation of all ratings.

Kernels (:mod:`dpmf_lib.mf.sgd_kernels`): for d in ``ROW_LENGTHS`` (16, 32, 64, 128 on a host with AVX-512; 16, 32 with AVX2; none below AVX2) a segment runs
the whole-row kernel ``_sgd_range_rows``, for other d the loop kernel (the rest of ``_sgd_range``); both take C-layout
float32 factor matrices (:func:`aligned_copy`). The two differ in the dot product's float32 summation order, so
results at those d depend on the host's vector width (as the loop kernel's own reductions already did).

Performance notes (the numbers are in docs/performance.md): at d = 128 the loop kernel is bound neither by its loads
nor by its FP work but by the chain dot product -> error -> update -> the next rating's loads; hence, for d in
``ROW_LENGTHS``, the whole-row kernel ``_sgd_range_rows`` (rows as single vector values, the next rating's dot product
read before this rating's stores). It pays only where a row fits the vector register file, so ``ROW_LENGTHS``
follows the host (:func:`dpmf_lib.mf.rowvec.whole_row_lengths`). Out of cache the item row misses: factor matrices
are copied to 64-byte-aligned memory (:func:`aligned_copy`) and ``prefetch_row`` avoids a per-rating reshape (see
:mod:`dpmf_lib.mf.prefetch`); the default stride is 8, the best measured at d = 128 and neutral at d = 16.
Prefetching has no effect on results.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numba
import numpy as np

from .. import validate
from ..metrics import rmse
from ..data.ratings import require_ratings
from ..errors import ParameterError
from .hot_rows import HotCopies, check_private_hot_layout
from .layout import Layout, naive_layout, tiered_layout
from .model import DIM_HINT, MAX_DIM, MFModel, init_model, learning_rate
from .schedule import Schedule, check_schedule
from .sgd_kernels import _sgd_epoch, aligned_copy

if TYPE_CHECKING:
    import pandas as pd


@contextmanager
def num_threads(n: int | None):
    """Run numba parallel regions with ``n`` threads (None: leave as is)."""
    if n is None:
        yield
        return
    if not isinstance(n, (int, np.integer)) or not 1 <= n <= numba.config.NUMBA_NUM_THREADS:
        raise ParameterError(f"n_threads must be an integer in [1, {numba.config.NUMBA_NUM_THREADS}], got {n!r}")
    old = numba.get_num_threads()
    numba.set_num_threads(int(n))
    try:
        yield
    finally:
        numba.set_num_threads(old)


@dataclass
class TrainResult:
    model: MFModel  # in the Ratings id space
    history: "pd.DataFrame"  # one row per round: epoch, eta, seconds, wall, updates_per_s, test_rmse, ...
    layout: Layout | None = None
    extra: dict = field(default_factory=dict)

    @property
    def updates_per_s(self) -> float:
        h = self.history
        return float(h["updates"].sum() / h["seconds"].sum())


def _internal_model(model: MFModel, layout: Layout) -> MFModel:
    return MFModel(aligned_copy(model.U), aligned_copy(model.V[layout.item_perm]),
                   np.ascontiguousarray(model.bu), np.ascontiguousarray(model.bi[layout.item_perm]), model.b0)


def _external_model(m: MFModel, layout: Layout) -> MFModel:
    V = np.empty_like(m.V)
    V[layout.item_perm] = m.V
    bi = np.empty_like(m.bi)
    bi[layout.item_perm] = m.bi
    return MFModel(m.U, V, m.bu, bi, m.b0)


def make_layout(train, order: str, *, block_users=1000, tiers=(500, 4000), seed=0) -> Layout:
    """``order``: "tiered" (C-SGD, users interleaved within a group), "tiered-usermajor", or "naive"."""
    if order == "tiered":
        return tiered_layout(train, block_users=block_users, tiers=tiers, seed=seed)
    if order == "tiered-usermajor":
        return tiered_layout(train, block_users=block_users, tiers=tiers, interleave=1)
    if order == "naive":
        return naive_layout(train, seed=seed)
    raise ParameterError(f"order must be 'tiered' (C-SGD), 'tiered-usermajor' or 'naive', got {order!r}")


def train_sgd(train, *, d: int = 16, epochs: int = 15, eta0: float = 0.02, gamma: float = 1.0, lam: float = 5e-3,
              lam_bias: float | None = None, schedule: Schedule = Schedule(), seed: int = 0, test=None,
              init_scale: float | None = None, model: MFModel | None = None, layout: Layout | None = None,
              time_budget: float | None = None) -> TrainResult:
    """Train the biased MF model with C-SGD (``Schedule(order="tiered")``) or naive SGD (``order="naive"``).

    ``schedule`` (:class:`~dpmf_lib.mf.schedule.Schedule`): order, block and tier sizes, prefetch stride, threads and
    ``hot_rows``. ``hot_rows`` (C-SGD on more than one thread): "shared" — every thread writes the shared item rows
    (Hogwild, the paper's scheme and the default); "private" — each thread runs its block's top-tier ratings on its
    own copy of the top tier's rows and adds the block's change to the shared rows once, under a lock
    (:mod:`dpmf_lib.mf.hot_rows`: better 2-thread scaling than Hogwild at d = 128). With one thread both
    run the same kernel and give the same model. ``extra["hot_items"]`` is the number of private rows per thread
    (0 when none were used), ``extra["merges"]`` the merges made.

    ``test`` (a Ratings) is evaluated after every round (outside the timed kernel). ``seconds`` in the history is
    the kernel time of the round; ``wall`` the cumulative kernel time; ``extra["setup_seconds"]`` the time before the
    first round (layout unless one is passed, model initialisation). ``time_budget`` stops after the round that
    crosses it. Defaults are the paper's Netflix settings (η0 = 0.02, λ = 5·10⁻³, γ = 1).
    """
    import pandas as pd

    t_setup = time.perf_counter()
    require_ratings(train, "train", "train_sgd")
    sch = check_schedule(schedule, "train_sgd")
    order, block_users, tiers, prefetch_stride = sch.order, sch.block_users, sch.tiers, sch.prefetch_stride
    n_threads, hot_rows = sch.n_threads, sch.hot_rows
    d = validate.integer(d, "d", hi=MAX_DIM, fix=DIM_HINT)
    if not isinstance(epochs, (int, np.integer)) or epochs < 1:
        raise ParameterError(f"epochs must be a positive integer, got {epochs!r}")
    eta0 = validate.positive(eta0, "eta0")
    gamma = validate.positive(gamma, "gamma", strict=False)
    lam = validate.positive(lam, "lam", strict=False)
    lamb = lam if lam_bias is None else validate.positive(lam_bias, "lam_bias", strict=False)
    if not isinstance(prefetch_stride, (int, np.integer)) or prefetch_stride < 0:
        raise ParameterError(f"prefetch_stride must be an integer ≥ 0 (0 = off), got {prefetch_stride!r}")
    if hot_rows not in ("shared", "private"):
        raise ParameterError(f"hot_rows must be 'shared' (Hogwild) or 'private' (per-thread copies of the top "
                             f"tier's item rows), got {hot_rows!r}")
    with num_threads(n_threads):  # the layout is built with the threads the rounds use
        threads = numba.get_num_threads()
        lay = layout if layout is not None else make_layout(train, order, block_users=block_users, tiers=tiers,
                                                            seed=seed)
    if hot_rows == "private":
        check_private_hot_layout(lay)  # on any thread count, so that a call valid on one machine is on another
    b0 = float(train.values.mean())
    m0 = model.copy() if model is not None else init_model(train.n_users, train.n_items, d, seed=seed,
                                                            scale=init_scale, b0=b0)
    m = _internal_model(m0, lay)
    copies = HotCopies(lay, m.V.shape[1], threads=threads) if hot_rows == "private" and threads > 1 else None
    test_u = test_i = None
    if test is not None:
        test_u, test_i = test.users, lay.to_internal_items(test.items)
    rows, wall = [], 0.0
    setup_seconds = time.perf_counter() - t_setup
    with num_threads(n_threads):
        for t in range(1, epochs + 1):
            eta = np.float32(learning_rate(eta0, gamma, t))
            t0 = time.perf_counter()
            if copies is None:
                _sgd_epoch(lay.users, lay.items, lay.values, lay.seg, m.U, m.V, m.bu, m.bi, np.float32(m.b0), eta,
                           np.float32(lam), np.float32(lamb), np.int64(prefetch_stride))
            else:
                copies.epoch(lay, m, eta, lam, lamb, prefetch_stride)
            dt = time.perf_counter() - t0
            wall += dt
            row = {"epoch": t, "eta": float(eta), "seconds": dt, "wall": wall, "updates": lay.n_ratings,
                   "updates_per_s": lay.n_ratings / dt}
            if test is not None:
                row["test_rmse"] = rmse(m.predict(test_u, test_i), test.values)
            rows.append(row)
            if not np.all(np.isfinite(m.U[:1])):
                raise ParameterError(f"SGD diverged in round {t} (non-finite factors): lower eta0 (now {eta0})")
            if time_budget is not None and wall >= time_budget:
                break
    return TrainResult(_external_model(m, lay), pd.DataFrame(rows), lay,
                       {"order": lay.kind, "d": d, "n_threads": threads, "setup_seconds": setup_seconds,
                        "hot_rows": hot_rows, "hot_items": 0 if copies is None else copies.n_hot,
                        "merges": 0 if copies is None else copies.merges})


def sgd_flops_bytes(d: int) -> tuple[float, float]:
    """Per rating update: floating-point operations and the bytes of factor traffic the update must move if nothing
    were cached (read u_i, v_j, write both: 16·d bytes, plus 12 bytes of rating triple and 16 of biases).
    FLOPs: dot 2d, update 6d (two scaled axpys with shrink), ~10 for error and biases."""
    return 8.0 * d + 10.0, 16.0 * d + 28.0
