"""Shared machinery of the Hua, Xia, Zhong (2015) notebooks (hua_fig1 ... hua_fig10, extra_hua_message_sizes).

Every scenario run goes through :func:`scenario_run`, cached on disk with joblib (key: scenario, data set, eps,
checkpoints, seed, the model configuration and a hash of the ``dpmf_lib.objpert``, ``dpmf_lib.data``,
``dpmf_lib.privacy.common`` and ``data_fetch`` sources and of :func:`load_data`), so the figures that show
the same runs (Figures 1-6 and the mean-increase Figures 7-8, the baseline of every figure) compute them once. The
cache is the workbook's one result cache (:mod:`dpmf_lib.cache`: ``$DPMF_CACHE_DIR`` or ``figures/.cache``,
``$DPMF_CACHE=on|refresh|off``); ``cache: false`` in the parameters turns it off for a notebook. A cached run also stores its data source, so a notebook whose runs are all cached never loads the data.

The runs of a figure are independent of one another (each seeded by its own settings), so a figure first lists the
distinct runs it needs (a :class:`RunPlan`), computes them as tasks of :func:`dpmf_lib.sweep.grid_map`
(:func:`run_task`, a function of its arguments alone; ``n_jobs``: null → ``$DPMF_SWEEP_JOBS``, default 1, i.e.
in-process; ``$DPMF_SWEEP_BACKEND=dask`` puts them on a cluster) and then assembles its rows from the results, in
the same order as before: the CSV does not depend on the backend or on ``n_jobs``. A run asked for twice (panels (a)
and (b) of ``hua_fig6.claims_run``, a probability in both panels of Figures 9-10) is computed once, whatever the
cache.
"""

from __future__ import annotations

import functools
import math
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd

from ... import baselines, validate
from ...errors import ParameterError
from ...objpert import mf
from ...objpert.data import load_hua_dataset

MODEL_KEYS = ("d", "gamma", "lam", "mu", "max_norm", "grad_weights", "noise_law", "reopt", "reopt_iters", "kernel")
NAMES = {"netflix": "Netflix (100 random movies)", "ml-100k": "MovieLens 100K"}
SCEN = {"s1": "S1 (trusted recommender)", "s2": "S2 (untrusted, static users)",
        "s3": "S3 (untrusted, dynamic users)", "mf": "non-private MF"}
#: the label of the variant that divides the noise by W = |R| (objpert.mf, ``noise_scale="w_scaled"``)
W_LABEL = "W-scaled noise (not covered by Theorem 1)"
NOISE_LABEL = {"theorem1": "Theorem 1", "w_scaled": W_LABEL}
#: the paper's numbers for Figures 7-8 as its text states them: (panel, scenario, eps, value, relation)
PAPER_POINTS = {7: [("a", "s1", 0.15, 0.03, "below"), ("a", "s2", 0.15, 0.14, "around"),
                    ("b", "s3", 0.8, 0.1, "below")],
                8: [("a", "s2", 0.15, 0.0, "near"), ("b", "s3", 0.05, 0.0, "indistinguishable from")]}


def w_scaled_for(params: dict, scenario: str) -> bool:
    """Whether to run the W-scaled variant for ``scenario``: ``w_scaled_variant`` is a bool (every scenario) or a list
    of scenarios (``ci`` leaves out S3's 10^3-round runs)."""
    v = params.get("w_scaled_variant", False)
    if isinstance(v, bool):
        return v
    if isinstance(v, (list, tuple)) and all(x in ("s1", "s2", "s3") for x in v):
        return scenario in v
    raise ParameterError(f"parameter 'w_scaled_variant' must be true, false or a list of s1/s2/s3, got {v!r}")


def eps_holds(run: dict) -> bool:
    """Whether the stated eps holds for the release (its privacy record's ``epsilon_effective`` is not None)."""
    priv = getattr(run["results"], "privacy", {}) or {}
    return priv.get("epsilon_effective") is not None


def _code_version() -> str:
    """The code part of a cached run's key: this module and everything it imports (the simulations, the data loaders
    and stand-in generators, the seed policy), through :func:`dpmf_lib.cache.code_version`."""
    from ...cache import code_version

    return code_version(__name__)


