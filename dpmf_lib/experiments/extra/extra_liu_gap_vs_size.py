"""Beyond the papers: is the privacy cost of Liu, Wang & Smola (2015)'s Figure 7 on ML-100K a matter of size?

``liu_fig7`` measures, on real ML-100K (943 users), the test RMSE of Algorithm 1's release at user-level ε = τ = 100
(rating-level ε = 1 at ρ = 1) minus the test RMSE at ε = 4B (the non-private posterior), both drawn by exact block
Gibbs: a gap of ≈ 0.14 where the paper reports almost no loss on Netflix (480,189 users). The paper's own argument
is one of size: at ε = τ the likelihood is tempered by ε/(4B) = 1/100, so an item's factor is drawn as if it had
1/100 of its (trimmed, weighted) ratings, and only items rated by many users keep enough of them. This row measures
the same two points at several sizes of one dataset:

- real ML-100K, subsampled by users (:func:`user_subsample`): ``round(f · 943)`` users drawn uniformly without
  replacement for each fraction f of ``user_fractions["ml-100k"]``, nested (at one seed the users of a smaller
  fraction are among those of a larger one), each kept with all their ratings; items no kept user rated are dropped.
  Then, as in ``liu_fig7``, a seeded random split of the ratings (``test_fraction``) into training and test ratings.
  At f = 1 the data and split are ``liu_fig7``'s, so that point is ``liu_fig7.replicate_run``'s at the same settings;
- the Netflix-shaped synthetic stand-in (labelled, never judged) at scale f of the published shape: f · 480,189 users
  at evenly spaced ranks of the activity curve, all 17,770 items, f · 10⁸ ratings
  (:mod:`dpmf_lib.data.standin`) — the shape's counterpart of a user subsample; a real Netflix, if installed, is
  subsampled by users like ML-100K.

Per size and seed: the non-private SGLD run that fixes Λ_u, Λ_v, λ_b (``liu_fig7.nonprivate_sgld``), Algorithm 1's
preprocessing (τ, κ, ρ = ``rho``, Section 6.6's weights), and :func:`dpmf_lib.experiments.liu.liu_fig7.private_point`
with the exact-Gibbs sampler at ε = τ and ε = 4B — the points, chains and range loop of ``liu_fig7``'s rating-DP
claim. Beside each point: n_users, n_items, the training ratings after trimming, the median ratings per item and per
user after trimming (what the likelihood sees), B and max_i w_i, the item-means predictor's test RMSE on the same
split, and both chains' split-R̂ and ESS.

**Seeds.** Every size runs at ``n_seeds[dataset]`` consecutive seeds from ``seed`` (data subsample or stand-in, split,
trimming, Λ and chains all follow the seed); the figure shows each point's mean and 95 % Student-t interval over them.
The claims' further seeds are these same runs (:class:`SeedsInRun`): ``run`` measures every seed itself, so the
notebook does not re-run it.

**The claims (ours, beyond the paper).** Per series and seed, the least-squares slope of the gap against
log10(n_users) over the series' sizes (RMSE per tenfold users): ``gap-vs-size-falls-with-users-ml-100k`` on real
ML-100K (judged at ``paper``), ``gap-vs-size-falls-with-users-netflix`` on the stand-in (shown, never judged). Guards
of their kinds, over every point of the series at that seed: the largest split-R̂ and the smallest ESS of the two
chains compared, and the smallest test-RMSE gain of the ε = 4B reference over item means.

**What ε holds.** As in ``liu_fig7``: Λ is fit to the same ratings, so no ε holds as run; ε = τ is the *stated*
user-level ε (rating-level ε·max_i w_i/τ, 1 at ρ = 1).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pandas as pd

from ... import baselines
from ...claims import Measurement, merge_replicates
from ...data import load_ratings
from ...data.datasets import standin_permitted
from ...data.splits import random_split
from ...errors import ParameterError
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, legend_below, series, standin_title
from ...privacy import posterior_sampling as ps
from ..liu import liu_fig7

#: the claim each series measures (dataset id → claim id); the stand-in's is shown, never judged
CLAIMS = {"ml-100k": "gap-vs-size-falls-with-users-ml-100k", "netflix": "gap-vs-size-falls-with-users-netflix"}
ALMOST_NO_LOSS = 0.02  # the paper's "almost no loss", as liu_fig7's claims read it
SUBSAMPLE_STREAM = 0x5A1E  # the user subsample's own random stream beside the seed (apart from the split's)
ROLE = {"ml-100k": "paper", "netflix": "ours"}


def user_subsample(r, fraction: float, seed: int):
    """``round(fraction · n_users)`` whole users of ``r`` (at least 1), each with all their ratings.

    The users are the first ones of a permutation seeded by ``[seed, SUBSAMPLE_STREAM]``, so at one seed a smaller
    fraction keeps a subset of a larger one's users. User ids are compacted in their original order; items that no
    kept user rated are dropped and the rest renumbered in order (``user_ids``/``item_ids`` map back to ``r``'s ids).
    ``fraction`` 1 returns ``r`` itself."""
    f = float(fraction)
    if not (np.isfinite(f) and 0 < f <= 1):
        raise ParameterError(f"user_fractions: a fraction of users must lie in (0, 1], got {fraction!r}")
    if f == 1.0:
        return r
    k = max(1, int(round(f * r.n_users)))
    perm = np.random.default_rng([int(seed), SUBSAMPLE_STREAM]).permutation(r.n_users)
    chosen = np.sort(perm[:k])
    keep = np.zeros(r.n_users, dtype=bool)
    keep[chosen] = True
    sub = r.subset(np.flatnonzero(keep[r.users]))
    new_user = np.full(r.n_users, -1, dtype=np.int64)
    new_user[chosen] = np.arange(k)
    rated = np.zeros(r.n_items, dtype=bool)
    rated[sub.items] = True
    kept_items = np.flatnonzero(rated)
    new_item = np.full(r.n_items, -1, dtype=np.int64)
    new_item[kept_items] = np.arange(len(kept_items))
    raw_u = chosen if r.user_ids is None else np.asarray(r.user_ids)[chosen]
    raw_i = kept_items if r.item_ids is None else np.asarray(r.item_ids)[kept_items]
    note = (f"{k:,} of {r.n_users:,} users ({f:g}, seed {seed}) with all their {sub.n_ratings:,} ratings; "
            f"{len(kept_items):,} of {r.n_items:,} items rated by them")
    return replace(sub, users=new_user[sub.users].astype(np.int32), items=new_item[sub.items].astype(np.int32),
                   n_users=k, n_items=int(len(kept_items)), user_ids=raw_u, item_ids=raw_i,
                   source=replace(sub.source, note=(sub.source.note + "; " + note).strip("; ")))


def load_size(ds: str, fraction: float, seed: int):
    """(the dataset as loaded, the data at this size): real data subsampled by users (:func:`user_subsample`), a
    stand-in generated at scale ``fraction`` (its users at evenly spaced activity ranks, all items)."""
    r = load_ratings(ds, allow_standin=standin_permitted(ds), seed=seed, standin_scale=float(fraction))
    return r, (user_subsample(r, fraction, seed) if r.source.real else r)


def fig7_params(params: dict, seed: int, ds: str) -> dict:
    """The parameters ``liu_fig7``'s functions read, at ``seed`` on dataset ``ds``: ρ as a one-element list, the Gibbs
    section with its chain lengths for ``ds`` (a number, or a mapping dataset → number), and the private section's
    range loop (the SGLD-only chain lengths are not read on the Gibbs path)."""
    gp = params["gibbs"]
    gibbs = {**gp, "sweeps": int(liu_fig7.per_dataset(gp["sweeps"], ds, "gibbs.sweeps")),
             "burn_in": int(liu_fig7.per_dataset(gp["burn_in"], ds, "gibbs.burn_in")),
             "datasets": [ds], "private_series": True}
    if not 0 <= gibbs["burn_in"] < gibbs["sweeps"]:
        raise ParameterError(f"gibbs: burn_in must lie in [0, sweeps) for {ds!r}, got burn_in {gibbs['burn_in']} "
                             f"of {gibbs['sweeps']} sweeps")
    return {**params, "seed": int(seed), "rho": [float(params["rho"])], "gibbs": gibbs}


def size_point(ds: str, fraction: float, seed: int, params: dict) -> dict:
    """One size of one series at one seed: the CSV row (see the module docstring). A function of its arguments alone
    (a sweep task)."""
    t0 = time.perf_counter()
    p = fig7_params(params, seed, ds)
    full, r = load_size(ds, fraction, seed)
    tf = float(p["test_fraction"])
    if not 0 < tf < 1:
        raise ParameterError(f"test_fraction must lie in (0, 1), got {tf!r}")
    train, test = random_split(r, (1.0 - tf, tf), seed=int(seed))
    tau = liu_fig7.tau_for(ds, p)
    priors = ps.fixed_priors(liu_fig7.nonprivate_sgld(train, test, p))
    pre = ps.preprocess(train, tau=tau, kappa=p["kappa"], rho=float(p["rho"][0]), seed=int(seed),
                        weights_from=p["weights_from"])
    pts = {}
    for name, eps in (("private", float(tau)), ("reference", 4.0 * pre.B)):
        row, _, _ = liu_fig7.private_point(pre, eps, priors, train, test, p, ds=ds, sampler="gibbs")
        pts[name] = row
    a, b = pts["private"], pts["reference"]
    im = baselines.item_means_rmse(train, test)
    per_item = np.bincount(pre.train.items, minlength=pre.train.n_items)
    per_user = np.bincount(pre.train.users, minlength=pre.train.n_users)
    return {"dataset": r.source.label, "real": bool(r.source.real), "fraction": float(fraction), "seed": int(seed),
            "n_users": int(r.n_users), "n_items": int(r.n_items), "n_ratings": int(r.n_ratings),
            "n_train": int(train.n_ratings), "n_test": int(test.n_ratings),
            "n_train_trimmed": int(pre.train.n_ratings),
            "ratings_per_item_median": float(np.median(per_item)),
            "ratings_per_rated_item_median": float(np.median(per_item[per_item > 0])) if (per_item > 0).any() else 0.0,
            "ratings_per_item_mean": float(per_item.mean()),
            "items_without_training_ratings": int((per_item == 0).sum()),
            "ratings_per_user_median": float(np.median(per_user[per_user > 0])) if (per_user > 0).any() else 0.0,
            "tau": int(tau), "kappa": float(p["kappa"]), "rho": float(p["rho"][0]), "B": float(pre.B),
            "max_w": float(np.max(pre.w[pre.kept > 0])) if (pre.kept > 0).any() else float("nan"),
            "epsilon_private": float(tau), "epsilon_reference": 4.0 * pre.B,
            "epsilon_rating_stated": a["epsilon_rating_stated"],
            "test_rmse_private": a["test_rmse"], "test_rmse_reference": b["test_rmse"],
            "gap": a["test_rmse"] - b["test_rmse"], "relative_gap": (a["test_rmse"] - b["test_rmse"]) / b["test_rmse"],
            "item_means_rmse": im, "reference_gain_over_item_means": im - b["test_rmse"],
            "rhat_private": a["rhat"], "rhat_reference": b["rhat"], "ess_private": a["ess"], "ess_reference": b["ess"],
            "constraint_satisfied_private": bool(a["constraint_satisfied"]),
            "constraint_satisfied_reference": bool(b["constraint_satisfied"]),
            "n_resamples_private": a["n_resamples"], "n_resamples_reference": b["n_resamples"],
            "lam_bias": priors["lam_bias"], "Lambda_u_mean": float(np.mean(priors["Lambda_u"])),
            "Lambda_v_mean": float(np.mean(priors["Lambda_v"])),
            "source_note": r.source.note, "_source": full.source,
            "seconds": time.perf_counter() - t0}


def gap_slope(g: pd.DataFrame) -> float:
    """The least-squares slope of ``gap`` against log10(``n_users``) over the rows of ``g`` (one series at one
    seed): RMSE per tenfold users, < 0 when the gap falls as users grow. NaN with fewer than two distinct sizes."""
    x = np.log10(g["n_users"].to_numpy(np.float64))
    y = g["gap"].to_numpy(np.float64)
    if len(np.unique(x)) < 2 or not np.isfinite(y).all():
        return float("nan")
    xc = x - x.mean()
    return float(np.sum(xc * (y - y.mean())) / np.sum(xc * xc))


def slope_measurement(g: pd.DataFrame, claim: str) -> Measurement:
    """The claim's value at one seed from that seed's rows of one series (:func:`gap_slope`), with the guards of its
    kinds over every point: the largest split-R̂ and smallest ESS of the chains compared (a NaN counts as failing),
    and the smallest test-RMSE gain of the ε = 4B reference over item means."""
    rh = g[["rhat_private", "rhat_reference"]].to_numpy(np.float64)
    es = g[["ess_private", "ess_reference"]].to_numpy(np.float64)
    gain = g["reference_gain_over_item_means"].to_numpy(np.float64)
    g = g.sort_values("n_users")
    pts = "; ".join(f"{int(u)} users: {a:.4f} − {b:.4f} = {d:.4f}" for u, a, b, d in
                    zip(g.n_users, g.test_rmse_private, g.test_rmse_reference, g.gap))
    return Measurement(
        claim, gap_slope(g), g.dataset.iloc[0], bool(g.real.iloc[0]),
        note=f"slope of RMSE(eps = tau = {int(g.tau.iloc[0])}) − RMSE(eps = 4B) against log10(n_users), seed "
             f"{int(g.seed.iloc[0])}: {pts}; exact Gibbs chains, rho = {g.rho.iloc[0]:g}; no eps holds as run "
             "(Lambda fit to the same ratings)",
        guards={"chain_split_rhat": float(rh.max()) if np.isfinite(rh).all() else float("inf"),
                "chain_ess": float(es.min()) if np.isfinite(es).all() else 0.0,
                "reference_gain_over_bias_only": float(gain.min()) if np.isfinite(gain).all() else float("nan")})


def measurements(df: pd.DataFrame) -> list[dict]:
    """One measurement per series (dataset) with a claim, its values over that series' seeds
    (:func:`~dpmf_lib.claims.merge_replicates`, one list per dataset so that a series with fewer seeds gets no NaN)."""
    out = []
    for label, g in df.groupby("dataset", sort=False):
        ds = g["dataset_id"].iloc[0]
        if ds not in CLAIMS:
            continue
        seeds = sorted(g.seed.unique().tolist())
        runs = [[slope_measurement(g[g.seed == s], CLAIMS[ds]).as_dict()] for s in seeds]
        out += merge_replicates(runs, seeds)
    return out


def run(params: dict) -> pd.DataFrame:
    """One row per (dataset, fraction, seed); the claims' values over the seeds in ``attrs``."""
    from ...sweep import grid_map

    require_datasets(params)  # first: before any data is loaded or model trained
    ps.check_privacy_params(kappa=params["kappa"], rho=params["rho"])
    tasks = []
    for ds in params["datasets"]:
        liu_fig7.tau_for(ds, params)
        fractions = params["user_fractions"].get(ds)
        n_seeds = params["n_seeds"].get(ds)
        if not fractions or n_seeds is None:
            raise ParameterError(f"user_fractions and n_seeds need an entry for dataset {ds!r}")
        if int(n_seeds) < 1:
            raise ParameterError(f"n_seeds[{ds!r}] must be ≥ 1, got {n_seeds!r}")
        for f in fractions:
            if not (isinstance(f, (int, float)) and 0 < float(f) <= 1):
                raise ParameterError(f"user_fractions[{ds!r}]: each must lie in (0, 1], got {f!r}")
        fig7_params(params, params["seed"], ds)  # the chain lengths for ds, checked before anything runs
        tasks += [{"ds": ds, "fraction": float(f), "seed": int(params["seed"]) + k}
                  for f in sorted(fractions, reverse=True) for k in range(int(n_seeds))]
    # the largest sizes first (the last dataset's, the stand-in's in the params file), so that two workers end together
    tasks.sort(key=lambda t: (-params["datasets"].index(t["ds"]), -t["fraction"]))
    done = grid_map(_task, {"task": tasks}, n_jobs=params.get("n_jobs"), fixed={"params": params})
    sources = []
    for row in done:
        s = row.pop("_source")
        if s not in sources:
            sources.append(s)
    df = pd.DataFrame([{**row, "dataset_id": t["ds"]} for t, row in zip(tasks, done)])
    df = df.sort_values(["dataset_id", "fraction", "seed"], kind="stable").reset_index(drop=True)
    df = df[["dataset_id"] + [c for c in df.columns if c != "dataset_id"]]
    return attach(df, sources=sources, measurements=measurements(df))


def _task(task: dict, params: dict) -> dict:
    return size_point(task["ds"], task["fraction"], task["seed"], params)


class SeedsInRun:
    """The claims over seeds, measured by :func:`run` itself (every size at every seed): the notebook's claims cell,
    ``experiment.seeds_in_run(df).replicate(nb)``, hands them to ``nb`` instead of re-running the experiment. Refuses
    a run with fewer seeds than the claims judged at this profile need."""

    def __init__(self, df: pd.DataFrame):
        self.df = df

    def replicate(self, nb, n_seeds: int | None = None) -> pd.DataFrame:
        ms = [dict(m) for m in self.df.attrs.get("measurements", [])]
        need = nb.seeds_needed(ms) if n_seeds is None else int(n_seeds)
        judged = [m for m in ms if m["real"]]
        have = min((len(m["values"]) for m in judged), default=need)
        if have < need:
            raise ParameterError(f"{nb.name}: the claims need {need} seeds at profile {nb.profile}, the run measured "
                                 f"{have}: raise n_seeds")
        nb.measurements = ms
        nb.replicate_seeds = max((m["seeds"] for m in ms), key=len, default=[int(nb.params.get("seed", 0))])
        return nb.claims_table()


def seeds_in_run(df: pd.DataFrame) -> SeedsInRun:
    return SeedsInRun(df)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per (series, size): mean gap and its 95 % Student-t half-width over the seeds, the RMSEs, the sizes."""
    from scipy import stats

    rows = []
    for (label, f), g in df.groupby(["dataset", "fraction"], sort=False):
        n = len(g)
        hw = float(stats.t.ppf(0.975, n - 1) * g.gap.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
        rows.append({"dataset": label, "fraction": f, "n_users": int(g.n_users.median()),
                     "n_items": int(g.n_items.median()), "ratings_per_item_median": g.ratings_per_item_median.median(),
                     "ratings_per_item_mean": g.ratings_per_item_mean.mean(),
                     "seeds": n, "gap": g.gap.mean(), "gap_hw95": hw,
                     "test_rmse_private": g.test_rmse_private.mean(),
                     "test_rmse_reference": g.test_rmse_reference.mean(),
                     "item_means_rmse": g.item_means_rmse.mean(),
                     "rhat_max": float(g[["rhat_private", "rhat_reference"]].max().max()),
                     "ess_min": float(g[["ess_private", "ess_reference"]].min().min())})
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, params: dict):
    """Left: the gap against the number of users (log x), one series per dataset (mean ± 95 % over seeds, every seed
    a dot), the paper's "almost no loss" band and the sizes of ML-100K and Netflix. Right: the two test RMSEs the gap
    is made of and item means on the same splits."""
    s = summary(df)
    fig, axes = figure(ncols=2, width=5.2, height=3.9)
    ax, ax2 = axes[0]
    ax.axhspan(-ALMOST_NO_LOSS, ALMOST_NO_LOSS, color="0.85", alpha=0.6, lw=0,
               label=f"paper: 'almost no loss' (|gap| ≤ {ALMOST_NO_LOSS}), Netflix")
    ax.axhline(0.0, color="k", lw=0.6)
    for label, g in s.groupby("dataset", sort=False):
        g = g.sort_values("n_users")
        ds = df[df.dataset == label]
        role = ROLE.get(ds.dataset_id.iloc[0], "compared")
        series(ax, g.n_users, g.gap, role, f"{label} (user subsamples)" if ds.real.iloc[0] else f"{label} (scales)",
               yerr=g.gap_hw95.fillna(0.0))
        ax.plot(ds.n_users, ds.gap, ".", color="0.5", ms=3, zorder=1)
        for _, q in g.iterrows():
            ax.annotate(f"{q.ratings_per_item_mean:.0f}", (q.n_users, q.gap), textcoords="offset points",
                        xytext=(4, 5), fontsize="x-small", color="0.3")
        series(ax2, g.n_users, g.test_rmse_private, role, f"{label}: release at ε = τ")
        series(ax2, g.n_users, g.test_rmse_reference, role, f"{label}: reference at ε = 4B", mfc="white", ls=":")
        ax2.plot(g.n_users, g.item_means_rmse, "x", color=ax2.lines[-1].get_color(), ls="--", lw=0.8,
                 label=f"{label}: item means")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    for a in (ax, ax2):
        a.set_xscale("log")
        a.xaxis.set_major_locator(LogLocator(subs=(1.0, 3.0)))
        a.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        a.xaxis.set_minor_formatter(NullFormatter())
        a.axvline(943, color="k", lw=0.6, ls="--", alpha=0.5)
        a.text(943, a.get_ylim()[1], " ML-100K: 943 users", va="top", ha="left", fontsize="x-small")
        a.set_xlabel("number of users (log)")
    lo, hi = ax.get_xlim()
    ax.text(hi, ALMOST_NO_LOSS, "Netflix: 480,189 users →", ha="right", va="bottom", fontsize="x-small")
    ax.set_ylabel("test RMSE at stated ε = τ − at ε = 4B\n(stated rating-level ε = 1; no ε holds as run)")
    ax.set_title("privacy cost against size (numbers: training ratings per item after trimming, mean)",
                 fontsize="small")
    ax2.set_ylabel("test RMSE (local ridge)")
    ax2.set_title("the two points and item means", fontsize="small")
    fig.suptitle(standin_title("Liu et al. 2015, Figure 7's privacy cost at rating-level ε = 1 vs number of users "
                               "(ours)", list(dict.fromkeys(df.dataset))))
    fig.tight_layout()
    legend_below(fig, axes, ncol=2)
    return fig
