"""The guards the judging rules require of the chapter-4 claims (dpmf_lib.verdicts.KINDS), as the chapter-4 figures
record them (dpmf_lib/experiments/balu/_balu_ch4_guards.py): hand-made cases of each guard, the models each claim
reads, the fresh seeds' guards read from the selection they re-fit, and every chapter-4 claim of a kind recording a
guard for each requirement of it at the `canary` profile."""

from __future__ import annotations

import importlib
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from dpmf_lib.claims import load_claims
from dpmf_lib.data.ratings import DataSource
from dpmf_lib.experiments import module_name
from dpmf_lib.experiments.balu import _balu_ch4_guards as G
from dpmf_lib.params import load_params
from dpmf_lib.sketch.runs import search_flags
from dpmf_lib.verdicts import KINDS, judge_measurement, load_notes, required_guards


def _r(dataset: str = "ml-100k", real: bool = True):
    return SimpleNamespace(source=DataSource(dataset, real))


def _row(method, eta_edge=False, lam_edge=False, split=0, test=0.90, bias=0.95, **kw):
    return {"method": method, "split": split, "eta_on_edge": eta_edge, "lam_on_edge": lam_edge, "test_rmse": test,
            "bias_only_test_rmse": bias, **kw}


# ------------------------------------------------------------------------------------------------ the guards by hand
def test_a_selection_on_the_edge_of_its_search_gives_0_and_an_interior_one_1():
    """The edge is the search's own (search_flags: the values it evaluated, stage 2 included)."""
    trace = [{"eta": eta, "lam": lam} for eta in (0.01, 0.03, 0.1) for lam in (0.01, 0.1)]
    top = search_flags({"eta": 0.1, "lam": 0.1}, trace, refined=False)  # η at the top of the grid
    inside = search_flags({"eta": 0.03, "lam": 0.1}, trace + [{"eta": 0.03, "lam": 0.3}], refined=True)
    assert top["eta_on_edge"] and not inside["eta_on_edge"] and not inside["lam_on_edge"]
    edge = pd.DataFrame([_row("cs", top["eta_on_edge"], top["lam_on_edge"]),
                         _row("regular", inside["eta_on_edge"], inside["lam_on_edge"])])
    assert G.selection_off_grid_edge(edge, ["method"]) == 0.0
    assert G.selection_off_grid_edge(edge[edge.method == "regular"], ["method"]) == 1.0
    assert G.cells_off_grid_edge(edge, ["method"]) == 0.5
    # a value the search did not vary (λ fixed per point) was not chosen: not on an edge
    fixed = search_flags({"eta": 0.03, "lam": 0.0}, [{"eta": e, "lam": 0.0} for e in (0.01, 0.03, 0.1)],
                         refined=False)
    assert not fixed["lam_on_edge"]
    assert G.selection_off_grid_edge(pd.DataFrame([_row("cs", fixed["eta_on_edge"], fixed["lam_on_edge"])]),
                                     ["method"]) == 1.0


def test_edge_guards_read_every_split_and_cells_need_every_configuration():
    df = pd.DataFrame([_row("a", d=1, split=0), _row("a", d=1, split=1, lam_edge=True),  # searched on each split
                       _row("b", d=1), _row("a", d=2), _row("b", d=2)])
    assert G.selection_off_grid_edge(df, ["method", "d"]) == 0.0
    assert G.cells_off_grid_edge(df, ["method", "d"]) == pytest.approx(3 / 4)  # configurations
    assert G.cells_off_grid_edge(df, ["method", "d"], cell=["d"]) == pytest.approx(1 / 2)  # d = 1 has one on the edge
    # not measured: no rows, or rows without the search's flags (a NaN guard fails, never passes)
    assert math.isnan(G.selection_off_grid_edge(df.iloc[:0], ["method"]))
    assert math.isnan(G.cells_off_grid_edge(df.drop(columns="eta_on_edge"), ["method"]))


