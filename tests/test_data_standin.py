"""Synthetic stand-ins reproduce their target shape statistics; kernels agree with numpy references."""

import numba
import numpy as np
import pytest
from scipy import stats

from dpmf_lib.data.standin import (GENERATOR_VERSION, alias_table, cache_path, fitted_zipf_exponent, generate_standin,
                                   integer_counts, load_standin, sample_user_items, saturation_corrected_weights,
                                   solve_zipf_exponent, standin_target, zipf_curve)
from dpmf_lib.errors import ParameterError


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
    assert abs(fitted_zipf_exponent(uc) - t.user_alpha) < 0.02
    assert abs(fitted_zipf_exponent(ic, top_fraction=0.5) - t.item_alpha) < 0.05
    assert abs(ic.max() - t.item_max) / t.item_max < 0.1  # top item near its pinned count despite saturation


def test_netflix_standin_small_scale():
    t = standin_target("netflix", 0.002)
    r = generate_standin("netflix", seed=0, scale=0.002)
    assert (r.n_users, r.n_items, r.n_ratings) == (960, 17_770, 200_961) == (t.n_users, t.n_items, t.n_ratings)
    assert _no_duplicates(r)
    uc, ic = r.user_counts(), r.item_counts()
    assert abs(uc.max() - 17_653) / 17_653 < 0.1  # the heaviest user is kept (rescaled with the total)
    assert ic.min() >= 1
    assert abs(r.values.mean() - 3.60) < 0.03
    expected = zipf_curve(17_770, t.item_alpha) * (t.n_ratings / zipf_curve(17_770, t.item_alpha).sum())
    top = int(np.sum(expected >= 20))  # ranks whose Poisson noise is small
    assert abs(fitted_zipf_exponent(ic, top_fraction=top / 17_770) - t.item_alpha) < 0.06
    assert "scale 0.002 → 960 users, 200,961 ratings" in r.source.note


def test_derived_exponents_are_shape_facts():
    t = standin_target("netflix")
    N, U, I = 100_480_507, 480_189, 17_770
    assert abs((17_653 * zipf_curve(U, t.user_alpha)).clip(1, I).sum() - N) / N < 1e-6
    assert abs((232_944 * zipf_curve(I, t.item_alpha)).clip(1, U).sum() - N) / N < 1e-6


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
