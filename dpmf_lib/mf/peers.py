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
import time

import numpy as np

from ..data.ratings import require_ratings
from ..errors import WorkbookError


class PeerUnavailable(WorkbookError):
    """A peer library is not installed."""


def _rmse(p, y) -> float:
    return float(np.sqrt(np.mean((np.asarray(p, np.float64) - y) ** 2)))


def _import_libmf():
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            from libmf import mf
    except Exception as exc:  # ImportError or its missing-.so IOError
        raise PeerUnavailable(f"libmf is not usable ({exc}); install it with `pip install libmf`") from exc
    return mf


def libmf_fit(train, test, *, d=16, epochs=20, eta=0.1, lam=0.05, n_threads=1, nr_bins=None):
    """One libmf fit (real-valued L2 MF: r̂ = p_iᵀq_j, no biases). Returns ``(seconds, test_rmse)``.

    Predictions are computed from the returned factors: the package's ``predict`` wrapper returns wrong values
    (checked against its own per-iteration validation RMSE), and LIBMF leaves factors of items without training
    ratings as NaN — those get LIBMF's fallback, the training mean ``model.b``."""
    require_ratings(train, "train", "libmf_fit")
    mf = _import_libmf()
    X = np.column_stack([train.users, train.items, train.values]).astype(np.float32)
    nb = nr_bins if nr_bins is not None else max(2 * n_threads + 1, 8)
    t0 = time.perf_counter()
    m = mf.MF(k=int(d), nr_threads=int(n_threads), nr_bins=int(nb), nr_iters=int(epochs), lambda_p2=float(lam),
              lambda_q2=float(lam), lambda_p1=0.0, lambda_q1=0.0, eta=float(eta), quiet=True)
    m.fit(X)
    dt = time.perf_counter() - t0
    P, Q = m.p_factors(), m.q_factors()
    p = np.full(test.n_ratings, float(m.model.b))
    ok = (test.users < P.shape[0]) & (test.items < Q.shape[0])
    p[ok] = np.einsum("ij,ij->i", P[test.users[ok]], Q[test.items[ok]])
    p[~np.isfinite(p)] = float(m.model.b)
    return dt, _rmse(p, test.values)


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
    return dt, _rmse(p, test.values)


def surprise_curve(train, test, *, iters=(1, 2, 4, 8, 16), **kw) -> list[dict]:
    return [{"solver": "surprise-svd", "epochs": int(k), **dict(zip(("seconds", "test_rmse"), surprise_fit(
        train, test, epochs=k, **kw)))} for k in iters]


def time_to_rmse(curve_seconds, curve_rmse, target: float) -> float:
    """First time at which a curve reaches ``target`` (``inf`` if never); curves are (cumulative seconds, rmse)."""
    s = np.asarray(curve_seconds, float)
    r = np.asarray(curve_rmse, float)
    hit = np.flatnonzero(r <= target)
    return float(s[hit[0]]) if len(hit) else float("inf")