def test_a_model_worse_than_bias_only_gives_a_negative_gain():
    df = pd.DataFrame([_row("cs", split=0, test=0.90, bias=0.95), _row("cs", split=1, test=0.92, bias=0.97),
                       _row("fh", split=0, test=0.97, bias=0.95), _row("fh", split=1, test=0.98, bias=0.97)])
    # means over the splits: bias-only 0.96, count sketch 0.91, feature hashing 0.975 (worse than bias-only)
    assert G.gain_over_bias_only(df[df.method == "cs"], ["method"]) == pytest.approx(0.05)
    assert G.gain_over_bias_only(df, ["method"]) == pytest.approx(-0.015)
    assert math.isnan(G.gain_over_bias_only(df.iloc[:0], ["method"]))
    assert math.isnan(G.gain_over_bias_only(df.drop(columns="bias_only_test_rmse"), ["method"]))


# ------------------------------------------------------------------------------------ what each claim reads
def _fig4_5_frame():
    """Count sketch trains only at λ = 0.1 (η on the grid's top), bias-only at λ = 1, worse than it at λ = 0; at
    λ = 0 regular is the better of the two others."""
    rows = []
    for s in (0, 1):
        rows += [_row("count_sketch", lam=0.1, split=s, test=0.92, eta_edge=True),
                 _row("count_sketch", lam=1.0, split=s, test=0.95), _row("count_sketch", lam=0.0, split=s, test=0.96),
                 _row("regular", lam=0.0, split=s, test=0.955), _row("feature_hashing", lam=0.0, split=s, test=0.97,
                                                                      eta_edge=True)]
    return pd.DataFrame(rows)


def test_fig4_5_guards_read_the_thesis_lambda_the_runner_up_and_the_winner():
    from dpmf_lib.experiments.balu import balu_fig4_5 as f5

    df = _fig4_5_frame()
    best = f5.compared_guards(df, [("count_sketch", 0.1), ("count_sketch", 1.0)])
    assert best == {"selection_off_grid_edge": 0.0, "gain_over_bias_only": pytest.approx(0.0)}
    zero = f5.compared_guards(df, [("count_sketch", 0.0), ("regular", 0.0)])  # the winner only: fh's edge not read
    assert zero == {"selection_off_grid_edge": 1.0, "gain_over_bias_only": pytest.approx(-0.01)}
    missing = f5.compared_guards(df, [("count_sketch", 0.01)])
    assert all(math.isnan(v) for v in missing.values())


def test_fig4_4_edge_guard_reads_count_sketch_and_the_better_of_the_others(monkeypatch):
    from dpmf_lib.experiments.balu import balu_fig4_4 as f4

    rows = []
    for dr in (8, 16):
        rows += [_row("count_sketch", d_r=dr, test=0.93), _row("regular", d_r=dr, test=0.92, lam_edge=dr == 16),
                 _row("feature_hashing", d_r=dr, test=0.94, eta_edge=True)]  # never the better one: not read
    df = pd.DataFrame(rows).assign(degenerate=False, dataset="ml-100k", real=True)
    monkeypatch.setattr(f4._balu_ch4_runs, "run_configs", lambda *a, **k: df.drop(columns=["dataset", "real"]))
    r = SimpleNamespace(source=DataSource("ml-100k", True))
    (m,) = f4.run_on(r, [], load_params("balu_fig4_4", "smoke")).attrs["measurements"]
    assert m["guards"] == {"cells_not_degenerate": 1.0, "cells_off_grid_edge": 0.5}


def _fig4_7_frame(edge_cells=(), test=0.93):
    rows = []
    for d in (8, 16):
        rows.append(_row("regular", d=d, gamma=1.0, clip_threshold=math.inf, test=test, kld=0.5))
        for g in (1.0, 4.0):
            for c in (2.0, math.inf):
                rows.append(_row("count_sketch", d=d, gamma=g, clip_threshold=c, test=test - 0.001 * min(c, 8),
                                 kld=0.01 * min(c, 8), eta_edge=(d, g, c) in edge_cells,
                                 clipped_share=0.03 if c < math.inf else 0.0))
    return pd.DataFrame(rows)


