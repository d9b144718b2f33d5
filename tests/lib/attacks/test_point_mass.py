"""The point-mass check of constant chains (``decoders`` module notes): split-R̂ over several sequences, the dispersed
start of the check chain, and the check inside ``attack`` on a JLT whose posterior is a point."""

import math

import numpy as np
import pytest

from dpmf_lib.attacks import JLT, decoders, jlt_codebook
from dpmf_lib.diagnostics import split_rhat_counts


def test_split_rhat_sequences_hand_cases():
    n = 100
    const, other = np.array([n, 0, 0]), np.array([0, 0, n])
    assert math.isnan(split_rhat_counts([const] * 4, n))  # the same point in every sequence
    assert split_rhat_counts([const, const, other, other], n) == math.inf  # two points
    # four sequences, one candidate: means 0.5, 0.5, 0.5, 0.9 -> W = (3 * 0.25 + 0.09) / 4 * n / (n - 1),
    # B/n = var([.5, .5, .5, .9], ddof=1) = 0.04
    w = (3 * 0.25 + 0.09) / 4 * n / (n - 1)
    want = math.sqrt(((n - 1) / n * w + 0.04) / w)
    got = split_rhat_counts([np.array([50]), np.array([50]), np.array([50]), np.array([90])], n)
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


def test_first_chains_stream_is_the_first_draw_of_the_attack_seed(monkeypatch):
    """The check chains' streams are drawn after the chains' own, so every chain (and row) is what it was before the
    check existed: the first chain of ``mcmc_prior`` gets the first draw of the attack's seed. (Drawing the check
    streams first passes every other test here and changes most rankings.)"""
    mech, profile, y, q = _sharp_jlt()
    real, seen = decoders.mcmc_jlt, []

    def spy(*a, seed=None, avoid=None, **kw):
        if avoid is None:
            seen.append(seed.bit_generator.state)
        return real(*a, seed=seed, avoid=avoid, **kw)

    monkeypatch.setattr(decoders, "mcmc_jlt", spy)
    decoders.attack(mech, y, q, attacks=("mcmc_prior", "mcmc_flat"), burn_in=200, n_samples=2000, c_fallback=5.0,
                    seed=7, diagnostics={})
    root = np.random.default_rng(7)
    want = [np.random.default_rng(root.integers(0, 2**63 - 1)).bit_generator.state for _ in range(2)]
    assert seen == want


def test_check_chain_starts_away_from_the_first_chains_start_and_state(monkeypatch):
    mech, profile, y, q = _sharp_jlt()
    real, runs = decoders.mcmc_jlt, []

    def spy(*a, avoid=None, **kw):
        res = real(*a, avoid=avoid, **kw)
        runs.append((res, avoid))
        return res

    monkeypatch.setattr(decoders, "mcmc_jlt", spy)
    diag = {}
    decoders.attack(mech, y, q, attacks=("mcmc_prior",), burn_in=200, n_samples=2000, c_fallback=5.0, seed=7,
                    diagnostics=diag)
    (first, _), (check, avoid) = runs
    state = np.flatnonzero(first.halves[0] > 0)
    assert set(first.start) <= set(avoid) and set(state) <= set(avoid)
    assert not set(check.start) & (set(first.start) | set(state))


def test_no_disjoint_check_start_leaves_the_chain_unconfirmed():
    """f = 1: the candidates are exactly the ĉ items, so a check chain can only start where the first did — two chains
    sitting at a shared start prove nothing: R̂ stays undefined and the point mass unconfirmed."""
    mech, profile, y, q = _sharp_jlt()
    diag = {}
    decoders.attack(mech, y, q, attacks=("mcmc_prior",), f=1.0, burn_in=200, n_samples=2000, c_fallback=5.0, seed=7,
                    diagnostics=diag)
    assert diag["mcmc_prior:point_mass"] == 0.0 and math.isnan(diag["mcmc_prior"])


def test_point_mass_rhat_rejects_chains_it_cannot_compare():
    n = 100
    a = np.array([n, 0, n])
    with pytest.raises(ValueError):
        decoders.point_mass_rhat(_result((a, a)), _result(()))
    with pytest.raises(ValueError):
        decoders.point_mass_rhat(_result((a, a)), _result((a, a), n_half=50))
