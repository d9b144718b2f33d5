"""dpmf_lib.counter_rng, the one SplitMix64 mix: numba == numpy, the published outputs, and every former copy's call
site (C-SGD layout draws, SGLD streams, fused NBM noise, count-sketch hash) still gives the bytes it gave before the
copies were merged into it (digests recorded from the pre-merge code)."""

import hashlib

import numpy as np
from numba import njit

from dpmf_lib import counter_rng as cr

# Rosetta Code "Pseudo-random numbers/Splitmix64" (Vigna's splitmix64.c): the first five outputs for seed 1234567
SEED_1234567 = [6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431,
                16408922859458223821]
# splitmix64.c seeded with 0 (the first is also Java SplittableRandom's mix of γ)
SEED_0 = [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC, 0x1B39896A51A8749B]


@njit
def _sequential(seed, n):
    out = np.empty(n, dtype=np.uint64)
    s = np.uint64(seed)
    for t in range(n):
        s, out[t] = cr.splitmix_next(s)
    return out


@njit
def _nb_counter(key, ctr):
    """counter_mix(key, ctr[t]) and mix64(ctr[t]) for every t (numba)."""
    out = np.empty((2, ctr.shape[0]), dtype=np.uint64)
    for t in range(ctr.shape[0]):
        out[0, t] = cr.counter_mix(key, ctr[t])
        out[1, t] = cr.mix64(np.uint64(ctr[t]))
    return out


def test_published_vectors():
    for seed, want in ((1234567, SEED_1234567), (0, SEED_0)):
        want = np.array(want, dtype=np.uint64)
        np.testing.assert_array_equal(cr.splitmix_np(seed, 5), want)
        np.testing.assert_array_equal(_sequential(np.uint64(seed), 5), want)
        np.testing.assert_array_equal(_nb_counter(np.uint64(seed), np.arange(5, dtype=np.uint64))[0], want)


def test_numba_equals_numpy():
    rng = np.random.default_rng(0)
    z = np.r_[rng.integers(0, 2 ** 64, 5000, dtype=np.uint64), np.array([0, 1, 2 ** 63, 2 ** 64 - 1], np.uint64)]
    np.testing.assert_array_equal(_nb_counter(np.uint64(0), z)[1], cr.mix64_np(z))
    for key in (np.uint64(0), np.uint64(2 ** 64 - 1), z[0], z[1]):
        ctr = np.r_[np.arange(100, dtype=np.uint64), z[:100]]
        np.testing.assert_array_equal(_nb_counter(key, ctr)[0], cr.counter_mix_np(key, ctr))
        # signed counters (the layout passes int64 positions) are the same counters
        signed = _nb_counter(key, np.arange(100, dtype=np.int64))[0]
        np.testing.assert_array_equal(signed, cr.counter_mix_np(key, ctr[:100]))
    # the sequential generator is the counter form: output n of seed s is counter_mix(s, n - 1)
    s = int(z[2])
    np.testing.assert_array_equal(_sequential(np.uint64(s), 300), cr.splitmix_np(s, 300))
    # mix64 is a bijection on a sample (no collisions) and the numpy form broadcasts
    assert len(np.unique(cr.mix64_np(z))) == len(np.unique(z))
    assert cr.counter_mix_np(np.arange(3, dtype=np.uint64)[:, None], np.arange(4, dtype=np.uint64)).shape == (3, 4)


def test_call_sites_use_the_shared_mix():
    from dpmf_lib.mf import layout
    from dpmf_lib.mf import noise
    from dpmf_lib.sketch import hashing

    positions = np.arange(1000)
    m = np.arange(1, 1001)
    draws = layout.draw_index_np(12345, positions, m)
    st = layout._seed_state(12345)
    assert st == cr.splitmix_np(12345, 1)[0]
    x = cr.counter_mix_np(st, positions.astype(np.uint64))
    np.testing.assert_array_equal(draws, [(int(a) * int(b)) >> 64 for a, b in zip(x, m)])  # exact floor(x·m / 2⁶⁴)
    assert noise.splitmix_next is cr.splitmix_next and hashing.mix64 is cr.mix64 and hashing.mix64_ref is cr.mix64_np


