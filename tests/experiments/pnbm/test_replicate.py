"""The PNBM figures' replicate run (``rerun_selected``): at the first seed it reproduces the full run's claim
measurements exactly; at a further seed it evaluates only the selected configurations the claims read."""

import math

import pytest

from dpmf_lib.errors import DatasetUnavailable, ParameterError
from dpmf_lib.experiments.pnbm import pnbm_fig1, pnbm_fig2, pnbm_fig3
from dpmf_lib.nbm import runs
from dpmf_lib.params import load_params

# smoke-sized, but with more than one configuration per grid, two folds and successive halving, so that the
# selection is not trivial and the selected rows mix fold-1 grid rows with survivor rows; 8 SGLD steps / rounds, the
# fewest whose second halves give the chain guards a finite split-R-hat
OVERRIDES = {
    "pnbm_fig1": {"folds": [1, 2], "epsilons": [1.0, 20.0], "pnbm_K": [1, 2], "pnbm_eta": [0.1, 0.4],
                  "mf_K": [2, 3], "fold_halving_keep": 1, "clipped_grid": {"eta": [0.1], "K": [1], "lam": [0.005],
                                                                             "beta": [10], "C": [10]}},
    "pnbm_fig2": {"folds": [1, 2], "dpps_rho": [0.006, 0.09], "mf_eta": [2.0e-8, 8.0e-6], "fold_halving_keep": 1,
                  "T": 8, "mf_rounds": 8},
    "pnbm_fig3": {"folds": [1, 2], "pnbm_K": [1, 2], "dpps_rho": [0.006, 0.09], "fold_halving_keep": 1,
                  "dpps_halving_keep": 1, "T": 8},
}
MODULES = {"pnbm_fig1": pnbm_fig1, "pnbm_fig2": pnbm_fig2, "pnbm_fig3": pnbm_fig3}


@pytest.fixture(scope="module", autouse=True)
def ml100k():
    try:
        runs.fold_data("ml-100k", 1)
    except DatasetUnavailable:
        pytest.skip("ML-100K not available")


@pytest.fixture(scope="module", params=sorted(MODULES))
def full(request):
    name = request.param
    p = load_params(name, "smoke", OVERRIDES[name])
    return name, p, MODULES[name].run(p)


def _key(m):
    return m["claim"], m["dataset"], m.get("setting", "")


def test_seed0_rerun_equals_the_full_run(full):
    name, p, df = full
    base = df.attrs["measurements"]
    assert base, f"{name}: the test parameters must measure claims"
    again = MODULES[name].rerun_selected(df)(dict(p))
    got = again.attrs["measurements"]
    assert [_key(m) for m in got] == [_key(m) for m in base]
    for a, b in zip(got, base):  # exactly: same selected configs, same folds, same seed
        assert a["value"] == b["value"] and a["guards"] == b["guards"] and a["note"] == b["note"], (name, a, b)
    # the re-evaluated rows are the full run's selected rows (one config per (method, ε), on every fold)
    for _, r in again[again.method != "chains"].iterrows():
        row = df[(df.method == r.method) & df.selected & (df.config == r.config)
                 & ((df.epsilon == r.epsilon) | (df.epsilon.isna() & math.isnan(r.epsilon)))]
        assert len(row) == 1 and row.rmse.iloc[0] == r.rmse and row.n_folds.iloc[0] == r.n_folds == len(p["folds"])


