"""The bad-input battery (issue #18): every case feeds exactly one bad input and asserts a named error — a
DataFormatError naming the file (and line) and the fix, a ParameterError naming the parameter, a DatasetUnavailable
naming the command — or correct handling, and that no partial output is left behind.

The loader cases are generated for every ratings format the registry knows (``FORMAT_WRITERS`` must cover
``data_fetch.registry.FORMATS``), and the parameter cases for every experiment whose parameter file declares
``datasets``/``epsilons``: a new loader or experiment inherits the battery by being registered.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib
import io
import json
import os
import shutil
import tarfile
import threading
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from data_fetch import fetch, get_spec, is_present
from data_fetch.__main__ import main as fetch_main
from data_fetch.manifest import MANIFEST_NAME, read_manifest
from data_fetch.registry import DATASETS, FORMATS, FileSpec, Shape
from dpmf_lib.experiments import module_name
from dpmf_lib.data.loaders import load_format, write_vecs
from dpmf_lib.data.ratings import DataSource, Ratings
from dpmf_lib.errors import DataFormatError, DatasetUnavailable, ParameterError
from dpmf_lib.params import load_params, params_dir, read_yaml
from tests.fetch_toys import serve, zip_bytes

fetch_mod = importlib.import_module("data_fetch.fetch")
from tests.conftest import SHARED_DATA as SHARED, needs_ml100k

# ---------------------------------------------------------------------------------------------------------------------
# loaders: one writer per registry format, turning rows of (user, item, rating) tokens into that format's text


def _tab(rows, **_):
    return "".join(f"{u}\t{i}\t{r}\t0\n" for u, i, r in rows)


def _double_colon(rows, **_):
    return "".join(f"{u}::{i}::{r}::0\n" for u, i, r in rows)


def _csv(rows, quote=False, **_):
    q = (lambda x: f'"{x}"') if quote else str
    return ",".join(map(q, ("userId", "movieId", "rating"))) + "\n" + "".join(
        ",".join(map(q, row)) + "\n" for row in rows)


def _netflix(rows, **_):
    by_item: dict = {}
    for u, i, r in rows:
        by_item.setdefault(i, []).append((u, r))
    return "".join(f"{i}:\n" + "".join(f"{u},{r},2005-09-06\n" for u, r in v) for i, v in by_item.items())


def _kddcup(rows, **_):
    by_user: dict = {}
    for u, i, r in rows:
        by_user.setdefault(u, []).append((i, r))
    return "".join(f"{u}|{len(v)}\n" + "".join(f"{i}\t{r}\t3821\t00:12:00\n" for i, r in v)
                   for u, v in by_user.items())


def _profiles(rows, **_):
    return "".join(f"{u}\t{i}\n" for u, i, _ in rows)


FORMAT_WRITERS = {"tab": _tab, "double-colon": _double_colon, "csv-header": _csv, "netflix-per-movie": _netflix,
                  "kddcup-yahoo": _kddcup, "binary-profiles": _profiles}
HEADER_ONLY = {"tab": "\n\n", "double-colon": "\n", "csv-header": "userId,movieId,rating\n",
               "netflix-per-movie": "1:\n", "kddcup-yahoo": "7|0\n", "binary-profiles": "\n \n"}
# formats read by their own float tokeniser refuse ids ≥ 2**53 (named error); the others parse ids exactly
EXACT_IDS = {"tab", "double-colon", "csv-header", "binary-profiles"}
TEXT_FORMATS = sorted(FORMAT_WRITERS)
RATED = [f for f in TEXT_FORMATS if f != "binary-profiles"]  # formats with rating values (scale, step)


def test_battery_covers_every_registry_format():
    """A new format in the registry must get a writer here, and with it every case below."""
    assert set(FORMATS) - {"fvecs"} == set(FORMAT_WRITERS)


def _write(tmp_path, fmt, text: str | bytes, name="ratings.txt") -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def _load(fmt, path, scale=(1.0, 5.0), step=None):
    return load_format(fmt, path, rating_scale=scale, rating_step=step, source=DataSource("toy", True))


GOOD = [("1", "10", "4"), ("2", "10", "5"), ("2", "11", "1")]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_good_file_loads(tmp_path, fmt):
    r = _load(fmt, _write(tmp_path, fmt, FORMAT_WRITERS[fmt](GOOD)))
    assert (r.n_ratings, r.n_users, r.n_items) == (3, 2, 2)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("content", ["empty", "header-only"])
def test_no_ratings_is_refused_at_load(tmp_path, fmt, content):
    p = _write(tmp_path, fmt, "" if content == "empty" else HEADER_ONLY[fmt])
    with pytest.raises(DataFormatError) as exc:
        _load(fmt, p)
    assert str(p) in str(exc.value) and "no ratings in this file" in str(exc.value) and " — " in str(exc.value)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_missing_file_is_a_named_error(tmp_path, fmt):
    p = tmp_path / "absent" / "ratings.txt"
    with pytest.raises(DataFormatError) as exc:
        _load(fmt, p)
    if fmt == "netflix-per-movie":  # a glob over files: "none found"
        assert "no Netflix rating files found" in str(exc.value)
    else:
        assert f"{p}: no such file — " in str(exc.value) and "data_fetch" in str(exc.value)


def test_missing_vector_file_is_a_named_error(tmp_path):
    from dpmf_lib.data.loaders import read_vecs

    with pytest.raises(DataFormatError, match="no such file"):
        read_vecs(tmp_path / "sift_base.fvecs")


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_utf8_bom_is_ignored(tmp_path, fmt):
    plain = _load(fmt, _write(tmp_path, fmt, FORMAT_WRITERS[fmt](GOOD), "a.txt"))
    bom = _load(fmt, _write(tmp_path, fmt, b"\xef\xbb\xbf" + FORMAT_WRITERS[fmt](GOOD).encode(), "b.txt"))
    assert np.array_equal(bom.user_ids, plain.user_ids) and np.array_equal(bom.values, plain.values)


def test_quoted_csv_fields_parse_like_plain_ones(tmp_path):
    p = _write(tmp_path, "csv-header", _csv(GOOD, quote=True))
    assert p.read_text().splitlines()[1] == '"1","10","4"'
    r = _load("csv-header", p)
    assert r.user_ids[r.users].tolist() == [1, 2, 2] and r.values.tolist() == [4.0, 5.0, 1.0]


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
def test_ids_beyond_2_53_are_never_merged(tmp_path, fmt):
    """9007199254740993 and …992 are the same float64: either two users, exactly, or a named error."""
    big = [("9007199254740993", "10", "4"), ("9007199254740992", "10", "5")]
    p = _write(tmp_path, fmt, FORMAT_WRITERS[fmt](big))
    if fmt in EXACT_IDS:
        r = _load(fmt, p)
        assert r.n_users == 2 and r.user_ids.tolist() == [9007199254740992, 9007199254740993]
        assert r.user_ids[r.users].tolist() == [9007199254740993, 9007199254740992]
    else:
        with pytest.raises(DataFormatError, match=r"line \d+: .* id 9007199254740992 is ≥ 2\*\*53"):
            _load(fmt, p)


@pytest.mark.parametrize("fmt", TEXT_FORMATS)
@pytest.mark.parametrize("token, problem", [("1e20", "≥ 2**53"), ("8.9e19", "≥ 2**53"),
                                            ("100000000000000000000", "does not fit in a 64-bit integer")])
def test_ids_that_cannot_be_held_are_refused(tmp_path, fmt, token, problem):
    if fmt not in EXACT_IDS and problem.startswith("does not fit"):
        problem = "≥ 2**53"  # float tokenisers see only the value
    rows = [("1", "10", "4"), (token, "10", "5")]
    p = _write(tmp_path, fmt, FORMAT_WRITERS[fmt](rows))
    with pytest.raises(DataFormatError) as exc:
        _load(fmt, p)
    assert str(p) in str(exc.value) and "line " in str(exc.value) and problem in str(exc.value)


@pytest.mark.parametrize("fmt", RATED)
def test_rating_step_is_enforced(tmp_path, fmt):
    p = _write(tmp_path, fmt, FORMAT_WRITERS[fmt]([("1", "10", "4.5"), ("2", "10", "4.2")]))
    with pytest.raises(DataFormatError) as exc:
        _load(fmt, p, scale=(0.5, 5.0), step=0.5)
    assert "rating 4.2 is not on the dataset's grid 0.5, 1, …, 5 (step 0.5)" in str(exc.value)
    assert _load(fmt, p, scale=(0.5, 5.0)).values.tolist()[1] == pytest.approx(4.2)  # no step: any value


@pytest.mark.parametrize("fmt", RATED)
def test_inverted_rating_scale_names_the_parameter(tmp_path, fmt):
    p = _write(tmp_path, fmt, FORMAT_WRITERS[fmt](GOOD))
    with pytest.raises(ParameterError, match=r"rating_scale \(5, 1\) is inverted: write it \(rmin, rmax\) = \(1, 5\)"):
        _load(fmt, p, scale=(5, 1))


def test_registry_rating_step_reaches_the_loader(tmp_path, monkeypatch):
    """ml-10m is on half stars: a 4.2 in data/ml-10m/ratings.dat is refused by load_ratings, naming the file."""
    from dpmf_lib.data import load_ratings

    monkeypatch.delenv("DPMF_DATA_MIRROR", raising=False)
    spec = dataclasses.replace(get_spec("ml-10m"), files=(FileSpec("ratings.dat"),))  # no published line count
    monkeypatch.setitem(DATASETS, "ml-10m", spec)
    src = tmp_path / "src"
    src.mkdir()
    (src / "ratings.dat").write_text("1::10::4.5::0\n2::10::4.2::0\n")
    with pytest.raises(DataFormatError, match=r"ratings\.dat, line 2: rating 4\.2 is not on the dataset's grid"):
        fetch("ml-10m", tmp_path / "data", source_dir=src, progress=False)  # refused at install …
    assert not (tmp_path / "data" / "ml-10m").exists()
    (src / "ratings.dat").write_text("1::10::4.5::0\n2::10::4::0\n")
    fetch("ml-10m", tmp_path / "data", source_dir=src, progress=False)
    (tmp_path / "data" / "ml-10m" / "ratings.dat").write_text("1::10::4.5::0\n2::10::4.2::0\n")
    manifest = read_manifest(tmp_path / "data" / "ml-10m")
    manifest["files"]["ratings.dat"]["size"] = (tmp_path / "data" / "ml-10m" / "ratings.dat").stat().st_size
    manifest["files"]["ratings.dat"]["sha256"] = hashlib.sha256(b"1::10::4.5::0\n2::10::4.2::0\n").hexdigest()
    (tmp_path / "data" / "ml-10m" / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(DataFormatError, match=r"line 2: rating 4\.2 is not on the dataset's grid"):
        load_ratings("ml-10m", data_dir=tmp_path / "data")  # … and at load


# ---------------------------------------------------------------------------------------------------------------------
# trainers: an empty training set is refused at the top, naming the parameter


def _empty_ratings() -> Ratings:
    z = np.empty(0, np.int32)
    return Ratings(users=z, items=z, values=np.empty(0, np.float32), n_users=1, n_items=1, rating_scale=(1.0, 5.0),
                   source=DataSource("toy", True))


def _trainers():
    from dpmf_lib.mf import csgd, peers, sgld
    from dpmf_lib.mf.layout import naive_layout, tiered_layout

    return {"sample_sgld": lambda r: sgld.sample_sgld(r, d=2, epochs=1),
            "train_sgd": lambda r: csgd.train_sgd(r, d=2, epochs=1),
            "tiered_layout": tiered_layout, "naive_layout": naive_layout,
            "libmf_fit": lambda r: peers.libmf_fit(r, r), "surprise_fit": lambda r: peers.surprise_fit(r, r)}


@pytest.mark.parametrize("name", sorted(_trainers()))
def test_trainers_refuse_an_empty_training_set(name):
    with pytest.raises(ParameterError, match=r"holds no ratings — pass a non-empty"):
        _trainers()[name](_empty_ratings())  # sample_sgld used to raise ZeroDivisionError here


# ---------------------------------------------------------------------------------------------------------------------
# experiment parameters: `datasets` and `epsilons` are validated before any data is touched


def _experiments_declaring(name: str) -> list[str]:
    out = []
    for p in sorted(params_dir().glob("*.yaml")):
        doc = read_yaml(p)
        if isinstance(doc, dict) and isinstance(doc.get("defaults"), dict) and name in doc["defaults"]:
            out.append(p.stem)
    return out


WITH_DATASETS = _experiments_declaring("datasets")
WITH_EPSILONS = _experiments_declaring("epsilons")


def test_the_parameter_battery_sees_the_experiments():
    assert {"liu_fig1", "liu_fig7", "pnbm_fig1", "balu_table4_2"} <= set(WITH_DATASETS)
    assert {"liu_fig7", "pnbm_fig1", "extra_liu_personalized_privacy"} <= set(WITH_EPSILONS)


@pytest.fixture
def no_data_access(monkeypatch):
    """Any dataset access (real, mirror or stand-in goes through _real_location first) fails the test."""
    from dpmf_lib.data import datasets

    def touched(*a, **k):
        raise AssertionError("data was loaded before the parameters were validated")

    monkeypatch.setattr(datasets, "_real_location", touched)


def _run(name, override):
    mod = importlib.import_module(module_name(name))
    return mod.run(load_params(name, "smoke", override))


@pytest.mark.parametrize("name", WITH_DATASETS)
@pytest.mark.parametrize("value, problem", [([], "is empty"), ("ml-100k", "must be a list"),
                                            (["no-such-set"], "unknown dataset 'no-such-set'")])
def test_bad_datasets_are_refused_first(name, value, problem, no_data_access):
    with pytest.raises(ParameterError) as exc:
        _run(name, {"datasets": value})
    assert "parameter 'datasets'" in str(exc.value) and problem in str(exc.value)


@pytest.mark.parametrize("name", WITH_EPSILONS)
@pytest.mark.parametrize("value, problem", [("100", "must be a list"), ([], "is empty"), ([1.0, 0.0], "entry 0.0"),
                                            ([1.0, float("nan")], "entry nan"), ([True], "entry True")])
def test_bad_epsilons_are_refused_first(name, value, problem, no_data_access):
    with pytest.raises(ParameterError) as exc:
        _run(name, {"epsilons": value})
    assert "parameter 'epsilons'" in str(exc.value) and problem in str(exc.value)


def test_liu_fig7_unknown_dataset_is_named_not_a_missing_tau(no_data_access):
    with pytest.raises(ParameterError, match=r"unknown dataset 'ml100k' \(did you mean 'ml-100k'\?\)"):
        _run("liu_fig7", {"datasets": ["ml100k"]})


def test_liu_fig1_without_ml100k_names_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMF_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("DPMF_DATA_MIRROR", raising=False)
    with pytest.raises(DatasetUnavailable, match=r"python -m data_fetch ml-100k"):
        _run("liu_fig1", {})


# ---------------------------------------------------------------------------------------------------------------------
# data_fetch


# `dest` and `mirror` fixtures: tests/conftest.py


def _offline(monkeypatch):
    def refuse(url, timeout):
        raise urllib.error.URLError("offline (test)")

    monkeypatch.setattr(fetch_mod.urllib.request, "urlopen", refuse)


def _leftovers(d: Path):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_symlink_out_of_the_source_tree_is_refused(dest, tmp_path, capsys):
    src = tmp_path / "src"
    src.mkdir()
    outside = tmp_path / "system-file"  # stands for /etc/passwd
    outside.write_text("root:x:0:0:root:/root:/bin/bash\n")
    (src / "ratings.dat").symlink_to(outside)
    assert fetch_main(["ml-1m", "--from", str(src), "--dest", str(dest), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"{src / 'ratings.dat'}: is a symbolic link to {outside}, outside the source directory" in err
    assert not (dest / "ml-1m").exists() and _leftovers(dest) == []


def test_special_files_in_the_source_are_refused(dest, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "ratings.dat").write_text("1::1::5::0\n")
    os.mkfifo(src / "movies.dat")  # a copy would block forever
    with pytest.raises(DataFormatError, match=r"movies\.dat: is not a regular file"):
        fetch("ml-1m", dest, source_dir=src, progress=False)
    assert not (dest / "ml-1m").exists() and _leftovers(dest) == []


@needs_ml100k
def test_symlink_inside_the_source_tree_is_accepted(dest, mirror):
    (mirror / "ml-100k" / "notes.txt").symlink_to("u.info")
    fetch("ml-100k", progress=False)
    assert is_present("ml-100k", deep=True) and (dest / "ml-100k" / "notes.txt").read_bytes().startswith(b"943")


@pytest.mark.parametrize("content, problem", [
    ("1::1::5::0\n" * 10, "has 10 lines, the MovieLens 1M release has 1,000,209"),
    ("x\n" * 1_000_209, "line 1: field 1 is not a number"),  # right count, wrong content: the parse catches it
])
def test_ratings_file_is_counted_and_parsed_before_the_manifest(dest, tmp_path, content, problem):
    src = tmp_path / "src"
    src.mkdir()
    (src / "ratings.dat").write_text(content)
    with pytest.raises(DataFormatError) as exc:
        fetch("ml-1m", dest, source_dir=src, progress=False)
    msg = str(exc.value)
    assert msg.startswith(str(src / "ratings.dat")) and problem in msg and ".staging-" not in msg
    assert not (dest / "ml-1m").exists() and _leftovers(dest) == []


def _serve(monkeypatch, data: bytes):
    serve(monkeypatch, fetch_mod, data)


def test_archive_expansion_is_capped(dest, monkeypatch):
    bomb = zip_bytes({"ml-100k/u.data": b"1\t1\t5\t0\n", "ml-100k/filler": bytes(4 << 20)})  # 4 MiB of zeros: ~4 kB
    assert len(bomb) < 64 << 10
    _serve(monkeypatch, bomb)
    spec = dataclasses.replace(get_spec("ml-100k"), url="https://example.invalid/toy.zip",
                               archive_md5=hashlib.md5(bomb).hexdigest(), files=(FileSpec("u.data"),),
                               max_extracted_bytes=1 << 20)
    with pytest.raises(DataFormatError, match=r"toy\.zip: the archive expands to 4,194,312 bytes, more than the "
                                              r"1,048,576"):
        fetch_mod.install_from_url(spec, dest, progress=False)
    assert list(dest.iterdir()) == []
    assert all(s.max_extracted_bytes for s in DATASETS.values() if s.url)  # every download has its own cap


def _tar_gz(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _vecs_bytes(tmp_path, n, d) -> bytes:
    p = tmp_path / "v.fvecs"
    write_vecs(p, np.arange(n * d, dtype=np.float32).reshape(n, d))
    return p.read_bytes()


def test_archive_without_published_checksum_says_so(dest, tmp_path, monkeypatch, capsys):
    base, query = _vecs_bytes(tmp_path, 3, 128), _vecs_bytes(tmp_path, 2, 128)
    archive = _tar_gz({"sift/sift_base.fvecs": base, "sift/sift_query.fvecs": query})
    _serve(monkeypatch, archive)
    spec = dataclasses.replace(get_spec("sift1m"), files=(FileSpec("sift_base.fvecs", size=len(base)),
                                                          FileSpec("sift_query.fvecs", size=len(query))))
    assert spec.archive_md5 is None and spec.archive_sha256 is None  # the real entry publishes none
    m = read_manifest(fetch_mod.install_from_url(spec, dest, progress=False))
    assert m["archive"]["checked"] is None and m["archive"]["sha256"] == hashlib.sha256(archive).hexdigest()
    assert "no checksum is published" in m["archive"]["note"] and "trust on first use" in m["archive"]["note"]
    assert "no checksum is published" in capsys.readouterr().err
    assert m["parsed"]["checked"]


def test_vector_file_of_the_wrong_dimension_is_refused(dest, tmp_path, monkeypatch):
    base = _vecs_bytes(tmp_path, 3, 64)
    _serve(monkeypatch, _tar_gz({"sift/sift_base.fvecs": base, "sift/sift_query.fvecs": base}))
    spec = dataclasses.replace(get_spec("sift1m"), files=(FileSpec("sift_base.fvecs", size=len(base)),))
    with pytest.raises(DataFormatError, match=r"\(archive member sift/sift_\w+\.fvecs\): vectors have dimension 64"):
        fetch_mod.install_from_url(spec, dest, progress=False)
    assert list(dest.iterdir()) == []


def test_checksum_error_from_a_download_names_the_url_and_member(dest, monkeypatch):
    archive = zip_bytes({"ml-100k/u.data": b"1\t1\t5\t0\n"})
    _serve(monkeypatch, archive)
    spec = dataclasses.replace(get_spec("ml-100k"), url="https://example.invalid/toy.zip",
                               archive_md5=hashlib.md5(archive).hexdigest(), files=(FileSpec("u.data", "0" * 64),))
    with pytest.raises(DataFormatError) as exc:
        fetch_mod.install_from_url(spec, dest, progress=False)
    msg = str(exc.value)
    assert msg.startswith("https://example.invalid/toy.zip (archive member ml-100k/u.data): sha256 ")
    assert ".staging-" not in msg and list(dest.iterdir()) == []


@needs_ml100k
def test_checksum_error_from_a_directory_names_the_source_file(dest, mirror):
    p = mirror / "ml-100k" / "u.data"
    raw = bytearray(p.read_bytes())
    raw[10] = ord("9") if raw[10] != ord("9") else ord("8")
    p.write_bytes(bytes(raw))
    with pytest.raises(DataFormatError) as exc:
        fetch("ml-100k", progress=False)
    assert str(exc.value).startswith(f"{p}: sha256 ") and ".staging-" not in str(exc.value)


@needs_ml100k
def test_manifest_is_world_readable(dest, mirror):
    path = fetch("ml-100k", progress=False)
    assert (path / MANIFEST_NAME).stat().st_mode & 0o777 == 0o644


@needs_ml100k
def test_plain_fetch_verifies_checksums_and_replaces_a_corrupted_copy(dest, mirror, capsys):
    path = fetch("ml-100k", progress=False)
    p = path / "u.data"
    good = p.read_bytes()
    raw = bytearray(good)
    raw[10] = ord("9") if raw[10] != ord("9") else ord("8")
    p.write_bytes(bytes(raw))  # same size: a size-only check accepts it
    assert fetch("ml-100k", progress=False) == path
    assert p.read_bytes() == good and is_present("ml-100k", deep=True)
    assert "has changed since it was fetched" in capsys.readouterr().err


@needs_ml100k
def test_corrupted_copy_that_cannot_be_replaced_is_a_named_error(dest, mirror, monkeypatch):
    path = fetch("ml-100k", progress=False)
    raw = bytearray((path / "u.data").read_bytes())
    raw[10] = ord("9") if raw[10] != ord("9") else ord("8")
    (path / "u.data").write_bytes(bytes(raw))
    monkeypatch.delenv("DPMF_DATA_MIRROR")
    _offline(monkeypatch)
    with pytest.raises(DatasetUnavailable, match=r"ml-100k is damaged \(.*u\.data has changed since it was fetched"):
        fetch("ml-100k", progress=False)


def _fetched_then_killed_during_force(dest: Path) -> Path:
    """The state a kill leaves between the two renames of an install with --force."""
    fetch("ml-100k", progress=False)
    old = dest / ".ml-100k.old-killed"
    old.mkdir()
    os.replace(dest / "ml-100k", old / "previous")
    (dest / ".ml-100k.staging-killed").mkdir()
    (dest / ".ml-100k.staging-killed" / "u.data").write_bytes(b"partial")
    (dest / ".ml-100k.abc.part").write_bytes(b"partial download")
    return old


@needs_ml100k
def test_copy_set_aside_by_a_killed_force_fetch_is_restored(dest, mirror, monkeypatch):
    _fetched_then_killed_during_force(dest)
    fetched_at = read_manifest(dest / ".ml-100k.old-killed" / "previous")["fetched_at"]
    monkeypatch.delenv("DPMF_DATA_MIRROR")
    _offline(monkeypatch)  # restoring must not need a source
    assert fetch("ml-100k", progress=False) == dest / "ml-100k"
    assert is_present("ml-100k", deep=True) and read_manifest(dest / "ml-100k")["fetched_at"] == fetched_at
    assert _leftovers(dest) == []


@needs_ml100k
def test_stale_leftovers_are_removed_and_a_good_copy_kept(dest, mirror):
    _fetched_then_killed_during_force(dest)
    fetch("ml-100k", progress=False)  # restores, so data/ml-100k is complete …
    old2 = dest / ".ml-100k.old-stale"
    shutil.copytree(dest / "ml-100k", old2 / "previous")  # … and a later install's clean-up was killed
    manifest = (dest / "ml-100k" / MANIFEST_NAME).read_bytes()
    fetch("ml-100k", progress=False)
    assert (dest / "ml-100k" / MANIFEST_NAME).read_bytes() == manifest and _leftovers(dest) == []


@needs_ml100k
def test_recovery_waits_for_the_lock(dest, mirror):
    """Clean-up never runs under another fetch: the planted staging dir survives while the lock is held."""
    staging = dest / ".ml-100k.staging-busy"
    staging.mkdir()
    fd = os.open(dest, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    done = threading.Event()
    t = threading.Thread(target=lambda: (fetch("ml-100k", progress=False), done.set()))
    try:
        t.start()
        t.join(0.5)
        assert not done.is_set() and staging.exists()
    finally:
        os.close(fd)
    t.join(60)
    assert done.is_set() and not staging.exists() and is_present("ml-100k")


def test_registry_shapes_used_by_the_battery():
    assert get_spec("sift1m").shape == Shape(1_000_000, 128, 10_000) and get_spec("ml-10m").rating_step == 0.5


def test_dpsgd_mf_refuses_an_empty_training_set():
    import numpy as np

    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.nbm.model import train_dpsgd_mf

    empty = Ratings(np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.float32), 3, 4, (1.0, 5.0),
                    DataSource("toy", True, None, "empty"))
    with pytest.raises(ParameterError, match="train_dpsgd_mf.*`train` holds no ratings"):
        train_dpsgd_mf(empty, epsilon=1.0, seed=0)


def test_pnbm_figures_name_the_fetch_when_no_dataset_is_present(tmp_path, monkeypatch):
    from dpmf_lib.errors import DatasetUnavailable
    from dpmf_lib.nbm import runs

    monkeypatch.setenv("DPMF_DATA_DIR", str(tmp_path / "empty"))
    monkeypatch.delenv("DPMF_DATA_MIRROR", raising=False)
    runs._dataset.cache_clear()
    try:
        with pytest.raises(DatasetUnavailable, match="python -m data_fetch ml-1m"):
            runs.available(["ml-1m"])
    finally:
        runs._dataset.cache_clear()
