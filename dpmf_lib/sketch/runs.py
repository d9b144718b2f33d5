"""Shared driver of the chapter-4 experiments: splits, per-configuration line search, evaluation over splits.

A *configuration* is a dict with ``method`` (regular | count_sketch | feature_hashing), ``d``, optionally ``gamma``,
``k``, ``clip`` (the clipping threshold of data clipping — the thesis's "ε", but no noise is added and no finite DP ε
holds; ``inf`` = off) and any search parameter it overrides (e.g. ``lam_grid: [0.0]`` to
fix λ). :func:`run_configs` tunes (η, λ) on the validation set of the first split with the two-stage line search of
:func:`dpmf_lib.sketch.protocol.line_search` (or on every split when ``search_each_split``), then trains with the
chosen (η, λ) on the other splits and returns one row per (configuration, split) with validation and test RMSE (and
the KLD of eq. 4.15 when asked).

Search parameters (all in every ``params/balu_*4*.yaml``): ``search`` (false → use ``eta``, ``lam`` as given),
``eta``, ``lam``, ``eta_grid``, ``lam_grid``, ``refine`` (stage-2 step in decades, 0 = no stage 2),
``search_each_split``, ``epochs``, ``init_scale``.

Every row also says how far to trust its cell:

- ``bias_only_val_rmse`` / ``bias_only_test_rmse``: the RMSE of the mean-corrected baseline μ + b_u + b_i alone
  (residual prediction 0) on that split; the figures draw it as a reference.
- ``degenerate``: the selected (η, λ) gives a validation RMSE within ``DEGENERATE_TOL`` of the bias-only one — the
  factors learned nothing (typically λ so large that they shrink to 0); a figure marks such a cell, and a comparison
  built on it compares baselines, not sketches. ``worse_than_bias_only``: the selected model is *worse* than the
  bias-only one on validation (over-fitting, e.g. λ fixed at 0) — not degenerate, but stated.
- ``search_refined`` (stage 2 ran), ``eta_on_edge`` / ``lam_on_edge`` (the chosen value is the smallest or largest the
  search evaluated: the optimum is at or beyond it). At ``ci`` the grids are small and unrefined; the figures say so.
"""

from __future__ import annotations

import math

import pandas as pd

from ..errors import ParameterError
from ..metrics import rms
from ..sweep import grid_map
from .protocol import fit_eval, fit_runs, line_search, load_dataset, prepare_split

DEGENERATE_TOL = 5e-4  # validation RMSE within this of the bias-only RMSE: the factors add nothing

SEARCH_KEYS = ("search", "eta", "lam", "eta_grid", "lam_grid", "refine", "search_each_split", "epochs", "init_scale")


def as_clip(x) -> float:
    """A clipping threshold from YAML: a number, or ``inf``/``.inf``/null for no clipping."""
    if x is None or (isinstance(x, str) and x.strip().lower() in ("inf", ".inf", "infinity")):
        return math.inf
    x = float(x)
    if math.isnan(x) or x <= 0:
        raise ParameterError(f"clipping threshold must be > 0 (or inf for no clipping), got {x!r}")
    return x


def load(params: dict, dataset: str | None = None):
    return load_dataset(dataset or params["dataset"], seed=params["seed"], standin_scale=params.get("standin_scale", 1.0),
                        max_ratings=params.get("max_ratings"))


def make_splits(r, params: dict) -> list:
    n = int(params["n_splits"])
    if n < 1:
        raise ParameterError(f"n_splits must be >= 1, got {n}")
    return [prepare_split(r, params["seed"] + s, fractions=tuple(params.get("fractions", (0.8, 0.1, 0.1))),
                          min_freq=params.get("min_freq", 10)) for s in range(n)]


def train_direct(run: dict, data, split_seed: int) -> dict:
    """One training run, ``fit_eval(data=data, **run)``: the default trainer of :func:`run_configs` (a trainer may
    route the same call through a cache, keyed by ``run`` and the split, e.g.
    :mod:`dpmf_lib.experiments.balu._balu_ch4_runs`)."""
    return fit_eval(data=data, **run)


