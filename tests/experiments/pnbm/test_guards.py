"""The guards the judging rules require (dpmf_lib.verdicts.KINDS), as the PNBM figures record them: hand-made cases
of each guard's arithmetic, and a check that every claim of the figures records a guard for every requirement of its
kinds (a DPPS claim: chain_moved, chain_split_rhat and chain_ess, from its "chains" row)."""

import math

import numpy as np
import pandas as pd
import pytest

from dpmf_lib import baselines
from dpmf_lib.claims import load_claims
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.pnbm import pnbm_fig1, pnbm_fig2, pnbm_fig3
from dpmf_lib.nbm import runs
from dpmf_lib.verdicts import KINDS, load_notes


def test_smallest_gain_is_the_worst_model_and_nan_fails():
    assert baselines.smallest_gain(1.0, [0.9, 0.95]) == pytest.approx(0.05)
    assert baselines.smallest_gain(1.0, [0.9, 1.02]) == pytest.approx(-0.02)  # one side worse than the baseline
    assert math.isnan(baselines.smallest_gain(1.0, [0.9, float("nan")]))
    assert math.isnan(baselines.smallest_gain(1.0, [float("nan"), 0.9]))  # order does not hide a NaN
    assert math.isnan(baselines.smallest_gain(float("nan"), [0.9]))
    with pytest.raises(ParameterError):
        baselines.smallest_gain(1.0, [])


def _ratings(users, items, values, n_users, n_items):
    return Ratings(np.asarray(users, np.int32), np.asarray(items, np.int32), np.asarray(values, np.float32),
                   n_users, n_items, (1.0, 5.0), DataSource("hand", real=False))


def test_item_means_rmse_by_hand():
    # item 0: mean 2 (1, 3); item 1: mean 5; item 2 unseen: global mean (1 + 3 + 5) / 3 = 3
    train = _ratings([0, 1, 0], [0, 0, 1], [1, 3, 5], 2, 3)
    test = _ratings([1, 1, 0], [1, 2, 0], [4, 5, 2], 2, 3)
    want = math.sqrt(((5 - 4) ** 2 + (3 - 5) ** 2 + (2 - 2) ** 2) / 3)
    assert baselines.item_means_rmse(train, test) == pytest.approx(want)


def _agg(rows):
    return pd.DataFrame([{"dataset": "D", "selected": True, **r} for r in rows])


def test_selection_interior_by_hand():
    agg = _agg([{"method": "m", "epsilon": 1.0, "config": "eta=0.2, K=1, lam=0.5", "rmse": 1.0},
                {"method": "m", "epsilon": 2.0, "config": "eta=0.1, K=3, lam=0.5", "rmse": 1.0}])
    grid = {"eta": [0.1, 0.2, 0.4], "K": [1, 3, 5], "lam": [0.5]}
    # K = 1 on the lower edge counts as interior with domain_min 1; lam's one-point grid was not searched
    assert runs.selection_interior(agg, "D", "m", 1.0, grid, domain_min={"K": 1}) == 1.0
    assert runs.selection_interior(agg, "D", "m", 1.0, grid) == 0.0  # K = 1 without a domain minimum: an edge
    assert runs.selection_interior(agg, "D", "m", 2.0, grid, domain_min={"K": 1}) == 0.0  # eta on the lower edge
    assert runs.selection_interior(agg, "D", "m", 1.0, {"eta": [0.1, 0.2]}) == 0.0  # a two-point grid is all edge
    assert math.isnan(runs.selection_interior(agg, "D", "m", 5.0, grid))  # nothing selected: not measured


def test_gain_over_item_means_reads_the_better_knn_and_every_model(monkeypatch):
    monkeypatch.setattr(runs, "item_means_rmse", lambda ds, folds: 1.00)
    agg = _agg([{"method": "pcc", "epsilon": np.nan, "config": "", "rmse": 0.97},
                {"method": "cos", "epsilon": np.nan, "config": "", "rmse": 0.95},
                {"method": "dpps-pnbm", "epsilon": 20.0, "config": "eta1=1", "rmse": 0.99}])
    assert runs.gain_over_item_means(agg, "D", [1], [("knn", None)]) == pytest.approx(0.05)
    assert runs.gain_over_item_means(agg, "D", [1], [("knn", None), ("dpps-pnbm", 20.0)]) == pytest.approx(0.01)
    assert math.isnan(runs.gain_over_item_means(agg, "D", [1], [("knn", None), ("dpps-pnbm", 2.0)]))


