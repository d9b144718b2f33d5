"""Staleness follows behaviour: prose edits stale nothing, a code edit stales exactly the rows whose closure holds it.

The end-to-end cases run ``python -m dpmf_lib.snapshot`` in a copy of the repository (its code, notebooks, params and
committed snapshot), so they check the real CLI against the committed rows.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dpmf_lib.dependencies import code_digest, file_digest, modules_closure, notebook_code, source_digest
from dpmf_lib.paths import REPO_ROOT

LIBRARY = sorted(p for d in ("dpmf_lib", "data_fetch") for p in (REPO_ROOT / d).rglob("*.py"))


def _reworded(source: str) -> str:
    """``source`` with every docstring's text changed and a comment after every line that can take one."""
    tree = ast.parse(source)
    lines = [x.encode() for x in source.splitlines(keepends=True)]  # AST offsets count UTF-8 bytes
    edits = []  # (line index, col, end line, end col) of each docstring constant
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                c = first.value
                edits.append((c.lineno - 1, c.col_offset, c.end_lineno - 1, c.end_col_offset))
    for l0, c0, l1, c1 in sorted(edits, reverse=True):
        new = '"""Reworded: what and why, in other words."""'.encode()
        head, tail = lines[l0][:c0], lines[l1][c1:]
        lines[l0:l1 + 1] = [head + new + tail]
    out = b"".join(lines).decode()
    return "# a comment added at the top\n" + out + "\n# and one at the end\n"


@pytest.mark.parametrize("path", LIBRARY, ids=lambda p: p.relative_to(REPO_ROOT).as_posix())
def test_rewording_docstrings_and_comments_keeps_every_file_digest(path):
    src = path.read_text(encoding="utf-8")
    assert source_digest(_reworded(src)) == source_digest(src)


def test_a_code_edit_changes_the_digest():
    src = "def f(x):\n    '''doc'''\n    return x + 1\n"
    assert source_digest(src) != source_digest(src.replace("x + 1", "x + 2"))
    assert source_digest(src) != source_digest(src.replace("'''doc'''\n    ", "'''doc'''\n    x = 0\n    "))
    # a string that is not a docstring is code
    assert source_digest("A = 'a'\n") != source_digest("A = 'b'\n")
    # a docstring that is the whole body still leaves a function that returns None: same digest as an empty body
    assert source_digest("def f():\n    'doc'\n") == source_digest("def f():\n    'other doc'\n")


def test_notebook_comments_and_markdown_are_not_code(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["# Title\n", "prose"]},
                    {"cell_type": "code", "source": ["x = 1  # why\n", "# a note\n", "y = x\n"], "metadata": {}},
                    {"cell_type": "code", "source": ["%matplotlib inline  # magic\n"], "metadata": {"tags": ["t"]}}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    f = tmp_path / "a.ipynb"

    def digest(doc):
        f.write_text(json.dumps(doc))
        return json.dumps(notebook_code(f))

    base = digest(nb)
    nb["cells"][0]["source"] = ["# Other title"]
    nb["cells"][1]["source"] = ["x = 1\n", "\n", "y = x  # reworded\n"]
    nb["cells"][2]["source"] = ["%matplotlib inline\n"]
    assert digest(nb) == base
    nb["cells"][1]["source"] = ["x = 2\n", "y = x\n"]
    assert digest(nb) != base


