"""Liu, Wang & Smola (2015), Figure 4: size of the Gaussian lookup table vs test RMSE (fast SGLD, d = 16, Netflix).

The paper: "already once we have more than 10,000 numbers, we no longer need a Gaussian random number generator and
the results obtained are essentially indistinguishable". We run fast SGLD (lazy noise, segments of d + 1 numbers read
from random offsets) for each table size in ``table_sizes`` and once with fresh normal draws (``size = 0`` row, the
reference), same seed and settings otherwise (those of Figure 2), and report the final test RMSE of the posterior-mean
prediction and of the last sample. ``repeats`` seeds per size give a spread (seeds ``seed·1000 + k``, so the seeds of
two runs at different ``seed`` never overlap); ``dataset_repeats`` sets it per dataset (at ``paper``: 10 on ML-100K,
where a run costs ≈ 0.5 s, 3 on the Netflix stand-in).

**Statistic** (:func:`size_differences`). For each ζ and each table size ≥ 10,000, one measurement (``setting``
``zeta=…, size=…``): the mean over the repeats of the paired difference test RMSE(table) − test RMSE(fresh draws)
(a pair shares its seed, so init and data order cancel), signed. Its 95 % interval over the seeds is then an unbiased
interval for that size's expected difference, and the claim is reproduced only when every size's interval lies
within ±0.005 (an intersection-union equivalence test: no multiplicity correction needed for "reproduced"). The
earlier statistic, the largest |difference of 3-run means| over the sizes, was biased upward (a max of absolute
values of noise) with noise (≈ 0.004) about the size of the tolerance: inconclusive by construction.

**Two temperatures** (``zetas``): the paper's ζ = 0.07 (Section 6.3, Netflix) and ζ = 1 (the untempered posterior).
At ζ = 0.07 the injected noise is √0.07 ≈ 0.26 of its ζ = 1 size, so the RMSE barely depends on the noise at all and
"indistinguishable" has little power (the ``power_smallest_table`` guard says whether even the 10-number table
differs); at ζ = 1 a 10-number table visibly breaks the sampler while larger tables match fresh draws — the
distinction the paper draws. The claim is measured at both.

**Distributional metric.** RMSE of the posterior mean can hide a sampler that gets the mean right and the spread
wrong, so every run also keeps V after ``sgld_burn_in`` rounds and reports ``v_spread``: the standard deviation of
each entry of V across the kept samples, averaged over entries (items with ≥ 1 training rating). The plot shows it as
a ratio to fresh draws' at the same seed and ζ (1 = the same spread).

Under ζ < 1 only U, V (and biases) are tempered: the Gibbs step for Λ_u, Λ_v uses the untempered Gamma conditional
(:mod:`dpmf_lib.mf.sgld`), so the chain's stationary law is not exactly p^(1/ζ) in Λ; stated on the figure.

**Diverged runs.** A small table can break the sampler outright: on ML-100K at ζ = 1 the 10-number table's chain
went non-finite in round 7 at one of seed 1's three runs (the others gave test RMSE 1.03–1.05 against 0.97 with
fresh draws). Such a run is recorded, not raised (``diverged`` column; test RMSE +inf, spread NaN): it is the
breakage the paper describes, and one diverged run must not stop the other 41. A smallest table whose mean is +inf
counts as maximally distinguishable in the power guard (recorded as ``DIVERGED_POWER`` = 10^6); a diverged run at a size ≥ 10,000 gives that size's measurement no
finite value (with fresh draws: every size's), so the claim is inconclusive. The plot leaves diverged runs out of the means and counts them.

**Which claim.** The paper's claim is about Netflix (a stand-in here, never judged); a run on real ML-100K measures
our ML-100K counterpart ``liu-6.4-lookup-table-10k-indistinguishable-ml-100k`` (judged at ``paper``, 5 seeds of
``dataset_repeats['ml-100k']`` runs each). The further seeds (:func:`replicate_run`) re-run the ML-100K sweep only.
"""

from __future__ import annotations

import pandas as pd

import numpy as np

from ...claims import Measurement
from ...errors import ParameterError
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title
from ._liu_mf import ML100KSeeds, claim_for, dataset_params, load_split, ml100k_params, run_sgld

