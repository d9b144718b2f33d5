"""SGLD: kernel vs reference, conjugate posterior, lazy vs eager noise, lookup-table normality, determinism."""

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.errors import ParameterError
from dpmf_lib.mf import GaussianTable, MFModel, Schedule, init_model, sample_sgld, tiered_layout
from dpmf_lib.mf.noise import stream_seed
from dpmf_lib.mf.reference import conjugate_posterior, sgld_epoch_lazy_reference
from dpmf_lib.mf.sgld import _sgld_epoch_lazy
from tests.mf_toys import conjugate_toy, random_ratings, sgld_segment_arguments, whole_row_lengths_in


@pytest.mark.parametrize("iso", [False, True])
@pytest.mark.parametrize("d", [6, 16, 32, 64, 128])
def test_lazy_kernel_matches_reference_one_round(iso, d):
    """The fused table kernel against the plain reference; ``iso``: Λ = λI, the scalar-coefficient step (#19).
    d = 6 runs the loop kernel, d in ``ROW_LENGTHS`` (16-128 with AVX-512, 16 and 32 with AVX2) the whole-row kernel,
    which reads the next rating's rows before this rating's step and must re-read them when the two share a user or
    an item (12 items: that happens often; a version that does not re-read is off by ~5e-2 here). The whole-row
    kernel at the d a host leaves out: ``test_whole_row_kernel_matches_loop_kernel``."""
    from dpmf_lib.mf.sgd_kernels import ROW_LENGTHS

    assert 6 not in ROW_LENGTHS and set(ROW_LENGTHS) <= {16, 32, 64, 128}
    r = random_ratings(seed=1, n_items=12)
    lay = tiered_layout(r, block_users=7, tiers=(5, 10))
    shared = (lay.users[1:] == lay.users[:-1]) | (lay.items[1:] == lay.items[:-1])
    assert shared.sum() >= 20
    gu, gv, _, _ = lay.noise_ahead_counters()
    m = init_model(r.n_users, r.n_items, d, seed=3, b0=3.0, scale=0.5)
    table = GaussianTable.create(997, seed=2)
    ext = table.extended(d + 2)
    N = r.n_ratings
    cu, cv = np.bincount(lay.users, minlength=r.n_users), np.bincount(lay.items, minlength=r.n_items)
    pwu = np.where(cu > 0, N / np.maximum(cu, 1), 0).astype(np.float32)
    pwv = np.where(cv > 0, N / np.maximum(cv, 1), 0).astype(np.float32)
    Lu = np.linspace(1, 2, d).astype(np.float32)
    Lv = np.linspace(2, 3, d).astype(np.float32)
    if iso:
        Lu, Lv = np.full(d, 1.5, np.float32), np.full(d, 2.5, np.float32)
    f = np.float32
    eta, zeta, lik, lamb = f((0.2 if d < 128 else 0.05) / N), f(0.5), f(1.0 * N), f(1.0)
    base = stream_seed(11, 1)
    A = [m.U.copy(), m.V.copy(), m.bu.copy(), m.bi.copy()]
    B = [x.copy() for x in A]
    import numba
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        _sgld_epoch_lazy(lay.users, lay.items, lay.values, np.zeros(1, f), False, gu, gv, lay.seg, *A, f(3.0), eta,
                         zeta, lik, pwu, pwv, Lu, Lv, lamb, True, ext, table.size, base, 2, True, True, False, f(0),
                         f(0), iso)
    finally:
        numba.set_num_threads(old)
    sgld_epoch_lazy_reference(lay, gu, gv, *B, 3.0, eta, zeta, lik, pwu, pwv, Lu, Lv, lamb, ext, table.size, base)
    for a, b in zip(A, B):
        np.testing.assert_allclose(a, b, rtol=2e-4, atol=2e-5)
    assert not np.allclose(A[0], m.U)


