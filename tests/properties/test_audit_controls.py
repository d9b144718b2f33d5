"""Positive controls of the privacy ledger's audits: for every row, a known-broken variant of the mechanism run through
the *same* audit pipeline (:mod:`dpmf_lib.experiments.extra.extra_privacy_ledger`, ``leak`` > 1: the noise scale
divided by ``leak``, or ε multiplied by it for the samplers) must be caught — its audited lower bound must exceed the
ε the row states for the unbroken mechanism. An audit that cannot catch a grossly broken variant has no power, and
its ε_lower = 0 on the real mechanism would say nothing. Fixed seeds; sizes small enough for a test (the smoke
instance, the paper's for the samplers whose smoke chains are too short to move)."""

import numpy as np
import pytest

from dpmf_lib.experiments.extra import extra_privacy_ledger as xl
from dpmf_lib.params import load_params
from dpmf_lib.privacy import audit as au

CONF = 0.95


@pytest.fixture(scope="module")
def setup():
    p = load_params("extra_privacy_ledger", "smoke")
    r = xl._ml100k()
    sub = xl.sub_instance(r, int(p["sub_users"]), int(p["sub_items"]))
    profile = np.unique(r.items[r.users == int(np.argmin(r.user_counts()))]).astype(np.int64)
    return p, r, sub, profile


@pytest.fixture(scope="module")
def paper_sub():
    p = load_params("extra_privacy_ledger", "paper")
    return p, xl.sub_instance(xl._ml100k(), int(p["sub_users"]), int(p["sub_items"]))


def caught(res: au.AuditResult, stated: float) -> bool:
    return res.epsilon_lower > stated


def test_blip_control(setup):
    p, r, _, profile = setup
    ok, _, _ = xl.audit_blip(profile, r.n_items, p, 400, 0, CONF)
    bad, _, _ = xl.audit_blip(profile, r.n_items, p, 400, 0, CONF, leak=10)
    assert ok.epsilon_lower <= p["blip_epsilon"] and caught(bad, p["blip_epsilon"])


def test_jlt_control(setup):
    p, r, _, profile = setup
    ok, _, pair = xl.audit_jlt(profile, r.n_items, p, 1.0, 1000, 0, CONF, delta=1e-5)
    bad, _, _ = xl.audit_jlt(profile, r.n_items, p, 1.0, 1000, 0, CONF, delta=1e-5, leak=30)
    assert ok.epsilon_lower <= pair and caught(bad, 1.0)


def test_count_sketch_is_its_own_control(setup):
    """Deterministic given the public seed: the audit certifies more than its threshold "ε" as runs grow."""
    p, _, sub, _ = setup
    assert caught(xl.audit_count_sketch(sub, p, 200, 0, CONF), float(p["sketch_threshold"]))


@pytest.mark.parametrize("leak", [10.0])
def test_dpsgd_pnbm_control(setup, leak):
    p, _, sub, _ = setup
    ok, pair, _ = xl.audit_dpsgd_pnbm(sub, p, 1.0, 2000, 0, CONF)
    bad, _, _ = xl.audit_dpsgd_pnbm(sub, p, 1.0, 2000, 0, CONF, leak=leak)
    assert ok.epsilon_lower <= pair and caught(bad, 1.0)


def test_dpsgd_pnbm_clipped_control(setup):
    p, _, sub, _ = setup
    ok, pair, _ = xl.audit_dpsgd_pnbm_clipped(sub, p, 1.0, 2000, 0, CONF)
    bad, _, _ = xl.audit_dpsgd_pnbm_clipped(sub, p, 1.0, 2000, 0, CONF, leak=10)
    assert ok.epsilon_lower <= pair and caught(bad, 1.0)


def test_dpsgd_mf_control(setup):
    """The white-box audit of DPSGD-MF's noisy errors: the broken variant exceeds even the row's 2ε."""
    p, _, sub, _ = setup
    ok, pair, ratio = xl.audit_dpsgd_mf(sub, p, 1.0, 2000, 0, CONF)
    bad, _, _ = xl.audit_dpsgd_mf(sub, p, 1.0, 2000, 0, CONF, leak=10)
    assert ratio <= 2.0 + 1e-9 and pair <= 2.0 + 1e-9  # the pair within the row's 2ε
    assert ok.epsilon_lower <= pair and caught(bad, 2.0)


@pytest.mark.parametrize("reopt", ["exact", "gd"])
def test_hua_s1_control(setup, reopt):
    p, _, sub, _ = setup
    bad = xl.audit_hua_s1(sub, p, 1.0, reopt, 400, 0, CONF, leak=10)
    assert caught(bad, 1.0)


@pytest.mark.parametrize("scenario", ["S2", "S3"])
def test_hua_rounds_control_on_the_transcript(setup, scenario):
    """The per-round transcript of the changed item's aggregate: at ε_round × 10 the audit certifies more than the
    per-round ε (the composed rows run the same function at ε/T per round)."""
    p, _, sub, _ = setup
    bad = xl.audit_hua_rounds(sub, p, 1.0, scenario, 400, 0, CONF, leak=10)
    assert caught(bad, 1.0)


@pytest.mark.parametrize("kw", [{}, {"clip_loss": True}, {"lam": 0.04}], ids=["liu", "liu-clipped", "dpps-mf"])
def test_liu_family_control(paper_sub, kw):
    """Liu's rows (Λ fit on each dataset, the figures' pipeline), the clipped variant and DPPS-MF (public Λ): at
    ε × 10⁴ the posterior concentrates and the black-box audit of (V, b_j) certifies more than the ε stated for it."""
    p, sub = paper_sub
    bad, _, _ = xl.audit_liu(sub, p, 0.5, 100, 0, CONF, leak=1e4, **kw)
    assert caught(bad, 0.5)


def test_dpps_pnbm_control(paper_sub):
    """DPPS-PNBM at κ = 1 with a start shared by all runs: the audit of S certifies more than the ε stated for it.
    (With its own random start per run the short chain's S is dominated by the start: see the row's power.)"""
    p, sub = paper_sub
    bad = xl.audit_dpps_pnbm(sub, p, 0.5, 200, 0, CONF, leak=800)
    assert caught(bad, 0.5)
