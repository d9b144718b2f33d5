"""Folds (mku.sh), random splits, per-user trimming and filters."""

import numpy as np
import pytest
from scipy import stats

from dpmf_lib.data.loaders import load_tab
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.data.splits import (_trim_keep_mask, _trim_keep_mask_reference, contiguous_folds, drop_rare,
                                  filter_min_count, ml100k_folds, random_split, sample_items, trim_per_user)
from dpmf_lib.errors import ParameterError

from tests.conftest import ML100K_U_DATA as U_DATA, needs_ml100k


def toy(n_users=30, n_items=40, seed=0, density=0.3):
    rng = np.random.default_rng(seed)
    mask = rng.random((n_users, n_items)) < density
    mask[:, 0] = True  # every user rates ≥ 1 item
    u, i = np.nonzero(mask)
    perm = rng.permutation(len(u))
    return Ratings(users=u[perm], items=i[perm], values=rng.integers(1, 6, len(u)).astype(np.float32),
                   n_users=n_users, n_items=n_items, rating_scale=(1.0, 5.0), source=DataSource("toy", True))


def rows(r: Ratings) -> list[tuple]:
    return list(zip(r.users.tolist(), r.items.tolist(), r.values.tolist()))


@needs_ml100k
def test_ml100k_folds_match_mku_sh():
    """Rebuild u1..u5 from the script's definition and compare rows, values and order."""
    r = load_tab(U_DATA, rating_scale=(1.0, 5.0), dataset="ml-100k")
    lines = U_DATA.read_text().splitlines()
    key = lambda s: (int(s.split("\t")[0]), int(s.split("\t")[1]))  # sort -t'\t' -k1,1n -k2,2n
    folds = ml100k_folds(r)
    assert len(folds) == 5
    for i, (base, test) in enumerate(folds, start=1):
        want_test = sorted(lines[(i - 1) * 20000:i * 20000], key=key)  # head -i*20000 | tail -20000
        want_base = sorted(lines[:(i - 1) * 20000] + lines[i * 20000:], key=key)
        for got, want in ((test, want_test), (base, want_base)):
            text = [f"{u}\t{it}\t{int(v)}\t{t}" for u, it, v, t in
                    zip(r.user_ids[got.users], r.item_ids[got.items], got.values, got.timestamps)]
            assert text == want
        assert base.n_users == 943 and test.n_items == 1682  # id space kept


def test_folds_partition_rows():
    r = toy()
    folds = contiguous_folds(r, 5)
    seen = []
    for base, test in folds:
        assert len(base) + len(test) == len(r)
        assert not set(rows(base)) & set(rows(test))
        assert set(rows(base)) | set(rows(test)) == set(rows(r))
        seen += rows(test)
    assert sorted(seen) == sorted(rows(r))  # every rating is tested exactly once


def test_ml100k_folds_reject_filtered_real_data():
    r = toy()
    r = Ratings(r.users, r.items, r.values, r.n_users, r.n_items, r.rating_scale, DataSource("ml-100k", True))
    with pytest.raises(ParameterError, match="100,000 rows"):
        ml100k_folds(r)


def test_random_split_deterministic_disjoint_sizes():
    r = toy(60, 50)
    a = random_split(r, (0.8, 0.1, 0.1), seed=3)
    b = random_split(r, (0.8, 0.1, 0.1), seed=3)
    c = random_split(r, (0.8, 0.1, 0.1), seed=4)
    n = len(r)
    assert [len(p) for p in a] == [round(0.8 * n), round(0.9 * n) - round(0.8 * n), n - round(0.9 * n)]
    for x, y in zip(a, b):
        assert np.array_equal(x.users, y.users) and np.array_equal(x.items, y.items)
    assert not np.array_equal(a[1].items, c[1].items)
    sets = [set(rows(p)) for p in a]
    assert not (sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2])
    assert sets[0] | sets[1] | sets[2] == set(rows(r))


@pytest.mark.parametrize("bad", [(0.5, 0.6), (1.0,), (0.9, -0.1, 0.2), (np.nan, 1.0)])
def test_random_split_bad_fractions(bad):
    with pytest.raises(ParameterError, match="fractions"):
        random_split(toy(), bad, seed=0)


