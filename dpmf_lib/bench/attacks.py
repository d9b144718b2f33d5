"""Benchmark of the chapter-3 joint decoder (Balu 2016): Gibbs transitions per second and time to decode one profile.

Setting ("paper"): N = 1,682 items, a profile of c = 106 items (ML-100K's c_avg), prefilter f = 4 (|candidates| = 424),
c_max = 130 slots; BLIP K = 20, L = 5,000, eps = 8; JLT L = 1,000, eps = 2 (sigma = 3); T + M = 20,000 transitions
(T = 1,000, M = 19,000). Records: transitions/s of the numba kernels, seconds per decoded profile (whole ``attack``:
c_hat, single decoder, prefilter, two MCMC runs), and the kernel against vectorised numpy baselines of the same
sampler on the benchmark's own problem (424 candidates, L = 5,000, K = 20), both checked to run the same chain: the
like-for-like one runs the kernel's own incremental algorithm with whole-array numpy operations
(:func:`dpmf_lib.bench._attacks_numpy.blip_gibbs_numpy_incremental`); the other recomputes every gain per transition
(:func:`dpmf_lib.attacks.gibbs.blip_gibbs_numpy`, another algorithm: reported beside it). The plain-Python
full-recomputation reference on a small problem is kept as a record only. JLT where c_hat -> N (eps = 0.25, all
1,682 items candidates, c_max = 1,682): the kernel against :func:`dpmf_lib.attacks.gibbs.jlt_gibbs_kernel_scan`, the
same chain checked.
``quick`` uses 4,000 transitions and fewer repeats.
"""

from __future__ import annotations

import math
import time

import numpy as np

from . import ratio, record