def train_runs(train, runs: list[dict], data, split_seed: int) -> list[dict]:
    """``[train(run, data, split_seed) for run in runs]``, the runs of one search stage: :func:`fit_runs` (which
    trains the count-sketch runs together, bit for bit) for :func:`train_direct`, ``train.many(runs, data,
    split_seed)`` for a trainer that has it, else one call per run."""
    if train is train_direct:
        return fit_runs(runs, data)
    many = getattr(train, "many", None)
    return many(runs, data, split_seed) if many is not None else [train(run, data, split_seed) for run in runs]


def _evaluate(config: dict, splits: list, sp: dict, with_kld: bool, track: tuple, train=None) -> list[dict]:
    train = train or train_direct
    sp = {**sp, **{k: v for k, v in config.items() if k in SEARCH_KEYS}}
    model_kw = dict(d=int(config["d"]), gamma=float(config.get("gamma", 1.0)), k=config.get("k"),
                    clip=as_clip(config.get("clip")), epochs=int(sp["epochs"]), init_scale=float(sp["init_scale"]),
                    with_kld=with_kld, track=track)
    rows, chosen, flags = [], None, {}
    for s, data in enumerate(splits):
        seed = data.info["split_seed"] * 7919 + 17

        def make_run(eta, lam, seed=seed):
            return {"method": config["method"], "eta": eta, "lam": lam, "seed": seed, **model_kw}

        def ev(eta, lam, data=data, make_run=make_run):
            return train(make_run(eta, lam), data, int(data.info["split_seed"]))

        def ev_many(points, data=data, make_run=make_run):
            return train_runs(train, [make_run(eta, lam) for eta, lam in points], data, int(data.info["split_seed"]))

        if sp["search"] and (chosen is None or sp["search_each_split"]):
            best, trace = line_search(ev, eta_grid=sp["eta_grid"], lam_grid=sp["lam_grid"], refine=float(sp["refine"]),
                                      evaluate_many=ev_many)
            chosen = (best["eta"], best["lam"])
            n_evals = len(trace)
            flags = search_flags(best, trace, refined=bool(float(sp["refine"])))
        else:
            if chosen is None:
                chosen = (float(sp["eta"]), float(sp["lam"]))
            best, n_evals = ev(*chosen), 1
            flags = flags or {"search_refined": False, "eta_on_edge": False, "lam_on_edge": False}
        if data.info["n_val"] and data.info["n_test"]:  # an empty set's RMSE is NaN by construction, not divergence
            require_finite_fit(best, config, sp, s)
        row = {k: v for k, v in config.items() if k not in SEARCH_KEYS}
        row.update({k: v for k, v in best.items() if k != "history" or track})
        row.update(split=s, n_search_evals=n_evals, n_train=data.info["n_train"], n_test=data.info["n_test"])
        b_val, b_test = bias_only_rmse(data)
        row.update(bias_only_val_rmse=b_val, bias_only_test_rmse=b_test,
                   degenerate=bool(abs(best["val_rmse"] - b_val) <= DEGENERATE_TOL),
                   worse_than_bias_only=bool(best["val_rmse"] > b_val + DEGENERATE_TOL), **flags)
        rows.append(row)
    return rows


def require_finite_fit(best: dict, config: dict, sp: dict, split: int) -> None:
    """Raise :class:`ParameterError` naming the step size when the run a row reports diverged (its validation or test
    RMSE is not finite): with a fixed ``eta``, that ``eta``; after a search, the grid, every point of which diverged.
    A diverged point inside a search is no error — the search passes it by (its validation RMSE counts as +inf)."""
    val, test = best.get("val_rmse"), best.get("test_rmse")
    if all(isinstance(x, (int, float)) and math.isfinite(x) for x in (val, test)):
        return
    what = (f"{config.get('method')} (d = {config.get('d')}) diverged on split {split}: validation RMSE {val}, test "
            f"RMSE {test} at eta = {best.get('eta'):g}, lam = {best.get('lam'):g}")
    if sp.get("search"):
        raise ParameterError(f"{what}, the best point of its search: SGD diverged at every step size of the grid — "
                             f"lower eta_grid (now {list(sp.get('eta_grid', []))})")
    raise ParameterError(f"{what}: SGD diverged — lower eta (now {best.get('eta'):g})")


