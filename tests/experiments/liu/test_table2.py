"""Liu Table 2 (cache simulation): every compared row runs at one prefetch stride, the separate prefetch row is
marked as such, the driver's segments line up with its rows, and the user subset keeps whole users."""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.ci_phases import ci_dir, needs_ci_figures, replaced_in_ci_by
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.liu import _liu_cachegrind_driver as driver
from dpmf_lib.experiments.liu import liu_table2 as t2
from dpmf_lib.params import load_params

# the tail of the warning liu_table2._simulate gives when a valgrind process compiled the kernel itself
COMPILED_UNDER_VALGRIND = "instead of loading them from numba's cache"


def toy(n_users=60, n_items=40, n=2000, seed=0):
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_items + 1)
    items = rng.choice(n_items, n, p=pop / pop.sum())
    users = rng.integers(0, n_users, n)
    return Ratings(users.astype(np.int32), items.astype(np.int32), rng.integers(1, 6, n).astype(np.float32),
                   n_users, n_items, (1.0, 5.0), DataSource("toy", real=False))


@pytest.mark.parametrize("pf,extra", [(0, 2), (2, None), (1, 2), (0, None)])
def test_every_compared_row_uses_the_same_prefetch(pf, extra, tmp_path):
    params = {**load_params("liu_table2", "smoke"), "prefetch": pf, "prefetch_row": extra}
    specs = t2.row_specs(params)
    compared = [s for s in specs if s["compared"]]
    assert [s["order"] for s in compared] == list(t2.ORDERS)
    assert {s["prefetch"] for s in compared} == {pf}
    separate = [s for s in specs if not s["compared"]]
    assert [(s["order"], s["prefetch"]) for s in separate] == ([] if extra in (None, pf) else [("tiered", extra)])
    # and what the driver reads from the layout file
    path = tmp_path / "rows.npz"
    t2.build_layouts(toy(), specs, params, path)
    z = np.load(path)
    assert [int(z[f"prefetch_{i}"]) for i in range(int(z["n_rows"]))] == [s["prefetch"] for s in specs]


def test_the_default_table_compares_prefetch_off_and_adds_the_papers_stride():
    for profile in ("smoke", "ci", "paper"):
        specs = t2.row_specs(load_params("liu_table2", profile))
        assert [(s["name"], s["prefetch"], s["compared"]) for s in specs] == [
            ("tiered", 0, True), ("user-blocked, single tier", 0, True), ("random", 0, True),
            ("tiered + prefetch 2", 2, False)]
    with pytest.raises(ParameterError, match="prefetch"):
        t2.row_specs({"prefetch": -1, "prefetch_row": None})


def test_rows_hold_the_same_ratings_in_their_own_order(tmp_path):
    r = toy()
    params = load_params("liu_table2", "smoke")
    specs = t2.row_specs(params)
    t2.build_layouts(r, specs, params, tmp_path / "rows.npz")
    z = np.load(tmp_path / "rows.npz")
    seqs = []
    for i, s in enumerate(specs):
        u, it = z[f"users_{i}"], z[f"items_{i}"]
        assert len(u) == r.n_ratings and z[f"seg_{i}"][-1] == r.n_ratings
        seqs.append(u)
        assert sorted(u.tolist()) == sorted(r.users.tolist())
    assert not np.array_equal(seqs[0], seqs[2])  # random is another order


def test_user_subset_keeps_whole_users_and_every_item():
    r = toy(n_users=200, n=8000)
    sub = t2.user_subset(r, 1000, seed=3)
    assert 1000 <= sub.n_ratings < 1000 + r.user_counts().max()
    assert sub.n_items == r.n_items
    assert sub.users.min() == 0 and sub.users.max() == sub.n_users - 1
    assert set(np.bincount(sub.users).tolist()) <= set(r.user_counts().tolist())  # every kept user keeps all ratings
    assert t2.user_subset(r, r.n_ratings, seed=3) is r


def test_driver_marks_a_null_segment_and_two_markers_per_row(tmp_path, monkeypatch):
    params = load_params("liu_table2", "smoke")
    specs = t2.row_specs(params)
    t2.build_layouts(toy(), specs, params, tmp_path / "rows.npz")
    calls = []
    monkeypatch.setattr(driver.os, "getppid", lambda: calls.append(1))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        driver.main([str(tmp_path / "rows.npz"), "16", "1"])
    assert len(calls) == 2 + 2 * len(specs)
    assert out.getvalue().split()[:2] == ["markers", str(2 + 2 * len(specs))]


def test_parse_callgrind_summary_and_bad_cache_geometry(tmp_path):
    f = tmp_path / "cg.out.4"
    f.write_text("version: 1\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw\nfn=x\n0 1 2 3\n"
                 "summary: 100 40 20 1 5 2 1 3 1\n")
    assert t2._parse(f) == {"Dr": 40, "Dw": 20, "D1mr": 5, "D1mw": 2, "DLmr": 3, "DLmw": 1}
    ok = {"l1": [32768, 8], "ll": [6291456, 12]}
    l1, ll, note = t2.caches(ok)
    assert l1 == (32768, 8, 64) and ll == (6291456, 12, 64) and "the paper's" in note
    with pytest.raises(ParameterError, match="power of two"):
        t2.caches({"l1": [32768, 8], "ll": [6000000, 12]})


