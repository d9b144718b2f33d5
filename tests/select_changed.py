"""Which test files to run for the changes since a base commit (``make test-quick``): prints their paths, one a line.

A test file is selected when a file in its static import closure changed: the test file itself, the test helpers it
imports (``tests.mf_toys``, another test module, ``tests.conftest``), and every module of ``dpmf_lib`` and
``data_fetch`` they import, transitively — the closure :func:`dpmf_lib.dependencies.module_closure` computes for a
notebook's run (imports inside functions included; importing ``a.b.c`` includes ``a/__init__`` and ``a/b/__init__``),
extended to ``tests`` and without its exception: a change of :mod:`dpmf_lib.verdicts` (not a run input) selects the
tests that import it, directly or through the report. tests/workbook/test_select_changed.py checks that the two
closures agree.

Changed = ``git diff --name-only $(git merge-base HEAD BASE)`` (committed and uncommitted changes of tracked files)
plus untracked files. A few files that are read rather than imported map by rule: ``params/<name>.yaml`` and
``notebooks/<name>.ipynb`` to the tests naming ``<name>`` (and the params / notebook tests), ``params/claims.yaml`` /
``registry.yaml`` / ``expected_verdicts.yaml`` to the tests that read them, the packaging files to
``tests/workbook/test_environment.py``, ``README.md``, ``mkdocs.yml`` and ``docs/`` to the docs tests, a
``conftest.py`` to the tests below it that use one of its fixtures or import
it. When nothing maps (a change to notes/, or none), the fast set :data:`FAST_SET` is printed instead.

What it cannot see: modules imported by name at run time (the runner and the notebooks import
``dpmf_lib.experiments.<name>`` from the registry), so a change to an experiment does not select the notebooks' smoke
runs. ``make test`` is the full check.

    python tests/select_changed.py [--base main] [--explain] [CHANGED_PATH ...]

Paths given on the command line replace the git query (for trying the selection out).
"""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = REPO / "tests"
PACKAGES = ("dpmf_lib", "data_fetch", "tests")  # dpmf_lib.dependencies.LOCAL_PACKAGES and the tests

#: Run when no changed file maps to a test: the checks of the workbook's own files (params, registry and claims,
#: environment pins, import closures, this selection) and the loaders and splits; 26 s on two loaded cores.
FAST_SET = (
    "tests/lib/test_plotting.py",
    "tests/lib/data/test_loaders.py",
    "tests/lib/data/test_splits.py",
    "tests/workbook/test_params.py",
    "tests/workbook/test_registry_claims.py",
    "tests/workbook/test_environment.py",
    "tests/workbook/test_dependencies.py",
    "tests/workbook/test_verdicts.py",
    "tests/workbook/test_select_changed.py",
)

#: Files read (not imported) by code, and the tests that read them.
READ_FILES = {
    "params/claims.yaml": ("tests/workbook/test_registry_claims.py", "tests/workbook/test_verdicts.py",
                           "tests/workbook/test_report.py"),
    "params/registry.yaml": ("tests/workbook/test_registry_claims.py", "tests/workbook/test_params.py"),
    "params/expected_verdicts.yaml": ("tests/workbook/test_report.py",),
    "pyproject.toml": ("tests/workbook/test_environment.py",),
    "requirements.lock": ("tests/workbook/test_environment.py",),
    "environment.yml": ("tests/workbook/test_environment.py",),
    "Makefile": ("tests/workbook/test_environment.py", "tests/workbook/test_notebook_hygiene.py"),
    "README.md": ("tests/workbook/test_docs.py",),
    "mkdocs.yml": ("tests/workbook/test_docs.py",),
    "results/paper/SCORECARD.md": ("tests/workbook/test_docs.py",),
    ".pre-commit-config.yaml": ("tests/workbook/test_notebook_hygiene.py",),
}


def module_path(module: str) -> Path | None:
    base = REPO.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def imported_names(source: str, filename: str, package: str) -> set[str]:
    """Every name an import statement of ``source`` may bind a module to: the rule of :mod:`dpmf_lib.dependencies`
    (the same function), anywhere in the file."""
    from dpmf_lib.dependencies import _imported_names

    return set(_imported_names(source, filename, package))