def cache_dir() -> Path:
    """The workbook's one result cache (:func:`dpmf_lib.paths.cache_dir`)."""
    from ...paths import cache_dir as _cache_dir

    return _cache_dir()


def model_config(params: dict) -> dict:
    return {k: params[k] for k in MODEL_KEYS if k in params}


def data_key(params: dict, dataset: str) -> tuple:
    if dataset == "netflix":
        return ("netflix", int(params.get("n_movies", 100)), int(params.get("subset_seed", 0)),
                float(params.get("standin_scale", 1.0)), int(params.get("data_seed", 0)))
    return (dataset,)


@functools.lru_cache(maxsize=4)
def load_data(key: tuple):
    if key[0] == "netflix":
        _, n_movies, subset_seed, scale, seed = key
        r = load_hua_dataset("netflix", n_movies=n_movies, subset_seed=subset_seed, standin_scale=scale, seed=seed)
    else:
        r = load_hua_dataset(key[0])
    return r, mf.Problem.from_ratings(r)


def _compute(scenario: str, dkey: tuple, eps: float, checkpoints: tuple, seed: int, cfg: dict, s3: dict,
             code: str) -> dict:
    r, prob = load_data(dkey)
    c = mf.HuaConfig(**cfg)
    if scenario == "mf":
        res = mf.train_mf(prob, c, list(checkpoints), seed)
    elif scenario == "s1":
        res = mf.run_s1(prob, c, eps, list(checkpoints), seed)
    elif scenario == "s2":
        res = mf.run_s2(prob, c, eps, list(checkpoints), seed)
    elif scenario == "s3":
        trace: list = []
        res = mf.run_s3(prob, c, eps, list(checkpoints), seed, trace=trace, **s3)
        tr = np.asarray(trace)
        return {"source": r.source.as_dict(), "results": res,
                "online_mean": float(tr[:, 1].mean()), "participants_mean": float(tr[:, 2].mean())}
    else:
        raise ParameterError(f"unknown scenario {scenario!r} (mf, s1, s2, s3)")
    return {"source": r.source.as_dict(), "results": res}


def scenario_run(params: dict, scenario: str, dataset: str, eps, checkpoints, *, s3: dict | None = None,
                 noise_scale: str = "theorem1", seed: int | None = None) -> dict:
    """``{"source": DataSource dict, "results": {T: summary}}`` for one run (cached unless ``params["cache"]`` is
    false).

    ``eps=None``: the non-private run (only None means non-private; NaN / inf raise in :mod:`dpmf_lib.objpert`).
    ``results`` is a :class:`~dpmf_lib.objpert.mf.ScenarioResult` (for s1/s2/s3) carrying the run's ``privacy``
    record; the seed is the params' seed (a reproducibility choice the record states) unless ``seed`` is given.
    ``noise_scale="w_scaled"``: the labelled variant that divides the noise by W = |R| (not covered by Theorem 1,
    :mod:`dpmf_lib.objpert.mf`); the default adds nothing to the cache key."""
    cps = tuple(sorted({int(t) for t in checkpoints}))
    eps = None if eps is None else float(eps)
    cfg = model_config(params)
    if noise_scale != "theorem1":
        cfg["noise_scale"] = noise_scale
    args = (scenario, data_key(params, dataset), eps, cps, int(params["seed"] if seed is None else seed), cfg,
            dict(sorted((s3 or {}).items())), _code_version())
    from ... import cache

    return cache.cached_call(_compute, *args, enabled=params.get("cache", True))


# ---- the runs of a figure as sweep tasks ----------------------------------------------------------------------------
def _env_of_caller() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith("DPMF_")}


@contextmanager
def _dpmf_env(env: dict):
    """Run with exactly the caller's ``DPMF_*`` variables (cache directory and mode, data and figures directories): a
    reused loky worker (or a dask worker) keeps the environment it was started with, not the notebook's. In the
    caller's own process this changes nothing."""
    mine = _env_of_caller()
    if mine == env:
        yield
        return
    for k in mine:
        if k not in env:
            del os.environ[k]
    os.environ.update(env)
    try:
        yield
    finally:
        for k in env:
            os.environ.pop(k, None)
        os.environ.update(mine)


