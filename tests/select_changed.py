"""Which test files to run for the changes since a base commit (``make test-quick``): prints their paths, one a line.

The candidates: a test file is a candidate when a file in its static import closure changed: the test file itself,
the test helpers it imports (``tests.mf_toys``, another test module, ``tests.conftest``), and every module of
``dpmf_lib`` and ``data_fetch`` they import, transitively — the closure :func:`dpmf_lib.dependencies.module_closure`
computes for a notebook's run (imports inside functions included; importing ``a.b.c`` includes ``a/__init__`` and
``a/b/__init__``), extended to ``tests`` and without its exception: a change of :mod:`dpmf_lib.verdicts` (not a run
input) selects the tests that import it. tests/workbook/test_select_changed.py checks that the two closures agree.

The selection, within a time budget: a central module (``mf/csgd.py``, ``validate.py``) is in the closure of most of
the suite, which is `make test`'s job, not a quick check's. Each candidate has a distance to the change — 0 for the
changed test file or a test a read file maps to, 1 for a test that imports the changed module (or its package, when
the package's ``__init__`` imports it), 2 for a test of a module the changed one feeds directly; test helpers
(``tests.*``) count as part of the test — and the candidates up to :data:`MAX_DISTANCE` (or the nearest ones, when
none is that close) are taken most specific first: by distance, then the test named after the module or in its
mirrored folder (``tests/lib/mf/`` for ``dpmf_lib/mf/``), then the shorter. Each is counted at its recorded duration
(:data:`DURATIONS`: the CPU seconds of each file's tests not marked slow, measured alone; :data:`UNRECORDED_SECONDS`
when it has no record) and taken while the sum stays within :data:`BUDGET_SECONDS`; with several changed files, each one's next
candidate is taken in turn. The :data:`SENTINELS` always run (a few seconds); when nothing maps (a change to notes/,
or none), the fast set :data:`FAST_SET` runs instead. ``--explain`` says what was taken and why, and what was left
out for the budget.

Changed = ``git diff --name-only $(git merge-base HEAD BASE)`` (committed and uncommitted changes of tracked files)
plus untracked files. A few files that are read rather than imported map by rule (distance 0): ``params/<name>.yaml``
and ``notebooks/<name>.ipynb`` to the tests naming ``<name>`` (and the params / notebook tests), ``params/claims.yaml``
/ ``registry.yaml`` / ``expected_verdicts.yaml`` to the tests that read them, the packaging files to
``tests/workbook/test_environment.py``, ``README.md``, ``mkdocs.yml`` and ``docs/`` to the docs tests, a
``conftest.py`` to the tests below it that use one of its fixtures or import it.

What it cannot see: modules imported by name at run time (the runner and the notebooks import
``dpmf_lib.experiments.<name>`` from the registry), tests farther from the change than the budget reaches, and the
tests marked ``slow`` (the notebook executions among them). ``make test`` is the full check.

    python tests/select_changed.py [--base main] [--explain] [--budget SECONDS] [CHANGED_PATH ...]
    python tests/select_changed.py --record [TEST_FILE ...]   # measure test files alone, update DURATIONS

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

#: Always run, whatever changed: the selection's own test and the cheap checks of the workbook's files (seconds).
SENTINELS = (
    "tests/workbook/test_select_changed.py",
    "tests/workbook/test_registry_claims.py",
)

#: Per test file, its measured durations run alone (``--record`` writes them, :func:`record` says how): seconds (CPU
#: seconds of its tests not marked slow, the numba compilations they trigger included: this selection's cost), slow
#: (of its slow tests), in_ci (of the tests `.ci/run`'s `make test` runs: tests/conftest.py hands files out longest
#: first by it), collect, wall, tests.
DURATIONS = TESTS / "durations.json"
#: The summed recorded seconds a selection may take (sentinels included). Two workers run it in about half that, plus
#: the start and the collection (≈ 30-60 s): ≤ 3 min on two idle cores with margin for a slower machine.
BUDGET_SECONDS = 120.0
#: A test file with no record (a new one) counts as this.
UNRECORDED_SECONDS = 20.0
#: Candidates up to this distance from a change are taken (budget permitting): the tests of the changed module and of
#: the modules it feeds directly. Farther ones only when none is this close.
MAX_DISTANCE = 2

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
    out = set()
    for name in imported_names(path.read_text(encoding="utf-8"), str(path), package_of(path)):
        parts = name.split(".")
        if parts[0] not in PACKAGES:
            continue
        for k in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            prefix = ".".join(parts[:k])
            if module_path(prefix) is not None or k == len(parts) and not _is_attribute(prefix):
                out.add(prefix)
    return frozenset(out)


def _from_imports(path: Path):
    """``(module, name)`` for each ``from module import name`` of ``path``, relative imports resolved."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package_of(path).split(".")
                anchor = ".".join(parts[:len(parts) - node.level + 1])
                base = f"{anchor}.{node.module}" if node.module else anchor
            else:
                base = node.module or ""
            for a in node.names:
                yield base, a.name, a.asname or a.name


