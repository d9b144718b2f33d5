"""Liu Figure 4's runs are sweep tasks (issue #20): the rows depend on each run's own seed, not on the backend."""

import pandas as pd

from dpmf_lib.experiments import liu_fig4
from dpmf_lib.params import load_params


def test_rows_do_not_depend_on_how_many_workers_ran_them():
    p = load_params("liu_fig4", "smoke", {"threads": 1, "max_ratings": 5000, "table_sizes": [10]})
    one = liu_fig4.run({**p, "n_jobs": 1})
    two = liu_fig4.run({**p, "n_jobs": 2})
    pd.testing.assert_frame_equal(one, two)
    assert one.attrs["measurements"] == two.attrs["measurements"]
    # and each row is its task's own result
    assert len(one) == 2 and list(one.table_size) == [0, 10]
    from dpmf_lib.experiments._liu_mf import load_split

    train, test = load_split("ml-100k", p)
    again = liu_fig4.table_point(1.0, 0, 10, train, test, p)
    assert again["test_rmse_avg"] == one.test_rmse_avg.iloc[1]


def test_a_task_is_the_sgld_run_at_its_own_seed():
    # not circular (run() calls table_point too): the run is fast SGLD at seed·1000 + repeat with the table size
    from dpmf_lib.experiments._liu_mf import load_split, run_sgld

    p = load_params("liu_fig4", "smoke", {"threads": 1, "max_ratings": 5000})
    train, test = load_split("ml-100k", p)
    got = liu_fig4.table_point(1.0, 1, 10, train, test, p)
    h = run_sgld(train, test, p["d"], p["epochs"], {**p, "seed": p["seed"] * 1000 + 1, "sgld_zeta": 1.0},
                 threads=1, noise="table", noise_table_size=10)
    assert got["test_rmse_avg"] == float(h.iloc[-1]["test_rmse_avg"])
