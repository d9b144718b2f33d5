"""The privacy–utility frontier (issue #13 part 4): unit conversions on hand-made cases, where ledger entries land on
the two axes, and the smoke run (one row per mechanism and stated ε, every private point provable or marked)."""

import math

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.extra import extra_privacy_frontier as fr
from dpmf_lib.params import load_params
from dpmf_lib.privacy import ledger as lg


# ----------------------------------------------------------------------------------------------- conversions


def test_rating_level_goes_to_user_level_by_group_privacy():
    c = fr.to_common_units(0.5, "rating", 10)
    assert c["eps_rating"] == 0.5 and c["eps_user"] == pytest.approx(5.0)  # k · ε
    assert "group privacy" in c["how_user"] and "k = 10" in c["how_user"]
    c = fr.to_common_units(math.inf, "rating", 10)
    assert math.isinf(c["eps_user"]) and math.isinf(c["eps_rating"])


def test_user_level_holds_per_rating_unless_the_mechanism_bounds_a_rating_itself():
    c = fr.to_common_units(3.0, "user", 10)
    assert c["eps_user"] == 3.0 and c["eps_rating"] == 3.0  # inclusion, never ε/τ by default
    c = fr.to_common_units(100.0, "user", 10, rating_bound=1.0)
    assert c["eps_user"] == 100.0 and c["eps_rating"] == 1.0
    c = fr.to_common_units(math.inf, "user", 10, rating_bound=1.0)  # no finite ε: a per-rating bound cannot hold
    assert math.isinf(c["eps_rating"])


def test_conversions_refuse_bad_input_by_name():
    with pytest.raises(ParameterError, match="unit"):
        fr.to_common_units(1.0, "item", 3)
    with pytest.raises(ParameterError, match="k_user"):
        fr.to_common_units(1.0, "rating", 0)
    with pytest.raises(ParameterError, match="ε"):
        fr.to_common_units(0.0, "user", 3)
    with pytest.raises(ParameterError, match="unit"):
        fr.unit_of("item (add/remove one item of a profile)")


def test_ledger_entries_land_where_the_conversions_say():
    k = 7
    # Liu, range rule not met: no finite ε → drawn at the paper's ε (user) and ε max_i w_i/τ (rating), stated-only
    a = fr.axis_values(lg.liu_entry(100.0, 2500.0, 100, constraint_satisfied=False, w_max=1.0,
                                    lambda_data_dependent=False), k)
    assert a["x_kind"] == fr.X_STATED and a["x_user"] == 100.0 and a["x_rating"] == pytest.approx(1.0)
    # range rule met, data-independent Λ: provable; per rating ε·max_i w_i/τ (ρ = 10: up to 10 ε/τ, not ε/τ)
    a = fr.axis_values(lg.liu_entry(100.0, 2500.0, 100, constraint_satisfied=True, w_max=7.7,
                                    lambda_data_dependent=False), k)
    assert a["x_kind"] == fr.X_PROVABLE and a["x_user"] == 100.0 and a["x_rating"] == pytest.approx(7.7)
    # Λ fit to the same ratings (the figures): the ε of an idealised release, never "provable"
    a = fr.axis_values(lg.liu_entry(100.0, 2500.0, 100, constraint_satisfied=True, w_max=1.0), k)
    assert a["x_kind"] == fr.X_IDEALISED and "Λ" in a["premise_broken"] and a["x_user"] == 100.0
    # DPSGD-MF: 2ε per rating, k · 2ε per user — for (P, Q) alone: the predictor also releases noiseless r̄, so
    # the point is marked as the ε of an idealised release
    a = fr.axis_values(lg.dpsgd_mf_entry(0.5, 5, 4.0), k)
    assert a["x_kind"] == fr.X_IDEALISED and "r̄" in a["premise_broken"]
    assert a["x_rating"] == pytest.approx(1.0) and a["x_user"] == pytest.approx(7.0)
    # Hua S2 as run: T rounds at ε each compose to T ε per rating
    a = fr.axis_values(lg.hua_rounds_as_stated(0.1, 20, 2, "S2"), k)
    assert a["x_rating"] == pytest.approx(2.0) and a["x_user"] == pytest.approx(14.0)
    assert a["epsilon_stated_rating"] == pytest.approx(0.1)
    # DPPS-PNBM: n · min(ε, 4B)/2 per user, the same bound per rating (no ε/τ)
    a = fr.axis_values(lg.dpps_pnbm_entry(20.0, 3200.0, 10, 0.006, rho_on_noise_only=False), k)
    assert a["x_user"] == pytest.approx(100.0) and a["x_rating"] == pytest.approx(100.0)


