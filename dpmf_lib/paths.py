"""Where the workbook keeps things. Every path can be moved with an environment variable."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent


def data_dir() -> Path:
    """Extracted datasets (git-ignored). ``$DPMF_DATA_DIR`` overrides ``<repo>/data``."""
    return Path(os.environ.get("DPMF_DATA_DIR", REPO_ROOT / "data")).resolve()


def figures_dir() -> Path:
    """Generated figures, CSVs, provenance and the report. ``$DPMF_FIGURES_DIR`` overrides ``<repo>/figures``."""
    return Path(os.environ.get("DPMF_FIGURES_DIR", REPO_ROOT / "figures")).resolve()


def params_dir() -> Path:
    return REPO_ROOT / "params"


def notebooks_dir() -> Path:
    return REPO_ROOT / "notebooks"


def papers_dir() -> Path:
    """The papers' source texts, kept beside the repository (``../shared/papers``)."""
    return Path(os.environ.get("DPMF_PAPERS_DIR", REPO_ROOT.parent / "shared" / "papers")).resolve()


def cache_dir() -> Path:
    """The one result cache of the experiments (a :class:`joblib.Memory`, see :mod:`dpmf_lib.cache`).
    ``$DPMF_CACHE_DIR`` overrides ``<figures>/.cache``: inside the figures directory so that ``make clean-figures``
    (and ``make clean``) clear it with the results it served."""
    return Path(os.environ.get("DPMF_CACHE_DIR", figures_dir() / ".cache")).resolve()
