"""Liu, Wang & Smola (2015), Figure 3: throughput (rating updates per second) vs number of cores at d = 2048.

The paper measures C-SGD and SGLD on Yahoo! Music with up to 32 cores. Here: 1 … ``max_threads`` numba threads
(this machine has 2 cores, shared with other jobs — scaling numbers are noisy and capped at 2), C-SGD, naive SGD
and fast SGLD, each run ``epochs`` rounds; the median updates/s over rounds 2.. counts. The thread sweep with every
solver runs at the dims in ``sweep_dims`` (Figure 3: 2048); the other ``dims`` run C-SGD with all threads only — the
abstract's "1024 dimensional models at a rate of 8.5 million recommendations per second" (read as rating updates/s,
the only throughput the paper reports).

**Section 5's Netflix rate** (ours). Section 5's "approximately 10 seconds" per pass over Netflix's 10⁸ ratings
at d = 2048 (10⁷ updates/s) is about Netflix, so it is measured on Netflix's shape, not on Figure 3's Yahoo! Music
data: a small extra run (:func:`section5_rate`) of C-SGD at ``section5_d`` with all threads for ``section5_epochs``
rounds on whole users of the Netflix stand-in (``section5_datasets``, at ``section5_standin_scale`` of the published
shape, whole users until ``section5_max_ratings``; the median over rounds 2.. counts). It runs after every Figure 3
model is freed (Yahoo's peak is ≈ 16 GB), holds ≈ 2U + 3V (≈ 1 GB at paper) and emits only
``liu-5-netflix-d2048-10s-per-epoch`` (only when ``section5_d`` is the quote's 2048). Its row in the CSV has
``section5`` set and is not on the thread plot; the figure's footnote gives its rate.

**Data** (ours): the dataset (Yahoo! Music's labelled stand-in unless fetched) reduced to *whole users* in
a seeded random order until ``max_ratings`` (:func:`._liu_mf.whole_user_subset`), the items none of them rated
dropped and the ids compacted, so U and V are sized for the subset and not for the whole 1M × 625k id space (which at
d = 2048 needed ≈ 28 GiB for C-SGD here). A random subset of *ratings* would leave ~5 ratings per user and destroy
the reuse of a user's vector inside its block, which is what the tiered order is about. Yahoo's 0–100 ratings are
rescaled to 0–5 and trained with the paper's Yahoo settings (Section 6.3), per dataset via ``dataset_settings``
(:func:`._liu_mf.dataset_params`); datasets without an entry use the flat (Netflix) values.

Initial factors N(0, s²), s = 0.1·sqrt(16/d) (:func:`._liu_mf.init_scale_for`; ours, the paper does not state its
initialisation). After every run the factors are checked to be finite (:func:`._liu_mf.require_finite`): a diverged
run raises, naming the solver, d and threads, instead of timing NaNs.

C-SGD's and SGLD's user block is scaled to the data as in Figures 2, 5 and 6 (:func:`._liu_mf.block_users_for` with
the largest thread count of the sweep, so every thread count shares one layout): the default 1,000-user block made
ML-100K's 943 users one segment, so its "2 threads" ran on one thread. The ``block_users`` column records it.
"""

from __future__ import annotations

import gc
from dataclasses import replace

import numba
import numpy as np
import pandas as pd

from ...claims import Measurement
from ...errors import ParameterError
from ...mf import Schedule, sample_sgld, train_sgd
from ...mf.data import load_for_mf
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title
from ._liu_mf import (block_users_for, dataset_params, ensure_warm, init_scale_for, require_finite, rescale_ratings,
                      sgd_kw, sgld_kw, whole_user_subset)

CLAIM_1024 = "liu-abstract-8.5M-per-s-d1024"
CLAIM_2048 = "liu-5-netflix-d2048-10s-per-epoch"


def _ups(res) -> float:
    u = res.history["updates_per_s"].to_numpy()
    return float(np.median(u[1:])) if len(u) > 1 else float(u[0])


def load_data(dataset: str, params: dict):
    """Figure 3's ratings of ``dataset``: whole users until ``max_ratings``, unrated items dropped, ids compacted,
    values rescaled per ``dataset_settings`` (the full stand-in is released before any model is built)."""
    p = dataset_params(params, dataset)
    r = load_for_mf(dataset, seed=params["seed"], standin_scale=params["standin_scale"])
    r = whole_user_subset(r, params["max_ratings"], params["seed"])
    return rescale_ratings(r, p["rating_scale"]), p


