"""The attacks bench's like-for-like numpy baseline (:mod:`dpmf_lib.bench._attacks_numpy`) runs the kernel's own
incremental algorithm, so it must produce the kernel's chain exactly: same final slots, same counts."""

import math

import numpy as np
import pytest

from dpmf_lib.attacks import BLIP, bloom_codebook, gibbs
from dpmf_lib.bench._attacks_numpy import blip_gibbs_numpy_incremental


def _run_both(n_c, L, K, c_max, n, init_items, burn, seed, eps=8.0):
    rng = np.random.default_rng(seed)
    cb = bloom_codebook(n_c, L, K, seed=seed + 1)
    m = BLIP(cb, eps)
    bt = m.sanitize(np.arange(min(7, n_c)), seed=rng)
    log_rho = rng.normal(-1.5, 0.5, n_c)
    sgn = np.where(bt > 0, 1, -1).astype(np.int32)
    lam = math.log((1 - m.p_eps) / m.p_eps)
    sd = rng.integers(0, c_max, size=n).astype(np.int64)
    u = rng.random(n)
    init = np.full(c_max, -1, dtype=np.int64)
    init[: len(init_items)] = init_items
    slots, counts = init.copy(), np.zeros(n_c, dtype=np.int64)
    gibbs.blip_gibbs_kernel(cb.bits, cb.nbits, sgn, lam, log_rho, slots, sd, u, burn, counts, np.zeros((0, n_c + 1)))
    np_counts, np_slots = blip_gibbs_numpy_incremental(cb.bits, cb.nbits, sgn, lam, log_rho, init, sd, u, burn)
    return counts, slots, np_counts, np_slots, init


@pytest.mark.parametrize("n_c,L,K,c_max,eps,seed", [(60, 300, 6, 15, 8.0, 21), (40, 80, 5, 10, 2.0, 5),
                                                    (120, 1000, 20, 30, 8.0, 9), (25, 40, 8, 25, 0.5, 3)])
def test_incremental_numpy_baseline_runs_the_kernels_chain(n_c, L, K, c_max, eps, seed):
    counts, slots, np_counts, np_slots, init = _run_both(n_c, L, K, c_max, 600, [1, 5, 8], 40, seed, eps)
    assert np.array_equal(counts, np_counts) and np.array_equal(slots, np_slots)
    assert counts.sum() > 0 and not np.array_equal(slots, init)  # the chain moved


def test_rejects_repeated_bits():
    bits = np.array([[0, 0], [1, 2]], np.int64)
    with pytest.raises(ValueError):
        blip_gibbs_numpy_incremental(bits, np.array([2, 2]), np.ones(3, np.int32), 1.0, np.zeros(2),
                                     np.full(2, -1, np.int64), np.zeros(3, np.int64), np.full(3, 0.5), 0)
