"""Figure 3 gives C-SGD/SGLD a user block scaled to the data (#14 F6): with the default 1,000-user block ML-100K's
943 users were one segment, so the 2-thread throughput was a 1-thread one."""

import numba
import pandas as pd

from dpmf_lib.experiments.liu import liu_fig3
from dpmf_lib.mf.model import init_model
from dpmf_lib.params import load_params


class _Res:
    history = pd.DataFrame({"epoch": [1, 2], "updates_per_s": [1.0, 1.0]})
    model = init_model(3, 3, 2)


def test_fig3_runs_have_enough_user_blocks_per_thread_on_ml100k(monkeypatch):
    calls = []

    def fake(name):
        def f(r, **kw):
            calls.append((name, r.n_users, kw["schedule"].n_threads, kw["schedule"].block_users))
            return _Res()
        return f

    monkeypatch.setattr(liu_fig3, "train_sgd", fake("sgd"))
    monkeypatch.setattr(liu_fig3, "sample_sgld", fake("sgld"))
    monkeypatch.setattr(liu_fig3, "ensure_warm", lambda: None)
    p = load_params("liu_fig3", "smoke", {"datasets": ["ml-100k"], "max_ratings": None, "max_threads": 2,
                                          "section5_datasets": None})  # Section 5: test_ml100k_claims.py
    assert p["sweep_dims"] == p["dims"]  # smoke: every d gets the thread sweep
    df = liu_fig3.run(p)
    max_t = min(2, numba.config.NUMBA_NUM_THREADS)
    assert {c[0] for c in calls} == {"sgd", "sgld"} and {c[2] for c in calls} == set(range(1, max_t + 1))
    for name, n_users, threads, bu in calls:
        assert n_users == 943
        n_blocks = -(-n_users // bu)
        # ≥ 4 blocks per thread at the sweep's largest thread count (so every run has parallel work, one layout)
        assert n_blocks >= 4 * max_t >= threads, (name, threads, bu, n_blocks)
    assert len({c[3] for c in calls}) == 1  # one layout for every thread count
    assert (df.block_users == calls[0][3]).all()
