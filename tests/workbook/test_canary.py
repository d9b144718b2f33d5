"""Canary revalidation (dpmf_lib.runner.canary), run for real in a copy of the repository through the snapshot CLI.

- a deliberate behaviour change on the paper path (LSH's project-and-sign encoder with its threshold moved off 0)
  changes the canary of every row that ran it: none of them revalidates;
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

MUTATED_ROWS = "balu_fig5_*,balu_table5_1"  # chapter 5: cheap canaries that run the LSH encoders at paper


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


def _lines(text: str, pattern: str = "", last: bool = False) -> dict[str, str]:
    """Per notebook name, the rest of its line: the first one (an action's line comes before the listing that
    follows it), or with ``last`` the listing's own line."""
    out = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if name and name.startswith(pattern) and not name.startswith("/"):
            if last:
                out[name] = rest.strip()
            else:
                out.setdefault(name, rest.strip())
    return out


def _current_with_canary(names):
    """The rows of ``names`` that have a canary, skipping the test unless each is current in this checkout: their
    snapshot state as the listing gives it (row_state, in this process, with the DPMF_* settings _snapshot gives the
    CLI), without listing every row."""
    from dpmf_lib import snapshot
    from dpmf_lib.registry import load_registry

    rows = [n for n in names if (REPO_ROOT / "results" / "paper" / n / "canary.json").exists()]
    entries = {e.name: e for e in load_registry()[1]}
    saved = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("DPMF_") and k != "DPMF_DATA_MIRROR"]}
    os.environ["DPMF_DATA_DIR"] = str(REPO_ROOT / "data")
    try:
        states = {n: snapshot.row_state(entries[n])[0] for n in rows}
    finally:
        os.environ.pop("DPMF_DATA_DIR")
        os.environ.update(saved)
    if not rows or any(state != "current" for state in states.values()):
        pytest.skip(f"{', '.join(names)}: not current here, or no canary recorded")
    return rows


def test_a_behaviour_change_on_the_paper_path_changes_every_canary_that_runs_it(tmp_path):
    rows = _current_with_canary(["balu_fig5_1", "balu_fig5_2", "balu_table5_1"])
    repo = _copy_repo(tmp_path / "repo")
    marker = tmp_path / "ran"
    enc = repo / "dpmf_lib" / "lsh" / "encoders.py"
    src = enc.read_text(encoding="utf-8")
    body = "    return np.where(X @ W >= 0, 1, -1).astype(np.int8)\n"
    assert body in src
    touch = (f"    open({str(marker)!r} + '-' + __import__('os').environ.get('DPMF_RUN_NOTEBOOK', '?'), 'a').close()\n")
    enc.write_text(src.replace(body, touch + body.replace(">= 0", ">= 0.05")), encoding="utf-8")
    text = _snapshot(repo, "--revalidate", "--only", MUTATED_ROWS)
    out, listed = _lines(text), _lines(text, last=True)  # the actions, then the listing the same call prints
    ran = {p.name.split("-", 1)[1] for p in tmp_path.glob("ran-*")}
    assert len(ran & set(rows)) >= 2, f"the mutated encoder ran in too few canaries: {sorted(ran)}"
    for name in sorted(ran & set(rows)):
        assert "the canary's table differs" in out[name], (name, out[name])
        assert listed[name].startswith("stale")


def test_a_refactor_revalidates_and_is_labelled_so(tmp_path):
    recorded = _current_with_canary(["hua_fig4"])
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


def test_a_change_of_paper_parameters_is_not_revalidated(tmp_path):
    recorded = _current_with_canary(["hua_fig4"])
    repo = _copy_repo(tmp_path / "repo")
    name = "hua_fig4" if "hua_fig4" in recorded else recorded[0]
    p = repo / "params" / f"{name}.yaml"
    text = p.read_text(encoding="utf-8")
    assert "  paper: {}\n" in text
    p.write_text(text.replace("  paper: {}\n", "  paper: {seed: 1}\n"), encoding="utf-8")
    out = _lines(_snapshot(repo, "--revalidate", "--only", name))
    assert "not a refactor" in out[name] and "params" in out[name], out
