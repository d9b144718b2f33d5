"""The point-mass check of constant chains (``decoders`` module notes): split-R̂ over several sequences, the dispersed
start of the check chain, and the check inside ``attack`` on a JLT whose posterior is a point."""

import math

import numpy as np
import pytest

from dpmf_lib.attacks import JLT, decoders, jlt_codebook


def test_split_rhat_sequences_of_two_halves_is_split_rhat():
    rng = np.random.default_rng(0)
    n = 400
    for _ in range(20):
        p = rng.uniform(0, 1, 30)
        a, b = rng.binomial(n, p), rng.binomial(n, np.clip(p + rng.normal(0, 0.05, 30), 0, 1))
        assert decoders.split_rhat_sequences([a, b], n) == pytest.approx(decoders.split_rhat(a, b, n), rel=1e-12)


def test_split_rhat_sequences_hand_cases():
    n = 100
    const, other = np.array([n, 0, 0]), np.array([0, 0, n])
    assert math.isnan(decoders.split_rhat_sequences([const] * 4, n))  # the same point in every sequence
    assert decoders.split_rhat_sequences([const, const, other, other], n) == math.inf  # two points
    # four sequences, one candidate: means 0.5, 0.5, 0.5, 0.9 -> W = (3 * 0.25 + 0.09) / 4 * n / (n - 1),
    # B/n = var([.5, .5, .5, .9], ddof=1) = 0.04
    w = (3 * 0.25 + 0.09) / 4 * n / (n - 1)
    want = math.sqrt(((n - 1) / n * w + 0.04) / w)
    got = decoders.split_rhat_sequences([np.array([50]), np.array([50]), np.array([50]), np.array([90])], n)
    assert got == pytest.approx(want, rel=1e-12)


def _result(halves, n_half=100):
    return decoders.MCMCResult(np.arange(3), np.zeros(3), 3, 2 * n_half, float("nan"), None, halves, n_half)


def test_point_mass_rhat_confirms_only_the_same_state():
    n = 100
    a = np.array([n, 0, n])
    r, same = decoders.point_mass_rhat(_result((a, a)), _result((a, a)))
    assert (r, same) == (1.0, True)
    b = np.array([0, n, n])
    r, same = decoders.point_mass_rhat(_result((a, a)), _result((b, b)))  # stuck in another state
    assert r == math.inf and not same
    moving = np.array([60, 40, n])
    r, same = decoders.point_mass_rhat(_result((a, a)), _result((moving, a)))
    assert not same and r > 1.05


def test_dispersed_start_avoids_the_first_start_and_plain_start_is_unchanged():
    rng, ref = np.random.default_rng(3), np.random.default_rng(3)
    plain = decoders._slots_init(40, 12, 10, rng)
    assert np.array_equal(plain[:10], ref.choice(40, size=10, replace=False))  # the thesis's start, same draws
    assert np.all(plain[10:] == -1)
    first = plain[plain >= 0]
    check = decoders._slots_init(40, 12, 10, np.random.default_rng(4), avoid=first)
    held = check[check >= 0]
    assert len(held) == 10 and len(set(held)) == 10 and not set(held) & set(first)
    # too few free candidates: all free ones first, then topped up from the avoided ones
    tight = decoders._slots_init(15, 12, 10, np.random.default_rng(5), avoid=np.arange(8))
    held = tight[tight >= 0]
    assert len(set(held)) == 10 and set(range(8, 15)) <= set(held)


def _sharp_jlt(seed=0):
    """A 200-item JLT at ε = 600 (σ ≈ 0.01): the posterior sits on the true profile, so chains that find it stay."""
    jc = jlt_codebook(200, 400, seed=seed)
    mech = JLT(jc, 600.0, 0.1)
    profile = np.array([3, 17, 42, 99, 150])
    y = mech.sanitize(profile, seed=seed + 1)
    q = np.full(200, 0.05)
    return mech, profile, y, q


def test_attack_confirms_a_point_mass_with_a_check_chain_and_keeps_its_rankings():
    mech, profile, y, q = _sharp_jlt()
    diag = {}
    kw = dict(attacks=("mcmc_prior", "mcmc_flat"), burn_in=200, n_samples=2000, c_fallback=5.0, seed=7)
    c_hat, ranks = decoders.attack(mech, y, q, diagnostics=diag, **kw)
    _, plain = decoders.attack(mech, y, q, **kw)  # no diagnostics: no check chain
    for name in ("mcmc_prior", "mcmc_flat"):
        assert np.array_equal(ranks[name], plain[name])  # the check never changes the attack's result
        assert set(ranks[name][:c_hat]) == set(profile)
        assert diag[name + ":point_mass"] == 1.0 and diag[name] == 1.0


def test_attack_reports_a_stuck_pair_as_not_converged(monkeypatch):
    """Two constant chains in different states: R̂ = inf, not a point mass. (Forced: the check chain is made to sit
    where it started, which is disjoint from the first chain's state.)"""
    mech, profile, y, q = _sharp_jlt()
    real = decoders.mcmc_jlt

    def frozen_check(*args, avoid=None, **kw):
        res = real(*args, avoid=avoid, **kw)
        if avoid is None:
            return res
        n = res.n_half
        held = np.zeros(len(res.candidates))
        held[np.setdiff1d(np.arange(len(res.candidates)), avoid)[:5]] = n  # sits at a start disjoint from the first
        return decoders.MCMCResult(res.candidates, held / n, res.c_max, res.n_transitions, float("nan"), res.start,
                                   (held, held), n)

    monkeypatch.setattr(decoders, "mcmc_jlt", frozen_check)
    diag = {}
    decoders.attack(mech, y, q, attacks=("mcmc_prior",), burn_in=200, n_samples=2000, c_fallback=5.0, seed=7,
                    diagnostics=diag)
    assert diag["mcmc_prior:point_mass"] == 0.0 and diag["mcmc_prior"] == math.inf