def run_key(params: dict, scenario: str, dataset: str, eps, checkpoints, *, s3: dict | None = None,
            noise_scale: str = "theorem1", seed: int | None = None) -> tuple:
    """What identifies a run within one figure (the arguments of :func:`scenario_run`, normalised as it does)."""
    return (scenario, dataset, None if eps is None else float(eps), tuple(sorted({int(t) for t in checkpoints})),
            None if s3 is None else tuple(sorted(s3.items())), noise_scale,
            int(params["seed"] if seed is None else seed))


def run_task(spec: dict, params: dict, env: dict) -> dict:
    """One run of a figure (a sweep task: a function of its arguments alone, through the result cache of
    :func:`scenario_run`): ``spec`` holds :func:`scenario_run`'s arguments, ``env`` the caller's ``DPMF_*``
    variables (so a worker uses the caller's cache directory and ``$DPMF_CACHE``)."""
    with _dpmf_env(env):
        return scenario_run(params, spec["scenario"], spec["dataset"], spec["eps"], spec["checkpoints"],
                            s3=spec["s3"], noise_scale=spec["noise_scale"], seed=spec["seed"])


class RunPlan:
    """The distinct runs a figure needs: :meth:`add` them (it returns the run's key), :meth:`compute` them all at once
    as sweep tasks, then read the results by key (what :meth:`compute` returned, also kept in ``results``)."""

    def __init__(self, params: dict):
        self.params = params
        self.specs: dict[tuple, dict] = {}
        self.results: dict[tuple, dict] = {}

    def add(self, scenario: str, dataset: str, eps, checkpoints, *, s3: dict | None = None,
            noise_scale: str = "theorem1", seed: int | None = None) -> tuple:
        key = run_key(self.params, scenario, dataset, eps, checkpoints, s3=s3, noise_scale=noise_scale, seed=seed)
        self.specs.setdefault(key, {"scenario": scenario, "dataset": dataset, "eps": eps,
                                    "checkpoints": list(checkpoints), "s3": s3, "noise_scale": noise_scale,
                                    "seed": seed})
        return key

    def compute(self) -> dict[tuple, dict]:
        """``{key: scenario_run(...)}`` through :func:`dpmf_lib.sweep.grid_map` (``params["n_jobs"]``); the longest
        runs (most rounds) are handed out first. The results do not depend on the order or the worker."""
        from ...sweep import grid_map

        keys = sorted(self.specs, key=lambda k: -max(k[3], default=0))  # stable: equal lengths keep their order
        done = grid_map(run_task, {"spec": [self.specs[k] for k in keys]}, n_jobs=self.params.get("n_jobs"),
                        fixed={"params": self.params, "env": _env_of_caller()})
        self.results = dict(zip(keys, done))
        return self.results


def s3_options(params: dict, **override) -> dict:
    o = {"p_join": float(params["p_join"]), "p_leave": float(params["p_leave"]),
         "max_online": int(params["max_online"]), "item_weight": params.get("s3_item_weight", "all_raters")}
    o.update(override)
    return o


def check(params: dict) -> None:
    for name, values in (("eps_values", params.get("eps_values", [])), ("eps_fixed", [params.get("eps_fixed", 1.0)])):
        for e in values:
            validate.epsilon(e, name, fix="the non-private baseline is run separately")
    if params.get("dataset", "ml-100k") not in ("ml-100k", "netflix"):
        raise ParameterError(f"parameter 'dataset' must be 'ml-100k' or 'netflix', got {params.get('dataset')!r}")


# ---- Figures 1-6: CDF of |prediction error| ------------------------------------------------------------------------
def cdf_rows(summary: dict, **cols) -> pd.DataFrame:
    return pd.DataFrame({"abs_error": mf.CDF_GRID, "cdf": summary["cdf"].astype(float), **cols,
                         "mean_abs_error": summary["mean"], "median_abs_error": summary["median"]})


