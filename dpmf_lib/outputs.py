"""What a notebook writes, and the provenance that goes with it.

Every notebook ends with :meth:`NotebookRun.save`, which writes into ``figures/<name>/``:
``<name>.png`` and ``<name>.svg`` (the figure), ``<name>.csv`` (the plotted numbers, with the ``dataset`` column
naming real data or ``[synthetic stand-in]``), ``provenance.json`` (git commit, params, profile, datasets with
checksums or "synthetic stand-in", seeds, package versions, wall time) and ``measurements.json`` (values of
``params/claims.yaml`` claims, read by the report).
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import pandas as pd

from .claims import Measurement
from .data.ratings import DataSource
from .params import load_params
from .paths import REPO_ROOT, figures_dir

PACKAGES = ("numpy", "numba", "scipy", "pandas", "matplotlib", "seaborn", "scikit-learn", "papermill", "joblib",
            "faiss-cpu", "scikit-surprise", "libmf")


def attach(df: pd.DataFrame, sources=(), measurements=()) -> pd.DataFrame:
    """Record the data sources and claim measurements an experiment's DataFrame was built from (in ``df.attrs``)."""
    srcs = list(df.attrs.get("sources", []))
    for s in sources:
        d = s.as_dict() if isinstance(s, DataSource) else dict(s)
        if d not in srcs:
            srcs.append(d)
    meas = list(df.attrs.get("measurements", [])) + [m.as_dict() if isinstance(m, Measurement) else dict(m)
                                                      for m in measurements]
    df.attrs["sources"] = srcs
    df.attrs["measurements"] = meas
    return df


def git_state() -> dict:
    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""

    return {"commit": git("rev-parse", "HEAD") or None, "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def package_versions() -> dict:
    out = {"python": platform.python_version()}
    for p in PACKAGES:
        try:
            out[p] = metadata.version(p)
        except metadata.PackageNotFoundError:
            pass
    return out


def seeds_of(params: dict) -> dict:
    return {k: v for k, v in params.items() if "seed" in k}


class NotebookRun:
    """One execution of a notebook: resolved parameters, a start time, and :meth:`save`.

    ``NotebookRun("liu_fig1", profile, overrides)`` loads ``params/liu_fig1.yaml`` at ``profile`` with ``overrides``
    (unknown names raise), applies the shared plotting style and starts the clock.
    """

    def __init__(self, name: str, profile: str = "ci", overrides: dict | None = None, *, out_dir: Path | None = None):
        from .plotting import style

        self.name = name
        self.profile = profile
        self.overrides = dict(overrides or {})
        self.params = load_params(name, profile, self.overrides)
        self.out_dir = Path(out_dir) if out_dir is not None else figures_dir() / name
        self.started = time.time()
        style()

    def save(self, df: pd.DataFrame, fig=None, *, extra_tables: dict[str, pd.DataFrame] | None = None) -> Path:
        """Write figure, CSV, provenance and measurements; returns the output directory."""
        if "dataset" not in df.columns:
            raise ValueError(f"{self.name}: the DataFrame needs a `dataset` column (Ratings.source.label) so that "
                             "the CSV says which rows come from real data and which from a synthetic stand-in")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stem = self.out_dir / self.name
        if fig is not None:
            fig.savefig(stem.with_suffix(".png"))
            fig.savefig(stem.with_suffix(".svg"), metadata={"Date": None})
        df.to_csv(stem.with_suffix(".csv"), index=False)
        for table_name, table in (extra_tables or {}).items():
            table.to_csv(self.out_dir / f"{self.name}_{table_name}.csv", index=False)
        sources = df.attrs.get("sources", [])
        provenance = {
            "notebook": self.name,
            "profile": self.profile,
            "params": self.params,
            "overrides": self.overrides,
            "datasets": sources or [{"dataset": None, "real": None, "note": "no dataset (synthetic by design)"}],
            "uses_standin": any(not s.get("real", True) for s in sources),
            "seeds": seeds_of(self.params),
            "git": git_state(),
            "packages": package_versions(),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
                        "numba_threads": _numba_threads()},
            "wall_time_s": round(time.time() - self.started, 3),
            "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_json(self.out_dir / "provenance.json", provenance)
        _write_json(self.out_dir / "measurements.json", df.attrs.get("measurements", []))
        return self.out_dir


def _numba_threads():
    try:
        import numba

        return numba.get_num_threads()
    except Exception:  # numba missing or not initialised: provenance still gets written
        return None


def _write_json(path: Path, obj) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=_jsonable) + "\n")
    os.replace(tmp, path)


def _jsonable(o):
    try:
        import numpy as np

        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
    except ImportError:
        pass
    if isinstance(o, Path):
        return str(o)
    return str(o)
