"""Peer solvers on the same split: libmf (PyPI ``libmf``, LIBMF's C++ SGD) and scikit-surprise ``SVD``.

Both are optional dependencies (``pip install .[peers]``); a missing one raises :class:`PeerUnavailable`.
``*_curve`` functions fit the peer once per entry of ``iters`` (each fit from scratch with that many epochs, timed
end-to-end including the peer's own data conversion) and return rows ``{solver, epochs, seconds, test_rmse}`` —
the RMSE-vs-time curve from which "time to reach a target RMSE" is read. (Neither library exposes per-epoch
callbacks through Python, so a curve is a series of fits; surprise's SVD uses a constant learning rate, so a k-epoch
fit is exactly the first k epochs of a longer run.)
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import time

import numpy as np

from ..data.ratings import require_ratings
from ..metrics import rmse
from ..errors import WorkbookError


class PeerUnavailable(WorkbookError):
    """A peer library is not installed."""


def _import_libmf():
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            from libmf import mf
    except Exception as exc:  # ImportError or its missing-.so IOError
        raise PeerUnavailable(f"libmf is not usable ({exc}); install it with `pip install libmf`") from exc
    return mf


class PeerHung(WorkbookError):
    """A peer's fit did not return within its watchdog time, twice."""


def _libmf_child(conn, X, options: dict) -> None:
    """One LIBMF fit in a process of its own (see :func:`libmf_fit`): timed around LIBMF's construction and fit
    (its data conversion included, as before), factors and the training mean sent back."""
    mf = _import_libmf()
    t0 = time.perf_counter()
    m = mf.MF(quiet=True, **options)
    m.fit(X)
    dt = time.perf_counter() - t0
    conn.send((dt, m.p_factors(), m.q_factors(), float(m.model.b)))
    conn.close()


def run_with_watchdog(target, args: tuple, *, timeout_s: float, attempts: int = 2, what: str = "the call"):
    """``target(conn, *args)`` in a fresh ``spawn`` process; returns what it sends on ``conn``. A process that sends
    nothing within ``timeout_s`` seconds is killed and the call started again, up to ``attempts`` times in all; then
    :class:`PeerHung`. For a library that can hang (LIBMF's scheduler: cjlin1/libmf#12), where a thread cannot be
    stopped but a process can; ``spawn`` because forking a process that already runs numba/BLAS threads can deadlock
    the child."""
    ctx = multiprocessing.get_context("spawn")
    for _ in range(attempts):
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=target, args=(send, *args), daemon=True)
        proc.start()
        send.close()
        try:
            if recv.poll(timeout_s):
                try:
                    return recv.recv()
                except EOFError:  # the child died without sending: not a hang, an error
                    proc.join()
                    raise WorkbookError(f"{what} failed in its worker process (exit code {proc.exitcode})") from None
        finally:
            recv.close()
            if proc.is_alive():
                proc.kill()
            proc.join()
    raise PeerHung(f"{what} did not return within {timeout_s:.0f} s in {attempts} attempts (LIBMF's scheduler can "
                   "hang: cjlin1/libmf#12); raise the timeout if the fit is really that long")


def libmf_timeout(n_ratings: int, d: int, epochs: int) -> float:
    """Watchdog time of one LIBMF fit: 60 s plus 20× an estimate at 2 ns per (rating · dimension · epoch) (LIBMF
    here: ≈ 15 s per epoch on 4M ratings at d = 2048, ≈ 1.8 ns), so only a hang, never a slow fit, reaches it. The
    base covers starting the worker process (measured in docs/performance.md); a hang on a small fit costs a
    minute."""
    return 60.0 + 20 * 2e-9 * float(n_ratings) * float(d) * max(int(epochs), 1)