@pytest.mark.parametrize("iso", [False, True])
@pytest.mark.parametrize("has_w", [False, True])
@pytest.mark.parametrize("upd_b", [False, True])
@pytest.mark.parametrize("clip_on", [False, True])
@pytest.mark.parametrize("d", [16, 32, 64, 128])
def test_whole_row_kernel_matches_loop_kernel(iso, has_w, upd_b, clip_on, d):
    """The whole-row SGLD kernel, called directly (so on every host, whatever its ``ROW_LENGTHS``), against the loop
    kernel on one hand-made segment with repeated (user, item) pairs and runs of a user or an item: the same rows,
    biases and stream state, for every branch (the reference has no weights and always updates the biases)."""
    from dpmf_lib.mf.sgld import _sgld_range_table, _sgld_range_table_rows

    f = np.float32
    users = np.array([0, 0, 0, 1, 1, 2, 0, 2, 2, 1, 1, 1], np.int32)
    items = np.array([3, 3, 1, 1, 1, 0, 0, 0, 2, 2, 3, 3], np.int32)
    vals = np.linspace(1, 5, len(users)).astype(f)
    w = np.linspace(0.5, 1.5, len(users)).astype(f)
    ahead = np.arange(1, len(users) + 1, dtype=np.int64)
    m = init_model(3, 4, d, seed=2, b0=3.0, scale=0.5)
    table = GaussianTable.create(997, seed=2)
    ext = table.extended(d + 2)
    pw = np.array([2.0, 3.0, 4.0, 5.0], f)
    Lu, Lv = (np.full(d, 1.5, f), np.full(d, 2.5, f)) if iso else (np.linspace(1, 2, d).astype(f),
                                                                   np.linspace(2, 3, d).astype(f))
    args = lambda A: (users, items, vals, w, has_w, ahead, ahead[::-1].copy(), 0, len(users), *A, f(3.0), f(0.01),
                      f(0.002), f(1.0), pw, pw, Lu, Lv, f(0.5), ext, np.int64(table.size), np.uint64(12345), 2,
                      upd_b, clip_on, f(2.5), f(3.5), iso)
    A = [m.U.copy(), m.V.copy(), m.bu.copy(), m.bi.copy()]
    B = [x.copy() for x in A]
    state_rows = _sgld_range_table_rows(*args(A), d)
    state_loop = _sgld_range_table(*args(B))
    assert state_rows == state_loop
    for a, b in zip(A, B):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
    assert not np.allclose(A[0], m.U)


def test_segment_kernel_compiles_the_whole_row_kernel_exactly_for_row_lengths():
    """The SGLD dispatch (``_sgld_segment_table``, recompiled without the on-disk cache) holds the whole-row kernel
    for each D in ``ROW_LENGTHS`` (symbols ending in ``Literal[int](D)``) and for no other D."""
    import numba

    from dpmf_lib.mf.sgd_kernels import ROW_LENGTHS
    from dpmf_lib.mf.sgld import _sgld_segment_table

    fresh = numba.njit(fastmath=True)(_sgld_segment_table.py_func)
    fresh(*sgld_segment_arguments(24))
    compiled = whole_row_lengths_in("".join(fresh.inspect_asm().values()), "_sgld_range_table_rows")
    assert compiled == set(ROW_LENGTHS)


def _toy_run(mode, seed, rounds, r, V, d, **kw):
    model = MFModel(np.zeros((r.n_users, d), np.float32), V.copy(), np.zeros(r.n_users, np.float32),
                    np.zeros(r.n_items, np.float32), 0.0)
    N = r.n_ratings
    return sample_sgld(r, d=d, epochs=rounds, eta0=kw.pop("h", 0.005) / N, gamma=0.0, zeta=kw.pop("zeta", 1.0),
                       lambda_r=1.0, fixed_lambda=(2.0, 1.0), lam_bias=1.0, mode=mode, model=model, freeze_items=True,
                       keep_every=1, keep_users=True, schedule=Schedule(n_threads=1, tiers=(3, 3), block_users=50),
                       seed=seed, noise_table_size=1 << 16, **kw)


