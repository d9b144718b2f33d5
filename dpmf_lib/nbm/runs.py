"""One evaluation = (method, dataset, fold, ε, hyper-parameters) → test RMSE; grids and best-of-grid selection.

Used by ``dpmf_lib.experiments.pnbm.pnbm_fig1..3``. Methods:
``pcc``, ``cos`` (non-private kNN), ``pnbm`` (noise-free SGD PNBM), ``dpsgd-pnbm``, ``dpsgd-pnbm-clipped`` (ours:
per-user L1 clipping, :func:`~dpmf_lib.nbm.model.train_pnbm_clipped`), ``mf`` (noise-free SGD MF),
``dpsgd-mf``, ``mf-lr`` / ``dpsgd-mf-lr`` (the same MF trainers on a larger learning-rate grid: ours, a labelled
deviation — with the paper's η ≤ 8·10⁻⁴ MF does not move from its start), ``sgld-pnbm`` (non-private SGLD sample), ``dpps-pnbm``, ``dpps-mf`` (Liu et al.'s posterior sampling MF,
called from :mod:`dpmf_lib.privacy` — never re-implemented here).

Selection ("heuristic grid search", section 5.1): for every (method, ε) the configuration with the lowest RMSE
averaged over the evaluated folds is reported. The paper does not say on which data it searched; we select on the
test folds, as its figures suggest — optimistic for every method alike (stated in each notebook).
Seeds: evaluation k uses ``seed * 1000 + fold`` for every method and configuration (common random numbers); the DP
methods therefore run with a fixed seed (a reproducibility choice, recorded as ``seed_was_fixed``).

ε: a number > 0, or ``None`` for the non-private methods. In a grid, ``None`` is carried as the explicit
:data:`NON_PRIVATE` marker through the grid/DataFrame machinery (which would otherwise turn it into NaN) and becomes
NaN only in the finished frame, where NaN in ``epsilon`` means "non-private". A NaN or inf ε given by the caller
raises :class:`~dpmf_lib.errors.ParameterError` (only null means non-private).
"""

from __future__ import annotations

import math
import time
from functools import lru_cache

import numpy as np
import pandas as pd

from ..errors import DatasetUnavailable, ParameterError
from .. import baselines
from ..privacy.common import check_dp_epsilon
from ..sweep import grid_frame, grid_points
from ..tuning import grid_interior
from .data import folds, load
from .model import knn_rmse, sample_pnbm, sample_pnbm_batch, train_dpsgd_mf, train_pnbm, train_pnbm_clipped

NON_PRIVATE = "non-private"  # the explicit ε of a non-private grid row until the frame is finished

METHODS = ("pcc", "cos", "pnbm", "dpsgd-pnbm", "dpsgd-pnbm-clipped", "mf", "dpsgd-mf", "mf-lr", "dpsgd-mf-lr", "sgld-pnbm",
           "dpps-pnbm", "dpps-mf")
LABELS = {"pcc": "PCC (non-private)", "cos": "COS (non-private)", "pnbm": "PNBM (noise-free SGD)",
          "dpsgd-pnbm": "DPSGD-PNBM", "dpsgd-pnbm-clipped": "DPSGD-PNBM, per-user clipped (ours)", "mf": "MF (noise-free SGD)", "dpsgd-mf": "DPSGD-MF",
          "mf-lr": "MF (noise-free SGD), larger η (ours, deviation)",
          "dpsgd-mf-lr": "DPSGD-MF, larger η (ours, deviation)",
          "sgld-pnbm": "PNBM (non-private SGLD)", "dpps-pnbm": "DPPS-PNBM", "dpps-mf": "DPPS-MF"}


@lru_cache(maxsize=4)
def _dataset(dataset: str):
    return load(dataset, real_only=True)


@lru_cache(maxsize=16)
def fold_data(dataset: str, fold: int, seed: int = 0):
    """(train, test) of fold ``fold`` (1-based; ML-100K: u<fold>.base / u<fold>.test)."""
    fs = folds(_dataset(dataset), 5, seed=seed)
    if not 1 <= fold <= len(fs):
        raise ParameterError(f"fold must be in 1..{len(fs)}, got {fold}")
    return fs[fold - 1]


def available(datasets) -> tuple[list, list]:
    """(datasets that are real and present, notes on those skipped). The PNBM figures run on real data only, so when
    none of ``datasets`` is present there is nothing to plot: that raises, naming the fetch command."""
    ok, notes = [], []
    for ds in datasets:
        try:
            _dataset(ds)
            ok.append(ds)
        except DatasetUnavailable as exc:
            notes.append(f"{ds} skipped: not fetched ({str(exc).splitlines()[0][:120]})")
    if not ok:
        raise DatasetUnavailable(f"none of the datasets {list(datasets)} is present (the PNBM figures use real data "
                                 f"only) — fetch one, e.g. `python -m data_fetch {datasets[0]}`; " + "; ".join(notes))
    return ok, notes