def _best(fn, repeat: int) -> float:
    fn()  # warm-up (numba compile / cache load)
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def run(profile: str = "quick") -> dict:
    from ..attacks import BLIP, JLT, bloom_codebook, jlt_codebook
    from ..attacks import decoders, gibbs
    from ._attacks_numpy import blip_gibbs_numpy_incremental

    quick = profile == "quick"
    n_steps = 4000 if quick else 20000
    repeat = 2 if quick else 5
    N, c, f, c_max = 1682, 106, 4, 130
    rng = np.random.default_rng(0)
    items = rng.choice(N, c, replace=False)
    q = np.full(N, c / N)
    lr = decoders.log_odds(q)
    records, ratios = [], []

    blip = BLIP(bloom_codebook(N, 5000, 20, seed=1), 8.0)
    bt = blip.sanitize(items, seed=2)
    cand = decoders.rank(decoders.blip_single_scores(bt, blip))[: f * c]
    jlt = JLT(jlt_codebook(N, 1000, seed=3), 2.0)
    jlt.codebook.gram()
    y = jlt.sanitize(items, seed=4)
    candj = decoders.rank(decoders.jlt_single_scores(y, jlt, c))[: f * c]

    burn = n_steps // 20
    tb = _best(lambda: decoders.mcmc_blip(bt, blip, cand, lr, c_max=c_max, c_init=c, burn_in=burn,
                                          n_samples=n_steps - burn, seed=5), repeat)
    tj = _best(lambda: decoders.mcmc_jlt(y, jlt, candj, lr, c_max=c_max, c_init=c, burn_in=burn,
                                         n_samples=n_steps - burn, seed=6), repeat)
    params = {"N": N, "candidates": f * c, "c_max": c_max, "transitions": n_steps}
    records.append(record("gibbs_blip", "transitions_per_s", n_steps / tb, "1/s", K=20, L=5000, eps=8, **params))
    records.append(record("gibbs_jlt", "transitions_per_s", n_steps / tj, "1/s", L=1000, eps=2, **params))

    T, M = (200, 3800) if quick else (1000, 19000)
    for name, mech, obs in (("decode_profile_blip", blip, bt), ("decode_profile_jlt", jlt, y)):
        t = _best(lambda: decoders.attack(mech, obs, q, burn_in=T, n_samples=M, c_fallback=c, seed=7), repeat)
        records.append(record(name, "seconds_per_profile", t, "s", burn_in=T, n_samples=M,
                              attacks="popularity+single+2xMCMC"))

    # incremental numba kernel vs full-recomputation reference, same small problem
    n_c, L_s, cm, n_ref = 40, 500, 15, 300
    cb = bloom_codebook(n_c, L_s, 5, seed=8)
    small = BLIP(cb, 5.0)
    bts = small.sanitize(np.arange(8), seed=9)
    lrs = np.zeros(n_c) - 2.0
    sd = rng.integers(0, cm, n_ref).astype(np.int64)
    u = rng.random(n_ref)
    init = np.full(cm, -1, dtype=np.int64)
    init[:8] = np.arange(8)

    def ref():
        gibbs.gibbs_reference(lambda P: gibbs.blip_log_posterior(P, cb.bits, cb.nbits, bts, small.p_eps, lrs, cm),
                              n_c, init, sd, u, 0)

    lam = math.log((1 - small.p_eps) / small.p_eps)
    sgn = np.where(bts > 0, 1, -1).astype(np.int32)

    def fast():
        gibbs.blip_gibbs_kernel(cb.bits, cb.nbits, sgn, lam, lrs, init.copy(), sd, u, 0, np.zeros(n_c, np.int64),
                                np.zeros((0, n_c + 1)))

    tr = _best(ref, 1)
    tf = _best(fast, 5)
    records.append(record("gibbs_blip_reference", "transitions_per_s", n_ref / tr, "1/s", candidates=n_c, L=L_s,
                          c_max=cm, implementation="plain Python, full recomputation"))
    records.append(record("gibbs_blip_small", "transitions_per_s", n_ref / tf, "1/s", candidates=n_c, L=L_s, c_max=cm))
    records.append(record("gibbs_blip_kernel_over_python_reference", "ratio", tr / tf, "x", candidates=n_c, L=L_s))

    # like for like: the numba kernel vs the vectorised numpy baseline, same chain, the benchmark's BLIP problem
    n_np = 500 if quick else 2000
    bits_c = np.ascontiguousarray(blip.codebook.bits[cand])
    nbits_c = np.ascontiguousarray(blip.codebook.nbits[cand])
    sgn_b = np.where(bt > 0, 1, -1).astype(np.int32)
    lam_b = math.log((1 - blip.p_eps) / blip.p_eps)
    lr_c = np.ascontiguousarray(lr[cand])
    sd_b = rng.integers(0, c_max, n_np).astype(np.int64)
    u_b = rng.random(n_np)
    init_b = np.full(c_max, -1, dtype=np.int64)
    init_b[:c] = np.arange(c)
    counts_k = np.zeros(len(cand), np.int64)

    def kern():
        counts_k[:] = 0
        gibbs.blip_gibbs_kernel(bits_c, nbits_c, sgn_b, lam_b, lr_c, init_b.copy(), sd_b, u_b, 0, counts_k,
                                np.zeros((0, len(cand) + 1)))

    out_np, out_inc = {}, {}
    tk = _best(kern, repeat + 2)
    tn = _best(lambda: out_np.update(r=gibbs.blip_gibbs_numpy(bits_c, nbits_c, sgn_b, lam_b, lr_c, init_b, sd_b, u_b,
                                                               0)), 1)
    ti = _best(lambda: out_inc.update(r=blip_gibbs_numpy_incremental(bits_c, nbits_c, sgn_b, lam_b, lr_c, init_b,
                                                                     sd_b, u_b, 0)), 2)
    same = bool(np.array_equal(out_np["r"][0], counts_k))
    same_inc = bool(np.array_equal(out_inc["r"][0], counts_k))
    common = dict(candidates=len(cand), L=5000, K=20, c_max=c_max, transitions=n_np,
                  working_set_bytes=int(bits_c.nbytes + sgn_b.nbytes + 8 * (5000 + 2 * len(cand))))
    records.append(record("gibbs_blip_kernel", "transitions_per_s", n_np / tk, "1/s", **common))
    records.append(record("gibbs_blip_numpy_incremental_baseline", "transitions_per_s", n_np / ti, "1/s",
                          same_chain=same_inc, algorithm="the kernel's incremental updates, numpy whole-array ops",
                          **common))
    records.append(record("gibbs_blip_numpy_baseline", "transitions_per_s", n_np / tn, "1/s", same_chain=same,
                          algorithm="every gain recomputed per transition (gather over candidates x K)", **common))
    # like for like: same algorithm, same chain, numba vs vectorised numpy (inf if the chains differ)
    ratios.append(ratio("gibbs_blip_kernel_speedup_over_numpy_incremental_baseline", ti / tk if same_inc else np.inf,
                        None))
    ratios.append(ratio("gibbs_blip_kernel_speedup_over_numpy_full_recompute_baseline", tn / tk if same else np.inf,
                        None))

    # JLT where c_hat -> N (eps = 0.25: every item a candidate, c_max = N, slots mostly empty): the kernel against its
    # reference, which rebuilds every transition's distribution (libm exp, sequential sums); same chain checked
    n_fl = 3000 if quick else 20000
    jflat = JLT(jlt.codebook, 0.25)
    yf = jflat.sanitize(items, seed=10)
    candf = np.arange(N, dtype=np.int64)
    Gf = np.ascontiguousarray(jlt.codebook.gram())
    zf = jlt.codebook.x64() @ yf
    inv2s2 = 1.0 / (2 * jflat.sigma ** 2)
    lrf = np.ascontiguousarray(lr, dtype=np.float64)
    sd_f = rng.integers(0, N, n_fl).astype(np.int64)
    u_f = rng.random(n_fl)
    init_f = np.full(N, -1, dtype=np.int64)
    init_f[:c] = rng.choice(N, c, replace=False)
    out_f = {}

    def jlt_fast():
        slots, cnt = init_f.copy(), np.zeros(N, np.int64)
        gibbs.jlt_gibbs_kernel(Gf, zf, inv2s2, lrf, slots, sd_f, u_f, 0, cnt, np.zeros((0, N + 1)))
        out_f["fast"] = slots, cnt

    def jlt_scan():
        slots, cnt = init_f.copy(), np.zeros(N, np.int64)
        gibbs.jlt_gibbs_kernel_scan(Gf, candf, zf, inv2s2, lrf, slots, sd_f, u_f, 0, cnt, np.zeros((0, N + 1)))
        out_f["scan"] = slots, cnt

    tjf = _best(jlt_fast, repeat)
    tjs = _best(jlt_scan, 1)
    same_f = all(np.array_equal(a, b) for a, b in zip(out_f["fast"], out_f["scan"]))
    common_f = dict(N=N, candidates=N, c_max=N, L=1000, eps=0.25, transitions=n_fl)
    records.append(record("gibbs_jlt_flat", "transitions_per_s", n_fl / tjf, "1/s", **common_f))
    records.append(record("gibbs_jlt_flat_scan_reference", "transitions_per_s", n_fl / tjs, "1/s", same_chain=same_f,
                          algorithm="every transition's distribution rebuilt (libm exp, sequential sums)", **common_f))
    ratios.append(ratio("gibbs_jlt_kernel_speedup_over_scan_reference", tjs / tjf if same_f else np.inf, None))
    return {"records": records, "ratios": ratios}
