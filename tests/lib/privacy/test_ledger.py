"""Privacy ledger: every row's bound against an independent computation — the closed form of its proof, written out
here from the proof rather than read from the ledger, and Google's ``dp-accounting`` called directly — for each
relation and coupling the row claims (composition over iterations and rounds, the item-mean coupling, the K bits of
BLIP, the Gaussian curve of JLT, the per-rating weight of Liu); and the rule that an ε whose premise the code breaks
is never the provable one. The distinguishing audits are in test_audit.py (their statistics) and
tests/properties/test_audit_controls.py (their positive controls)."""

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpmf_lib.errors import ParameterError
from dpmf_lib.privacy import ledger as lg

PURE = lg.PURE_DELTA


def pld_laplace_direct(pairs, delta=PURE):
    """ε at δ of the composition of Laplace releases given as (scale, L1 sensitivity), by dp-accounting's PLD."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    out = None
    for b, s in pairs:
        p = pld.from_laplace_mechanism(parameter=float(b), sensitivity=float(s), value_discretization_interval=1e-3)
        out = p if out is None else out.compose(p)
    return float(out.get_epsilon_for_delta(delta))


def rdp_laplace_direct(pairs, delta=PURE):
    from dp_accounting import dp_event, rdp

    acc = rdp.RdpAccountant()
    for b, s in pairs:
        acc.compose(dp_event.LaplaceDpEvent(float(b) / float(s)))
    return float(acc.get_epsilon(delta))


# ------------------------------------------------------------------------------------------------ Gaussian / JLT


def test_analytic_gaussian_agrees_with_dp_accounting_and_inverts_the_delta_curve():
    for sigma, sens, delta in ((1.0, 1.0, 1e-5), (3.0, 1.2, 1e-3), (0.5, 1.0, 0.1), (1.01, 1.03, 0.1)):
        ours = lg.analytic_gaussian_epsilon(sigma, sens, delta)
        assert ours == pytest.approx(lg.pld_gaussian(sigma, sens, delta), rel=2e-2, abs=2e-3)
        # Balle & Wang (2018), Theorem 8, evaluated independently at the returned ε: δ(ε) = δ
        a, b = sens / (2 * sigma), ours * sigma / sens
        if ours > 0:
            assert norm.cdf(a - b) - math.exp(ours) * norm.cdf(-a - b) == pytest.approx(delta, rel=1e-6, abs=1e-12)
    assert lg.analytic_gaussian_epsilon(0.0, 1.0, 1e-5) == math.inf


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (6.0, 0.1), (2.0, 1e-3)])
def test_jlt_entry_is_the_gaussian_curve_at_the_thesis_sigma(eps, delta):
    """σ = 4/ε √ln(1/δ) (3.10) with the codebook's L2 sensitivity max‖X_j‖ (coupling: ≈ 1, not 1)."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    sens = 1.07
    e = lg.jlt_entry(eps, delta, sens)
    sigma = 4.0 / eps * math.sqrt(math.log(1.0 / delta))
    direct = pld.from_gaussian_mechanism(standard_deviation=sigma, sensitivity=sens).get_epsilon_for_delta(delta)
    assert e.extra["sigma"] == pytest.approx(sigma)
    assert e.epsilon_provable == pytest.approx(direct, rel=2e-2, abs=2e-3)
    # a sensitivity of 1 (ignoring the codebook's norms) would understate it
    assert e.epsilon_provable > lg.analytic_gaussian_epsilon(sigma, 1.0, delta) or e.epsilon_provable == 0.0


# ------------------------------------------------------------------------------------------------ BLIP


@pytest.mark.parametrize("eps,K", [(2.0, 4), (0.5, 1), (6.0, 3)])
def test_blip_entry_is_K_randomized_responses(eps, K):
    """p = 1/(1 + e^{ε/K}); one item sets ≤ K bits, each a randomized response of log-ratio ln((1 − p)/p) = ε/K."""
    e = lg.blip_entry(eps, K)
    p = 1.0 / (1.0 + math.exp(eps / K))
    assert e.epsilon_provable == pytest.approx(K * math.log((1 - p) / p)) == pytest.approx(eps)
    assert e.pld_epsilon == pytest.approx(eps, rel=1e-2, abs=1e-3)
    # an item whose codeword sets fewer distinct bits costs proportionally less; more bits, more
    assert lg.blip_entry(eps, K, nbits_max=2 * K).epsilon_provable == pytest.approx(2 * eps)