def _sample_private_default(name):
    import inspect

    from ..privacy.posterior_sampling import sample_private

    return inspect.signature(sample_private).parameters[name].default


_ETA_N_MAX = None  # sample_private's default cap of η0·N, read once (dpps_mf_release)
_DPPS_MF_MEMO: dict = {}  # (dataset, fold) → {step key → release}: grid points that run the same step (evaluate)


def dpps_mf_release(train, *, epsilon, seed: int, eta: float, lam: float, rho: float, d: int, xi: float = 0.3,
                    tau: int = 200, rounds: int = 20, kappa: float = 1.0, weight_cap: float = 1.0,
                    lambda_r: float = 2.0, memo: dict | None = None):
    """DPPS-MF = Liu et al.'s Algorithm 1 from :mod:`dpmf_lib.privacy` (no second implementation here); returns the
    :class:`~dpmf_lib.privacy.posterior_sampling.PrivateRelease` (with ``epsilon_effective`` and the seed record).

    Mapping of the paper's DPPS-MF grid (section 5.1) onto that implementation (our choice): step size η → η0 (so
    ``eta_n`` = η·𝓛, then adapted to ε and capped by ``sample_private``); decay ξ → its ``gamma``; ϱ → its
    ``step_scale`` (the step of drift and noise alike, as for DPPS-PNBM), not the temperature ``zeta``, which
    scales only the noise and would make the chain target the (ε/ϱ)-posterior (up to 10⁴ × the stated ε);
    ``sample_private`` refuses ζ ≠ 1. λ → fixed prior precisions Λ_u = Λ_v = λ·λ_r (λ = α_S/α_R with
    α_R = λ_r = 2, which makes ε = 4B the non-private posterior); d → d. κ = 1 and the weight cap ρ_w = 1 are Liu et
    al.'s; τ = 200 as in this paper. ``epsilon=None`` → ε = 4B (the non-private posterior).

    ``memo`` (a dict owned by the caller, one per training set): ``sample_private`` adapts η to ε and caps it, so
    several η of the paper's grid run the *same* step and, with the same seed, give the same
    bytes. With a memo, the step is computed first (``step_size``, as ``sample_private`` does) and a release already
    made for the same step and settings is returned instead of a rerun; a release is stored only after checking that
    the step that ran (its history's first η) is the predicted one, so a change inside ``sample_private`` turns the
    reuse off rather than making it wrong.
    """
    global _ETA_N_MAX
    if _ETA_N_MAX is None:
        _ETA_N_MAX = float(_sample_private_default("eta_n_max"))
    from ..privacy import posterior_sampling as ps

    pre, eps, lam_p, kw = _dpps_mf_setup(train, epsilon=epsilon, seed=seed, eta=eta, lam=lam, rho=rho, d=d, xi=xi,
                                         tau=tau, rounds=rounds, kappa=kappa, weight_cap=weight_cap, lambda_r=lambda_r)
    key = None
    if memo is not None:  # the step that will run: η enters sample_private only through it
        h = ps.step_size(ps.likelihood_scale(eps, pre.B, lambda_r) * lambda_r / 2.0, float(eta) * train.n_ratings,
                         _ETA_N_MAX, lam_p, lam_p)
        key = (float(eps), h, float(lam), float(rho), int(d), float(xi), int(tau), int(rounds), float(kappa),
               float(weight_cap), float(lambda_r), int(seed))
        if key in memo:
            return memo[key]
    rel = ps.sample_private(pre, eps, seed=int(seed), **kw)
    if key is not None:
        ran = float(rel.history["eta"].iloc[0]) if rel.history is not None and "eta" in rel.history else math.nan
        want = float(rho) * key[1] / pre.train.n_ratings
        if math.isclose(ran, want, rel_tol=1e-6):  # the predicted step ran (history: float32): safe to reuse
            if len(memo) > 4096:
                memo.clear()
            memo[key] = rel
    return rel


def _dpps_mf_setup(train, *, epsilon, seed: int, eta: float, lam: float, rho: float, d: int, xi: float, tau: int,
                   rounds: int, kappa: float, weight_cap: float, lambda_r: float):
    """(preprocessed data, ε, Λ, ``sample_private``'s keywords but the seed) of a DPPS-MF grid point: the mapping
    :func:`dpps_mf_release` documents."""
    from ..mf import Schedule
    from ..privacy import posterior_sampling as ps

    pre = ps.preprocess(train, tau=int(tau), kappa=float(kappa), rho=float(weight_cap), seed=int(seed))
    eps = 4.0 * pre.B if epsilon is None else float(epsilon)
    lam_p = np.full(int(d), float(lam) * lambda_r, dtype=np.float32)
    kw = dict(Lambda_u=lam_p, Lambda_v=lam_p, d=int(d), lambda_r=lambda_r, rounds=int(rounds),
              eta_n=float(eta) * train.n_ratings, gamma=float(xi), step_scale=float(rho),
              schedule=Schedule(n_threads=1),
              priors_public=True)  # Λ = λ λ_r: a number of the grid, not fit to the ratings
    return pre, eps, lam_p, kw