def bias_only_rmse(data) -> tuple[float, float]:
    """(validation, test) RMSE of μ + b_u + b_i alone: the residuals' root mean square (the factors predict 0)."""
    def r(t):
        return rms(t.values) if len(t) else float("nan")
    return r(data.val), r(data.test)


def search_flags(best: dict, trace: list[dict], *, refined: bool) -> dict:
    """Whether stage 2 ran and whether the chosen η / λ is the smallest or largest value the search evaluated."""
    etas = [t["eta"] for t in trace]
    lams = [t["lam"] for t in trace]
    on_edge = lambda v, vals: len(set(vals)) > 1 and (v <= min(vals) or v >= max(vals))  # noqa: E731
    return {"search_refined": refined, "eta_on_edge": bool(on_edge(best["eta"], etas)),
            "lam_on_edge": bool(on_edge(best["lam"], lams))}


def degenerate_cells(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    """Per cell (``keys``): True when the selection is degenerate on any split (see module docstring)."""
    if "degenerate" not in df.columns:
        return pd.Series(False, index=df.groupby(keys).size().index)
    return df.groupby(keys).degenerate.any()


def search_note(df: pd.DataFrame) -> str:
    """A statement of the search's fidelity for a figure (one line per point): refinement, edges, degenerate cells."""
    if "search_refined" not in df.columns:
        return ""
    parts = []
    if not df.search_refined.all():
        parts.append("coarse (η, λ) grid, no refinement step (thesis: two-stage search)")
    edge = (df.eta_on_edge | df.lam_on_edge).mean()
    if edge:
        parts.append(f"{edge:.0%} of rows chose η or λ on the grid edge")
    n_deg = int(df.degenerate.sum())
    if n_deg:
        parts.append(f"{n_deg} of {len(df)} rows degenerate (val RMSE = bias-only)")
    n_worse = int(df.worse_than_bias_only.sum()) if "worse_than_bias_only" in df.columns else 0
    if n_worse:
        parts.append(f"{n_worse} of {len(df)} rows worse than bias-only on validation (over-fitting)")
    return ";\n".join(parts)


def _call(item, splits, sp, with_kld, track):
    config, train = item
    return _evaluate(config, splits, sp, with_kld, track, train)


def run_configs(configs: list[dict], splits: list, params: dict, *, with_kld: bool = False,
                track: tuple[str, ...] = (), trainers: list | None = None) -> pd.DataFrame:
    """One row per (configuration, split); configurations run in parallel with ``params['n_jobs']`` workers.
    ``trainers[i]``: how configuration ``i``'s training runs are done (``None``: :func:`train_direct`; a picklable
    ``(run, data, split_seed) -> dict`` with the same result, e.g. through the result cache)."""
    sp = {k: params[k] for k in SEARCH_KEYS}
    if sp["search"] and not sp["eta_grid"]:
        raise ParameterError("eta_grid must list at least one learning rate when search is true")
    trainers = [None] * len(configs) if trainers is None else list(trainers)
    if len(trainers) != len(configs):
        raise ParameterError(f"trainers must have one entry per configuration ({len(configs)}), got {len(trainers)}")
    out = grid_map(_call, {"item": list(zip(configs, trainers))},
                   fixed={"splits": splits, "sp": sp, "with_kld": with_kld, "track": tuple(track)},
                   n_jobs=int(params.get("n_jobs", 1)))
    return pd.DataFrame([r for rows in out for r in rows])
