"""Protocol helpers of Balu 2016 chapter 4 (mean correction, thresholding, line search, KLD) and smoke runs."""

from dpmf_lib.experiments import module_name
import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.sketch import (fit_eval, kld_gaussian, line_search, make_model, mean_correction, prepare_split, train)
from dpmf_lib.sketch.runs import as_clip


def _ratings(n_users=60, n_items=40, n=2000, seed=0):
    rng = np.random.default_rng(seed)
    key = rng.choice(n_users * n_items, size=n, replace=False)
    u, i = key // n_items, key % n_items
    P, Q = rng.normal(0, 0.7, (n_users, 3)), rng.normal(0, 0.7, (n_items, 3))
    v = np.clip(np.round(3 + (P[u] * Q[i]).sum(1) + rng.normal(0, 0.3, n)), 1, 5)
    return Ratings(u.astype(np.int32), i.astype(np.int32), v.astype(np.float32), n_users, n_items, (1.0, 5.0),
                   DataSource("toy", False, note="test"))


def test_kld_gaussian_formula_4_15():
    rng = np.random.default_rng(0)
    a = rng.normal(0.1, 0.8, 200000)
    b = rng.normal(-0.2, 1.1, 200000)
    m1, s1, m2, s2 = a.mean(), a.var(), b.mean(), b.var()
    want = 0.5 * (s1 / s2 + (m1 - m2) ** 2 / s2 - 1 + math.log(s2 / s1))
    assert kld_gaussian(a, b) == pytest.approx(want, rel=1e-12)
    # = KL(N(m_tr, s_tr²) ‖ N(m_te, s_te²)) for the exact parameters (closed form via scipy entropy on a fine grid)
    x = np.linspace(-8, 8, 200001)
    p, q = stats.norm.pdf(x, 0.1, 0.8), stats.norm.pdf(x, -0.2, 1.1)
    assert kld_gaussian(a, b) == pytest.approx(stats.entropy(p, q), abs=5e-3)
    assert kld_gaussian(a, a) == 0.0
    assert math.isnan(kld_gaussian(np.zeros(5), b))


def test_mean_correction_hand_case():
    u = np.array([0, 0, 1, 1], np.int32)
    i = np.array([0, 1, 0, 1], np.int32)
    v = np.array([5, 3, 3, 1], np.float32)
    mu, bu, bi = mean_correction(u, i, v, 3, 3)
    assert mu == 3.0 and list(bu) == [1.0, -1.0, 0.0] and list(bi) == [1.0, -1.0, 0.0]


def test_prepare_split_thresholds_and_residuals():
    r = _ratings()
    s = prepare_split(r, 3, min_freq=10)
    assert s.info["n_train"] + s.info["n_val"] + s.info["n_val_removed"] + s.info["n_test"] + \
        s.info["n_test_removed"] == r.n_ratings
    ucount = np.bincount(s.train.users, minlength=r.n_users)
    icount = np.bincount(s.train.items, minlength=r.n_items)
    for t in (s.val, s.test):
        assert (ucount[t.users] >= 10).all() and (icount[t.items] >= 10).all()
    assert abs(float(s.train.values.mean())) < 0.05  # residuals are centred
    assert prepare_split(r, 3).train.values.tobytes() == s.train.values.tobytes()  # same seed, same bytes
    with pytest.raises(ParameterError):
        prepare_split(r, 0, fractions=(0.5, 0.5))


def test_line_search_finds_minimum_of_a_known_surface():
    calls = []

    def ev(eta, lam):
        calls.append((eta, lam))
        lam_term = (math.log10(lam) + 2.2) ** 2 if lam > 0 else 10.0
        return {"eta": eta, "lam": lam, "val_rmse": (math.log10(eta) + 1.6) ** 2 + lam_term}

    best, trace = line_search(ev, eta_grid=[0.001, 0.01, 0.1], lam_grid=[0.001, 0.01, 0.1], refine=0.5)
    assert len(calls) == len(set(calls)) == len(trace) == 9 + 8
    assert best["eta"] == pytest.approx(10 ** -1.5, rel=1e-5) and best["lam"] == pytest.approx(0.01)
    best0, _ = line_search(ev, eta_grid=[0.01], lam_grid=[0.0], refine=0.5)  # λ = 0 stays 0 in stage 2
    assert best0["lam"] == 0.0