def dpps_mf_rmse(train, test, **kw) -> float:
    """Test RMSE of :func:`dpps_mf_release`: released V with each user's local ridge fit, clipped to the scale."""
    return float(dpps_mf_release(train, **kw).local_model(train).rmse(test, clip=True))


def _grid_epsilon(epsilon):
    """The explicit non-private marker (or None) → None; a number is checked (NaN / inf raise)."""
    if isinstance(epsilon, str) and epsilon == NON_PRIVATE:
        return None
    return check_dp_epsilon(epsilon, "epsilon", what="the pnbm evaluation (use null for the non-private methods)")


def evaluate(method: str, dataset: str, fold: int, epsilon=None, seed: int = 0, **cfg) -> dict:
    """Test RMSE of one method on one fold. ``epsilon``: a number > 0, or None / :data:`NON_PRIVATE` for
    non-private; NaN and inf raise. Extra keys of ``cfg`` go to the method. ``epsilon_effective`` (NaN when none is
    established or the run is non-private) is the ε the method's noise supports for what ran (see the results'
    ``privacy_caveats`` for what it does not cover)."""
    if method not in METHODS:
        raise ParameterError(f"unknown method '{method}'; choose one of {METHODS}")
    epsilon = _grid_epsilon(epsilon)
    train, test = fold_data(dataset, int(fold))
    s = seed * 1000 + int(fold)
    t0 = time.perf_counter()
    out = {"epsilon_amplified": np.nan, "epsilon_effective": np.nan}
    res = None
    if method in ("pcc", "cos"):
        out["rmse"] = knn_rmse(train, test, method, Nk=int(cfg["Nk"]))
    elif method in ("pnbm", "dpsgd-pnbm"):
        res = train_pnbm(train, epsilon=epsilon if method == "dpsgd-pnbm" else None, seed=s, test=test, **cfg)
        out["rmse"] = res.info["rmse"]
        if res.epsilon_amplified is not None:
            out["epsilon_amplified"] = res.epsilon_amplified
            out["noise_scale_t1"] = res.noise_scales[0]
    elif method == "dpsgd-pnbm-clipped":  # ours: DP-valid variant; needs a number ε (None raises in the trainer)
        res = train_pnbm_clipped(train, epsilon=epsilon, seed=s, test=test, **cfg)
        out["rmse"] = res.info["rmse"]
        out["noise_scale_t1"] = res.noise_scales[0]
    elif method in ("mf", "dpsgd-mf", "mf-lr", "dpsgd-mf-lr"):  # *-lr: the same trainer on a larger-η grid (ours)
        private = method.startswith("dpsgd")
        res = train_dpsgd_mf(train, epsilon=epsilon if private else None, seed=s, test=test, **cfg)
        out["rmse"] = res.rmse
    elif method in ("sgld-pnbm", "dpps-pnbm"):
        res = sample_pnbm(train, epsilon=epsilon if method == "dpps-pnbm" else None, seed=s, test=test, **cfg)
        out["rmse"] = res.info["rmse"]
        out["rmse_start"] = res.info["rmse_start"]
        out["posterior_scale"] = res.info["kappa"]
        out["moved"] = res.info["moved"]  # ‖S_T − S⁰‖_F / ‖S⁰‖_F
    else:  # dpps-mf
        res = dpps_mf_release(train, epsilon=epsilon, seed=s, memo=_DPPS_MF_MEMO.setdefault((dataset, int(fold)), {}),
                              **cfg)
        out["rmse"] = float(res.local_model(train).rmse(test, clip=True))
        # the step that ran: sample_private adapts η to ε and caps it, so several grid η can
        # run the same step (and give the same bytes); η0 of the first SGLD round, after adaptation, cap and ϱ
        if res.history is not None and "eta" in res.history:
            out["eta0_run"] = float(res.history["eta"].iloc[0])
        if epsilon is None:  # ε = 4B was only the device for the non-private posterior
            res = None
    if res is not None:
        out.update(res.privacy.columns())
    out["seconds"] = time.perf_counter() - t0
    return out


DPPS_BATCH = 8  # SGLD chains run in lockstep per call (2 float32 M×M each: 8 × 23 MB on ML-100K); numbers unchanged
_CHAIN_KEYS = {"eta1", "rho", "lam"}


def _dpps_frame(method: str, dataset: str, g: dict, fx: dict) -> pd.DataFrame:
    return _dpps_points(method, dataset, grid_points(g), fx)


