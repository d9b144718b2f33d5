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

:func:`run_configs` is :func:`dpmf_lib.sketch.runs.run_configs` with a trainer that routes each training call through
the cache (:class:`CachedTrainer`): one row logic, tested to give the same frame.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

import pandas as pd

from .. import cache
from ..errors import ParameterError
from ..sketch import runs as _runs
from ..sketch.protocol import fit_eval


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


class CachedTrainer:
    """A trainer for :func:`dpmf_lib.sketch.runs.run_configs` that routes each run through :func:`cached_fit`,
    keyed by the run and its split (``dkey`` + the split's seed). A class, not a closure: loky pickles it."""

    def __init__(self, dkey: dict):
        self.dkey = dkey

    def __call__(self, run: dict, data, split_seed: int) -> dict:
        return cached_fit(run, {**self.dkey, "split_seed": int(split_seed)}, data)


def run_configs(configs: list[dict], splits: list, params: dict, r, *, with_kld: bool = False,
                track: tuple[str, ...] = (), shared: list[bool] | None = None) -> pd.DataFrame:
    """:func:`dpmf_lib.sketch.runs.run_configs` (one row per (configuration, split), configurations in parallel with
    ``params['n_jobs']`` workers) with the training runs through the result cache; ``r``: the ratings the splits
    were made from (for the key). ``shared[i]`` False: configuration ``i`` is trained without the cache (no other
    notebook runs it; default: every configuration is shared)."""
    shared = [True] * len(configs) if shared is None else [bool(x) for x in shared]
    if len(shared) != len(configs):
        raise ParameterError(f"shared must have one flag per configuration ({len(configs)}), got {len(shared)}")
    trainer = CachedTrainer(data_key(r, params))
    return _runs.run_configs(configs, splits, params, with_kld=with_kld, track=track,
                             trainers=[trainer if s else None for s in shared])
