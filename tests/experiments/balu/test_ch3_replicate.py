"""Balu chapter 3 (Figures 3.2–3.5): the replicate runs of the claims attack a seeded subsample of the test users
(``replicate_n_attacked``) without touching the figure's seed or the result cache keys; the cache's code hash covers
exactly the row-producing code."""

import json
from pathlib import Path

import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.params import load_params

REPO = Path(__file__).resolve().parents[3]  # tests/experiments/balu/ -> the repository
FIGS = {"balu_fig3_2": "blip", "balu_fig3_3": "jlt", "balu_fig3_4": "blip", "balu_fig3_5": "jlt"}


def test_replicate_params_replaces_only_n_attacked_and_checks_it():
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    p = load_params("balu_fig3_2", "smoke")
    assert p["replicate_n_attacked"] is None and ch3.replicate_params(p) == p  # null: the figure's own users
    r = ch3.replicate_params({**p, "replicate_n_attacked": 2})
    assert r["n_attacked"] == 2 and {k: v for k, v in r.items() if k != "n_attacked"} == \
        {**{k: v for k, v in p.items() if k != "n_attacked"}, "replicate_n_attacked": 2}
    assert ch3.replicate_params({**p, "n_attacked": None, "replicate_n_attacked": 30})["n_attacked"] == 30
    for bad in (0, -1, True, 2.5, "10", p["n_attacked"] + 1):
        with pytest.raises(ParameterError, match="replicate_n_attacked"):
            ch3.replicate_params({**p, "replicate_n_attacked": bad})


@pytest.mark.parametrize("profile", ["smoke", "ci", "paper"])
def test_replicate_keys_are_shared_between_figures_and_leave_seed0_alone(profile):
    """3.2/3.4 (BLIP) and 3.3/3.5 (JLT) must compute the same cache cells, seed 0 and replicate seeds alike; the new
    parameter is not in the key, so the seed-0 key is the one it was before."""
    from dpmf_lib.data.ratings import DataSource
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    src = DataSource("ml-100k", True, "x")
    keys = {}
    for name, kind in FIGS.items():
        p = load_params(name, profile)
        assert "replicate_n_attacked" not in ch3.RESULT_KEYS
        without = {k: v for k, v in p.items() if k != "replicate_n_attacked"}
        assert ch3._result_key(p, src) == ch3._result_key(without, src)  # seed 0: untouched
        rep = ch3.replicate_params({**p, "seed": 1})
        keys.setdefault(kind, []).append((ch3._result_key(p, src), ch3._result_key(rep, src), p["attacks"]))
        if profile == "paper":
            assert rep["n_attacked"] is not None and rep["n_attacked"] < (p["n_attacked"] or 343)
            assert p["replicate_n_attacked"] == rep["n_attacked"]
    for kind, ((k0, r0, a0), (k1, r1, a1)) in keys.items():
        assert k0 == k1 and r0 == r1 and a0 == a1, kind


def test_replicate_run_attacks_the_subsample_and_the_sibling_figure_hits_its_cache(tmp_path, monkeypatch):
    from dpmf_lib import cache
    from dpmf_lib.attacks.decoders import ATTACKS
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3
    from dpmf_lib.experiments.balu import balu_fig3_2, balu_fig3_4

    monkeypatch.setenv("DPMF_FIGURES_DIR", str(tmp_path))
    monkeypatch.delenv("DPMF_CACHE_DIR", raising=False)
    monkeypatch.setenv("DPMF_CACHE", "on")
    over = {"eps": [8, 0], "n_attacked": 4, "replicate_n_attacked": 2, "burn_in": 5, "n_samples": 40, "seed": 1}
    p2, p4 = load_params("balu_fig3_2", "smoke", over), load_params("balu_fig3_4", "smoke", over)
    df = balu_fig3_2.replicate_run(p2)
    assert df["user"].nunique() == 2 and df.attrs["measurements"]
    rep = ch3.replicate_params(p4)
    setup = ch3.prepare(rep)
    key, code = ch3._result_key(rep, setup.source), ch3._code_hash()
    for eps in (8.0, 0.0):  # Figure 3.4's replicate run is served by the cells 3.2's computed
        assert cache.in_cache(ch3._eps_rows, "blip", eps, ATTACKS, key, code, rep, setup, ignore=ch3._NOT_IN_KEY)
    d4 = balu_fig3_4.replicate_run(p4)
    assert sorted(d4["user"].unique()) == sorted(df["user"].unique())
    full = balu_fig3_2.run(p2)  # the figure's own run: all n_attacked users
    assert full["user"].nunique() == 4


def test_notebooks_replicate_through_replicate_run():
    for name in FIGS:
        nb = json.loads((REPO / "notebooks" / f"{name}.ipynb").read_text())
        code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert "nb.replicate(experiment.replicate_run, df)" in code and "nb.replicate(experiment.run" not in code
        prose = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
        assert "replicate_n_attacked" in prose and "wider" in prose and "does not depend on how many users" in prose


def test_code_hash_covers_the_row_producing_code_only():
    """Edits of the summaries/claims/plots in _balu_ch3.py keep the attack cache; the functions that make the cached
    rows live in the hashed module."""
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3
    from dpmf_lib.experiments.balu import _balu_ch3_rows as rows

    for f in (ch3._eps_rows, ch3.attack_one_eps, ch3.prepare, ch3.make_mechanism, ch3.eps_stream, ch3._seed):
        assert f.__module__ == rows.__name__, f.__name__
    assert ch3.Setup is rows.Setup
    from dpmf_lib.cache import code_version
    from dpmf_lib.dependencies import module_closure

    closure = set(module_closure(rows.__name__))
    assert REPO / "dpmf_lib" / "experiments" / "_balu_ch3.py" not in closure
    for f in ("attacks/decoders.py", "attacks/gibbs.py", "data/loaders.py", "validate.py"):
        assert REPO / "dpmf_lib" / f in closure  # the data loaders too: a changed loader must not serve old rows
    assert ch3._code_hash() == code_version(rows.__name__)


