"""File loaders: good input parsed exactly, malformed input rejected with file + line + problem."""

import numpy as np
import pytest

from dpmf_lib.data.loaders import (load_binary_profiles, load_csv_header, load_double_colon, load_kddcup_yahoo,
                                   load_netflix, load_tab, read_vecs, write_vecs)
from dpmf_lib.errors import DataFormatError

from tests.conftest import ML100K_U_DATA as U_DATA, needs_ml100k
SCALE = (1.0, 5.0)


def _write(tmp_path, name, text, mode="w"):
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    if mode == "wb":
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


def test_tab_good_keeps_file_order_and_renumbers(tmp_path):
    p = _write(tmp_path, "u.data", "10\t7\t3\t100\n2\t7\t5\t200\n\n10\t3\t1\t300\n")
    r = load_tab(p, rating_scale=SCALE)
    assert r.n_ratings == 3 and r.n_users == 2 and r.n_items == 2
    assert r.user_ids.tolist() == [2, 10] and r.item_ids.tolist() == [3, 7]
    assert r.users.tolist() == [1, 0, 1] and r.items.tolist() == [1, 1, 0]  # file order, ids renumbered ascending
    assert r.values.tolist() == [3.0, 5.0, 1.0] and r.timestamps.tolist() == [100, 200, 300]
    assert r.users.dtype == np.int32 and r.values.dtype == np.float32


def test_tab_without_timestamp_and_crlf(tmp_path):
    p = _write(tmp_path, "x.tsv", b"1\t1\t4\r\n1\t2\t2.0\r\n", mode="wb")
    r = load_tab(p, rating_scale=SCALE)
    assert r.timestamps is None and r.values.tolist() == [4.0, 2.0]


@needs_ml100k
def test_real_u_data():
    r = load_tab(U_DATA, rating_scale=SCALE, dataset="ml-100k")
    assert (r.n_ratings, r.n_users, r.n_items) == (100_000, 943, 1_682)
    assert r.user_ids[r.users[0]] == 196 and r.item_ids[r.items[0]] == 242 and r.values[0] == 3  # first line
    assert r.values.min() == 1 and r.values.max() == 5
    assert abs(r.values.mean() - 3.52986) < 1e-5


def test_double_colon_half_stars(tmp_path):
    p = _write(tmp_path, "ratings.dat", "1::122::5::838985046\n1::185::4.5::838983525\n2::122::0.5::868245777\n")
    r = load_double_colon(p, rating_scale=(0.5, 5.0))
    assert r.values.tolist() == [5.0, 4.5, 0.5] and r.n_users == 2 and r.n_items == 2
    assert r.timestamps[1] == 838983525


def test_csv_header_column_order(tmp_path):
    p = _write(tmp_path, "ratings.csv", "movieId,userId,rating,timestamp\n5,1,3.5,10\n6,1,4,11\n5,2,1e0,12\n")
    r = load_csv_header(p, rating_scale=(0.5, 5.0))
    assert r.user_ids[r.users].tolist() == [1, 1, 2] and r.item_ids[r.items].tolist() == [5, 6, 5]
    assert r.values.tolist() == [3.5, 4.0, 1.0] and r.timestamps.tolist() == [10, 11, 12]


