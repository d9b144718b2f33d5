"""liu_fig7: the non-private SGLD run that fixes Λ has a seed namespace of its own (issue #14 review): it must not
replay the noise of any private chain (chain 0's burn-in was seeded with the run's seed, as the Λ run was); and the
helpers of the Liu Figure 7 / personalized-privacy experiments (ε grid, τ per dataset; the notebooks themselves run in
tests/workbook/test_notebooks.py); and one smoke run of liu_fig7, shared by the tests of its clipped and exact-Gibbs
series and of its ML-100K counterpart of the Section 6.7 claim."""

import pytest

import dpmf_lib.mf as mf
from dpmf_lib.data.splits import random_split
from dpmf_lib.errors import ParameterError
from dpmf_lib.experiments.liu import liu_fig7
from dpmf_lib.params import load_params
from dpmf_lib.privacy import posterior_sampling as ps
from tests.mf_toys import dense_toy

PARAMS = {"seed": 3, "d": 2, "lambda_r": 2.0, "n_threads": 1,
          "sgld": {"rounds": 4, "eta_n": 0.02, "gamma": 0.6, "burn_in": 2},
          "private": {"rounds": 4, "burn_in": 2, "n_chains": 2, "thin": 1, "redraw": "fresh", "eta_n_max": 0.2,
                      "max_resamples": 1, "resample_rounds": 1}}


def test_the_prior_run_does_not_share_a_seed_with_any_private_chain(monkeypatch):
    real, calls = mf.sample_sgld, []

    def spy(*a, **kw):
        calls.append({"seed": int(kw["seed"]), "private": kw.get("fixed_lambda") is not None})
        return real(*a, **kw)

    monkeypatch.setattr(mf, "sample_sgld", spy)
    train, test = random_split(dense_toy(n_users=20, n_items=10), (0.8, 0.2), seed=0)
    priors = ps.fixed_priors(liu_fig7.nonprivate_sgld(train, test, PARAMS))
    pre = ps.preprocess(train, tau=5, kappa=1.0, rho=1.0, seed=PARAMS["seed"])
    liu_fig7.private_point(pre, 0.01, priors, train, test, PARAMS)  # broad posterior: the redraw runs a third chain
    prior = [c["seed"] for c in calls if not c["private"]]
    private = {c["seed"] for c in calls if c["private"]}
    assert len(prior) == 1 and len(private) >= 4  # ≥ 2 chains × (burn-in, sampling phase)
    assert ps.chain_seed(PARAMS["seed"], 0) in private  # chain 0's burn-in is seeded with the run's seed ...
    assert prior[0] not in private  # ... and the Λ run is not
    assert prior[0] == ps.prior_run_seed(PARAMS["seed"]) != PARAMS["seed"]