def test_every_profile_loads_and_paper_grids_are_lists():
    for prof in ("smoke", "ci", "paper", "canary"):
        p = load_params("extra_privacy_frontier", prof)
        for key in [k for k in p if k.endswith("_grid")]:
            assert fr._grid(p, key), key
        for key, spec in p["ablation"].items():
            assert fr.ablation_grids(spec, key, p), (prof, key)
    with pytest.raises(ParameterError, match="liu_grid"):
        fr._grid({"liu_grid": {}}, "liu_grid")
    with pytest.raises(ParameterError, match="mechanisms"):
        fr.run({**load_params("extra_privacy_frontier", "smoke"), "mechanisms": ["blip"]})


# ----------------------------------------------------------------------------------------------- smoke run


@pytest.fixture(scope="module")
def smoke():
    p = load_params("extra_privacy_frontier", "smoke")
    return p, fr.run(p)


def test_smoke_run_has_one_row_per_mechanism_and_epsilon_plus_references(smoke):
    p, df = smoke
    priv = df[df.kind == "private"]
    assert sorted(priv.key.unique()) == sorted([*fr.MECHANISMS, *fr.REFERENCES]) == sorted(fr.SPECS)
    for key, g in priv.groupby("key"):
        assert sorted(g.epsilon_stated) == sorted(float(e) for e in p[fr.SPECS[key][2]]), key
    # the item means, biased MF, and the non-private choice of each grid whose code has a non-private fit
    nonpriv = {"ref-item-means", "ref-mf", "dpsgd-mf", "dpsgd-pnbm", "dpps-pnbm", "hua-s1", "hua-s2", "hua-s3",
               *fr.REFERENCES}
    assert set(df[df.kind == "reference"].key) == nonpriv
    # one protocol for every entry: chosen on validation data, an interval over the figure seeds (the runner's)
    seeds = fr.figure_seeds(p)
    assert len(seeds) == p["n_seeds"] and df.seeds.iloc[0] == " ".join(map(str, seeds))
    fair = df[df.rmse_validation.notna()]
    assert (fair.selection == "validation").all() and (fair.n_seeds == p["n_seeds"]).all()
    assert (fair.rmse_lo <= fair.rmse + 1e-12).all() and (fair.rmse <= fair.rmse_hi + 1e-12).all()
    per_seed = fair[[f"rmse_seed_{s}" for s in seeds]].to_numpy()
    assert np.allclose(per_seed.mean(axis=1), fair.rmse)
    ref = priv[priv.key.isin(fr.REFERENCES)]
    assert (ref.epsilon_provable <= ref.epsilon_stated * (1 + 1e-6)).all() and (ref.delta == 1e-5).all()
    assert (df.dataset == "ml-100k").all() and df.attrs["sources"][0]["real"]
    assert np.isfinite(df.rmse).all() and (df.rmse > 0).all()


def test_dp_valid_variants_are_provable_beside_the_papers_forms(smoke):
    _, df = smoke
    g = df[df.kind == "private"].groupby("key").x_kind.agg(set)
    assert g["liu-clipped"] == {fr.X_PROVABLE} and g["dpsgd-pnbm-clipped"] == {fr.X_PROVABLE}
    assert g["dpsgd-pnbm"] == {fr.X_IDEALISED}
    # ε/T per round composes to ε, yet U between rounds keeps the premise broken (the ledger's rule)
    comp = df[(df.key == "hua-s2-composed") & (df.kind == "private")]
    assert (comp.x_kind == fr.X_IDEALISED).all() and np.allclose(comp.x_rating, comp.epsilon_stated)


def test_the_claim_replicates_read_their_own_seed_from_the_same_fits(smoke):
    p, df = smoke
    ms = df.attrs["measurements"]
    assert {m["claim"] for m in ms} <= {fr.HEADLINE_CLAIM.format(e) for e in fr.HEADLINE_EPSILONS}
    assert ms, "the smoke profile has provable points at user-level ε ≤ 10"
    other = fr.figure_seeds(p)[1]
    df2 = fr.run({**p, "seed": other})  # the runner's replicate: every fit comes from the memo
    cols = ["key", "kind", "epsilon_stated", "config", "rmse", "rmse_lo", "rmse_hi"]
    fair = df.rmse_validation.notna()
    assert df2[fair][cols].equals(df[fair][cols])
    im = float(df.loc[df.key == "ref-item-means", "rmse"].iloc[0])
    for m in df2.attrs["measurements"]:
        assert "best by validation RMSE" in m["note"] and f"seed {other}" in m["note"]
        assert m["value"] == pytest.approx(im - float(m["note"].split("test RMSE ")[1].split()[0]), abs=1e-4)