def _dpps_points(method: str, dataset: str, points: list, fx: dict) -> pd.DataFrame:
    """The rows :func:`evaluate` would give for ``points`` (dicts of fold, epsilon, eta1, rho, lam) of an SGLD method,
    computed by
    :func:`~dpmf_lib.nbm.model.sample_pnbm_batch`: the points of one fold share the seed (common random numbers),
    so up to :data:`DPPS_BATCH` of them run as chains in lockstep with the noise drawn once — the same bytes as one
    :func:`evaluate` per point. ``seconds`` is the batch's wall time shared equally among its chains."""
    fixed = {k: v for k, v in fx.items() if k not in ("method", "dataset", "seed")}
    rows = [None] * len(points)
    by_fold: dict = {}
    for k, pt in enumerate(points):
        by_fold.setdefault(int(pt["fold"]), []).append(k)
    for fold, ks in by_fold.items():
        train, test = fold_data(dataset, fold)
        s = fx["seed"] * 1000 + fold
        for c0 in range(0, len(ks), DPPS_BATCH):
            part = ks[c0:c0 + DPPS_BATCH]
            chains = []
            for k in part:
                e = _grid_epsilon(points[k]["epsilon"])
                chains.append({"epsilon": e if method == "dpps-pnbm" else None,
                               **{c: points[k][c] for c in _CHAIN_KEYS}})
            t0 = time.perf_counter()
            res = sample_pnbm_batch(train, chains, seed=s, test=test, **fixed)
            secs = (time.perf_counter() - t0) / len(part)
            for k, r in zip(part, res):
                rows[k] = {**points[k], "epsilon_amplified": np.nan, "epsilon_effective": np.nan,
                           "rmse": r.info["rmse"], "rmse_start": r.info["rmse_start"],
                           "posterior_scale": r.info["kappa"], "moved": r.info["moved"], "seconds": secs}
    return pd.DataFrame(rows)


def _frame(method: str, dataset: str, g: dict, fx: dict, n_jobs) -> pd.DataFrame:
    gkeys = set(g) - {"fold", "epsilon"}
    if method in ("sgld-pnbm", "dpps-pnbm") and gkeys == _CHAIN_KEYS:
        return _dpps_frame(method, dataset, g, fx)
    return grid_frame(evaluate, g, fixed=fx, n_jobs=n_jobs)


def _survivors(df: pd.DataFrame, grid: dict, keep: int) -> dict:
    """ε → the ``keep`` grid points (dicts of the grid's own values) with the lowest RMSE in ``df`` (one fold)."""
    out = {}
    for e, g in df.groupby("epsilon", sort=False):
        best = g.sort_values("rmse", kind="stable").head(int(keep))
        out[e] = [{k: next(v for v in grid[k] if v == row[k]) for k in grid} for _, row in best.iterrows()]
    return out


def run_grid(method: str, dataset: str, folds_: list, epsilons: list, grid: dict, fixed: dict, seed: int,
             n_jobs: int | None = None, halving_keep: int | None = None) -> pd.DataFrame:
    """All (fold, ε, grid point) evaluations of one method; one row each, with the config columns.

    ``epsilons``: numbers > 0 or None (non-private); NaN / inf raise before anything runs. In the returned frame a
    non-private row has ``epsilon`` NaN (the marker is resolved after the DataFrame round-trip).

    ``halving_keep`` (successive halving over folds, one rung; None: every grid point on every fold): every grid
    point runs on the first fold; per ε only the ``halving_keep`` best by that fold's RMSE run on the other folds.
    Every evaluation is the one the full grid would make (seed ``seed·1000 + fold`` for every configuration: common
    random numbers), so a survivor's rows equal the full grid's; :func:`select_best` then picks among the configs
    evaluated on every fold. Column ``n_folds`` of the aggregate tells which configs were cut after fold 1."""
    eps_in = []
    for e in epsilons:
        e = _grid_epsilon(e)
        eps_in.append(NON_PRIVATE if e is None else e)
    fx = {"method": method, "dataset": dataset, "seed": seed, **fixed}
    folds_ = list(folds_)
    n_points = int(np.prod([len(v) for v in grid.values()])) if grid else 1
    if halving_keep is not None and len(folds_) > 1 and n_points > int(halving_keep):
        g1 = {"fold": folds_[:1], "epsilon": eps_in, **{k: list(v) for k, v in grid.items()}}
        parts = [_frame(method, dataset, g1, fx, n_jobs)]
        surv = _survivors(parts[0], grid, halving_keep)
        if method in ("sgld-pnbm", "dpps-pnbm") and set(grid) == _CHAIN_KEYS:  # one batch per fold over survivors
            pts = [{"fold": f, "epsilon": e, **c} for f in folds_[1:] for e, cfgs in surv.items() for c in cfgs]
            parts.append(_dpps_points(method, dataset, pts, fx))
        else:
            for e, cfgs in surv.items():
                for c in cfgs:
                    g2 = {"fold": folds_[1:], "epsilon": [e], **{k: [v] for k, v in c.items()}}
                    parts.append(_frame(method, dataset, g2, fx, n_jobs))
        df = pd.concat(parts, ignore_index=True)
    else:
        g = {"fold": folds_, "epsilon": eps_in, **{k: list(v) for k, v in grid.items()}}
        df = _frame(method, dataset, g, fx, n_jobs)
    df["epsilon"] = [np.nan if (isinstance(e, str) and e == NON_PRIVATE) else float(e) for e in df["epsilon"]]
    df["method"] = method
    df["dataset"] = _dataset(dataset).source.label
    df["config"] = df[list(grid)].astype(str).agg(lambda r: ", ".join(f"{k}={v}" for k, v in zip(grid, r)), axis=1) \
        if grid else ""
    return df