def _standardized(res, r, V, d, burn, thin, zeta=1.0):
    n_items = r.n_items
    S = np.stack(res.samples_U[burn::thin]).astype(np.float64)  # (T, users, d+1)
    Lu = np.full(d, 2.0)
    out = []
    L = None
    for i in range(r.n_users):
        sl = slice(i * n_items, (i + 1) * n_items)
        mu, C = conjugate_posterior(V, np.zeros(n_items), 0.0, r.items[sl], r.values[sl], Lu, 1.0, 1.0, zeta)
        if L is None:
            L = np.linalg.cholesky(np.linalg.inv(C))  # whitening: z = Lᵀ (x − μ) ~ N(0, I)
        out.append((S[:, i, :] - mu) @ L)
    return np.concatenate(out)  # (T·users, d+1)


@pytest.mark.parametrize("zeta", [1.0, 0.5])
def test_sgld_conjugate_toy_matches_exact_posterior(zeta):
    d = 3
    r, V = conjugate_toy(n_users=200, n_items=10, d=d)
    res = _toy_run("fast", 0, 1200, r, V, d, zeta=zeta)
    z = _standardized(res, r, V, d, burn=200, thin=40, zeta=zeta)  # ~25 nearly independent rounds × 200 users
    assert np.all(np.abs(z.mean(axis=0)) < 0.1), z.mean(axis=0)
    var = z.var(axis=0)
    # discretisation inflates the variance by ~ h·P/2 (≤ 3% here); sampling error of the variance ~ 2–4 %
    assert np.all((var > 0.88) & (var < 1.15)), var


def test_lazy_and_eager_noise_agree_in_distribution():
    d = 2
    r, V = conjugate_toy(n_users=20, n_items=8, d=d, seed=3)
    lazy = _toy_run("fast", 1, 8000, r, V, d, noise="normal", h=0.01)
    eager = _toy_run("exact", 2, 8000, r, V, d, h=0.01)
    zl = _standardized(lazy, r, V, d, burn=200, thin=40)
    ze = _standardized(eager, r, V, d, burn=200, thin=40)
    for k in range(d + 1):
        assert stats.ks_2samp(zl[:, k], ze[:, k]).pvalue > 1e-3
        assert stats.ttest_ind(zl[:, k], ze[:, k], equal_var=False).pvalue > 1e-3
        assert 0.8 < zl[:, k].var() / ze[:, k].var() < 1.25


def test_lookup_table_noise_is_normal():
    t = GaussianTable.create(1 << 16, seed=4)
    assert stats.normaltest(t.values).pvalue > 1e-3
    x = t.draw(4000, 16, seed=5)  # segments read like the kernel reads them
    flat = x[:, 0]  # one value per segment (independent offsets)
    assert stats.kstest(flat, "norm").pvalue > 1e-3
    assert abs(x.mean()) < 0.03 and abs(x.std() - 1) < 0.03
    seg = t.draw(2, 16, seed=5)
    np.testing.assert_array_equal(seg, x[:2])  # deterministic


def test_sgld_same_seed_one_thread_bit_identical():
    r = random_ratings(n_users=60, n_items=50, n_ratings=600, seed=5)
    kw = dict(d=8, epochs=3, schedule=Schedule(n_threads=1, block_users=10, tiers=(5, 10)), noise_table_size=4096)
    a = sample_sgld(r, seed=3, **kw)
    b = sample_sgld(r, seed=3, **kw)
    c = sample_sgld(r, seed=4, **kw)
    assert a.model.U.tobytes() == b.model.U.tobytes() and a.model.V.tobytes() == b.model.V.tobytes()
    assert a.model.U.tobytes() != c.model.U.tobytes()


def test_weights_and_scale_enter_likelihood():
    """Halving the likelihood scale equals halving every per-rating weight (same stream, same seed)."""
    r = random_ratings(seed=7)
    kw = dict(d=4, epochs=2, schedule=Schedule(n_threads=1, tiers=(5, 10), block_users=7), seed=1,
              noise_table_size=1024)
    a = sample_sgld(r, likelihood_scale=0.5, **kw)
    b = sample_sgld(r, weights=np.full(r.n_ratings, 0.5), **kw)
    np.testing.assert_allclose(a.model.U, b.model.U, rtol=1e-5, atol=1e-6)


