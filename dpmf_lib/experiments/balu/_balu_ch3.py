"""Shared machinery of the Balu (2016) chapter-3 notebooks (Figures 3.2–3.6): attack grid through the result cache,
summaries, claim measurements, plots, and the replicate runs of the claims.

The code that produces the cached rows (data, split, mechanisms, seeds, one (mechanism, ε) task) lives in
:mod:`dpmf_lib.experiments.balu._balu_ch3_rows` and is re-exported here; only that module and ``dpmf_lib/attacks/*.py``
are in the cache's code hash (:func:`_code_hash`), so edits of this file keep the cached rows.
Seeding: see :mod:`dpmf_lib.experiments.balu._balu_ch3_rows`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ...attacks.mechanisms import jlt_guarantee_void
from ...data.ratings import DataSource
from ...errors import ParameterError
from . import _balu_ch3_rows as _rows
from ._balu_ch3_rows import Setup, _eps_rows, _seed, attack_one_eps, eps_stream, make_mechanism, prepare

ATTACK_LABELS = {"mcmc_prior": "MCMC, prior", "mcmc_flat": "MCMC, flat prior", "single": "single decoder",
                 "single_prior": "single decoder + prior (ours)", "popularity": "popularity"}


RESULT_KEYS = ("seed", "dataset", "n_train", "n_test", "n_attacked", "L", "K", "delta", "burn_in", "n_samples",
               "min_sweeps", "prefilter_f", "prior_alpha", "map_R", "flat_prior")


def _code_hash() -> str:
    """The code part of an attack result's key: :mod:`dpmf_lib.experiments.balu._balu_ch3_rows` (the row-producing code)
    and everything it imports (attacks, data loaders, stand-ins, validation), through
    :func:`dpmf_lib.cache.code_version`. This module (summaries, claims, plots, the grid's driver) is not in it: its
    edits do not change a cached row."""
    from ...cache import code_version

    return code_version(_rows.__name__)


def _result_key(params: dict, source: DataSource) -> dict:
    """Every parameter that changes the numbers of one (mechanism, ε) task, and the data source (checksum, real or
    stand-in); with the attacks, ε and the code hash, the key of the task in the result cache."""
    key = {k: params.get(k) for k in RESULT_KEYS}
    key["flat_prior"] = params.get("flat_prior", "catalog")
    key["source"] = source.as_dict()
    return key


_NOT_IN_KEY = ("params", "setup")  # their result-relevant parts are in `key` (params) and key["source"] (setup)


def run_attack_grid(kind: str, params: dict, setup: Setup | None = None) -> pd.DataFrame:
    """Per-user results over the eps grid (long format), with the ``dataset`` column."""
    from ...sweep import grid_map

    ms = params.get("min_sweeps")
    if ms is not None and not (isinstance(ms, (int, float)) and not isinstance(ms, bool) and 0 < ms < math.inf):
        raise ParameterError(f"parameter 'min_sweeps' must be a positive number (updates per slot) or null, got {ms!r}")
    for name in ("burn_in", "n_samples", "L", "prefilter_f"):
        if not (isinstance(params[name], (int, float)) and params[name] >= (0 if name == "burn_in" else 1)):
            raise ParameterError(f"parameter '{name}' must be a number >= {0 if name == 'burn_in' else 1}, "
                                 f"got {params[name]!r}")
    setup = setup or prepare(params)
    eps_list = [float(e) for e in params["eps"]]
    results = grid_map(_task, {"eps_index": list(range(len(eps_list)))},
                       fixed={"kind": kind, "eps_list": eps_list, "params": params, "setup": setup},
                       n_jobs=params.get("n_jobs"))
    df = pd.DataFrame([r for rows in results for r in rows])
    df.insert(0, "dataset", setup.source.label)
    if kind == "blip":
        df["p_eps"] = [1.0 / (1.0 + math.exp(e / params["K"])) for e in df["eps"]]
    else:
        df["sigma"] = [4.0 / e * math.sqrt(math.log(1 / params["delta"])) for e in df["eps"]]
        # (3.10) needs eps < ln(1/delta): the thesis's grid points at or above it carry no (eps, delta) guarantee
        df[VOID_COL] = [jlt_guarantee_void(e, params["delta"]) for e in df["eps"]]
    return df


VOID_COL = "eps_ge_ln_1_over_delta"  # JLT: True where (3.10) gives no guarantee (eps >= ln(1/delta))
VOID_LABEL = "ε ≥ ln(1/δ): (3.10) gives no DP guarantee"


def _task(eps_index: int, kind: str, eps_list: list, params: dict, setup: Setup) -> list[dict]:
    """One eps of the grid, through the result cache. A subset of the attacks is served from a cached run of every
    attack (what Figures 3.2/3.3 compute) when there is one: MCMC-with-prior rows do not depend on whether the other
    attacks ran (it is the first consumer of the user's MCMC seed)."""
    from ... import cache
    from ...attacks.decoders import ATTACKS

    eps = float(eps_list[eps_index])
    want = tuple(params["attacks"])
    key, code = _result_key(params, setup.source), _code_hash()
    if set(want) < set(ATTACKS) and cache.in_cache(_eps_rows, kind, eps, ATTACKS, key, code, params, setup,
                                                  ignore=_NOT_IN_KEY):
        rows = cache.cached_call(_eps_rows, kind, eps, ATTACKS, key, code, params, setup, ignore=_NOT_IN_KEY)
        return [r for r in rows if r["attack"] in want]
    return cache.cached_call(_eps_rows, kind, eps, want, key, code, params, setup, ignore=_NOT_IN_KEY)


RHAT_MAX = 1.05  # the usual split-R-hat threshold
RHAT_GUARD = "chain_rhat_over_share"  # params/claims.yaml: at most 0.10, pooled over the ε values a claim reads
# the claims that read several ε: also at most 0.25 in the worst single ε cell. Why 0.25 (chosen before the paper
# re-run): it catches a cell the pool hides (ε = 59: 0.69) without failing on the replicate seeds' small samples
# (12 JLT / 24 BLIP users): a cell at 5.7 % (the worst seed-0 paper cell) exceeds 0.25 with probability 0.004 at 12
# users, 0.0003 at 24; over the 8-9 cells and the 4 replicate seeds (the guard must hold in every seed), at the
# seed-0 paper rates of each cell, <= 0.017 (JLT) / 0.0005 (BLIP); were every cell at 5.7 %: 0.11 / 0.009
RHAT_CELL_GUARD = "chain_rhat_worst_eps_share"


def rhat_over_share(x: pd.Series) -> float:
    """Share of the users' chains whose split-R̂ exceeds :data:`RHAT_MAX` or is missing/infinite (NaN, not 0, when no
    user has one: an attack without chains)."""
    if not x.notna().any():
        return float("nan")
    return float(np.mean(~(x.to_numpy(dtype=float) <= RHAT_MAX)))


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Mean / 10 % / 90 % quantiles of the cosine, mAP@R, mean c_hat, and the 90th percentile over users of the MCMC's
    split-R̂ (the convergence guard of the chapter-3 claims), the median updates per slot, and where the likelihood is
    flat (BLIP at ε = 0) the mean error and Spearman of the chains' marginals against the exact ones (the second
    guard), per (mechanism, eps, attack)."""
    for col in ("sweeps", "exact_err", "exact_spearman", "point_mass_check"):  # rows cached before these existed
        if col not in df:
            df = df.assign(**{col: np.nan})
    g = df.groupby(["dataset", "mechanism", "eps", "attack"], sort=False)
    out = g.agg(cos_mean=("cos", "mean"), cos_q10=("cos", lambda x: float(np.quantile(x, 0.1))),
                cos_q90=("cos", lambda x: float(np.quantile(x, 0.9))), map10=("ap10", "mean"),
                c_hat_mean=("c_hat", "mean"), c_true_mean=("c_true", "mean"), n_users=("user", "nunique"),
                split_rhat_q90=("split_rhat", lambda x: float(np.nanquantile(x, 0.9, method="higher"))
                                if x.notna().any() else np.nan),  # "higher": a real R-hat, inf stays inf
                rhat_over_share=("split_rhat", rhat_over_share),
                # split-R̂ is undefined (NaN) for a chain that sat in one state through both halves; a check chain from
                # a disjoint start then tells a point mass (both in the same state: R̂ = 1) from a stuck chain (inf).
                # NaN left: rows from before the check (the guard counts them as failed)
                rhat_undefined=("split_rhat", lambda x: int(x.isna().sum())),
                constant_chains=("point_mass_check", lambda x: int(x.notna().sum())),
                point_mass_confirmed=("point_mass_check", lambda x: int((x == 1.0).sum())),
                sweeps_median=("sweeps", "median"),
                # a user without an exact-marginal error makes the mean NaN, which fails the guard
                exact_err_mean=("exact_err", lambda x: float(x.mean(skipna=False))),
                exact_spearman_mean=("exact_spearman", "mean"),
                seconds_per_user=("seconds_all_attacks", "mean")).reset_index()
    if VOID_COL in df:
        flag = df.groupby(["dataset", "mechanism", "eps", "attack"], sort=False)[VOID_COL].first().reset_index()
        out = out.merge(flag, on=["dataset", "mechanism", "eps", "attack"], how="left")
    return out


def subsample_note(params: dict, setup_n_test: int = 343) -> str:
    n = params.get("n_attacked")
    parts = []
    if n is not None and n < setup_n_test:
        parts.append(f"{n} of {setup_n_test} test users attacked")
    if params["burn_in"] != 1000 or params["n_samples"] != 19000:
        parts.append(f"MCMC T={params['burn_in']}, M={params['n_samples']} (paper: 1,000 / 19,000)")
    if params.get("min_sweeps"):
        parts.append(f"chains lengthened to >= {params['min_sweeps']:g} updates per slot (ours)")
    return ("profile '" + params.get("profile", "?") + "': " + "; ".join(parts)) if parts else ""


#: the shared figure roles (dpmf_lib.plotting.ROLES): the thesis' joint decoder and its flat-prior variant, the
#: single decoder it compares against, our single decoder given the same prior, and the prior-only popularity attack
ATTACK_ROLES = {"mcmc_prior": "paper", "mcmc_flat": "paper-alt", "single": "compared", "single_prior": "ours",
                "popularity": "ours-alt"}


def plot_metric(summary: pd.DataFrame, params: dict, metric: str, ylabel: str, title: str):
    """Figures 3.2–3.5: metric vs ε for each attack on ML-100K (the thesis' Digg panel is not drawn: a footnote says
    why), one legend below the panel."""
    from ...plotting import figure, legend_below, series, standin_title

    fig, axes = figure(1, 1, width=6.4, height=4.2)
    ax = axes[0, 0]
    eps_sorted = sorted(summary["eps"].unique(), reverse=True)
    xpos = {e: i for i, e in enumerate(eps_sorted)}  # the thesis plots the eps grid as equally spaced categories
    for a in [a for a in ATTACK_LABELS if a in set(summary["attack"])]:
        s = summary[summary["attack"] == a].sort_values("eps", ascending=False)
        x = [xpos[e] for e in s["eps"]]
        line, = series(ax, x, s[f"{metric}_mean" if metric == "cos" else metric], ATTACK_ROLES[a], ATTACK_LABELS[a],
                       zorder=3)
        if metric == "cos":
            # 10 % and 90 % quantiles as thin dotted lines: four overlapping filled bands hid the means
            for q in ("cos_q10", "cos_q90"):
                ax.plot(x, s[q], color=line.get_color(), ls=":", lw=0.9, alpha=0.8, zorder=2)
    ax.set_xticks(range(len(eps_sorted)))
    ax.set_xticklabels([f"{e:g}" for e in eps_sorted])
    ax.set_xlabel("ε")
    if VOID_COL in summary:  # JLT: shade the grid points where (3.10) does not hold
        void = sorted({xpos[e] for e, v in zip(summary["eps"], summary[VOID_COL]) if bool(v)})
        for k, x in enumerate(void):
            ax.axvspan(x - 0.5, x + 0.5, color="0.85", zorder=0, label=VOID_LABEL if k == 0 else None)
    ax.set_ylabel(ylabel)
    ax.set_ylim(0, 1.02)
    labels = list(summary["dataset"].unique())
    note = subsample_note(params)
    ax.set_title(standin_title(title + (f"\n{note}" if note else ""), labels), fontsize="small")
    fig.tight_layout()
    legend_below(fig, axes, ncol=3)
    fig.text(0.5, -0.16, "The thesis' Digg panel is not drawn: the 2016 Digg crawl cannot be obtained (Table 3.1).",
             ha="center", va="top", fontsize="x-small", color="#444444")
    return fig


def _mean(summary: pd.DataFrame, eps: float, attack: str, col: str) -> float | None:
    s = summary[(summary["eps"] == eps) & (summary["attack"] == attack)]
    return float(s[col].iloc[0]) if len(s) else None


def attack_measurements(summary: pd.DataFrame, kind: str, source: DataSource, params: dict, *, metric: str) -> list:
    """Claim measurements of Section 3.5 that this summary supports (see params/claims.yaml, balu ch3 section)."""
    from ...claims import Measurement

    note = subsample_note(params) or "paper settings"
    out = []

    k = params.get("replicate_n_attacked")
    if k:  # the merged claim keeps this (the first seed's) note: say what the further seeds did
        note += f"; the claim's further seeds attack a seeded subsample of {k} users each (replicate_n_attacked)"

    def add(claim, value, extra="", rhat=None, exact_err=None, cells=None, rhat_cell=None):
        if value is not None and np.isfinite(value):
            guards = {} if rhat is None else {RHAT_GUARD: rhat}
            if rhat_cell is not None:
                guards[RHAT_CELL_GUARD] = rhat_cell
            if exact_err is not None:
                guards["exact_marginal_err"] = exact_err
            out.append(Measurement(claim=claim, value=float(value), dataset=source.label, real=source.real,
                                   note=(note + ("; " + extra if extra else "")), guards=guards or None,
                                   cells=cells))

    def rhat(attacks_, eps=None, worst_cell=False):
        """The convergence guard: for each MCMC attack among ``attacks_``, the share of its chains (attacked users,
        pooled over the ε values the claim reads: ``eps``, or all) whose split-R̂ exceeds :data:`RHAT_MAX` or is
        missing; the worst attack's share. Unlike an order statistic ("the 90th percentile"), whose rank moves with
        the number of users (the maximum of 6 users, the 35th largest of 343), its meaning does not depend on how many
        users a seed attacks — the claims' further seeds attack a subsample.

        ``worst_cell``: the worst single (attack, ε) cell's share instead (:data:`RHAT_CELL_GUARD`), so that no ε
        cell hides behind the pool (BLIP at ε = 59 before the point-mass check: 237 of 343 constant chains, while the
        9 cells pooled gave 0.080)."""
        if "rhat_over_share" not in summary:
            return float("nan")
        s = summary[summary["attack"].isin([a for a in attacks_ if a.startswith("mcmc")])]
        if eps is not None:
            s = s[s["eps"] == eps]
        if not len(s) or s["rhat_over_share"].isna().any():
            return float("nan")
        if worst_cell:
            return float(s["rhat_over_share"].max())
        pooled = s.assign(bad=s["rhat_over_share"] * s["n_users"]).groupby("attack")[["bad", "n_users"]].sum()
        return float((pooled["bad"] / pooled["n_users"]).max())

    eps_all = sorted(summary["eps"].unique())
    attacks = set(summary["attack"])
    if metric == "cos":
        # the thesis's comparison, then the two fair ones (ours): the same prior on both sides
        for joint, single, claim in (("mcmc_prior", "single", f"balu-3.5-{kind}-joint-beats-single"),
                                     ("mcmc_prior", "single_prior", f"balu-3.5-{kind}-joint-beats-single-prior"),
                                     ("mcmc_flat", "single", f"balu-3.5-{kind}-flat-joint-beats-single")):
            if {joint, single} <= attacks:
                means = [(_mean(summary, e, joint, "cos_mean"), _mean(summary, e, single, "cos_mean")) for e in eps_all]
                diffs = [float("nan") if a is None or b is None else a - b for a, b in means]
                add(claim, float(np.mean([d > 0 for d in diffs])),  # a missing mean (NaN) is no win
                    f"share of the {len(eps_all)} eps values where {ATTACK_LABELS[joint]} mean cosine > "
                    f"{ATTACK_LABELS[single]}'s" + _constant_chains_note(summary, joint), rhat=rhat([joint]),
                    rhat_cell=rhat([joint], worst_cell=True),
                    cells=tuple(diffs))  # the verdict reads the per-ε differences over seeds (dpmf_lib.verdicts)
        if kind == "blip" and 8.0 in eps_all:
            sg, pop, jt = (_mean(summary, 8.0, a, "cos_mean") for a in ("single", "popularity", "mcmc_prior"))
            if sg is not None and pop is not None:
                add("balu-3.5-blip-eps8-single-vs-popularity", sg - pop, f"single {sg:.3f}, popularity {pop:.3f}")
            add("balu-3.5-blip-eps8-joint-half", jt, rhat=rhat(["mcmc_prior"], 8.0))
        if kind == "blip" and 0.0 in eps_all:
            _add_eps0(add, summary, "cos_mean", "balu-3.5-blip-eps0-max-cos", rhat)
    if metric == "map10" and kind == "blip" and 0.0 in eps_all:
        _add_eps0(add, summary, "map10", "balu-3.5-blip-eps0-map10", rhat)
    return out


def _constant_chains_note(summary: pd.DataFrame, attack: str) -> str:
    """Where an attack's chains never left one state (e.g. JLT at ε = 600, where the noise is negligible and the
    posterior is nearly a point), say how many, and how many a check chain from a disjoint start confirmed as a point
    mass (same state: R̂ = 1); the others are judged by their four-half R̂ (a check chain in another state: ∞). Rows
    without the check (split-R̂ undefined) count as not converged: a chain that does not move cannot show it mixed."""
    parts = []
    if "constant_chains" in summary:
        s = summary[(summary["attack"] == attack) & (summary["constant_chains"] > 0)]
        if len(s):
            cells = ", ".join(f"ε = {e:g}: {int(k)} of {int(n)} ({int(c)} confirmed)" for e, k, n, c in
                              zip(s["eps"], s["constant_chains"], s["n_users"], s["point_mass_confirmed"]))
            parts.append("chains constant through both halves, checked by a second chain from a disjoint start "
                         f"(confirmed: both in the same state, R̂ = 1; the others by their four-half R̂): {cells}")
    if "rhat_undefined" in summary:
        s = summary[(summary["attack"] == attack) & (summary["rhat_undefined"] > 0)]
        if len(s):
            cells = ", ".join(f"ε = {e:g}: {int(k)} of {int(n)}" for e, k, n in
                              zip(s["eps"], s["rhat_undefined"], s["n_users"]))
            parts.append(f"chains constant without a check (split-R̂ undefined, counted as not converged): {cells}")
    return "".join("; " + p for p in parts)


def _add_eps0(add, summary, col, claim, rhat):
    """Best value at eps = 0 over the attacks the thesis's figures plot (MCMC prior/flat, single). Guards: split-R̂ and
    the worst mean error of the MCMC attacks' marginals against the exact ε = 0 marginals (``exact_marginal_err``)."""
    at0 = summary[summary["eps"] == 0.0].set_index("attack")
    vals = at0[col]
    plotted = vals[[a for a in ("mcmc_prior", "mcmc_flat", "single") if a in vals.index]]
    if len(plotted):
        pop = f"; popularity {vals['popularity']:.3f}" if "popularity" in vals.index else ""
        mc = [a for a in plotted.index if a.startswith("mcmc")]
        err = at0.loc[mc, "exact_err_mean"] if "exact_err_mean" in at0 else pd.Series(dtype=float)
        add(claim, float(plotted.max()), f"best plotted attack: {plotted.idxmax()}{pop}",
            rhat=rhat(list(plotted.index), 0.0), exact_err=_worst_or_nan(err))


