"""Balu 2016, Table 4.2: test RMSE of regular factorization, count sketch (k = 4) and feature hashing (k = 1) at
d = 32 and space gain γ = 1 (all three use the same memory), averaged over random 0.8/0.1/0.1 splits.

Protocol (section 4.1.5.1, see :mod:`dpmf_lib.sketch.protocol` for the choices the thesis leaves open): mean
correction, frequency thresholding (< 10) of validation/test, two-stage log-scale line search of (η, λ) on validation,
T = 20 epochs with η_t = η/(1 + t/T). The paper's values are put beside ours for the datasets it reports; ML-100K
(real here) is not in the paper, so its row has no paper value.

The feature-hashing-minus-count-sketch claims record the guards of their kinds (:mod:`._balu_ch4_guards`) for the two
models they compare: ``selection_off_grid_edge`` (both selected (η, λ) inside what their search evaluated) and
``gain_over_bias_only`` (the smaller gain of the two over the bias-only model).
"""

from __future__ import annotations

import pandas as pd

from ...claims import Measurement
from ...outputs import attach
from ...params import require_datasets
from ...plotting import figure, standin_title
from ...sketch.runs import load, make_splits
from . import _balu_ch4_guards, _balu_ch4_runs

METHOD_LABELS = {"regular": "regular factorization", "count_sketch": "count sketch (k = 4)",
                 "feature_hashing": "feature hashing"}
# Table 4.2 of the thesis (RMSE, d = 32, γ = 1, mean of 10 splits)
PAPER = {"ml-1m": {"regular": 0.873, "count_sketch": 0.876, "feature_hashing": 0.906},
         "ml-10m": {"regular": 0.811, "count_sketch": 0.809, "feature_hashing": 0.818},
         "eachmovie": {"regular": 1.145, "count_sketch": 1.146, "feature_hashing": 1.159},
         "netflix": {"regular": 0.854, "count_sketch": 0.855, "feature_hashing": 0.862}}
CLAIM_RMSE = "balu-4.2-table-{method}-{dataset}"
CLAIM_FH_WORSE = "balu-4.2-fh-minus-cs-{dataset}"


# relative cost per training rating of the three methods at d = 32 (measured on the EachMovie stand-in, us per rating
# and epoch), times 1 + users / 50,000 for the cache misses of a larger model. Only the
# order in which the pool hands out the configurations (dearest first) depends on it, never a number.
METHOD_COST = {"count_sketch": 1.8, "feature_hashing": 0.9, "regular": 0.22}


def config_cost(config: dict, splits: list) -> float:
    s = splits[0]
    return METHOD_COST.get(config["method"], 1.0) * len(s.train) * (1.0 + s.n_users / 50_000)


def run(params: dict) -> pd.DataFrame:
    require_datasets(params)  # first: before any data is loaded or model trained
    groups, loaded = [], []
    for ds in params["datasets"]:
        r = load(params, ds)
        splits = make_splits(r, params)
        configs = [{"method": m, "d": params["d"], "gamma": params["gamma"]} for m in params["methods"]]
        groups.append((configs, splits, r))
        loaded.append((ds, r))
    # every (dataset, method) configuration in one pool of params['n_jobs'] workers, dearest first (one dataset after
    # the other left count sketch alone on one worker per dataset), through the result cache (a run stopped by its
    # time budget resumes from the runs it finished)
    results = _balu_ch4_runs.run_groups(groups, params, cost=config_cost)
    frames, sources, meas = [], [], []
    for (ds, r), (_, splits, _), df in zip(loaded, groups, results):
        df["dataset"] = r.source.label
        df["dataset_id"] = ds
        df["real"] = r.source.real
        frames.append(df)
        sources.append(r.source)
        mean = df.groupby("method").test_rmse.mean()
        for m, v in mean.items():
            if ds in PAPER:
                meas.append(Measurement(CLAIM_RMSE.format(method=m, dataset=ds), float(v), r.source.label,
                                        r.source.real, note=f"mean of {len(splits)} splits"))
        if ds in PAPER and {"feature_hashing", "count_sketch"} <= set(mean.index):
            compared = df[df.method.isin(["feature_hashing", "count_sketch"])]
            meas.append(Measurement(CLAIM_FH_WORSE.format(dataset=ds),
                                    float(mean["feature_hashing"] - mean["count_sketch"]), r.source.label,
                                    r.source.real, note="RMSE(feature hashing) − RMSE(count sketch k=4)",
                                    guards=_balu_ch4_guards.compared(compared, ["method"])))
    df = pd.concat(frames, ignore_index=True)
    df["paper_rmse"] = [PAPER.get(ds, {}).get(m, float("nan")) for ds, m in zip(df.dataset_id, df.method)]
    return attach(df, sources=sources, measurements=meas)


def summary(df: pd.DataFrame) -> pd.DataFrame:
    """Table 4.2 layout: one row per dataset, ours (mean ± sd over splits) beside the paper's value per method.
    Datasets of the paper that were not run here get a row with the paper's values only ("not run")."""
    rows = []
    for (label, ds), g in df.groupby(["dataset", "dataset_id"], sort=False):
        row = {"dataset": label}
        for m in METHOD_LABELS:
            gm = g[g.method == m]
            sd = gm.test_rmse.std(ddof=1) if len(gm) > 1 else 0.0
            row[f"{m} (ours)"] = f"{gm.test_rmse.mean():.3f} ± {sd:.3f}" if len(gm) else "not run"
            row[f"{m} (paper)"] = PAPER.get(ds, {}).get(m, float("nan"))
        rows.append(row)
    for ds, vals in PAPER.items():
        if ds not in set(df.dataset_id):
            row = {"dataset": f"{ds} (not run)"}
            for m in METHOD_LABELS:
                row[f"{m} (ours)"] = "not run"
                row[f"{m} (paper)"] = vals[m]
            rows.append(row)
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, params: dict):
    tab = summary(df)
    fig, axes = figure(width=8.0, height=0.9 + 0.45 * (len(tab) + 1))
    ax = axes[0][0]
    cells = [["—" if (isinstance(v, float) and v != v) else str(v) for v in row] for row in tab.values.tolist()]
    ax.axis("off")
    t = ax.table(cellText=cells, colLabels=[c.replace(" (", "\n(") for c in tab.columns], loc="center")
    t.auto_set_font_size(False)
    t.set_fontsize(7)
    t.scale(1.0, 1.8)
    t.auto_set_column_width(list(range(len(tab.columns))))
    n = int(df.split.nunique())
    ax.set_title(standin_title(f"Balu 2016, Table 4.2: test RMSE, d = {params['d']}, γ = {params['gamma']} "
                               f"(mean ± sd over {n} split{'s' if n > 1 else ''})", df.dataset.unique()), fontsize=9)
    return fig
