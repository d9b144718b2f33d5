"""data_fetch: registry facts, atomic installs from a mirror or a download, verification, clear errors."""

import dataclasses
import hashlib
import importlib
import urllib.error
from pathlib import Path

import pytest

from data_fetch import DATASETS, fetch, get_spec, is_present
from data_fetch.__main__ import main
from data_fetch.manifest import MANIFEST_NAME, read_manifest
from data_fetch.registry import FileSpec
from dpmf_lib.errors import DataFormatError, DatasetUnavailable, ParameterError
from tests.fetch_toys import serve, zip_bytes

fetch_mod = importlib.import_module("data_fetch.fetch")  # the module (the package re-exports the function `fetch`)
from tests.conftest import SHARED_DATA as SHARED, needs_ml100k


# `dest` and `mirror` fixtures: tests/conftest.py


def _leftovers(d: Path):
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_registry_facts():
    assert set(DATASETS) == {"ml-100k", "ml-1m", "ml-10m", "netflix", "yahoo-music", "eachmovie", "digg", "sift1m"}
    nf = get_spec("netflix")
    assert (nf.shape.users, nf.shape.items, nf.shape.ratings) == (480_189, 17_770, 100_480_507)
    assert not nf.available_for_download and nf.url is None and nf.reason
    em = get_spec("eachmovie")  # the thesis's Table 4.1 numbers
    assert (em.shape.users, em.shape.items, em.shape.ratings, em.rating_scale) == (61_265, 1_623, 2_811_718, (1.0, 6.0))
    assert get_spec("ml-100k").archive_md5 == "0e33842e24a9c977be4e0107933c0723"
    assert get_spec("sift1m").files[0].size == 516_000_000
    for spec in DATASETS.values():
        assert spec.available_for_download == (spec.url is not None)
        assert spec.available_for_download or spec.manual
    with pytest.raises(ParameterError, match="valid ids"):
        get_spec("nope")


@needs_ml100k
def test_ml100k_checksums_match_mirror():
    for fs in get_spec("ml-100k").files:
        data = (SHARED / "ml-100k" / fs.path).read_bytes()
        assert hashlib.sha256(data).hexdigest() == fs.sha256 and len(data) == fs.size
        if fs.lines:
            assert data.count(b"\n") == fs.lines


@needs_ml100k
def test_fetch_from_mirror(dest, mirror):
    path = fetch("ml-100k", progress=False)
    assert path == dest / "ml-100k" and is_present("ml-100k", deep=True)
    m = read_manifest(path)
    assert m["dataset"] == "ml-100k" and str(mirror / "ml-100k") in m["source"]
    assert m["files"]["u.data"]["checked"] and m["files"]["u.data"]["size"] == 1_979_173
    assert _leftovers(dest) == []
    mtime = (path / MANIFEST_NAME).stat().st_mtime_ns
    assert fetch("ml-100k", progress=False) == path and (path / MANIFEST_NAME).stat().st_mtime_ns == mtime  # no-op
    fetch("ml-100k", force=True, progress=False)
    assert is_present("ml-100k", deep=True) and _leftovers(dest) == []


@needs_ml100k
def test_failure_mid_copy_leaves_nothing(dest, mirror, monkeypatch):
    real_copy = fetch_mod._copy_file
    calls = []

    def flaky(src, dst):
        calls.append(src)
        if len(calls) == 3:
            raise OSError("disk full (simulated)")
        real_copy(src, dst)

    monkeypatch.setattr(fetch_mod, "_copy_file", flaky)
    with pytest.raises(OSError, match="simulated"):
        fetch("ml-100k", progress=False)
    assert not (dest / "ml-100k").exists() and not is_present("ml-100k") and _leftovers(dest) == []


@needs_ml100k
def test_failure_mid_copy_keeps_previous_copy(dest, mirror, monkeypatch):
    fetch("ml-100k", progress=False)
    monkeypatch.setattr(fetch_mod, "_copy_file", lambda s, d: (_ for _ in ()).throw(OSError("simulated")))
    with pytest.raises(OSError):
        fetch("ml-100k", force=True, progress=False)
    assert is_present("ml-100k", deep=True) and _leftovers(dest) == []


@needs_ml100k
def test_interrupted_before_manifest_is_not_present(dest, mirror, monkeypatch):
    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch_mod, "write_manifest", boom)
    with pytest.raises(KeyboardInterrupt):
        fetch("ml-100k", progress=False)
    assert (dest / "ml-100k" / "u.data").exists() and not is_present("ml-100k")
    monkeypatch.undo()
    monkeypatch.setenv("DPMF_DATA_DIR", str(dest))
    monkeypatch.setenv("DPMF_DATA_MIRROR", str(mirror))
    fetch("ml-100k", progress=False)  # no --force needed: the half-installed directory is replaced
    assert is_present("ml-100k", deep=True)


@needs_ml100k
def test_checksum_mismatch_raises(dest, mirror):
    p = mirror / "ml-100k" / "u.data"
    raw = bytearray(p.read_bytes())
    raw[10] = ord("9") if raw[10] != ord("9") else ord("8")
    p.write_bytes(bytes(raw))
    with pytest.raises(DataFormatError, match=r"u\.data: sha256 .* differs from the expected 06416e59"):
        fetch("ml-100k", progress=False)
    assert not (dest / "ml-100k").exists() and _leftovers(dest) == []


