"""Review of dd6066c / 744ec12 (Liu Figs 2-6 on ML-100K): Figure 2's speed-up interpolates each time to the target
and is guarded (C-SGD flattened, libmf's crossing bracketed, times ≥ 1 s); Figure 6's overfitting measure is signed;
Figure 4 has a per-dataset ``repeats`` and a per-size signed paired difference; the ML-100K SGLD-slower counterpart
has its parent's margin; a non-finite global bias reads "diverged" like the other non-finite factors."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.claims import DIFFERS, INCONCLUSIVE, REPRODUCED, Measurement, load_claims
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments import _liu_mf as lm
from dpmf_lib.experiments import liu_fig2, liu_fig4, liu_fig6
from dpmf_lib.mf.model import init_model
from dpmf_lib.params import load_params
from dpmf_lib.verdicts import judge, judge_measurement

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
    ok = {"csgd_late_improvement": 0.0, "libmf_crossing_bracketed": 1.0, "seconds_to_target": 5.6}
    assert _judge_fig2(ok, claim=claim).verdict == REPRODUCED
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
    assert set(ms[0]["guards"]) == {"csgd_late_improvement", "libmf_crossing_bracketed", "seconds_to_target"}
    assert "interpolated" in ms[0]["note"]


# ---- Figure 6: signed overfitting ----

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
    assert judge_measurement(CLAIMS[claim], m).verdict == DIFFERS


def test_fig6_run_measures_the_signed_gap(monkeypatch):
    curve = pd.DataFrame({"solver": "csgd", "d": 16, "threads": 1, "epoch": [1, 2, 3, 4], "seconds": 0.1,
                          "wall": [0.1, 0.2, 0.3, 0.4], "test_rmse": [0.99, 0.97, 0.96, 0.958]})
    monkeypatch.setattr(liu_fig6, "run_csgd", lambda *a, **k: curve.copy())
    p = load_params("liu_fig6", "smoke", {"max_ratings": 5000, "epochs": 4, "threads": 1})
    (m,) = liu_fig6.run(p, sgld=False).attrs["measurements"]
    assert m["value"] == pytest.approx(0.958 - 0.96)


# ---- Figure 4: per-dataset repeats and the per-size paired difference ----

def test_fig4_paper_repeats_are_per_dataset():
    p = load_params("liu_fig4", "paper")
    assert liu_fig4.repeats_for(p, "ml-100k") == 10
    assert liu_fig4.repeats_for(p, "netflix") == p["repeats"] == 3  # the stand-in keeps its 3
    assert liu_fig4.repeats_for(load_params("liu_fig4", "ci"), "ml-100k") == 3
    for bad in (0, 2.5, "3", True):
        with pytest.raises(ParameterError, match="dataset_repeats"):
            liu_fig4.repeats_for({**p, "dataset_repeats": {"ml-100k": bad}}, "ml-100k")
    with pytest.raises(ParameterError, match="dataset_repeats"):
        liu_fig4.repeats_for({**p, "dataset_repeats": [10]}, "ml-100k")


def test_fig4_run_uses_the_datasets_repeats(monkeypatch):
    seen = []

    def point(zeta, repeat, table_size, train, test, params):
        seen.append(repeat)
        return {"test_rmse_avg": 1.0 + 0.001 * repeat + (0.01 if table_size == 10 else 0.0), "test_rmse": 1.0,
                "v_spread": 0.1, "diverged": False}
    monkeypatch.setattr(liu_fig4, "table_point", point)
    p = load_params("liu_fig4", "smoke", {"max_ratings": 5000, "threads": 1, "n_jobs": 1, "repeats": 1,
                                         "dataset_repeats": {"ml-100k": 4}, "table_sizes": [10, 10000, 100000]})
    df = liu_fig4.run(p)
    assert sorted(set(seen)) == [0, 1, 2, 3] and df.repeat.nunique() == 4
    ms = df.attrs["measurements"]
    assert [m["setting"] for m in ms] == ["zeta=1, size=10000", "zeta=1, size=100000"]
    assert all(m["value"] == pytest.approx(0.0) and m["guards"]["power_smallest_table"] == pytest.approx(0.01)
               for m in ms)
    assert "over 4 runs" in ms[0]["note"]


def test_fig4_size_differences_are_signed_paired_means():
    rows = []
    for rep, (fresh, t10, t1e4, t1e5) in enumerate([(0.97, 1.04, 0.972, 0.965), (0.98, 1.05, 0.984, 0.977)]):
        rows += [{"repeat": rep, "table_size": s, "test_rmse_avg": v}
                 for s, v in [(0, fresh), (10, t10), (10_000, t1e4), (100_000, t1e5)]]
    diffs, power = liu_fig4.size_differences(pd.DataFrame(rows))
    assert diffs == pytest.approx({10_000: 0.003, 100_000: -0.004})  # signed: not max |.| = 0.004 of one size
    assert power == pytest.approx(0.07)
    rows[2]["test_rmse_avg"] = float("inf")  # a diverged run at 10,000: that size has no finite value
    diffs, _ = liu_fig4.size_differences(pd.DataFrame(rows))
    assert math.isinf(diffs[10_000]) and math.isfinite(diffs[100_000])


def test_fig4_claim_is_reproduced_only_when_every_size_is_within_the_tolerance():
    claim = CLAIMS["liu-6.4-lookup-table-10k-indistinguishable-ml-100k"]

    def meas(setting, values):
        m = Measurement(claim.id, values[0], "ml-100k", True, setting=setting,
                        guards={"power_smallest_table": 0.05}).as_dict()
        m.update(values=values, profile="paper")
        return m
    near = [0.0005, -0.0004, 0.0002, -0.0001, 0.0003]
    assert judge(claim, [meas("zeta=1, size=10000", near), meas("zeta=1, size=100000", near)]).verdict == REPRODUCED
    off = [0.009, 0.010, 0.011, 0.0095, 0.0105]
    assert judge(claim, [meas("zeta=1, size=10000", off), meas("zeta=1, size=100000", near)]).verdict == DIFFERS


# ---- cosmetic: margins and messages ----

def test_sgld_slower_ml100k_has_its_parents_margin():
    base, ours = CLAIMS["liu-6.3-sgld-slower-than-sgd"], CLAIMS["liu-6.3-sgld-slower-than-sgd-ml-100k"]
    assert ours.margin == base.margin and ours.direction == base.direction


def test_a_non_finite_global_bias_reads_diverged():
    model = init_model(3, 3, 2, b0=float("nan"))
    with pytest.raises(ParameterError, match="diverged") as e:
        lm.require_finite(model, solver="sgld", d=2, dataset="ml-100k", hint="eta0*N=0.02")
    assert "b0" in str(e.value) and "eta0*N=0.02" in str(e.value)


def test_fig2_title_names_only_the_solvers_that_ran():
    """At `paper` surprise does not run; the title used to list it anyway (issue #14 audit)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from dpmf_lib.experiments import liu_fig2

    rows = [{"dataset": "ml-100k", "d": 16, "solver": s, "wall": w, "test_rmse": 1.0 - 0.01 * w, "epoch": e}
            for s in ("csgd", "csgd-1t", "sgld", "libmf") for e, w in ((1, 0.1), (2, 0.2))]
    fig = liu_fig2.plot(pd.DataFrame(rows), {})
    title = fig._suptitle.get_text()
    plt.close(fig)
    assert "(C-SGD, SGLD, libmf)" in title and "surprise" not in title