def _user_rows(n_users, rhats, eps=(8.0,), attack="mcmc_prior"):
    import pandas as pd

    rows = []
    for e in eps:
        for u in range(n_users):
            rows.append({"dataset": "ml-100k", "mechanism": "blip", "eps": e, "attack": attack, "user": u,
                         "cos": 0.5, "ap10": 0.3, "c_hat": 10, "c_true": 12, "split_rhat": rhats[u % len(rhats)],
                         "sweeps": 800, "exact_err": float("nan"), "exact_spearman": float("nan"),
                         "seconds_all_attacks": 1.0})
    return pd.DataFrame(rows)


def test_rhat_guard_is_a_share_whose_meaning_does_not_depend_on_the_number_of_users():
    """The further seeds attack a subsample (6 JLT users): an order statistic such as the 90th percentile (method
    'higher') is then the maximum, so the guard would fail on the sample size alone. The guard is the share of chains
    above 1.05 (or missing), pooled over the ε values a claim reads."""
    import math

    import numpy as np
    import pandas as pd

    from dpmf_lib.data.ratings import DataSource
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    assert ch3.rhat_over_share(pd.Series([1.0, 1.2, np.inf, np.nan])) == 0.75  # above, infinite and missing are bad
    assert math.isnan(ch3.rhat_over_share(pd.Series([np.nan, np.nan])))       # an attack without chains
    # 343 users, 3 % of them above 1.05, and 6 users with one above it at another ε: pooled over the two ε values
    big = ch3.summarize(_user_rows(100, [1.01] * 97 + [1.2] * 3))
    assert big["rhat_over_share"].iloc[0] == pytest.approx(0.03)
    assert big["split_rhat_q90"].iloc[0] <= 1.05
    small = _user_rows(6, [1.01] * 5 + [1.2], eps=(8.0,))
    small = pd.concat([small, _user_rows(6, [1.01], eps=(5.0, 3.0))], ignore_index=True)
    s = ch3.summarize(small)
    src = DataSource(dataset="ml-100k", real=True)
    params = {"burn_in": 1000, "n_samples": 19000, "min_sweeps": 750, "profile": "paper", "replicate_n_attacked": 6}
    ms = ch3.attack_measurements(s.assign(attack="mcmc_prior"), "blip", src, params, metric="cos")
    ms = [m for m in ms if m.guards and ch3.RHAT_GUARD in m.guards]
    assert ms, "a claim with the convergence guard must be measured"
    share = {m.claim: m.guards[ch3.RHAT_GUARD] for m in ms}
    assert share["balu-3.5-blip-eps8-joint-half"] == pytest.approx(1 / 6)   # at ε = 8 only: one user in six
    assert "balu-3.5-blip-eps8-single-vs-popularity" not in share
    assert all("subsample of 6 users" in m.note for m in ms)  # the merged claim keeps the first seed's note


def test_share_claims_also_guard_the_worst_eps_cell():
    """A share-of-ε claim reads every ε: pooled over ε (its first guard) a cell where most chains failed passed on the
    strength of the others (BLIP ε = 59: 237 of 343 constant). Its second guard is the worst ε cell's share."""
    import pandas as pd

    from dpmf_lib.data.ratings import DataSource
    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    rows = pd.concat([_user_rows(6, [1.01] * 4 + [1.3, float("nan")], eps=(59.0,)),
                      _user_rows(6, [1.01], eps=(8.0, 0.0))]
                     + [_user_rows(6, [1.01], eps=(59.0, 8.0, 0.0), attack="single").assign(split_rhat=float("nan"))],
                     ignore_index=True)
    s = ch3.summarize(rows)
    params = {"burn_in": 1000, "n_samples": 19000, "min_sweeps": 750, "profile": "paper"}
    ms = ch3.attack_measurements(s, "blip", DataSource(dataset="ml-100k", real=True), params, metric="cos")
    guards = {m.claim: m.guards for m in ms if m.guards}
    assert guards["balu-3.5-blip-joint-beats-single"][ch3.RHAT_GUARD] == pytest.approx(2 / 18)  # pooled over 3 ε
    assert guards["balu-3.5-blip-joint-beats-single"][ch3.RHAT_CELL_GUARD] == pytest.approx(2 / 6)  # ε = 59 alone
    assert ch3.RHAT_CELL_GUARD not in guards["balu-3.5-blip-eps8-joint-half"]  # one ε: the first guard says it all


def test_constant_chains_are_named_with_their_point_mass_checks_in_the_note():
    import pandas as pd

    from dpmf_lib.experiments.balu import _balu_ch3 as ch3

    rows = _user_rows(4, [1.0, 1.0, float("inf"), 1.01], eps=(600.0,))
    rows["point_mass_check"] = [1.0, 1.0, 0.0, float("nan")]
    s = ch3.summarize(rows)
    assert s["constant_chains"].iloc[0] == 3 and s["point_mass_confirmed"].iloc[0] == 2
    assert s["rhat_over_share"].iloc[0] == pytest.approx(0.25)  # the stuck pair (inf) fails, confirmed ones pass
    note = ch3._constant_chains_note(s, "mcmc_prior")
    assert "ε = 600: 3 of 4 (2 confirmed)" in note and "without a check" not in note