# dataset loaded -> claim measured (the paper's is about Netflix; real ML-100K measures our counterpart)
CLAIMS = {"netflix": "liu-6.4-lookup-table-10k-indistinguishable",
          "ml-100k": "liu-6.4-lookup-table-10k-indistinguishable-ml-100k"}
CLAIM = CLAIMS["netflix"]


def v_spread(samples_V, rated: np.ndarray) -> float:
    """Mean over the entries of V's rated items of their standard deviation across the kept samples (NaN if < 2)."""
    if len(samples_V) < 2:
        return float("nan")
    stack = np.stack([np.asarray(v)[rated] for v in samples_V])
    return float(stack.std(axis=0, ddof=1).mean())


def table_point(zeta: float, repeat: int, table_size: int, train, test, params: dict) -> dict:
    """One fast-SGLD run (a sweep task: a function of its arguments alone): table size ``table_size`` (0: fresh
    normal draws), temperature ``zeta``, seed ``seed·1000 + repeat``."""
    p = {**params, "seed": params["seed"] * 1000 + repeat, "sgld_zeta": zeta}
    kw = {"noise": "normal"} if table_size == 0 else {"noise": "table", "noise_table_size": int(table_size)}
    try:
        h, res = run_sgld(train, test, params["d"], params["epochs"], p, threads=params["threads"], keep_every=1,
                          return_result=True, **kw)
    except ParameterError as exc:  # a chain that went non-finite: an outcome here (see the module docstring)
        if "diverged" not in str(exc):
            raise
        return {"test_rmse_avg": float("inf"), "test_rmse": float("inf"), "v_spread": float("nan"), "diverged": True}
    last = h.iloc[-1]
    return {"test_rmse_avg": float(last["test_rmse_avg"]), "test_rmse": float(last["test_rmse"]),
            "v_spread": v_spread(res.samples_V, train.item_counts() > 0), "diverged": False}


def run(params: dict) -> pd.DataFrame:
    """Per dataset, the (ζ, seed, table size) runs go through :func:`dpmf_lib.sweep.grid_map` (``n_jobs``: null →
    ``$DPMF_SWEEP_JOBS``, default 1; the dask backend puts them on a cluster); each is seeded by its own arguments, so
    the rows do not depend on the backend."""
    from ...sweep import grid_map, grid_points

    require_datasets(params)  # first: before any data is loaded or model trained
    rows, sources, meas = [], [], []
    zetas = [float(z) for z in params["zetas"]]
    for ds in params["datasets"]:
        train, test = load_split(ds, dataset_params(params, ds))  # real Netflix: its probe.txt is the test set
        label = train.source.label
        sources.append(train.source)
        n_rep = repeats_for(params, ds)
        grid = {"zeta": zetas, "repeat": list(range(n_rep)),
                "table_size": [0] + [int(x) for x in params["table_sizes"]]}
        done = grid_map(table_point, grid, n_jobs=params.get("n_jobs"),
                        fixed={"train": train, "test": test, "params": params})
        for pt, out in zip(grid_points(grid), done):
            rows.append({"dataset": label, "real": train.source.real, "zeta": pt["zeta"],
                         "table_size": pt["table_size"], "repeat": pt["repeat"], **out})
        for zeta in zetas:
            df = pd.DataFrame(rows)
            dz = df[(df.dataset == label) & (df.zeta == zeta)]
            diffs, power = size_differences(dz)
            for size, diff in diffs.items():
                meas.append(Measurement(claim_for(CLAIMS, train.source), diff, label, train.source.real,
                                        setting=f"zeta={zeta:g}, size={size}",
                                        note=f"test RMSE (posterior mean) with a {size:,}-number table minus with fresh "
                                             f"normal draws, mean of the paired differences over {n_rep} runs "
                                             f"(same seed per pair), ζ = {zeta:g}" + _diverged_note(dz),
                                        guards={"power_smallest_table": power}))
    df = pd.DataFrame(rows)
    ref = df[df.table_size == 0].set_index(["dataset", "zeta", "repeat"]).v_spread
    df["v_spread_ratio"] = df.v_spread.to_numpy() / ref.reindex(
        pd.MultiIndex.from_frame(df[["dataset", "zeta", "repeat"]])).to_numpy()
    return attach(df, sources=sources, measurements=meas)


