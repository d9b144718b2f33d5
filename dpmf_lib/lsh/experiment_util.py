"""Helpers shared by the chapter-5 experiments (balu_table5_1, balu_fig5_1, balu_fig5_2) and the ``lsh`` bench."""

from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from .. import validate
from ..data.ratings import DataSource
from ..errors import ParameterError


def synthetic_source(d: int, n: int, seed) -> DataSource:
    """The thesis' synthetic set (Section 5.4.1) regenerated: i.i.d. uniform on the unit sphere. It is the paper's own
    data distribution, not a stand-in for a real dataset, so ``real=True`` (claims about it can be judged)."""
    return DataSource(dataset=f"synthetic-sphere-d{d}", real=True, checksum=None,
                      note=f"{n:,} i.i.d. vectors uniform on the unit sphere of R^{d} (normal draws, normalised), "
                           f"seed {seed}; the thesis' synthetic distribution, regenerated")


@contextmanager
def single_thread():
    """numba and BLAS on one thread (encoding times are per core, as the paper's)."""
    import numba
    from threadpoolctl import threadpool_limits

    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        numba.set_num_threads(old)


def best_time(fn, repeats: int = 3) -> float:
    """Best wall time (s) of ``repeats`` calls of ``fn()`` (the first call compiles numba kernels: call once before)."""
    best = np.inf
    for _ in range(max(1, int(repeats))):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def check_positive_int(params: dict, *names) -> None:
    for n in names:
        validate.integer(params.get(n), n)


def check_methods(methods, allowed) -> list[str]:
    methods = list(methods)
    bad = [m for m in methods if m not in allowed]
    if bad:
        raise ParameterError(f"unknown method(s) {bad}; choose from {list(allowed)}")
    return methods
