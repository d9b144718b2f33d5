"""How `.ci/run` splits its checks between `make test` and the `ci` notebook runs it makes right after.

`.ci/run` runs `make test` with ``DPMF_CI_FIGURES=pending``, then `make figures` at the `ci` profile, then
`make test-figures`: the tests marked ``ci_figures`` (:data:`needs_ci_figures`) with ``DPMF_CI_FIGURES=<figures dir>``.
Those check the outputs the `ci` runs wrote (CSV, provenance, measurements, executed notebook) in place of slower
executions of the same notebooks or experiments in `make test`, which skip themselves while ``DPMF_CI_FIGURES`` is set
(:func:`replaced_in_ci_by`). A plain `make test` (no variable) runs the slower executions and skips the checks, with
the reason. Where a check and the execution it replaces assert the same things, one function holds the assertions and
both call it, on the execution's frame and on the `ci` run's (:func:`ci_run`).

In the second phase a check fails, never skips, when the `ci` run it reads is missing, failed or was not at `ci`
(:func:`ci_dir`); under ``CI=true`` (`.ci/run`) a ``ci_figures`` test that skips for any other reason fails too
(``tests/conftest.py``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CI_FIGURES = os.environ.get("DPMF_CI_FIGURES") or None
#: the checks of the `ci` runs' outputs run (``DPMF_CI_FIGURES`` names a figures directory)
CHECKING_CI_FIGURES = CI_FIGURES not in (None, "pending")

#: a check of the `ci` run's outputs: skipped (with the reason) unless ``DPMF_CI_FIGURES`` names a figures directory
needs_ci_figures = pytest.mark.ci_figures

SKIP_REASON = "runs in .ci/run after make figures (DPMF_CI_FIGURES=<figures dir>; `make test-figures` after `make figures`)"


def replaced_in_ci_by(check: str):
    """Mark a slow execution that `.ci/run` skips (whenever ``DPMF_CI_FIGURES`` is set), naming the check of CI's own
    `ci` run that covers it (marker ``ci_replaced``; tests/conftest.py adds the skip)."""
    return pytest.mark.ci_replaced(check)


def replaced_reason(check: str) -> str:
    return f"CI checks its own `ci` runs instead, after make figures: {check}"


def ci_dir(name: str) -> Path:
    """``<DPMF_CI_FIGURES>/<name>``, asserting that the `ci` run there finished ``ok`` (a missing directory or
    ``run.json`` fails the check: the figure run did not write what it should)."""
    assert CHECKING_CI_FIGURES, "ci_dir() is for tests marked ci_figures"
    out = Path(CI_FIGURES) / name
    assert (out / "run.json").is_file(), f"{name}: no run.json in {out} (did make figures PROFILE=ci run it?)"
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert run.get("status") == "ok" and run.get("profile") == "ci", \
        f"{name}: the run in {out} is {run.get('status')!r} at {run.get('profile')!r}: {run.get('error')}"
    return out


@dataclass
class CiRun:
    """What a notebook's `ci` run wrote, in the shapes its experiment's ``run`` returns them: the table (its timing
    columns too), ``attrs["measurements"]`` of the canonical seed (the first of each merged measurement's values) and
    ``attrs["sources"]``, and the parameters it ran with."""

    name: str
    out: Path
    df: "object"
    params: dict
    provenance: dict
    merged: list = field(default_factory=list)  # measurements.json as written (values over every seed)


def _first_seed(m: dict) -> dict:
    one = {k: v for k, v in m.items() if k not in ("values", "seeds", "profile", "guards", "cells")}
    one["value"] = m["values"][0] if m.get("values") else m["value"]
    one["guards"] = {g: (v[0] if isinstance(v, list) else v) for g, v in (m.get("guards") or {}).items()}
    if "cells" in m:
        one["cells"] = m["cells"][0] if m["cells"] and isinstance(m["cells"][0], list) else m["cells"]
    return one


def ci_run(name: str, **read_csv) -> CiRun:
    """The `ci` run of ``name`` under ``DPMF_CI_FIGURES`` (:func:`ci_dir` asserts it is there and ok), read back.
    ``read_csv`` goes to :func:`pandas.read_csv` (e.g. ``keep_default_na=False`` for text columns that may be empty)."""
    import pandas as pd

    out = ci_dir(name)
    table = out / f"{name}_timings.csv"  # the whole table when the run had wall-clock columns
    df = pd.read_csv(table if table.is_file() else out / f"{name}.csv", **read_csv)
    prov = json.loads((out / "provenance.json").read_text(encoding="utf-8"))
    merged = json.loads((out / "measurements.json").read_text(encoding="utf-8"))
    df.attrs["measurements"] = [_first_seed(m) for m in merged]
    df.attrs["sources"] = [s for s in prov.get("datasets", []) if s.get("dataset") is not None]
    return CiRun(name, out, df, prov["params"], prov, merged)
