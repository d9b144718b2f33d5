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
