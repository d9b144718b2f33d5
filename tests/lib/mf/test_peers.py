"""Peer wrappers (libmf, scikit-surprise) on a small low-rank problem: they must beat the global-mean predictor."""

import numpy as np
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.mf import Schedule, train_sgd
from dpmf_lib.mf.peers import PeerUnavailable, libmf_fit, run_with_watchdog, surprise_fit, time_to_rmse


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
    res = train_sgd(tr, d=8, epochs=20, eta0=0.02, gamma=0.0, lam=0.02, test=te,
                    schedule=Schedule(n_threads=1, block_users=50, tiers=(20, 50)))
    assert res.history.test_rmse.iloc[-1] < 0.9 * base


def test_time_to_rmse():
    assert time_to_rmse([1, 2, 3], [1.0, 0.9, 0.8], 0.9) == 2
    assert time_to_rmse([1, 2], [1.0, 0.95], 0.9) == float("inf")


def _sleeps_forever(conn, seconds):  # a worker that never answers (a hung LIBMF); importable by the spawn child
    import time as _time

    _time.sleep(seconds)


def _answers(conn, value):
    conn.send(value)
    conn.close()


def _plain_libmf_rmse(conn, tr_u, tr_i, tr_v, te_u, te_i, te_v):
    """LIBMF used directly, as its README shows (no wrapper of ours), sending the test RMSE; run in a child process
    of its own under the watchdog, because LIBMF's scheduler can hang (cjlin1/libmf#12) and a fit in the test
    process once hung `make test` (twenty-second session)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        from libmf import mf
    X = np.column_stack([tr_u, tr_i, tr_v]).astype(np.float32)
    m = mf.MF(k=8, nr_threads=1, nr_bins=8, nr_iters=10, lambda_p2=0.05, lambda_q2=0.05, lambda_p1=0.0,
              lambda_q1=0.0, eta=0.1, quiet=True)
    m.fit(X)
    P, Q = m.p_factors(), m.q_factors()
    ok = (te_u < P.shape[0]) & (te_i < Q.shape[0])
    p = np.full(len(te_v), float(m.model.b))
    p[ok] = np.einsum("ij,ij->i", P[te_u[ok]], Q[te_i[ok]])
    p[~np.isfinite(p)] = float(m.model.b)
    conn.send(float(np.sqrt(np.mean((p - te_v) ** 2))))
    conn.close()


def test_libmf_in_its_worker_process_gives_the_plain_fit():
    """The watchdog's process and our option mapping change where LIBMF runs, not what it computes (1 thread: LIBMF
    is deterministic): the same RMSE as LIBMF called directly."""
    tr, te = _lowrank()
    try:
        _, rmse = libmf_fit(tr, te, d=8, epochs=10)
    except PeerUnavailable as exc:
        pytest.skip(str(exc))
    plain = run_with_watchdog(_plain_libmf_rmse, (tr.users, tr.items, tr.values, te.users, te.items, te.values),
                              timeout_s=120, what="the plain LIBMF fit")
    assert rmse == plain


def test_watchdog_kills_a_hung_worker_and_says_so():
    import time as _time

    from dpmf_lib.mf.peers import PeerHung, run_with_watchdog

    t0 = _time.perf_counter()
    with pytest.raises(PeerHung, match="2 attempts"):
        run_with_watchdog(_sleeps_forever, (600,), timeout_s=3.0, what="a test worker")
    assert _time.perf_counter() - t0 < 60  # two attempts of 3 s plus process start-up, not the worker's 600 s
    assert run_with_watchdog(_answers, (42,), timeout_s=60.0) == 42


def test_libmf_timeout_leaves_room_for_a_slow_fit():
    from dpmf_lib.mf.peers import libmf_timeout

    # Liu Fig 2 at paper: 4M ratings, d = 2048, 15 epochs took ≈ 53 + 15 × 15 s here; the watchdog must not fire
    assert libmf_timeout(4_000_000, 2048, 15) > 10 * (53 + 15 * 15)
    assert 60 <= libmf_timeout(20_000, 8, 3) < 70  # a hang on a small fit costs about a minute