def _worst_or_nan(values: pd.Series) -> float:
    """The worst (largest) of a guard's values, NaN (which fails the guard) when any is missing or there is none: a
    guard must not pass on the attacks that happen to have a value (pandas' ``max`` skips NaN)."""
    if len(values) == 0 or values.isna().any():
        return float("nan")
    return float(values.max())


def replicate_params(params: dict) -> dict:
    """The parameters of a replicate run of the claims (``nb.replicate``'s seeds ``seed + 1 …``): ``params`` with
    ``n_attacked`` replaced by ``replicate_n_attacked`` (null or absent: unchanged).

    Why: at `paper` one seed of Figure 3.2 attacks all 343 test users (~35 min on 2 cores), and so does Figure 3.3
    (~13 min); five seeds would take hours. The figure's seed keeps its full setting; the further seeds
    attack a seeded subsample ([seed, 4], see :mod:`._balu_ch3_rows`) of the test users. Only ``n_attacked`` changes,
    so a replicate task's cache key is the ordinary key of that setting (``replicate_n_attacked`` itself is not in
    :data:`RESULT_KEYS`): the replicate runs of Figure 3.4 hit the cells those of 3.2 computed (and 3.5 those of 3.3),
    and the seed-0 key is untouched.

    What it does to the claims: the interval over seeds mixes the figure's seed (all its users) with smaller-sample
    seeds, whose values spread more, so the interval is wider than five full seeds would give. Each
    seed's value is still an unbiased estimate of the quantity over the test population for the claims that are
    means over users (the mean cosine at ε = 8, the single − popularity difference), so their mean over seeds is
    unbiased too. The share-of-ε claims are judged from the per-ε differences of those means (``Measurement.cells``,
    one t-interval per ε over the seeds: :mod:`dpmf_lib.verdicts`), which are unbiased as well; only each seed's own
    share (the stored ``values``) and the best attack at ε = 0 are nonlinear in them, where the smaller samples add
    noise that can pull a share toward 1/2 or a maximum up a little.
    """
    n = params.get("replicate_n_attacked")
    if n is None:
        return params
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"parameter 'replicate_n_attacked' must be an integer >= 1 (or null: the same as "
                             f"n_attacked), got {n!r}")
    full = params.get("n_attacked")
    if full is not None and n > full:
        raise ParameterError(f"parameter 'replicate_n_attacked' ({n}) must not exceed n_attacked ({full}): the "
                             f"replicate seeds attack a subsample of what the figure attacks; use null for the same")
    return {**params, "n_attacked": int(n)}


def attack_figure_run(kind: str, metric: str, params: dict) -> pd.DataFrame:
    """run() of Figures 3.2–3.5: per-user rows; the summary is :func:`summarize`; measurements attached."""
    from ...outputs import attach

    setup = prepare(params)
    df = run_attack_grid(kind, params, setup)
    summary = summarize(df)
    return attach(df, sources=[setup.source],
                  measurements=attack_measurements(summary, kind, setup.source, params, metric=metric))
