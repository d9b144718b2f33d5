"""Shared pieces of the Liu et al. (2015) systems experiments (Figures 2–6, Tables 1–2): data, solver runs, curves.

Every solver run returns rows ``{dataset, solver, d, threads, epoch, seconds, wall, test_rmse}``: ``seconds`` is the
time of that round (C-SGD/SGLD: the kernel; peers: see :mod:`dpmf_lib.mf.peers`), ``wall`` the cumulative time
including each solver's own setup (layout building for ours, data conversion for the peers).

C-SGD's user block is scaled to the data (:func:`block_users_for`): the paper's ~1,000 users per block, but small
enough for at least 4 blocks per thread — a block is the unit of parallel work, and ML-100K's 943 users in one
1,000-user block ran as a single segment, so "2 threads" was one thread.

**Initial factors** (ours; the paper does not state its initialisation): N(0, s²) with ``s = 0.1·sqrt(16/d)``
(:func:`init_scale_for`), passed to both solvers. At d = 16 this is exactly the library's default 0.1 (so d = 16
results do not change); at d = 2048 it is 0.0088, so a factor's squared norm d·s² stays 0.16 as at d = 16 (the fixed
0.1 gives 0.01·d: 20 at d = 2048). With the fixed 0.1, C-SGD's test RMSE on the 5 % Netflix stand-in at d = 2048 rose
over the epochs (0.920, 0.918, 0.928); with the scaled init it fell (0.866 → 0.821). The shared :mod:`dpmf_lib.mf` default stays 0.1
(other notebooks use it).

**Finite factors.** Every C-SGD / SGLD run of Figures 2–6 checks that U, V and the biases are finite after its last
round (:func:`require_finite`) and raises naming the solver, d and data; the kernels' own check looks at one row only.

**Claims on real ML-100K**. The paper states its Figure 2/4/5/6 claims on Netflix, which cannot be had
here (a labelled stand-in runs instead, never judged). A run on real ML-100K measures our ML-100K counterpart of each
(``<claim id>-ml-100k``, judged at ``paper`` over 5 seeds): :func:`claim_for` picks the id for the data a run loaded.
The further seeds re-run the ML-100K part only (:func:`ml100k_params`, :class:`ML100KSeeds`): the Netflix stand-in's
values keep the figure's one seed, since re-running it would cost 5× the notebook for values that are never judged.

**Setup time.** ``wall`` adds the layout build, timed by building it once more outside the solver
(:func:`_layout_seconds`) with numba's default thread count (2 here) — also for the one-thread C-SGD run of Figure 2
(``csgd-1t``), whose own layout was built on one thread. The build takes well under a second on these data (against
minutes of rounds), so this does not move the curves.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from ...errors import ParameterError
from ...mf import Schedule, sample_sgld, train_sgd, warmup
from ...mf.data import load_for_mf, train_test
from ...mf.peers import PeerUnavailable, libmf_curve, surprise_curve

_WARM = False
BLOCKS_PER_THREAD = 4
BLOCK_USERS_CAP = 1000  # the paper's "~1,000 users" per block


def block_users_for(n_users: int, threads: int | None, params: dict | None = None) -> int:
    """Users per C-SGD block: ``min(1000, n_users // (4·threads))`` (≥ 1), so there are ≥ 4 blocks per thread.

    ``threads``: the most threads this data set is run with (``params['threads']`` when larger), so runs of one
    figure at different thread counts share one layout."""
    th = max(int(threads or 1), int((params or {}).get("threads") or 1))
    return int(max(1, min(BLOCK_USERS_CAP, n_users // (BLOCKS_PER_THREAD * th))))


def init_scale_for(d: int) -> float:
    """Standard deviation of the initial factors at dimension ``d``: ``0.1·sqrt(16/d)`` (exactly 0.1 at d = 16)."""
    return 0.1 * float(np.sqrt(16.0 / int(d)))


def require_finite(model, *, solver: str, d: int, dataset: str, threads=None, hint: str = "") -> None:
    """Raise a :class:`ParameterError` naming the run when U, V or a bias of ``model`` is not finite.

    Checked in row chunks (no full-size temporary: V is 5 GB at d = 2048 on Figure 3's Yahoo data)."""
    where = f"{solver} at d={d}" + (f", {threads} thread(s)" if threads else "") + f" on {dataset}"
    for name in ("U", "V", "bu", "bi"):
        a = getattr(model, name)
        step = max(1, (1 << 24) // max(1, int(np.prod(a.shape[1:]))))  # ≤ 16M entries per chunk
        for lo in range(0, len(a), step):
            if not np.isfinite(a[lo:lo + step]).all():
                raise ParameterError(
                    f"{where} diverged: non-finite values in {name} after the last round"
                    + (f" ({hint})" if hint else "") + " — lower the step size (sgd_eta0 / sgld_eta0_times_n) or "
                    "check the rating scale")
    if not np.isfinite(float(model.b0)):
        raise ParameterError(f"{where} diverged: the global bias b0 is not finite after the last round"
                             + (f" ({hint})" if hint else "") + " — lower the step size (sgd_eta0 / sgld_eta0_times_n) "
                             "or check the rating scale")


def whole_user_subset(r, n_target: int | None, seed: int, *, compact_items: bool = True):
    """Whole users (all their ratings) in a seeded random order until at least ``n_target`` ratings; user ids
    compacted (relative order kept) and, with ``compact_items``, the items no kept user rated dropped and the rest
    renumbered ``0..n-1`` (``user_ids``/``item_ids`` map back to the raw ids), so a model is sized for the subset, not
    for the whole id space. ``n_target`` None (or ≥ the size): every user; unrated items are still dropped.

    A random subset of *ratings* would keep almost every user with a handful of ratings each (Yahoo! Music at 5M of
    263M: ~5 per user), which destroys C-SGD's reuse of a user's vector within its block (cf. :func:`liu_table2.user_subset`,
    which keeps every item for the cache simulation)."""
    if n_target is not None and int(n_target) < 1:
        raise ParameterError(f"max_ratings must be ≥ 1 (or null for all ratings), got {n_target!r}")
    notes, total = [], r.n_ratings
    if n_target is not None and int(n_target) < r.n_ratings:
        counts = r.user_counts()
        perm = np.random.default_rng(seed).permutation(r.n_users)
        k = min(r.n_users, int(np.searchsorted(np.cumsum(counts[perm]), int(n_target))) + 1)
        chosen = np.sort(perm[:k])
        keep = np.zeros(r.n_users, dtype=bool)
        keep[chosen] = True
        idx = np.flatnonzero(keep[r.users])
        new_id = np.full(r.n_users, -1, dtype=np.int64)
        new_id[chosen] = np.arange(k)
        raw_u = chosen if r.user_ids is None else np.asarray(r.user_ids)[chosen]
        sub = r.subset(idx)
        r = replace(sub, users=new_id[sub.users].astype(np.int32), n_users=k, user_ids=raw_u)
        notes.append(f"{k:,} whole users ({len(idx):,} ratings, seed {seed})")
    if compact_items:
        rated = np.bincount(r.items, minlength=r.n_items) > 0
        if not rated.all():
            new_item = (np.cumsum(rated) - 1).astype(np.int32)
            kept = np.flatnonzero(rated)
            raw_i = kept if r.item_ids is None else np.asarray(r.item_ids)[kept]
            notes.append(f"{len(kept):,} of {r.n_items:,} items rated by them (ids compacted)")
            r = replace(r, items=new_item[r.items], n_items=int(len(kept)), item_ids=raw_i)
    if notes:
        if r.source.real and n_target is not None and int(n_target) < total:  # real data cut: said in the output too
            print(f"note: {r.source.label} uses {', '.join(notes)} of its {total:,} ratings (max_ratings = "
                  f"{int(n_target)}): set max_ratings: null for all", flush=True)
        r = replace(r, source=replace(r.source, note=(r.source.note + "; " + ", ".join(notes)).strip("; ")))
    return r


def rescale_ratings(r, scale):
    """``r`` with its values mapped linearly from ``r.rating_scale`` onto ``scale = (lo, hi)`` (None: unchanged).
    The paper rescales Yahoo! Music's 0–100 ratings to 0–5 (Section 6.2)."""
    if scale is None:
        return r
    try:
        a, b = (float(x) for x in scale)
    except (TypeError, ValueError):
        raise ParameterError(f"rating_scale must be a pair [lo, hi] or null, got {scale!r}") from None
    if not (np.isfinite(a) and np.isfinite(b) and a < b):
        raise ParameterError(f"rating_scale must be finite with lo < hi, got {scale!r}")
    lo, hi = (float(x) for x in r.rating_scale)
    if (lo, hi) == (a, b):
        return r
    v = ((r.values.astype(np.float64) - lo) * ((b - a) / (hi - lo)) + a).astype(np.float32)
    src = replace(r.source, note=(r.source.note + f"; ratings rescaled {lo:g}–{hi:g} → {a:g}–{b:g}").strip("; "))
    return replace(r, values=v, rating_scale=(a, b), source=src)


DATASET_SETTING_KEYS = ("rating_scale", "test_split", "sgd_eta0", "sgd_gamma", "sgd_lambda", "sgld_eta0_times_n", "sgld_gamma",
                        "sgld_zeta", "sgld_alpha", "sgld_beta", "sgld_lambda_r")


def dataset_params(params: dict, dataset: str) -> dict:
    """``params`` with ``params['dataset_settings'][dataset]`` laid over it (e.g. Yahoo! Music's own step sizes and
    its 0–5 rescaling); a dataset without an entry keeps the flat values (the paper's Netflix ones)."""
    table = params.get("dataset_settings") or {}
    if not isinstance(table, dict):
        raise ParameterError(f"dataset_settings must map a dataset id to its settings, got {table!r}")
    own = table.get(dataset) or {}
    if not isinstance(own, dict):
        raise ParameterError(f"dataset_settings[{dataset!r}] must be a mapping, got {own!r}")
    unknown = sorted(set(own) - set(DATASET_SETTING_KEYS))
    if unknown:
        raise ParameterError(f"dataset_settings[{dataset!r}]: unknown name(s) {unknown}; allowed: "
                             f"{list(DATASET_SETTING_KEYS)}")
    return {"rating_scale": None, **params, **own}


ML100K = "ml-100k"


def claim_for(claims: dict[str, str], source) -> str:
    """The claim id a run on ``source`` (a :class:`~dpmf_lib.data.ratings.DataSource`) measures: ``claims`` maps a
    dataset id to its claim (the paper's, about Netflix, and our ML-100K counterpart); any other dataset measures the
    paper's claim (``claims["netflix"]``), which the report then shows as "stand-in only" or "not judged here"."""
    if source.dataset == ML100K and not source.real:  # never happens (ml-100k has no stand-in): refuse, do not judge it
        raise ParameterError("ml-100k must be the real data set, not a stand-in")
    return claims.get(source.dataset, claims["netflix"])


def ml100k_params(params: dict) -> dict:
    """``params`` with ``datasets`` restricted to real ML-100K: what the claims' further seeds re-run (the ML-100K
    counterparts are the only claims judged here; the Netflix stand-in is never judged)."""
    ds = [d for d in params["datasets"] if d == ML100K]
    if not ds:
        raise ParameterError(f"the claims' further seeds re-run real ML-100K only, but datasets = {params['datasets']!r} "
                             "lists no ml-100k")
    return {**params, "datasets": ds}


class ML100KSeeds:
    """The claims of a Liu figure over seeds, re-running only its ML-100K part (CONVENTIONS: a cheaper callable that
    measures the same claims the same way). ``experiment.ml100k_seeds(df).replicate(nb)`` in the notebook.

    ``replicate_run(params)``: the experiment's :func:`run` on ``ml100k_params(params)`` (and nothing the ML-100K
    claims do not read). At ``seed + 1 … seed + n − 1`` (n = :meth:`NotebookRun.seeds_needed`: 5 at ``paper``, where
    the ML-100K counterparts are judged; 1 below it) it measures the real ML-100K claims again; their first value is
    the figure's own run (``df``). The other measurements (the Netflix stand-in's: never judged) keep that one seed —
    :meth:`NotebookRun.replicate` with this callable would give them NaN at the further seeds and lose the value
    shown. Returns ``nb.claims_table()``, like ``nb.replicate``. (A real Netflix, if fetched into data/, would make the
    paper's own claims judged: they would then need further seeds of their own, which this does not run — their
    verdict says "1 seed(s), the claim needs 5".)"""

    def __init__(self, df: pd.DataFrame, replicate_run):
        self.df, self.replicate_run = df, replicate_run

    def replicate(self, nb, n_seeds: int | None = None) -> pd.DataFrame:
        from ...claims import merge_replicates

        base = list(self.df.attrs.get("measurements", []))
        n = nb.seeds_needed(base) if n_seeds is None else int(n_seeds)
        seed0 = int(nb.params.get("seed", 0))
        seeds = [seed0 + k for k in range(max(1, n))]
        again = [bool(m["real"]) and m["dataset"] == ML100K for m in base]
        runs = [[m for m, a in zip(base, again) if a]]
        if len(seeds) > 1 and runs[0]:
            from tqdm import tqdm  # a text bar, as nb.replicate

            for s in tqdm(seeds[1:], desc=f"{nb.name}: ML-100K claims at further seeds"):
                runs.append(list(self.replicate_run({**nb.params, "seed": s}).attrs.get("measurements", [])))
        redone = iter(merge_replicates(runs, seeds[:len(runs)]))
        once = iter(merge_replicates([[m for m, a in zip(base, again) if not a]], [seed0]))
        nb.measurements = [next(redone) if a else next(once) for a in again]
        nb.replicate_seeds = seeds[:len(runs)] if runs[0] else [seed0]
        return nb.claims_table()


def ensure_warm():
    global _WARM
    if not _WARM:
        warmup()
        _WARM = True


def load_split(dataset: str, params: dict):
    """``(train, test)`` of ``dataset`` (real if present, else the labelled stand-in), seeded random split; with
    ``test_split: probe`` (Netflix's dataset_settings) real Netflix is split as the paper did: the test set is the
    ratings of its ``probe.txt`` (the released validation set), the rest trains (:func:`probe_split`); with
    ``test_split: validation`` (Yahoo's) real Yahoo! Music trains on trainIdx1.txt and tests on its released
    validationIdx1.txt (:func:`validation_split`). A stand-in, or a copy without the file, keeps the random split."""
    r = load_for_mf(dataset, seed=params["seed"], standin_scale=params.get("standin_scale", 1.0),
                    max_ratings=params.get("max_ratings"))
    if params.get("test_split") == "probe" and r.source.real and dataset == "netflix":
        from ...data.datasets import netflix_probe

        probe = netflix_probe()
        if probe is not None:
            return probe_split(r, probe)
        print(f"note: {r.source.label} has no probe.txt: a random {params.get('test_fraction', 0.1):g} test split "
              "instead of the paper's probe set", flush=True)
    if params.get("test_split") == "validation" and r.source.real and dataset == "yahoo-music":
        from ...data.datasets import yahoo_validation

        val = yahoo_validation()
        if val is not None:
            return r, validation_split(r, val)
        print(f"note: {r.source.label} has no validationIdx1.txt: a random {params.get('test_fraction', 0.1):g} test "
              "split instead of the paper's validation set", flush=True)
    return train_test(r, params.get("test_fraction", 0.1), seed=params["seed"])


def validation_split(train, val):
    """``val`` (a released validation set loaded on its own) in ``train``'s id spaces: the test set of the paper's
    split (all of ``train`` trains). Ratings of users or items ``train`` does not have are dropped, and said."""
    def place(ids, raw):
        ids = np.asarray(ids)
        pos = np.clip(np.searchsorted(ids, raw), 0, len(ids) - 1)
        return pos, ids[pos] == raw

    raw_u = np.asarray(val.user_ids)[val.users] if val.user_ids is not None else val.users
    raw_i = np.asarray(val.item_ids)[val.items] if val.item_ids is not None else val.items
    pu, ok_u = place(train.user_ids if train.user_ids is not None else np.arange(train.n_users), raw_u)
    pi, ok_i = place(train.item_ids if train.item_ids is not None else np.arange(train.n_items), raw_i)
    ok = ok_u & ok_i
    if not ok.any():
        raise ParameterError(f"{train.source.label}: none of the {val.n_ratings:,} validation ratings has a user and an "
                             "item of the training set (is it this copy's validationIdx1.txt?)")
    note = f"validationIdx1.txt: {int(ok.sum()):,} ratings (the released validation set, the paper's test set)"
    if not ok.all():
        note += f"; {int((~ok).sum()):,} of its ratings dropped (user or item not in the training ratings)"
        print(f"note: {train.source.label}: {note}", flush=True)
    return replace(train, users=pu[ok].astype(np.int32), items=pi[ok].astype(np.int32), values=val.values[ok],
                   timestamps=None if val.timestamps is None else val.timestamps[ok],
                   source=replace(train.source, note=(train.source.note + "; " + note).strip("; ")))


def probe_split(r, probe: np.ndarray):
    """``(train, test)``: the test set is the ratings whose (raw user, raw item) pair is in ``probe`` ((n, 2) of
    customer, movie ids), the training set the others."""
    users = np.asarray(r.user_ids)[r.users].astype(np.int64) if r.user_ids is not None else r.users.astype(np.int64)
    items = np.asarray(r.item_ids)[r.items].astype(np.int64) if r.item_ids is not None else r.items.astype(np.int64)
    mask = np.isin(users * (1 << 24) + items, probe[:, 0] * (1 << 24) + probe[:, 1])
    if not mask.any() or mask.all():
        raise ParameterError(f"{r.source.label}: probe.txt holds {int(mask.sum()):,} of its {r.n_ratings:,} ratings: "
                             "no train/test split from it (is it this copy's probe.txt?)")
    return (r.subset(np.flatnonzero(~mask), note="training set without probe.txt (the paper's split)"),
            r.subset(np.flatnonzero(mask), note=f"probe.txt: {int(mask.sum()):,} ratings (the released validation "
                                                 "set, the paper's test set)"))


def sgd_kw(params: dict) -> dict:
    return dict(eta0=params["sgd_eta0"], gamma=params["sgd_gamma"], lam=params["sgd_lambda"])


def sgld_kw(params: dict, n: int) -> dict:
    return dict(eta0=params["sgld_eta0_times_n"] / n, gamma=params["sgld_gamma"], zeta=params["sgld_zeta"],
                alpha=params["sgld_alpha"], beta=params["sgld_beta"], lambda_r=params["sgld_lambda_r"])


def run_csgd(train, test, d, epochs, params, *, order="tiered", threads=None, label="csgd") -> pd.DataFrame:
    ensure_warm()
    bu = block_users_for(train.n_users, threads, params)
    res = train_sgd(train, d=d, epochs=epochs, schedule=Schedule(order=order, n_threads=threads, block_users=bu),
                    test=test, seed=params["seed"], init_scale=init_scale_for(d), **sgd_kw(params))
    require_finite(res.model, solver=label, d=d, dataset=train.source.label, threads=threads,
                   hint=f"eta0={params['sgd_eta0']:g}, lambda={params['sgd_lambda']:g}")
    h = res.history
    setup = _layout_seconds(train, order, params, bu)  # counted into wall (test evaluation is not)
    return pd.DataFrame({"solver": label, "d": d, "threads": threads or 0, "block_users": bu, "epoch": h["epoch"],
                         "seconds": h["seconds"], "wall": h["wall"] + setup, "test_rmse": h["test_rmse"],
                         "updates_per_s": h["updates_per_s"]})


def _layout_seconds(train, order, params, block_users=BLOCK_USERS_CAP) -> float:
    """Time of one layout build, at numba's default thread count (2 here) whatever the run's ``threads``: stated in
    the module docstring (under a second on these data, against minutes of rounds)."""
    from ...mf.csgd import make_layout

    t0 = time.perf_counter()
    make_layout(train, order, block_users=block_users, seed=params["seed"])
    return time.perf_counter() - t0


def run_sgld(train, test, d, epochs, params, *, threads=None, label="sgld", return_result=False, **kw):
    """Fast SGLD's per-round curve; with ``return_result`` also the :class:`SGLDResult` (kept samples)."""
    ensure_warm()
    bu = block_users_for(train.n_users, threads, params)
    kw.setdefault("init_scale", init_scale_for(d))
    res = sample_sgld(train, d=d, epochs=epochs, schedule=Schedule(n_threads=threads, block_users=bu), test=test,
                      seed=params["seed"], burn_in=params.get("sgld_burn_in", 0),
                      **{**sgld_kw(params, train.n_ratings), **kw})
    require_finite(res.model, solver=label, d=d, dataset=train.source.label, threads=threads,
                   hint=f"eta0*N={params['sgld_eta0_times_n']:g}")
    h = res.history
    setup = _layout_seconds(train, "tiered", params, bu)
    out = pd.DataFrame({"solver": label, "d": d, "threads": threads or 0, "block_users": bu,
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
