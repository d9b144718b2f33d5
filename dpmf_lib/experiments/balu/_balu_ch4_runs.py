"""The chapter-4 training runs through the one result cache (:func:`dpmf_lib.cache.cached_call`): a run that two
notebooks both do is trained once, and a notebook stopped by its time budget resumes where it stopped (every
chapter-4 notebook — Figures 4.1–4.8, Table 4.2 — trains through :func:`run_configs` or :func:`run_groups`; ~13 KB
per 20-epoch run, a few hundred MB for the whole chapter at ``paper``).

What coincides at ``paper`` (params/balu_fig4_*.yaml, balu_table4_*.yaml):

- Figure 4.8 plots the KLD of *the same runs* as Figure 4.7 (identical profiles): every run of 4.8 is served from
  4.7's entries (retraining them would cost about as much as 4.7), the claims' fresh-seed re-fits too.
- Figure 4.6 (count sketch k = 4, λ grid 1e-4 … 1) and Figure 4.1 (k ∈ {1, 4}, λ grid 1e-3 … 0.3) sweep the same
  (d, γ) cells on the same ML-100K splits with the same η grid, epochs and seeds: 4.1's stage-1 evaluations of a k = 4
  cell are 24 of 4.6's 36, and when 4.6's stage-1 winner lies inside 4.1's λ range (it is then 4.1's winner too: the
  minimum of a superset that falls in the subset is the subset's minimum, with the same tie-break), 4.6's stage 2 and
  its refits on the other splits are 4.1's as well.
- The other notebooks use different data at ``paper`` (EachMovie / ML-10M / Netflix stand-ins at different scales, or
  T = 1 / T = 100 epochs): nothing else coincides there, but their runs are cached all the same, so that a run
  stopped by its budget resumes; at other profiles any identical run is shared the same way.

The unit of the cache is one training run, :func:`dpmf_lib.sketch.protocol.fit_eval` on one split with one (η, λ)
— the unit in which the notebooks coincide. Its key holds every argument of ``fit_eval`` (method, d, γ, k, clipping
threshold, epochs, init scale, η, λ, the run's seed, with_kld, track), the split (data source with its checksum,
seed, standin_scale, max_ratings, fractions, min_freq, the split's seed) and a hash of the code the run depends on
(:func:`code_hash`: this module's import closure — ``dpmf_lib/sketch``, the splitmix64 mix it hashes with, the data
loaders, the seed helper). A cached run is the pickled dict ``fit_eval`` returned, so a row served from the cache is bit-identical
to a fresh one; ``$DPMF_CACHE=off`` turns it off (tests/experiments/balu/test_ch4_runs.py checks that the two agree with
:func:`dpmf_lib.sketch.runs.run_configs`).

:func:`run_configs` is :func:`dpmf_lib.sketch.runs.run_configs` with a trainer that routes each training call through
the cache (:class:`CachedTrainer`): one row logic, tested to give the same frame. :func:`run_groups` does the same
for several datasets in one worker pool (Table 4.2).

Claims at fresh seeds (:class:`FreshSeeds`): at ``paper`` the ML-100K claims of Figures 4.1 and 4.3–4.8 need 5
seeds. Figures 4.3–4.5 run the whole figure again at each fresh seed, search and refits
(:meth:`FreshSeeds.whole_figure`). For Figures 4.1, 4.6, 4.7 and 4.8 the whole search per seed would cost 5× the
budget, so they re-measure their claims with a stated reduced protocol (their module docstrings and params headers
say which).
"""

from __future__ import annotations

import time
from functools import lru_cache

import pandas as pd

from ... import cache
from ...errors import ParameterError
from ...sketch import runs as _runs
from ...sketch.protocol import fit_eval, fit_runs
from ...sweep import grid_map


@lru_cache(maxsize=1)
def code_hash() -> str:
    """The code part of every key: this module and everything it imports (``dpmf_lib/sketch``, the splitmix64 mix,
    the data loaders, the seed and validation helpers, the RMSE), through :func:`dpmf_lib.cache.code_version`."""
    return cache.code_version(__name__)


def data_key(r, params: dict) -> dict:
    """What identifies the splits of :func:`dpmf_lib.sketch.runs.make_splits` of ``r`` under ``params`` (the split
    index adds its own seed): the data source (checksum; real or stand-in; subset note) and the parameters of the
    loading and splitting."""
    return {"source": r.source.as_dict(), "n_ratings": int(r.n_ratings), "seed": int(params["seed"]),
            "standin_scale": float(params.get("standin_scale", 1.0)), "max_ratings": params.get("max_ratings"),
            "fractions": [float(x) for x in params.get("fractions", (0.8, 0.1, 0.1))],
            "min_freq": int(params.get("min_freq", 10))}