def cdf_runs(params: dict, scenario: str, plan: RunPlan) -> dict:
    """Add the runs of a CDF figure to ``plan``; returns their keys (what :func:`cdf_experiment` reads). A run that panels (a)
    and (b) both ask for (``hua_fig6.claims_run`` sets both to the claim's ε and iterations) is one run: the plan
    merges it, whatever ``$DPMF_CACHE`` or ``cache: false``."""
    ds = params["dataset"]
    s3 = s3_options(params) if scenario == "s3" else None
    T = int(params["iterations_fixed"])
    keys = {"base": plan.add("mf", ds, None, [int(params["baseline_iterations"])]),
            "a": plan.add(scenario, ds, params["eps_fixed"], params["iterations"], s3=s3),
            "b": [plan.add(scenario, ds, e, [T], s3=s3) for e in params["eps_values"]]}
    if w_scaled_for(params, scenario):
        keys["c"] = [plan.add(scenario, ds, e, [T], s3=s3, noise_scale="w_scaled") for e in params["eps_values"]]
    if scenario == "s3":
        keys["s3-nonprivate"] = plan.add("s3", ds, None, [T], s3=s3)
    return keys


def cdf_experiment(params: dict, scenario: str, plan: RunPlan | None = None) -> tuple[pd.DataFrame, dict]:
    """Panel (a): eps fixed, iterations vary; panel (b): iterations fixed, eps varies; plus the baseline curve.

    The runs are computed at once as sweep tasks (:class:`RunPlan`); ``plan``: a plan that already holds other runs
    the caller needs (``hua_fig2``'s claim run), computed with these (read them from ``plan.results``)."""
    check(params)
    plan = RunPlan(params) if plan is None else plan
    keys = cdf_runs(params, scenario, plan)
    runs = plan.compute()
    parts, sources = [], {}
    base = runs[keys["base"]]
    sources[base["source"]["label"]] = base["source"]
    bT = int(params["baseline_iterations"])
    bsum = base["results"][bT]
    a = runs[keys["a"]]
    for T, s in a["results"].items():
        parts.append(cdf_rows(s, panel="a", scenario=scenario, eps=float(params["eps_fixed"]), iterations=T,
                              curve=f"{T} iterations"))
    for e, k in zip(params["eps_values"], keys["b"]):
        s = runs[k]["results"][int(params["iterations_fixed"])]
        parts.append(cdf_rows(s, panel="b", scenario=scenario, eps=float(e), iterations=int(params["iterations_fixed"]),
                              curve=f"ε = {e:g}"))
    if w_scaled_for(params, scenario):  # panel (c): the labelled variant, eta / W (not covered by Theorem 1)
        T = int(params["iterations_fixed"])
        for e, k in zip(params["eps_values"], keys["c"]):
            w = runs[k]
            assert not eps_holds(w), "the W-scaled variant must not carry an effective eps"
            parts.append(cdf_rows(w["results"][T], panel="c", scenario=f"{scenario}-w_scaled", eps=float(e),
                                  iterations=T, curve=f"ε = {e:g} (stated; does not hold)"))
    if scenario == "s3":  # the dynamic protocol without noise: separates the effect of dynamics from that of noise
        T = int(params["iterations_fixed"])
        n = runs[keys["s3-nonprivate"]]
        parts.append(cdf_rows(n["results"][T], panel="b", scenario="s3-nonprivate", eps=math.inf, iterations=T,
                              curve=f"S3 without noise (ε = ∞, {T} it.)"))
    for panel in ("a", "b") + (("c",) if w_scaled_for(params, scenario) else ()):
        parts.append(cdf_rows(bsum, panel=panel, scenario="baseline", eps=math.inf, iterations=bT,
                              curve=f"baseline (non-private, {bT} it.)"))
    df = pd.concat(parts, ignore_index=True)
    df["noise"] = np.where(df["scenario"].str.endswith("-w_scaled"), W_LABEL, "Theorem 1")
    df.loc[df["scenario"].isin(["baseline", "s3-nonprivate"]), "noise"] = "none"
    df.insert(0, "dataset", base["source"]["label"])
    df["baseline_mean_abs_error"] = bsum["mean"]
    return df, sources


