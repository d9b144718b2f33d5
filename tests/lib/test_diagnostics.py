"""dpmf_lib.diagnostics: split-R̂ and ESS against hand-made cases and ArviZ."""

import math

import numpy as np
import pytest

from dpmf_lib import diagnostics as dg


def _chains():
    rng = np.random.default_rng(2024)
    mixed = rng.standard_normal((4, 300))
    e = rng.standard_normal((3, 2000))
    ar1 = np.zeros_like(e)
    for t in range(1, ar1.shape[1]):
        ar1[:, t] = 0.7 * ar1[:, t - 1] + e[:, t]
    drift = rng.standard_normal((2, 301)) + np.linspace(0, 2, 301)  # odd length: the middle draw is dropped
    return {"mixed": mixed, "ar1": ar1, "drift": drift}


#: az.rhat(x, method="split") and az.ess(x, method="mean") of _chains(), ArviZ 0.23.4 (so the agreement is checked
#: where ArviZ is not installed too)
ARVIZ = {"mixed": (0.9977438541892505, 1155.8529333716665), "ar1": (1.0036950891641339, 899.1014291974711),
         "drift": (1.113150545846335, 12.589524753515937)}


def test_split_rhat_hand_made_case():
    # halves [0, 1, 0, 1] and [2, 3, 2, 3]: W = 1/3, B/n = var([0.5, 2.5], ddof=1) = 2, n = 4
    x = np.array([[0.0, 1.0, 0.0, 1.0, 2.0, 3.0, 2.0, 3.0]])
    assert dg.split_rhat(x) == pytest.approx(math.sqrt((0.75 / 3 + 2.0) * 3), rel=1e-15)
    assert dg.split_rhat(x[0]) == dg.split_rhat(x)  # a 1-d array is one chain


def test_split_rhat_edge_cases():
    assert math.isnan(dg.split_rhat(np.ones((2, 3))))  # fewer than 4 draws per chain
    assert math.isnan(dg.split_rhat(np.ones((2, 10))))  # constant everywhere: nothing to compare
    assert dg.split_rhat(np.r_[np.zeros(5), np.ones(5)][None, :]) == math.inf  # constant halves that differ
    assert math.isnan(dg.split_rhat(np.r_[np.zeros(9), np.nan][None, :]))


@pytest.mark.parametrize("name", list(ARVIZ))
def test_split_rhat_agrees_with_arviz(name):
    assert dg.split_rhat(_chains()[name]) == pytest.approx(ARVIZ[name][0], rel=1e-12)


@pytest.mark.parametrize("name", ["mixed", "ar1"])
def test_ess_agrees_with_arviz_on_long_chains(name):
    assert dg.ess(_chains()[name]) == pytest.approx(ARVIZ[name][1], rel=1e-12)


def test_ess_on_a_short_drifting_chain_is_within_a_few_percent_of_arviz():
    # ArviZ also keeps the last even lag of Geyer's sequence (Stan's "improved" estimate): a few percent here
    assert dg.ess(_chains()["drift"]) == pytest.approx(ARVIZ["drift"][1], rel=0.06)


def test_live_arviz_agreement():
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(5)
    for x in (rng.standard_normal((3, 500)), rng.standard_normal((2, 801)).cumsum(axis=1) * 0.05
              + rng.standard_normal((2, 801))):
        assert dg.split_rhat(x) == pytest.approx(float(az.rhat(x, method="split")), rel=1e-12)
    x = rng.standard_normal((4, 1000))
    assert dg.ess(x) == pytest.approx(float(az.ess(x, method="mean")), rel=1e-12)


def test_ess_of_iid_draws_is_about_their_number():
    x = np.random.default_rng(0).standard_normal((2, 5000))
    assert 0.9 * x.size < dg.ess(x) < 1.1 * x.size
    assert math.isnan(dg.ess(np.ones((2, 7))))  # fewer than 4 draws per half


# ------------------------------------------------------------------------------------------------ from counts


def _rhat_of_sequences(seqs) -> float:
    """BDA3 R̂ of 0/1 sequences (no further split), as ArviZ's ``rhat(method="identity")`` computes it."""
    seqs = np.asarray(seqs, dtype=np.float64)
    n = seqs.shape[1]
    W = seqs.var(axis=1, ddof=1).mean()
    B = n * seqs.mean(axis=1).var(ddof=1)
    return math.sqrt((B / W + n - 1) / n)


@pytest.mark.parametrize("m", [2, 4])
def test_split_rhat_counts_is_the_rhat_of_the_indicator_sequences(m):
    rng = np.random.default_rng(m)
    n = 60
    for _ in range(10):
        seqs = (rng.random((m, n)) < rng.uniform(0.2, 0.8, (m, 1))).astype(float)
        got = dg.split_rhat_counts([np.array([s.sum()]) for s in seqs], n)
        assert got == pytest.approx(_rhat_of_sequences(seqs), rel=1e-12)


def test_split_rhat_counts_takes_the_worst_candidate_and_skips_constant_ones():
    n = 100
    a, b = np.array([50, 0, 30]), np.array([50, 0, 70])  # candidate 1: always out in both halves, skipped
    worst = dg.split_rhat_counts([a[2:], b[2:]], n)
    assert dg.split_rhat_counts([a, b], n) == worst > dg.split_rhat_counts([a[:1], b[:1]], n)


def test_split_rhat_counts_hand_cases():
    n = 100
    assert math.isnan(dg.split_rhat_counts([np.array([n, 0])] * 2, n))  # one state in both halves
    assert dg.split_rhat_counts([np.array([0, n]), np.array([n, 0])], n) == math.inf  # opposite states
    assert math.isnan(dg.split_rhat_counts([np.array([5])], n))  # one sequence
    assert math.isnan(dg.split_rhat_counts([np.array([1]), np.array([1])], 1))  # one state per sequence
    # two halves, one candidate, means 0.5 and 0.9: W = (0.25 + 0.09)/2 · n/(n−1), B/n = (0.4)²/2
    w = (0.25 + 0.09) / 2 * n / (n - 1)
    assert dg.split_rhat_counts([np.array([50]), np.array([90])], n) == pytest.approx(
        math.sqrt(((n - 1) / n * w + 0.08) / w), rel=1e-14)


def test_two_sequence_closed_form_equals_the_general_form():
    rng = np.random.default_rng(0)
    n = 400
    for _ in range(20):
        p = rng.uniform(0, 1, 30)
        a, b = rng.binomial(n, p), rng.binomial(n, np.clip(p + rng.normal(0, 0.05, 30), 0, 1))
        pa, pb = a / n, b / n
        w = (pa * (1 - pa) + pb * (1 - pb)) / 2 * n / (n - 1)
        b_over_n = np.var(np.stack([pa, pb]), axis=0, ddof=1)
        live = w > 0
        want = float(np.sqrt(((n - 1) / n * w[live] + b_over_n[live]) / w[live]).max())
        assert dg.split_rhat_counts([a, b], n) == pytest.approx(want, rel=1e-12)