# ------------------------------------------------------------------------------------------------ count sketch


def test_count_sketch_has_no_finite_epsilon():
    cs = lg.count_sketch_entry(1.0)
    assert cs.epsilon_provable == math.inf and cs.no_finite_reason and cs.kind == "none"


# ------------------------------------------------------------------------------------------------ Liu / DPPS-MF


def test_liu_bound_needs_the_range_rule_and_a_data_independent_prior():
    B0 = 5 * (4 + 1.0) ** 2  # τ (Δ+κ)²
    met_public = lg.liu_entry(4.0, B0, 5, constraint_satisfied=True, w_max=1.0, lambda_data_dependent=False)
    assert met_public.epsilon_provable == 4.0 and met_public.kind == "provable"
    met_fitted = lg.liu_entry(4.0, B0, 5, constraint_satisfied=True, w_max=1.0)  # Λ from a non-private run
    assert met_fitted.epsilon_provable == math.inf and met_fitted.epsilon_idealised == 4.0
    assert met_fitted.kind == "idealised" and met_fitted.no_finite_reason.startswith("premise broken")
    unmet = lg.liu_entry(4.0, B0, 5, constraint_satisfied=False, w_max=1.0, lambda_data_dependent=False)
    assert unmet.epsilon_provable == math.inf and "range" in unmet.no_finite_reason and unmet.kind == "none"


@pytest.mark.parametrize("rho", [1.0, 10.0])
def test_liu_rating_level_epsilon_uses_the_largest_weight(rho):
    """One rating's term is ≤ w_i (Δ+κ)²: on Theorem 1's scale (a user's ≤ B gives ε) changing one value costs
    ε w_i (Δ+κ)²/B. Computed here from the counts, independently of the preprocessing code."""
    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.privacy import posterior_sampling as ps

    counts = [2, 3, 7, 12]  # the light users get w_i = min(ρ, τ/m_i) > 1 when ρ > 1
    users = np.repeat(np.arange(4), counts)
    items = np.concatenate([np.arange(c) for c in counts])
    r = Ratings(users.astype(np.int32), items.astype(np.int32), np.full(len(users), 3.0, np.float32), 4, 12,
                (1.0, 5.0), DataSource("toy", False))
    tau, kappa, eps = 5, 1.0, 4.0
    pre = ps.preprocess(r, tau=tau, kappa=kappa, rho=rho, seed=0)
    c = (4.0 + kappa) ** 2
    w = np.minimum(rho, tau / np.array(counts, float))
    assert pre.B == tau * c  # B₀, data-independent
    assert ps.rating_epsilon(pre, eps) == pytest.approx(eps * w.max() * c / (tau * c))
    np.testing.assert_allclose(ps.rating_epsilons(pre, eps), eps * w * c / (tau * c))
    e = lg.liu_entry(eps, pre.B, tau, constraint_satisfied=True, w_max=float(pre.w.max()))
    assert e.extra["epsilon_rating_stated"] == pytest.approx(eps * w.max() / tau)
    assert (e.extra["epsilon_rating_stated"] > eps / tau) == (rho > 1)  # the paper's ε/τ understates it at ρ > 1


def test_liu_B_is_data_independent():
    """Two datasets whose largest B_i differ get the same B (and so the same target scale ε/(4B))."""
    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.privacy import posterior_sampling as ps

    def toy(counts):
        users = np.repeat(np.arange(len(counts)), counts)
        items = np.concatenate([np.arange(c) for c in counts])
        return Ratings(users.astype(np.int32), items.astype(np.int32), np.full(len(users), 3.0, np.float32),
                       len(counts), 20, (1.0, 5.0), DataSource("toy", False))

    a = ps.preprocess(toy([2, 3]), tau=10, kappa=1.0, rho=1.0, seed=0)
    b = ps.preprocess(toy([2, 9]), tau=10, kappa=1.0, rho=1.0, seed=0)
    assert a.B_data != b.B_data  # the paper's max_i B_i moves with one user's counts
    assert a.B == b.B == 10 * 25.0
    assert ps.likelihood_scale(3.0, a.B, 2.0) == ps.likelihood_scale(3.0, b.B, 2.0) == 3.0 / (2 * 250.0 * 2.0)


