"""The noise each DP mechanism draws follows the law its ledger row assumes, at the stated scale — per iteration (a
Kolmogorov–Smirnov test against the exact law) and composed (the noise summed over the iterations or rounds of a
run has the variance the composition assumes). The noise is read back from the release itself wherever the
gradient can be switched off, so the test sees what the mechanism adds, not what a helper says it adds. Fixed seeds;
p-value thresholds 10⁻³ (a correct implementation fails about once in 10³ seeds)."""

import math

import numpy as np
import pytest
from scipy import stats

from dpmf_lib import nbm
from dpmf_lib.nbm import accounting as acc
from dpmf_lib.nbm import model as nbm_model
from dpmf_lib.privacy import ledger as lg
from tests.nbm_toys import toy

P_MIN = 1e-3


def laplace_ks(x, b):
    return stats.kstest(np.ravel(x), stats.laplace(scale=b).cdf).pvalue


def var_ok(x, want, rel):
    return abs(float(np.var(x)) / want - 1.0) < rel


# ------------------------------------------------------------------------------------------------ DPSGD-PNBM


def _zero_gradient(monkeypatch):
    """G = 0: the update S ← S − η(β(G + N) + λS) with λ = 0 leaves S − η β Σ_t N_t."""
    def zero(S, data, users, items, vals, *, out=None, **kw):
        G = np.zeros_like(S, dtype=np.float32) if out is None else out
        G[:] = 0.0
        return G

    monkeypatch.setattr(nbm_model, "gradient", zero)


@pytest.mark.parametrize("impl", ["fused", "numpy"])
@pytest.mark.parametrize("K,gamma", [(1, 1.0), (4, 0.5)])
def test_dpsgd_pnbm_noise_is_laplace_at_the_papers_scale_per_iteration_and_composed(monkeypatch, impl, K, gamma):
    """Iteration t adds Laplace(b_t) with b_t = ΔF^(t)·Kγ/ε to every off-diagonal gradient entry (the ledger's
    per-iteration scale); over K iterations the summed noise has variance Σ_t 2 b_t²."""
    _zero_gradient(monkeypatch)
    r = toy(seed=3, nu=40, ni=40, density=0.6)
    eta, beta, eps, C = 0.5, 2.0, 1.0, 10.0
    phi = 4.0
    res = nbm.train_pnbm(r, epsilon=eps, K=K, eta=eta, lam=0.0, beta=beta, C=C, Nk=5, gamma=gamma,
                         min_user_ratings=3, init_high=0.2, seed=11, impl=impl)
    S0 = nbm_model.init_similarity(r.n_items, beta, 0.2, np.random.default_rng(11))
    off = ~np.eye(r.n_items, dtype=bool)
    total = ((S0.astype(np.float64) - res.S.astype(np.float64)) / (eta * beta))[off]
    b = [acc.sensitivity(t, phi, C) * K * gamma / eps for t in range(1, K + 1)]
    assert res.noise_scales == pytest.approx(b)
    e = lg.dpsgd_pnbm_entry(eps, K, gamma, 1, 1, phi, C)  # the ledger's scale at t = 1
    assert e.extra["laplace_scale_t1"] == pytest.approx(b[0])
    if K == 1:
        assert laplace_ks(total, b[0]) > P_MIN
    assert var_ok(total, sum(2 * x * x for x in b), 0.35)


def test_dpsgd_pnbm_clipped_noise_and_item_means(monkeypatch):
    """Ours: Laplace(2·clip/ε_it) per iteration, ε_it = (1 − share)ε/K; the item sums get Laplace(φ/ε_r)."""
    r = toy(seed=4, nu=60, ni=40, density=0.7)
    eps, share, K, clip, phi = 1.0, 0.2, 3, 0.5, 4.0
    rng = np.random.default_rng(0)
    counts = np.bincount(r.items, minlength=r.n_items).astype(float)
    sums = np.bincount(r.items, weights=r.values, minlength=r.n_items)
    eps_r = 4.0  # large enough that no noisy mean reaches the scale's ends (the clip is post-processing)
    noise = []
    for _ in range(200):  # the item-mean release, read back through its means
        m = nbm_model.noisy_item_means(r, eps_r, rng).astype(np.float64)
        assert ((m > r.rating_scale[0]) & (m < r.rating_scale[1])).all()
        noise.append(m * counts - sums)
    assert laplace_ks(np.concatenate(noise), phi / eps_r) > P_MIN
    _zero_gradient(monkeypatch)
    monkeypatch.setattr(nbm_model, "clipped_gradient",
                        lambda S, data, u, i, v, *, out=None, **kw: (np.zeros_like(S) if out is None else out * 0,
                                                                    np.zeros(data.n_users)))
    res = nbm.train_pnbm_clipped(r, epsilon=eps, clip_l1=clip, mean_share=share, K=K, eta=0.5, lam=0.0, beta=2.0,
                                 min_user_ratings=3, seed=5, impl="numpy")
    b = 2 * clip / ((1 - share) * eps / K)
    assert res.noise_scales == pytest.approx([b] * K)
    assert res.epsilon_effective == eps


# ------------------------------------------------------------------------------------------------ DPSGD-MF


