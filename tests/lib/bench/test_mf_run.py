"""The ``mf`` suite end to end on a tiny profile: every throughput and setup ratio is paired over repeats;
the thread-scaling diagnostic's private item layout (#19)."""

import math

import numba
import numpy as np
import pytest

from dpmf_lib.bench import mf

TINY = dict(standin_scale=0.002, setup_ratings=None, n_ratings=60_000, dims=(128,), threads=(1, 2), budget=1e9,
            epochs=2, repeats=3, peer_d=8, libmf_iters=(1, 2), surprise_iters=(1,), csgd_epochs=3, serve_users=16,
            serve_d=32, reference_layout=False, full_shape=None, convergence=dict(d=8, seeds=3, epochs=2))


@pytest.mark.slow
def test_the_mf_suite_pairs_its_ratios_over_repeats(monkeypatch):
    """The real measurements run end to end (their values depend on the machine; which configuration each ratio
    divides by which is checked with fake measurements in the next test)."""
    monkeypatch.setitem(mf.PROFILES, "tiny", TINY)
    monkeypatch.setattr(mf, "_ceilings", lambda profile: {"fma_GFLOPs": 100.0})  # the machine suite is tested apart
    out = mf.run("tiny")
    ratios = {r["name"]: r for r in out["ratios"]}
    paired = ["csgd_layout_plus_first_round_over_two_rounds_d16_1thread",
              "csgd_setup_plus_first_round_over_two_rounds_d16_1thread",
              "csgd_layout_plus_first_round_over_two_rounds_d16_1thread_cpu_time",
              "csgd_setup_plus_first_round_over_two_rounds_d16_1thread_cpu_time",
              "csgd_over_naive_updates_d128_1thread", "csgd_over_naive_updates_d128_1thread_without_prefetch",
              "sgld_over_csgd_updates_d128_1thread", "csgd_fraction_of_fma_ceiling_d128_1thread"]
    if numba.config.NUMBA_NUM_THREADS >= 2:
        paired += ["csgd_layout_plus_first_round_over_two_rounds_d16_2thread",
                   "csgd_setup_plus_first_round_over_two_rounds_d16_2thread", "csgd_scaling_1_to_2_threads_d128",
                   "csgd_private_over_shared_item_rows_d128_2threads",
                   "csgd_private_hot_scaling_1_to_2_threads_d128", "csgd_private_hot_over_hogwild_d128_2threads",
                   "csgd_private_hot_test_rmse_over_1thread_d8", "csgd_hogwild_test_rmse_over_1thread_d8"]
    # the real host probe runs beside the 2-thread measurements: a repeat it finds on one core, or on cores without a
    # shared cache, is left out of the 2-thread ratios, so for those the toy checks only that every repeat is counted
    may_leave_out = [n for n in paired if "2thread" in n or "scaling" in n]
    for name in may_leave_out:
        assert ratios[name]["repeats"] + ratios[name].get("repeats_left_out", 0) == 3, name
    for name in paired:
        r = ratios[name]
        assert (r["target"] is None) == ("repeats_meeting" not in r), name
        if name in may_leave_out and r["repeats"] < 3:
            continue
        assert r["repeats"] == 3 and r["low"] <= r["value"] <= r["high"] and math.isfinite(r["value"]), name
        if r["target"] is not None:
            assert 0 <= r["repeats_meeting"] <= 3
            # the median meets the line exactly when at least two of the three repeats do
            assert r["met"] == (r["repeats_meeting"] >= 2), name
    ups = [x for x in out["records"] if x["metric"] == "updates_per_s"]
    names = {x["name"] for x in ups}
    assert {"csgd", "naive_sgd", "sgld", "csgd_noprefetch", "naive_sgd_noprefetch", "csgd_usermajor"} <= names
    assert all(x["repeats"] == 3 and x["low"] <= x["value"] <= x["high"] for x in ups)
    assert all("repeats" not in x["params"] for x in out["records"])  # --compare keys stay as before