@lru_cache(maxsize=None)
def reexports(package: str) -> dict[str, str]:
    """Names a package's ``__init__`` imports from its own submodules, and the submodule of each
    (``dpmf_lib.mf``: ``train_sgd`` -> ``dpmf_lib.mf.csgd``)."""
    p = module_path(package)
    if p is None or p.name != "__init__.py":
        return {}
    return {bound: base for base, _, bound in _from_imports(p) if base.startswith(package + ".")}


@lru_cache(maxsize=None)
def direct_imports(path: Path) -> frozenset[str]:
    """:func:`local_imports` plus, for ``from pkg import name`` of a name ``pkg/__init__`` re-exports, the submodule
    that defines it: ``from dpmf_lib.mf import train_sgd`` uses ``dpmf_lib.mf.csgd`` directly."""
    out = set(local_imports(path))
    for base, name, _ in _from_imports(path):
        if base.split(".")[0] in PACKAGES and name in reexports(base):
            out.add(reexports(base)[name])
    return frozenset(out)


def package_of(path: Path) -> str:
    module = module_name(path)
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


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


def candidates(changed: list[str]) -> dict[str, dict[str, tuple[int, str]]]:
    """The test files (paths relative to the repository) a change of ``changed`` may break, by changed path: for each,
    ``{test: (distance, why)}``; only the changed paths that map to a test are keys."""
    tests = test_files()
    chosen: dict[str, dict[str, tuple[int, str]]] = {}

    def pick(test: Path | str, why: str, source: str, distance: int = 0):
        rel = test if isinstance(test, str) else test.relative_to(REPO).as_posix()
        if (REPO / rel).is_file():
            mine = chosen.setdefault(source, {})
            if rel not in mine or mine[rel][0] > distance:
                mine[rel] = (distance, why)

    changed_modules = {}
    for c in changed:
        p = REPO / c
        if c.endswith(".py") and c.split("/")[0] in PACKAGES:
            changed_modules[module_name(p)] = c
    for t in tests:
        rel = t.relative_to(REPO).as_posix()
        if rel in changed:
            pick(t, "changed itself", rel)
            continue
        far = distances(t)
        for m in sorted(set(far) & set(changed_modules)):
            d = far[m]
            pick(t, f"imports {changed_modules[m]}" + (f" at distance {d}" if d > 1 else ""), changed_modules[m], d)

    for c in changed:
        p = REPO / c
        if p.name == "conftest.py" and p.is_file() and p.is_relative_to(TESTS):
            fixtures = _fixture_names(p)
            for t in tests:
                if t.is_relative_to(p.parent) and _uses_fixture(t, fixtures):
                    pick(t, f"uses a fixture of {c}", c)
        for t in READ_FILES.get(c, ()):
            pick(t, f"reads {c}", c)
        if re.fullmatch(r"docs/.+\.md", c):  # the site's build and links; the environment table of running.md
            pick("tests/workbook/test_docs.py", f"builds {c}", c)
            pick("tests/workbook/test_notebooks.py", f"reads {c}", c)
        if re.fullmatch(r"notebooks/[a-z0-9_]+\.ipynb", c):
            pick("tests/workbook/test_notebook_hygiene.py", f"checks {c} (kernelspec, round trips)", c)
        m = re.fullmatch(r"(params|notebooks)/([a-z0-9_]+)\.(yaml|ipynb)", c)
        if m and c not in READ_FILES:
            stem, kind = m.group(2), m.group(1)
            pick("tests/workbook/test_params.py" if kind == "params" else "tests/workbook/test_notebooks.py",
                 f"checks {c}", c)
            pattern = re.compile(rf"['\"]{re.escape(stem)}['\"]")
            for t in tests:
                if pattern.search(t.read_text(encoding="utf-8")):
                    pick(t, f"names {stem} ({c})", c)
    return chosen



