import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO.parent / "shared" / "data"

# Tests see the ML-100K mirror the way CI does, unless the caller chose another.
os.environ.setdefault("DPMF_DATA_MIRROR", str(SHARED_DATA))
os.environ.setdefault("MPLBACKEND", "Agg")


@pytest.fixture
def figures_tmp(tmp_path, monkeypatch):
    """Route every figure/provenance write of a test into a temporary directory."""
    out = tmp_path / "figures"
    out.mkdir()
    monkeypatch.setenv("DPMF_FIGURES_DIR", str(out))
    return out


@pytest.fixture
def dest(tmp_path, monkeypatch):
    """An empty data directory and no mirror (where data_fetch installs)."""
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv("DPMF_DATA_DIR", str(d))
    monkeypatch.delenv("DPMF_DATA_MIRROR", raising=False)
    return d


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A private copy of the ML-100K mirror (so tests may corrupt it)."""
    import shutil

    m = tmp_path / "mirror"
    shutil.copytree(SHARED_DATA / "ml-100k", m / "ml-100k")
    for p in (m / "ml-100k").iterdir():
        p.chmod(0o644)
    monkeypatch.setenv("DPMF_DATA_MIRROR", str(m))
    return m
