"""Liu Figure 4: its runs are sweep tasks (issue #20): the rows depend on each run's own seed, not on the backend; and
(review of dd6066c / 744ec12) a per-dataset ``repeats`` and a per-size signed paired difference."""

import math

import pandas as pd
import pytest

from dpmf_lib.claims import DIFFERS, REPRODUCED, Measurement, load_claims
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.liu import liu_fig4
from dpmf_lib.params import load_params
from dpmf_lib.verdicts import judge

CLAIMS = {c.id: c for c in load_claims()}


def test_rows_do_not_depend_on_how_many_workers_ran_them():
    p = load_params("liu_fig4", "smoke", {"threads": 1, "max_ratings": 5000, "table_sizes": [10]})
    one = liu_fig4.run({**p, "n_jobs": 1})
    two = liu_fig4.run({**p, "n_jobs": 2})
    pd.testing.assert_frame_equal(one, two)
    assert one.attrs["measurements"] == two.attrs["measurements"]
    # and each row is its task's own result
    assert len(one) == 2 and list(one.table_size) == [0, 10]
    from dpmf_lib.experiments.liu._liu_mf import load_split

    train, test = load_split("ml-100k", p)
    again = liu_fig4.table_point(1.0, 0, 10, train, test, p)
    assert again["test_rmse_avg"] == one.test_rmse_avg.iloc[1]


def test_a_task_is_the_sgld_run_at_its_own_seed():
    # not circular (run() calls table_point too): the run is fast SGLD at seed·1000 + repeat with the table size
    from dpmf_lib.experiments.liu._liu_mf import load_split, run_sgld

    p = load_params("liu_fig4", "smoke", {"threads": 1, "max_ratings": 5000})
    train, test = load_split("ml-100k", p)
    got = liu_fig4.table_point(1.0, 1, 10, train, test, p)
    h = run_sgld(train, test, p["d"], p["epochs"], {**p, "seed": p["seed"] * 1000 + 1, "sgld_zeta": 1.0},
                 threads=1, noise="table", noise_table_size=10)
    assert got["test_rmse_avg"] == float(h.iloc[-1]["test_rmse_avg"])


def test_fig4_paper_repeats_are_per_dataset():
    p = load_params("liu_fig4", "paper")
    assert liu_fig4.repeats_for(p, "ml-100k") == 10
    assert liu_fig4.repeats_for(p, "netflix") == p["repeats"] == 3  # the stand-in keeps its 3
    assert liu_fig4.repeats_for(load_params("liu_fig4", "ci"), "ml-100k") == 3
    for bad in (0, 2.5, "3", True):
        with pytest.raises(ParameterError, match="dataset_repeats"):
            liu_fig4.repeats_for({**p, "dataset_repeats": {"ml-100k": bad}}, "ml-100k")
    with pytest.raises(ParameterError, match="dataset_repeats"):
        liu_fig4.repeats_for({**p, "dataset_repeats": [10]}, "ml-100k")


def test_fig4_run_uses_the_datasets_repeats(monkeypatch):
    seen = []

    def point(zeta, repeat, table_size, train, test, params):
        seen.append(repeat)
        return {"test_rmse_avg": 1.0 + 0.001 * repeat + (0.01 if table_size == 10 else 0.0), "test_rmse": 1.0,
                "v_spread": 0.1, "diverged": False}
    monkeypatch.setattr(liu_fig4, "table_point", point)
    p = load_params("liu_fig4", "smoke", {"max_ratings": 5000, "threads": 1, "n_jobs": 1, "repeats": 1,
                                         "dataset_repeats": {"ml-100k": 4}, "table_sizes": [10, 10000, 100000]})
    df = liu_fig4.run(p)
    assert sorted(set(seen)) == [0, 1, 2, 3] and df.repeat.nunique() == 4
    ms = df.attrs["measurements"]
    assert [m["setting"] for m in ms] == ["zeta=1, size=10000", "zeta=1, size=100000"]
    assert all(m["value"] == pytest.approx(0.0) and m["guards"]["power_smallest_table"] == pytest.approx(0.01)
               for m in ms)
    assert "over 4 runs" in ms[0]["note"]


def test_fig4_size_differences_are_signed_paired_means():
    rows = []
    for rep, (fresh, t10, t1e4, t1e5) in enumerate([(0.97, 1.04, 0.972, 0.965), (0.98, 1.05, 0.984, 0.977)]):
        rows += [{"repeat": rep, "table_size": s, "test_rmse_avg": v}
                 for s, v in [(0, fresh), (10, t10), (10_000, t1e4), (100_000, t1e5)]]
    diffs, power = liu_fig4.size_differences(pd.DataFrame(rows))
    assert diffs == pytest.approx({10_000: 0.003, 100_000: -0.004})  # signed: not max |.| = 0.004 of one size
    assert power == pytest.approx(0.07)
    rows[2]["test_rmse_avg"] = float("inf")  # a diverged run at 10,000: that size has no finite value
    diffs, _ = liu_fig4.size_differences(pd.DataFrame(rows))
    assert math.isinf(diffs[10_000]) and math.isfinite(diffs[100_000])


def test_fig4_claim_is_reproduced_only_when_every_size_is_within_the_tolerance():
    claim = CLAIMS["liu-6.4-lookup-table-10k-indistinguishable-ml-100k"]

    def meas(setting, values):
        # the notebook's power guard and the guards its kinds (chain, trained-model) add by rule
        m = Measurement(claim.id, values[0], "ml-100k", True, setting=setting,
                        guards={"power_smallest_table": 0.05, "chain_moved": 0.01, "chain_split_rhat": 1.01,
                                "chain_ess": 400.0, "gain_over_bias_only": 0.05}).as_dict()
        m.update(values=values, profile="paper")
        return m
    near = [0.0005, -0.0004, 0.0002, -0.0001, 0.0003]
    assert judge(claim, [meas("zeta=1, size=10000", near), meas("zeta=1, size=100000", near)]).verdict == REPRODUCED
    off = [0.009, 0.010, 0.011, 0.0095, 0.0105]
    assert judge(claim, [meas("zeta=1, size=10000", off), meas("zeta=1, size=100000", near)]).verdict == DIFFERS