@lru_cache(maxsize=None)
def distances(path: Path) -> dict[str, int]:
    """Each module of :func:`closure` of ``path`` with its import distance from ``path``: each import of
    :func:`direct_imports` costs 1, except one of a test helper (``tests.*``, part of the test)."""
    import heapq

    best: dict[str, int] = {}
    heap = [(0, module_name(path))]
    while heap:
        d, name = heapq.heappop(heap)
        if name in best:
            continue
        best[name] = d
        p = module_path(name)
        if p is not None:
            for other in direct_imports(p) - best.keys():
                heapq.heappush(heap, (d + (other.split(".")[0] != "tests"), other))
    return best


@lru_cache(maxsize=None)
def recorded() -> dict[str, dict]:
    import json

    return json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.is_file() else {}


def cost(test: str) -> float:
    """The recorded seconds of a test file (:data:`DURATIONS`), :data:`UNRECORDED_SECONDS` without a record."""
    rec = recorded().get(test)
    return float(rec["seconds"]) if rec else UNRECORDED_SECONDS


def specificity(test: str, changed: str) -> int:
    """0 for the test named after the changed module (``test_csgd*.py`` for ``csgd.py``), 1 for a test in its mirrored
    folder (``tests/lib/mf/`` for ``dpmf_lib/mf/``, ``tests/experiments/liu/`` for ``dpmf_lib/experiments/liu/``),
    2 otherwise."""
    path = Path(changed)
    if Path(test).name.startswith(f"test_{path.stem}"):
        return 0
    sub = path.parts[1:-1]
    folder = Path("tests", *sub) if sub[:1] == ("experiments",) else Path("tests", "lib", *sub)
    return 1 if Path(test).parent == folder else 2


def select(changed: list[str], explain: dict | None = None, budget: float = BUDGET_SECONDS) -> list[str]:
    """The test files to run for the ``changed`` paths, sentinels included; [] when no changed path maps to a test.
    ``explain`` (if given) gets each taken file's reason, and under the key ``None`` the ones left out."""
    found = candidates(changed)
    if not found:
        return []
    queues = []
    for source, tests in sorted(found.items()):
        near = {t: dw for t, dw in tests.items() if dw[0] <= MAX_DISTANCE}
        if not near:  # nothing that close: the nearest ones
            d0 = min(d for d, _ in tests.values())
            near = {t: dw for t, dw in tests.items() if dw[0] == d0}
        queues.append(sorted(near.items(), key=lambda kv: (kv[1][0], specificity(kv[0], source), cost(kv[0]), kv[0])))
    taken = {s: "sentinel" for s in SENTINELS}
    left: dict[str, str] = {}
    total = sum(cost(s) for s in SENTINELS)
    while any(queues):
        for q in queues:
            while q:
                t, (d, why) = q.pop(0)
                if t in taken:
                    continue
                if why == "changed itself" or total + cost(t) <= budget:  # an edited test file always runs
                    taken[t] = why
                    total += cost(t)
                    left.pop(t, None)
                    break
                left.setdefault(t, why)
    if explain is not None:
        explain.update(taken)
        explain[None] = left
    return sorted(taken)