def test_sgld_bad_parameters_raise():
    r = random_ratings()
    with pytest.raises(ParameterError, match="zeta"):
        sample_sgld(r, zeta=0)
    with pytest.raises(ParameterError, match="mode"):
        sample_sgld(r, mode="slow")
    with pytest.raises(ParameterError, match="weights"):
        sample_sgld(r, weights=np.ones(3))
    with pytest.raises(ParameterError, match="fixed_lambda"):
        sample_sgld(r, fixed_lambda=(1.0, -1.0))


def test_no_bias_mode_keeps_biases_zero():
    r = random_ratings(seed=8)
    res = sample_sgld(r, d=4, epochs=2, biases=False, noise_table_size=1024,
                      schedule=Schedule(n_threads=1, tiers=(5, 10), block_users=7))
    assert res.model.b0 == 0.0 and not res.model.bu.any() and not res.model.bi.any()
    assert np.isfinite(res.model.U).all()


def test_default_noise_table_grows_with_d():
    # review of #19: a fixed 2^16 table holds only 32 non-overlapping segments at d = 2048 (Liu Fig 2); the default
    # keeps ≥ 512 segments of d + 1 numbers (the paper's 10,000 numbers at d = 16 are ≈ 590)
    from dpmf_lib.mf.sgld import default_table_size

    assert default_table_size(16) == 1 << 16 and default_table_size(127) == 1 << 16
    assert default_table_size(128) == 1 << 17 and default_table_size(512) == 1 << 19
    assert default_table_size(2048) == 1 << 21
    for d in (1, 16, 100, 128, 300, 512, 1000, 2048, 4096):
        size = default_table_size(d)
        assert size & (size - 1) == 0 and size // (d + 1) >= 512 and (size == 1 << 16 or size // 2 < 512 * (d + 1))


def test_isotropic_lambda_detection_selects_the_scalar_step():
    from dpmf_lib.mf.sgld import is_isotropic

    one, vec = np.ones(4, np.float32), np.linspace(1, 2, 4).astype(np.float32)
    assert is_isotropic(one, 2 * one) and not is_isotropic(one, vec) and not is_isotropic(vec, one)
    # a fixed scalar Λ runs the scalar step; the same Λ given as an isotropic vector runs it too (same bytes)
    r = random_ratings(n_users=40, n_items=30, n_ratings=400, seed=2)
    kw = dict(d=8, epochs=2, schedule=Schedule(n_threads=1, block_users=10, tiers=(5, 10)), noise_table_size=4096,
              seed=1)
    a = sample_sgld(r, fixed_lambda=(1.5, 2.0), **kw)
    b = sample_sgld(r, fixed_lambda=(np.full(8, 1.5), np.full(8, 2.0)), **kw)
    assert a.model.U.tobytes() == b.model.U.tobytes() and a.model.V.tobytes() == b.model.V.tobytes()


def test_noise_ahead_counters_cover_each_round_exactly():
    """#19 noise ahead: each rated vector is owed its first-touch steps before the round and, at every touch, the steps
    to its next touch (or to the round's end): together exactly the round's N steps; checked by hand as well."""
    from dpmf_lib.mf.layout import noise_ahead_counters
    from tests.mf_toys import lazy_counters

    r = random_ratings(n_users=40, n_items=30, n_ratings=400, seed=6)
    lay = tiered_layout(r, block_users=7, tiers=(5, 10))
    au, av, fu, fv = noise_ahead_counters(lay.users, lay.items, r.n_users + 3, r.n_items)  # 3 users without ratings
    gu, _, flu, _ = lazy_counters(lay.users, lay.items, r.n_users + 3, r.n_items)
    n = r.n_ratings
    cu = np.bincount(lay.users, minlength=r.n_users + 3)
    tot_u = np.bincount(lay.users, weights=au, minlength=r.n_users + 3) + fu
    tot_v = np.bincount(lay.items, weights=av, minlength=r.n_items) + fv
    assert np.all(tot_u[cu > 0] == n) and np.all(fu[cu == 0] == 0)
    assert np.all(tot_v[np.bincount(lay.items, minlength=r.n_items) > 0] == n)
    nxt = {}
    for k in range(n - 1, -1, -1):  # against the lazy counters: the next touch's gap, or the flush after the last
        u = lay.users[k]
        assert au[k] == (gu[nxt[u]] if u in nxt else flu[u])
        nxt[u] = k
    for u, k in nxt.items():  # nxt now holds every user's first touch
        assert fu[u] == k + 1 == gu[k]