def _copy_repo(dest: Path) -> Path:
    for d in ("dpmf_lib", "data_fetch", "notebooks", "params"):
        shutil.copytree(REPO_ROOT / d, dest / d, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    shutil.copytree(REPO_ROOT / "results", dest / "results")
    for f in ("pyproject.toml",):
        shutil.copy(REPO_ROOT / f, dest / f)
    return dest


def _listing(repo: Path, env_extra: dict | None = None) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("DPMF_")}
    env.update({"PYTHONPATH": str(repo), "DPMF_DATA_DIR": str(REPO_ROOT / "data"),
                "DPMF_FIGURES_DIR": str(repo / "figures")})
    for k in ("DPMF_DATA_MIRROR",):
        if k in os.environ:
            env[k] = os.environ[k]
    env.update(env_extra or {})
    out = subprocess.run([sys.executable, "-m", "dpmf_lib.snapshot"], cwd=repo, env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return {line.split()[0]: line.split()[1] for line in out.stdout.splitlines() if line.strip()}


@pytest.fixture(scope="module")
def committed_states():
    """The states the listing gives this checkout's rows (snapshot.rows, in this process, with the DPMF_* settings
    _listing gives the CLI): what each copy's listing is compared with."""
    import os

    from dpmf_lib import snapshot

    saved = {k: os.environ.pop(k) for k in [k for k in os.environ if k.startswith("DPMF_") and k != "DPMF_DATA_MIRROR"]}
    os.environ.update({"DPMF_DATA_DIR": str(REPO_ROOT / "data"), "DPMF_FIGURES_DIR": str(REPO_ROOT / "figures")})
    try:
        states = {r["name"]: r["state"] for r in snapshot.rows()}
    finally:
        for k in ("DPMF_DATA_DIR", "DPMF_FIGURES_DIR"):
            os.environ.pop(k)
        os.environ.update(saved)
    if any(s != "current" for s in states.values()):
        pytest.skip("the committed snapshot has rows that are not current here (real data present or rows stale)")
    return states


def test_prose_edits_in_every_library_file_leave_every_row_current(tmp_path, committed_states):
    repo = _copy_repo(tmp_path / "repo")
    for p in LIBRARY:
        q = repo / p.relative_to(REPO_ROOT)
        q.write_text(_reworded(q.read_text(encoding="utf-8")), encoding="utf-8")
    for nb in (repo / "notebooks").glob("*.ipynb"):  # markdown and comments of every notebook
        doc = json.loads(nb.read_text(encoding="utf-8"))
        for c in doc["cells"]:
            src = "".join(c["source"])
            c["source"] = (src + "\n# a comment") if c["cell_type"] == "code" else ("Reworded. " + src)
        nb.write_text(json.dumps(doc), encoding="utf-8")
    for pf in (repo / "params").glob("*.yaml"):  # comments of params files
        pf.write_text("# a comment\n" + pf.read_text(encoding="utf-8"), encoding="utf-8")
    states = _listing(repo)
    assert states == committed_states


def _rows_importing(module_file: str) -> set[str]:
    from dpmf_lib.registry import load_registry
    from dpmf_lib.runner.hashing import run_modules

    return {e.name for e in load_registry()[1] if e.implemented
            and REPO_ROOT / module_file in modules_closure(run_modules(e))}


@pytest.mark.parametrize("module_file", ["dpmf_lib/lsh/search.py", "dpmf_lib/errors.py", "dpmf_lib/nbm/kernels.py"])
def test_a_code_edit_stales_exactly_the_rows_whose_closure_holds_it(tmp_path, committed_states, module_file):
    expected = _rows_importing(module_file)
    assert expected, f"no row imports {module_file}: pick another file"
    repo = _copy_repo(tmp_path / "repo")
    f = repo / module_file
    f.write_text(f.read_text(encoding="utf-8") + "\n_BEHAVIOUR_CHANGED = 1\n", encoding="utf-8")
    states = _listing(repo)
    assert {n for n, s in states.items() if s == "stale"} == expected
    assert {n for n, s in states.items() if s == "current"} == set(committed_states) - expected


def test_code_digest_covers_the_closure():
    a = code_digest("dpmf_lib.errors")
    assert a == code_digest("dpmf_lib.errors") and a != code_digest("dpmf_lib.paths")
    assert file_digest(REPO_ROOT / "params" / "hua_fig2.yaml")  # any other file: its bytes