def load_section5(dataset: str, params: dict):
    """Section 5's ratings of ``dataset``: the stand-in (unless real) at ``section5_standin_scale``, whole users until
    ``section5_max_ratings``, unrated items dropped (:func:`._liu_mf.whole_user_subset`); rescaled per
    ``dataset_settings`` like Figure 3's data (Netflix has no entry: its own 1–5 scale and the flat settings)."""
    p = dataset_params(params, dataset)
    r = load_for_mf(dataset, seed=params["seed"], standin_scale=params["section5_standin_scale"])
    r = whole_user_subset(r, params["section5_max_ratings"], params["seed"])
    return rescale_ratings(r, p["rating_scale"]), p


def section5_rate(params: dict, max_t: int) -> tuple[list[dict], list, list]:
    """Section 5's rate: C-SGD at ``section5_d`` on all ``max_t`` threads, ``section5_epochs`` rounds, per dataset of
    ``section5_datasets`` (null: not run). Rows, sources and the measurement of :data:`CLAIM_2048` (only at d = 2048,
    the quote's d)."""
    if params.get("section5_datasets") is None:
        return [], [], []
    rows, sources, meas = [], [], []
    d = int(params["section5_d"])
    for ds in params["section5_datasets"]:
        r, p = load_section5(ds, params)
        p = {**p, "epochs": int(params["section5_epochs"])}
        bu = block_users_for(r.n_users, max_t)
        ups = throughput(r, "csgd", d, max_t, bu, p)
        rows.append({"dataset": r.source.label, "real": r.source.real, "solver": "csgd", "d": d, "threads": max_t,
                     "n_ratings": r.n_ratings, "n_users": r.n_users, "n_items": r.n_items, "block_users": bu,
                     "init_scale": init_scale_for(d), "thread_sweep": False, "section5": True, "updates_per_s": ups})
        sources.append(r.source)
        if d == 2048:
            meas.append(Measurement(CLAIM_2048, ups, r.source.label, r.source.real,
                                    note=f"Section 5: C-SGD d={d}, {max_t} threads on this machine (paper: 32 vCPUs), "
                                         f"median over rounds 2..{p['epochs']}; {r.n_ratings:,} ratings of "
                                         f"{r.n_users:,} whole users, {r.n_items:,} items "
                                         f"(1e8 ratings / 10 s = 1e7 updates/s)"))
        del r
        gc.collect()
    return rows, sources, meas


def throughput(r, solver: str, d: int, threads: int, block_users: int, p: dict) -> float:
    """Median updates/s over rounds 2.. of one run; the model is checked to be finite and then released (at d = 2048
    on the Yahoo data one model is 5 GB: two must never be alive at once)."""
    common = dict(d=d, epochs=p["epochs"], seed=p["seed"], init_scale=init_scale_for(d))
    schedule = Schedule(n_threads=threads, block_users=block_users)
    if solver == "sgld":
        res = sample_sgld(r, **common, schedule=schedule, **sgld_kw(p, r.n_ratings))
        hint = f"eta0*N={p['sgld_eta0_times_n']:g}"
    elif solver in ("csgd", "naive"):
        res = train_sgd(r, **common, schedule=replace(schedule, order="tiered" if solver == "csgd" else "naive"),
                        **sgd_kw(p))
        hint = f"eta0={p['sgd_eta0']:g}, lambda={p['sgd_lambda']:g}"
    else:
        raise ParameterError(f"unknown solver {solver!r} in solvers (csgd, naive, sgld)")
    require_finite(res.model, solver=solver, d=d, dataset=r.source.label, threads=threads, hint=hint)
    return _ups(res)


