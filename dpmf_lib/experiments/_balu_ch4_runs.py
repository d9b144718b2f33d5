"""The chapter-4 training runs through the one result cache (:func:`dpmf_lib.cache.cached_call`), so a run that two
notebooks both do is trained once.

What coincides at ``paper`` (params/balu_fig4_*.yaml, balu_table4_*.yaml):

- Figure 4.8 plots the KLD of *the same runs* as Figure 4.7 (identical profiles): every run of 4.8 is served from
  4.7's entries (before this module 4.8 retrained all of them, ~the cost of 4.7).
- Figure 4.6 (count sketch k = 4, λ grid 1e-4 … 1) and Figure 4.1 (k ∈ {1, 4}, λ grid 1e-3 … 0.3) sweep the same
  (d, γ) cells on the same ML-100K splits with the same η grid, epochs and seeds: 4.1's stage-1 evaluations of a k = 4
  cell are 24 of 4.6's 36, and when 4.6's stage-1 winner lies inside 4.1's λ range (it is then 4.1's winner too: the
  minimum of a superset that falls in the subset is the subset's minimum, with the same tie-break), 4.6's stage 2 and
  its refits on the other splits are 4.1's as well.
- The other notebooks use different data at ``paper`` (EachMovie / ML-10M / Netflix stand-ins at different scales, or
  T = 1 / T = 100 epochs): nothing else coincides there; at other profiles any identical run is shared the same way.

The unit of the cache is one training run, :func:`dpmf_lib.sketch.protocol.fit_eval` on one split with one (η, λ)
— the unit in which the notebooks coincide. Its key holds every argument of ``fit_eval`` (method, d, γ, k, clipping
threshold, epochs, init scale, η, λ, the run's seed, with_kld, track), the split (data source with its checksum,
seed, standin_scale, max_ratings, fractions, min_freq, the split's seed) and a hash of the code the run depends on
(``dpmf_lib/sketch``, the data loaders, the seed helper and this module). A cached run is the pickled dict
``fit_eval`` returned, so a row served from the cache is bit-identical to a fresh one; ``$DPMF_CACHE=off`` turns it
off (tests/test_balu_ch4_runs.py checks that the two agree with :func:`dpmf_lib.sketch.runs.run_configs`).

:func:`run_configs` is :func:`dpmf_lib.sketch.runs.run_configs` with ``_evaluate``'s training call routed through
the cache; the row logic is the same (and tested to give the same frame).
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import pandas as pd

from .. import cache
from ..errors import ParameterError
from ..sketch import runs as _runs
from ..sketch.protocol import fit_eval, line_search
from ..sketch.runs import SEARCH_KEYS, as_clip, bias_only_rmse, search_flags
from ..sweep import grid_map


@lru_cache(maxsize=1)
def code_hash() -> str:
    """Hash of the code a training run depends on: ``dpmf_lib/sketch/*.py``, the data loaders (``dpmf_lib/data``,
    ``data_fetch``), ``dpmf_lib/privacy/common.py`` (seed resolution) and this module; part of every key."""
    here = Path(__file__).resolve()
    pkg = here.parent.parent
    files = (sorted((pkg / "sketch").glob("*.py")) + sorted((pkg / "data").glob("*.py"))
             + sorted((pkg.parent / "data_fetch").glob("*.py")) + [pkg / "privacy" / "common.py", here])
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def data_key(r, params: dict) -> dict:
    """What identifies the splits of :func:`dpmf_lib.sketch.runs.make_splits` of ``r`` under ``params`` (the split
    index adds its own seed): the data source (checksum; real or stand-in; subset note) and the parameters of the
    loading and splitting."""
    return {"source": r.source.as_dict(), "n_ratings": int(r.n_ratings), "seed": int(params["seed"]),
            "standin_scale": float(params.get("standin_scale", 1.0)), "max_ratings": params.get("max_ratings"),
            "fractions": [float(x) for x in params.get("fractions", (0.8, 0.1, 0.1))],
            "min_freq": int(params.get("min_freq", 10))}


# training runs this process actually did (not served from the cache); tests/test_balu_ch4_runs.py reads it
TRAINED = {"n": 0}


def _fit(run: dict, split: dict, code: str, data) -> dict:
    """One training run, the cached unit: ``fit_eval(data, **run)``. ``split`` and ``code`` are only in the key;
    ``data`` is not (``split`` identifies it). joblib keys on this function's module and name too: keep them."""
    TRAINED["n"] += 1
    return fit_eval(data=data, **run)


def cached_fit(run: dict, split: dict, data) -> dict:
    """:func:`_fit` through :func:`dpmf_lib.cache.cached_call` (``$DPMF_CACHE`` applies)."""
    return cache.cached_call(_fit, run, split, code_hash(), data, ignore=("data",))


def _evaluate(item: tuple, splits: list, sp: dict, with_kld: bool, track: tuple, dkey: dict) -> list[dict]:
    """:func:`dpmf_lib.sketch.runs._evaluate` of ``item = (config, shared)``, with every training run through
    :func:`cached_fit` when ``shared`` (else trained directly: nothing else would read its entries)."""
    config, shared = item
    sp = {**sp, **{k: v for k, v in config.items() if k in SEARCH_KEYS}}
    model_kw = dict(d=int(config["d"]), gamma=float(config.get("gamma", 1.0)), k=config.get("k"),
                    clip=as_clip(config.get("clip")), epochs=int(sp["epochs"]), init_scale=float(sp["init_scale"]),
                    with_kld=with_kld, track=tuple(track))
    rows, chosen, flags = [], None, {}
    for s, data in enumerate(splits):
        seed = data.info["split_seed"] * 7919 + 17
        split = {**dkey, "split_seed": int(data.info["split_seed"])}

        def ev(eta, lam, data=data, seed=seed, split=split):
            run = {"method": config["method"], "eta": eta, "lam": lam, "seed": seed, **model_kw}
            return cached_fit(run, split, data) if shared else fit_eval(data=data, **run)

        if sp["search"] and (chosen is None or sp["search_each_split"]):
            best, trace = line_search(ev, eta_grid=sp["eta_grid"], lam_grid=sp["lam_grid"], refine=float(sp["refine"]))
            chosen = (best["eta"], best["lam"])
            n_evals = len(trace)
            flags = search_flags(best, trace, refined=bool(float(sp["refine"])))
        else:
            if chosen is None:
                chosen = (float(sp["eta"]), float(sp["lam"]))
            best, n_evals = ev(*chosen), 1
            flags = flags or {"search_refined": False, "eta_on_edge": False, "lam_on_edge": False}
        row = {k: v for k, v in config.items() if k not in SEARCH_KEYS}
        row.update({k: v for k, v in best.items() if k != "history" or track})
        row.update(split=s, n_search_evals=n_evals, n_train=data.info["n_train"], n_test=data.info["n_test"])
        b_val, b_test = bias_only_rmse(data)
        row.update(bias_only_val_rmse=b_val, bias_only_test_rmse=b_test,
                   degenerate=bool(abs(best["val_rmse"] - b_val) <= _runs.DEGENERATE_TOL),
                   worse_than_bias_only=bool(best["val_rmse"] > b_val + _runs.DEGENERATE_TOL), **flags)
        rows.append(row)
    return rows


def run_configs(configs: list[dict], splits: list, params: dict, r, *, with_kld: bool = False,
                track: tuple[str, ...] = (), shared: list[bool] | None = None) -> pd.DataFrame:
    """:func:`dpmf_lib.sketch.runs.run_configs` (one row per (configuration, split), configurations in parallel with
    ``params['n_jobs']`` workers) with the training runs through the result cache; ``r``: the ratings the splits
    were made from (for the key). ``shared[i]`` False: configuration ``i`` is trained without the cache (no other
    notebook runs it; default: every configuration is shared)."""
    sp = {k: params[k] for k in SEARCH_KEYS}
    if sp["search"] and not sp["eta_grid"]:
        raise ParameterError("eta_grid must list at least one learning rate when search is true")
    shared = [True] * len(configs) if shared is None else [bool(x) for x in shared]
    if len(shared) != len(configs):
        raise ParameterError(f"shared must have one flag per configuration ({len(configs)}), got {len(shared)}")
    out = grid_map(_evaluate, {"item": list(zip(configs, shared))},
                   fixed={"splits": splits, "sp": sp, "with_kld": with_kld, "track": tuple(track),
                          "dkey": data_key(r, params)},
                   n_jobs=int(params.get("n_jobs", 1)))
    return pd.DataFrame([r for rows in out for r in rows])


