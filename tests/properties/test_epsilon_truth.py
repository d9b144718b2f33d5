"""One truth per release: no ε is printed as holding where the code breaks the premise of its proof.

Every column that carries an ε in the tables of the privacy ledger, the frontier and Liu's Figure 7 is classified
here — *stated* (a parameter, or the paper's number converted), *idealised* (the bound if the broken premise held),
*audit* (an empirical lower bound or its power) or *holds* (an ε claimed for what ran). A *holds* column must be
empty (NaN / inf / None) on every row whose premise is broken. A new ε column that is not classified fails the test,
so it has to be put in one of the classes. The axis labels that carry an ε must say which kind they show."""

import math
import re

import numpy as np
import pandas as pd
import pytest

from dpmf_lib.experiments.extra import extra_privacy_frontier as fr
from dpmf_lib.experiments.extra import extra_privacy_ledger as xl
from dpmf_lib.params import load_params
from dpmf_lib.privacy import ledger as lg
from tests.ci_phases import ci_run, needs_ci_figures, replaced_in_ci_by

EPS_COLUMN = re.compile(r"(^|_)(eps|epsilon)(_|$)|^x_(user|rating)$")

LEDGER = {
    "holds": {"epsilon_provable", "epsilon_per_iteration", "epsilon_item_means"},
    "idealised": {"epsilon_idealised", "pld_epsilon", "rdp_epsilon"},
    "stated": {"epsilon_stated", "epsilon_rating_stated", "epsilon_target", "epsilon_per_round",
               "epsilon_amplified_paper_formula", "epsilon_kind", "eps_below_ln_1_delta"},
    "audit": {"epsilon_audited", "epsilon_audited_point", "epsilon_pair", "epsilon_detectable",
              "epsilon_detectable_over_bound"},
}


def classify(columns, vocab):
    out = {}
    for c in columns:
        if EPS_COLUMN.search(c):
            kinds = [k for k, names in vocab.items() if c in names]
            assert kinds, f"ε column {c!r} is not classified (stated / idealised / audit / holds)"
            out[c] = kinds[0]
    return out


def empty(v) -> bool:
    return v is None or (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))


@pytest.fixture(scope="module", params=[
    pytest.param("smoke", marks=replaced_in_ci_by("the same tests on make figures' ci run of the ledger [ci]")),
    pytest.param("ci", marks=needs_ci_figures)])
def ledger_smoke(request):
    """The privacy ledger's table and parameters: a smoke run here, or (under .ci/run, after make figures) the ci
    run's CSV, provenance and measurements; the tests below assert the same on both."""
    if request.param == "ci":
        r = ci_run("extra_privacy_ledger")
        for col in ("premise_broken", "accounting_note"):  # text that may be empty: NaN when read back
            r.df[col] = r.df[col].fillna("").astype(str)
        return r.params, r.df
    p = load_params("extra_privacy_ledger", "smoke")
    return p, xl.run(p)


def test_ledger_columns_never_print_an_idealised_bound_as_holding(ledger_smoke):
    _, df = ledger_smoke
    kinds = classify(df.columns, LEDGER)
    broken = df[df.premise_broken.str.len() > 0]
    assert len(broken) >= 8  # Liu, DPSGD-PNBM, DPPS-PNBM, DPSGD-MF, Hua S1 exact, Hua S2/S3 (as run and ours)
    for col, kind in kinds.items():
        if kind == "holds":
            assert all(empty(v) for v in broken[col]), col
    assert (broken.epsilon_kind != "provable").all()
    for _, r in broken.iterrows():  # an accounting cross-check of an idealised bound says so
        if np.isfinite(r.pld_epsilon) or np.isfinite(r.rdp_epsilon):
            assert "idealised" in r.accounting_note, r.key
    # the measurements say which bound they compare with, and keep the counts of every seed's bound
    for m in df.attrs["measurements"]:
        assert ("ε_idealised" in m["note"]) == ("premise broken" in m["note"])
        assert {"audit_fp", "audit_fn", "audit_n0", "audit_n1"} <= set(m["guards"])


def test_ledger_plot_tells_provable_from_idealised(ledger_smoke):
    import matplotlib.pyplot as plt

    p, df = ledger_smoke
    fig = xl.plot(df, p)
    labels = fig.axes[0].get_legend_handles_labels()[1]
    plt.close(fig)
    assert any("idealised" in lab and "premise broken" in lab for lab in labels)
    assert any(lab.startswith("provable ε") and "what ran" in lab for lab in labels)