def libmf_fit(train, test, *, d=16, epochs=20, eta=0.1, lam=0.05, n_threads=1, nr_bins=None, timeout_s=None):
    """One libmf fit (real-valued L2 MF: r̂ = p_iᵀq_j, no biases). Returns ``(seconds, test_rmse)``.

    The fit runs in a process of its own under a watchdog (:func:`run_with_watchdog`; ``timeout_s``, default
    :func:`libmf_timeout`): LIBMF 0.9's scheduler can leave its workers waiting forever in ``Scheduler::put_job``
    (cjlin1/libmf#12; seen here with 2 threads in a ci run and with 1 thread in a smoke test under load), and a hung
    C call cannot be stopped in-process. The seconds are timed inside that process, around LIBMF's own
    construction and fit, as before; starting the process and sending the factors back are not in them.

    Predictions are computed from the returned factors: the package's ``predict`` wrapper returns wrong values
    (checked against its own per-iteration validation RMSE), and LIBMF leaves factors of items without training
    ratings as NaN — those get LIBMF's fallback, the training mean ``model.b``."""
    require_ratings(train, "train", "libmf_fit")
    _import_libmf()  # a missing libmf raises PeerUnavailable here, not in the worker
    X = np.column_stack([train.users, train.items, train.values]).astype(np.float32)
    nb = nr_bins if nr_bins is not None else max(2 * n_threads + 1, 8)
    options = dict(k=int(d), nr_threads=int(n_threads), nr_bins=int(nb), nr_iters=int(epochs), lambda_p2=float(lam),
                   lambda_q2=float(lam), lambda_p1=0.0, lambda_q1=0.0, eta=float(eta))
    wait = libmf_timeout(train.n_ratings, d, epochs) if timeout_s is None else float(timeout_s)
    dt, P, Q, b = run_with_watchdog(_libmf_child, (X, options), timeout_s=wait,
                                    what=f"libmf fit (d = {d}, {epochs} epochs, {train.n_ratings} ratings)")
    p = np.full(test.n_ratings, b)
    ok = (test.users < P.shape[0]) & (test.items < Q.shape[0])
    p[ok] = np.einsum("ij,ij->i", P[test.users[ok]], Q[test.items[ok]])
    p[~np.isfinite(p)] = b
    return dt, rmse(p, test.values)


def libmf_curve(train, test, *, iters=(1, 2, 4, 8, 16), **kw) -> list[dict]:
    return [{"solver": "libmf", "epochs": int(k), **dict(zip(("seconds", "test_rmse"), libmf_fit(train, test,
             epochs=k, **kw)))} for k in iters]


def surprise_fit(train, test, *, d=16, epochs=20, lr=0.005, reg=0.02, seed=0):
    """One scikit-surprise SVD fit (biased MF, SGD, single-threaded). Returns ``(seconds, test_rmse)``."""
    require_ratings(train, "train", "surprise_fit")
    try:
        from surprise import SVD
        from surprise.trainset import Trainset
    except Exception as exc:
        raise PeerUnavailable(f"scikit-surprise is not usable ({exc}); `pip install scikit-surprise`") from exc
    from collections import defaultdict

    t0 = time.perf_counter()
    ur, ir = defaultdict(list), defaultdict(list)
    for u, i, r in zip(train.users.tolist(), train.items.tolist(), train.values.tolist()):
        ur[u].append((i, r))
        ir[i].append((u, r))
    ts = Trainset(ur, ir, train.n_users, train.n_items, train.n_ratings, train.rating_scale,
                  {u: u for u in range(train.n_users)}, {i: i for i in range(train.n_items)})
    algo = SVD(n_factors=int(d), n_epochs=int(epochs), lr_all=float(lr), reg_all=float(reg), random_state=seed)
    algo.fit(ts)
    dt = time.perf_counter() - t0
    # vectorised prediction from the learnt arrays (surprise's predict() is per-rating Python)
    pu, qi, bu, bi = algo.pu, algo.qi, algo.bu, algo.bi
    p = np.einsum("ij,ij->i", pu[test.users], qi[test.items]) + bu[test.users] + bi[test.items] + ts.global_mean
    p = np.clip(p, *train.rating_scale)  # surprise clips its estimates to the rating scale
    return dt, rmse(p, test.values)


def surprise_curve(train, test, *, iters=(1, 2, 4, 8, 16), **kw) -> list[dict]:
    return [{"solver": "surprise-svd", "epochs": int(k), **dict(zip(("seconds", "test_rmse"), surprise_fit(
        train, test, epochs=k, **kw)))} for k in iters]


def time_to_rmse(curve_seconds, curve_rmse, target: float) -> float:
    """First time at which a curve reaches ``target`` (``inf`` if never); curves are (cumulative seconds, rmse)."""
    s = np.asarray(curve_seconds, float)
    r = np.asarray(curve_rmse, float)
    hit = np.flatnonzero(r <= target)
    return float(s[hit[0]]) if len(hit) else float("inf")
