"""The Hua result cache's code hash (hua_common._code_version) covers what the cached computation runs besides
``_compute`` itself (joblib checks that): ``load_data`` and every package module the hashed sources import that can
change a number (review of issue #16)."""

import ast
from pathlib import Path

from dpmf_lib.experiments import hua_common as hc

PKG = Path(hc.__file__).resolve().parent.parent
NO_NUMBERS = {PKG / "errors.py", PKG / "paths.py", PKG / "__init__.py"}  # messages, locations, the docstring


def test_the_code_hash_changes_with_load_data(monkeypatch):
    before = hc._code_version()

    def load_data(key):  # another loader: the cached runs would be computed on other data
        return None

    monkeypatch.setattr(hc, "load_data", load_data)
    assert hc._code_version() != before


def _imported_package_files(f: Path) -> set[Path]:
    """The dpmf_lib modules ``f`` imports (relative or absolute), as files."""
    out = set()
    for node in ast.walk(ast.parse(f.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.module is None and node.level == 0:
            continue
        if node.level:
            base = f.parent
            for _ in range(node.level - 1):
                base = base.parent
            if PKG not in (base, *base.parents):
                continue  # data_fetch's own relative imports are hashed as its directory
            parts = [p for p in (node.module or "").split(".") if p]
        elif (node.module or "").split(".")[0] == "dpmf_lib":
            base, parts = PKG, node.module.split(".")[1:]
        else:
            continue
        target = base.joinpath(*parts)
        for cand in (target.with_suffix(".py"), target / "__init__.py"):
            if cand.exists():
                out.add(cand.resolve())
        if not parts or target.is_dir():  # `from . import x` / `from ..pkg import mod`: the submodules named
            for alias in node.names:
                sub = target / f"{alias.name}.py"
                if sub.exists():
                    out.add(sub.resolve())
    return out


def test_every_package_module_the_hashed_code_imports_is_hashed():
    hashed = {f.resolve() for f in hc._code_files()}
    assert PKG / "privacy" / "common.py" in hashed and PKG / "objpert" / "mf.py" in hashed
    missing = set()
    for f in hashed:
        missing |= _imported_package_files(f) - hashed - NO_NUMBERS
    assert not missing, f"imported by the cached computation but not in its code hash: {sorted(map(str, missing))}"
