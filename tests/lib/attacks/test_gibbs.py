"""Joint-decoder Gibbs kernels: agreement with the plain reference, brute-force transition probabilities, exact marginals."""

import math

import numpy as np
import pytest

from dpmf_lib.attacks import BLIP, JLT, bloom_codebook, jlt_codebook
from dpmf_lib.attacks import gibbs
from dpmf_lib.attacks.decoders import mcmc_blip, mcmc_jlt


def _blip_problem(eps=6.0, seed=0):
    rng = np.random.default_rng(seed)
    n_c, L, K = 6, 40, 3
    cb = bloom_codebook(n_c, L, K, seed=seed)
    m = BLIP(cb, eps)
    bt = m.sanitize(np.array([0, 2]), seed=rng)
    log_rho = rng.normal(-0.5, 0.7, n_c)
    lam = math.log((1 - m.p_eps) / m.p_eps)
    sgn = np.where(bt > 0, 1, -1).astype(np.int32)

    def log_post(profile, c_max):
        return gibbs.blip_log_posterior(profile, cb.bits, cb.nbits, bt, m.p_eps, log_rho, c_max)
    return cb, bt, log_rho, lam, sgn, log_post, m


JLT_CAND = np.array([7, 2, 9, 0, 4, 5], dtype=np.int64)  # candidates are a shuffled subset of a 10-item codebook


def _jlt_problem(eps=3.0, seed=0):
    rng = np.random.default_rng(seed)
    L = 12
    jc = jlt_codebook(10, L, seed=seed)
    m = JLT(jc, eps, delta=0.1)
    # sigma ~ 2 would swamp a 12-dim sketch; rescale noise so the posterior is neither flat nor degenerate
    object.__setattr__(m, "sigma", 0.6)
    y = m.sanitize(JLT_CAND[[1, 4]], seed=rng)
    log_rho = rng.normal(-0.5, 0.7, 10)
    Xc = jc.X[JLT_CAND]

    def log_post(profile, c_max):
        return gibbs.jlt_log_posterior(profile, Xc, y, m.sigma, log_rho[JLT_CAND], c_max)
    return jc, y, log_rho, log_post, m


def _draws(c_max, n, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, c_max, size=n).astype(np.int64), rng.random(n)


@pytest.mark.parametrize("c_max", [2, 3, 4])
def test_blip_kernel_matches_bruteforce_transitions_and_chain(c_max):
    cb, bt, log_rho, lam, sgn, log_post, _ = _blip_problem()
    n = 300
    sd, u = _draws(c_max, n, 1)
    init = np.full(c_max, -1, dtype=np.int64)
    init[0] = 3
    slots = init.copy()
    counts = np.zeros(6, dtype=np.int64)
    probs = np.zeros((n, 7))
    gibbs.blip_gibbs_kernel(cb.bits, cb.nbits, sgn, lam, log_rho, slots, sd, u, 50, counts, probs)
    ref_counts, ref_slots, ref_probs = gibbs.gibbs_reference(lambda P: log_post(P, c_max), 6, init, sd, u, 50,
                                                             n_record=n)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-9, atol=1e-12)  # (3.35) = brute-force posterior ratios
    assert np.array_equal(counts, ref_counts) and np.array_equal(slots, ref_slots)


def _run_jlt(kernel, G, cand, z, inv2s2, log_rho_c, slots, sd, u, burn_in, counts, probs):
    """The fast kernel reads the candidates' Gram matrix; its reference (scan) the full one and the candidate ids."""
    if kernel == "fast":
        gibbs.jlt_gibbs_kernel(np.ascontiguousarray(G[np.ix_(cand, cand)]), z, inv2s2, log_rho_c, slots, sd, u,
                               burn_in, counts, probs)
    else:
        gibbs.jlt_gibbs_kernel_scan(G, cand, z, inv2s2, log_rho_c, slots, sd, u, burn_in, counts, probs)