# M updates/s at d = 16 of each fake configuration: (layout order, prefetch stride, threads)
FAKE_RATES = {("tiered", 8, 1): 10, ("naive", 8, 1): 4, ("tiered", 0, 1): 8, ("naive", 0, 1): 2, ("tiered", 2, 1): 9,
              ("tiered-usermajor", 8, 1): 5, ("tiered", 8, 2): 17, ("naive", 8, 2): 7}
FAKE_SGLD = {1: 6, 2: 10}
FAKE_PRIVATE = 19
FAKE_PRIVATE_HOT = 18
FAKE_FINAL_RMSE = {"1thread": 0.9, "private_hot": 0.9009, "hogwild": 0.9018}  # x (1 + seed / 10)
# setup: (layout, initialisation, first round, later round) seconds
FAKE_SETUP = {("tiered", 1): (0.5, 0.05, 0.4, 0.3), ("tiered", 2): (0.15, 0.05, 0.2, 0.2),
              ("naive", 1): (4.0, 0.05, 0.6, 0.6), ("naive", 2): (3.0, 0.05, 0.5, 0.5)}
FAKE_SETUP_CPU = (0.3, 0.04, 0.31, 0.25)


def _fake_suite(monkeypatch):
    """Fake measurements whose value encodes what they were asked to measure, times a machine speed that changes
    from repeat to repeat (the same for every measurement of a repeat: each configuration's own call count)."""
    import dpmf_lib.mf.csgd as csgd
    import dpmf_lib.mf.peers as peers

    real_make_layout = csgd.make_layout
    order_of, calls = {}, {}

    def make_layout(train, order, **kw):
        lay = real_make_layout(train, order, **kw)
        order_of[id(lay)] = order
        return lay

    def speed(key):
        k = calls[key] = calls.get(key, -1) + 1
        return 1.0 + 0.5 * k

    def sgd(rd, lay, d, epochs, threads, stride):
        key = (order_of[id(lay)], stride, threads)
        return lambda: FAKE_RATES[key] * 1e6 * 16 / d * speed(("sgd", d, rd.n_ratings) + key)

    def sgld(rd, lay, d, epochs, threads):
        assert order_of[id(lay)] == "tiered"
        return lambda: FAKE_SGLD[threads] * 1e6 * 16 / d * speed(("sgld", d, rd.n_ratings, threads))

    def private(rd, lay, d, epochs):
        assert order_of[id(lay)] == "tiered"
        return lambda: FAKE_PRIVATE * 1e6 * 16 / d * speed(("private", d, rd.n_ratings))

    def private_hot(rd, lay, d, epochs):
        assert order_of[id(lay)] == "tiered"
        return lambda: FAKE_PRIVATE_HOT * 1e6 * 16 / d * speed(("private_hot", d, rd.n_ratings))

    def final_rmse(scheme, train, test, d, epochs, seed):
        assert (d, epochs) == (8, 2) and test.n_ratings < train.n_ratings
        return FAKE_FINAL_RMSE[scheme] * (1 + seed / 10)

    def unavailable(*a, **kw):
        raise peers.PeerUnavailable("faked away in this test")

    monkeypatch.setattr(csgd, "make_layout", make_layout)
    monkeypatch.setattr(mf, "_sgd_measurement", sgd)
    monkeypatch.setattr(mf, "_sgld_measurement", sgld)
    monkeypatch.setattr(mf, "_private_items_measurement", private)
    monkeypatch.setattr(mf, "_private_hot_measurement", private_hot)
    monkeypatch.setattr(mf, "_final_test_rmse", final_rmse)
    monkeypatch.setattr(mf, "_setup_measurement", lambda big, order, threads: lambda: FAKE_SETUP[(order, threads)])
    monkeypatch.setattr(mf, "_setup_cpu_measurement", lambda big: lambda: FAKE_SETUP_CPU)
    monkeypatch.setattr(peers, "libmf_curve", unavailable)
    monkeypatch.setattr(peers, "surprise_curve", unavailable)
    monkeypatch.setattr(mf, "_ceilings", lambda profile: {"fma_GFLOPs": 100.0})
    import dpmf_lib.bench.machine as machine

    monkeypatch.setattr(machine, "host_probe", lambda: (1.97, 45.0))  # two cores of one cache, every repeat
    monkeypatch.setitem(mf.PROFILES, "fake", dict(TINY, dims=(16, 128), epochs=2, repeats=3,
                                                   full_shape=dict(standin_scale=0.002, dims=(16,), epochs=2)))