def repeats_for(params: dict, dataset: str) -> int:
    """Runs per (ζ, table size) on ``dataset``: ``params['dataset_repeats'][dataset]`` if given, else ``repeats``."""
    table = params.get("dataset_repeats") or {}
    if not isinstance(table, dict):
        raise ParameterError(f"dataset_repeats must map a dataset id to a number of runs, got {table!r}")
    n = table.get(dataset, params["repeats"])
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ParameterError(f"repeats{'' if dataset not in table else f' (dataset_repeats[{dataset!r}])'} must be an "
                             f"integer ≥ 1, got {n!r}")
    return n


#: the power guard's value when the smallest table's chain diverged (its RMSE +inf) and fresh draws did not: farther
#: from fresh draws than any bound. Recorded as this finite number because a guard reads ±inf as "not measured"
#: (:meth:`dpmf_lib.claims.Guard.holds`); with +inf the ζ = 1 settings would read "guard failed".
DIVERGED_POWER = 1e6


def size_differences(dz: pd.DataFrame) -> tuple[dict, float]:
    """``({size: diff}, power)`` for one dataset and ζ: for each table size ≥ 10,000, the mean over repeats of the
    paired difference test RMSE(table) − test RMSE(fresh draws) (the pair shares its seed ``seed·1000 + repeat``),
    signed; and the power guard, |mean RMSE of the smallest table − mean RMSE with fresh draws|. Empty without fresh
    draws or a size ≥ 10,000. A diverged run (RMSE +inf) makes its size's difference not finite (±inf or NaN):
    no finite value, so inconclusive; at the smallest table it makes the power :data:`DIVERGED_POWER` (maximally
    distinguishable: the table broke the sampler)."""
    g = dz.pivot_table(index="repeat", columns="table_size", values="test_rmse_avg", aggfunc="first")
    big = [s for s in g.columns if s >= 10_000]
    if 0 not in g.columns or not big:
        return {}, float("nan")
    with np.errstate(invalid="ignore"):
        diffs = {int(s): float((g[s] - g[0]).mean()) for s in sorted(big)}
        smallest = min(s for s in g.columns if s > 0)
        power = float(abs(g[smallest].mean() - g[0].mean()))
    if power == np.inf and np.isfinite(g[0]).all():
        power = DIVERGED_POWER
    return diffs, power


def replicate_run(params: dict) -> pd.DataFrame:
    """What the claims' further seeds re-run: :func:`run` on real ML-100K only (every ζ, table size and repeat: the
    claim and its guard read them all). Each run's seed is ``seed·1000 + repeat``, so two seeds never share a run."""
    return run(ml100k_params(params))


def ml100k_seeds(df: pd.DataFrame) -> ML100KSeeds:
    """The notebook's claims cell: ``experiment.ml100k_seeds(df).replicate(nb)`` (see :class:`._liu_mf.ML100KSeeds`)."""
    return ML100KSeeds(df, replicate_run)


def _diverged_note(g: pd.DataFrame) -> str:
    """``"; diverged: 1 run at size 10"`` for the runs of ``g`` that went non-finite (empty when none did)."""
    if "diverged" not in g or not g.diverged.any():
        return ""
    counts = g[g.diverged].groupby("table_size").size()
    return "; diverged (test RMSE +inf): " + ", ".join(
        f"{n} run(s) at {'fresh draws' if s == 0 else f'size {s:,}'}" for s, n in counts.items())


#: the shared figure roles (dpmf_lib.plotting.ROLES) of the temperatures: the paper's Netflix ζ and ζ = 1
ZETA_ROLES = {0.07: "paper", 1.0: "paper-alt"}
#: the RMSE panels zoom to the table sizes from this one on (the claims compare sizes ≥ 10^4 with fresh draws)
ZOOM_FROM_SIZE = 1000