def test_every_private_point_is_provable_or_marked_stated_only(smoke):
    _, df = smoke
    priv = df[df.kind == "private"]
    prov = priv[priv.x_kind == fr.X_PROVABLE]
    ideal = priv[priv.x_kind == fr.X_IDEALISED]
    stated = priv[priv.x_kind == fr.X_STATED]
    assert set(priv.x_kind) <= {fr.X_PROVABLE, fr.X_IDEALISED, fr.X_STATED}
    assert (ideal.premise_broken.str.len() > 0).all() and (prov.premise_broken.str.len() == 0).all()
    # the mechanisms whose bound needs a premise the code breaks are never drawn as plain proofs
    assert not set(prov.key) & {"liu", "dpsgd-mf", "dpsgd-pnbm", "hua-s1", "hua-s2", "hua-s3", "dpps-pnbm",
                                "hua-s2-composed", "hua-s3-composed"}
    assert np.isfinite(prov.epsilon_provable).all()
    # an idealised point: no ε holds for what ran (provable inf), the bound is in epsilon_idealised
    assert np.isinf(ideal.epsilon_provable).all() and np.isfinite(ideal.epsilon_idealised).all()
    assert np.isinf(stated.epsilon_provable).all() and (stated.no_finite_reason.str.len() > 0).all()
    # a provable point sits at the ledger's ε in its own unit, an idealised one at the idealised ε, a stated-only one
    # at the paper's
    for _, r in pd.concat([prov, ideal]).iterrows():
        own = r.x_rating if r.unit == "rating" else r.x_user
        want = r.epsilon_provable if r.x_kind == fr.X_PROVABLE else r.epsilon_idealised
        assert own == pytest.approx(want), r.key
    for _, r in stated.iterrows():
        assert r.x_user == pytest.approx(r.epsilon_stated_user) and r.x_rating == pytest.approx(r.epsilon_stated_rating)
    # rating-level mechanisms: user level by group privacy over the most active user's training ratings
    rat = pd.concat([prov, ideal])
    rat = rat[rat.unit == "rating"]
    assert np.allclose(rat.x_user, rat.k_user * rat.x_rating)
    # the ledger's accounting of the idealised releases: DPSGD-MF 2ε, Hua S1 ε, S2/S3 T·ε
    g = priv.set_index("key")
    assert g.loc["dpsgd-mf", "epsilon_idealised"] == pytest.approx(2 * g.loc["dpsgd-mf", "epsilon_stated"])
    assert g.loc["hua-s1", "epsilon_idealised"] == pytest.approx(g.loc["hua-s1", "epsilon_stated"])
    T = load_params("extra_privacy_frontier", "smoke")["hua_grid"]["iterations"][0]
    assert g.loc["hua-s2", "epsilon_idealised"] == pytest.approx(T * g.loc["hua-s2", "epsilon_stated"])


def test_every_private_row_says_its_selection_is_not_accounted(smoke):
    _, df = smoke
    priv = df[df.kind == "private"]
    for _, r in priv.iterrows():
        assert "excludes the selection" in r.caveats and f"among {int(r.n_configs)} " in r.caveats, r.key
        assert "not accounted" in r.caveats and f"{int(r.n_seeds)} seeds are evaluation replicates" in r.caveats, r.key
    for m in df.attrs["measurements"]:
        assert "not accounted in ε" in m["note"]
    # the references' guarantee is joint DP (U never released); their legend says so
    assert all(fr.LABELS[k].endswith("joint DP") for k in fr.REFERENCES)
    assert set(priv[priv.key.isin(fr.REFERENCES)].label) == {fr.LABELS[k] for k in fr.REFERENCES}


def test_group_privacy_factor_and_item_means_are_those_of_u1(smoke):
    from dpmf_lib.nbm import runs

    _, df = smoke
    train, _ = runs.fold_data("ml-100k", 1)
    assert (df.k_user == int(train.user_counts().max())).all()
    ref = df[df.key == "ref-item-means"].rmse.iloc[0]
    assert ref == pytest.approx(runs.item_means_rmse("ml-100k", [1]), rel=1e-9)


def test_plot_draws_stated_only_points_hollow(smoke):
    import matplotlib.pyplot as plt

    p, df = smoke
    fig = fr.plot(df, p)
    n_stated = int((df[df.kind == "private"].x_kind == "stated, no proof holds").sum())
    for ax in fig.axes[:2]:
        hollow = sum(len(ln.get_xdata()) for ln in ax.get_lines() if ln.get_markerfacecolor() == "none")
        assert hollow == n_stated
        assert ax.get_xscale() == "log"
    plt.close(fig)


