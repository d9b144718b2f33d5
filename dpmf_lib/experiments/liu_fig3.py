"""Liu, Wang & Smola (2015), Figure 3: throughput (rating updates per second) vs number of cores at d = 2048.

The paper measures C-SGD and SGLD on Yahoo! Music with up to 32 cores. Here: 1 … ``max_threads`` numba threads
(this machine has 2 cores, shared with other jobs — scaling numbers are noisy and capped at 2), C-SGD, naive SGD
and fast SGLD, each run ``epochs`` rounds; the median updates/s over rounds 2.. counts. Also the abstract's
"1024 dimensional models at a rate of 8.5 million recommendations per second" (read as rating updates/s, the only
throughput the paper reports) at d = 1024 with all threads, and Section 5's "approximately 10 seconds" per pass over
Netflix's 10⁸ ratings at d = 2048 (10⁷ updates/s).

C-SGD's and SGLD's user block is scaled to the data as in Figures 2, 5 and 6 (:func:`._liu_mf.block_users_for` with
the largest thread count of the sweep, so every thread count shares one layout): the default 1,000-user block made
ML-100K's 943 users one segment, so its "2 threads" ran on one thread. The ``block_users`` column records it.
"""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd

from ..claims import Measurement
from ..mf import sample_sgld, train_sgd
from ..mf.data import load_for_mf
from ..outputs import attach
from ..params import require_datasets
from ..plotting import figure, standin_title
from ._liu_mf import block_users_for, ensure_warm, sgd_kw, sgld_kw

CLAIM_1024 = "liu-abstract-8.5M-per-s-d1024"
CLAIM_2048 = "liu-5-netflix-d2048-10s-per-epoch"


def _ups(res) -> float:
    u = res.history["updates_per_s"].to_numpy()
    return float(np.median(u[1:])) if len(u) > 1 else float(u[0])


def run(params: dict) -> pd.DataFrame:
    require_datasets(params)  # first: before any data is loaded or model trained
    ensure_warm()
    rows, sources, meas = [], [], []
    max_t = min(int(params["max_threads"]), numba.config.NUMBA_NUM_THREADS)
    for ds in params["datasets"]:
        r = load_for_mf(ds, seed=params["seed"], standin_scale=params["standin_scale"],
                        max_ratings=params["max_ratings"])
        label = r.source.label
        sources.append(r.source)
        bu = block_users_for(r.n_users, max_t)  # ≥ 4 blocks per thread at the largest thread count
        for d in params["dims"]:
            for th in range(1, max_t + 1):
                for s in params["solvers"]:
                    if s == "sgld":
                        res = sample_sgld(r, d=d, epochs=params["epochs"], n_threads=th, seed=params["seed"],
                                          block_users=bu, **sgld_kw(params, r.n_ratings))
                    else:
                        res = train_sgd(r, d=d, epochs=params["epochs"], n_threads=th, seed=params["seed"],
                                        order="tiered" if s == "csgd" else "naive", block_users=bu,
                                        **sgd_kw(params))
                    rows.append({"dataset": label, "real": r.source.real, "solver": s, "d": d, "threads": th,
                                 "n_ratings": r.n_ratings, "block_users": bu, "updates_per_s": _ups(res)})
        df = pd.DataFrame(rows)
        best = df[(df.dataset == label) & (df.solver == "csgd") & (df.threads == max_t)]
        for d, claim in ((1024, CLAIM_1024), (2048, CLAIM_2048)):
            v = best[best.d == d]
            if len(v):
                meas.append(Measurement(claim, float(v.updates_per_s.iloc[0]), label, r.source.real,
                                        note=f"C-SGD d={d}, {max_t} threads on this machine (paper: 32 vCPUs)"))
    return attach(pd.DataFrame(rows), sources=sources, measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    keys = list(df.groupby(["dataset", "d"], sort=False).groups)
    fig, axes = figure(ncols=len(keys), width=4.2, height=3.6)
    for ax, (ds, d) in zip(axes[0], keys):
        g = df[(df.dataset == ds) & (df.d == d)]
        for s, h in g.groupby("solver", sort=False):
            ax.plot(h.threads, h.updates_per_s / 1e6, "o-", label=s)
        ax.set_xlabel("threads")
        ax.set_ylabel("million updates / s")
        ax.set_xticks(sorted(g.threads.unique()))
        ax.set_title(f"{ds}, d = {d}", fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(standin_title("Liu et al. Fig. 3: throughput vs threads (2-core shared machine)", df.dataset.unique()), fontsize=10, y=1.05)
    return fig