# training runs this process actually did (not served from the cache); tests/experiments/balu/test_ch4_runs.py reads it
TRAINED = {"n": 0}


def _fit(run: dict, split: dict, code: str, data) -> dict:
    """One training run, the cached unit: ``fit_eval(data, **run)``. ``split`` and ``code`` are only in the key;
    ``data`` is not (``split`` identifies it). joblib keys on this function's module and name too: keep them."""
    TRAINED["n"] += 1
    return fit_eval(data=data, **run)


def cached_fit(run: dict, split: dict, data) -> dict:
    """:func:`_fit` through :func:`dpmf_lib.cache.cached_call` (``$DPMF_CACHE`` applies)."""
    return cache.cached_call(_fit, run, split, code_hash(), data, ignore=("data",))


def cached_fits(runs: list[dict], split: dict, data) -> list[dict]:
    """``[cached_fit(run, split, data) for run in runs]`` (one search stage's runs on one split), with the runs the
    cache does not hold trained together by :func:`dpmf_lib.sketch.protocol.fit_runs` (bit for bit what
    :func:`_fit` returns) and each stored under :func:`_fit`'s key, as if ``_fit`` had computed it: a later
    :func:`cached_fit` of the run reads it."""
    code = code_hash()
    mode = cache.mode()
    if mode == "off":
        TRAINED["n"] += len(runs)
        return fit_runs(runs, data)
    out: list[dict | None] = [None] * len(runs)
    todo = []
    for n, run in enumerate(runs):
        if mode == "on" and cache.in_cache(_fit, run, split, code, data, ignore=("data",)):
            out[n] = cached_fit(run, split, data)
        else:
            todo.append(n)
    if todo:
        TRAINED["n"] += len(todo)
        mf = cache.memory().cache(_fit, ignore=["data"])
        for n, res in zip(todo, fit_runs([runs[n] for n in todo], data)):
            _store(mf, (runs[n], split, code, data), res)
            out[n] = res
    return out


def _store(mf, args: tuple, output) -> None:
    """Write ``output`` as the entry of ``mf(*args)`` (a :class:`joblib.memory.MemorizedFunc`), as joblib does after
    computing it (output, metadata), with the cache's checksum beside it."""
    mf._check_previous_func_code(stacklevel=3)  # the function's code file, which a read compares (refresh: unread)
    call_id = (mf.func_id, mf._get_args_id(*args))
    mf._after_call(call_id, args, {}, False, output, time.time())
    cache._seal(cache._entry_dir(mf, args, {}), again=True)


class CachedTrainer:
    """A trainer for :func:`dpmf_lib.sketch.runs.run_configs` that routes each run through :func:`cached_fit`,
    keyed by the run and its split (``dkey`` + the split's seed); a stage's runs through :func:`cached_fits`. A
    class, not a closure: loky pickles it."""

    def __init__(self, dkey: dict):
        self.dkey = dkey

    def __call__(self, run: dict, data, split_seed: int) -> dict:
        return cached_fit(run, {**self.dkey, "split_seed": int(split_seed)}, data)

    def many(self, runs: list[dict], data, split_seed: int) -> list[dict]:
        return cached_fits(runs, {**self.dkey, "split_seed": int(split_seed)}, data)


def run_configs(configs: list[dict], splits: list, params: dict, r, *, with_kld: bool = False,
                track: tuple[str, ...] = (), shared: list[bool] | None = None) -> pd.DataFrame:
    """:func:`dpmf_lib.sketch.runs.run_configs` (one row per (configuration, split), configurations in parallel with
    ``params['n_jobs']`` workers) with the training runs through the result cache; ``r``: the ratings the splits
    were made from (for the key). ``shared[i]`` False: configuration ``i`` is trained without the cache (default:
    every configuration goes through it — also those no other notebook runs, so that a run stopped by its time
    budget resumes from the runs it finished)."""
    shared = [True] * len(configs) if shared is None else [bool(x) for x in shared]
    if len(shared) != len(configs):
        raise ParameterError(f"shared must have one flag per configuration ({len(configs)}), got {len(shared)}")
    trainer = CachedTrainer(data_key(r, params))
    return _runs.run_configs(configs, splits, params, with_kld=with_kld, track=track,
                             trainers=[trainer if s else None for s in shared])