def plot(df: pd.DataFrame, params: dict):
    import matplotlib.transforms as mtransforms

    from ...plotting import ROLES, legend_below, series, zoom_to

    dsets = list(dict.fromkeys(df.dataset))
    fig, axes = figure(ncols=len(dsets), nrows=2, width=4.4, height=3.0, sharex=True)
    for k, ds in enumerate(dsets):
        top, bottom = axes[0][k], axes[1][k]
        zoom, off, diverged = [], [], []
        for i, (zeta, dz_all) in enumerate(df[df.dataset == ds].groupby("zeta", sort=False)):
            role = ZETA_ROLES.get(round(float(zeta), 6), ("ours", "ours-alt")[i % 2])
            color = ROLES[role]["color"]
            dz = dz_all[~dz_all.diverged.astype(bool)] if "diverged" in dz_all else dz_all  # counted in the legend
            n_div = int(len(dz_all) - len(dz))
            g = dz[dz.table_size > 0].groupby("table_size")
            m, s = g.test_rmse_avg.mean(), g.test_rmse_avg.std().fillna(0)
            series(top, m.index, m.values, role, f"lookup table, ζ = {zeta:g}", yerr=s.values, ms=4, lw=1.3)
            if n_div:
                sizes = ", ".join(f"{x:,}" for x in sorted(dz_all[dz_all.diverged.astype(bool)].table_size.unique()))
                diverged.append(f"ζ = {zeta:g}: {n_div} diverged run(s) left out (size {sizes})")
            ref = dz[dz.table_size == 0].test_rmse_avg
            top.axhspan(ref.mean() - ref.std(), ref.mean() + ref.std(), color=color, alpha=0.15, lw=0)
            top.axhline(ref.mean(), color=color, ls=(0, (1, 1)), lw=1.2,
                        label=f"fresh normal draws, ζ = {zeta:g} (band: ± sd)")
            big = m.index >= ZOOM_FROM_SIZE
            zoom += [*(m[big] - s[big]), *(m[big] + s[big]), ref.mean() - ref.std(), ref.mean() + ref.std()]
            off += [(x, y, zeta, color) for x, y in zip(m.index, m.values)]
            r = g.v_spread_ratio
            series(bottom, r.mean().index, r.mean().values, role, f"_ζ = {zeta:g}",
                   yerr=r.std().fillna(0).values, ms=4, lw=1.3)
        n_rep = int(df[df.dataset == ds].repeat.max()) + 1
        top.set_xscale("log")
        zoom_to(top, zoom, pad=0.3)
        hi = top.get_ylim()[1]
        above = [(x, y, z, c) for x, y, z, c in off if y > hi]
        to_top = mtransforms.blended_transform_factory(top.transData, top.transAxes)
        for j, (x, y, z, c) in enumerate(above):  # points off the zoomed axis: their value at the top edge
            top.annotate(f"↑ {y:.2f}" if np.isfinite(y) else "↑ diverged", (x, 0.97 - 0.09 * j), xycoords=to_top,
                         xytext=(2, 0), textcoords="offset points", ha="left", va="top", fontsize="x-small", color=c,
                         bbox={"fc": "white", "ec": "none", "pad": 0.5, "alpha": 0.8})
        if diverged:
            top.text(0.98, 0.03, "\n".join(diverged), transform=top.transAxes, ha="right", va="bottom",
                     fontsize="x-small", color="#444444", bbox={"fc": "white", "ec": "none", "pad": 1, "alpha": 0.8})
        top.set_ylabel("test RMSE (posterior mean)")
        top.set_title(f"{ds}, d = {params['d']}, {n_rep} seeds (mean ± sd)", fontsize=9)
        bottom.axhline(1.0, color="#000000", ls="--", lw=1, label="spread of fresh draws (ratio 1)")
        bottom.set_xscale("log")
        bottom.set_xlabel("lookup table size (numbers)")
        bottom.set_ylabel("spread of V across samples\n(table / fresh draws)", fontsize=8)
    fig.tight_layout()
    fig.suptitle(standin_title("Liu et al. Fig. 4: Gaussian lookup-table size vs test RMSE and posterior spread",
                               df.dataset.unique()), fontsize=10, y=1.06)
    legend = legend_below(fig, axes, ncol=2)
    fig.canvas.draw()
    y = fig.transFigure.inverted().transform(legend.get_window_extent())[0][1]
    fig.text(0.5, y - 0.01, f"RMSE panels zoomed to table sizes ≥ {ZOOM_FROM_SIZE:,} and the fresh draws (what the "
             "claims compare); ↑: a mean above the axis. ζ = 0.07: the paper's Netflix temperature (noise N(0, ζη));\n"
             "U, V then target p^(1/ζ), but the Gibbs step for Λ_u, Λ_v is not tempered (its Gamma conditional is that "
             "of ζ = 1: dpmf_lib/mf/sgld.py).\nSpread of V = sd of each entry of V across the samples after burn-in, "
             "averaged over rated items.", ha="center", va="top", fontsize=7)
    return fig