def test_further_seed_evaluates_only_the_selected_configs(full, monkeypatch):
    name, p, df = full
    mod = MODULES[name]
    calls, evals, chains = [], [], []
    real_run_grid, real_evaluate, real_batch = runs.run_grid, runs.evaluate, runs.sample_pnbm_batch

    def spy_run_grid(method, dataset, folds_, epsilons, grid, *a, **kw):
        calls.append((method, tuple(epsilons), {k: list(v) for k, v in grid.items()}, tuple(folds_)))
        return real_run_grid(method, dataset, folds_, epsilons, grid, *a, **kw)

    def spy_evaluate(method, *a, **kw):
        evals.append(method)
        return real_evaluate(method, *a, **kw)

    def spy_batch(train, chain_list, *a, **kw):
        chains.extend(chain_list)
        return real_batch(train, chain_list, *a, **kw)

    monkeypatch.setattr(runs, "run_grid", spy_run_grid)
    monkeypatch.setattr(runs, "evaluate", spy_evaluate)
    monkeypatch.setattr(runs, "sample_pnbm_batch", spy_batch)
    rerun = mod.rerun_selected(df)
    out = rerun({**p, "seed": 1})

    needed = mod.claim_inputs(p)
    assert len(calls) == len(needed)
    assert sorted(m for m, *_ in calls) == sorted(m for m, _ in needed)
    for method, eps, grid, folds_ in calls:
        assert len(eps) == 1 and all(len(v) == 1 for v in grid.values()) and folds_ == tuple(p["folds"])
        sel = df[(df.method == method) & df.selected]
        sel = sel[sel.epsilon.isna()] if eps[0] is None else sel[sel.epsilon == eps[0]]
        assert len(sel) == 1
        assert sel.config.iloc[0] == ", ".join(f"{k}={v[0]}" for k, v in grid.items())  # the seed-0 selection
    n_chain_calls = sum(1 for m, *_ in calls if m in ("dpps-pnbm", "sgld-pnbm"))
    assert len(evals) == (len(calls) - n_chain_calls) * len(p["folds"])
    # the grid's chains, then the chain guards' chains of the selected DPPS-PNBM configuration (first fold only)
    n_guarded = sum(1 for m, _ in getattr(mod, "chain_inputs", lambda p: [])(p) if m == "dpps-pnbm")
    assert len(chains) == n_chain_calls * len(p["folds"]) + n_guarded * p.get("n_chains", 0)
    # the new seed reached the models: every DP method's re-evaluated RMSE moved, the seed-free kNN ones did not
    for _, r in out[out.method != "chains"].iterrows():
        sel = df[(df.method == r.method) & df.selected & (df.config == r.config)
                 & ((df.epsilon == r.epsilon) | (df.epsilon.isna() & math.isnan(r.epsilon)))]
        assert len(sel) == 1
        if r.method in ("pcc", "cos"):
            assert r.rmse == sel.rmse.iloc[0], (name, r.method)
        elif r.method.startswith(("dpsgd", "dpps")):
            assert r.rmse != sel.rmse.iloc[0], (name, r.method, r.epsilon)
    # the same claims, with the same guards, at the new seed; the DP numbers move with the seed
    base, got = df.attrs["measurements"], out.attrs["measurements"]
    assert [_key(m) for m in got] == [_key(m) for m in base]
    assert [sorted(m["guards"]) for m in got] == [sorted(m["guards"]) for m in base]
    assert all(math.isfinite(v) for m in got for v in [m["value"], *m["guards"].values()])
    assert all(a["value"] != b["value"] for a, b in zip(got, base)), name  # every claim reads a DP method
    # k_grid_interior is a fact of the first seed's selection: the same at every seed; the chains are re-run at it
    for a, b in zip(got, base):
        if "k_grid_interior" in b["guards"]:
            assert a["guards"]["k_grid_interior"] == b["guards"]["k_grid_interior"]
        if "chain_split_rhat" in b["guards"]:
            assert a["guards"]["chain_split_rhat"] != b["guards"]["chain_split_rhat"], a["claim"]
    # every chain guards' row: the selected configuration's, on the first fold, over n_chains chains
    want = sorted(m for m, _ in getattr(mod, "chain_inputs", lambda p: [])(p))
    ch = out[out.method == "chains"]
    if want:
        assert sorted(ch.traced) == want
        assert (ch.fold == p["folds"][0]).all() and (ch.n_chains == p["n_chains"]).all()
    else:
        assert not len(ch)


def test_rerun_refuses_other_folds(full):
    name, p, df = full
    with pytest.raises(ParameterError, match="folds"):
        MODULES[name].rerun_selected(df)({**p, "folds": [1], "seed": 1})


