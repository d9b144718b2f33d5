"""Liu Figure 2 (review of dd6066c / 744ec12, Figs 2-6 on ML-100K): the speed-up interpolates each time to the target
and is guarded (C-SGD flattened, libmf's crossing bracketed, times ≥ 1 s); the title names the solvers that ran.
Figure 4's and 6's parts of that review are in test_fig4.py and test_fig6.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.claims import DIFFERS, INCONCLUSIVE, REPRODUCED, Measurement, load_claims
from dpmf_lib.experiments.liu import liu_fig2
from dpmf_lib.params import load_params
from dpmf_lib.verdicts import judge_measurement

CLAIMS = {c.id: c for c in load_claims()}


# ---- Figure 2: interpolated times to the target, and the guards ----

def test_time_to_target_interpolates_between_the_bracketing_points():
    wall, rmse = [1.0, 2.0, 4.0, 8.0], [1.00, 0.96, 0.91, 0.92]
    t, bracketed = liu_fig2.time_to_target(wall, rmse, 0.94)
    assert bracketed and t == pytest.approx(2.0 + (0.96 - 0.94) / (0.96 - 0.91) * 2.0)  # 2.8, not the 4-epoch fit
    assert liu_fig2.time_to_target(wall, rmse, 0.91) == (4.0, True)  # exactly at a point: that point
    assert liu_fig2.time_to_target(wall, rmse, 1.0) == (1.0, False)  # at the first fit: nothing before it
    t, bracketed = liu_fig2.time_to_target(wall, rmse, 0.90)
    assert math.isinf(t) and not bracketed


def test_late_improvement_flattened_or_turned():
    falling = [0.98, 0.96, 0.95, 0.945, 0.9435, 0.9427, 0.9419, 0.9412, 0.9405, 0.9398]  # still falling at the end
    k = math.ceil(0.2 * len(falling))  # 2 of 10 epochs
    assert liu_fig2.late_improvement(falling) == pytest.approx(falling[-1 - k] - falling[-1])
    assert liu_fig2.late_improvement(falling) > liu_fig2.FLAT_TOL
    flat = [0.98, 0.95, 0.94, 0.9302, 0.9301, 0.9300]
    assert 0 < liu_fig2.late_improvement(flat) <= liu_fig2.FLAT_TOL
    turned = [0.98, 0.95, 0.93, 0.94, 0.95]  # best epoch is not the last
    assert liu_fig2.late_improvement(turned) == 0.0


def _curves(cs_rmse, cs_wall, lib_rmse, lib_wall):
    cs = pd.DataFrame({"solver": "csgd-1t", "threads": 1, "epoch": np.arange(1, len(cs_rmse) + 1), "wall": cs_wall,
                       "test_rmse": cs_rmse})
    lib = pd.DataFrame({"solver": "libmf", "threads": 1, "epoch": [1, 2, 4, 8, 15][:len(lib_rmse)], "wall": lib_wall,
                        "test_rmse": lib_rmse})
    return pd.concat([cs, lib], ignore_index=True)


def test_speedup_interpolates_and_reports_the_guards():
    # C-SGD turns up after epoch 4 (flattened); libmf's best (0.90) is lower, so the target is C-SGD's best 0.93,
    # which libmf crosses between its 2- and 4-epoch fits (walls 4 and 8 s)
    df = _curves([0.99, 0.96, 0.94, 0.93, 0.931, 0.932], [1.5, 3.0, 4.5, 6.0, 7.5, 9.0],
                 [1.00, 0.95, 0.90, 0.91, 0.92], [2.0, 4.0, 8.0, 16.0, 30.0])
    ratio, target, th, guards = liu_fig2.speedup(df)
    t_lib = 4.0 + (0.95 - 0.93) / (0.95 - 0.90) * 4.0  # 5.6 s, not the 4-epoch fit's 8 s
    assert target == pytest.approx(0.93) and th == 1
    assert ratio == pytest.approx(t_lib / 6.0)
    assert guards == pytest.approx({"csgd_late_improvement": 0.0, "libmf_crossing_bracketed": 1.0,
                                    "seconds_to_target": 5.6})


def _judge_fig2(guards, value=3.0, n=5, claim="liu-6.3-csgd-faster-than-peer-ml-100k"):
    m = Measurement(claim, value, "ml-100k", True, setting="d=512", guards=guards).as_dict()
    m.update(values=[value + 0.1 * k for k in range(n)], profile="paper")
    return judge_measurement(CLAIMS[claim], m)


@pytest.mark.parametrize("claim", ["liu-6.3-csgd-faster-than-peer", "liu-6.3-csgd-faster-than-peer-ml-100k"])
def test_fig2_guards_gate_the_verdict(claim):
    # the notebook's own guards, and the trained-model guard its kind adds by rule (params/claims.yaml judging:)
    ok = {"csgd_late_improvement": 0.0, "libmf_crossing_bracketed": 1.0, "seconds_to_target": 5.6,
          "gain_over_bias_only": 0.05}
    if claim.endswith("ml-100k"):  # kind tuned too: C-SGD's η0, λ are chosen on ML-100K's validation split
        no_edge = _judge_fig2(ok, claim=claim)
        assert no_edge.verdict == INCONCLUSIVE and "selection_off_grid_edge" in no_edge.reason
        ok["selection_off_grid_edge"] = 1.0
    assert _judge_fig2(ok, claim=claim).verdict == REPRODUCED
    without = _judge_fig2({k: v for k, v in ok.items() if k != "gain_over_bias_only"}, claim=claim)
    assert without.verdict == INCONCLUSIVE and "gain_over_bias_only" in without.reason and without.lean == REPRODUCED
    assert _judge_fig2(ok, value=1.3, claim=claim).verdict == DIFFERS
    for bad, reason in [({"csgd_late_improvement": 0.0021}, "csgd_late_improvement"),
                        ({"libmf_crossing_bracketed": 0.0}, "libmf_crossing_bracketed"),
                        ({"seconds_to_target": 0.17}, "seconds_to_target")]:
        j = _judge_fig2({**ok, **bad}, value=1.3, claim=claim)  # would differ: the guard makes it inconclusive
        assert j.verdict == INCONCLUSIVE and reason in j.reason


def test_fig2_run_measures_the_guards():
    p = load_params("liu_fig2", "smoke", {"max_ratings": 5000, "epochs": 2, "peer_iters": [1, 2],
                                         "solvers": ["csgd", "libmf"], "threads": 1})
    ms = liu_fig2.run(p).attrs["measurements"]
    if not ms:
        pytest.skip("libmf is not installed")
    assert set(ms[0]["guards"]) == {"csgd_late_improvement", "libmf_crossing_bracketed", "seconds_to_target",
                                    "gain_over_bias_only", "selection_off_grid_edge"}  # ML-100K: chosen on validation
    assert "interpolated" in ms[0]["note"] and "chosen on validation" in ms[0]["note"]


def test_fig2_csgd_runs_the_validation_choice_and_the_netflix_values_beside_it(monkeypatch):
    from dpmf_lib.experiments.liu import _liu_select
    from dpmf_lib.tuning import GridChoice

    p = load_params("liu_fig2", "smoke", {"max_ratings": 5000, "epochs": 2, "solvers": ["csgd", "libmf"], "threads": 2,
                                         "peer_threads": 1})
    seen = []

    def choose(train, d, epochs, params, threads=1):
        seen.append(("choose", d, epochs, train.n_ratings))
        t = pd.DataFrame([{"sgd_eta0": 0.08, "sgd_lambda": 0.05, "sgd_gamma": 1.0, "score": 0.9, "chosen": True,
                           "validation_best_epoch": 2.0}])
        return GridChoice({"sgd_eta0": 0.08, "sgd_lambda": 0.05, "sgd_gamma": 1.0}, t, 1.0)

    def csgd(train, test, d, epochs, params, threads=None, label="csgd", **kw):
        seen.append((label, threads, params["sgd_eta0"], params["sgd_lambda"]))
        return pd.DataFrame({"solver": label, "d": d, "threads": threads, "epoch": [1, 2], "wall": [0.1, 0.2],
                             "seconds": 0.1, "test_rmse": [0.95, 0.94]})

    monkeypatch.setattr(liu_fig2, "choose_sgd", choose)
    monkeypatch.setattr(liu_fig2, "run_csgd", csgd)
    monkeypatch.setattr(liu_fig2, "run_peer", lambda *a, **k: pd.DataFrame(
        {"solver": "libmf", "d": 8, "threads": 1, "epoch": [1, 3], "wall": [0.1, 0.3], "test_rmse": [0.96, 0.93]}))
    df = liu_fig2.run(p)
    (m,) = df.attrs["measurements"]
    assert m["guards"]["selection_off_grid_edge"] == 1.0 and "η0 = 0.08" in m["note"]
    # item means minus the worse last point of the two compared (C-SGD 0.94, libmf 0.93)
    from dpmf_lib import baselines
    from dpmf_lib.experiments.liu._liu_mf import load_split

    tr, te = load_split("ml-100k", p)
    assert m["guards"]["gain_over_bias_only"] == pytest.approx(baselines.item_means_rmse(tr, te) - 0.94)
    assert seen[0][:3] == ("choose", 8, 2)
    assert seen[1:] == [(liu_fig2.PAPER_CONSTANTS, 2, 0.02, 0.005), ("csgd", 2, 0.08, 0.05), ("csgd-1t", 1, 0.08, 0.05)]
    assert set(df.solver) == {liu_fig2.PAPER_CONSTANTS, "csgd", "csgd-1t", "libmf", _liu_select.GRID_SOLVER}
    import matplotlib.pyplot as plt

    plt.close(liu_fig2.plot(df, p))  # the grid's rows (no wall time) are left out of the figure


def test_fig2_title_names_only_the_solvers_that_ran():
    """At `paper` surprise does not run; the title used to list it anyway (issue #14 audit)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from dpmf_lib.experiments.liu import liu_fig2

    rows = [{"dataset": "ml-100k", "d": 16, "solver": s, "wall": w, "test_rmse": 1.0 - 0.01 * w, "epoch": e}
            for s in ("csgd", "csgd-1t", "sgld", "libmf") for e, w in ((1, 0.1), (2, 0.2))]
    fig = liu_fig2.plot(pd.DataFrame(rows), {})
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert "(C-SGD, SGLD, libmf)" in title and "surprise" not in title
