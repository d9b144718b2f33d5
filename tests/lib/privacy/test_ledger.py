"""Privacy ledger (issue #13): the ledger's provable ε against dp-accounting, and its entries' checks. The
distinguishing audits are in test_audit.py (their kernels) and tests/properties/test_audits.py (the audits)."""

import math

import pytest

from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import ledger as lg


def test_analytic_gaussian_agrees_with_dp_accounting():
    for sigma, sens, delta in ((1.0, 1.0, 1e-5), (3.0, 1.2, 1e-3), (0.5, 1.0, 0.1)):
        ours = lg.analytic_gaussian_epsilon(sigma, sens, delta)
        assert ours == pytest.approx(lg.pld_gaussian(sigma, sens, delta), rel=2e-2, abs=2e-3)
    assert lg.analytic_gaussian_epsilon(0.0, 1.0, 1e-5) == math.inf


def test_ledger_entries_agree_with_dp_accounting():
    mf = lg.dpsgd_mf_entry(1.0, 5, 4.0)
    assert mf.epsilon_provable == 2.0 and mf.pld_epsilon == pytest.approx(2.0, rel=1e-2)
    s2 = lg.hua_rounds_entry(1.0, 10, 2, "S2")  # ε/T per round, composed
    assert s2.epsilon_provable == 1.0 and s2.pld_epsilon <= 1.0 + 1e-2
    stated = lg.hua_rounds_as_stated(1.0, 10, 2, "S2")  # ε per round, as the paper runs it
    assert stated.epsilon_provable == 10.0 and 1.0 < stated.pld_epsilon <= 10.0 + 1e-2
    blip = lg.blip_entry(2.0, 4)
    assert blip.epsilon_provable == pytest.approx(2.0) and blip.pld_epsilon == pytest.approx(2.0, rel=1e-2)
    cs = lg.count_sketch_entry(1.0)
    assert cs.epsilon_provable == math.inf and cs.no_finite_reason
    liu = lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=False)
    assert liu.epsilon_provable == math.inf and "range" in liu.no_finite_reason


def test_dpsgd_pnbm_bound_exceeds_stated_by_L_times_Nk():
    e = lg.dpsgd_pnbm_entry(1.0, 1, 1.0, 40, 5, 4.0, 10.0)
    assert e.epsilon_provable == pytest.approx(200.0) and e.pld_epsilon == pytest.approx(200.0, rel=1e-6)


def test_check_entry_refuses_an_unexplained_infinite_epsilon():
    e = lg.LedgerEntry("x", "paper", "rating", 1.0, 0.0, math.inf, 0.0)
    with pytest.raises(ParameterError):
        lg.check_entry(e)


def test_dpsgd_pnbm_clipped_entry_is_its_stated_epsilon_and_agrees_with_dp_accounting():
    e = lg.dpsgd_pnbm_clipped_entry(1.0, 10, 1.0, 0.1, 4.0)
    assert e.source == "ours" and "(ours)" in e.mechanism
    assert e.epsilon_provable == 1.0
    assert e.extra["epsilon_item_means"] + 10 * e.extra["epsilon_per_iteration"] == pytest.approx(1.0)
    assert e.extra["laplace_scale_t1"] == pytest.approx(2.0 * 10 / 0.9)
    assert e.pld_epsilon <= 1.0 + 1e-2 and e.rdp_epsilon <= 1.0 + 5e-2


def test_liu_clipped_entry_has_a_finite_provable_epsilon_where_the_paper_has_none():
    ours = lg.liu_clipped_entry(4.0, 125.0, 5)
    paper = lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=False)
    assert ours.source == "ours" and "(ours)" in ours.mechanism and ours.epsilon_provable == 4.0
    assert paper.epsilon_provable == math.inf
    assert ours.extra["epsilon_rating_level"] == pytest.approx(0.8)