def run(params: dict) -> pd.DataFrame:
    require_datasets(params)  # first: before any data is loaded or model trained
    if params.get("section5_datasets") is not None:
        require_datasets(params, "section5_datasets")
    sweep = [int(x) for x in params["sweep_dims"]]
    missing = sorted(set(sweep) - {int(x) for x in params["dims"]})
    if missing:
        raise ParameterError(f"sweep_dims {missing} are not in dims {params['dims']}: the thread sweep runs at dims "
                             "listed in both")
    ensure_warm()
    rows, sources, meas = [], [], []
    max_t = min(int(params["max_threads"]), numba.config.NUMBA_NUM_THREADS)
    for ds in params["datasets"]:
        r, p = load_data(ds, params)
        label = r.source.label
        sources.append(r.source)
        bu = block_users_for(r.n_users, max_t)  # ≥ 4 blocks per thread at the largest thread count
        for d in params["dims"]:
            swept = int(d) in sweep
            for th in (range(1, max_t + 1) if swept else [max_t]):
                for s in (params["solvers"] if swept else ["csgd"]):
                    rows.append({"dataset": label, "real": r.source.real, "solver": s, "d": d, "threads": th,
                                 "n_ratings": r.n_ratings, "n_users": r.n_users, "n_items": r.n_items,
                                 "block_users": bu, "init_scale": init_scale_for(d), "thread_sweep": swept,
                                 "section5": False, "updates_per_s": throughput(r, s, int(d), th, bu, p)})
        df = pd.DataFrame(rows)
        v = df[(df.dataset == label) & (df.solver == "csgd") & (df.threads == max_t) & (df.d == 1024)]
        if len(v):
            meas.append(Measurement(CLAIM_1024, float(v.updates_per_s.iloc[0]), label, r.source.real,
                                    note=f"C-SGD d=1024, {max_t} threads on this machine (paper: 32 vCPUs); "
                                         f"{r.n_ratings:,} ratings of {r.n_users:,} whole users, "
                                         f"{r.n_items:,} items"))
        del r
    gc.collect()  # Figure 3's data and models are gone before Section 5's run starts
    more_rows, more_sources, more_meas = section5_rate(params, max_t)
    return attach(pd.DataFrame(rows + more_rows), sources=sources + more_sources, measurements=meas + more_meas)


#: the shared figure roles and readable names of the solvers (dpmf_lib.plotting.ROLES)
SOLVER_LOOKS = {"csgd": ("paper", "C-SGD (tiered)"), "naive": ("compared", "SGD, naive order"),
                "sgld": ("ours", "fast SGLD")}


def plot(df: pd.DataFrame, params: dict):
    import textwrap

    from ...plotting import series

    labels = df.dataset.unique()
    s5 = df[df.section5.astype(bool)] if "section5" in df else df.iloc[:0]
    df = df[~df.section5.astype(bool)] if "section5" in df else df
    sw = df[df.thread_sweep] if "thread_sweep" in df else df
    keys = list(sw.groupby(["dataset", "d"], sort=False).groups)
    fig, axes = figure(ncols=max(1, len(keys)), width=5.2, height=3.6)
    for ax, (ds, d) in zip(axes[0], keys):
        g = sw[(sw.dataset == ds) & (sw.d == d)]
        for s, h in g.groupby("solver", sort=False):
            role, name = SOLVER_LOOKS.get(s, ("ours-2", s))
            series(ax, h.threads, h.updates_per_s / 1e6, role, name)
        ax.set_xlabel("threads")
        ax.set_ylabel("million updates / s")
        ax.set_xticks(sorted(g.threads.unique()))
        ax.set_title(f"{ds}, d = {d}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False)
    other = df[~df.thread_sweep] if "thread_sweep" in df else df.iloc[:0]
    lines = [f"{r.dataset}, d = {r.d}: C-SGD {r.updates_per_s / 1e6:.3g} M updates/s on {r.threads} threads"
             + (" (the abstract: 8.5 M at d = 1024)" if r.d == 1024 else "") for r in other.itertuples()]
    shape = "; ".join(f"{ds}: {g.n_ratings.iloc[0]:,} ratings, {g.n_users.iloc[0]:,} users × {g.n_items.iloc[0]:,} items"
                      for ds, g in df.groupby("dataset", sort=False)) if "n_items" in df else ""
    lines += [f"Section 5 (quote: Netflix, d = 2048, 1e8 ratings in ≈ 10 s = 10 M updates/s): {r.dataset}, d = {r.d}, "
              f"{r.n_ratings:,} ratings of {r.n_users:,} whole users × {r.n_items:,} items: C-SGD "
              f"{r.updates_per_s / 1e6:.3g} M updates/s on {r.threads} threads" for r in s5.itertuples()]
    width = 95 * max(1, len(keys))  # the notes wrap to the panels' width instead of widening the canvas
    notes = [w for line in lines + [shape] if line for w in textwrap.wrap(line, width)]
    fig.tight_layout()
    fig.text(0.02, -0.02, "\n".join(notes), ha="left", va="top", fontsize=7)
    fig.suptitle(standin_title("Liu et al. Fig. 3: throughput vs threads (2-core shared machine)", labels), fontsize=10,
                 y=1.08)
    return fig