@pytest.mark.parametrize("kernel", ["fast", "scan"])
@pytest.mark.parametrize("c_max", [2, 4])
def test_jlt_kernel_matches_bruteforce_transitions_and_chain(c_max, kernel):
    jc, y, log_rho, log_post, m = _jlt_problem()
    n = 300
    sd, u = _draws(c_max, n, 2)
    init = np.full(c_max, -1, dtype=np.int64)
    init[0] = 5
    slots = init.copy()
    counts = np.zeros(6, dtype=np.int64)
    probs = np.zeros((n, 7))
    z = jc.x64()[JLT_CAND] @ y
    _run_jlt(kernel, jc.gram(), JLT_CAND, z, 1 / (2 * m.sigma ** 2), log_rho[JLT_CAND], slots, sd, u, 50, counts,
             probs)
    ref_counts, ref_slots, ref_probs = gibbs.gibbs_reference(lambda P: log_post(P, c_max), 6, init, sd, u, 50,
                                                             n_record=n)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-6, atol=1e-9)
    assert np.array_equal(counts, ref_counts) and np.array_equal(slots, ref_slots)


def test_blip_mcmc_marginals_match_exact_enumeration():
    cb, bt, log_rho, lam, sgn, log_post, m = _blip_problem(eps=4.0, seed=3)
    c_max = 3
    exact = gibbs.exact_marginals(lambda P: log_post(P, c_max), 6, c_max)
    res = mcmc_blip(bt, m, np.arange(6), log_rho, c_max=c_max, c_init=1, burn_in=1000, n_samples=200_000, seed=4)
    assert 0.05 < exact.max() and exact.min() < 0.95  # a posterior worth sampling
    np.testing.assert_allclose(res.marginals, exact, atol=0.02)


def test_jlt_mcmc_marginals_match_exact_enumeration():
    jc, y, log_rho, log_post, m = _jlt_problem(seed=5)
    c_max = 3
    exact = gibbs.exact_marginals(lambda P: log_post(P, c_max), 6, c_max)
    res = mcmc_jlt(y, m, JLT_CAND, log_rho, c_max=c_max, c_init=1, burn_in=1000, n_samples=200_000, seed=6)
    np.testing.assert_allclose(res.marginals, exact, atol=0.02)


def test_mcmc_is_deterministic_for_a_seed():
    cb, bt, log_rho, lam, sgn, log_post, m = _blip_problem()
    a = mcmc_blip(bt, m, np.arange(6), log_rho, c_max=3, c_init=2, burn_in=10, n_samples=500, seed=9)
    b = mcmc_blip(bt, m, np.arange(6), log_rho, c_max=3, c_init=2, burn_in=10, n_samples=500, seed=9)
    assert np.array_equal(a.marginals, b.marginals)


def test_blip_kernel_matches_reference_on_a_medium_problem():
    # many candidates sharing bits: exercises the incremental bit -> candidates bookkeeping
    rng = np.random.default_rng(11)
    n_c, L, K, c_max, n = 30, 120, 8, 12, 250
    cb = bloom_codebook(n_c, L, K, seed=12)
    m = BLIP(cb, 10.0)
    bt = m.sanitize(np.arange(6), seed=rng)
    log_rho = rng.normal(-1.0, 0.5, n_c)
    sgn = np.where(bt > 0, 1, -1).astype(np.int32)
    lam = math.log((1 - m.p_eps) / m.p_eps)
    sd, u = _draws(c_max, n, 13)
    init = np.full(c_max, -1, dtype=np.int64)
    init[:5] = [3, 9, 17, 22, 29]
    slots, counts, probs = init.copy(), np.zeros(n_c, dtype=np.int64), np.zeros((n, n_c + 1))
    gibbs.blip_gibbs_kernel(cb.bits, cb.nbits, sgn, lam, log_rho, slots, sd, u, 20, counts, probs)
    ref_counts, ref_slots, ref_probs = gibbs.gibbs_reference(
        lambda P: gibbs.blip_log_posterior(P, cb.bits, cb.nbits, bt, m.p_eps, log_rho, c_max), n_c, init, sd, u, 20,
        n_record=n)
    np.testing.assert_allclose(probs, ref_probs, rtol=1e-9, atol=1e-12)
    assert np.array_equal(counts, ref_counts) and np.array_equal(slots, ref_slots)