@pytest.mark.parametrize("noise,epochs", [("table", 1), ("normal", 1), ("table", 3)])
def test_rounds_of_noise_have_the_rounds_variance(noise, epochs):
    """With the drift switched off (likelihood and priors ~0), the rounds add N(0, Σ_t N ζ η_t) to every coordinate of
    every rated row, biases included: the fused table kernel (V updated) and the plain path; over three rounds with a
    decaying step (γ = 0.6) the noise before each round must use that round's η_t. Measured effect of the bugs this
    guards (review of the sixteenth session): without the pre-round noise the users' variance falls to ~0.5 (a user's
    touches sit inside its block of the tiered order) and the items' to ~0.86; without the noise after the last touch
    the items' falls to ~0.9; the previous round's η before each round moves three rounds by ~10 %."""
    r = random_ratings(n_users=2000, n_items=1000, n_ratings=40000, seed=8)
    d, N, zeta, gamma = 32, r.n_ratings, 0.5, 0.6
    m0 = init_model(r.n_users, r.n_items, d, seed=1, b0=0.0)
    res = sample_sgld(r, d=d, epochs=epochs, eta0=1.0 / N, gamma=gamma, zeta=zeta, likelihood_scale=1e-12,
                      fixed_lambda=(1e-9, 1e-9), lam_bias=1e-9, model=m0, noise=noise, noise_table_size=1 << 21,
                      schedule=Schedule(n_threads=1, tiers=(20, 100), block_users=100), seed=5)
    expected = zeta * sum(t ** -gamma for t in range(1, epochs + 1))  # Σ_t N ζ η_t with η_t = 1 / (N t^γ)
    rated_u = np.bincount(r.users, minlength=r.n_users) > 0
    rated_v = np.bincount(r.items, minlength=r.n_items) > 0
    # tolerances: ~4 standard errors of a mean of squares (64k, 32k, 2k, 1k values; table reuse adds a little)
    for name, delta, tol in (("U", (res.model.U - m0.U)[rated_u], 0.025), ("V", (res.model.V - m0.V)[rated_v], 0.035),
                             ("b_u", (res.model.bu - m0.bu)[rated_u], 0.13), ("b_i", (res.model.bi - m0.bi)[rated_v], 0.18)):
        var = float(np.mean(delta.astype(np.float64) ** 2)) / expected
        assert abs(var - 1.0) < tol, (name, var)


def test_privacy_package_keeps_the_sampler_out_of_common_closures():
    """``dpmf_lib.privacy`` re-exports only ``privacy.common``: a notebook that needs only ``check_dp_epsilon`` /
    ``resolve_seed`` must not have the posterior sampler and the mf kernels in its closure (their every change would
    stale its paper row; #19, sixteenth session)."""
    from dpmf_lib.dependencies import module_closure

    for module in ("dpmf_lib.experiments.balu.balu_fig4_7", "dpmf_lib.experiments.hua.hua_fig8", "dpmf_lib.privacy.common"):
        files = {p.as_posix().split("/dpmf_lib/")[-1] for p in module_closure(module)}
        assert "privacy/__init__.py" in files  # the package is imported: what must stay out is the sampler
        assert not any(f.startswith("mf/") or f == "privacy/posterior_sampling.py" for f in files), module