def reference_gain(params: dict) -> float:
    """The ``reference_gain_over_bias_only`` guard of every Hua accuracy claim (kind ``privacy-cost`` in
    ``params/claims.yaml``): the test-RMSE gain of the non-private baseline MF (``baseline_iterations``) over the
    item-means predictor, both fit to and scored on R (the ratings the paper evaluates on). The claims read the private
    runs against this baseline: what the private runs reach is the effect measured, whatever it is; the baseline must
    be a trained model for an increase over it to mean anything. The run is the figures' own baseline (the run cache
    serves it)."""
    ds, nb = params["dataset"], int(params["baseline_iterations"])
    r = load_data(data_key(params, ds))[0]
    rmse = scenario_run(params, "mf", ds, None, [nb])["results"][nb]["rmse"]
    return baselines.smallest_gain(baselines.item_means_rmse(r, r), [rmse])


# ---- Figures 7-8: mean increase over the baseline ------------------------------------------------------------------
def increase_experiment(params: dict) -> tuple[pd.DataFrame, dict]:
    """Every (scenario, noise scale, ε) run of Figures 7-8 is a sweep task (:class:`RunPlan`), the baseline with
    them."""
    check(params)
    ds = params["dataset"]
    plan = RunPlan(params)
    kbase = plan.add("mf", ds, None, [int(params["baseline_iterations"])])
    todo = []
    for scen, its, eps_list, panel in (("s1", params["iterations_s12"], params["eps_s12"], "a"),
                                       ("s2", params["iterations_s12"], params["eps_s12"], "a"),
                                       ("s3", params["iterations_s3"], params["eps_s3"], "b")):
        s3 = s3_options(params) if scen == "s3" else None
        scales = ("theorem1", "w_scaled") if w_scaled_for(params, scen) else ("theorem1",)
        for ns in scales:
            for e in eps_list:
                todo.append((scen, its, panel, ns, e, plan.add(scen, ds, e, [its], s3=s3, noise_scale=ns)))
    runs = plan.compute()
    base = runs[kbase]
    bmean = base["results"][int(params["baseline_iterations"])]["mean"]
    rows = []
    for scen, its, panel, ns, e, k in todo:
        run = runs[k]
        s = run["results"][int(its)]
        priv = getattr(run["results"], "privacy", {}) or {}
        rows.append({"panel": panel, "scenario": scen, "noise": NOISE_LABEL[ns], "eps": float(e),
                     "iterations": int(its), "epsilon_effective": priv.get("epsilon_effective"),
                     "mean_abs_error": s["mean"], "median_abs_error": s["median"],
                     "baseline_mean_abs_error": bmean, "mean_increase": s["mean"] - bmean})
        if ns == "w_scaled":
            assert not eps_holds(run), "the W-scaled variant must not carry an effective eps"
    df = pd.DataFrame(rows)
    df.insert(0, "dataset", base["source"]["label"])
    return df, {base["source"]["label"]: base["source"]}


def paper_comparison(df: pd.DataFrame, fig_no: int) -> pd.DataFrame:
    """The paper's numbers for Figures 7-8 beside ours: the Theorem-1 mechanism (what the claims judge) and the
    W-scaled variant (not covered by Theorem 1; its stated eps does not hold), at the paper's eps."""
    rows = []
    noise = df["noise"] if "noise" in df else pd.Series("Theorem 1", index=df.index)
    for panel, scen, e, v, rel in PAPER_POINTS.get(fig_no, []):
        sel = (df.panel == panel) & (df.scenario == scen) & np.isclose(df.eps, e)
        ours = {ns: float(df.loc[sel & (noise == ns), "mean_increase"].iloc[0]) if (sel & (noise == ns)).any() else None
                for ns in ("Theorem 1", W_LABEL)}
        its = df.loc[sel, "iterations"]
        rows.append({"scenario": SCEN[scen], "eps": e, "iterations": int(its.iloc[0]) if len(its) else None,
                     "paper (text)": f"{rel} {v:g}", "ours: Theorem 1": ours["Theorem 1"],
                     f"ours: {W_LABEL}": ours[W_LABEL]})
    return pd.DataFrame(rows)