def select_best(df: pd.DataFrame) -> pd.DataFrame:
    """Mean/std over folds per (dataset, method, ε, config); ``selected`` marks the best config per (method, ε)."""
    keys = ["dataset", "method", "epsilon", "config"]
    d = df.copy()
    d["epsilon"] = d["epsilon"].astype(float)
    extra = {"rmse_start": ("rmse_start", "mean")} if "rmse_start" in d else {}
    if "moved" in d:
        extra["moved"] = ("moved", "mean")
    if "eta0_run" in d:  # DPPS-MF: the step that ran (same for every fold)
        extra["eta0_run"] = ("eta0_run", "first")
    if "epsilon_effective" in d:
        extra["epsilon_effective"] = ("epsilon_effective", "max")
    agg = d.groupby(keys, dropna=False, sort=False).agg(
        rmse=("rmse", "mean"), rmse_std=("rmse", "std"), n_folds=("rmse", "size"),
        epsilon_amplified=("epsilon_amplified", "first"), seconds=("seconds", "sum"), **extra).reset_index()
    agg["selected"] = False
    # only configurations evaluated on every fold of their (method, ε) compete (successive halving cuts the others)
    full = agg["n_folds"] == agg.groupby(["dataset", "method", "epsilon"], dropna=False, sort=False)["n_folds"] \
        .transform("max")
    require_a_finite_config(agg[full])
    best = agg[full].groupby(["dataset", "method", "epsilon"], dropna=False, sort=False)["rmse"].idxmin()
    agg.loc[best.values, "selected"] = True
    agg["label"] = agg["method"].map(LABELS)
    return agg


#: the step-size parameter of each method's grid (what lowers a diverging run)
STEP_SIZES = {"pnbm": "eta", "dpsgd-pnbm": "eta", "dpsgd-pnbm-clipped": "eta", "mf": "eta", "dpsgd-mf": "eta",
              "mf-lr": "eta", "dpsgd-mf-lr": "eta", "sgld-pnbm": "eta1", "dpps-pnbm": "eta1", "dpps-mf": "eta"}


def require_a_finite_config(agg: pd.DataFrame) -> None:
    """Raise :class:`ParameterError` naming the method's step size when no configuration of a (dataset, method, ε)
    has a finite RMSE: every run diverged, and selecting among them would put a non-finite RMSE in the figure. A
    diverged configuration beside finite ones is kept as a row (it is never selected)."""
    finite = agg.assign(_ok=np.isfinite(agg["rmse"].astype(float)))
    ok = finite.groupby(["dataset", "method", "epsilon"], dropna=False, sort=False)["_ok"].any()
    for (dataset, method, epsilon), good in ok.items():
        if not good:
            eps = "non-private" if pd.isna(epsilon) else f"ε = {epsilon:g}"
            raise ParameterError(f"{LABELS.get(method, method)} on {dataset} ({eps}): every configuration of its grid "
                                 f"diverged (RMSE not finite) — lower its step size "
                                 f"'{STEP_SIZES.get(method, 'eta')}' in the grid")


def best_rmse(agg: pd.DataFrame, dataset: str, method: str, epsilon=None) -> float:
    sel = agg[(agg.dataset == dataset) & (agg.method == method) & agg.selected]
    if epsilon is None:
        sel = sel[sel.epsilon.isna()]
    else:
        sel = sel[np.isclose(sel.epsilon, float(epsilon))]
    return float(sel.rmse.iloc[0]) if len(sel) else float("nan")


def _selected(agg: pd.DataFrame, dataset: str, method: str, epsilon) -> pd.Series | None:
    sel = agg[(agg.dataset == dataset) & (agg.method == method) & agg.selected]
    sel = sel[sel.epsilon.isna()] if epsilon is None else sel[np.isclose(sel.epsilon, float(epsilon))]
    return sel.iloc[0] if len(sel) else None


