"""Synthetic stand-ins reproduce their target shape statistics; kernels agree with numpy references."""

import numba
import numpy as np
import pytest
from scipy import stats

from data_fetch.registry import get_spec
from dpmf_lib.data.standin import (GENERATOR_VERSION, alias_table, cache_path, fit_zipf_mandelbrot,
                                   generate_standin, integer_counts, item_curve, item_weights,
                                   load_standin, sample_user_items, saturation_corrected_weights, solve_zipf_exponent,
                                   standin_target, user_activity, zipf_curve, zipf_mandelbrot_alpha,
                                   zipf_mandelbrot_mass)
from dpmf_lib.errors import ParameterError

from tests.conftest import SHARED_DATA

ML100K_MIRROR = SHARED_DATA / "ml-100k" / "u.data"


def _no_duplicates(r):
    key = r.users.astype(np.int64) * r.n_items + r.items
    return len(np.unique(key)) == len(key)


@pytest.fixture(scope="module")
def ml100k():
    return generate_standin("ml-100k", seed=0)


def test_ml100k_standin_shape(ml100k):
    r, t = ml100k, standin_target("ml-100k")
    assert (r.n_users, r.n_items, r.n_ratings) == (943, 1682, 100_000)
    assert not r.source.real and r.source.label == "ml-100k [synthetic stand-in]"
    assert "943 users × 1,682 items, 100,000 ratings), seed 0, scale 1" in r.source.note
    assert _no_duplicates(r)
    uc, ic = r.user_counts(), r.item_counts()
    assert uc.min() >= 20 and uc.max() == 737  # MovieLens floor and the published maximum
    assert ic.min() >= 1
    assert set(np.unique(r.values).tolist()) <= {1.0, 2.0, 3.0, 4.0, 5.0}
    assert abs(r.values.mean() - 3.53) < 0.03
    assert 0.9 < r.values.std() < 1.3
    # the medians of the real u.data (65 per user, 27 per movie) through a Zipf–Mandelbrot law
    assert t.user_median == 65 and t.item_median == 27 and t.user_q > 0 and t.item_q > 0
    curve = 737 * zipf_curve(943, t.user_alpha, q=t.user_q)
    assert np.abs(np.sort(uc)[::-1] - curve).max() <= 1.0  # exact integer user counts on the curve
    assert abs(np.median(uc) - 65) <= 1
    assert abs(np.median(ic) - 27) <= 2  # sampled item counts: Poisson-like noise around the curve
    assert abs(ic.max() - t.item_max) / t.item_max < 0.1  # top item near its pinned count despite saturation
    want = item_curve(t)
    assert abs(np.sort(ic)[::-1][:500].sum() / ic.sum() - want[:500].sum() / want.sum()) < 0.01


def test_netflix_standin_small_scale():
    t = standin_target("netflix", 0.002)
    r = generate_standin("netflix", seed=0, scale=0.002)
    assert (r.n_users, r.n_items, r.n_ratings) == (960, 17_770, 200_961) == (t.n_users, t.n_items, t.n_ratings)
    assert _no_duplicates(r)
    uc, ic = r.user_counts(), r.item_counts()
    assert abs(uc.max() - 17_653) / 17_653 < 0.1  # the heaviest user is kept (rescaled with the total)
    assert abs(np.median(uc) - 96) / 96 < 0.1  # the published median user (rescaled with the total)
    assert uc.min() >= 40  # the curve's floor (c(U) ≈ 55 at full size): still no very light users
    assert ic.min() >= 1
    assert abs(r.values.mean() - 3.60) < 0.03
    expected = item_weights(t) * t.n_ratings
    sel = expected >= 20  # ranks whose Poisson noise is small
    got = np.sort(ic)[::-1].astype(float)
    assert np.median(np.abs(got[sel] / expected[sel] - 1)) < 0.05
    assert abs(got[:500].sum() / got.sum() - expected[:500].sum() / expected.sum()) < 0.02
    assert "scale 0.002 → 960 users, 200,961 ratings" in r.source.note


