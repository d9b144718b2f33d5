"""Peer wrappers (libmf, scikit-surprise) on a small low-rank problem: they must beat the global-mean predictor."""

import numpy as np
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.mf import train_sgd
from dpmf_lib.mf.peers import PeerUnavailable, libmf_fit, surprise_fit, time_to_rmse


def _lowrank(seed=0, n_users=300, n_items=200, n=12000):
    rng = np.random.default_rng(seed)
    key = np.unique(rng.integers(0, n_users * n_items, n * 2))[:n]
    key = rng.permutation(key)
    u, i = (key // n_items).astype(np.int32), (key % n_items).astype(np.int32)
    A, B = rng.standard_normal((n_users, 3)), rng.standard_normal((n_items, 3))
    v = np.clip(3 + np.einsum("ij,ij->i", A[u], B[i]) * 0.6 + 0.3 * rng.standard_normal(n), 1, 5).astype(np.float32)
    src = DataSource("toy", False, note="low-rank toy")
    r = Ratings(u, i, v, n_users, n_items, (1.0, 5.0), src)
    m = len(v) * 9 // 10
    return r.subset(np.arange(m)), r.subset(np.arange(m, len(v)))


@pytest.mark.parametrize("fit,kw", [(libmf_fit, {"epochs": 20}), (surprise_fit, {"epochs": 60, "lr": 0.01})])
def test_peer_beats_global_mean(fit, kw):
    tr, te = _lowrank()
    base = float(np.sqrt(np.mean((te.values - tr.values.mean()) ** 2)))
    try:
        _, rmse = fit(tr, te, d=8, **kw)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    assert rmse < 0.9 * base


def test_csgd_beats_global_mean_on_same_toy():
    tr, te = _lowrank()
    base = float(np.sqrt(np.mean((te.values - tr.values.mean()) ** 2)))
    res = train_sgd(tr, d=8, epochs=20, eta0=0.02, gamma=0.0, lam=0.02, test=te, n_threads=1, block_users=50,
                    tiers=(20, 50))
    assert res.history.test_rmse.iloc[-1] < 0.9 * base


def test_time_to_rmse():
    assert time_to_rmse([1, 2, 3], [1.0, 0.9, 0.8], 0.9) == 2
    assert time_to_rmse([1, 2], [1.0, 0.95], 0.9) == float("inf")
