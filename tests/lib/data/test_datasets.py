"""load_ratings: real data when fetched or mirrored, labelled stand-in otherwise, clear errors."""

import numpy as np
import pytest

from data_fetch import fetch
from data_fetch.manifest import MANIFEST_NAME
from dpmf_lib.data import dataset_available, load_ratings
from dpmf_lib.data.datasets import load_ml100k_item_info, load_real, load_vectors
from dpmf_lib.errors import DataFormatError, DatasetUnavailable, ParameterError

from tests.conftest import SHARED_DATA as SHARED, needs_ml100k
U_DATA_SHA256 = "06416e597f82b7342361e41163890c81036900f418ad91315590814211dca490"


@pytest.fixture
def data_home(dest):
    """An empty data directory and no mirror (conftest's ``dest``)."""
    return dest


def test_absent_dataset_raises_unless_the_caller_opts_in_to_the_standin(data_home):
    """No silent stand-in: a library user asking for ml-100k without the data gets an error naming the fix."""
    assert not dataset_available("ml-100k")
    with pytest.raises(DatasetUnavailable) as exc:
        load_ratings("ml-100k")
    msg = str(exc.value)
    assert "python -m data_fetch ml-100k" in msg and "allow_standin=True" in msg and str(data_home / "ml-100k") in msg
    r = load_ratings("ml-100k", allow_standin=True)
    assert not r.source.real and r.source.label == "ml-100k [synthetic stand-in]"
    assert r.describe()["ratings"] == 100_000
    assert not (data_home / "standins").exists()  # small stand-ins are not cached


def test_hua_loader_refuses_a_missing_ml100k(data_home):
    from dpmf_lib.objpert.data import load_hua_dataset

    with pytest.raises(DatasetUnavailable, match="python -m data_fetch ml-100k"):
        load_hua_dataset("ml-100k")


def test_notebooks_may_stand_in_only_for_data_that_cannot_be_had():
    from dpmf_lib.data.datasets import standin_permitted

    assert not standin_permitted("ml-100k")
    assert standin_permitted("netflix") and standin_permitted("ml-1m")


def test_unavailable_dataset_message(data_home):
    with pytest.raises(DatasetUnavailable) as exc:
        load_ratings("netflix", allow_standin=False)
    msg = str(exc.value)
    assert "withdrew" in msg and "--from DIR" in msg and "mv_0000001.txt" in msg and "stand-in" in msg
    r = load_ratings("netflix", allow_standin=True, standin_scale=0.001)
    assert r.source.label == "netflix [synthetic stand-in]" and r.n_items == 17_770


def test_unknown_id_and_vectors(data_home):
    with pytest.raises(ParameterError, match="valid ids: ml-100k, ml-1m, ml-10m, netflix, yahoo-music"):
        load_ratings("movielens")
    with pytest.raises(ParameterError, match="load_vectors"):
        load_ratings("sift1m")
    v = load_vectors("sift1m", allow_standin=True, standin_scale=0.001)
    assert v.base.shape == (1000, 128) and v.query.shape == (100, 128) and v.base.dtype == np.float32
    assert not v.source.real and v.base.min() >= 0 and v.base.max() <= 255
    with pytest.raises(DatasetUnavailable):
        load_vectors("sift1m", allow_standin=False)


@needs_ml100k
def test_mirror_read_in_place(data_home, monkeypatch):
    monkeypatch.setenv("DPMF_DATA_MIRROR", str(SHARED))
    assert dataset_available("ml-100k") and not dataset_available("ml-100k", include_mirror=False)
    r = load_ratings("ml-100k")
    assert r.source.real and r.source.checksum == U_DATA_SHA256 and r.source.label == "ml-100k"
    assert (r.n_users, r.n_items, r.n_ratings) == (943, 1682, 100_000)
    assert list(data_home.iterdir()) == []  # nothing written
    info = load_ml100k_item_info()
    assert info.loc[0, "title"] == "Toy Story (1995)" and info["Action"].sum() > 0


@needs_ml100k
def test_fetched_copy_is_used_and_checked(data_home, monkeypatch):
    monkeypatch.setenv("DPMF_DATA_MIRROR", str(SHARED))
    fetch("ml-100k", progress=False)
    monkeypatch.delenv("DPMF_DATA_MIRROR")
    r = load_ratings("ml-100k", allow_standin=False)
    assert r.source.real and r.source.checksum == U_DATA_SHA256 and "fetched" in r.source.note
    # same size, one byte changed: the manifest check on load notices
    p = data_home / "ml-100k" / "u.data"
    raw = bytearray(p.read_bytes())
    raw[-2:-1] = b"8" if raw[-2:-1] != b"8" else b"9"
    p.write_bytes(bytes(raw))
    with pytest.raises(DataFormatError, match="differs from the expected .* \\(manifest\\)"):
        load_real("ml-100k")
    # a directory without manifest is not a dataset — and not absent either: it is damaged, and never replaced
    # by a stand-in (not even for a caller that accepts stand-ins)
    (data_home / "ml-100k" / MANIFEST_NAME).unlink()
    assert not dataset_available("ml-100k")
    with pytest.raises(DatasetUnavailable, match="damaged.*python -m data_fetch ml-100k --force"):
        load_ratings("ml-100k", allow_standin=True)


def test_netflix_from_directory(data_home, tmp_path):
    src = tmp_path / "netflix-copy" / "training_set"
    src.mkdir(parents=True)
    (src / "mv_0000001.txt").write_text("1:\n6,3,2005-09-06\n7,4,2005-09-07\n")
    (src / "mv_0000002.txt").write_text("2:\n6,5,2004-01-01\n")
    fetch("netflix", source_dir=tmp_path / "netflix-copy", progress=False)
    assert dataset_available("netflix")
    r = load_ratings("netflix", allow_standin=False)
    assert r.source.real and (r.n_users, r.n_items, r.n_ratings) == (2, 2, 3)
    assert len(r.source.checksum) == 64


@needs_ml100k
def test_data_state_of_a_copy_whose_manifest_lacks_hashes_is_real(data_home, monkeypatch):
    """An older manifest without sha256 must not make present data look absent (the run would go stale forever)."""
    import json

    from dpmf_lib.data.datasets import real_checksum

    monkeypatch.setenv("DPMF_DATA_MIRROR", str(SHARED))
    fetch("ml-100k", progress=False)
    monkeypatch.delenv("DPMF_DATA_MIRROR")
    mpath = data_home / "ml-100k" / MANIFEST_NAME
    m = json.loads(mpath.read_text())
    for info in m["files"].values():
        info.pop("sha256", None)
    mpath.write_text(json.dumps(m))
    assert real_checksum("ml-100k") == U_DATA_SHA256