def test_derived_laws_are_shape_facts():
    """Netflix: the curves pass through the published max and median and sum to the published total."""
    t = standin_target("netflix")
    N, U, I = 100_480_507, 480_189, 17_770
    assert (t.user_median, t.item_median, t.user_min, t.item_min) == (96, 561, 1, 3)
    for n, c_max, med, q, a, lo, hi in ((U, 17_653, 96, t.user_q, t.user_alpha, 1, I),
                                        (I, 232_944, 561, t.item_q, t.item_alpha, 3, U)):
        assert q > 0
        c = c_max * zipf_curve(0, a, ranks=np.array([1.0, (n + 1) / 2]), q=q)
        assert np.allclose(c, [c_max, med], rtol=1e-9)
        assert abs((c_max * zipf_curve(n, a, q=q)).clip(lo, hi).sum() - N) / N < 1e-6
    assert abs(item_curve(t).sum() - N) / N < 1e-6 and abs(np.median(item_curve(t)) - 561) < 0.5


@pytest.mark.parametrize("dataset", ["ml-1m", "ml-10m", "eachmovie", "digg"])
def test_pure_zipf_where_no_median_is_known(dataset):
    """No published median: q = 0 and the same α, user counts and item weights as the pure Zipf law before."""
    spec, t = get_spec(dataset), standin_target(dataset, 0.05)
    assert spec.median_user_count is None and spec.median_item_count is None
    assert t.user_q == 0.0 and t.item_q == 0.0 and t.user_median is None and t.item_median is None
    U, I, N = t.published
    assert t.user_alpha == solve_zipf_exponent(U, N, t.user_max, c_min=t.user_min, cap=I)
    assert t.item_alpha == solve_zipf_exponent(I, N, t.item_max, c_min=1, cap=U) and t.item_min == 1
    ranks = np.linspace(1.0, U, t.n_users)
    assert np.array_equal(zipf_curve(0, t.user_alpha, ranks=ranks), ranks ** -t.user_alpha)
    old = integer_counts(ranks ** -t.user_alpha, t.n_ratings, min(t.user_min, t.n_ratings // t.n_users), I)
    assert np.array_equal(user_activity(t), old)
    w = np.arange(1, I + 1.0) ** -t.item_alpha
    assert np.allclose(item_weights(t), w / w.sum(), rtol=1e-12, atol=0)


@pytest.mark.parametrize("q0, a0, c_min, cap", [(50.0, 1.2, 2.0, np.inf), (0.0, 0.7, 1.0, np.inf),
                                                (800.0, 2.5, 5.0, 20_000.0), (3.0, 0.9, 20.0, 9_000.0)])
def test_fit_recovers_zipf_mandelbrot_parameters(q0, a0, c_min, cap):
    n, c_max = 5001, 9_000.0  # odd n: the median of the curve is c((n+1)/2) exactly
    curve = c_max * ((1 + q0) / (np.arange(1, n + 1) + q0)) ** a0
    median, total = float(np.median(curve)), float(np.clip(curve, c_min, cap).sum())
    assert c_min < median
    q, a = fit_zipf_mandelbrot(n, total, c_max, median, c_min=c_min, cap=cap)
    assert abs(q - q0) <= 1e-6 * max(q0, 1.0) and abs(a - a0) <= 1e-6 * a0
    assert abs(zipf_mandelbrot_mass(n, c_max, median, q, c_min=c_min, cap=cap) - total) <= 1e-9 * total
    assert zipf_mandelbrot_alpha(n, c_max, median, q) == a


def test_fit_existence_uniqueness_and_errors():
    # the registry datasets with a median: the clipped total rises with q (so the fit is unique)
    qs = np.concatenate([[0.0], np.geomspace(1e-3, 1e12, 31)])
    for ds in ("netflix", "ml-100k"):
        t = standin_target(ds)
        U, I, N = t.published
        for n, c_max, med, lo, hi in ((U, t.user_max, t.user_median, t.user_min, I),
                                      (I, t.item_max, t.item_median, t.item_min, U)):
            mass = [zipf_mandelbrot_mass(n, c_max, med, q, c_min=lo, cap=hi) for q in qs]
            assert np.all(np.diff(mass) > 0) and mass[0] < N < mass[-1], ds
    # weakly skewed counts: the total peaks and falls again; of two fits the smallest q is returned
    n, c_max, med = 1001, 1500.0, 1000.0
    grid = np.geomspace(1.0, 1e6, 61)
    mass = np.array([zipf_mandelbrot_mass(n, c_max, med, q) for q in grid])
    peak = int(np.argmax(mass))
    assert 0 < peak < len(grid) - 1 and mass[-1] < mass[peak]
    total = 0.5 * (mass[peak] + max(mass[0], mass[-1]))
    q, _ = fit_zipf_mandelbrot(n, total, c_max, med)
    assert q < grid[peak] and abs(zipf_mandelbrot_mass(n, c_max, med, q) - total) < 1e-9 * total
    # no fit: the error names the dataset and the attainable range
    with pytest.raises(ParameterError, match="toy items: no Zipf–Mandelbrot curve"):
        fit_zipf_mandelbrot(1001, 1e9, 1000.0, 100.0, dataset="toy items")  # beyond the exponential limit
    with pytest.raises(ParameterError, match="toy users: no Zipf–Mandelbrot curve"):
        fit_zipf_mandelbrot(1001, 1001 * 101.0, 1000.0, 100.0, dataset="toy users")  # below the pure Zipf law
    with pytest.raises(ParameterError, match="toy: the median count"):
        fit_zipf_mandelbrot(1001, 1e5, 100.0, 100.0, dataset="toy")
    with pytest.raises(ParameterError, match="toy: the median count"):
        fit_zipf_mandelbrot(1001, 1e5, 1000.0, 10.0, c_min=20.0, dataset="toy")


def test_registry_shape_facts():
    nf = get_spec("netflix")
    U, I, N = nf.shape.users, nf.shape.items, nf.shape.ratings
    assert round(N / I, 1) == 5654.5 and round(N / U, 2) == 209.25  # the published means follow from the shape
    assert (nf.median_item_count, nf.min_item_count, nf.max_item_count) == (561, 3, 232_944)
    assert (nf.median_user_count, nf.min_user_count, nf.max_user_count) == (96, 1, 17_653)
    for ds in ("ml-1m", "ml-10m"):
        assert get_spec(ds).median_user_count is None and get_spec(ds).median_item_count is None
    ml = get_spec("ml-100k")
    try:
        d = np.loadtxt(ML100K_MIRROR, dtype=np.int64, usecols=(0, 1))
    except OSError:
        pytest.skip("no ml-100k mirror on this machine")
    uc, ic = np.bincount(d[:, 0])[1:], np.bincount(d[:, 1])[1:]
    assert (np.median(uc), uc.min(), uc.max()) == (ml.median_user_count, ml.min_user_count, ml.max_user_count)
    assert (np.median(ic), ic.min(), ic.max()) == (ml.median_item_count, ml.min_item_count, ml.max_item_count)


def test_deterministic_and_thread_independent():
    a = generate_standin("ml-10m", seed=5, scale=0.01)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        b = generate_standin("ml-10m", seed=5, scale=0.01)
    finally:
        numba.set_num_threads(old)
    assert a.users.tobytes() == b.users.tobytes() and a.items.tobytes() == b.items.tobytes()
    assert a.values.tobytes() == b.values.tobytes() and a.source == b.source
    c = generate_standin("ml-10m", seed=6, scale=0.01)
    assert a.items.tobytes() != c.items.tobytes()
    assert set(np.unique(a.values).tolist()) <= set(np.arange(0.5, 5.01, 0.5).tolist())
    assert _no_duplicates(a)


def test_digg_binary_profiles_and_heavy_users():
    r = generate_standin("digg", seed=0)
    assert (r.n_users, r.n_items, r.n_ratings) == (531, 1237, 531 * 317)
    assert np.all(r.values == 1.0) and _no_duplicates(r)
    uc = r.user_counts()
    heavy = int(np.argmax(uc))
    assert uc[heavy] == 1237  # a user with every item: the exponential-key path
    assert np.array_equal(np.sort(r.items[r.users == heavy]), np.arange(1237))


def test_solver_and_integer_counts():
    a = solve_zipf_exponent(1000, 50_000, 2_000, c_min=5)
    assert abs(np.clip(2000 * zipf_curve(1000, a), 5, np.inf).sum() - 50_000) < 1e-3
    with pytest.raises(ParameterError, match="below the mean"):
        solve_zipf_exponent(1000, 50_000, 10)
    c = integer_counts(zipf_curve(500, 0.8), 12_345, 3, 400)
    assert c.sum() == 12_345 and c.min() >= 3 and c.max() <= 400 and np.all(np.diff(c) <= 0)


def test_alias_table_is_exact():
    p = zipf_curve(50, 1.1)
    p /= p.sum()
    prob, alias = alias_table(p)
    implied = prob.copy()
    np.add.at(implied, alias, 1.0 - prob)
    assert np.allclose(implied / len(p), p, atol=1e-12)


@pytest.mark.parametrize("k", [4, 11])  # light users (alias + rejection) and heavy ones (exponential keys)
def test_sampler_matches_numpy_reference(k):
    n_items, n_users = 12, 6000
    w = zipf_curve(n_items, 1.0)
    w /= w.sum()
    users, items = sample_user_items(np.full(n_users, k), w, seed=1)
    assert np.all(np.bincount(users) == k)
    assert all(len(set(items[users == u].tolist())) == k for u in range(50))
    ours = np.bincount(items, minlength=n_items)
    rng = np.random.default_rng(2)
    ref = np.bincount(np.concatenate([rng.choice(n_items, k, replace=False, p=w) for _ in range(n_users)]),
                      minlength=n_items)
    table = np.vstack([ours, n_users - ours, ref, n_users - ref]).reshape(2, 2, n_items)
    for j in range(n_items):  # inclusion frequency of each item: two-sample test
        if 0 < ours[j] + ref[j] < 2 * n_users:
            assert stats.chi2_contingency(table[:, :, j]).pvalue > 1e-4, j


def test_saturation_correction_hits_targets():
    """Without correction the top items fall short (a user cannot take an item twice); with it they hit the target."""
    counts = integer_counts(zipf_curve(3000, 0.5), 60_000, 5, 150)
    target = zipf_curve(1000, 0.5)
    want = target / target.sum() * counts.sum()
    tol = 4 * np.sqrt(want[:20]) + 0.02 * want[:20]
    _, items = sample_user_items(counts, saturation_corrected_weights(target, counts), seed=0)
    assert np.all(np.abs(np.bincount(items, minlength=1000)[:20] - want[:20]) < tol)
    _, plain = sample_user_items(counts, target, seed=0)
    assert np.bincount(plain, minlength=1000)[0] < want[0] - tol[0]


def test_cache_roundtrip(tmp_path):
    r = load_standin("ml-100k", seed=3, cache=True, data_root=tmp_path)
    path = cache_path("ml-100k", 3, 1.0, tmp_path)
    assert path.is_file() and f"-v{GENERATOR_VERSION}.npz" in path.name and path.parent.name == "standins"
    assert not list(path.parent.glob("*.tmp"))
    s = load_standin("ml-100k", seed=3, cache=True, data_root=tmp_path)
    assert np.array_equal(r.items, s.items) and np.array_equal(r.values, s.values) and r.source == s.source
    path.write_bytes(b"garbage")  # an unreadable cache is regenerated
    assert np.array_equal(load_standin("ml-100k", seed=3, cache=True, data_root=tmp_path).items, r.items)


def test_bad_parameters():
    with pytest.raises(ParameterError, match="too small"):
        standin_target("netflix", 1e-5)
    with pytest.raises(ParameterError, match=r"\(0, 1\]"):
        standin_target("netflix", 2.0)
    with pytest.raises(ParameterError, match="vectors"):
        standin_target("sift1m")
    with pytest.raises(ParameterError, match="seed"):
        generate_standin("ml-100k", seed=-1)