def selected_config(agg: pd.DataFrame, dataset: str, method: str, epsilon=None) -> dict:
    """The grid point selected for (method, ε), parsed from its ``config`` ("eta=0.1, K=10") into floats."""
    row = _selected(agg, dataset, method, epsilon)
    if row is None or not row["config"]:
        return {}
    return {k: float(v) for k, v in (kv.split("=") for kv in str(row["config"]).split(", "))}


def chain_movement(agg: pd.DataFrame, dataset: str, method: str, epsilon) -> float:
    """|RMSE of the released sample − RMSE of the chain's data-independent start| for the selected grid point (mean
    over folds): ~0 means the DPPS chain never left its start, and then it shows nothing about the posterior."""
    row = _selected(agg, dataset, method, epsilon)
    if row is None or "rmse_start" not in row or pd.isna(row["rmse_start"]):
        return float("nan")
    return float(abs(row["rmse"] - row["rmse_start"]))


def chain_traces(agg: pd.DataFrame, dataset: str, fold: int, fixed: dict, seed: int, n_points: int = 10) -> pd.DataFrame:
    """Movement traces of the selected SGLD chains (do they leave S⁰?): for every selected ``dpps-pnbm`` /
    ``sgld-pnbm`` row of ``dataset``, its chain on ``fold`` rerun (same seed, so the same chain) with ``n_points``
    evaluations: rows (method "trace", traced = the method, epsilon, config, t, moved = ‖S_t − S⁰‖_F / ‖S⁰‖_F, rmse).
    All chains of the fold run as one batch (common random numbers)."""
    sel = agg[(agg.dataset == _dataset(dataset).source.label) & agg.selected
              & agg.method.isin(["dpps-pnbm", "sgld-pnbm"])]
    if not len(sel):
        return pd.DataFrame()
    train, test = fold_data(dataset, int(fold))
    chains, meta = [], []
    for _, r in sel.iterrows():
        cfg = {k: float(v) for k, v in (kv.split("=") for kv in str(r["config"]).split(", "))}
        eps = None if (r.method == "sgld-pnbm" or pd.isna(r.epsilon)) else float(r.epsilon)
        chains.append({"epsilon": eps, **{k: cfg[k] for k in _CHAIN_KEYS}})
        meta.append((r.method, r.epsilon, r.config))
    T = int(fixed["T"])
    rows = []
    for c0 in range(0, len(chains), DPPS_BATCH):
        res = sample_pnbm_batch(train, chains[c0:c0 + DPPS_BATCH], seed=seed * 1000 + int(fold), test=test,
                                eval_every=max(1, T // n_points), **fixed)
        for (m, e, cfg), r in zip(meta[c0:c0 + DPPS_BATCH], res):
            for (t, rm), (_, mv) in zip(r.history, r.info["movement"]):
                rows.append({"dataset": _dataset(dataset).source.label, "method": "trace", "traced": m,
                             "epsilon": e, "config": cfg, "t": t, "moved": mv, "rmse": rm, "fold": int(fold),
                             "selected": False})
    return pd.DataFrame(rows)


#: the statistics whose split-R̂ / ESS vouch for a DPPS chain: the sample's test RMSE and its mean squared entry
#: (of S for DPPS-PNBM, of the item factors V for DPPS-MF: sample_private's trace)
PNBM_CHAIN_STATS = ("s_norm2", "sample_rmse")
MF_CHAIN_STATS = ("v_norm2", "sample_rmse")
_MF_START_SD = 0.1  # dpmf_lib.mf.init_model's factor scale: the released DPPS-MF chain's start


def _check_chains(n_chains, spread) -> tuple[int, float]:
    from .. import validate

    n = validate.integer(n_chains, "n_chains", lo=2, what="the DPPS chain diagnostics (split-R-hat needs >= 2 chains "
                                                            "from different starts)")
    return n, validate.positive(spread, "chain_spread", what="the DPPS chain diagnostics (start of chain k: "
                                                             "the released chain's start scaled by spread^k)")


def _second_half(trace: pd.DataFrame, n_steps: int, stats) -> dict:
    """Split-R̂ (max over ``stats``) and ESS (min) of the draws after ``n_steps // 2`` (no burn-in phase: the second
    half of each chain, as :func:`~dpmf_lib.privacy.posterior_sampling.sample_private` without burn-in)."""
    from ..privacy.chains import chain_diagnostics

    return chain_diagnostics(trace[trace.draw > int(n_steps) // 2], stats=stats)


def dpps_pnbm_chains(train, test, chain: dict, fixed: dict, seed: int, n_chains: int = 2,
                     spread: float = 10.0) -> dict:
    """Convergence diagnostics of one SGLD / DPPS-PNBM configuration (``chain``: epsilon, eta1, rho, lam; ``fixed``:
    :func:`~dpmf_lib.nbm.model.sample_pnbm_batch`'s other settings): the released chain, seeded ``seed`` as
    :func:`evaluate` seeds it (the same bytes), beside ``n_chains − 1`` independent chains on the same trimmed data,
    chain k from the wider data-independent start S⁰ ~ U(0, init_high · spread^k) with its own minibatches and noise
    (:func:`~dpmf_lib.privacy.chains.diagnostic_chain_seed`), each traced at every step of its second half (what
    the diagnostics read; the first half is the warm-up). Returns the released
    chain's ``rmse``, ``rmse_start`` and ``moved`` (|difference|: the ``chain_moved`` guard), and split-R̂ (max)
    and ESS (min) over the chains' second halves of :data:`PNBM_CHAIN_STATS`."""
    from ..privacy.chains import diagnostic_chain_seed

    n, spread = _check_chains(n_chains, spread)
    T = int(fixed["T"])
    traces, first = [], None
    for k in range(n):
        fx = {**fixed, "init_high": float(fixed["init_high"]) * spread ** k}
        r = sample_pnbm_batch(train, [chain], seed=int(seed), noise_seed=None if k == 0 else diagnostic_chain_seed(
            seed, k), test=test, eval_every=1, eval_after=T // 2, **fx)[0]
        if k == 0:
            first = r
        traces.append(pd.DataFrame({"chain": k, "draw": [t for t, _ in r.history],
                                    "sample_rmse": [v for _, v in r.history],
                                    "s_norm2": [v for _, v in r.info["s_norm2"]]}))
    diag = _second_half(pd.concat(traces, ignore_index=True), T, PNBM_CHAIN_STATS)
    return {**diag, "rmse": first.info["rmse"], "rmse_start": first.info["rmse_start"],
            "moved": abs(first.info["rmse"] - first.info["rmse_start"])}


def dpps_mf_chains(train, test, *, epsilon, seed: int, eta: float, lam: float, rho: float, d: int, xi: float = 0.3,
                   tau: int = 200, rounds: int = 20, kappa: float = 1.0, weight_cap: float = 1.0,
                   lambda_r: float = 2.0, n_chains: int = 2, spread: float = 10.0) -> dict:
    """:func:`dpps_pnbm_chains` for DPPS-MF: the release of :func:`dpps_mf_release` at these settings (the same
    bytes: the test set only adds the trace) beside ``n_chains − 1`` independent chains on the same preprocessed data,
    chain k with initial factors N(0, (0.1 · spread^k)²) and its own noise, without the range loop (their final
    states are never released). ``rmse_start``: the released chain's start (:func:`~dpmf_lib.privacy.
    posterior_sampling.chain_start`) through the same local ridge fit as the release; split-R̂ / ESS over the
    chains' second halves (rounds after ``rounds // 2``) of :data:`MF_CHAIN_STATS`."""
    from dataclasses import replace

    from ..privacy import posterior_sampling as ps
    from ..privacy.chains import diagnostic_chain_seed

    n, spread = _check_chains(n_chains, spread)
    pre, eps, _, kw = _dpps_mf_setup(train, epsilon=epsilon, seed=seed, eta=eta, lam=lam, rho=rho, d=d, xi=xi,
                                     tau=tau, rounds=rounds, kappa=kappa, weight_cap=weight_cap, lambda_r=lambda_r)
    rel = ps.sample_private(pre, eps, seed=int(seed), test=test, **kw)
    traces = [rel.trace[rel.trace.chain == rel.released_chain].assign(chain=0)]
    for k in range(1, n):
        extra = ps.sample_private(pre, eps, seed=diagnostic_chain_seed(seed, k), test=test, check_range=False,
                                  init_scale=_MF_START_SD * spread ** k, **kw)
        traces.append(extra.trace[extra.trace.chain == 0].assign(chain=k))
    diag = _second_half(pd.concat(traces, ignore_index=True), rounds, MF_CHAIN_STATS)
    m0 = ps.chain_start(pre, int(d), int(seed), rel.released_chain)
    rmse = float(rel.local_model(train).rmse(test, clip=True))
    rmse_start = float(replace(rel, V=m0.V, bi=m0.bi, b0=m0.b0).local_model(train).rmse(test, clip=True))
    return {**diag, "rmse": rmse, "rmse_start": rmse_start, "moved": abs(rmse - rmse_start)}


def selected_chains(agg: pd.DataFrame, dataset: str, method: str, epsilon, fixed: dict, fold: int, seed: int,
                    n_chains: int = 2, spread: float = 10.0) -> dict | None:
    """A row (method ``"chains"``, ``traced`` = ``method``) with the chain diagnostics of the configuration ``agg``
    selected for (``method``, ε) on ``dataset``, on ``fold`` at ``seed`` (:func:`dpps_pnbm_chains`,
    :func:`dpps_mf_chains`; ``fixed``: the method's fixed settings). None when nothing is selected there."""
    label = _dataset(dataset).source.label
    row = _selected(agg, label, method, epsilon)
    if row is None:
        return None
    cfg = {k: float(v) for k, v in (kv.split("=") for kv in str(row["config"]).split(", "))}
    train, test = fold_data(dataset, int(fold))
    s = int(seed) * 1000 + int(fold)  # evaluate's seed: the released chain is the grid's
    eps = None if pd.isna(row["epsilon"]) else float(row["epsilon"])
    t0 = time.perf_counter()
    if method in ("dpps-pnbm", "sgld-pnbm"):
        d = dpps_pnbm_chains(train, test, {"epsilon": eps if method == "dpps-pnbm" else None,
                                           **{k: cfg[k] for k in _CHAIN_KEYS}}, fixed, s, n_chains, spread)
    elif method == "dpps-mf":
        d = dpps_mf_chains(train, test, epsilon=eps, seed=s, **{**cfg, "d": int(cfg["d"])}, **fixed,
                           n_chains=n_chains, spread=spread)
    else:
        raise ParameterError(f"no chain diagnostics for method '{method}' (only dpps-pnbm, sgld-pnbm, dpps-mf)")
    return {"dataset": label, "method": "chains", "traced": method, "epsilon": row["epsilon"],
            "config": row["config"], "fold": int(fold), "selected": False, "rmse": d["rmse"],
            "rmse_start": d["rmse_start"], "chain_moved": d["moved"], "chain_rhat": d["rhat"], "chain_ess": d["ess"],
            "n_chains": d["n_chains"], "n_draws": d["n_draws"], "chain_spread": float(spread),
            **{k: v for k, v in d.items() if k.startswith(("rhat_", "ess_"))},
            "seconds": time.perf_counter() - t0}


def chain_guards(agg: pd.DataFrame, dataset: str, method: str, epsilon) -> dict:
    """The ``chain_moved``, ``chain_split_rhat`` and ``chain_ess`` guards of (method, ε) from its ``"chains"`` row
    (:func:`selected_chains`). An R̂ or ESS that could not be computed (too few draws, a non-finite draw) leaves
    the chain unvouched for: R̂ inf, ESS 0 (they fail); no row: NaN (not measured)."""
    rows = agg[(agg.dataset == dataset) & (agg.method == "chains")]
    rows = rows[rows["traced"] == method] if "traced" in rows else rows.iloc[:0]
    rows = rows[rows.epsilon.isna()] if epsilon is None else rows[np.isclose(rows.epsilon, float(epsilon))]
    if not len(rows):
        return {"chain_moved": float("nan"), "chain_split_rhat": float("nan"), "chain_ess": float("nan")}
    r = rows.iloc[0]
    rh, es = float(r["chain_rhat"]), float(r["chain_ess"])
    return {"chain_moved": float(r["chain_moved"]), "chain_split_rhat": rh if math.isfinite(rh) else float("inf"),
            "chain_ess": es if math.isfinite(es) else 0.0}


def item_means_rmse(dataset: str, folds_: list) -> float:
    """Test RMSE of the item-mean predictor (:func:`dpmf_lib.baselines.item_means_rmse`) averaged over ``folds_``: the
    trivial baseline a trained model has to beat."""
    return float(np.mean([baselines.item_means_rmse(*fold_data(dataset, int(f))) for f in folds_]))


def gain_over_item_means(agg: pd.DataFrame, dataset: str, folds_: list, models) -> float:
    """The ``gain_over_bias_only`` guard: the smallest gain in test RMSE (mean over ``folds_``) of the selected
    configurations of ``models`` — (method, ε) pairs, or ``("knn", None)`` for the better of PCC and COS, the side
    the kNN claims read — over the item-means predictor on the same folds
    (:func:`dpmf_lib.baselines.smallest_gain`)."""
    rmses = [min(best_rmse(agg, dataset, "pcc"), best_rmse(agg, dataset, "cos")) if m == "knn"
             else best_rmse(agg, dataset, m, e) for m, e in models]
    return baselines.smallest_gain(item_means_rmse(dataset, folds_), rmses)


def selection_interior(agg: pd.DataFrame, dataset: str, method: str, epsilon, grid: dict,
                       domain_min: dict | None = None) -> float:
    """The ``selection_off_grid_edge`` guard for one selected configuration: 1.0 when every hyper-parameter chosen on
    ``grid`` (the method's grid: name → values) lies strictly inside it (:func:`grid_interior`, with ``domain_min``
    per name), else 0.0; NaN when nothing is selected for (method, ε). A name whose grid has one value was not
    chosen (nothing was searched) and is left out."""
    cfg = selected_config(agg, dataset, method, epsilon)
    if not cfg:
        return float("nan")
    dm = domain_min or {}
    searched = [k for k, vals in grid.items() if len({float(v) for v in vals}) > 1]
    return float(all(grid_interior(cfg[k], grid[k], domain_min=dm.get(k)) == 1.0 for k in searched))