def test_training_learns_and_is_deterministic():
    r = _ratings()
    s = prepare_split(r, 0, min_freq=5)
    base = float(np.sqrt(np.mean(s.test.values.astype(float) ** 2)))
    out = {}
    for m in ("regular", "count_sketch", "feature_hashing"):
        a = fit_eval(m, s, d=4, gamma=1.0, epochs=15, eta=0.03, lam=0.02, seed=5)
        b = fit_eval(m, s, d=4, gamma=1.0, epochs=15, eta=0.03, lam=0.02, seed=5)
        assert a["test_rmse"] == b["test_rmse"]
        out[m] = a["test_rmse"]
    assert out["regular"] < 0.9 * base  # the factor model beats the bias baseline on low-rank data
    assert out["count_sketch"] < base


def test_bad_inputs_raise_parameter_errors():
    r = _ratings()
    s = prepare_split(r, 0)
    m = make_model("regular", r.n_users, r.n_items, 2)
    for kw in ({"eta": 0.0, "lam": 0.1}, {"eta": float("nan"), "lam": 0.1}, {"eta": 0.1, "lam": -1.0},
               {"eta": 0.1, "lam": 0.1, "clip": 0.0}, {"eta": 0.1, "lam": 0.1, "clip": float("nan")}):
        with pytest.raises(ParameterError):
            train(m, s, epochs=1, **kw)
    with pytest.raises(ParameterError):
        train(m, s, epochs=0, eta=0.1, lam=0.1)
    with pytest.raises(ParameterError):
        make_model("regular", 5, 5, 2, gamma=2.0)
    assert as_clip(".inf") == math.inf and as_clip(None) == math.inf and as_clip(2) == 2.0
    with pytest.raises(ParameterError):
        as_clip(-1)


@pytest.mark.parametrize("name", ["balu_table4_2", "balu_fig4_7", "balu_fig4_4"])
def test_experiments_run_at_smoke(name, figures_tmp):
    import importlib

    from dpmf_lib.params import load_params

    mod = importlib.import_module(module_name(name))
    p = load_params(name, "smoke", {"max_ratings": 5000, "epochs": 1})
    df = mod.run(p)
    assert "dataset" in df.columns and (df.dataset == "ml-100k").all()
    assert np.isfinite(df.test_rmse).all()
    if name == "balu_fig4_7":
        assert (df.kld >= 0).all() and set(df.clip_threshold) == {0.5, math.inf}
        assert "eps" not in df.columns and df.privacy_guarantee.str.startswith("none").all()
    mod.plot(df, p)


def test_degenerate_selection_is_flagged_and_bias_only_reference_is_exact():
    """A λ so large that the factors shrink to 0 gives exactly the bias-only validation RMSE (residual prediction 0):
    run_configs flags that row ``degenerate`` and reports the bias-only RMSE; a learning cell is not flagged. The
    search flags say whether stage 2 ran and whether the choice sits on the evaluated grid's edge (#15 item 4)."""
    from dpmf_lib.sketch.runs import bias_only_rmse, run_configs, search_flags

    r = _ratings()
    s = prepare_split(r, 0, min_freq=5)
    b_val, b_test = bias_only_rmse(s)
    assert b_val == pytest.approx(float(np.sqrt(np.mean(s.val.values.astype(float) ** 2))))
    params = {"search": True, "eta": 0.03, "lam": 0.02, "eta_grid": [0.03], "lam_grid": [0.02], "refine": 0,
              "search_each_split": False, "epochs": 15, "init_scale": 0.1, "n_jobs": 1}
    # init_scale 0 and lam huge: the factors stay exactly 0 -> val RMSE equals the bias-only RMSE
    dead = {"method": "regular", "d": 4, "gamma": 1.0, "lam_grid": [50.0], "init_scale": 0.0}
    live = {"method": "regular", "d": 4, "gamma": 1.0}
    df = run_configs([dead, live], [s], params)
    assert df.bias_only_val_rmse.iloc[0] == pytest.approx(b_val) and df.bias_only_test_rmse.iloc[0] == pytest.approx(b_test)
    assert df.val_rmse.iloc[0] == pytest.approx(b_val, abs=1e-6)
    assert list(df.degenerate) == [True, False]
    assert not df.search_refined.any()
    trace = [{"eta": e, "lam": lam} for e in (0.01, 0.1) for lam in (0.0, 0.1, 1.0)]
    assert search_flags({"eta": 0.01, "lam": 0.1}, trace, refined=True) == {
        "search_refined": True, "eta_on_edge": True, "lam_on_edge": False}
    assert search_flags({"eta": 0.1, "lam": 0.1}, [{"eta": 0.1, "lam": 0.1}], refined=False)["eta_on_edge"] is False