# ------------------------------------------------------------------------------------ several datasets, one pool
def _call_item(item, sp, with_kld, track):
    config, splits, trainer = item
    return _runs._evaluate(config, splits, sp, with_kld, track, trainer)


def run_groups(groups: list[tuple[list[dict], list, object]], params: dict, *, with_kld: bool = False,
               track: tuple[str, ...] = (), cost=None) -> list[pd.DataFrame]:
    """:func:`run_configs` for several datasets at once: ``groups`` is a list of ``(configs, splits, r)`` (each
    dataset's configurations, its splits and the ratings they were made from); every configuration of every group
    goes into ONE :func:`dpmf_lib.sweep.grid_map` with ``params['n_jobs']`` workers, so the workers share all of them
    (Table 4.2: one pool of 12 (dataset, method) configurations, not one dataset after the other with count sketch
    alone on one worker). ``cost(config, splits)``: a relative cost estimate; the configurations are handed out
    dearest first (longest-processing-time order: the pool then ends with the cheap ones). The rows are those of
    :func:`run_configs` on each group (the same evaluation and cache keys: the dispatch order changes no number);
    returns one frame per group, in the group's configuration order."""
    sp = {k: params[k] for k in _runs.SEARCH_KEYS}
    if sp["search"] and not sp["eta_grid"]:
        raise ParameterError("eta_grid must list at least one learning rate when search is true")
    items = []
    for configs, splits, r in groups:
        trainer = CachedTrainer(data_key(r, params))
        items.extend((config, splits, trainer) for config in configs)
    if not items:
        return [pd.DataFrame() for _ in groups]
    est = [float(cost(c, s)) if cost else 0.0 for c, s, _ in items]
    order = sorted(range(len(items)), key=lambda i: -est[i])  # stable: equal costs keep their order
    out = grid_map(_call_item, {"item": [items[i] for i in order]},
                   fixed={"sp": sp, "with_kld": with_kld, "track": tuple(track)}, n_jobs=int(params.get("n_jobs", 1)))
    rows = [None] * len(items)
    for i, res in zip(order, out):
        rows[i] = res
    frames, k = [], 0
    for configs, _, _ in groups:
        frames.append(pd.DataFrame([r for rr in rows[k:k + len(configs)] for r in rr]))
        k += len(configs)
    return frames


# ---------------------------------------------------------------------------------------- claims at fresh seeds
def selected(df: pd.DataFrame, keys: list[str]) -> dict[tuple, tuple[float, float]]:
    """The (η, λ) each cell (``keys``) chose, read on the first split (where the search ran; with
    ``search_each_split`` false every split of a cell uses it)."""
    first = df[df.split == df.split.min()]
    out = {}
    for key, g in first.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        out[key] = (float(g.eta.iloc[0]), float(g.lam.iloc[0]))
    return out


# what a fresh seed may change in the parameters of the full run it re-measures
FRESH_FREE = ("seed", "claim_splits", "n_jobs")
# fresh seed s starts its splits at seed0 + n_splits + (s - seed0 - 1) * FRESH_STRIDE: one stride for every figure,
# so that two figures' fresh seeds start on the same split (Figure 4.6's λ re-selection then shares a run with
# Figure 4.1's re-fit wherever their (η, λ) coincide) and claim_splits up to the stride never overlap
FRESH_STRIDE = 10