# ---- Figures 9-10: joining / leaving probabilities -----------------------------------------------------------------
def figure_seeds(params: dict) -> list[int]:
    """The seeds of a multi-seed figure: the block of ``n_seeds`` consecutive seeds that holds ``seed``
    (``n_seeds * (seed // n_seeds) + k``). Every seed of the block draws the same figure, so the claim replicates at
    ``seed + 1 ...`` (``NotebookRun.replicate``) reuse the cached runs of the canonical run instead of new blocks."""
    n = int(params.get("n_seeds", 1))
    if n < 1:
        raise ParameterError(f"parameter 'n_seeds' must be >= 1, got {n!r}")
    b = n * (int(params["seed"]) // n)
    return [b + k for k in range(n)]


def joinleave_experiment(params: dict) -> tuple[pd.DataFrame, dict]:
    """One row per (panel, probability, seed) over :func:`figure_seeds`; the baseline of each seed is its own
    non-private MF (same initialisation). Every run of every seed is a sweep task (:class:`RunPlan`)."""
    check(params)
    ds = params["dataset"]
    its = int(params["iterations_s3"])
    bT = int(params["baseline_iterations"])
    plan = RunPlan(params)
    todo = []
    for seed in figure_seeds(params):
        kbase = plan.add("mf", ds, None, [bT], seed=seed)
        for panel, var, values, fixed in (("a", "p_join", params["p_join_values"], {"p_leave": params["p_leave"]}),
                                          ("b", "p_leave", params["p_leave_values"], {"p_join": params["p_join"]})):
            for v in values:
                s3 = s3_options(params, **fixed, **{var: float(v)})
                todo.append((seed, kbase, panel, var, v, s3,
                             plan.add("s3", ds, params["eps_fixed"], [its], s3=s3, seed=seed)))
    runs = plan.compute()
    rows, sources = [], {}
    for seed, kbase, panel, var, v, s3, k in todo:
        base = runs[kbase]
        sources[base["source"]["label"]] = base["source"]
        bmean = base["results"][bT]["mean"]
        run = runs[k]
        s = run["results"][its]
        rows.append({"panel": panel, "varied": var, "probability": float(v), "p_join": s3["p_join"],
                     "p_leave": s3["p_leave"], "eps": float(params["eps_fixed"]), "iterations": its,
                     "seed": seed, "mean_abs_error": s["mean"], "baseline_mean_abs_error": bmean,
                     "mean_increase": s["mean"] - bmean, "online_mean": run["online_mean"],
                     "participants_mean": run["participants_mean"]})
    df = pd.DataFrame(rows)
    df.insert(0, "dataset", base["source"]["label"])
    return df, sources


def seed_summary(df: pd.DataFrame, value: str = "mean_increase") -> pd.DataFrame:
    """Mean over seeds and the half-width of its 95 % Student-t interval per (panel, probability)."""
    from scipy import stats

    def agg(g):
        x = g[value].to_numpy(float)
        n = len(x)
        hw = float(stats.t.ppf(0.975, n - 1) * x.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
        return pd.Series({"mean": float(x.mean()), "ci95": hw, "n_seeds": n, "min": float(x.min()),
                          "max": float(x.max())})

    return df.groupby(["panel", "probability"]).apply(agg, include_groups=False).reset_index()


def joinleave_difference(df: pd.DataFrame, seed: int) -> tuple[float, str]:
    """Panel (a) at one seed: increase(p_join max) - increase(p_join min), with a note (the claim's measurement)."""
    a = df[(df.panel == "a") & (df.seed == seed)].sort_values("probability")
    hi, lo = a.iloc[-1], a.iloc[0]
    return (float(hi.mean_increase - lo.mean_increase),
            f"seed {seed}: increase(p_join={hi.probability:g}) - increase(p_join={lo.probability:g}) = "
            f"{hi.mean_increase:.4g} - {lo.mean_increase:.4g}")


def sources_of(sources: dict):
    from ...data.ratings import DataSource

    return [DataSource(s["dataset"], s["real"], s.get("checksum"), s.get("note", "")) for s in sources.values()]