def test_epsilon_lists_refuse_nan_and_non_positive_by_name():
    for bad in ([], [float("nan")], [0.0], [1.0, None], "1.0"):
        with pytest.raises(ParameterError, match="hua_epsilons"):
            fr._eps_list({"hua_epsilons": bad}, "hua_epsilons")
    assert fr._eps_list({"e": [1, 2.5]}, "e") == [1.0, 2.5]


# ----------------------------------------------------------------------------------------------- the ablation


def test_ablation_variants_compose_and_refuse_bad_specs_by_name():
    p = {"private_als_grid": {"d": [4], "k": [9]}}
    spec = {"base": {"d": [2], "k": [20]},
            "variants": [{"name": "a"}, {"name": "b", "set": {"k": [1000]}, "noise": False},
                         {"name": "c", "from": "b", "set": {"d": [8]}}, {"name": "f", "grid": "frontier",
                                                                          "set": {"k": [5]}}]}
    got = [(n, g, z) for n, g, z, _ in fr.ablation_grids(spec, "private-als", p)]
    assert got == [("a", {"d": [2], "k": [20]}, True), ("b", {"d": [2], "k": [1000]}, False),
                   ("c", {"d": [8], "k": [1000]}, True), ("f", {"d": [4], "k": [5]}, True)]
    bad = [({"name": "x", "from": "nope"}, "earlier"), ({"name": "x", "grid": "wide"}, "frontier"),
           ({"name": "x", "noise": "no"}, "noise"), ({"name": "x", "colour": 1}, "unknown"), ({"set": {}}, "name"),
           ({"name": "x", "set": {"k": []}}, "at least one value"), ({"name": "x", "set": [1]}, "set"),
           ({"name": "x", "from": "a", "grid": "frontier"}, "not both")]
    for v, msg in bad:
        with pytest.raises(ParameterError, match=msg):
            fr.ablation_grids({"base": {"d": [2]}, "variants": [{"name": "a"}, v]}, "private-als", p)
    with pytest.raises(ParameterError, match="two variants"):
        fr.ablation_grids({"base": {"d": [2]}, "variants": [{"name": "a"}, {"name": "a"}]}, "private-als", p)
    with pytest.raises(ParameterError, match="base"):
        fr.ablation_grids({"variants": []}, "private-als", p)
    with pytest.raises(ParameterError, match="ablation: unknown"):
        fr.ablation_rows({"ablation": {"blip": spec}}, None, None, 1.0)


def test_ablation_has_each_variant_without_noise_and_at_each_epsilon_unless_noise_free(smoke):
    p, df = smoke
    a = df[df.kind == "ablation"]
    im = float(df.loc[df.key == "ref-item-means", "rmse"].iloc[0])
    n = 0
    for key, spec in p["ablation"].items():
        for name, _, noise, _ in fr.ablation_grids(spec, key, p):
            rows = a[(a.key == key) & (a.variant == name)]
            want = [fr.NO_NOISE] + ([f"ε = {e:g}" for e in p["ablation_epsilons"]] if noise else [])
            assert list(rows.noise) == want, (key, name)
            n += len(want)
    assert len(a) == n
    noisy = a[a.noise != fr.NO_NOISE]
    assert len(noisy) and (noisy.epsilon_provable <= noisy.epsilon_stated * (1 + 1e-6)).all()
    assert np.allclose(a.gap_item_means, a.rmse - im) and (a.selection == "validation").all()
    assert (a[a.variant == "clipping off"].config.str.contains("clip_users=False")).all()
    t = fr.ablation_table(df)
    assert list(t.columns) == [fr.NO_NOISE] + [f"ε = {e:g}" for e in p["ablation_epsilons"]]
    assert t.loc[("reference", "item means (non-private)"), fr.NO_NOISE] == pytest.approx(im, abs=1e-4)


def test_ablation_of_the_unchanged_grid_is_the_frontiers_own_row(smoke):
    """The smoke profile's private-ALS base is its frontier grid: the ablation's first variant is the same fits,
    hence the frontier's numbers (the reference row without noise, the private row at the same ε)."""
    p, df = smoke
    assert p["ablation"]["private-als"]["base"] == p["private_als_grid"]
    a = df[(df.kind == "ablation") & (df.key == "private-als") & (df.variant == "as first configured")]
    f = df[(df.key == "private-als") & df.kind.isin(["private", "reference"])]
    for _, r in a.iterrows():
        same = f[f.epsilon_stated.isna()] if r.noise == fr.NO_NOISE else f[f.epsilon_stated == r.epsilon_stated]
        assert len(same) == 1 and same.rmse.iloc[0] == r.rmse and same.config.iloc[0] == r.config

