"""What the three PNBM figures (``pnbm_fig1..3``) share: their grids as :class:`GridSpec` lists, the full grid run
(:func:`full_run`; ``pnbm_fig2`` adds its chain traces to it), and the cheaper run that replicates their claims over seeds (:class:`SelectedRerun`).

**The replicate run.** The claims of the PNBM figures are judged at the ``paper`` profile over 5
seeds (:meth:`dpmf_lib.outputs.NotebookRun.replicate`). Re-running the whole grid search at every further seed
would cost ~4 × the figure (3–4 h per notebook) just to re-measure a handful of numbers. Instead, for seeds
``seed + 1 …`` only the configurations that the first seed's grid search *selected* are evaluated again — for the
(dataset, method, ε) that the claims and their guards read, on the same folds, at the new seed — and the claim
measurements are computed from them by the same function as in the full run (each module's ``measurements``).

What the interval over seeds then means: the seed-to-seed spread (DP noise, initialisation, minibatches) of the
*selected* configuration, free of the winner's curse that re-selecting the best of a grid on the test folds at every
seed would add (the minimum of many noisy RMSEs is biased low, and more so the noisier the method). For the same
reason the first seed's own value is **not** one of the claim's values: it is the minimum that made the selection.
:meth:`SelectedRerun.replicate` therefore takes the claim values from ``n`` fresh seeds ``seed + 1 … seed + n`` (the
figure and the CSV stay those of ``seed``; ``measurements.json`` records the claim seeds). The selection itself is
made once, at the first seed, and is **not** replicated: the interval says nothing about how stable the choice of
configuration is across seeds. Guards are computed the same way at every seed from the re-evaluated selected
configurations at that seed (e.g. the noise-free MF gain over item means, the DPPS chain's movement), except
``k_grid_interior``: a fact of the first seed's selection, it is the same at every seed (its five values are one
check, not five).

**The chain guards.** A claim that reads a DPPS sample needs a chain that moved and converged
(:data:`dpmf_lib.verdicts.KINDS`). The grid runs one chain per configuration and fold, and the chains of a fold
share their start and noise (common random numbers), so they cannot vouch for each other. :func:`chain_rows` adds,
for the selected configuration of every DPPS input of the claims only (never the grid), at every seed, its chain on
the first fold — the released one, the same bytes — beside ``n_chains − 1`` independent chains on the same data from
wider data-independent starts (scaled by ``chain_spread^k``), all traced at every step, and records their split-R̂
and ESS (:mod:`dpmf_lib.diagnostics`, through :func:`dpmf_lib.privacy.chains.chain_diagnostics`) as rows with method
``"chains"`` (:func:`dpmf_lib.nbm.runs.selected_chains`). The released sample stays the first chain's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from ...errors import ParameterError
from ...nbm import runs
from ...outputs import attach
from ...params import require_datasets, require_epsilons


@dataclass(frozen=True)
class GridSpec:
    """One method's grid search in a figure: :func:`dpmf_lib.nbm.runs.run_grid`'s arguments except dataset, folds,
    seed and n_jobs. ``epsilons``: numbers (in the method's own ε unit) or ``[None]`` for a non-private method."""
    method: str
    epsilons: list
    grid: dict
    fixed: dict = field(default_factory=dict)
    halving_keep: int | None = None


def run_specs(ds: str, specs: list[GridSpec], p: dict) -> list[pd.DataFrame]:
    """Every grid point of every spec on ``ds`` (the full run): one frame per spec."""
    return [runs.run_grid(s.method, ds, p["folds"], s.epsilons, s.grid, s.fixed, p["seed"], p["n_jobs"],
                          halving_keep=s.halving_keep) for s in specs]


def chain_rows(agg: pd.DataFrame, p: dict, datasets, specs, inputs) -> pd.DataFrame:
    """The chain guards' rows (module docstring): for every (method, ε) of ``inputs`` that ``agg`` selected on a
    dataset, :func:`dpmf_lib.nbm.runs.selected_chains` on the first fold at ``p['seed']`` with the spec's fixed
    settings, ``p['n_chains']`` chains and ``p['chain_spread']``."""
    rows = []
    for ds in datasets:
        for spec in specs(ds, p):
            for method, eps in inputs:
                if method == spec.method and any(_same_epsilon(eps, None if e is None else float(e))
                                                 for e in spec.epsilons):
                    rows.append(runs.selected_chains(agg, ds, method, eps, spec.fixed, p["folds"][0], p["seed"],
                                                     p["n_chains"], p["chain_spread"]))
    return pd.DataFrame([r for r in rows if r is not None])


def with_chains(agg: pd.DataFrame, p: dict, datasets, specs, chains) -> pd.DataFrame:
    """``agg`` with the rows of :func:`chain_rows` for the inputs ``chains(p)`` appended (``chains`` None: none)."""
    extra = chain_rows(agg, p, datasets, specs, chains(p)) if chains is not None else pd.DataFrame()
    return pd.concat([agg, extra], ignore_index=True) if len(extra) else agg


def full_run(params: dict, specs, finish, measure, *, epsilons: bool = False, chains=None) -> pd.DataFrame:
    """A figure's full run: every grid point of ``specs(ds, p)`` on every available dataset, best-of-grid selection
    (:func:`dpmf_lib.nbm.runs.select_best`), the chain guards' rows of the inputs ``chains(p)`` (:func:`with_chains`),
    the figure's ``finish(agg, p, notes)`` and its ``measure(agg, p, datasets)`` attached with the datasets' sources.
    ``epsilons``: the figure takes ``epsilons`` (checked by :func:`~dpmf_lib.params.require_epsilons` right after the
    datasets, before anything is loaded or trained)."""
    require_datasets(params)  # first: before any data is loaded or model trained
    if epsilons:
        require_epsilons(params)
    p = params
    datasets, notes = runs.available(p["datasets"])
    frames = [f for ds in datasets for f in run_specs(ds, specs(ds, p), p)]
    agg = runs.select_best(pd.concat(frames, ignore_index=True))
    agg = finish(with_chains(agg, p, datasets, specs, chains), p, notes)
    return attach(agg, sources=[runs._dataset(ds).source for ds in datasets], measurements=measure(agg, p, datasets))


def _same_epsilon(a, b) -> bool:
    if a is None or (isinstance(a, float) and math.isnan(a)):
        return b is None or (isinstance(b, float) and math.isnan(b))
    return b is not None and not (isinstance(b, float) and math.isnan(b)) and math.isclose(float(a), float(b),
                                                                                           rel_tol=1e-12)


def selected_point(df: pd.DataFrame, ds: str, spec: GridSpec, epsilon) -> dict:
    """The grid point of ``spec`` that ``df`` (a full run's frame) selected for (``ds``, ``epsilon``), as a dict of
    the grid's own values (so the rerun builds the same config string and passes the same types)."""
    label = runs._dataset(ds).source.label
    rows = df[(df.dataset == label) & (df.method == spec.method) & df.selected.astype(bool)]
    rows = rows[[_same_epsilon(epsilon, float(e)) for e in rows.epsilon]]
    if len(rows) != 1:
        raise ParameterError(f"the frame has {len(rows)} selected rows for ({ds}, {spec.method}, ε={epsilon}); "
                             "rerun_selected needs the frame of a full run with the same parameters")
    cfg = rows.iloc[0]["config"]
    cfg = "" if pd.isna(cfg) else str(cfg)  # a frame read back from the CSV has NaN for an empty config (PCC, COS)
    given = dict(kv.split("=", 1) for kv in cfg.split(", ")) if cfg else {}
    point = {}
    for k, vals in spec.grid.items():
        if k not in given:
            raise ParameterError(f"selected config '{cfg}' of {spec.method} has no '{k}': the grids differ from the "
                                 "full run's")
        match = [v for v in vals if float(v) == float(given[k])]
        if not match:
            raise ParameterError(f"selected {k}={given[k]} of {spec.method} is not in this grid {list(vals)}: the "
                                 "parameters differ from the full run's")
        point[k] = match[0]
    return point


class SelectedRerun:
    """``params -> DataFrame``: the configurations ``df`` selected, re-evaluated at ``params['seed']``, with the
    claim measurements attached — what :meth:`~dpmf_lib.outputs.NotebookRun.replicate` calls at the further seeds.

    ``specs(ds, p)``: the figure's grids (:class:`GridSpec`); ``needs(p)``: the (method, ε) pairs the claims and
    their guards read; ``finish(agg, p, notes)``: the figure's column post-processing; ``measure(agg, p,
    datasets)``: the figure's measurement function (the same one its full ``run`` uses); ``chains(p)``: the DPPS
    inputs whose chain guards are measured (:func:`with_chains`; None: none). ``evaluated`` lists the
    (dataset, method, ε, grid point, seed) re-evaluated, over all calls (for tests and for a reader)."""

    def __init__(self, df: pd.DataFrame, specs, needs, finish, measure, chains=None):
        self.df, self.specs, self.needs, self.finish, self.measure = df, specs, needs, finish, measure
        self.chains = chains
        self.evaluated: list[tuple] = []

    def plan(self, p: dict) -> list[tuple]:
        """(dataset id, spec, ε, selected grid point) for every claim input present in the full run's frame."""
        folds = ",".join(map(str, p["folds"]))
        if "folds" in self.df and len(self.df) and str(self.df["folds"].iloc[0]) != folds:
            raise ParameterError(f"folds {p['folds']} differ from the full run's ({self.df['folds'].iloc[0]}): "
                                 "the selected configurations are re-evaluated on the same folds")
        labels = set(self.df.dataset)
        datasets = [ds for ds in runs.available(p["datasets"])[0] if runs._dataset(ds).source.label in labels]
        out = []
        for ds in datasets:
            for spec in self.specs(ds, p):
                for method, eps in self.needs(p):
                    if method != spec.method:
                        continue
                    match = [e for e in spec.epsilons if _same_epsilon(eps, None if e is None else float(e))]
                    if match:  # the spec's own ε value, so the rerun's rows carry the same ε as the full run's
                        out.append((ds, spec, match[0], selected_point(self.df, ds, spec, match[0])))
        return out

    def replicate(self, nb, n_seeds: int | None = None) -> pd.DataFrame:
        """The claims over fresh seeds, for the notebook ``nb`` (a :class:`~dpmf_lib.outputs.NotebookRun`): this
        rerun at ``seed + 1 … seed + n`` — not at ``seed``, whose value is the minimum that made the selection — with
        ``n`` what the claims need at the profile (:meth:`~dpmf_lib.outputs.NotebookRun.seeds_needed`; 5 at paper).
        Where the claims need one seed (no verdict at this profile: ``min_profile`` above it) the first seed's value
        is kept as the indicative one, at no cost. Returns ``nb.claims_table()``, like ``nb.replicate``."""
        from ...claims import merge_replicates

        base = list(self.df.attrs.get("measurements", []))
        n = nb.seeds_needed(base) if n_seeds is None else int(n_seeds)
        seed0 = int(nb.params.get("seed", 0))
        if n <= 1:
            runs_, seeds = [base], [seed0]
        else:
            from tqdm import tqdm  # text bar, as nb.replicate

            seeds = [seed0 + k for k in range(1, n + 1)]
            runs_ = [list(self({**nb.params, "seed": s}).attrs.get("measurements", []))
                     for s in tqdm(seeds, desc=f"{nb.name}: claims at fresh seeds (selected configurations)")]
        nb.measurements = merge_replicates(runs_, seeds)
        nb.replicate_seeds = seeds
        return nb.claims_table()

    def __call__(self, params: dict) -> pd.DataFrame:
        require_datasets(params)
        p = params
        plan = self.plan(p)
        notes = runs.available(p["datasets"])[1]
        frames = []
        for ds, spec, eps, point in plan:
            frames.append(runs.run_grid(spec.method, ds, p["folds"], [eps], {k: [v] for k, v in point.items()},
                                        spec.fixed, p["seed"], p["n_jobs"], halving_keep=None))
            self.evaluated.append((ds, spec.method, eps, dict(point), int(p["seed"])))
        datasets = list(dict.fromkeys(ds for ds, *_ in plan))
        if not frames:  # no claim can be measured with these parameters (e.g. ε = 1 not on the axis)
            return attach(pd.DataFrame(), sources=[], measurements=[])
        agg = runs.select_best(pd.concat(frames, ignore_index=True))
        agg = self.finish(with_chains(agg, p, datasets, self.specs, self.chains), p, notes)
        return attach(agg, sources=[runs._dataset(ds).source for ds in datasets],
                      measurements=self.measure(agg, p, datasets))