def test_each_ratio_divides_the_configurations_it_names_repeat_by_repeat(monkeypatch):
    _fake_suite(monkeypatch)
    out = mf.run("fake")
    two = numba.config.NUMBA_NUM_THREADS >= 2
    ratios = {r["name"]: r for r in out["ratios"]}
    expected = {"csgd_over_naive_updates_d128_1thread_without_prefetch": 8 / 2,
                "csgd_over_naive_updates_d128_1thread": 10 / 4,
                "sgld_over_csgd_updates_d128_1thread": 6 / 10,
                "csgd_over_naive_updates_d16_1thread_netflix_full": 10 / 4,
                "csgd_layout_plus_first_round_over_two_rounds_d16_1thread": (0.5 + 0.4) / (2 * 0.3),
                "csgd_setup_plus_first_round_over_two_rounds_d16_1thread": (0.5 + 0.05 + 0.4) / (2 * 0.3),
                "csgd_layout_plus_first_round_over_two_rounds_d16_1thread_cpu_time": (0.3 + 0.31) / (2 * 0.25),
                "csgd_setup_plus_first_round_over_two_rounds_d16_1thread_cpu_time": (0.3 + 0.04 + 0.31) / (2 * 0.25)}
    if two:
        expected.update({"csgd_scaling_1_to_2_threads_d128": 17 / 10,
                         "csgd_private_over_shared_item_rows_d128_2threads": 19 / 17,
                         "csgd_scaling_1_to_2_threads_d128_private_item_rows": 19 / 10,
                         "csgd_private_hot_scaling_1_to_2_threads_d128": 18 / 10,
                         "csgd_private_hot_over_hogwild_d128_2threads": 18 / 17,
                         "csgd_private_hot_test_rmse_over_1thread_d8": 1.001,
                         "csgd_hogwild_test_rmse_over_1thread_d8": 1.002,
                         "csgd_layout_plus_first_round_over_two_rounds_d16_2thread": (0.15 + 0.2) / (2 * 0.2),
                         "csgd_setup_plus_first_round_over_two_rounds_d16_2thread": 1.0})
    for name, value in expected.items():
        r = ratios[name]
        # paired within each repeat: the machine's speed, which differs between repeats, cancels exactly
        assert r["value"] == pytest.approx(value) and r["low"] == pytest.approx(r["high"]), name
    if two:  # the convergence line: 1.001 meets ≤ 1.002; Hogwild's ratio has no line
        assert ratios["csgd_private_hot_test_rmse_over_1thread_d8"]["met"] is True
        assert ratios["csgd_private_hot_test_rmse_over_1thread_d8"]["repeats"] == 3
        assert ratios["csgd_hogwild_test_rmse_over_1thread_d8"]["met"] is None
    fma = ratios["csgd_fraction_of_fma_ceiling_d128_1thread"]  # one ceiling: the kernel's range shows
    assert fma["value"] == pytest.approx(10e6 * 16 / 128 * 1.5 * (8 * 128 + 10) / 1e9 / 100)
    assert fma["low"] < fma["value"] < fma["high"]
    recs = {(x["name"], x["metric"], x["params"].get("d"), x["params"].get("threads"), x["params"].get("stride")): x
            for x in out["records"]}
    for (name, d, stride), value in {("prefetch_speedup", 128, 2): 9 / 8, ("prefetch_speedup", 128, 8): 10 / 8,
                                     ("prefetch_speedup_naive", 128, 8): 4 / 2}.items():
        assert recs[(name, "ratio", d, 1, stride)]["value"] == pytest.approx(value)
    assert recs[("interleave_speedup", "ratio", 16, 1, None)]["value"] == pytest.approx(10 / 5)
    # the setup block's tuple columns land in their records
    for name, value in (("csgd_layout", 0.5), ("csgd_init", 0.05), ("csgd_setup", 0.55), ("csgd_first_round", 0.4),
                        ("csgd_later_round", 0.3), ("naive_sgd_setup", 4.05), ("csgd_layout_cpu", 0.3),
                        ("csgd_init_cpu", 0.04), ("csgd_first_round_cpu", 0.31), ("csgd_later_round_cpu", 0.25)):
        assert recs[(name, "seconds", 16, 1, None)]["value"] == pytest.approx(value), name
    # median updates/s: the middle speed of the three repeats (1.5x)
    assert recs[("csgd", "updates_per_s", 128, 1, None)]["value"] == pytest.approx(10e6 * 16 / 128 * 1.5)
    assert recs[("csgd_netflix_full", "updates_per_s", 16, 1, None)]["value"] == pytest.approx(10e6 * 1.5)
    assert any(x["metric"] == "unavailable" and x["name"] == "libmf" for x in out["records"])


