import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The mirror the tests read: the caller's DPMF_DATA_MIRROR, else ../shared/data beside the repository (CI's). The
# variable wins so that a clone elsewhere, given the mirror the documented way, runs its real-data tests, not skips them.
SHARED_DATA = Path(os.environ.get("DPMF_DATA_MIRROR") or REPO.parent / "shared" / "data").resolve()
ML100K_U_DATA = SHARED_DATA / "ml-100k" / "u.data"
os.environ.setdefault("DPMF_DATA_MIRROR", str(SHARED_DATA))
os.environ.setdefault("MPLBACKEND", "Agg")

needs_ml100k = pytest.mark.skipif(not ML100K_U_DATA.exists(),
                                  reason=f"ML-100K mirror not present at {SHARED_DATA} (set DPMF_DATA_MIRROR to a "
                                         "directory holding ml-100k/, as .ci/run does)")


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