def test_dpsgd_mf_noise_is_laplace_K_phi_over_eps_every_epoch(monkeypatch):
    """Every epoch each rating's error gets Laplace(Kφ/ε) (ε/K per epoch, every rating once per epoch)."""
    from dpmf_lib.nbm import model as m

    seen = []
    real = m.mf_epoch_kernel

    def spy(users, items, vals, order, noise, *a):
        seen.append(np.array(noise))
        return real(users, items, vals, order, noise, *a)

    monkeypatch.setattr(m, "mf_epoch_kernel", spy)
    r = toy(seed=5, nu=80, ni=30, density=0.6)
    eps, K, phi = 2.0, 4, 4.0
    nbm.train_dpsgd_mf(r, epsilon=eps, K=K, d=2, seed=3)
    assert len(seen) == K
    b = K * phi / eps
    for x in seen:
        assert laplace_ks(x, b) > P_MIN
    assert var_ok(np.sum(seen, axis=0), K * 2 * b * b, 0.2)  # composed: K independent epochs
    e = lg.dpsgd_mf_entry(eps, K, phi)
    assert e.epsilon_idealised == pytest.approx(K * 2 * phi / b)


# ------------------------------------------------------------------------------------------------ Hua


@pytest.mark.parametrize("eps,d", [(1.0, 2), (0.3, 8)])
def test_hua_round_noise_is_laplace_2_delta_sqrt_d_over_eps(eps, d):
    """Lemma 1 via Theorem 2 (b·√(2h)·z): per coordinate Laplace(2Δ√d/ε) — the ledger's per-round scale."""
    from dpmf_lib.objpert import noise as nz

    delta = 4.0
    x = nz.item_laplace_via_shares(3000, d, eps, delta, np.random.default_rng(1))
    b = 2 * delta * math.sqrt(d) / eps
    assert laplace_ks(x, b) > P_MIN
    sh = nz.shares(np.random.default_rng(2).standard_exponential(d), 7, d, eps, delta, np.random.default_rng(3))
    assert sh.shape == (7, d)


def test_hua_s1_noise_is_norm_gamma():
    """Theorem 1: ‖η‖ ~ Gamma(d, 2Δ/ε), direction uniform."""
    from dpmf_lib.objpert import noise as nz

    eps, delta, d = 0.7, 4.0, 5
    x = nz.norm_gamma(4000, d, eps, delta, np.random.default_rng(4))
    assert stats.kstest(np.linalg.norm(x, axis=1), stats.gamma(d, scale=2 * delta / eps).cdf).pvalue > P_MIN
    u = x[:, 0] / np.linalg.norm(x, axis=1)  # one coordinate of a uniform direction: mean 0, variance 1/d
    assert abs(u.mean()) < 4 / math.sqrt(4000 * d) and var_ok(u, 1 / d, 0.15)


def test_hua_s2_composed_noise_over_T_rounds(monkeypatch):
    """S2 at ε/T per round: the per-round fresh noise is Laplace(T·2Δ√d/ε), so over T rounds the summed fresh noise
    has variance T·2(T b)² — the scale at which T rounds compose to ε (ledger ``hua_rounds_entry``)."""
    from dpmf_lib.objpert import noise as nz

    T, eps, d, delta = 5, 1.0, 2, 4.0
    rng = np.random.default_rng(5)
    rho = np.stack([nz.item_laplace_via_shares(2000, d, eps / T, delta, rng) for _ in range(T)])
    b = 2 * delta * math.sqrt(d) / (eps / T)
    assert laplace_ks(rho[0], b) > P_MIN
    assert var_ok(rho.sum(axis=0), T * 2 * b * b, 0.1)
    e = lg.hua_rounds_entry(eps, T, d, "S2")
    assert e.extra["epsilon_per_round"] * T == pytest.approx(eps)


# ------------------------------------------------------------------------------------------------ JLT / BLIP


@pytest.mark.parametrize("eps,delta", [(1.0, 0.1), (6.0, 1e-5)])
def test_jlt_noise_is_gaussian_at_the_thesis_sigma(eps, delta):
    from dpmf_lib.attacks.mechanisms import JLT, jlt_codebook

    mech = JLT(jlt_codebook(50, 400, seed=0), eps, delta)
    y = np.stack([mech.sanitize(np.array([], np.int64), seed=s) for s in range(10)])
    sigma = 4 / eps * math.sqrt(math.log(1 / delta))
    assert mech.sigma == pytest.approx(sigma)
    assert stats.kstest(y.ravel(), stats.norm(scale=sigma).cdf).pvalue > P_MIN
    assert lg.jlt_entry(eps, delta, 1.0).extra["sigma"] == pytest.approx(sigma)


# ------------------------------------------------------------------------------------------------ Liu / DPPS


def test_liu_sampler_targets_eps_over_4B0_whatever_the_data():
    """The likelihood scale the SGLD chain runs is ε/(2B₀λ_r), B₀ = τ(Δ+κ)², on datasets whose max_i B_i differ."""
    from dpmf_lib.mf import Schedule
    from dpmf_lib.privacy import posterior_sampling as ps

    for seed, density in ((1, 0.2), (2, 0.9)):
        r = toy(seed=seed, nu=20, ni=15, density=density)
        pre = ps.preprocess(r, tau=12, kappa=1.0, rho=1.0, seed=0)
        rel = ps.sample_private(pre, 3.0, Lambda_u=1.0, Lambda_v=1.0, d=2, rounds=1, check_range=False,
                                schedule=Schedule(n_threads=1), seed=0, lambda_r=2.0, priors_public=True)
        assert rel.likelihood_scale == pytest.approx(3.0 / (2 * 12 * 25.0 * 2.0))
        assert rel.B == 12 * 25.0


def test_dpps_pnbm_scale_kappa_is_eps_over_4B_with_B_phi2_tau():
    r = toy(seed=6, nu=20, ni=10, density=0.8)
    tau = 4
    B = 16.0 * tau
    for eps in (1.0, 4 * B, 10 * B):
        res = nbm.sample_pnbm(r, epsilon=eps, tau=tau, T=1, L=5, Nk=3, seed=0)
        assert res.info["B"] == B and res.info["kappa"] == pytest.approx(min(1.0, eps / (4 * B)))