def _cpu_of(args: list[str], env: dict | None = None) -> tuple[float, float]:
    """CPU seconds (user + system, its children included) and wall seconds of running ``args`` in the repository."""
    import resource
    import time

    def cpu():
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    c0, w0 = cpu(), time.monotonic()
    subprocess.run(args, cwd=REPO, capture_output=True, check=False, env=env)
    return cpu() - c0, time.monotonic() - w0


def record(files: list[str]) -> None:
    """Run each test file alone (all its tests, one process, as a plain `make test` runs them) and write its record
    into :data:`DURATIONS`, keeping the other files' records. Per test, ``tests/durations_plugin.py`` counts its CPU
    seconds (user + system, the processes it starts included): on an idle core about its wall time, and far less
    inflated than the wall time by other work on the machine (the record was taken beside other jobs). Per file:
    ``seconds``, the tests not marked slow (this selection's budget); ``slow``, the slow ones (a plain `make test`
    runs both); ``in_ci``, those `.ci/run`'s `make test` runs (not ``ci_replaced``, not ``ci_figures``: the
    conftest hands files out longest first by it); ``tests``, the number not marked slow; ``wall``, the run's wall
    time; ``collect``, the CPU seconds of starting pytest and importing the file."""
    import json
    import os
    import tempfile

    data = dict(recorded())
    pytest = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0"]
    env = {k: v for k, v in os.environ.items() if k != "DPMF_CI_FIGURES"}
    for f in files:
        collect, _ = _cpu_of([*pytest, "--collect-only", f], env)
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "tests.jsonl"
            _, wall = _cpu_of([*pytest, "-p", "tests.durations_plugin", f],
                              {**env, "DPMF_DURATIONS_OUT": str(out)})
            tests = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if out.is_file() else []

        def total(keep):
            return round(max(float(sum(t["cpu"] for t in tests if keep(t))), 0.0), 1)

        data[f] = {"seconds": total(lambda t: not t["slow"]), "slow": total(lambda t: t["slow"]),
                   "in_ci": total(lambda t: t["in_ci"]), "collect": round(collect, 1), "wall": round(wall, 1),
                   "tests": sum(not t["slow"] for t in tests)}
        print(f"{f}: {data[f]}", file=sys.stderr)
        DURATIONS.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    recorded.cache_clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="main", help="compare with the merge base of HEAD and this ref (default main)")
    ap.add_argument("--explain", action="store_true", help="say on stderr why each file was selected")
    ap.add_argument("--budget", type=float, default=BUDGET_SECONDS,
                    help=f"summed recorded seconds of the selection (default {BUDGET_SECONDS:g})")
    ap.add_argument("--record", action="store_true",
                    help="measure the given test files (all when none) and update tests/durations.json")
    ap.add_argument("paths", nargs="*", help="changed paths (instead of asking git)")
    args = ap.parse_args(argv)
    if args.record:
        record(args.paths or [t.relative_to(REPO).as_posix() for t in test_files()])
        return 0
    if args.paths:
        changed = args.paths
    else:
        try:
            changed = changed_files(args.base)
        except (subprocess.CalledProcessError, FileNotFoundError) as exc:
            print(f"select_changed: no merge base with {args.base!r} ({exc}); running the fast set", file=sys.stderr)
            changed = []
    why: dict = {}
    files = select(changed, why, args.budget)
    left = why.pop(None, {})
    if not files:
        print(f"select_changed: {len(changed)} changed file(s), none maps to a test: the fast set", file=sys.stderr)
        files = list(FAST_SET)
        why = {f: "fast set" for f in files}
    else:
        print(f"select_changed: {len(changed)} changed file(s) select {len(files)} test file(s), "
              f"{sum(cost(f) for f in files):.0f} s recorded (budget {args.budget:g} s); {len(left)} more "
              f"({sum(cost(f) for f in left):.0f} s) left out for the budget", file=sys.stderr)
    if args.explain:
        for f in files:
            print(f"  {f}: {why[f]} ({cost(f):.0f} s)", file=sys.stderr)
        for f in sorted(left):
            print(f"  left out: {f}: {left[f]} ({cost(f):.0f} s)", file=sys.stderr)
    print("\n".join(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
