import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.sweep import grid_frame, grid_map, grid_points


def seeded_value(a, b, seed):
    import numpy as np

    return {"x": float(np.random.default_rng([seed, a, b]).normal()), "sum": a + b}


GRID = {"a": [1, 2, 3], "b": [10, 20]}


def test_grid_points_are_the_cartesian_product_in_order():
    pts = grid_points(GRID)
    assert pts[0] == {"a": 1, "b": 10} and pts[1] == {"a": 1, "b": 20} and len(pts) == 6


def test_bad_grid_is_an_error():
    with pytest.raises(ParameterError, match="'a'"):
        grid_points({"a": []})
    with pytest.raises(ParameterError, match="backend"):
        grid_map(seeded_value, GRID, fixed={"seed": 0}, backend="spark")


def test_parallel_loky_equals_sequential():
    seq = grid_frame(seeded_value, GRID, fixed={"seed": 3}, backend="sequential")
    par = grid_frame(seeded_value, GRID, fixed={"seed": 3}, backend="loky", n_jobs=2)
    assert seq.equals(par)
    assert list(seq["sum"]) == [11, 21, 12, 22, 13, 23]


@pytest.mark.slow
def test_dask_local_cluster_equals_sequential():
    pytest.importorskip("dask.distributed")
    seq = grid_frame(seeded_value, GRID, fixed={"seed": 5}, backend="sequential")
    dsk = grid_frame(seeded_value, GRID, fixed={"seed": 5}, backend="dask")
    assert seq.equals(dsk)