def test_epsilon_grid_ends_at_4B_and_accepts_the_4B_token():
    p = {"epsilons": [10, 0.1, 20000, "4B"]}
    assert liu_fig7.epsilon_grid(p, 2500.0) == [0.1, 10.0, 10000.0]
    assert liu_fig7.resolve_epsilons(["4B", 3], 5.0) == [20.0, 3.0]
    with pytest.raises(ParameterError, match="epsilons"):
        liu_fig7.resolve_epsilons(["4C"], 1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        liu_fig7.epsilon_grid({"epsilons": [0.0]}, 1.0)


def test_tau_per_dataset_and_paper_values_in_params():
    p = load_params("liu_fig7", "paper")
    assert liu_fig7.tau_for("netflix", p) == 100 and liu_fig7.tau_for("yahoo-music", p) == 200
    assert p["kappa"] == 1.0 and p["rho"] == [1.0, 10.0] and p["d"] == 16
    with pytest.raises(ParameterError, match="tau"):
        liu_fig7.tau_for("eachmovie", p)
    with pytest.raises(ParameterError, match="tau"):
        liu_fig7.tau_for("netflix", {"tau": {"netflix": 0}})
    for prof in ("smoke", "ci"):
        load_params("extra_liu_personalized_privacy", prof)


# ---- liu_fig7's smoke run (one run, shared by the tests below) ----


@pytest.fixture(scope="module")
def smoke_run():
    p = load_params("liu_fig7", "smoke")
    return p, liu_fig7.run(p)


def _by_claim(df):
    out = {}
    for m in df.attrs["measurements"]:
        out.setdefault(m["claim"], []).append(m)
    return out


def test_fig7_smoke_has_the_clipped_series_labelled_as_ours(smoke_run):
    p, df = smoke_run
    ours = df[df.method == liu_fig7.OURS]
    paper = df[df.method == "DPMF (Algorithm 1, local ridge)"]
    assert "(ours)" in liu_fig7.OURS and len(ours) == len(paper) > 0
    # Λ is fit to the same ratings (Section 6.6): no ε holds for any point, the clipped series included
    assert ours.epsilon_effective.isna().all() and df.epsilon_rating.isna().all() and (ours.n_resamples == 0).all()
    assert (ours.epsilon_rating_stated > 0).all()
    liu_fig7.plot(df, p)
    # the exact-Gibbs series (issue #14): every ε of the grid, its 4B chains are the reference line's, the claim reads it
    gib = df[df.method == liu_fig7.GIBBS_DP]
    assert sorted(gib.epsilon) == sorted(paper.epsilon) and (gib.sampler == "gibbs").all()
    ref = df[df.method == liu_fig7.GIBBS].iloc[0]
    g4b = gib[gib.epsilon == gib.epsilon.max()].iloc[0]
    assert ref.rhat == g4b.rhat and ref.ess == g4b.ess
    (m,) = [m for m in df.attrs["measurements"] if m["claim"] not in liu_fig7.MODEST_DECREASE_CLAIMS.values()]
    tau = float(p["tau"]["ml-100k"])
    assert "exact Gibbs chains" in m["note"]
    assert m["value"] == gib[gib.epsilon == tau].test_rmse.iloc[0] - g4b.test_rmse
    assert m["guards"]["chain_ess"] == min(gib[gib.epsilon == tau].ess.iloc[0], g4b.ess)
    # every point is a sweep task, a function of its arguments alone: re-running one reproduces its row
    from dpmf_lib.experiments.liu.liu_fig7 import load, nonprivate, point_tasks, run_point

    _, train, test = load("ml-100k", p)
    _, priors, _ = nonprivate(train, test, p)
    tasks = point_tasks(p, lambda rho, wf: ref.B if wf == p["weights_from"] else 0.0)
    (t,) = [t for t in tasks if t["series"] == "gibbs" and t["epsilon"] == tau]
    again = run_point(t, "ml-100k", train, test, priors, p)["row"]
    want = gib[gib.epsilon == tau].iloc[0]
    assert again["test_rmse"] == want.test_rmse and again["ess"] == want.ess and again["rhat"] == want.rhat
    # not circular (run() calls run_point too): the task is Algorithm 1 at the run's own seed
    from dpmf_lib.privacy import posterior_sampling as pss

    pre = pss.preprocess(train, tau=int(tau), kappa=p["kappa"], rho=p["rho"][0], seed=p["seed"],
                        weights_from=p["weights_from"])
    gp = p["gibbs"]
    direct = pss.sample_private(pre, tau, Lambda_u=priors["Lambda_u"], Lambda_v=priors["Lambda_v"], d=p["d"],
                               lambda_r=p["lambda_r"], lam_bias=priors["lam_bias"], sampler="gibbs",
                               rounds=gp["sweeps"] - gp["burn_in"], burn_in=gp["burn_in"], n_chains=gp["n_chains"],
                               max_resamples=p["private"]["max_resamples"], seed=p["seed"], test=test)
    assert again["ess"] == direct.ess and again["test_rmse"] == direct.local_model(train).rmse(test)
    off = liu_fig7.run(load_params("liu_fig7", "smoke", {"clipped_loss": False, "gibbs": {
        "datasets": ["ml-100k"], "private_series": False, "sweeps": 10, "burn_in": 2, "n_chains": 2}}))
    assert not (off.method == liu_fig7.OURS).any() and not (off.method == liu_fig7.GIBBS_DP).any()
    (m_off,) = [m for m in off.attrs["measurements"] if m["claim"] not in liu_fig7.MODEST_DECREASE_CLAIMS.values()]
    sg = off[off.method == "DPMF (Algorithm 1, local ridge)"]
    assert "the paper's SGLD chains" in m_off["note"]
    assert m_off["value"] == sg[sg.epsilon == tau].test_rmse.iloc[0] - sg[sg.epsilon == sg.epsilon.max()].test_rmse.iloc[0]


def test_fig7_real_ml100k_measures_the_counterpart_and_its_replicate_matches_the_run(smoke_run):
    """The Section 6.7 claim has a real-data (ML-100K) counterpart: a run on real ML-100K measures the
    counterpart id, and its further seeds re-run only what it reads: at the run's own seed they give exactly the run's
    value, at another seed another value."""
    p, df = smoke_run
    got = _by_claim(df)
    ids = [liu_fig7.RATING_DP_CLAIMS["ml-100k"], liu_fig7.MODEST_DECREASE_CLAIMS["ml-100k"]]
    assert list(got) == ids  # smoke runs real ML-100K only
    m = got[liu_fig7.RATING_DP_CLAIMS["ml-100k"]][0]
    assert m["real"] and "exact Gibbs" in m["note"]
    replicated = _by_claim(liu_fig7.replicate_run(p))
    for cid in ids:  # same seed: the same two points
        again, first = replicated[cid][0], got[cid][0]
        assert again["value"] == first["value"] and again["guards"] == first["guards"], cid
    other = _by_claim(liu_fig7.replicate_run({**p, "seed": 1}))[liu_fig7.RATING_DP_CLAIMS["ml-100k"]][0]
    assert other["value"] != m["value"]  # the seed reaches the measurement
