"""The ``mf`` suite end to end on a tiny profile: every throughput and setup ratio is paired over repeats."""

import math

import numba
import pytest

from dpmf_lib.bench import mf

TINY = dict(standin_scale=0.002, setup_ratings=None, n_ratings=60_000, dims=(128,), threads=(1, 2), budget=1e9,
            epochs=2, repeats=3, peer_d=8, libmf_iters=(1, 2), surprise_iters=(1,), csgd_epochs=3, serve_users=16,
            serve_d=32, reference_layout=False, full_shape=None)


@pytest.mark.slow
def test_the_mf_suite_pairs_its_ratios_over_repeats(monkeypatch):
    monkeypatch.setitem(mf.PROFILES, "tiny", TINY)
    monkeypatch.setattr(mf, "_ceilings", lambda profile: {"fma_GFLOPs": 100.0})  # the machine suite is tested apart
    out = mf.run("tiny")
    ratios = {r["name"]: r for r in out["ratios"]}
    paired = ["csgd_setup_plus_first_round_over_two_rounds_d16_1thread",
              "csgd_setup_plus_first_round_over_two_rounds_d16_1thread_cpu_time",
              "csgd_over_naive_updates_d128_1thread", "csgd_over_naive_updates_d128_1thread_without_prefetch",
              "sgld_over_csgd_updates_d128_1thread", "csgd_fraction_of_fma_ceiling_d128_1thread"]
    if numba.config.NUMBA_NUM_THREADS >= 2:
        paired += ["csgd_setup_plus_first_round_over_two_rounds_d16_2thread", "csgd_scaling_1_to_2_threads_d128",
                   "csgd_private_over_shared_item_rows_d128_2threads"]
    for name in paired:
        r = ratios[name]
        assert r["repeats"] == 3 and r["low"] <= r["value"] <= r["high"] and math.isfinite(r["value"]), name
        assert (r["target"] is None) == ("repeats_meeting" not in r), name
        if r["target"] is not None:
            assert 0 <= r["repeats_meeting"] <= 3
            # the median meets the line exactly when at least two of the three repeats do
            assert r["met"] == (r["repeats_meeting"] >= 2), name
    ups = [x for x in out["records"] if x["metric"] == "updates_per_s"]
    names = {x["name"] for x in ups}
    assert {"csgd", "naive_sgd", "sgld", "csgd_noprefetch", "naive_sgd_noprefetch", "csgd_usermajor"} <= names
    assert all(x["repeats"] == 3 and x["low"] <= x["value"] <= x["high"] for x in ups)
    assert all("repeats" not in x["params"] for x in out["records"])  # --compare keys stay as before