@lru_cache(maxsize=None)
def local_imports(path: Path) -> frozenset[str]:
    """Names of the local modules ``path`` imports (existing or not: a deleted module is still a name)."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = set()
    for name in imported_names(path.read_text(encoding="utf-8"), str(path), package):
        parts = name.split(".")
        if parts[0] not in PACKAGES:
            continue
        for k in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:k])
            if module_path(prefix) is not None or k == len(parts) and not _is_attribute(prefix):
                out.add(prefix)
    return frozenset(out)


def _is_attribute(name: str) -> bool:
    """``from pkg.mod import func`` also yields ``pkg.mod.func``: a name whose parent is a module file is an attribute."""
    parent = module_path(name.rpartition(".")[0])
    return parent is not None and parent.name != "__init__.py"


@lru_cache(maxsize=None)
def closure(path: Path) -> frozenset[str]:
    """Module names reachable from ``path`` by static imports, itself included. A conftest.py counts only where it is
    imported: pytest loads it for every test below it, but a change to it selects the tests that use its fixtures
    (:func:`select`), not all of them."""
    seen: set[str] = set()
    parts = module_name(path).split(".")
    todo = [".".join(parts[:k]) for k in range(1, len(parts) + 1)]  # its packages' __init__ run first
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        p = module_path(name)
        if p is not None:
            todo.extend(local_imports(p) - seen)
    return frozenset(seen)


def test_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "__pycache__" not in p.parts)


def changed_files(base: str) -> list[str]:
    def git(*args):
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.split("\n")

    mb = git("merge-base", "HEAD", base)[0].strip()
    tracked = git("diff", "--name-only", mb)
    untracked = git("ls-files", "--others", "--exclude-standard")
    return sorted({x.strip() for x in tracked + untracked if x.strip()})


def _fixture_names(conftest: Path) -> set[str]:
    tree = ast.parse(conftest.read_text(encoding="utf-8"))
    out = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and any("fixture" in ast.unparse(d) for d in node.decorator_list):
            out.add(node.name)
    return out


def _uses_fixture(test: Path, names: set[str]) -> bool:
    tree = ast.parse(test.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any(a.arg in names for a in node.args.args):
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
            return True  # usefixtures("name") / getfixturevalue("name")
    return False


def select(changed: list[str], explain: dict | None = None) -> list[str]:
    """The test files (paths relative to the repository) that the ``changed`` paths select; [] when none does."""
    tests = test_files()
    chosen: dict[str, str] = {}

    def pick(test: Path | str, why: str):
        rel = test if isinstance(test, str) else test.relative_to(REPO).as_posix()
        if (REPO / rel).is_file():
            chosen.setdefault(rel, why)

    changed_modules = {}
    for c in changed:
        p = REPO / c
        if c.endswith(".py") and c.split("/")[0] in PACKAGES:
            changed_modules[module_name(p)] = c
    for t in tests:
        rel = t.relative_to(REPO).as_posix()
        if rel in changed:
            pick(t, "changed itself")
            continue
        names = closure(t)
        hit = next((changed_modules[m] for m in sorted(names) if m in changed_modules), None)
        if hit is not None:
            pick(t, f"imports {hit}")

    for c in changed:
        p = REPO / c
        if p.name == "conftest.py" and p.is_file() and p.is_relative_to(TESTS):
            fixtures = _fixture_names(p)
            for t in tests:
                if t.is_relative_to(p.parent) and _uses_fixture(t, fixtures):
                    pick(t, f"uses a fixture of {c}")
        for t in READ_FILES.get(c, ()):
            pick(t, f"reads {c}")
        if re.fullmatch(r"docs/.+\.md", c):  # the site's build and links; the environment table of running.md
            pick("tests/workbook/test_docs.py", f"builds {c}")
            pick("tests/workbook/test_notebooks.py", f"reads {c}")
        if re.fullmatch(r"notebooks/[a-z0-9_]+\.ipynb", c):
            pick("tests/workbook/test_notebook_hygiene.py", f"checks {c} (kernelspec, round trips)")
        m = re.fullmatch(r"(params|notebooks)/([a-z0-9_]+)\.(yaml|ipynb)", c)
        if m and c not in READ_FILES:
            stem, kind = m.group(2), m.group(1)
            pick("tests/workbook/test_params.py" if kind == "params" else "tests/workbook/test_notebooks.py",
                 f"checks {c}")
            pattern = re.compile(rf"['\"]{re.escape(stem)}['\"]")
            for t in tests:
                if pattern.search(t.read_text(encoding="utf-8")):
                    pick(t, f"names {stem} ({c})")
    if explain is not None:
        explain.update(chosen)
    return sorted(chosen)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main", help="compare with the merge base of HEAD and this ref (default main)")
    ap.add_argument("--explain", action="store_true", help="say on stderr why each file was selected")
    ap.add_argument("paths", nargs="*", help="changed paths (instead of asking git)")
    args = ap.parse_args(argv)
    if args.paths:
        changed = args.paths
    else:
        try:
            changed = changed_files(args.base)
        except (subprocess.CalledProcessError, FileNotFoundError) as exc:
            print(f"select_changed: no merge base with {args.base!r} ({exc}); running the fast set", file=sys.stderr)
            changed = []
    why: dict = {}
    files = select(changed, why)
    if not files:
        print(f"select_changed: {len(changed)} changed file(s), none maps to a test: the fast set", file=sys.stderr)
        files = list(FAST_SET)
        why = {f: "fast set" for f in files}
    else:
        print(f"select_changed: {len(changed)} changed file(s) select {len(files)} test file(s)", file=sys.stderr)
    if args.explain:
        for f in files:
            print(f"  {f}: {why[f]}", file=sys.stderr)
    print("\n".join(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
