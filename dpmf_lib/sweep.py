"""Parameter sweeps: one helper maps a function over a grid, with joblib locally or on a dask.distributed cluster.

``grid_frame(func, {"d": [8, 16], "eps": [1, 2]}, fixed={"seed": 0})`` calls ``func(d=..., eps=..., seed=0)`` for every
point of the Cartesian product (in a fixed order) and returns a DataFrame with the grid columns and what ``func``
returned (a dict, or a list of dicts for several rows). Results never depend on the backend or on ``n_jobs``: each
call gets its own parameters (and so its own seed) and results are put back in grid order.

Backend: argument ``backend`` or ``$DPMF_SWEEP_BACKEND`` — ``loky`` (default: processes on this machine),
``threading``, ``sequential``, or ``dask`` (a ``dask.distributed`` cluster at ``scheduler`` /
``$DPMF_DASK_SCHEDULER``; without an address a LocalCluster is started). ``python -m dpmf_lib.reproduce --backend dask
--scheduler ADDRESS`` sets both variables for every notebook it runs.
"""

from __future__ import annotations

import itertools
import os
from contextlib import contextmanager

import pandas as pd
from joblib import Parallel, delayed, parallel_backend

from .errors import ParameterError

BACKENDS = ("loky", "threading", "sequential", "dask")


def grid_points(grid: dict) -> list[dict]:
    for k, v in grid.items():
        if not isinstance(v, (list, tuple)) or len(v) == 0:
            raise ParameterError(f"sweep grid '{k}' must be a non-empty list, got {v!r}")
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


@contextmanager
def _dask_backend(scheduler: str | None):
    from dask.distributed import Client, LocalCluster

    if scheduler:
        client = Client(scheduler)
        cluster = None
    else:
        cluster = LocalCluster(n_workers=os.cpu_count() or 1, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        with parallel_backend("dask"):
            yield
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _with_env(func, env: dict, point: dict, fixed: dict):
    """Run one grid point with the caller's ``DPMF_*`` settings (data, figures, cache directories): a dask worker
    keeps the environment it was started with, not the notebook's."""
    os.environ.update(env)
    return func(**point, **fixed)


def grid_map(func, grid: dict, *, fixed: dict | None = None, n_jobs: int | None = None, backend: str | None = None,
             scheduler: str | None = None) -> list:
    """``[func(**point, **fixed) for point in grid_points(grid)]``, in parallel on the chosen backend."""
    points = grid_points(grid)
    fixed = fixed or {}
    backend = backend or os.environ.get("DPMF_SWEEP_BACKEND", "loky")
    scheduler = scheduler or os.environ.get("DPMF_DASK_SCHEDULER") or None
    if backend not in BACKENDS:
        raise ParameterError(f"sweep backend '{backend}' is unknown; choose one of {BACKENDS}")
    n_jobs = n_jobs if n_jobs is not None else int(os.environ.get("DPMF_SWEEP_JOBS", "1"))
    calls = [delayed(func)(**p, **fixed) for p in points]
    if backend == "sequential" or (backend != "dask" and (n_jobs == 1 or len(points) == 1)):
        return [func(**p, **fixed) for p in points]
    if backend == "dask":
        env = {k: v for k, v in os.environ.items() if k.startswith("DPMF_")}
        calls = [delayed(_with_env)(func, env, p, fixed) for p in points]
        with _dask_backend(scheduler):
            return Parallel(n_jobs=-1)(calls)
    return Parallel(n_jobs=n_jobs, backend=backend)(calls)


def grid_frame(func, grid: dict, **kw) -> pd.DataFrame:
    """Like :func:`grid_map`, as a DataFrame: grid columns, then the keys of the dict(s) ``func`` returns."""
    points = grid_points(grid)
    rows = []
    for point, result in zip(points, grid_map(func, grid, **kw)):
        for r in (result if isinstance(result, list) else [result]):
            if not isinstance(r, dict):
                r = {"value": r}
            rows.append({**point, **r})
    return pd.DataFrame(rows)