class FreshSeeds:
    """The claims of a chapter-4 figure at fresh seeds: the whole figure on new splits (:meth:`whole_figure`), or a
    cheaper re-measurement without its whole search (CONVENTIONS: a cheaper callable that measures the same claims
    the same way). ``params -> DataFrame`` with the claim measurements attached, and :meth:`replicate` for the
    notebook (``experiment.fresh_seeds(df, nb.params).replicate(nb)``).

    ``rerun(df, params, r, splits)``: the figure's own re-measurement on ``splits`` of the ratings ``r`` (loaded at
    ``params['seed']``), given the full run's frame ``df`` (what it selected). Each figure says what it re-runs (the
    whole figure, re-fits of the selected (η, λ), or a reduced re-selection where the claim is about the selection);
    ``protocol`` names it in the notebook's progress bar.

    Splits: ``params['claim_splits']`` of them. At the full run's own seed they are its first splits (so a rerun
    with ``claim_splits = n_splits`` reproduces the full run's claims: tested); at a fresh seed ``s`` their split
    seeds are distinct from the full run's and from every other fresh seed's: ``seed0 + n_splits + (s − seed0 −
    1)·FRESH_STRIDE …`` (:func:`dpmf_lib.sketch.runs.make_splits` gives split ``j`` of seed ``s`` the seed ``s + j``,
    so seed 1's splits would be the full run's splits 1, 2, … and consecutive seeds would share splits). Distinct
    seeds do not make disjoint splits: each split is a different random partition of the same ratings, so a fresh
    seed's test set overlaps the full run's first validation set, on which (η, λ) were chosen (about a tenth of
    each at fractions 0.8/0.1/0.1). That gives the fresh seeds' absolute RMSE a small optimistic bias."""

    def __init__(self, df: pd.DataFrame, params: dict, rerun, protocol: str = "reduced protocol"):
        self.df, self.params, self.rerun, self.protocol = df, dict(params), rerun, protocol

    @classmethod
    def whole_figure(cls, run_on):
        """The ``fresh_seeds(df, params)`` of a figure whose fresh seed is the whole figure again, search and refits:
        ``run_on(r, splits, params)`` is the figure's own run on the given splits (Figures 4.3–4.5)."""
        def fresh_seeds(df: pd.DataFrame, params: dict) -> FreshSeeds:
            """``fresh_seeds(df, nb.params).replicate(nb)``: the claims at 5 fresh seeds, each the whole figure on
            ``claim_splits`` new splits."""
            return cls(df, params, lambda _df, p, r, splits: run_on(r, splits, p), protocol="the whole figure")
        return fresh_seeds

    def first_split(self, seed: int, claim_splits: int) -> int:
        s0, n_full = int(self.params["seed"]), int(self.params["n_splits"])
        if not 1 <= int(claim_splits) <= FRESH_STRIDE:
            raise ParameterError(f"claim_splits must be between 1 and {FRESH_STRIDE}, got {claim_splits}")
        if seed == s0:
            return s0
        if seed < s0:
            raise ParameterError(f"fresh seed {seed} is below the full run's seed {s0}")
        return s0 + n_full + (seed - s0 - 1) * FRESH_STRIDE

    def __call__(self, params: dict) -> pd.DataFrame:
        other = sorted(k for k in set(params) | set(self.params)
                       if k not in FRESH_FREE and params.get(k) != self.params.get(k))
        if other:
            raise ParameterError(f"the claims at a fresh seed re-measure the full run's selection: parameters {other} "
                                 "must be the full run's")
        c = int(params["claim_splits"])
        r = _runs.load(params)
        first = self.first_split(int(params["seed"]), c)
        splits = _runs.make_splits(r, {**params, "seed": first, "n_splits": c})
        return self.rerun(self.df, params, r, splits)

    def replicate(self, nb, n_seeds: int | None = None) -> pd.DataFrame:
        """The claims over fresh seeds for the notebook ``nb`` (a :class:`~dpmf_lib.outputs.NotebookRun`): this
        callable at ``seed + 1 … seed + n`` with ``n`` what the claims need at the profile
        (:meth:`~dpmf_lib.outputs.NotebookRun.seeds_needed`: 5 at ``paper`` on the claim's real dataset). The first
        seed's own value (the full run: its search, all its splits) is left out: every value judged comes from the
        same protocol (the whole figure on new splits, or the figure's reduced one). Where the claims need one seed
        (no verdict at this profile) the first seed's value is kept as the indicative one, at no cost. Returns
        ``nb.claims_table()``, like ``nb.replicate``."""
        from ...claims import merge_replicates

        base = list(self.df.attrs.get("measurements", []))
        n = nb.seeds_needed(base) if n_seeds is None else int(n_seeds)
        seed0 = int(nb.params.get("seed", 0))
        if n <= 1:
            runs_, seeds = [base], [seed0]
        else:
            from tqdm import tqdm  # a text bar, as nb.replicate

            seeds = [seed0 + k for k in range(1, n + 1)]
            runs_ = [list(self({**nb.params, "seed": s}).attrs.get("measurements", []))
                     for s in tqdm(seeds, desc=f"{nb.name}: claims at fresh seeds ({self.protocol})")]
        nb.measurements = merge_replicates(runs_, seeds)
        nb.replicate_seeds = seeds
        return nb.claims_table()


def claim_for(claims: dict[str, str], r, default: str) -> str:
    """The claim id for the dataset ``r`` is (``claims``: dataset id → claim id, e.g. our ML-100K counterpart of a
    thesis statement about ML-1M); any other dataset measures the thesis's claim (``claims[default]``), which the
    report then shows as "not judged here" or "stand-in only"."""
    return claims.get(r.source.dataset, claims[default])
