"""Balu chapter 4: training runs that two notebooks share are trained once (dpmf_lib/experiments/balu/_balu_ch4_runs.py).

Figure 4.8 plots the runs of Figure 4.7; Figure 4.6 sweeps Figure 4.1's k = 4 cells with a λ grid that contains 4.1's.
The cached path must give the frame of the uncached one (dpmf_lib.sketch.runs.run_configs) bit for bit, and the
second figure must train only what the first did not.
"""

from __future__ import annotations

import pandas as pd
import pytest

from dpmf_lib.params import load_params


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMF_FIGURES_DIR", str(tmp_path / "figures"))
    monkeypatch.setenv("DPMF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("DPMF_CACHE", "on")
    monkeypatch.setenv("DPMF_SWEEP_BACKEND", "sequential")  # the call counter lives in this process
    from dpmf_lib.experiments.balu import _balu_ch4_runs

    _balu_ch4_runs.TRAINED["n"] = 0
    return _balu_ch4_runs


# a small search (two stages, two splits) on a 6,000-rating subset of ML-100K: seconds
SMALL = {"max_ratings": 6000, "n_splits": 2, "epochs": 2, "search": True, "refine": 0.25, "n_jobs": 1,
         "d_grid": [2, 8], "gamma_grid": [1, 4], "eta_grid": [0.01, 0.03]}


def test_cached_runs_equal_uncached_runs(fresh_cache, monkeypatch):
    """With the search on (stage 1 and 2, refits on the second split): the cached driver's frame is the uncached
    driver's, on a cold and on a warm cache, and a warm cache trains nothing."""
    from dpmf_lib.experiments.balu import balu_fig4_1

    p = load_params("balu_fig4_1", "smoke", {**SMALL, "lam_grid": [0.01, 0.1]})
    plain, _ = balu_fig4_1.sweep(p, cached=False)
    cold, _ = balu_fig4_1.sweep(p)
    n_cold = fresh_cache.TRAINED["n"]
    warm, _ = balu_fig4_1.sweep(p)
    assert n_cold > 0 and fresh_cache.TRAINED["n"] == n_cold  # the warm run trained nothing (k = 1 and 4 are cached)
    pd.testing.assert_frame_equal(plain, cold, check_exact=True)
    pd.testing.assert_frame_equal(plain, warm, check_exact=True)
    assert plain.to_csv(index=False) == warm.to_csv(index=False)
    monkeypatch.setenv("DPMF_CACHE", "off")
    pd.testing.assert_frame_equal(plain, balu_fig4_1.sweep(p)[0], check_exact=True)


def test_fig4_6_reads_fig4_1s_k4_runs_from_the_cache(fresh_cache, monkeypatch):
    """4.6's λ grid contains 4.1's: 4.6 trains only its extra stage-1 λs (and, where its winner differs, the new
    stage 2 and refits); its frame equals a run with the cache off."""
    from dpmf_lib.experiments.balu import balu_fig4_1, balu_fig4_6

    p1 = load_params("balu_fig4_1", "smoke", {**SMALL, "lam_grid": [0.01, 0.1]})
    p6 = load_params("balu_fig4_6", "smoke", {**SMALL, "lam_grid": [0.001, 0.01, 0.1]})
    d1 = balu_fig4_1.run(p1)
    before = fresh_cache.TRAINED["n"]
    d6 = balu_fig4_6.run(p6)
    trained6 = fresh_cache.TRAINED["n"] - before
    cells = len(p6["d_grid"]) * len(p6["gamma_grid"])
    stage1_new = cells * len(p6["eta_grid"]) * 1  # λ = 0.001 is 4.6's only extra stage-1 value
    # where 4.6's winner is 4.1's (same (eta, lam) chosen), nothing else is trained for that cell
    k4 = d1[d1.k == 4].set_index(["d", "gamma", "split"])
    same = (d6.set_index(["d", "gamma", "split"])[["eta", "lam"]] == k4[["eta", "lam"]]).all(axis=1)
    same_cells = same.groupby(["d", "gamma"]).all()
    assert same_cells.any()  # the test exercises sharing beyond stage 1
    upper = stage1_new + int((~same_cells).sum()) * (9 + p6["n_splits"] - 1)
    assert stage1_new <= trained6 <= upper
    if same_cells.all():
        assert trained6 == stage1_new
    n_runs = int(d6[d6.split == 0].n_search_evals.sum()) + cells * (p6["n_splits"] - 1)  # 4.6's runs in all
    assert trained6 < n_runs  # without the cache 4.6 trains all of them
    monkeypatch.setenv("DPMF_CACHE", "off")  # the frame served partly from 4.1's runs is a fresh run's
    pd.testing.assert_frame_equal(d6, balu_fig4_6.run(p6), check_exact=True)


def test_fig4_8_trains_nothing_after_fig4_7(fresh_cache):
    """4.8 is 4.7's runs (the same frame, read from the cache); 4.7 measures the RMSE claim, 4.8 the KLD ones."""
    from dpmf_lib.experiments.balu import balu_fig4_7, balu_fig4_8

    over = {"max_ratings": 6000, "n_splits": 2, "epochs": 2, "search": True, "eta_grid": [0.01, 0.03],
            "lam_grid": [0.03], "refine": 0, "d_grid": [4], "n_jobs": 1}
    d7 = balu_fig4_7.run(load_params("balu_fig4_7", "smoke", over))
    n7 = fresh_cache.TRAINED["n"]
    d8 = balu_fig4_8.run(load_params("balu_fig4_8", "smoke", over))
    assert n7 > 0 and fresh_cache.TRAINED["n"] == n7
    pd.testing.assert_frame_equal(d7, d8, check_exact=True)
    c7 = {m["claim"] for m in d7.attrs["measurements"]}
    c8 = {m["claim"] for m in d8.attrs["measurements"]}
    assert c7 == {balu_fig4_7.CLAIMS_RMSE["ml-100k"]}
    assert c8 == {balu_fig4_7.CLAIMS_KLD["ml-100k"], balu_fig4_7.CLAIMS_KLD_REG["ml-100k"],
                  balu_fig4_7.CLAIMS_KLD_REG_EQUAL["ml-100k"], balu_fig4_7.CLAIMS_KLD_SMALL["ml-100k"]}


def test_key_separates_what_changes_the_numbers(fresh_cache):
    """Another seed, split parameter or dataset size is another entry (never served the first's runs)."""
    from dpmf_lib.sketch.runs import load

    p = load_params("balu_fig4_7", "smoke", {"max_ratings": 6000})
    k = fresh_cache.data_key(load(p), p)
    for over in ({"seed": 1}, {"max_ratings": 5000}, {"min_freq": 5}, {"fractions": [0.7, 0.15, 0.15]}):
        q = {**p, **over}
        assert fresh_cache.data_key(load(q), q) != k, over
    assert len(fresh_cache.code_hash()) == 16


def test_fig4_1_and_4_6_sweep_the_same_cells_at_every_profile():
    """4.6 reads 4.1's k = 4 runs: the cells, splits, η grid and epochs of the two must coincide at every profile, and
    at the paper profiles 4.6's λ grid must contain 4.1's (at ci they share λ = 0.03 only)."""
    for profile in ("smoke", "ci", "paper", "paper-ml1m"):
        p1, p6 = load_params("balu_fig4_1", profile), load_params("balu_fig4_6", profile)
        assert tuple(p6["ks"]) == (4,) and 4 in p1["ks"], profile
        for k in ("dataset", "n_splits", "d_grid", "gamma_grid", "eta_grid", "epochs", "refine", "init_scale", "seed"):
            assert p1[k] == p6[k], (profile, k)
        if profile.startswith("paper"):
            assert set(p1["lam_grid"]) <= set(p6["lam_grid"]), profile


def test_code_hash_covers_every_module_a_training_run_imports():
    """A stale run is never served: the key's code part is the digest of this module's whole import closure (the
    splitmix64 mix of the count-sketch hash included)."""
    from dpmf_lib.cache import code_version
    from dpmf_lib.dependencies import module_closure
    from dpmf_lib.experiments.balu import _balu_ch4_runs
    from dpmf_lib.paths import REPO_ROOT

    files = {f.resolve() for f in module_closure("dpmf_lib.experiments.balu._balu_ch4_runs")}
    for f in ("counter_rng.py", "sketch/protocol.py", "data/loaders.py", "privacy/common.py", "validate.py",
              "metrics.py"):
        assert REPO_ROOT.joinpath("dpmf_lib", f).resolve() in files
    assert _balu_ch4_runs.code_hash() == code_version("dpmf_lib.experiments.balu._balu_ch4_runs")


def test_runs_trained_together_are_stored_as_single_runs(fresh_cache, monkeypatch):
    """cached_fits trains a stage's missing runs together and stores each under _fit's key: cached_fit then reads
    every one of them (nothing trained), bit for bit; a stage with some runs cached trains only the others; under
    $DPMF_CACHE=refresh all are trained again and stay readable."""
    import pickle

    from dpmf_lib.sketch.protocol import fit_eval
    from dpmf_lib.sketch.runs import load, make_splits

    p = load_params("balu_fig4_1", "smoke", {"max_ratings": 6000})
    r = load(p)
    data = make_splits(r, p)[0]
    split = {**fresh_cache.data_key(r, p), "split_seed": 0}
    runs = [{"method": "count_sketch", "eta": e, "lam": lam, "seed": 17, "d": 4, "gamma": 2.0, "k": 4, "clip": 2.0,
             "epochs": 2, "init_scale": 0.1, "with_kld": True, "track": ()} for e in (0.01, 0.03) for lam in (0.01, 0.1)]
    def _bytes(results):  # each run's pickle (objects shared between fresh results come back apart from the cache)
        return [pickle.dumps(x) for x in results]

    want = _bytes([fit_eval(data=data, **run) for run in runs])
    fresh_cache.cached_fit(runs[1], split, data)
    assert fresh_cache.TRAINED["n"] == 1
    assert _bytes(fresh_cache.cached_fits(runs, split, data)) == want
    assert fresh_cache.TRAINED["n"] == 4  # runs[1] was read
    assert _bytes([fresh_cache.cached_fit(run, split, data) for run in runs]) == want
    assert fresh_cache.TRAINED["n"] == 4
    monkeypatch.setenv("DPMF_CACHE", "refresh")
    assert _bytes(fresh_cache.cached_fits(runs, split, data)) == want
    assert fresh_cache.TRAINED["n"] == 8
    monkeypatch.setenv("DPMF_CACHE", "on")
    assert _bytes(fresh_cache.cached_fits(runs, split, data)) == want
    assert fresh_cache.TRAINED["n"] == 8