@pytest.mark.skipif(numba.config.NUMBA_NUM_THREADS < 2, reason="needs two numba threads")
def test_a_repeat_in_which_the_host_placed_the_threads_badly_is_left_out_of_the_2thread_ratios(monkeypatch):
    """The host probe taken beside each 2-thread C-SGD measurement decides, per repeat, whether that timing measured
    the code. Faked: the host gives one core in repeat 0 of the setup group and two cores without a shared cache in
    repeat 1 of the d = 128 group (not in the d = 16 ones), and there the 2-thread C-SGD runs slow. Those repeats must
    leave exactly the ratios with a 2-thread side, of their own group; the probe must sit next to the 2-thread C-SGD
    measurement in every repeat."""
    import dpmf_lib.bench.machine as machine

    _fake_suite(monkeypatch)
    log = []
    # the probe's calls in run order: setup group (3 repeats), d = 16, d = 128, the full-shape d = 16
    unfit = {("setup", 0), (128, 1)}  # one core; two cores without a shared cache
    schedule = ([("setup", k) for k in range(3)] + [(16, k) for k in range(3)] + [(128, k) for k in range(3)]
                + [("full", k) for k in range(3)])

    def probe():
        where = schedule[sum(1 for x in log if x == "probe")]
        log.append("probe")
        if where == ("setup", 0):
            return 1.0, 45.0  # one core
        if where == (128, 1):
            return 2.0, 165.0  # two cores, no shared cache
        return 1.5, 100.0  # exactly the lines, which count as two cores of one cache

    monkeypatch.setattr(machine, "host_probe", probe)
    faked_sgd, faked_setup = mf._sgd_measurement, mf._setup_measurement

    def sgd(rd, lay, d, epochs, threads, stride):
        inner = faked_sgd(rd, lay, d, epochs, threads, stride)
        if threads != 2 or stride != 8 or lay.kind != "tiered":
            def logged():
                log.append(("other", lay.kind, d, threads, stride))
                return inner()
            return logged

        def measure():
            k = sum(1 for x in log if x == ("csgd2", d, rd.n_ratings))
            log.append(("csgd2", d, rd.n_ratings))
            return inner() * (0.5 if (d, k) in unfit and rd.n_ratings < 1e5 else 1.0)
        return measure

    def setup(big, order, threads):
        inner = faked_setup(big, order, threads)
        if (order, threads) != ("tiered", 2):
            def logged():
                log.append(("other setup", order, threads))
                return inner()
            return logged

        def measure():
            k = sum(1 for x in log if x == "setup2")
            log.append("setup2")
            layout, init, first, later = inner()
            return (layout, init, first, later * (0.25 if ("setup", k) in unfit else 1.0))
        return measure

    def logging(factory, tag):
        def wrapped(*args):
            inner = factory(*args)

            def measure():
                log.append((tag,))
                return inner()
            return measure
        return wrapped

    monkeypatch.setattr(mf, "_sgd_measurement", sgd)
    monkeypatch.setattr(mf, "_setup_measurement", setup)
    for name in ("_sgld_measurement", "_private_items_measurement", "_private_hot_measurement",
                 "_setup_cpu_measurement"):
        monkeypatch.setattr(mf, name, logging(getattr(mf, name), name))
    ratios = {r["name"]: r for r in mf.run("fake")["ratios"]}
    guarded = {"csgd_scaling_1_to_2_threads_d128": 17 / 10, "csgd_private_over_shared_item_rows_d128_2threads": 19 / 17,
               "csgd_scaling_1_to_2_threads_d128_private_item_rows": 19 / 10,
               "csgd_private_hot_scaling_1_to_2_threads_d128": 18 / 10,
               "csgd_private_hot_over_hogwild_d128_2threads": 18 / 17,
               "csgd_layout_plus_first_round_over_two_rounds_d16_2thread": (0.15 + 0.2) / (2 * 0.2),
               "csgd_setup_plus_first_round_over_two_rounds_d16_2thread": 1.0}
    for name, value in guarded.items():
        r = ratios[name]
        assert r["repeats"] == 2 and r["repeats_left_out"] == 1, name
        assert r["low"] == pytest.approx(value) and r["high"] == pytest.approx(value), name
        assert "1 in which the host ran the two threads on one core or on cores without a shared cache" in r["note"]
    assert ratios["csgd_scaling_1_to_2_threads_d128"]["repeats_meeting"] == 2
    # 1-thread ratios are not guarded, and a one-core repeat of another group does not leave this group's ratios
    for name in ("sgld_over_csgd_updates_d128_1thread", "csgd_layout_plus_first_round_over_two_rounds_d16_1thread",
                 "csgd_over_naive_updates_d16_1thread_netflix_full"):
        assert ratios[name]["repeats"] == 3 and "repeats_left_out" not in ratios[name], name
    host = ratios["machine_fma_scaling_beside_2thread_runs_d128"]
    assert host["repeats"] == 3 and host["low"] == 1.5 and host["high"] == 2.0
    assert ratios["machine_core_to_core_ns_beside_2thread_runs_d128"]["high"] == 165.0
    assert ratios["machine_fma_scaling_beside_2thread_setup_d16"]["low"] == 1.0
    # placement: every probe is next to a 2-thread C-SGD measurement (interleave reverses the order every repeat)
    for i, x in enumerate(log):
        if x == "probe":
            neighbours = log[max(0, i - 1):i] + log[i + 1:i + 2]
            assert any(n == "setup2" or (isinstance(n, tuple) and n[0] == "csgd2") for n in neighbours), (i, log)