def test_fig4_7_and_4_8_guards_and_the_fresh_seeds_read_the_selection_they_refit():
    from dpmf_lib.experiments.balu import balu_fig4_7 as f7

    full = _fig4_7_frame(edge_cells={(8, 4.0, 2.0), (8, 4.0, math.inf)})
    (rm,) = f7.measure_rmse(full, _r())
    assert rm.guards == {"gain_over_bias_only": pytest.approx(0.95 - 0.93 + 0.002),
                         "cells_off_grid_edge": pytest.approx(6 / 8),
                         "smallest_threshold_clips": pytest.approx(0.03)}
    ms = {m.claim: m for m in f7.measure_kld(full, _r())}
    assert ms[f7.CLAIMS_KLD["ml-100k"]].guards == rm.guards
    # its fair form reads unclipped regular and clipped count sketch at γ = 1: none of 2 + 2 on the edge
    assert ms[f7.CLAIMS_KLD_REG_EQUAL["ml-100k"]].guards == {"gain_over_bias_only": pytest.approx(0.02),
                                                              "cells_off_grid_edge": 1.0}
    # "regular leaks more" reads unclipped regular and the clipped count-sketch cells: one of 2 + 4 on the edge
    assert ms[f7.CLAIMS_KLD_REG["ml-100k"]].guards == {"gain_over_bias_only": pytest.approx(0.02),
                                                        "cells_off_grid_edge": pytest.approx(5 / 6)}
    assert not ms[f7.CLAIMS_KLD_SMALL["ml-100k"]].guards  # compares no models
    # a fresh seed's re-fit ran no search (no flags set): the edge guard is the full run's selection's, the gain its
    # own — here a re-fit worse than bias-only
    refit = _fig4_7_frame(test=0.97)
    (fresh,) = f7.measure_rmse(refit, _r(), selection=full)
    assert fresh.guards["cells_off_grid_edge"] == pytest.approx(6 / 8)
    assert fresh.guards["gain_over_bias_only"] == pytest.approx(0.95 - 0.968)
    assert f7.measure_rmse(refit, _r())[0].guards["cells_off_grid_edge"] == 1.0


def test_fig4_1_edge_guard_is_the_share_of_live_cells_with_both_k_inside():
    from dpmf_lib.experiments.balu import balu_fig4_1 as f1

    rows = []
    for k in (1, 4):
        for d in (2, 8):
            for g in (1.0, 4.0):
                rows.append({"k": k, "d": d, "gamma": g, "split": 0, "test_rmse": 1.0 - 0.01 * (k == 4),
                             "degenerate": (d, g) == (8, 4.0) and k == 1, "eta_on_edge": (k, d, g) == (4, 2, 4.0),
                             "lam_on_edge": (k, d, g) == (4, 8, 4.0)})  # (8, 4) is not live: its edge is not read
    df = pd.DataFrame(rows)
    (m,) = f1.measure(df, _r(), {})
    assert m.guards["live_cells"] == 3 and m.guards["cells_off_grid_edge"] == pytest.approx(2 / 3)
    # a fresh seed's re-fit (no search, no flags) reads the full run's selection over its own live cells
    refit = df.assign(eta_on_edge=False, lam_on_edge=False, degenerate=False)
    (fresh,) = f1.measure(refit, _r(), {}, selection=df)
    assert fresh.guards["live_cells"] == 4 and fresh.guards["cells_off_grid_edge"] == pytest.approx(2 / 4)