def test_liu_clipped_entry_is_provable_only_with_a_data_independent_prior():
    ours = lg.liu_clipped_entry(4.0, 125.0, 5, w_max=1.0, lambda_data_dependent=False)
    assert ours.source == "ours" and "(ours)" in ours.mechanism and ours.epsilon_provable == 4.0
    assert ours.extra["epsilon_rating_stated"] == pytest.approx(0.8)
    fitted = lg.liu_clipped_entry(4.0, 125.0, 5, w_max=1.0)
    assert fitted.epsilon_provable == math.inf and fitted.epsilon_idealised == 4.0
    assert lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=False, w_max=1.0).epsilon_provable == math.inf


def test_dpps_mf_entry_is_liu_with_a_public_prior():
    e = lg.dpps_mf_entry(50.0, 200, constraint_satisfied=True, rho=0.03, rho_on_noise_only=False)
    assert e.epsilon_provable == 50.0 and e.extra["epsilon_rating_stated"] == pytest.approx(50.0 / 200)
    noise_only = lg.dpps_mf_entry(50.0, 200, constraint_satisfied=True, rho=0.03, rho_on_noise_only=True)
    assert "ε/ζ" in noise_only.caveats


# ------------------------------------------------------------------------------------------------ DPSGD-PNBM


@pytest.mark.parametrize("K,gamma", [(1, 1.0), (4, 1.0), (6, 0.5)])
def test_dpsgd_pnbm_bound_composes_L_Nk_sensitivities_over_K_iterations(K, gamma):
    """Per iteration one changed value moves G by ≤ L·N_k·ΔF^(t) in L1 (every rating's row is ≤ N_k·ΔF^(t)/2 and
    the item means reach every rating); Laplace of scale b_t = ΔF^(t)·Kγ/ε; basic composition over K iterations:
    Σ_t L N_k ΔF^(t)/b_t = L N_k ε/γ. dp-accounting's PLD of the same K Laplace releases agrees."""
    eps, L, Nk, phi, C = 1.0, 40, 5, 4.0, 10.0
    e = lg.dpsgd_pnbm_entry(eps, K, gamma, L, Nk, phi, C)

    def dF(t):  # the paper's ΔF^(t) = 2 e_max(t) φ / C, e_max(t) = 0.5 + (φ − 1)/(t + 1)
        return 2.0 * (0.5 + (phi - 1.0) / (t + 1.0)) * phi / C

    pairs = [(dF(t) * K * gamma / eps, L * Nk * dF(t)) for t in range(1, K + 1)]
    closed = sum(s / b for b, s in pairs)
    assert closed == pytest.approx(L * Nk * eps / gamma)
    assert e.epsilon_idealised == pytest.approx(closed)
    assert e.pld_epsilon == pytest.approx(closed, rel=1e-6)  # per-step ε > 50: the PLD path sums exactly
    assert e.extra["laplace_scale_t1"] == pytest.approx(pairs[0][0])
    assert e.extra["l1_sensitivity_bound_t1"] == pytest.approx(pairs[0][1])
    # the predictor releases r̄ without noise: the bound is for S alone, never printed as provable
    assert e.epsilon_provable == math.inf and e.kind == "idealised" and "r̄" in e.premise_broken


def test_dpsgd_pnbm_small_instance_pld_matches_dp_accounting():
    """A case small enough for the PLD path itself: dp-accounting called directly agrees."""
    e = lg.dpsgd_pnbm_entry(0.5, 3, 1.0, 2, 1, 4.0, 10.0)
    pairs = [(e.extra["laplace_scale_t1"], e.extra["l1_sensitivity_bound_t1"])]
    assert pairs[0][1] / pairs[0][0] < 50
    from dpmf_lib.nbm import accounting as acc

    pairs = [(acc.laplace_scale(t, 0.5, 3, 1.0, 4.0, 10.0), 2 * acc.sensitivity(t, 4.0, 10.0)) for t in (1, 2, 3)]
    assert e.pld_epsilon == pytest.approx(pld_laplace_direct(pairs), rel=1e-3)
    assert e.epsilon_idealised == pytest.approx(sum(s / b for b, s in pairs)) == pytest.approx(2 * 0.5)