def test_chain_guards_read_the_chains_row_and_fail_what_could_not_be_computed():
    agg = _agg([{"method": "chains", "traced": "dpps-pnbm", "epsilon": 20.0, "config": "eta1=1", "chain_moved": 0.01,
                 "chain_rhat": 1.2, "chain_ess": 35.0},
                {"method": "chains", "traced": "dpps-mf", "epsilon": 20.0, "config": "eta=1", "chain_moved": 0.02,
                 "chain_rhat": np.nan, "chain_ess": np.nan}])
    assert runs.chain_guards(agg, "D", "dpps-pnbm", 20.0) == {"chain_moved": 0.01, "chain_split_rhat": 1.2,
                                                              "chain_ess": 35.0}
    # too few draws for R-hat / ESS: the chain is not vouched for (fails), not "not measured"
    assert runs.chain_guards(agg, "D", "dpps-mf", 20.0) == {"chain_moved": 0.02, "chain_split_rhat": math.inf,
                                                            "chain_ess": 0.0}
    # no chains row (another ε, a frame without them): not measured
    for frame, eps in ((agg, 2.0), (_agg([{"method": "pcc", "epsilon": np.nan, "config": "", "rmse": 1.0}]), 20.0)):
        assert all(math.isnan(v) for v in runs.chain_guards(frame, "D", "dpps-pnbm", eps).values())


def _agg_for(p):
    rows = [{"method": m, "epsilon": np.nan, "config": "", "rmse": 0.95, "selected": True}
            for m in ("pcc", "cos", "mf")]
    for m, e, grid in (("dpsgd-pnbm", 1.0, pnbm_fig1.pnbm_grid(p)), ("dpsgd-mf", 1.0, pnbm_fig1.mf_grid(p)),
                       ("dpsgd-mf", 20.0, pnbm_fig1.mf_grid(p)),
                       ("dpps-pnbm", 0.1 * p["tau"], pnbm_fig2.dpps_grid(p)),
                       ("dpps-pnbm", 1.0 * p["tau"], pnbm_fig2.dpps_grid(p)),
                       ("dpps-mf", 0.1 * p["tau"], pnbm_fig2.dpps_mf_grid(p))):
        cfg = ", ".join(f"{k}={v[len(v) // 2]}" for k, v in grid.items())  # the middle of every grid: interior
        rows.append({"method": m, "epsilon": e, "config": cfg, "rmse": 0.9, "rmse_start": 0.91, "selected": True})
        if m.startswith("dpps"):  # the chain guards' row of the selected configuration (runs.selected_chains)
            rows.append({"method": "chains", "traced": m, "epsilon": e, "config": cfg, "rmse": 0.9,
                         "rmse_start": 0.91, "chain_moved": 0.01, "chain_rhat": 1.3, "chain_ess": 12.0,
                         "selected": False})
    return pd.DataFrame([{"dataset": "D", **r} for r in rows])


@pytest.mark.parametrize("module", [pnbm_fig1, pnbm_fig2, pnbm_fig3], ids=lambda m: m.__name__.split(".")[-1])
def test_every_claim_records_the_guards_of_its_kinds(module, monkeypatch):
    from dpmf_lib.params import load_params

    name = module.__name__.split(".")[-1]
    p = load_params(name, "paper")
    p = {**p, "xs": [0.1, 1.0], "epsilons": [1.0, 20.0], "tau": 200}
    monkeypatch.setattr(runs, "item_means_rmse", lambda ds, folds: 1.00)
    monkeypatch.setattr(runs, "_dataset", lambda ds: type("R", (), {"source": DataSource("D", real=True)}))
    meas = module.measurements(_agg_for({**load_params("pnbm_fig1", "paper"), **load_params("pnbm_fig2", "paper"),
                                         **p}), p, ["D"])
    claims = {c.id: c for c in load_claims()}
    notes = load_notes()
    assert meas
    for m in meas:
        own = {g.name for g in claims[m.claim].guards}
        for kind in notes[m.claim].kinds:
            for req in KINDS[kind]:
                names = (own & set(req.accepts)) or {g.name for g in req.defaults}
                assert names <= set(m.guards), (m.claim, req.what, sorted(m.guards))
        for g, v in m.guards.items():
            assert not (isinstance(v, float) and math.isnan(v)), (m.claim, g)
        if "dpps" in m.claim:  # every DPPS claim: the chain moved and converged, from its chains row
            assert {"chain_moved", "chain_split_rhat", "chain_ess"} <= set(m.guards), m.claim
            assert m.guards["chain_split_rhat"] == 1.3 and m.guards["chain_ess"] == 12.0, m.claim
            # DPPS-MF's movement is its chains row's; DPPS-PNBM's the selected rows' (mean over folds)
            assert m.guards["chain_moved"] == pytest.approx(0.01), m.claim
        if "gain_over_bias_only" in m.guards:  # 1.00 − the worst side: 0.95 where kNN is compared, else 0.9
            want = 0.05 if "knn" in m.claim else 0.1
            assert m.guards["gain_over_bias_only"] == pytest.approx(want), m.claim
        if "selection_off_grid_edge" in m.guards:  # the middle of every grid of >= 3 values: interior
            two_point = name in ("pnbm_fig1", "pnbm_fig2")
            assert m.guards["selection_off_grid_edge"] in (0.0, 1.0) and (two_point or m.guards[
                "selection_off_grid_edge"] == 1.0)