def test_the_setup_block_builds_what_train_sgd_would_and_hands_it_over(monkeypatch):
    """The bench's layout and model defaults are train_sgd's; the timed layout is built with the rounds' threads and
    is the one train_sgd trains on; the CPU-clock steps train the same model as train_sgd, byte for byte."""
    import inspect

    import numpy as np

    import dpmf_lib.mf as mflib
    import dpmf_lib.mf.csgd as csgd
    from dpmf_lib.mf.data import load_for_mf

    sig, schedule = inspect.signature(csgd.train_sgd).parameters, mflib.Schedule()
    defaults = {k: getattr(schedule, k) if k in ("block_users", "tiers") else sig[k].default for k in mf.LAYOUT}
    assert defaults == mf.LAYOUT
    assert schedule.prefetch_stride == mf.PREFETCH_STRIDE and sig["init_scale"].default is None
    r = load_for_mf("netflix", seed=0, standin_scale=0.002)
    seen = {}
    real_make_layout, real_train = csgd.make_layout, mflib.train_sgd

    def make_layout(train, order, **kw):
        seen["layout"] = real_make_layout(train, order, **kw)
        seen["layout_threads"] = numba.get_num_threads()
        return seen["layout"]

    def train_sgd(train, **kw):
        seen["trained_on"] = kw.get("layout")
        return real_train(train, **kw)

    monkeypatch.setattr(csgd, "make_layout", make_layout)
    monkeypatch.setattr(mflib, "train_sgd", train_sgd)
    threads = min(2, numba.config.NUMBA_NUM_THREADS)
    layout, init, first, later = mf._setup_measurement(r, "tiered", threads)()
    assert seen["trained_on"] is seen["layout"] and seen["layout_threads"] == threads
    assert all(np.isfinite([layout, init, first, later])) and min(layout, init, first, later) > 0
    monkeypatch.setattr(mflib, "train_sgd", real_train)
    *_, model = mf.csgd_steps_cpu(r, 16, 3)
    ref = real_train(r, d=16, epochs=3, schedule=mflib.Schedule(n_threads=1), **mf.SGD).model
    for a, b in ((model.U, ref.U), (model.V, ref.V), (model.bu, ref.bu), (model.bi, ref.bi)):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_a_probe_past_either_line_or_not_finite_marks_an_unfit_repeat():
    nan = float("nan")
    probes = [(nan, 45.0), (1.49, 45.0), (1.5, 45.0), (2.0, 45.0), (float("inf"), 45.0),
              (2.0, 100.0), (2.0, 100.1), (2.0, nan), (2.0, 165.0)]
    assert mf._unfit_host_repeats(probes).tolist() == [True, True, False, False, False, False, True, True, True]
    assert mf._unfit_host_repeats(None) is None