def test_replicate_takes_the_claims_from_fresh_seeds_not_the_selecting_one(full, tmp_path):
    """Seed 0's value is the minimum that made the selection (biased): the claims' values are the reruns at seeds
    1..n, and they are recorded as such."""
    from dpmf_lib.outputs import NotebookRun

    name, p, df = full
    nb = NotebookRun(name, "smoke", OVERRIDES[name], out_dir=tmp_path / name)
    rerun = MODULES[name].rerun_selected(df)
    table = rerun.replicate(nb, n_seeds=2)
    assert nb.replicate_seeds == [p["seed"] + 1, p["seed"] + 2]
    direct = [MODULES[name].rerun_selected(df)({**p, "seed": s}).attrs["measurements"] for s in (1, 2)]
    assert [m["values"] for m in nb.measurements] == [[a["value"], b["value"]] for a, b in zip(*direct)]
    base = {_key(m): m["value"] for m in df.attrs["measurements"]}
    assert all(base[_key(m)] not in m["values"] for m in nb.measurements)
    assert list(table.seeds) == [2] * len(table)
    # one seed needed (no verdict at this profile): the first seed's value is kept as the indicative one, for free
    nb1 = NotebookRun(name, "smoke", OVERRIDES[name], out_dir=tmp_path / (name + "-1"))
    rerun.replicate(nb1, n_seeds=1)
    assert nb1.replicate_seeds == [p["seed"]] and [m["values"] for m in nb1.measurements] == [[v] for v in base.values()]


def test_selected_point_reads_a_frame_back_from_its_csv(full, tmp_path):
    """PCC/COS have an empty config, which a CSV reads back as NaN: the rerun must still find their point."""
    import pandas as pd

    name, p, df = full
    path = tmp_path / "f.csv"
    df.to_csv(path, index=False)
    back = pd.read_csv(path)
    back.attrs = df.attrs
    got = MODULES[name].rerun_selected(back)(dict(p)).attrs["measurements"]
    assert [m["value"] for m in got] == [m["value"] for m in df.attrs["measurements"]]


@pytest.mark.parametrize("name,takes_epsilons", [("pnbm_fig1", True), ("pnbm_fig3", False)])
def test_fig1_and_fig3_run_through_the_shared_full_run(monkeypatch, name, takes_epsilons):
    """pnbm_fig1.run and pnbm_fig3.run were two copies of one body: both go through _pnbm_common.full_run with the
    figure's own specs, finish and measurements (their outputs are checked by the tests above; the refactoring left a
    smoke run's CSV byte-identical)."""
    from dpmf_lib.experiments.pnbm import _pnbm_common

    mod, seen = MODULES[name], []
    monkeypatch.setattr(mod, "full_run", lambda params, specs, finish, measure, **kw: seen.append(
        (params, specs, finish, measure, kw)) or "frame", raising=True)
    p = load_params(name, "smoke", OVERRIDES[name])
    assert mod.run(p) == "frame"
    assert seen == [(p, mod.specs, mod.finish, mod.measurements,
                     {"epsilons": True} if takes_epsilons else {"chains": mod.chain_inputs})]
    assert mod.full_run is not _pnbm_common.full_run  # (the spy) ...
    monkeypatch.undo()
    assert mod.full_run is _pnbm_common.full_run  # ... stood in for the shared body


def test_full_run_checks_epsilons_first_where_the_figure_takes_them(monkeypatch):
    from dpmf_lib.experiments.pnbm import _pnbm_common

    monkeypatch.setattr(runs, "available", lambda ds: pytest.fail("data touched before the parameters were checked"))
    p = load_params("pnbm_fig1", "smoke", {**OVERRIDES["pnbm_fig1"], "epsilons": [0.0]})
    with pytest.raises(ParameterError, match="epsilon"):
        pnbm_fig1.run(p)
    with pytest.raises(ParameterError, match="epsilon"):
        _pnbm_common.full_run(p, pnbm_fig1.specs, pnbm_fig1.finish, pnbm_fig1.measurements, epsilons=True)