def test_worse_than_bias_only_is_not_degenerate():
    """An over-fitting selection (validation RMSE above the bias-only one) is stated, not called degenerate."""
    from dpmf_lib.sketch.runs import run_configs

    s = prepare_split(_ratings(), 0, min_freq=5)
    # (eta 0.3, the value here before, diverged: its "over-fitting" RMSE was inf, which is now refused)
    params = {"search": False, "eta": 0.2, "lam": 0.0, "eta_grid": [0.2], "lam_grid": [0.0], "refine": 0,
              "search_each_split": False, "epochs": 200, "init_scale": 0.5, "n_jobs": 1}
    df = run_configs([{"method": "regular", "d": 16, "gamma": 1.0}], [s], params)
    row = df.iloc[0]
    assert np.isfinite(row.val_rmse) and row.val_rmse > row.bias_only_val_rmse + 5e-4
    assert bool(row.worse_than_bias_only) and not bool(row.degenerate)


def test_a_diverging_eta_is_a_named_error_not_an_inf_row():
    """balu_table4_2 with eta: 50 wrote test_rmse = inf as a normal row."""
    from dpmf_lib.errors import ParameterError
    from dpmf_lib.sketch.runs import run_configs

    s = prepare_split(_ratings(), 0, min_freq=5)
    params = {"search": False, "eta": 50.0, "lam": 0.0, "eta_grid": [50.0], "lam_grid": [0.0], "refine": 0,
              "search_each_split": False, "epochs": 5, "init_scale": 0.5, "n_jobs": 1}
    with pytest.raises(ParameterError, match=r"diverged on split 0: .* SGD diverged — lower eta \(now 50\)"):
        run_configs([{"method": "regular", "d": 16, "gamma": 1.0}], [s], params)
    with pytest.raises(ParameterError, match=r"every step size of the grid — lower eta_grid \(now \[50.0, 100.0\]\)"):
        run_configs([{"method": "regular", "d": 16, "gamma": 1.0}], [s],
                    {**params, "search": True, "eta_grid": [50.0, 100.0]})
    # one diverging point of a search is passed by: the search picks a finite one
    df = run_configs([{"method": "regular", "d": 16, "gamma": 1.0}], [s],
                     {**params, "search": True, "eta_grid": [0.03, 100.0], "lam_grid": [0.02]})
    assert np.isfinite(df.test_rmse).all() and df.eta.iloc[0] == 0.03