@needs_ml100k
def test_missing_required_file_raises(dest, mirror):
    (mirror / "ml-100k" / "u.item").unlink()
    with pytest.raises(DataFormatError, match="required file u.item"):
        fetch("ml-100k", progress=False)
    assert not (dest / "ml-100k").exists()


def test_unavailable_dataset(dest):
    for ds in ("netflix", "yahoo-music", "eachmovie", "digg"):
        with pytest.raises(DatasetUnavailable) as exc:
            fetch(ds, progress=False)
        msg = str(exc.value)
        assert get_spec(ds).title in msg and "--from DIR" in msg and "stand-in" in msg
    assert _leftovers(dest) == []


def _toy_spec(archive: bytes, md5=None):
    return dataclasses.replace(get_spec("ml-100k"), url="https://example.invalid/toy.zip",
                               archive_md5=md5 or hashlib.md5(archive).hexdigest(),
                               files=(FileSpec("u.data", hashlib.sha256(b"1\t1\t5\t0\n").hexdigest()),))


def test_download_extract_install(dest, monkeypatch):
    archive = zip_bytes({"ml-100k/u.data": b"1\t1\t5\t0\n", "ml-100k/README": b"toy"})
    serve(monkeypatch, fetch_mod, archive)
    spec = _toy_spec(archive)
    path = fetch_mod.install_from_url(spec, dest, progress=False)
    m = read_manifest(path)
    assert sorted(m["files"]) == ["README", "u.data"] and m["files"]["u.data"]["checked"]
    assert not m["files"]["README"]["checked"]  # no expected checksum: observed only
    assert m["archive"]["md5"] == spec.archive_md5 and m["archive"]["checked"] == "md5"
    assert m["archive"]["sha256"] == hashlib.sha256(archive).hexdigest()
    assert _leftovers(dest) == []


def test_download_md5_mismatch(dest, monkeypatch):
    archive = zip_bytes({"ml-100k/u.data": b"1\t1\t5\t0\n"})
    serve(monkeypatch, fetch_mod, archive)
    with pytest.raises(DataFormatError, match="archive md5 .* differs from the published 0000"):
        fetch_mod.install_from_url(_toy_spec(archive, md5="0" * 32), dest, progress=False)
    assert list(dest.iterdir()) == []


def test_download_sha256_preferred(dest, monkeypatch):
    archive = zip_bytes({"ml-100k/u.data": b"1\t1\t5\t0\n"})
    serve(monkeypatch, fetch_mod, archive)
    spec = dataclasses.replace(_toy_spec(archive), archive_sha256="f" * 64)  # md5 right, sha256 wrong
    with pytest.raises(DataFormatError, match="archive sha256 .* differs from the published ffff"):
        fetch_mod.install_from_url(spec, dest, progress=False)
    spec = dataclasses.replace(spec, archive_sha256=hashlib.sha256(archive).hexdigest())
    assert read_manifest(fetch_mod.install_from_url(spec, dest, progress=False))["archive"]["checked"] == "sha256"


def test_network_error_is_dataset_unavailable(dest, monkeypatch):
    def offline(url, timeout):
        raise urllib.error.URLError("Temporary failure in name resolution")

    monkeypatch.setattr(fetch_mod.urllib.request, "urlopen", offline)
    with pytest.raises(DatasetUnavailable) as exc:
        fetch("ml-1m", progress=False)
    msg = str(exc.value)
    assert "downloading https://files.grouplens.org/datasets/movielens/ml-1m.zip failed" in msg
    assert "name resolution" in msg and "stand-in" in msg
    assert list(dest.iterdir()) == []


def test_cli(dest, capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "netflix" in out and "NOT downloadable" in out and "absent" in out
    assert main(["netflix", "--quiet"]) == 1
    assert "withdrew" in capsys.readouterr().err


@needs_ml100k
def test_relative_mirror_path(dest, mirror, monkeypatch):
    monkeypatch.chdir(mirror.parent)
    monkeypatch.setenv("DPMF_DATA_MIRROR", mirror.name)  # relative to the current directory, as CI sets it
    assert fetch_mod.mirror_dir("ml-100k") == mirror / "ml-100k"
    assert fetch_mod.mirror_dir("netflix") is None


def test_the_tests_read_the_mirror_the_caller_names(tmp_path):
    """A clone outside CI's layout, given the mirror by DPMF_DATA_MIRROR, must run its real-data tests: they once read
    ../shared/data whatever the variable said and skipped as "mirror not present"."""
    import os
    import subprocess
    import sys

    from tests.conftest import REPO

    def seen(env):
        code = "import sys; sys.path.insert(0, 'tests'); import conftest; print(conftest.SHARED_DATA)"
        out = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True,
                             check=True)
        return out.stdout.strip()

    env = {k: v for k, v in os.environ.items() if k != "DPMF_DATA_MIRROR"}
    assert seen({**env, "DPMF_DATA_MIRROR": str(tmp_path)}) == str(tmp_path.resolve())
    assert seen(env) == str((REPO.parent / "shared" / "data").resolve())
