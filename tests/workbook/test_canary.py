"""Canary revalidation (dpmf_lib.runner.canary), run for real in a copy of the repository through the snapshot CLI.

- a deliberate behaviour change on the paper path (the Hua MF round's step size, 1 % larger) changes the canary of
  every row that ran it: none of them revalidates;
- the unchanged code with a refactor-only edit revalidates, and the listing says "revalidated", never plain current;
- a change of paper parameters is refused as not a refactor, without running anything.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpmf_lib.paths import REPO_ROOT

pytestmark = pytest.mark.slow

ROWS = "hua_fig*"  # the Hua rows: cheap canaries (10-20 s each) that all run objpert.mf.mf_round at paper


def _copy_repo(dest: Path) -> Path:
    for d in ("dpmf_lib", "data_fetch", "notebooks", "params"):
        shutil.copytree(REPO_ROOT / d, dest / d, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    shutil.copytree(REPO_ROOT / "results", dest / "results")
    shutil.copy(REPO_ROOT / "pyproject.toml", dest / "pyproject.toml")
    return dest


def _snapshot(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPMF_")}
    env.update({"PYTHONPATH": str(repo), "DPMF_DATA_DIR": str(REPO_ROOT / "data"),
                "DPMF_FIGURES_DIR": str(repo / "figures"), "DPMF_CACHE_DIR": str(repo / "cache")})
    if "DPMF_DATA_MIRROR" in os.environ:
        env["DPMF_DATA_MIRROR"] = os.environ["DPMF_DATA_MIRROR"]
    out = subprocess.run([sys.executable, "-m", "dpmf_lib.snapshot", *args], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=1800)
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _lines(text: str, pattern: str = "hua_fig") -> dict[str, str]:
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name.startswith(pattern):
            out[name] = rest.strip()
    return out


@pytest.fixture(scope="module")
def recorded():
    rows = sorted(p.parent.name for p in (REPO_ROOT / "results" / "paper").glob("hua_fig*/canary.json"))
    if not rows:
        pytest.skip("no canary recorded for the Hua rows")
    listing = _lines(_snapshot(REPO_ROOT))
    if any(not s.startswith("current") for s in listing.values()):
        pytest.skip("the Hua rows are not current here")
    return rows


def test_a_behaviour_change_in_a_paper_path_kernel_changes_every_canary_that_runs_it(tmp_path, recorded):
    repo = _copy_repo(tmp_path / "repo")
    marker = tmp_path / "ran"
    mf = repo / "dpmf_lib" / "objpert" / "mf.py"
    src = mf.read_text(encoding="utf-8")
    call = "    fn = mf_round_nb if cfg.kernel == \"numba\" else mf_round_reference\n"
    assert call in src and "float(cfg.gamma), float(cfg.lam)" in src
    src = src.replace(call, f"    open({str(marker)!r} + '-' + __import__('os').environ.get('DPMF_RUN_NOTEBOOK', '?'), "
                            "'a').close()\n" + call)
    mf.write_text(src.replace("float(cfg.gamma), float(cfg.lam)", "float(cfg.gamma) * 1.01, float(cfg.lam)"),
                  encoding="utf-8")
    out = _lines(_snapshot(repo, "--revalidate", "--only", ROWS))
    ran = {p.name.split("-", 1)[1] for p in tmp_path.glob("ran-*")}
    assert set(recorded) <= ran, f"rows whose canary never ran the mutated round: {sorted(set(recorded) - ran)}"
    for name in recorded:
        assert "the canary's table differs" in out[name], (name, out[name])
    listing = _lines(_snapshot(repo))
    assert all(listing[n].startswith("stale") for n in recorded), listing


def test_a_refactor_revalidates_and_is_labelled_so(tmp_path, recorded):
    repo = _copy_repo(tmp_path / "repo")
    mf = repo / "dpmf_lib" / "objpert" / "mf.py"
    src = mf.read_text(encoding="utf-8")
    call = "    fn = mf_round_nb if cfg.kernel == \"numba\" else mf_round_reference\n"
    mf.write_text(src.replace(call, "    kernel_kind = cfg.kernel\n" + call.replace("cfg.kernel", "kernel_kind")),
                  encoding="utf-8")
    name = "hua_fig4" if "hua_fig4" in recorded else recorded[0]
    assert _lines(_snapshot(repo))[name].startswith("stale")
    out = _lines(_snapshot(repo, "--revalidate", "--only", name))
    assert out[name].startswith("revalidated"), out
    listed = _lines(_snapshot(repo))[name]
    assert listed.startswith("current (revalidated at "), listed
    rec = json.loads((repo / "results" / "paper" / name / "canary.json").read_text())
    assert rec["revalidated"]["hash"] != json.loads((repo / "results" / "paper" / name / "run.json").read_text())["hash"]
    # the report's paper verdicts read the revalidated row as current
    env_code = ("from dpmf_lib import snapshot; from dpmf_lib.dependencies import current_claims; "
                "v = snapshot.paper_verdicts(); "
                f"print(sorted({{v[c.id]['state'] for c in current_claims() if c.notebook == {name!r}}}))")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("DPMF_")}, "PYTHONPATH": str(repo),
           "DPMF_DATA_DIR": str(REPO_ROOT / "data")}
    got = subprocess.run([sys.executable, "-c", env_code], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=600)
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip() in ("['current']", "[]"), got.stdout


def test_a_change_of_paper_parameters_is_not_revalidated(tmp_path, recorded):
    repo = _copy_repo(tmp_path / "repo")
    name = "hua_fig4" if "hua_fig4" in recorded else recorded[0]
    p = repo / "params" / f"{name}.yaml"
    text = p.read_text(encoding="utf-8")
    assert "  paper: {}\n" in text
    p.write_text(text.replace("  paper: {}\n", "  paper: {seed: 1}\n"), encoding="utf-8")
    out = _lines(_snapshot(repo, "--revalidate", "--only", name))
    assert "not a refactor" in out[name] and "params" in out[name], out