def test_frontier_points_are_provable_only_without_a_broken_premise():
    entries = [lg.liu_entry(10.0, 2500.0, 100, constraint_satisfied=True, w_max=7.7),
               lg.liu_entry(10.0, 2500.0, 100, constraint_satisfied=True, w_max=1.0, lambda_data_dependent=False),
               lg.dpsgd_mf_entry(0.5, 5, 4.0), lg.dpsgd_pnbm_entry(1.0, 1, 1.0, 40, 5, 4.0, 10.0),
               lg.dpps_pnbm_entry(4.0, 80.0, 8, 0.006, False), lg.hua_s1_entry(1.0, "exact"),
               lg.hua_rounds_as_stated(1.0, 10, 2, "S2"), lg.dpps_mf_entry(4.0, 5, constraint_satisfied=True,
                                                                          rho=0.006, rho_on_noise_only=False)]
    for e in entries:
        a = fr.axis_values(e, 10)
        assert (a["x_kind"] == fr.X_PROVABLE) == (not e.premise_broken and math.isfinite(e.epsilon_provable))
        if e.premise_broken:
            assert a["x_kind"] == fr.X_IDEALISED and a["premise_broken"]


def test_frontier_axis_label_names_the_kinds():
    src = open(fr.__file__, encoding="utf-8").read()
    label = re.search(r'ax\.set_xlabel\((.*?)\)\s*\n', src, re.S).group(1)
    assert "provable for what ran" in label and "idealised" in label and "stated" in label


def test_liu_fig7_rows_carry_no_epsilon_with_priors_fit_to_the_ratings():
    """A private point as liu_fig7 runs it (Λ from the non-private run on the same ratings): epsilon_effective and
    the rating-level ε that holds are empty; the stated ε and its rating-level form (ε·max_i w_i/τ) are there."""
    from dpmf_lib.experiments.liu import liu_fig7
    from dpmf_lib.privacy import posterior_sampling as ps
    from tests.nbm_toys import toy

    r = toy(seed=3, nu=30, ni=12, density=0.5)
    params = {"seed": 0, "d": 2, "lambda_r": 2.0, "n_threads": 1,
              "sgld": {"rounds": 4, "eta_n": 0.02, "gamma": 0.6, "burn_in": 2},
              "private": {"rounds": 3, "burn_in": 0, "n_chains": 1, "thin": 1, "redraw": "fresh", "eta_n_max": 0.2,
                          "max_resamples": 0, "resample_rounds": 1}}
    _, priors, _ = liu_fig7.nonprivate(r, r, {**params, "sgd": {"epochs": 1, "eta0": 0.01, "lam": 0.05,
                                                                "gamma": 0.5}})
    pre = ps.preprocess(r, tau=5, kappa=1.0, rho=10.0, seed=0)
    for clip in (False, True):
        row, rel, _ = liu_fig7.private_point(pre, 10.0, priors, r, r, params, clip_loss=clip)
        kinds = classify(row, {"holds": {"epsilon_effective", "epsilon_rating"},
                               "stated": {"epsilon", "epsilon_rating_stated"},
                               "audit": {"eps_hat_over_eps_median"}})  # a realized value at the sample, no bound
        assert {k for k, v in kinds.items() if v == "holds"} == {"epsilon_effective", "epsilon_rating"}
        assert np.isnan(row["epsilon_effective"]) and np.isnan(row["epsilon_rating"])
        assert row["epsilon_rating_stated"] == pytest.approx(10.0 * pre.w.max() / 5)
        assert row["epsilon_rating_stated"] > 10.0 / 5  # ρ = 10: more than the paper's ε/τ


@pytest.mark.parametrize("module,func", [("liu.liu_fig7", "plot"), ("hua.hua_plots", "plot_increase"),
                                         ("pnbm.pnbm_fig2", "plot"), ("pnbm.pnbm_fig3", "plot"),
                                         ("extra.extra_liu_personalized_privacy", "plot")])
def test_axis_labels_with_an_epsilon_say_it_is_stated_or_idealised(module, func):
    """The figures whose releases break a premise label their ε axis as the stated (or idealised) ε — or as a
    realized value at one sample, which is no bound — never as an ε that holds."""
    import importlib

    mod = importlib.import_module(f"dpmf_lib.experiments.{module}")
    src = open(mod.__file__, encoding="utf-8").read()
    labels = re.findall(r'set_xlabel\((.*?)\)\s*\n', src, re.S)
    with_eps = [lab for lab in labels if "ε" in lab]
    assert with_eps, module
    for lab in with_eps:
        assert "stated" in lab or "idealised" in lab or "realized" in lab, (module, lab)
        if "stated" in lab:
            assert "holds" in lab or "provable only" in lab, (module, lab)  # and says whether one holds


def test_hua_s1_exact_and_s2_s3_records_carry_no_epsilon():
    from dpmf_lib.objpert import mf as hua
    from tests.nbm_toys import toy

    prob = hua.Problem.from_ratings(toy(seed=4, nu=20, ni=8, density=0.6))
    cfg = hua.HuaConfig(d=2)
    for run in (hua.run_s1, hua.run_s2):
        priv = run(prob, cfg, 1.0, [2], seed=0).privacy
        assert priv["epsilon_stated"] == 1.0 and priv["epsilon_effective"] is None and priv["caveats"]
    frame = pd.DataFrame([hua.run_s1(prob, cfg, 1.0, [2], seed=0).privacy])
    assert frame.epsilon_effective.isna().all()
