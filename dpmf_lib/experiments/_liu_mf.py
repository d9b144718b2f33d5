"""Shared pieces of the Liu et al. (2015) systems experiments (Figures 2–6, Tables 1–2): data, solver runs, curves.

Every solver run returns rows ``{dataset, solver, d, threads, epoch, seconds, wall, test_rmse}``: ``seconds`` is the
time of that round (C-SGD/SGLD: the kernel; peers: see :mod:`dpmf_lib.mf.peers`), ``wall`` the cumulative time
including each solver's own setup (layout building for ours, data conversion for the peers).
"""

from __future__ import annotations

import time

import numpy as np
import pandas as pd

from ..mf import sample_sgld, train_sgd, warmup
from ..mf.data import load_for_mf, train_test
from ..mf.peers import PeerUnavailable, libmf_curve, surprise_curve

_WARM = False


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
    res = train_sgd(train, d=d, epochs=epochs, order=order, n_threads=threads, test=test, seed=params["seed"],
                    **sgd_kw(params))
    h = res.history
    setup = _layout_seconds(train, order, params)  # counted into wall (test evaluation is not)
    return pd.DataFrame({"solver": label, "d": d, "threads": threads or 0, "epoch": h["epoch"],
                         "seconds": h["seconds"], "wall": h["wall"] + setup, "test_rmse": h["test_rmse"],
                         "updates_per_s": h["updates_per_s"]})


def _layout_seconds(train, order, params) -> float:
    from ..mf.csgd import make_layout

    t0 = time.perf_counter()
    make_layout(train, order, seed=params["seed"])
    return time.perf_counter() - t0


def run_sgld(train, test, d, epochs, params, *, threads=None, label="sgld", **kw) -> pd.DataFrame:
    ensure_warm()
    res = sample_sgld(train, d=d, epochs=epochs, n_threads=threads, test=test, seed=params["seed"],
                      burn_in=params.get("sgld_burn_in", 0), **{**sgld_kw(params, train.n_ratings), **kw})
    h = res.history
    setup = _layout_seconds(train, "tiered", params)
    return pd.DataFrame({"solver": label, "d": d, "threads": threads or 0, "epoch": h["epoch"],
                         "seconds": h["seconds"], "wall": h["wall"] + setup, "test_rmse": h["test_rmse"],
                         "test_rmse_avg": h.get("test_rmse_avg", np.nan), "updates_per_s": h["updates_per_s"]})


def run_peer(name, train, test, d, iters, params, *, threads=1) -> pd.DataFrame:
    """A peer's RMSE-vs-time curve (one fit per entry of ``iters``); empty frame if the peer is not installed.

    libmf always runs with one thread: with 2 threads LIBMF 0.9.2 deadlocked in a ci run on ML-100K (every worker
    waiting in ``Scheduler::put_job``, main thread in ``fpsg_core`` join — gdb backtrace), so ``threads`` is ignored
    for it. surprise is single-threaded anyway."""
    threads = 1
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
