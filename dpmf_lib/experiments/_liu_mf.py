"""Shared pieces of the Liu et al. (2015) systems experiments (Figures 2–6, Tables 1–2): data, solver runs, curves.

Every solver run returns rows ``{dataset, solver, d, threads, epoch, seconds, wall, test_rmse}``: ``seconds`` is the
time of that round (C-SGD/SGLD: the kernel; peers: see :mod:`dpmf_lib.mf.peers`), ``wall`` the cumulative time
including each solver's own setup (layout building for ours, data conversion for the peers).

C-SGD's user block is scaled to the data (:func:`block_users_for`): the paper's ~1,000 users per block, but small
enough for at least 4 blocks per thread — a block is the unit of parallel work, and ML-100K's 943 users in one
1,000-user block ran as a single segment, so "2 threads" was one thread.
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..errors import ParameterError
from ..mf import sample_sgld, train_sgd, warmup
from ..mf.data import load_for_mf, train_test
from ..mf.peers import PeerUnavailable, libmf_curve, surprise_curve

_WARM = False
BLOCKS_PER_THREAD = 4
BLOCK_USERS_CAP = 1000  # the paper's "~1,000 users" per block


def block_users_for(n_users: int, threads: int | None, params: dict | None = None) -> int:
    """Users per C-SGD block: ``min(1000, n_users // (4·threads))`` (≥ 1), so there are ≥ 4 blocks per thread.

    ``threads``: the most threads this data set is run with (``params['threads']`` when larger), so runs of one
    figure at different thread counts share one layout."""
    th = max(int(threads or 1), int((params or {}).get("threads") or 1))
    return int(max(1, min(BLOCK_USERS_CAP, n_users // (BLOCKS_PER_THREAD * th))))


def ensure_warm():
    global _WARM
    if not _WARM:
        warmup()
        _WARM = True


def load_split(dataset: str, params: dict):
    """``(train, test)`` of ``dataset`` (real if present, else the labelled stand-in), seeded random split."""
    r = load_for_mf(dataset, seed=params["seed"], standin_scale=params.get("standin_scale", 1.0),
                    max_ratings=params.get("max_ratings"))
    return train_test(r, params.get("test_fraction", 0.1), seed=params["seed"])


def sgd_kw(params: dict) -> dict:
    return dict(eta0=params["sgd_eta0"], gamma=params["sgd_gamma"], lam=params["sgd_lambda"])


def sgld_kw(params: dict, n: int) -> dict:
    return dict(eta0=params["sgld_eta0_times_n"] / n, gamma=params["sgld_gamma"], zeta=params["sgld_zeta"],
                alpha=params["sgld_alpha"], beta=params["sgld_beta"], lambda_r=params["sgld_lambda_r"])


def run_csgd(train, test, d, epochs, params, *, order="tiered", threads=None, label="csgd") -> pd.DataFrame:
    ensure_warm()
    bu = block_users_for(train.n_users, threads, params)
    res = train_sgd(train, d=d, epochs=epochs, order=order, n_threads=threads, test=test, seed=params["seed"],
                    block_users=bu, **sgd_kw(params))
    h = res.history
    setup = _layout_seconds(train, order, params, bu)  # counted into wall (test evaluation is not)
    return pd.DataFrame({"solver": label, "d": d, "threads": threads or 0, "block_users": bu, "epoch": h["epoch"],
                         "seconds": h["seconds"], "wall": h["wall"] + setup, "test_rmse": h["test_rmse"],
                         "updates_per_s": h["updates_per_s"]})


def _layout_seconds(train, order, params, block_users=BLOCK_USERS_CAP) -> float:
    from ..mf.csgd import make_layout

    t0 = time.perf_counter()
    make_layout(train, order, block_users=block_users, seed=params["seed"])
    return time.perf_counter() - t0


def run_sgld(train, test, d, epochs, params, *, threads=None, label="sgld", return_result=False, **kw):
    """Fast SGLD's per-round curve; with ``return_result`` also the :class:`SGLDResult` (kept samples)."""
    ensure_warm()
    kw.setdefault("block_users", block_users_for(train.n_users, threads, params))
    res = sample_sgld(train, d=d, epochs=epochs, n_threads=threads, test=test, seed=params["seed"],
                      burn_in=params.get("sgld_burn_in", 0), **{**sgld_kw(params, train.n_ratings), **kw})
    h = res.history
    setup = _layout_seconds(train, "tiered", params, kw["block_users"])
    out = pd.DataFrame({"solver": label, "d": d, "threads": threads or 0, "block_users": kw["block_users"],
                        "epoch": h["epoch"],
                        "seconds": h["seconds"], "wall": h["wall"] + setup, "test_rmse": h["test_rmse"],
                        "test_rmse_avg": h.get("test_rmse_avg", np.nan), "updates_per_s": h["updates_per_s"]})
    return (out, res) if return_result else out


def run_peer(name, train, test, d, iters, params, *, threads=1) -> pd.DataFrame:
    """A peer's RMSE-vs-time curve (one fit per entry of ``iters``); empty frame if the peer is not installed.

    Peers run on one thread: with 2 threads LIBMF 0.9.2 deadlocked in a ci run on ML-100K (every worker waiting in
    ``Scheduler::put_job``, main thread in ``fpsg_core`` join — gdb backtrace), and surprise is single-threaded. Any
    other ``threads`` is refused rather than silently replaced: a comparison with C-SGD must run C-SGD at the same
    count (Figure 2's ``peer_threads``)."""
    if int(threads) != 1:
        raise ParameterError(f"peers run on one thread here (LIBMF's 2-thread scheduler deadlocked), got "
                             f"threads={threads!r}: set peer_threads: 1 and run C-SGD at that count to compare")
    try:
        if name == "libmf":
            rows = libmf_curve(train, test, d=d, iters=iters, n_threads=threads, eta=params["libmf_eta"],
                               lam=params["libmf_lambda"])
        elif name == "surprise":
            rows = surprise_curve(train, test, d=d, iters=iters, seed=params["seed"])
        else:
            raise ValueError(name)
    except PeerUnavailable:
        return pd.DataFrame()
    df = pd.DataFrame(rows)
    df["solver"] = {"libmf": "libmf", "surprise": "surprise-svd"}[name]
    df["d"], df["threads"] = d, threads
    df = df.rename(columns={"epochs": "epoch"})
    df["wall"] = df["seconds"]
    df["seconds"] = df["wall"] / df["epoch"]  # mean seconds per epoch of that fit (incl. setup)
    return df
