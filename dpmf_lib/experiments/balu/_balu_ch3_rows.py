"""The code that produces the cached rows of the Balu (2016) chapter-3 attack grid (Figures 3.2–3.6): data, split,
attacked subsample, mechanisms, seeds, and one (mechanism, ε) task.

Split out of :mod:`dpmf_lib.experiments.balu._balu_ch3` so that the result cache's code hash
(:func:`dpmf_lib.experiments.balu._balu_ch3._code_hash`: this file and ``dpmf_lib/attacks/*.py``) covers exactly the code
the cached rows depend on: editing the summaries, claims or plots in ``_balu_ch3`` keeps the cache. Every name here is
re-exported by ``_balu_ch3`` (``ch3.prepare``, ``ch3.Setup``, ``ch3._seed`` … keep working).

Seeding: the train/test split uses SeedSequence([seed, 0]); the public codebook [seed, 1] (the same for every eps);
the noise of user u at ε [seed, 2, eps_stream(ε), u]; the attacks' MCMC [seed, 3, eps_stream(ε), u]; the attacked
subsample [seed, 4].
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ...attacks import decoders, metrics
from ...attacks.mechanisms import BLIP, JLT, bloom_codebook, jlt_codebook
from ...attacks.profiles import Profiles, item_priors, load_dataset, profiles_from_ratings, train_test_split
from ...data.ratings import DataSource
from ...errors import ParameterError


@dataclass
class Setup:
    source: DataSource
    train: Profiles
    test: Profiles  # all test users (343 for ML-100K)
    attacked: np.ndarray  # positions in ``test`` that are attacked (all at `paper`, a subsample at ci/smoke)
    q: np.ndarray  # adversary's item priors
    c_fallback: float  # mean training profile size


def _seed(*parts) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(p) for p in parts]))


def prepare(params: dict) -> Setup:
    r = load_dataset(params.get("dataset", "ml-100k"), seed=params["seed"])
    prof = profiles_from_ratings(r)
    n_test = params.get("n_test")
    train, test = train_test_split(prof, params["n_train"], n_test, seed=_seed(params["seed"], 0))
    n_att = params.get("n_attacked")
    if n_att is None or n_att >= len(test):
        attacked = np.arange(len(test))
    else:
        if n_att < 1:
            raise ParameterError(f"n_attacked must be >= 1 (or null for all test users), got {n_att}")
        attacked = np.sort(_seed(params["seed"], 4).choice(len(test), int(n_att), replace=False))
    q = item_priors(train, params.get("prior_alpha", 0.5))
    return Setup(r.source, train, test, attacked, q, float(train.sizes().mean()))


def make_mechanism(kind: str, eps: float, params: dict, n_items: int):
    if kind == "blip":
        return BLIP(bloom_codebook(n_items, params["L"], params["K"], seed=_seed(params["seed"], 1)), eps)
    if kind == "jlt":
        return JLT(jlt_codebook(n_items, params["L"], seed=_seed(params["seed"], 1)), eps, params["delta"])
    raise ParameterError(f"unknown mechanism '{kind}'; use 'blip' or 'jlt'")


def eps_stream(eps: float) -> int:
    """The seed stream of one ε, from its value (µ-units): a result depends on ε, never on its place in the grid, so
    the per-ε cache (keyed by value) can serve any ε list."""
    return int(round(float(eps) * 1_000_000))


def attack_one_eps(kind: str, eps: float, params: dict, setup: Setup) -> list[dict]:
    """Every attack on every attacked test user at one eps: one row per (user, attack)."""
    mech = make_mechanism(kind, eps, params, setup.test.n_items)
    stream = eps_stream(eps)
    if kind == "jlt":
        mech.codebook.gram()  # once per eps task, shared by all users
    rows = []
    for u in setup.attacked:
        P = setup.test.profile(int(u))
        obs = mech.sanitize(P, seed=_seed(params["seed"], 2, stream, u))
        t0 = time.perf_counter()
        diag = {}
        c_hat, ranks = decoders.attack(mech, obs, setup.q, attacks=tuple(params["attacks"]), f=params["prefilter_f"],
                                       burn_in=params["burn_in"], n_samples=params["n_samples"],
                                       c_fallback=setup.c_fallback, flat_prior=params.get("flat_prior", "catalog"),
                                       min_sweeps=params.get("min_sweeps"),
                                       seed=_seed(params["seed"], 3, stream, u), diagnostics=diag)
        dt = time.perf_counter() - t0
        for a, rk in ranks.items():
            rows.append({"mechanism": kind, "eps": float(eps), "user": int(setup.test.users[u]), "attack": a,
                         "cos": metrics.cosine_sets(P, rk[:c_hat]),
                         "ap10": metrics.average_precision_at(P, rk, params["map_R"]),
                         "c_hat": c_hat, "c_true": len(P), "split_rhat": diag.get(a, np.nan),
                         "sweeps": diag.get(a + ":sweeps", np.nan), "exact_err": diag.get(a + ":exact_err", np.nan),
                         "exact_spearman": diag.get(a + ":exact_spearman", np.nan),
                         # 1/0 where the chain sat in one state and a check chain ran (decoders' module notes); there
                         # split_rhat is the two chains' four-half R̂ (1.0: both sat in the same state)
                         "point_mass_check": diag.get(a + ":point_mass", np.nan),
                         "seconds_all_attacks": dt})
    return rows


def _eps_rows(kind: str, eps: float, attacks: tuple, key: dict, code: str, params: dict, setup: Setup) -> list[dict]:
    """One (mechanism, ε) task of the grid: the unit of the result cache (:mod:`dpmf_lib.cache`), shared by Figures
    3.2/3.4 (BLIP), 3.3/3.5 (JLT) and 3.6."""
    return attack_one_eps(kind, eps, {**params, "attacks": list(attacks)}, setup)