def _digest(*arrays) -> str:
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def call_site_digests() -> dict:
    """Outputs of every call site of the former copies of the mix (uses only names that existed before the merge)."""
    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.mf import layout, noise
    from dpmf_lib.mf.reference import _block_state_py
    from dpmf_lib.nbm import kernels as K
    from dpmf_lib.sketch import hashing

    out = {}
    rng = np.random.default_rng(42)
    n = 3000
    users = np.sort(rng.integers(0, 80, n)).astype(np.int32)
    items = np.minimum(rng.zipf(1.5, n) - 1, 59).astype(np.int32)
    r = Ratings(users, items, rng.integers(1, 6, n).astype(np.float32), 80, 60, (1.0, 5.0),
                DataSource("toy", False, note="counter_rng toy"))
    shuffled = r.subset(rng.permutation(n))
    for name, rr in (("sorted", r), ("shuffled", shuffled)):
        for il in (1, 8):
            for seed in (0, 2 ** 40 + 3):
                lay = layout.tiered_layout(rr, block_users=16, tiers=(5, 20), interleave=il, seed=seed)
                out[f"layout_{name}_{il}_{seed}"] = _digest(lay.order, lay.users, lay.items, lay.values, lay.seg)
    out["stream_seed"] = _digest(np.array([noise.stream_seed(s, *ks) for s in (0, 5, 2 ** 63)
                                           for ks in ((), (1,), (3, 2 ** 62))], dtype=np.uint64))
    tab = noise.GaussianTable.create(501, 3)
    out["gaussian_table"] = _digest(tab.values, tab.draw(11, 7, seed=2))
    out["block_state"] = _digest(np.array([_block_state_py(np.uint64(99), s) for s in range(20)], dtype=np.uint64))
    M = 9
    key = np.uint64(0x0123456789ABCDEF)
    lap = np.empty((M, M))
    K.laplace_fill_kernel(key, 0.5, lap)
    nrm = np.empty((M, M + 1))
    K.normal_fill_kernel(key, nrm)
    out["nbm_fill"] = _digest(lap, nrm)
    S0 = rng.standard_normal((M, M)).astype(np.float32)
    G0 = rng.standard_normal((M, M)).astype(np.float32)
    Hinv = rng.random((M, M))
    present = rng.random(M) < 0.6
    S, G = S0.copy(), G0.copy()
    K.dpsgd_step_kernel(S, G, 0.3, key, 0.1, 0.9, 0.01)
    out["nbm_dpsgd"] = _digest(S, G)
    S, G = S0.copy(), G0.copy()
    K.sgld_step_kernel(S, G, Hinv, present, 7.0, 0.2, 0.01, 0.3, key)
    out["nbm_sgld"] = _digest(S, G)
    SB = np.stack([S0, 2 * S0]).astype(np.float32)
    GB = np.stack([G0, G0 + 1]).astype(np.float32)
    K.sgld_step_batch_kernel(SB, GB, Hinv, present, 7.0, np.array([0.2, 1.0]), np.array([0.01, 0.5]),
                             np.array([0.3, 2.0]), key)
    out["nbm_sgld_batch"] = _digest(SB, GB)
    salts = hashing.make_salts(3, 2)
    ids = np.arange(300, dtype=np.int64)
    a, s = hashing.addresses(ids, 5, salts[0, 1], 1000)
    ar, sr = hashing.address_sign_ref(ids[:, None], np.arange(5)[None, :], salts[1, 0], 2 ** 20 + 3)
    out["sketch"] = _digest(a, s, ar, sr, hashing.mix64_ref(np.arange(500, dtype=np.uint64)))
    return out


# recorded with call_site_digests() on the code before the merge (commit 119b19f, one numba thread), except the
# interleaved C-SGD layouts (``layout_*_8_*``): their draws changed by design when the sort by a random key per rating
# became a Fisher-Yates shuffle (#19, eighteenth session; re-recorded then, the old key function removed)
BEFORE = {
    'layout_sorted_1_0': '1fd4fd743c6abc63',
    'layout_sorted_1_1099511627779': '1fd4fd743c6abc63',
    'layout_sorted_8_0': 'a78cb962e90430a3',
    'layout_sorted_8_1099511627779': 'd0d6906c6c6dcfec',
    'layout_shuffled_1_0': 'b908314ca10aa6d2',
    'layout_shuffled_1_1099511627779': 'b908314ca10aa6d2',
    'layout_shuffled_8_0': '4ad398ee0ba9342c',
    'layout_shuffled_8_1099511627779': '43d0883bb9bdf02a',
    'stream_seed': '4025c4f29fa4d47b',
    'gaussian_table': '227a0efd2c8393d1',
    'block_state': '2ec68039aca72397',
    'nbm_fill': '510d1d1123e0565b',
    'nbm_dpsgd': '4ec17d2a83cc89f4',
    'nbm_sgld': 'c615a7ecf3640692',
    'nbm_sgld_batch': '4a72bace3f4ef02d',
    'sketch': '1f7f8c85ca962269',
}


def test_call_sites_give_the_same_bytes_as_before_the_merge():
    assert call_site_digests() == BEFORE