def test_fit_eval_many_is_fit_eval_bit_for_bit(monkeypatch):
    """The count-sketch runs of one search stage trained together (fit_eval_many, fit_runs) return fit_eval's dicts
    to the last bit (pickled bytes): with clipping, per-epoch tracking and the KLD, a run that diverges in its first
    epoch (its history stops there), a batch cut in chunks, and the fallbacks (dense factors, seed None)."""
    import pickle

    from dpmf_lib.sketch import protocol

    s = prepare_split(_ratings(), 0, min_freq=5)
    pts = [(0.003, 0.01), (0.05, 0.0), (0.02, 0.3), (40.0, 0.01), (0.01, 0.001)]
    cases = [("count_sketch", dict(k=4, d=5, gamma=2.0, clip=math.inf, track=(), with_kld=False)),
             ("feature_hashing", dict(d=4, gamma=1.0, clip=0.5, track=("val", "test"), with_kld=True)),
             ("count_sketch", dict(k=3, d=3, gamma=8.0, clip=math.inf, track=("test",), with_kld=True)),
             ("regular", dict(d=4, clip=math.inf, track=(), with_kld=False))]
    for method, kw in cases:
        kw = {**kw, "epochs": 4, "seed": 9}
        want = [fit_eval(method, s, eta=e, lam=lam, **kw) for e, lam in pts]
        got = protocol.fit_eval_many(method, s, pts, **kw)
        assert pickle.dumps(got) == pickle.dumps(want), (method, kw)
        if method == "count_sketch" and not kw["track"]:
            assert len(want[3]["history"]) == 1 and not math.isfinite(want[3]["history"][0]["train_loss"])
    n = protocol.BATCH_MIN
    assert protocol.batchable("count_sketch", 3, n) and protocol.batchable("feature_hashing", np.int64(3), n + 1)
    assert not any([protocol.batchable("regular", 3, n), protocol.batchable("count_sketch", None, n),
                    protocol.batchable("count_sketch", np.random.default_rng(0), n),
                    protocol.batchable("count_sketch", 3, n - 1)])
    kw = dict(k=4, d=5, gamma=2.0, epochs=3, seed=4)
    want = [fit_eval("count_sketch", s, eta=e, lam=lam, **kw) for e, lam in pts]
    one = make_model("count_sketch", s.n_users, s.n_items, 5, gamma=2.0, k=4).nbytes
    monkeypatch.setattr(protocol, "BATCH_BYTES", 2 * one)  # chunks of 2, 2, 1 models
    assert pickle.dumps(protocol.fit_eval_many("count_sketch", s, pts, **kw)) == pickle.dumps(want)
    # seed None: each run draws its own seed (as fit_eval), so they are not one batch
    fresh = protocol.fit_eval_many("count_sketch", s, pts[:2], **{**kw, "seed": None})
    assert fresh[0]["seed_used"] != fresh[1]["seed_used"] and not fresh[0]["seed_was_fixed"]
    # fit_runs groups runs that differ only in (eta, lam) and keeps the order given
    runs = [{"method": m, "d": 3, "gamma": 1.0, "epochs": 2, "eta": e, "lam": lam, "seed": sd}
            for sd in (1, 2) for m in ("feature_hashing", "regular") for e, lam in pts[:2]]
    runs = runs[::-1]
    assert pickle.dumps(protocol.fit_runs(runs, s)) == pickle.dumps([fit_eval(data=s, **r) for r in runs])


def test_line_search_with_evaluate_many_is_the_same_search():
    """evaluate_many gets each stage's new points in one call (duplicates and points already evaluated left out)
    and the search returns what the one-at-a-time search returns, trace order included."""
    def ev(eta, lam):
        return {"eta": eta, "lam": lam, "val_rmse": (math.log10(eta) + 1.6) ** 2 + (math.log10(lam) + 2.2) ** 2
                if eta < 0.5 else float("nan")}

    calls = []

    def ev_many(points):
        calls.append(list(points))
        return [ev(e, lam) for e, lam in points]

    grid = dict(eta_grid=[0.001, 0.01, 0.01, 0.1, 1.0], lam_grid=[0.001, 0.01, 0.1], refine=0.5)
    one = line_search(ev, **grid)
    many = line_search(ev, **grid, evaluate_many=ev_many)
    assert one == many and [len(c) for c in calls] == [12, 8]
    assert len({p for c in calls for p in c}) == 20 and many[1][-1]["val_rmse"] < math.inf


def test_run_configs_batched_equals_one_run_at_a_time():
    """run_configs trains a search stage's runs together; a trainer without ``many`` trains them one by one: the
    frames are identical (CSV bytes), search, stage 2 and refits included."""
    from dpmf_lib.sketch import runs as _runs

    r = _ratings()
    splits = [prepare_split(r, sd, min_freq=5) for sd in (0, 1)]
    params = {"search": True, "eta": 0.03, "lam": 0.02, "eta_grid": [0.01, 0.03, 50.0], "lam_grid": [0.003, 0.03],
              "refine": 0.25, "search_each_split": False, "epochs": 3, "init_scale": 0.1, "n_jobs": 1}
    configs = [{"method": "count_sketch", "d": 4, "gamma": 2.0, "k": 4},
               {"method": "feature_hashing", "d": 3, "gamma": 1.0, "clip": 0.8},
               {"method": "regular", "d": 4, "gamma": 1.0}]

    def one_at_a_time(run, data, split_seed):
        return fit_eval(data=data, **run)

    batched = _runs.run_configs(configs, splits, params)
    single = _runs.run_configs(configs, splits, params, trainers=[one_at_a_time] * len(configs))
    assert batched.to_csv(index=False) == single.to_csv(index=False)
    assert (batched.n_search_evals[batched.split == 0] > 6).all()  # stage 2 ran