def test_driver_passes_each_rows_own_order_and_prefetch_stride_to_the_kernel(tmp_path, monkeypatch):
    """What each measured segment runs: the row's stored order, its segments and its prefetch stride, in row order
    (a driver that ran every row at one stride, or one order, would make the table compare nothing)."""
    import dpmf_lib.mf.sgd_kernels as sgd_kernels

    params = {**load_params("liu_table2", "smoke"), "prefetch": 0, "prefetch_row": 2}
    specs = t2.row_specs(params)
    t2.build_layouts(toy(n_users=300, n_items=1500, n=20000), specs, params, tmp_path / "rows.npz")
    z = np.load(tmp_path / "rows.npz")
    orders = [(z[f"users_{k}"].tobytes(), z[f"items_{k}"].tobytes()) for k in range(3)]
    assert len(set(orders)) == 3  # tiered, single tier and random are three orders here (items past the first tier)
    seen, segment = [], []
    monkeypatch.setattr(driver.os, "getppid", lambda: segment.append(len(seen)))
    monkeypatch.setattr(sgd_kernels, "_sgd_epoch_serial", lambda users, items, values, seg, *rest: seen.append(
        (users.copy(), items.copy(), values.copy(), seg.copy(), rest[-1])))
    with contextlib.redirect_stdout(io.StringIO()):
        driver.main([str(tmp_path / "rows.npz"), "8", "2"])
    measured = seen[1:]  # the first call compiles, outside every segment
    assert len(measured) == 2 * len(specs)
    for k, s in enumerate(specs):
        start = segment[2 + 2 * k] - 1  # calls counted when row k's opening marker fired (compile call included)
        for users, items, values, seg, stride in measured[start:start + 2]:
            assert stride == s["prefetch"]
            for got, key in ((users, "users"), (items, "items"), (values, "values"), (seg, "seg")):
                assert np.array_equal(got, z[f"{key}_{k}"]), (k, key)
    assert [m[-1] for m in measured] == [0, 0, 0, 0, 0, 0, 2, 2]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
@replaced_in_ci_by("test_the_ci_run_of_table2_compiled_nothing_under_valgrind")
def test_the_valgrind_process_loads_the_kernel_compiled_outside_valgrind(tmp_path):
    """numba under valgrind sees valgrind's virtual CPU, so its cache entry used to be missing on every fresh clone
    and the kernel compiled under valgrind (most of a ~20 min ``ci`` run). With the CPU pinned to what valgrind's
    numba detects and the kernel compiled outside first, the simulated process compiles nothing (it would warn) and
    its counts are real."""
    params = load_params("liu_table2", "smoke")
    specs = t2.row_specs(params)
    npz = tmp_path / "rows.npz"
    t2.build_layouts(toy(), specs, params, npz)
    env = t2.valgrind_env()
    assert "+avx512f" not in env["NUMBA_CPU_FEATURES"]  # valgrind executes no AVX-512
    t2.compile_outside_valgrind(npz, env)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a compile under valgrind warns
        counts = t2._simulate(npz, 16, len(specs), 1, ["--D1=32768,8,64", "--LL=6291456,12,64"], tmp_path, env)
    assert len(counts) == len(specs) and all(c["Dr"] > 2000 and c["D1mr"] > 0 for c in counts)


def compile_warnings(run_dir: Path) -> list[str]:
    """The "compiled under valgrind" warnings a run of liu_table2 printed: in its executed notebook's stream outputs
    (a kernel shows warnings there, from the simulation threads too) or in its ``kernel.log``."""
    nb = json.loads((run_dir / "liu_table2.ipynb").read_text(encoding="utf-8"))
    texts = ["".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", []) if o.get("name")]
    if (run_dir / "kernel.log").exists():
        texts.append((run_dir / "kernel.log").read_text(encoding="utf-8", errors="replace"))
    return [t for t in texts if COMPILED_UNDER_VALGRIND in t]


def test_the_ci_check_looks_for_the_warning_simulate_gives(tmp_path):
    assert COMPILED_UNDER_VALGRIND in inspect.getsource(t2._simulate)
    cell = {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stderr", "text": [
        "/x/liu_table2.py:241: UserWarning: liu_table2: the valgrind process for d = 16 compiled 3 kernel ",
        "signature(s) instead of loading them from numba's cache (slow, same counts)\n"]}]}
    (tmp_path / "liu_table2.ipynb").write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    assert len(compile_warnings(tmp_path)) == 1
    cell["outputs"][0]["text"] = ["fine\n"]
    (tmp_path / "liu_table2.ipynb").write_text(json.dumps({"cells": [cell]}), encoding="utf-8")
    assert compile_warnings(tmp_path) == []


@needs_ci_figures
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="needs valgrind")
def test_the_ci_run_of_table2_compiled_nothing_under_valgrind():
    """What test_the_valgrind_process_loads_the_kernel_compiled_outside_valgrind checks on a toy, checked on CI's own
    cold `ci` run of liu_table2 instead (a fresh clone: no numba cache), so `make test` in .ci/run skips the toy's
    ~3 min: valgrind ran (every row has its counts) and no valgrind process compiled the kernel."""
    import pandas as pd

    out = ci_dir("liu_table2")  # its run.json says ok at ci
    df = pd.read_csv(out / "liu_table2.csv")
    assert len(df) and (df["data_refs"] > 0).all() and (df["l1_miss_pct"] > 0).all(), df[["d", "row", "data_refs"]]
    assert compile_warnings(out) == []