def test_trim_per_user_bounds_and_untouched_users():
    r = toy(40, 60, density=0.5)
    tau = 25
    t = trim_per_user(r, tau, seed=1)
    before, after = r.user_counts(), t.user_counts()
    assert np.all(after == np.minimum(before, tau))
    small = np.flatnonzero(before <= tau)
    keep_r = set(x for x in rows(r) if x[0] in set(small.tolist()))
    keep_t = set(x for x in rows(t) if x[0] in set(small.tolist()))
    assert keep_r == keep_t  # light users intact
    assert set(rows(t)) <= set(rows(r))
    # file order preserved
    pos = {x: k for k, x in enumerate(rows(r))}
    assert all(pos[a] < pos[b] for a, b in zip(rows(t), rows(t)[1:]))
    assert np.array_equal(trim_per_user(r, tau, seed=1).items, t.items)
    assert not np.array_equal(trim_per_user(r, tau, seed=2).items, t.items)


def test_trim_kernel_matches_reference():
    rng = np.random.default_rng(0)
    users = rng.integers(0, 50, 5000).astype(np.int32)
    keys = rng.random(5000, dtype=np.float32)
    keys[::7] = keys[0]  # ties are broken by row in both
    for tau in (1, 5, 90, 200):
        assert np.array_equal(_trim_keep_mask(users, keys, 50, tau), _trim_keep_mask_reference(users, keys, tau))


def test_trim_keeps_a_uniform_subset():
    """Each rating of a heavy user survives with probability τ/k (chi-square over many seeds)."""
    k, tau, reps = 40, 10, 400
    r = Ratings(np.zeros(k, np.int32), np.arange(k, dtype=np.int32), np.ones(k, np.float32), 1, k, (1.0, 5.0),
                DataSource("toy", True))
    hits = np.zeros(k)
    for s in range(reps):
        hits[trim_per_user(r, tau, seed=s).items] += 1
    assert hits.sum() == tau * reps
    assert stats.chisquare(hits).pvalue > 1e-3


def test_trim_bad_tau():
    with pytest.raises(ParameterError, match="tau"):
        trim_per_user(toy(), 0)


def test_filter_min_count_and_drop_rare():
    r = toy(40, 60, density=0.3)
    f = filter_min_count(r, min_user_ratings=21)  # "users who have more than 20 ratings"
    uc = r.user_counts()
    assert set(np.unique(f.users).tolist()) == set(np.flatnonzero(uc > 20).tolist())
    assert f.n_users == r.n_users
    g = filter_min_count(r, min_user_ratings=14, min_item_ratings=8, iterate=True)
    assert 0 < len(g) < len(r)
    assert g.user_counts()[g.user_counts() > 0].min() >= 14 and g.item_counts()[g.item_counts() > 0].min() >= 8
    train, test = random_split(r, (0.5, 0.5), seed=0)
    d = drop_rare(test, train, 10)
    assert np.all(train.user_counts()[d.users] >= 10) and np.all(train.item_counts()[d.items] >= 10)


def test_sample_items():
    r = toy()
    s = sample_items(r, 5, seed=0)
    chosen = np.unique(s.items)
    assert len(chosen) == 5
    assert len(s) == int(np.isin(r.items, chosen).sum())
    assert np.array_equal(sample_items(r, 5, seed=0).items, s.items)
    with pytest.raises(ParameterError):
        sample_items(r, 10_000)


def test_trim_accepts_a_generator():
    r = toy(40, 60, density=0.5)
    a = trim_per_user(r, 10, np.random.default_rng(7))
    b = trim_per_user(r, 10, np.random.default_rng(7))
    assert np.array_equal(a.items, b.items) and "seed" not in a.source.note.split("trimmed")[-1]


def test_subsample_is_seeded_keeps_order_and_says_so():
    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.data.splits import subsample

    n = 1000
    r = Ratings(users=np.arange(n) % 50, items=np.arange(n) // 50, values=np.ones(n), n_users=50, n_items=20,
                rating_scale=(1.0, 5.0), source=DataSource("toy", True))
    a, b = subsample(r, 100, seed=3), subsample(r, 100, seed=3)
    assert a.n_ratings == 100 and np.array_equal(a.users, b.users) and np.array_equal(a.items, b.items)
    key = a.items.astype(np.int64) * 50 + a.users
    assert np.all(np.diff(key) > 0)  # file order kept
    assert "random subset of 100 ratings" in a.source.note
    assert subsample(r, None) is r and subsample(r, 5000) is r
    assert not np.array_equal(subsample(r, 100, seed=4).users, a.users)