def test_the_probe_times_both_thread_counts_itself(monkeypatch):
    import dpmf_lib.bench.machine as machine

    calls = []

    def gflops(threads, *, n, repeats):
        calls.append(threads)
        return {1: 50.0, 2: 90.0}[threads]

    monkeypatch.setattr(machine, "fma_gflops_threads", gflops)
    assert machine.fma_scaling_probe() == pytest.approx(1.8) and sorted(calls) == [1, 2]


def _numba_chunks(n: int, threads: int) -> list:
    """The iterations each numba thread runs in a static ``prange`` over ``n``, as numba schedules them here."""
    import numba
    from numba import njit, prange

    @njit(parallel=True)
    def owner(n):
        out = np.empty(n, np.int64)
        for i in prange(n):
            out[i] = numba.get_thread_id()
        return out

    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        o = owner(n)
    finally:
        numba.set_num_threads(old)
    return [np.flatnonzero(o == t) for t in np.unique(o)]


def test_private_item_layout_gives_each_thread_its_own_item_rows():
    """The thread-scaling diagnostic (#19): under numba's own static split of the segments, no item row is written by
    two threads, and modulo n_items every rating keeps its item."""
    import numba

    from dpmf_lib.bench.mf import private_item_layout
    from dpmf_lib.mf.csgd import make_layout
    from tests.mf_toys import random_ratings

    r = random_ratings(n_users=300, n_items=40, n_ratings=6000, seed=3)
    lay = make_layout(r, "tiered", block_users=20, tiers=(5, 20))
    n_seg = lay.seg.shape[0] - 1
    assert n_seg >= 5 and n_seg % 2 == 1  # an uneven split is exercised
    for threads in (2, 3):
        if threads > numba.config.NUMBA_NUM_THREADS:
            continue
        items, n_tot = private_item_layout(lay, r.n_items, threads)
        assert n_tot == threads * r.n_items
        np.testing.assert_array_equal(items % r.n_items, lay.items)
        chunks = _numba_chunks(n_seg, threads)
        assert all(np.array_equal(c, np.arange(c[0], c[-1] + 1)) for c in chunks)  # contiguous, as assumed
        for c in chunks:
            mine = items[lay.seg[c[0]]:lay.seg[c[-1] + 1]] // r.n_items
            assert np.unique(mine).size == 1  # one thread, one private copy of V
        copies = [np.unique(items[lay.seg[c[0]]:lay.seg[c[-1] + 1]] // r.n_items)[0] for c in chunks]
        assert len(set(copies)) == len(chunks)
    # the original layout does share items between the halves (else the diagnostic would measure nothing)
    half = lay.seg[(n_seg + 1) // 2]
    assert set(lay.items[:half].tolist()) & set(lay.items[half:].tolist())
