"""Small synthetic problems shared by the tests (tests/lib/mf/, tests/lib/privacy/, the Liu chain and release tests)."""

import numpy as np

from dpmf_lib.data.ratings import DataSource, Ratings


def random_ratings(n_users=30, n_items=40, n_ratings=300, seed=0, power=1.2) -> Ratings:
    """Distinct (user, item) pairs, power-law item popularity, ratings in [1, 5]."""
    rng = np.random.default_rng(seed)
    p = 1.0 / np.arange(1, n_items + 1) ** power
    p = rng.permutation(p / p.sum())
    keys = set()
    while len(keys) < n_ratings:
        keys.add((int(rng.integers(n_users)), int(rng.choice(n_items, p=p))))
    k = np.array(sorted(keys))
    vals = rng.integers(1, 6, len(k)).astype(np.float32)
    return Ratings(k[:, 0].astype(np.int32), k[:, 1].astype(np.int32), vals, n_users, n_items, (1.0, 5.0),
                   DataSource("toy", False, note="test toy"))


def conjugate_toy(n_users=200, n_items=10, d=3, seed=0, v_scale=0.3):
    """Every user rates every item; item factors fixed. Returns (ratings, V)."""
    rng = np.random.default_rng(seed)
    V = (rng.standard_normal((n_items, d)) * v_scale).astype(np.float32)
    Ustar = rng.standard_normal((n_users, d)).astype(np.float32)
    users = np.repeat(np.arange(n_users), n_items).astype(np.int32)
    items = np.tile(np.arange(n_items), n_users).astype(np.int32)
    vals = (np.einsum("ij,ij->i", Ustar[users], V[items]) + rng.standard_normal(len(users))).astype(np.float32)
    r = Ratings(users, items, vals, n_users, n_items, (-10.0, 10.0), DataSource("toy", False, note="conjugate toy"))
    return r, V


def dense_toy(seed=0, n_users=12, n_items=8) -> Ratings:
    """Every (user, item) pair rated with probability 0.7, ratings uniform on 1..5: the Liu chain/release tests' toy."""
    rng = np.random.default_rng(seed)
    u, i = np.meshgrid(np.arange(n_users), np.arange(n_items), indexing="ij")
    keep = rng.random(u.shape) < 0.7
    vals = rng.integers(1, 6, keep.sum()).astype(np.float32)
    return Ratings(u[keep].astype(np.int32), i[keep].astype(np.int32), vals, n_users, n_items, (1.0, 5.0),
                   DataSource("toy", False, note="test toy"))


def lazy_counters(users: np.ndarray, items: np.ndarray, n_users: int, n_items: int):
    """``(gap_u, gap_v, flush_u, flush_v)`` (int32/int64) of a visiting order: the steps since each touch's previous
    touch of the same vector, and the steps left after each vector's last touch (what the SGLD kernel read before
    #19's noise ahead; moved here from ``dpmf_lib.mf.layout`` as the tests' oracle of ``noise_ahead_counters``)."""
    n = len(users)
    pos = np.arange(n, dtype=np.int64)

    def gaps(ids, n_ids):
        o = np.lexsort((pos, ids))
        ids_s = ids[o]
        prev = np.empty(n, dtype=np.int64)
        prev[0] = -1
        prev[1:] = np.where(ids_s[1:] == ids_s[:-1], pos[o][:-1], -1)
        g = np.empty(n, dtype=np.int64)
        g[o] = pos[o] - prev
        last = np.full(n_ids, -1, dtype=np.int64)
        ends = np.flatnonzero(np.r_[ids_s[1:] != ids_s[:-1], True])  # last position of each id
        last[ids_s[ends]] = pos[o][ends]
        flush = (n - 1 - last).astype(np.int64)
        return np.ascontiguousarray(g.astype(np.int32)), flush

    gu, fu = gaps(users, n_users)
    gv, fv = gaps(items, n_items)
    return gu, gv, fu, fv


def host_vector_register() -> str:
    """The widest vector register numba compiles for here (``zmm`` with AVX-512, ``ymm`` with AVX2, else ``xmm``):
    what packed float32 code on whole rows compiles to. Assembly tests ask for it instead of assuming an AVX-512 host
    (a Zen 3 host without AVX-512 failed them)."""
    from dpmf_lib.mf.rowvec import vector_register_bits

    return {512: "zmm", 256: "ymm"}.get(vector_register_bits(), "xmm")


def sgld_segment_arguments(d: int) -> tuple:
    """Arguments for one call of the SGLD segment kernels (``_sgld_segment_table``; ``_sgld_range_table_rows`` takes
    them followed by its row length D) on ``random_ratings()`` at dimension d: both prior and noise scales ones, a
    2^12-entry Gaussian table, every rating its own lazy-noise gap. The assembly tests compile with these."""
    from dpmf_lib.mf import GaussianTable, init_model

    r = random_ratings()
    m = init_model(r.n_users, r.n_items, d, seed=0)
    f = np.float32
    ext = GaussianTable.create(1 << 12, seed=1).extended(d + 2)
    ones = np.ones(max(r.n_users, r.n_items), f)
    gaps = np.ones(len(r.values), np.int64)
    return (r.users, r.items, r.values, np.zeros(1, f), False, gaps, gaps, 0, len(r.values), m.U, m.V, m.bu, m.bi,
            f(3), f(1e-4), f(1e-4), f(1.0), ones, ones, ones[:d], ones[:d], f(1.0), ext, np.int64(1 << 12),
            np.uint64(7), 2, True, False, f(0), f(0), False)


def whole_row_lengths_in(asm: str, kernel: str) -> set:
    """The row lengths D for which compiled assembly holds ``kernel`` specialised on a literal D (numba mangles
    ``Literal[int](D)`` into ``Literal_5bint_5d_28D_29`` in the symbol)."""
    import re

    return {int(x) for x in re.findall(rf"{kernel}\w*?Literal_5bint_5d_28(\d+)_29", asm)}