@pytest.mark.parametrize("K,share", [(1, 0.1), (10, 0.1), (5, 0.3)])
def test_dpsgd_pnbm_clipped_entry_composes_item_means_and_K_iterations(K, share):
    """ε_r = share·ε on the item sums (sensitivity φ), then K Laplace(2·clip/ε_it) with ε_it = (1 − share)ε/K:
    ε_r + K ε_it = ε; PLD and RDP of the same K + 1 releases from dp-accounting directly."""
    eps, clip, phi = 1.0, 1.0, 4.0
    e = lg.dpsgd_pnbm_clipped_entry(eps, K, clip, share, phi)
    eps_r, eps_it = share * eps, (1 - share) * eps / K
    pairs = [(phi / eps_r, phi)] + [(2 * clip / eps_it, 2 * clip)] * K
    assert e.source == "ours" and "(ours)" in e.mechanism and e.kind == "provable"
    assert e.epsilon_provable == pytest.approx(sum(s / b for b, s in pairs)) == pytest.approx(eps)
    assert e.extra["laplace_scale_t1"] == pytest.approx(2 * clip / eps_it)
    assert e.extra["epsilon_item_means"] + K * e.extra["epsilon_per_iteration"] == pytest.approx(eps)
    assert e.pld_epsilon == pytest.approx(pld_laplace_direct(pairs), rel=1e-3, abs=1e-3)
    assert e.rdp_epsilon == pytest.approx(rdp_laplace_direct(pairs), rel=1e-3)
    assert e.pld_epsilon <= eps + 1e-2


# ------------------------------------------------------------------------------------------------ DPPS-PNBM


@pytest.mark.parametrize("eps", [4.0, 1e6])
def test_dpps_pnbm_bound_counts_every_user_through_the_item_means(eps):
    """κ = min(1, ε/(4B)); the non-private r̄ lets one user move every user's term: n·2κB = n·min(ε, 4B)/2."""
    B, n = 16.0 * 5, 8
    e = lg.dpps_pnbm_entry(eps, B, n, 0.006, rho_on_noise_only=False)
    assert e.epsilon_idealised == pytest.approx(n * 2 * min(1.0, eps / (4 * B)) * B)
    assert e.extra["epsilon_target"] == pytest.approx(min(eps, 4 * B))
    assert e.epsilon_provable == math.inf and e.kind == "idealised"
    noise_only = lg.dpps_pnbm_entry(eps, B, n, 0.5, rho_on_noise_only=True)
    assert noise_only.epsilon_idealised == pytest.approx(n * min(eps / 0.5, 4 * B) / 2)
    old = lg.dpps_pnbm_entry(eps, B, n, 0.006, rho_on_noise_only=False, drift="clipped_error")
    assert "gradient" in old.premise_broken


# ------------------------------------------------------------------------------------------------ DPSGD-MF


@pytest.mark.parametrize("K", [1, 5])
def test_dpsgd_mf_bound_is_2phi_per_epoch_composed(K):
    """Laplace(Kφ/ε) per error and epoch; one changed value moves its own error by ≤ φ and the item's others by
    φ/n_i each through r̄: 2φ per epoch, K epochs → 2ε. dp-accounting directly on the same K releases."""
    eps, phi = 1.0, 4.0
    e = lg.dpsgd_mf_entry(eps, K, phi)
    pairs = [(K * phi / eps, 2 * phi)] * K
    assert e.epsilon_idealised == pytest.approx(sum(s / b for b, s in pairs)) == pytest.approx(2 * eps)
    assert e.pld_epsilon == pytest.approx(pld_laplace_direct(pairs), rel=1e-3, abs=1e-3)
    assert e.rdp_epsilon == pytest.approx(rdp_laplace_direct(pairs), rel=1e-3)
    assert e.epsilon_provable == math.inf and "r̄" in e.premise_broken


# ------------------------------------------------------------------------------------------------ Hua


def test_hua_s1_exact_is_idealised_and_gd_has_no_finite_epsilon():
    ex = lg.hua_s1_entry(0.5, "exact")
    assert ex.epsilon_idealised == 0.5 and ex.epsilon_provable == math.inf and "U" in ex.premise_broken
    gd = lg.hua_s1_entry(0.5, "gd")
    assert gd.epsilon_provable == math.inf and gd.kind == "none" and gd.no_finite_reason