def test_a_many_cell_claim_reproduces_with_one_cell_in_ten_on_the_edge_at_most():
    """The share rule of the many-cell claims: 0.9 of the cells inside holds, fewer fails (inconclusive)."""
    from dpmf_lib.claims import Measurement

    claim = next(c for c in load_claims() if c.id == "balu-4.2.4.3-kld-grows-with-eps-ml-100k")
    for share, want in ((0.92, "reproduced"), (0.86, "inconclusive")):
        m = Measurement(claim.id, 0.7, "ml-100k", True).as_dict()
        m.update(values=[0.7, 0.75, 0.72, 0.68, 0.74], profile="paper",
                 guards={"cells_off_grid_edge": [share] * 5, "gain_over_bias_only": [0.008] * 5,
                         "smallest_threshold_clips": [0.25] * 5})
        assert judge_measurement(claim, m).verdict == want, share


# --------------------------------------------------------------------- every claim of a kind at the canary profile
ROWS = ["balu_fig4_1", "balu_fig4_2", "balu_fig4_3", "balu_fig4_4", "balu_fig4_5", "balu_fig4_6", "balu_fig4_7",
        "balu_fig4_8", "balu_table4_2"]
# fresh seeds that do not run the whole figure again (which is the full run's own code): their re-fits and
# re-selections measure with the full run's selection
REFIT = {"balu_fig4_1", "balu_fig4_6", "balu_fig4_7", "balu_fig4_8"}


@pytest.fixture(scope="module")
def cache_here(tmp_path_factory):
    """One result cache for the module: Figure 4.8 reads Figure 4.7's runs from it, as at `paper`."""
    tmp = tmp_path_factory.mktemp("ch4_canary")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DPMF_FIGURES_DIR", str(tmp / "figures"))
        mp.setenv("DPMF_CACHE_DIR", str(tmp / "cache"))
        mp.setenv("DPMF_CACHE", "on")
        mp.setenv("DPMF_SWEEP_BACKEND", "sequential")
        yield


def _check_kinds(ms: list[dict]) -> int:
    """Assert each measurement records every guard its claim is judged by (its own, and for every requirement of its
    kinds one it accepts, else the kind's default), finite wherever the claim's value is (a mean over no live cell
    is NaN, and so is its share of cells); returns how many measurements had kinds."""
    claims = {c.id: c for c in load_claims()}
    notes = load_notes()
    n = 0
    for m in ms:
        kinds = notes[m["claim"]].kinds if m["claim"] in notes else ()
        n += bool(kinds)
        names = {g.name for g, _ in required_guards(claims[m["claim"]], notes.get(m["claim"]))}
        for kind in kinds:
            for req in KINDS[kind]:
                met = names & (set(req.accepts) | {g.name for g in req.defaults}) & set(m["guards"])
                assert met, (m["claim"], kind, req.what, sorted(m["guards"]))
        for g in names:
            assert g in m["guards"], (m["claim"], g, m["guards"])
            assert math.isfinite(m["guards"][g]) or not math.isfinite(m["value"]), (m["claim"], g, m["guards"])
    return n


@pytest.mark.slow
@pytest.mark.parametrize("name", ROWS)
def test_every_chapter4_claim_records_the_guards_of_its_kinds_at_canary(cache_here, name):
    mod = importlib.import_module(module_name(name))
    p = load_params(name, "canary", {"n_jobs": 1})
    df = mod.run(p)
    ms = df.attrs["measurements"]
    assert _check_kinds(ms) >= 1, [m["claim"] for m in ms]
    if name in REFIT:  # every seed's measurement, not only the first's
        fresh = mod.fresh_seeds(df, p)({**p, "seed": p["seed"] + 1}).attrs["measurements"]
        assert [m["claim"] for m in fresh] == [m["claim"] for m in ms]
        _check_kinds(fresh)
        if name in ("balu_fig4_7", "balu_fig4_8"):  # the same selection re-fitted: the same edge guard
            assert [m["guards"].get("cells_off_grid_edge") for m in fresh] == \
                [m["guards"].get("cells_off_grid_edge") for m in ms]
