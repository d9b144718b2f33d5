"""Liu Figure 6: the overfitting measure is signed, so curves still improving at their last epoch differ from the
claim instead of reading 0 (inconclusive); on ML-100K C-SGD's η0 and λ are the validation argmin after the epoch
budget, chosen without reading the test split, with the paper's Netflix values run beside them."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dpmf_lib.claims import DIFFERS, INCONCLUSIVE, Measurement, load_claims
from dpmf_lib.experiments.liu import _liu_select, liu_fig6
from dpmf_lib.params import load_params
from dpmf_lib.verdicts import judge_measurement

CLAIMS = {c.id: c for c in load_claims()}


def test_overfit_gap_is_signed():
    still_improving = [0.99, 0.97, 0.96, 0.955, 0.952]
    assert liu_fig6.overfit_gap(still_improving) == pytest.approx(0.952 - 0.955)  # < 0, not 0
    overfits = [0.99, 0.95, 0.94, 0.95, 0.96]
    assert liu_fig6.overfit_gap(overfits) == pytest.approx(0.02)
    assert math.isnan(liu_fig6.overfit_gap([0.9]))


@pytest.mark.parametrize("claim", ["liu-6.4-sgd-overfits", "liu-6.4-sgd-overfits-ml-100k"])
def test_a_curve_still_improving_in_every_seed_differs(claim):
    # five seeds of curves still improving at their last epoch: the old measure gave 0, 0, 0, 0, 0 (inconclusive)
    values = [liu_fig6.overfit_gap([0.99, 0.96, 0.95, 0.95 - 0.001 * (k + 1)]) for k in range(5)]
    m = Measurement(claim, values[0], "ml-100k" if claim.endswith("ml-100k") else "netflix", True).as_dict()
    m.update(values=values, profile="paper")
    # the guards of its kinds (params/claims.yaml judging:) are not measured: withheld, leaning to differs
    j = judge_measurement(CLAIMS[claim], m)
    assert j.verdict == INCONCLUSIVE and j.lean == DIFFERS and "gain_over_bias_only" in j.reason
    m["guards"] = {"gain_over_bias_only": [0.05] * 5}
    if claim.endswith("ml-100k"):  # kind tuned: its η0, λ are chosen on ML-100K's validation split
        assert judge_measurement(CLAIMS[claim], m).verdict == INCONCLUSIVE
        m["guards"]["selection_off_grid_edge"] = [1.0, 1.0, 1.0, 1.0, 0.0]  # one seed chose on the edge
        assert "selection_off_grid_edge" in judge_measurement(CLAIMS[claim], m).reason
        m["guards"]["selection_off_grid_edge"] = [1.0] * 5
    assert judge_measurement(CLAIMS[claim], m).verdict == DIFFERS


def test_fig6_run_measures_the_signed_gap(monkeypatch):
    curve = pd.DataFrame({"solver": "csgd", "d": 16, "threads": 1, "epoch": [1, 2, 3, 4], "seconds": 0.1,
                          "wall": [0.1, 0.2, 0.3, 0.4], "test_rmse": [0.99, 0.97, 0.96, 0.958]})
    monkeypatch.setattr(liu_fig6, "run_csgd", lambda *a, **k: curve.copy())
    p = load_params("liu_fig6", "smoke", {"max_ratings": 5000, "epochs": 4, "threads": 1, "sgd_select_on": []})
    (m,) = liu_fig6.run(p, sgld=False).attrs["measurements"]
    assert m["value"] == pytest.approx(0.958 - 0.96)
    assert set(m["guards"]) == {"gain_over_bias_only"}  # nothing chosen: no grid-edge guard


def _curve(final, best=None, epochs=3):
    """A per-epoch curve ending at ``final``; ``best`` (lower) at epoch 1 makes a curve that turned up."""
    r = [final + 0.02, final + 0.01, final] if best is None else [best, final - 0.01, final]
    return pd.DataFrame({"solver": "csgd", "d": 16, "threads": 1, "block_users": 1, "epoch": [1, 2, 3][:epochs],
                         "seconds": 0.1, "wall": [0.1, 0.2, 0.3], "test_rmse": r, "updates_per_s": 1.0})


def test_ml100k_settings_are_the_validation_argmin_after_the_budget_never_read_from_test(monkeypatch):
    grid = {"sgd_eta0": [0.02, 0.04, 0.08, 0.16], "sgd_lambda": [0.01, 0.05, 0.1, 0.5]}
    p = load_params("liu_fig6", "smoke", {"max_ratings": 5000, "epochs": 3, "threads": 1, "sgd_grid": grid})
    split = {}
    real_split = liu_fig6.load_split
    monkeypatch.setattr(liu_fig6, "load_split", lambda ds, q: split.setdefault(ds, real_split(ds, q)))
    calls = []

    def fake(train, test, d, epochs, params, threads=None, label="csgd"):
        eta, lam = params["sgd_eta0"], params["sgd_lambda"]
        on_test = test is split["ml-100k"][1]
        calls.append((label, train.n_ratings, test.n_ratings, on_test, eta, lam))
        if on_test:  # the test split would pick the paper's η0 = 0.02 — it must never be asked
            return _curve(0.90 if eta == 0.02 else 1.0).assign(solver=label)
        if (eta, lam) == (0.04, 0.05):  # the lowest validation RMSE of all at epoch 1, but not after the budget
            return _curve(0.95, best=0.80)
        return _curve(0.90 + 0.01 * abs(math.log2(eta / 0.08)) + 0.01 * abs(math.log10(lam / 0.1)))

    monkeypatch.setattr(_liu_select, "run_csgd", fake)
    monkeypatch.setattr(liu_fig6, "run_csgd", fake)
    df = liu_fig6.run(p, sgld=False)
    (m,) = df.attrs["measurements"]
    train, test = split["ml-100k"]
    chosen = [c for c in calls if c[0] == "csgd (validation)"]
    assert len(chosen) == 16 and not any(c[3] for c in chosen)  # every grid point scored on validation only
    assert {c[1] + c[2] for c in chosen} == {train.n_ratings} and all(c[2] < test.n_ratings for c in chosen)
    final = [c for c in calls if c[0] == "csgd"]
    assert [(c[3], c[4], c[5]) for c in final] == [(True, 0.08, 0.1)]  # the argmin trains on the whole training split
    consts = [c for c in calls if c[0] == liu_fig6.PAPER_CONSTANTS]
    assert [(c[4], c[5]) for c in consts] == [(p["sgd_eta0"], p["sgd_lambda"])]  # the Netflix values beside it
    cs = df[df.solver == "csgd"]
    assert (cs.sgd_eta0 == 0.08).all() and (cs.sgd_lambda == 0.1).all()
    g = df[df.solver == _liu_select.GRID_SOLVER]
    assert len(g) == 16 and g.chosen.sum() == 1
    assert g.loc[(g.sgd_eta0 == 0.04) & (g.sgd_lambda == 0.05), "validation_best_epoch"].item() == 1
    assert m["guards"]["selection_off_grid_edge"] == 1.0 and "0.08" in m["note"]


def test_a_diverged_grid_point_scores_inf_and_other_errors_raise(monkeypatch):
    from dpmf_lib.errors import ParameterError

    p = load_params("liu_fig6", "smoke", {"max_ratings": 5000, "epochs": 3, "threads": 1,
                                          "sgd_grid": {"sgd_eta0": [0.02, 0.08, 0.32], "sgd_lambda": [0.1]}})
    train, _ = liu_fig6.load_split("ml-100k", p)

    def fake(tr, te, d, epochs, params, threads=None, label="csgd"):
        if params["sgd_eta0"] == 0.32:
            raise ParameterError("SGD diverged in round 2 (non-finite factors): lower eta0 (now 0.32)")
        return _curve(0.9 if params["sgd_eta0"] == 0.08 else 0.95)

    monkeypatch.setattr(_liu_select, "run_csgd", fake)
    c = _liu_select.choose_sgd(train, 16, 3, p, threads=1)
    assert c.chosen["sgd_eta0"] == 0.08 and c.off_grid_edge == 1.0  # λ: one value, not searched
    rows = _liu_select.grid_rows(c, 16, 3)
    assert rows.diverged.tolist() == [False, False, True] and rows.validation_rmse.isna().tolist() == [False, False,
                                                                                                       True]
    monkeypatch.setattr(_liu_select, "run_csgd", lambda *a, **k: (_ for _ in ()).throw(ParameterError("bad d")))
    with pytest.raises(ParameterError, match="bad d"):
        _liu_select.choose_sgd(train, 16, 3, p, threads=1)
    with pytest.raises(ParameterError, match="sgd_grid"):
        _liu_select.sgd_grid({**p, "sgd_grid": {"sgd_eta0": [-1.0]}})
    with pytest.raises(ParameterError, match="unknown"):
        _liu_select.sgd_grid({**p, "sgd_grid": {"eta": [0.1]}})