@pytest.mark.parametrize("T,d", [(1, 2), (10, 2), (25, 8)])
def test_hua_rounds_compose_over_T(T, d):
    """Per round Laplace(2Δ√d/ε_r) per coordinate, L1 sensitivity 2Δ√d (one rating moves one item's aggregate by
    ≤ 2Δ in L2 with ‖u‖ ≤ 1): ε_r per round, T ε_r over T rounds. As stated: ε per round → Tε."""
    eps, delta = 1.0, 1e-5
    comp = lg.hua_rounds_entry(eps, T, d, "S2", delta)
    pairs = [(2 * math.sqrt(d) / (eps / T), 2 * math.sqrt(d))] * T
    assert comp.epsilon_idealised == pytest.approx(sum(s / b for b, s in pairs)) == pytest.approx(eps)
    assert comp.pld_epsilon == pytest.approx(pld_laplace_direct(pairs, delta), rel=1e-3, abs=1e-3)
    assert comp.rdp_epsilon == pytest.approx(rdp_laplace_direct(pairs, delta), rel=1e-3)
    stated = lg.hua_rounds_as_stated(eps, T, d, "S3", delta)
    pairs = [(2 * math.sqrt(d) / eps, 2 * math.sqrt(d))] * T
    assert stated.epsilon_idealised == pytest.approx(T * eps)
    assert stated.rdp_epsilon == pytest.approx(rdp_laplace_direct(pairs, delta), rel=1e-3)
    for e in (comp, stated):
        assert e.epsilon_provable == math.inf and "U" in e.premise_broken


# ------------------------------------------------------------------------------------------------ the rule


def all_entries():
    return [lg.blip_entry(2.0, 4), lg.jlt_entry(1.0, 1e-5, 1.05), lg.count_sketch_entry(1.0),
            lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=True, w_max=1.0),
            lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=True, w_max=1.0, lambda_data_dependent=False),
            lg.liu_entry(4.0, 125.0, 5, constraint_satisfied=False, w_max=1.0),
            lg.liu_clipped_entry(4.0, 125.0, 5, w_max=2.0), lg.dpsgd_pnbm_entry(1.0, 1, 1.0, 40, 5, 4.0, 10.0),
            lg.dpsgd_pnbm_clipped_entry(1.0, 10, 1.0, 0.1, 4.0), lg.dpps_pnbm_entry(4.0, 80.0, 8, 0.006, False),
            lg.dpps_mf_entry(4.0, 5, constraint_satisfied=True, rho=0.006, rho_on_noise_only=False),
            lg.dpsgd_mf_entry(1.0, 5, 4.0), lg.hua_s1_entry(1.0, "exact"), lg.hua_s1_entry(1.0, "gd"),
            lg.hua_rounds_entry(1.0, 10, 2, "S2"), lg.hua_rounds_as_stated(1.0, 10, 2, "S3")]


def test_no_entry_prints_an_idealised_bound_as_provable():
    for e in all_entries():
        lg.check_entry(e)
        d = e.as_dict()
        if e.premise_broken:
            assert d["epsilon_provable"] == math.inf and d["epsilon_kind"] in ("idealised", "none"), e.mechanism
            assert e.no_finite_reason.startswith("premise broken"), e.mechanism
        if math.isfinite(d["epsilon_provable"]):
            assert not e.premise_broken and d["epsilon_kind"] == "provable"
            assert d["epsilon_idealised"] == d["epsilon_provable"]


def test_every_noisy_row_names_its_sampler():
    for e in all_entries():
        if math.isfinite(e.epsilon_idealised) and e.mechanism != "Count-sketch data clipping":
            assert e.noise_sampler, e.mechanism


def test_check_entry_refuses_an_unexplained_infinite_epsilon_and_a_provable_broken_premise():
    with pytest.raises(ParameterError):
        lg.check_entry(lg.LedgerEntry("x", "paper", "rating", 1.0, 0.0, math.inf, 0.0))
    e = lg.LedgerEntry("x", "paper", "rating", 1.0, 0.0, 1.0, 0.0)
    e.premise_broken = "set after construction"
    with pytest.raises(ParameterError, match="premise"):
        lg.check_entry(e)
