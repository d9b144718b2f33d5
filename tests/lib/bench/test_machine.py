"""dpmf_lib.bench.machine: the machine probes (kernels, cache sizes, bandwidth, FMA rate and its thread scaling)."""

import json
import os
import time

import numpy as np

from dpmf_lib.bench import __main__ as bench_cli
from dpmf_lib.bench import ratio
from dpmf_lib.bench.machine import _fma_loop, _sum_repeated, cache_sizes, first_touch_gbps


def test_kernels_compute_what_they_claim():
    buf = np.arange(1000, dtype=np.float32)
    assert _sum_repeated(buf, 3) == np.float32(3 * buf.sum())
    a, b, n = np.float32(0.5), np.float32(1.0), 40
    # acc_j -> fixed point 2 of acc = 0.5 acc + 1 after many steps, for every lane
    assert abs(_fma_loop(n, a, b) / 256 - 2.0) < 1e-3


def test_cache_sizes_are_positive_and_ordered():
    c = cache_sizes()
    assert set(c) >= {"L1d", "L2"}
    assert 0 < c["L1d"] < c["L2"] <= c.get("L3", c["L2"])


def test_ratio_target_parsing():
    assert ratio("x", 3.2, ">= 3")["met"] is True
    assert ratio("x", 0.6, "<= 0.5")["met"] is False


def test_machine_suite_writes_the_documented_json(tmp_path):
    out = tmp_path / "m.json"
    assert bench_cli.main(["machine", "--profile", "quick", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["suite"] == "machine" and "machine" in doc
    assert {r["params"].get("level") for r in doc["records"] if r["name"] == "read_bandwidth"} >= {"L1d", "L2", "RAM"}
    for r in doc["records"]:
        assert set(r) == {"name", "params", "metric", "value", "unit"}
    for r in doc["ratios"]:
        assert {"name", "value", "target"} <= set(r)


def test_unknown_suite_is_a_clear_error(capsys):
    assert bench_cli.main(["nosuch"]) == 2
    assert "unknown suite" in capsys.readouterr().err


def test_ratio_without_target_is_reported_not_judged():
    r = ratio("x", 2.0, None)
    assert r["target"] is None and r["met"] is None


def test_first_touch_gives_one_positive_rate_per_allocation():
    v = first_touch_gbps(1 << 20, repeats=2)
    assert len(v) == 2 and all(np.isfinite(x) and x > 0 for x in v)


def test_the_core_to_core_probe_hands_a_line_over_or_says_it_could_not():
    """Two threads: a finite one-way latency in a plausible range (tens to hundreds of ns here). One thread: the
    ping-pong's other side never runs, so it must give up (status -1), not hang, and the probe says NaN."""
    import numba
    import pytest

    from dpmf_lib.bench.machine import _ping_pong, core_to_core_ns

    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        assert _ping_pong(np.zeros(2, dtype=np.int64), 50, 100_000) == -1
        assert np.isnan(core_to_core_ns(n=50))
        if numba.config.NUMBA_NUM_THREADS < 2:
            pytest.skip("needs two numba threads")
        numba.set_num_threads(2)
        # the success path needs two CPUs free at once; on a host another process keeps busy (a second pytest
        # worker) the two threads run in turns and the probe must say so (-1 with the abort flag, a partial count)
        for _ in range(3):
            flag = np.zeros(2, dtype=np.int64)
            status = _ping_pong(flag, 1000, 10**9)
            if status == 0:
                break
            assert status == -1 and flag[1] == 1 and 0 <= flag[0] < 2000
            time.sleep(1.0)
        else:
            busy = os.getloadavg()[0]
            if busy > 1.5:
                pytest.skip(f"the host is busy (load {busy:.1f} on 2 cores): the two threads ran in turns, and the "
                            f"probe said so")
            raise AssertionError("the ping-pong stalled on an idle host")
        assert flag[0] == 2000  # every hand-over happened, in turn
        ns = core_to_core_ns(n=20_000)
        assert 1.0 < ns < 10_000.0
    finally:
        numba.set_num_threads(old)


def test_the_ping_pong_gives_up_on_its_total_budget_not_per_wait():
    """The budget counts the spins of all of one side's waits: ten million hand-overs need at least a spin each (a
    side always waits for the other's answer), so a budget of five million must stop the call (-1), though no single
    wait comes near it (a thread's start-up, the longest, is ~1M spins at most here). A per-wait limit would let it
    run to the end (0): with both threads taking turns on one CPU every wait stays short of such a limit and the
    probe ran for minutes."""
    import numba
    import pytest

    from dpmf_lib.bench.machine import _ping_pong

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two numba threads")
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(2)
        assert _ping_pong(np.zeros(2, dtype=np.int64), 10_000_000, 5_000_000) == -1
        assert _ping_pong(np.zeros(2, dtype=np.int64), 1_000, 10**9) == 0
    finally:
        numba.set_num_threads(old)


def test_machine_fma_scaling_is_read_from_the_same_parallel_loop():
    from dpmf_lib.bench.machine import _fma_loop, _fma_loop_threads, fma_scaling

    a, b = np.float32(0.5), np.float32(1.0)
    # each copy runs the single-thread loop: the sum over copies is copies x one loop's value
    assert abs(_fma_loop_threads(40, a, b, 3) - 3 * _fma_loop(40, a, b)) < 1e-2
    assert fma_scaling({"fma_GFLOPs_by_threads": {1: 50.0, 2: 90.0}}) == 1.8
    assert fma_scaling({"fma_GFLOPs": 50.0}) is None


def test_fma_gflops_threads_restores_the_thread_count():
    import numba

    from dpmf_lib.bench.machine import fma_gflops_threads

    before = numba.get_num_threads()
    assert fma_gflops_threads(1, n=1000, repeats=1) > 0
    assert numba.get_num_threads() == before
