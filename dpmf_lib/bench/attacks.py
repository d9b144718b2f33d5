"""Benchmark of the chapter-3 joint decoder (Balu 2016): Gibbs transitions per second and time to decode one profile.

Setting ("paper"): N = 1,682 items, a profile of c = 106 items (ML-100K's c_avg), prefilter f = 4 (|candidates| = 424),
c_max = 130 slots; BLIP K = 20, L = 5,000, eps = 8; JLT L = 1,000, eps = 2 (sigma = 3); T + M = 20,000 transitions
(T = 1,000, M = 19,000). Records: transitions/s of the numba kernels, seconds per decoded profile (whole ``attack``:
c_hat, single decoder, prefilter, two MCMC runs), and the plain-Python reference's transitions/s on a small problem with
the kernel's on the same problem (ratio: incremental numba kernel vs full-recomputation reference).
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
                          c_max=cm))
    records.append(record("gibbs_blip_small", "transitions_per_s", n_ref / tf, "1/s", candidates=n_c, L=L_s, c_max=cm))
    ratios.append(ratio("gibbs_blip_kernel_vs_reference", tr / tf, ">= 100"))
    return {"records": records, "ratios": ratios}