def test_split_rhat_tells_a_mixed_chain_from_one_that_drifts():
    from dpmf_lib.diagnostics import split_rhat_counts

    rng = np.random.default_rng(0)
    n, p = 5000, rng.uniform(0.1, 0.9, 50)
    iid_a, iid_b = rng.binomial(n, p), rng.binomial(n, p)
    assert split_rhat_counts([iid_a, iid_b], n) < 1.01  # halves of a well-mixed chain agree to sampling noise
    drift_b = rng.binomial(n, np.clip(p + 0.1, 0, 1))
    assert split_rhat_counts([iid_a, drift_b], n) > 1.05  # halves that disagree: not converged
    assert split_rhat_counts([np.array([0, n]), np.array([n, 0])], n) == float("inf")  # stuck in opposite states


def test_gibbs_run_in_two_halves_is_the_same_chain():
    """The split-R̂ comes for free: running the kernel as two calls gives the marginals of one call exactly."""
    from dpmf_lib.attacks import decoders
    from dpmf_lib.attacks.mechanisms import BLIP, bloom_codebook

    cb = bloom_codebook(120, 900, 8, seed=3)
    m = BLIP(cb, 6.0)
    obs = m.sanitize(np.arange(15), seed=4)
    q = np.full(120, 0.1)
    cand = np.arange(120)
    res = decoders.mcmc_blip(obs, m, cand, np.log(q / (1 - q)), c_max=30, c_init=15, burn_in=50, n_samples=401,
                             seed=5)
    # the same draws through one kernel call
    rng = np.random.default_rng(5)
    slots = decoders._slots_init(120, 30, 15, rng)
    sd, u = decoders._draws(30, 451, rng)
    counts = np.zeros(120, dtype=np.int64)
    p = m.p_eps
    sgn = np.where(np.asarray(obs) > 0, 1, -1).astype(np.int32)
    from dpmf_lib.attacks import gibbs

    gibbs.blip_gibbs_kernel(np.ascontiguousarray(cb.bits[cand]), np.ascontiguousarray(cb.nbits[cand]), sgn,
                            np.log((1 - p) / p), np.log(q / (1 - q)).astype(np.float64), slots, sd, u, 50, counts,
                            np.zeros((0, 121)))
    np.testing.assert_allclose(res.marginals, counts / 401)
    assert np.isfinite(res.split_rhat) and res.split_rhat >= 1.0


def test_blip_numpy_baseline_runs_the_same_chain_as_the_kernel():
    """The benchmark's vectorised numpy baseline is the same sampler: same inputs, same chain and counts."""
    rng = np.random.default_rng(21)
    n_c, L, K, c_max, n = 60, 300, 6, 15, 400
    cb = bloom_codebook(n_c, L, K, seed=22)
    m = BLIP(cb, 8.0)
    bt = m.sanitize(np.arange(7), seed=rng)
    log_rho = rng.normal(-1.5, 0.5, n_c)
    sgn = np.where(bt > 0, 1, -1).astype(np.int32)
    lam = math.log((1 - m.p_eps) / m.p_eps)
    sd, u = _draws(c_max, n, 23)
    init = np.full(c_max, -1, dtype=np.int64)
    init[:4] = [1, 5, 8, 40]
    slots, counts = init.copy(), np.zeros(n_c, dtype=np.int64)
    gibbs.blip_gibbs_kernel(cb.bits, cb.nbits, sgn, lam, log_rho, slots, sd, u, 30, counts, np.zeros((0, n_c + 1)))
    np_counts, np_slots = gibbs.blip_gibbs_numpy(cb.bits, cb.nbits, sgn, lam, log_rho, init, sd, u, 30)
    assert np.array_equal(counts, np_counts) and np.array_equal(slots, np_slots)
    assert counts.sum() > 0


