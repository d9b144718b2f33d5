"""Liu Figures 2-6 and Table 2 before their `paper` runs (#14): the initial factor scale 0.1·sqrt(16/d) reaches both
solvers (unchanged at d = 16), a diverged run raises naming solver and d, Figure 3's data are whole users with
compacted ids and Yahoo's 0-5 rescaling and step sizes, a non-finite global bias reads "diverged" like the other
non-finite factors, the claims' dataset is the one Figure 3 runs, ML-100K runs at
`paper` beside the Netflix stand-in, and Table 2 submits its largest simulation first."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.liu import _liu_mf as lm
from dpmf_lib.experiments.liu import liu_fig3, liu_fig6
from dpmf_lib.experiments.liu import liu_table2 as t2
from dpmf_lib.mf import Schedule, train_sgd
from dpmf_lib.mf.model import init_model
from dpmf_lib.params import load_params


def toy(n_users=80, n_items=120, seed=0, scale=(1.0, 5.0), step=1.0):
    """Users with 3-30 ratings each on a popularity-skewed item set; some items are never rated."""
    rng = np.random.default_rng(seed)
    pop = 1.0 / np.arange(1, n_items + 1) ** 1.2
    pop[n_items // 2:] = 0  # the second half is never rated
    users, items = [], []
    for u in range(n_users):
        k = int(rng.integers(3, 31))
        its = rng.choice(n_items, size=k, replace=False, p=pop / pop.sum())
        users += [u] * k
        items += list(its)
    n = len(users)
    vals = rng.integers(int(scale[0] / step), int(scale[1] / step) + 1, n) * step
    return Ratings(np.array(users, np.int32), np.array(items, np.int32), vals.astype(np.float32), n_users, n_items,
                   scale, DataSource("toy", real=False))


# -- 2. initial factor scale ----------------------------------------------------------------------------------------

def test_init_scale_is_exactly_the_library_default_at_d16_and_shrinks_as_one_over_sqrt_d():
    assert lm.init_scale_for(16) == 0.1
    assert lm.init_scale_for(2048) == pytest.approx(0.1 * np.sqrt(16 / 2048))
    assert lm.init_scale_for(64) == pytest.approx(0.05)


@pytest.mark.parametrize("d", [16, 512, 2048])
def test_both_solvers_get_the_scaled_init(monkeypatch, d):
    seen = {}

    class Res:
        history = pd.DataFrame({"epoch": [1], "seconds": [0.1], "wall": [0.1], "test_rmse": [1.0],
                                "updates_per_s": [1.0]})
        model = init_model(3, 3, 2)

    def fake(name):
        def f(train, **kw):
            seen[name] = kw
            return Res()
        return f

    monkeypatch.setattr(lm, "train_sgd", fake("csgd"))
    monkeypatch.setattr(lm, "sample_sgld", fake("sgld"))
    monkeypatch.setattr(lm, "ensure_warm", lambda: None)
    monkeypatch.setattr(lm, "_layout_seconds", lambda *a, **k: 0.0)
    p = load_params("liu_fig2", "smoke")
    r = toy()
    lm.run_csgd(r, r, d, 1, p, threads=1)
    lm.run_sgld(r, r, d, 1, p, threads=1)
    for name in ("csgd", "sgld"):
        assert seen[name]["init_scale"] == pytest.approx(0.1 * np.sqrt(16 / d)), name
        assert seen[name]["d"] == d


def test_at_d16_run_csgd_gives_the_bytes_of_the_library_default():
    p = load_params("liu_fig6", "smoke")
    r = toy()
    h = lm.run_csgd(r, r, 16, 2, p, threads=1)
    ref = train_sgd(r, d=16, epochs=2, schedule=Schedule(n_threads=1, block_users=lm.block_users_for(r.n_users, 1, p)),
                    test=r, seed=p["seed"], **lm.sgd_kw(p))
    assert h.test_rmse.tolist() == ref.history.test_rmse.tolist()


# -- 1. finite factors ----------------------------------------------------------------------------------------------

def test_require_finite_names_the_solver_and_d():
    m = init_model(50, 40, 8)
    lm.require_finite(m, solver="csgd", d=8, dataset="toy")  # finite: no error
    m.V[37, 3] = np.nan
    with pytest.raises(ParameterError, match=r"naive at d=8, 2 thread\(s\) on yahoo.*V"):
        lm.require_finite(m, solver="naive", d=8, dataset="yahoo", threads=2)
    m = init_model(50, 40, 8)
    m.bu[49] = np.inf
    with pytest.raises(ParameterError, match="bu"):
        lm.require_finite(m, solver="sgld", d=8, dataset="toy")


def test_fig3_stops_on_a_diverged_run(monkeypatch):
    class Res:
        history = pd.DataFrame({"epoch": [1, 2], "updates_per_s": [1.0, 1.0]})
        model = init_model(5, 5, 4)

    Res.model.U[2, 1] = np.nan
    monkeypatch.setattr(liu_fig3, "train_sgd", lambda r, **kw: Res())
    monkeypatch.setattr(liu_fig3, "sample_sgld", lambda r, **kw: Res())
    monkeypatch.setattr(liu_fig3, "ensure_warm", lambda: None)
    p = load_params("liu_fig3", "smoke")
    with pytest.raises(ParameterError, match=r"csgd at d=64, 1 thread\(s\) on ml-100k diverged"):
        liu_fig3.run(p)


def test_run_csgd_stops_on_a_diverged_run(monkeypatch):
    class Res:
        history = pd.DataFrame({"epoch": [1], "seconds": [0.1], "wall": [0.1], "test_rmse": [np.nan],
                                "updates_per_s": [1.0]})
        model = init_model(3, 3, 2)

    Res.model.V[:] = np.nan
    monkeypatch.setattr(lm, "train_sgd", lambda train, **kw: Res())
    monkeypatch.setattr(lm, "ensure_warm", lambda: None)
    r = toy()
    with pytest.raises(ParameterError, match="csgd-1t at d=2048"):
        lm.run_csgd(r, r, 2048, 1, load_params("liu_fig2", "smoke"), threads=1, label="csgd-1t")


# -- 1. Figure 3's data ---------------------------------------------------------------------------------------------

def test_whole_user_subset_keeps_whole_users_and_compacts_ids():
    r = toy()
    target = r.n_ratings // 3
    s = lm.whole_user_subset(r, target, seed=4)
    full = r.user_counts()
    # whole users: every kept user has all of its ratings; just enough users to reach the target
    assert np.array_equal(s.user_counts(), full[s.user_ids])
    perm = np.random.default_rng(4).permutation(r.n_users)  # the order users are taken in
    assert s.n_ratings >= target > full[perm[:s.n_users - 1]].sum()  # just enough users
    assert set(s.user_ids.tolist()) == set(perm[:s.n_users].tolist())
    # compact ids, every item rated, and the same (user, item, value) triples in raw ids
    assert s.users.max() == s.n_users - 1 and (s.item_counts() > 0).all()
    assert s.n_items < r.n_items
    raw = set(zip(r.users.tolist(), r.items.tolist(), r.values.tolist()))
    sub = set(zip(s.user_ids[s.users].tolist(), s.item_ids[s.items].tolist(), s.values.tolist()))
    assert sub <= raw and len(sub) == s.n_ratings
    kept = set(s.user_ids.tolist())
    assert sum(1 for u, _, _ in raw if u in kept) == s.n_ratings
    assert "whole users" in s.source.note and "ids compacted" in s.source.note
    # seeded
    s2 = lm.whole_user_subset(r, target, seed=4)
    assert np.array_equal(s.users, s2.users) and np.array_equal(s.items, s2.items)
    # None: every user, unrated items still dropped
    a = lm.whole_user_subset(r, None, seed=0)
    assert a.n_users == r.n_users and a.n_ratings == r.n_ratings and a.n_items == int((r.item_counts() > 0).sum())


def test_rescale_maps_yahoo_0_100_onto_0_5():
    r = toy(scale=(0.0, 100.0), step=1.0)
    s = lm.rescale_ratings(r, [0, 5])
    assert s.rating_scale == (0.0, 5.0)
    assert np.allclose(s.values, r.values / 20.0) and s.values.dtype == np.float32
    assert "rescaled 0–100 → 0–5" in s.source.note
    assert lm.rescale_ratings(r, None) is r
    with pytest.raises(ParameterError, match="rating_scale"):
        lm.rescale_ratings(r, [5, 0])


def test_fig3_paper_runs_yahoo_with_its_own_settings_and_whole_users(monkeypatch):
    p = load_params("liu_fig3", "paper")
    assert p["datasets"] == ["yahoo-music"] and p["max_ratings"] == 5_000_000 and 2048 in p["sweep_dims"]
    y = lm.dataset_params(p, "yahoo-music")
    assert (y["rating_scale"], y["sgd_eta0"], y["sgd_lambda"], y["sgld_zeta"]) == ([0, 5], 0.06, 0.05, 0.9)
    n = lm.dataset_params(p, "netflix")
    assert n["rating_scale"] is None and (n["sgd_eta0"], n["sgd_lambda"]) == (0.02, 0.005)
    with pytest.raises(ParameterError, match="unknown"):
        lm.dataset_params({**p, "dataset_settings": {"yahoo-music": {"eta": 1}}}, "yahoo-music")
    # load_data: whole users, compacted items, 0-5 values
    monkeypatch.setattr(liu_fig3, "load_for_mf", lambda ds, **kw: toy(scale=(0.0, 100.0)))
    r, q = liu_fig3.load_data("yahoo-music", {**p, "max_ratings": 300})
    assert r.rating_scale == (0.0, 5.0) and r.values.max() <= 5.0 and q["sgd_eta0"] == 0.06
    assert r.n_ratings >= 300 and (r.item_counts() > 0).all() and (r.user_counts() > 0).all()


def test_fig3_claims_are_about_the_data_fig3_runs():
    # the abstract's rate on Figure 3's data; Section 5's (a Netflix quote) on its own Netflix run (#14)
    from dpmf_lib.claims import load_claims

    mine = {c.id: c for c in load_claims() if c.notebook == "liu_fig3"}
    assert set(mine) == {liu_fig3.CLAIM_1024, liu_fig3.CLAIM_2048}
    assert mine[liu_fig3.CLAIM_2048].dataset == "netflix"
    for profile in ("ci", "paper"):
        p = load_params("liu_fig3", profile)
        assert mine[liu_fig3.CLAIM_1024].dataset in p["datasets"], profile
        assert p["section5_datasets"] == ["netflix"] and p["section5_d"] == 2048, profile


def test_fig3_off_sweep_dims_run_csgd_on_all_threads_only(monkeypatch):
    calls = []

    class Res:
        history = pd.DataFrame({"epoch": [1, 2], "updates_per_s": [1.0, 1.0]})
        model = init_model(3, 3, 2)

    monkeypatch.setattr(liu_fig3, "train_sgd",
                        lambda r, **kw: calls.append(("sgd", kw["d"], kw["schedule"].order)) or Res())
    monkeypatch.setattr(liu_fig3, "sample_sgld", lambda r, **kw: calls.append(("sgld", kw["d"], "")) or Res())
    monkeypatch.setattr(liu_fig3, "ensure_warm", lambda: None)
    p = load_params("liu_fig3", "smoke", {"dims": [8, 32], "sweep_dims": [32], "max_threads": 1})
    df = liu_fig3.run(p)
    assert [c for c in calls if c[1] == 8] == [("sgd", 8, "tiered")]
    assert {c[0] for c in calls if c[1] == 32} == {"sgd", "sgld"}
    assert df[df.d == 8].solver.tolist() == ["csgd"] and not df[df.d == 8].thread_sweep.any()
    with pytest.raises(ParameterError, match="sweep_dims"):
        liu_fig3.run({**p, "sweep_dims": [64]})


# -- 3. ML-100K at paper; 5. libmf's curve -------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["liu_fig2", "liu_fig4", "liu_fig5", "liu_fig6"])
def test_paper_profiles_run_real_ml100k_beside_the_netflix_standin(name):
    ds = load_params(name, "paper")["datasets"]
    assert "ml-100k" in ds and "netflix" in ds


def test_fig2_paper_libmf_curve_has_five_points():
    assert load_params("liu_fig2", "paper")["peer_iters"] == [1, 2, 4, 8, 15]


def test_ml100k_rows_are_labelled_real_and_their_claims_not_judged_against_netflix():
    p = load_params("liu_fig6", "smoke", {"epochs": 3, "max_ratings": 5000})
    df = liu_fig6.run(p)
    assert set(df.dataset) == {"ml-100k"} and df.real.all()
    (m,) = df.attrs["measurements"]
    assert m["dataset"] == "ml-100k" and bool(m["real"]) and m["claim"] == liu_fig6.CLAIMS["ml-100k"]


# -- 4. Table 2: largest simulation first -----------------------------------------------------------------------------

def test_table2_submits_the_largest_work_first_and_keeps_the_row_order(monkeypatch):
    assert t2.submission_order({16: 1_000_000, 256: 62_500, 2048: 16_000}) == [2048, 16, 256]
    started = []

    def fake_sim(npz, d, n_rows, epochs, cg_args, workdir, env):
        assert env == {"pinned": True}  # every valgrind process gets the pinned CPU
        started.append(d)
        return [{"Dr": 100, "Dw": 10, "D1mr": 1, "D1mw": 1, "DLmr": 0, "DLmw": 0}] * n_rows

    monkeypatch.setattr(t2, "_simulate", fake_sim)
    monkeypatch.setattr(t2, "valgrind_env", lambda: {"pinned": True})
    monkeypatch.setattr(t2, "compile_outside_valgrind", lambda npz, env: started.append("compiled"))
    monkeypatch.setattr(t2.shutil, "which", lambda name: "/usr/bin/" + name)
    p = load_params("liu_table2", "smoke", {"dims": [16, 256, 2048], "budget": 64000, "min_ratings": 2000,
                                            "use_valgrind": True, "parallel_runs": 1})
    df = t2.run(p)
    work = {d: int(df[df.d == d].n_ratings.iloc[0]) * d for d in (16, 256, 2048)}
    assert started == ["compiled", *sorted(work, key=lambda d: -work[d])] and started[1] == 2048
    assert list(dict.fromkeys(df.d)) == [16, 256, 2048]


def test_a_non_finite_global_bias_reads_diverged():
    model = init_model(3, 3, 2, b0=float("nan"))
    with pytest.raises(ParameterError, match="diverged") as e:
        lm.require_finite(model, solver="sgld", d=2, dataset="ml-100k", hint="eta0*N=0.02")
    assert "b0" in str(e.value) and "eta0*N=0.02" in str(e.value)