def test_csv_header_missing_column(tmp_path):
    p = _write(tmp_path, "ratings.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(DataFormatError, match=r"line 1: header .* has no user column"):
        load_csv_header(p, rating_scale=SCALE)


@pytest.mark.parametrize("text, line, problem", [
    ("1\t1\t3\t5\n2\t1\t4\n", 2, "expected 4 fields"),              # too few fields (timestamp detected on line 1)
    ("1\t1\t3\t5\n2\t1\t4\t5\t9\n", 2, "more than 4 fields"),
    ("1\t1\t3\t5\n2\tx\t4\t5\n", 2, "field 2 is not a number"),
    ("1\t1\t3\t5\n\n2\t2\tNaN\t5\n", 3, "not a finite number"),     # blank line still counted
    ("1\t1\t3\t5\n2\t2\t6\t5\n", 2, "rating 6 is outside the dataset's scale [1, 5]"),
    ("1\t1\t3\t5\n2\t2\t4\t5\n1\t1\t2\t7\n", 3, "duplicate (user, item) pair (1, 1) — first seen on line 1"),
    ("1\t1\t3\t5\n-2\t2\t4\t5\n", 2, "user id -2 is not a non-negative integer"),
    ("1\t1.5\t3\t5\n", 1, "item id 1.5 is not a non-negative integer"),
])
def test_tab_malformed(tmp_path, text, line, problem):
    p = _write(tmp_path, "bad.data", text)
    with pytest.raises(DataFormatError) as exc:
        load_tab(p, rating_scale=SCALE)
    msg = str(exc.value)
    assert str(p) in msg and f"line {line}:" in msg and problem in msg
    assert exc.value.line == line and " — " in msg  # a fix is always suggested


def test_double_colon_wrong_separator_is_named(tmp_path):
    p = _write(tmp_path, "ratings.dat", "1::2::3::4\n1,3,4,5\n")
    expected = r"line 2: field 1 is not a number; expected user::item::rating::timestamp"
    with pytest.raises(DataFormatError, match=expected):
        load_double_colon(p, rating_scale=SCALE)


def _netflix_dir(tmp_path):
    _write(tmp_path, "nf/training_set/mv_0000001.txt", "1:\n1488844,3,2005-09-06\n822109,5,2005-05-13\n")
    _write(tmp_path, "nf/training_set/mv_0000002.txt", "2:\n1488844,4,1999-12-31\n")
    return tmp_path / "nf"


def test_netflix_per_movie(tmp_path):
    r = load_netflix(_netflix_dir(tmp_path))
    assert r.n_ratings == 3 and r.n_items == 2 and r.n_users == 2
    assert r.item_ids[r.items].tolist() == [1, 1, 2] and r.user_ids[r.users].tolist() == [1488844, 822109, 1488844]
    days = r.timestamps // 86400
    assert days.tolist() == [(np.datetime64(d) - np.datetime64("1970-01-01")).astype(int)
                             for d in ("2005-09-06", "2005-05-13", "1999-12-31")]


def test_netflix_combined_file_with_several_movies(tmp_path):
    p = _write(tmp_path, "combined_data_1.txt", "1:\n5,3,2005-09-06\n2:\n5,4,2005-09-07\n6,1,2005-01-01\n")
    r = load_netflix(p)
    assert r.n_ratings == 3 and r.item_ids[r.items].tolist() == [1, 2, 2]


@pytest.mark.parametrize("text, line, problem", [
    ("5,3,2005-09-06\n", 1, "rating line before any header"),
    ("1:\n5,3\n", 2, "expected 3 fields"),
    ("1:\n5,3,2005-13-01\n", 2, "not a valid date"),
    ("1:\n5,x,2005-01-01\n", 2, "field 2 is not a number"),
    ("1:\n5,7,2005-01-01\n", 2, "outside the dataset's scale"),
])
def test_netflix_malformed(tmp_path, text, line, problem):
    p = _write(tmp_path, "training_set/mv_0000001.txt", text)
    with pytest.raises(DataFormatError) as exc:
        load_netflix(p)
    assert str(p) in str(exc.value) and f"line {line}:" in str(exc.value) and problem in str(exc.value)


def test_netflix_duplicate_names_both_files(tmp_path):
    d = _netflix_dir(tmp_path)
    _write(tmp_path, "nf/training_set/mv_0000003.txt", "1:\n822109,2,2005-01-01\n")  # movie 1 again, same user
    with pytest.raises(DataFormatError) as exc:
        load_netflix(d)
    msg = str(exc.value)
    assert "mv_0000003.txt, line 2" in msg and "mv_0000001.txt, line 3" in msg and "duplicate" in msg


def test_kddcup_yahoo(tmp_path):
    p = _write(tmp_path, "trainIdx1.txt", "0|2\n507696\t90\t3821\t00:12:00\n1\t0\t3822\t01:00:00\n7|1\n1\t100\t10\n")
    r = load_kddcup_yahoo(p)
    assert r.user_ids[r.users].tolist() == [0, 0, 7] and r.values.tolist() == [90.0, 0.0, 100.0]
    assert r.timestamps.tolist() == [3821 * 86400 + 720, 3822 * 86400 + 3600, 10 * 86400]
    bad = _write(tmp_path, "bad.txt", "0|3\n1\t90\t3821\t00:12:00\n7|1\n1\t100\t10\n")
    with pytest.raises(DataFormatError, match=r"line 1: the number of rating lines"):
        load_kddcup_yahoo(bad)


def test_binary_profiles(tmp_path):
    p = _write(tmp_path, "profiles.tsv", "1\t10\n1 11\n2\t10\n")
    r = load_binary_profiles(p)
    assert r.values.tolist() == [1.0, 1.0, 1.0] and r.rating_scale == (1.0, 1.0) and r.n_users == 2


@pytest.mark.parametrize("dtype, kind", [(np.float32, "fvecs"), (np.int32, "ivecs"), (np.uint8, "bvecs")])
def test_vecs_roundtrip(tmp_path, dtype, kind):
    a = (np.arange(5 * 7) % 200).reshape(5, 7).astype(dtype)
    p = tmp_path / f"x.{kind}"
    write_vecs(p, a)
    assert p.stat().st_size == 5 * (4 + 7 * np.dtype(dtype).itemsize)
    b = read_vecs(p)
    assert b.dtype == dtype and np.array_equal(a, b)
    assert np.array_equal(read_vecs(p, count=2), a[:2])


def test_vecs_truncated_and_inconsistent(tmp_path):
    a = np.ones((3, 4), np.float32)
    p = tmp_path / "x.fvecs"
    write_vecs(p, a)
    data = p.read_bytes()
    p.write_bytes(data[:-3])
    with pytest.raises(DataFormatError, match="not a multiple of the record size 20"):
        read_vecs(p)
    raw = bytearray(data)
    raw[20:24] = np.int32(4 + 0).tobytes()  # record 1 header still 4: make it inconsistent instead
    raw[20:24] = np.int32(5).tobytes()
    p.write_bytes(bytes(raw))
    with pytest.raises(DataFormatError, match="record 1 has dimension header 5"):
        read_vecs(p)