@pytest.mark.parametrize("eps, n_c, c_max, n, mean_lr", [
    (0.25, 300, 300, 40_000, -3.0),  # flat likelihood, slots mostly empty: the fast kernel mostly reuses
    (6.0, 80, 24, 20_000, -1.0),  # sharp likelihood, slots mostly occupied: items leave, enter, stay
    (600.0, 60, 20, 10_000, -1.0),  # near point mass: most weights underflow (exp below -708 is 0.0)
])
def test_jlt_fast_kernel_runs_the_chain_of_its_reference(eps, n_c, c_max, n, mean_lr):
    """The fast kernel (reused distributions, vectorised exp, two-level sums) against the kernel that rebuilds every
    transition's distribution with libm's exp and sequential sums: the same chain (slots and counts equal), and every
    recorded transition distribution equal to rounding."""
    rng = np.random.default_rng(31)
    L = 60
    jc = jlt_codebook(400, L, seed=32)
    m = JLT(jc, eps, delta=0.1)
    cand = rng.permutation(400)[:n_c].astype(np.int64)
    y = m.sanitize(cand[rng.choice(n_c, 8, replace=False)], seed=rng)
    log_rho_c = rng.normal(mean_lr, 1.0, n_c)
    z = jc.x64()[cand] @ y
    sd, u = _draws(c_max, n, 33)
    init = np.full(c_max, -1, dtype=np.int64)
    init[:6] = rng.choice(n_c, 6, replace=False)
    n_rec = 3000
    out = {}
    for kernel in ("fast", "scan"):
        slots, counts, probs = init.copy(), np.zeros(n_c, np.int64), np.zeros((n_rec, n_c + 1))
        _run_jlt(kernel, jc.gram(), cand, z, 1 / (2 * m.sigma ** 2), log_rho_c, slots, sd, u, 500, counts, probs)
        out[kernel] = slots, counts, probs
    assert np.array_equal(out["fast"][0], out["scan"][0]) and np.array_equal(out["fast"][1], out["scan"][1])
    pf, ps = out["fast"][2], out["scan"][2]
    # total variation per transition; tiny weights differ relatively by |log w| x rounding, so no rtol on those
    assert np.max(np.abs(pf - ps).sum(axis=1)) < 1e-12
    np.testing.assert_allclose(pf[ps > 1e-12], ps[ps > 1e-12], rtol=1e-12)
    assert np.all(ps[pf == 0] < 1e-300) and np.all(pf[ps == 0] == 0)  # only weights under e^-708 cut to 0
    assert np.count_nonzero(out["scan"][1]) >= 5  # the chain held several candidates: not an idle comparison


def test_jlt_mcmc_is_deterministic_for_a_seed():
    """Same seed, same bytes (the target: test_jlt_mcmc_marginals_match_exact_enumeration)."""
    jc, y, log_rho, log_post, m = _jlt_problem(seed=7)
    a = mcmc_jlt(y, m, JLT_CAND, log_rho, c_max=4, c_init=2, burn_in=100, n_samples=3000, seed=8)
    b = mcmc_jlt(y, m, JLT_CAND, log_rho, c_max=4, c_init=2, burn_in=100, n_samples=3000, seed=8)
    assert a.marginals.tobytes() == b.marginals.tobytes() and a.split_rhat == b.split_rhat


def test_exp_nonpos_is_within_a_few_ulp_of_libm():
    from numba import njit

    @njit
    def both(x, fast, lib):
        for i in range(x.shape[0]):
            fast[i] = gibbs._exp_nonpos(x[i])
            lib[i] = math.exp(x[i])

    rng = np.random.default_rng(3)
    x = np.concatenate([-rng.random(200_000) * 707.9, -rng.random(20_000) * 1e-3, [0.0, -1e-300, -707.9]])
    fast, lib = np.empty_like(x), np.empty_like(x)
    both(x, fast, lib)
    assert np.max(np.abs(fast - lib) / lib) <= 4 * 2.0 ** -52
    assert fast[-3] == 1.0
    tiny = np.array([-708.5, -745.0, -1e5, -np.inf])
    ft, lib_t = np.empty_like(tiny), np.empty_like(tiny)
    both(tiny, ft, lib_t)
    assert np.all(ft == 0.0)  # below the smallest normal: exactly 0 (weights < 1e-307 of the largest)
