"""Hua et al.: a figure's runs are sweep tasks (issue #20): the rows do not depend on ``n_jobs``, a loky worker uses the
caller's result cache (``DPMF_*`` of the caller, not of the environment the worker was started with), and a run the
figure asks for twice is computed once."""

from pathlib import Path

import pandas as pd

from dpmf_lib.experiments.hua import hua_common as hc
from dpmf_lib.experiments.hua import hua_fig10
from dpmf_lib.params import load_params


def _cached_runs(cache: Path) -> set[str]:
    return {p.parent.name for p in (cache / "joblib").rglob("output.pkl") if "_compute" in p.parts}


def test_fig10_rows_are_the_same_with_one_or_two_workers_and_workers_use_the_callers_cache(tmp_path, monkeypatch):
    # smoke: 2 seeds x (baseline + 2 + 2 S3 runs) on ML-100K, d = 8, 30 rounds: 10 tasks
    p = load_params("hua_fig10", "smoke", {"n_jobs": 1})
    monkeypatch.setenv("DPMF_CACHE", "on")
    one = hua_fig10.run(p)  # cache: false at smoke, in-process
    n_runs = 2 * (1 + len(p["p_join_values"]) + len(p["p_leave_values"]))
    for where in ("first", "second"):  # the second call reuses the workers started under the first directory
        monkeypatch.setenv("DPMF_CACHE_DIR", str(tmp_path / where))
        two = hua_fig10.run({**p, "n_jobs": 2, "cache": True})
        pd.testing.assert_frame_equal(two, one, check_exact=True)
        assert two.attrs["measurements"] == one.attrs["measurements"]
        assert len(_cached_runs(tmp_path / where)) == n_runs
    assert len(_cached_runs(tmp_path / "first")) == n_runs  # nothing of the second run went to the first cache


def test_a_run_both_panels_ask_for_is_computed_once(monkeypatch):
    real, calls = hc._compute, []

    def spy(scenario, dkey, eps, checkpoints, seed, cfg, s3, code):
        calls.append((scenario, seed, tuple(sorted(s3.items()))))
        return real(scenario, dkey, eps, checkpoints, seed, cfg, s3, code)

    monkeypatch.setattr(hc, "_compute", spy)
    p = load_params("hua_fig10", "smoke", {"n_jobs": 1, "n_seeds": 1, "p_join_values": [0.005, 0.01],
                                           "p_leave_values": [0.01, 0.02], "p_join": 0.01, "p_leave": 0.01})
    df = hua_fig10.run(p)
    # (p_join, p_leave) = (0.01, 0.01) is in panel (a) and in panel (b): 3 S3 runs and the baseline
    assert len(calls) == len(set(calls)) == 4
    both = df[(df.p_join == 0.01) & (df.p_leave == 0.01)]
    assert list(both.panel) == ["a", "b"] and both.mean_abs_error.nunique() == 1
