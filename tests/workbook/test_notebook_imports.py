"""Every local import in every notebook's code cells resolves (a moved module fails here, not in a kernel)."""

from __future__ import annotations

import ast
import importlib
import json

import pytest

from dpmf_lib.paths import notebooks_dir

NOTEBOOKS = sorted(notebooks_dir().glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_notebooks_local_imports_resolve(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse("".join(cell["source"]))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] in ("dpmf_lib", "data_fetch"):
                        importlib.import_module(a.name)
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("dpmf_lib", "data_fetch"):
                mod = importlib.import_module(node.module)
                for a in node.names:
                    assert hasattr(mod, a.name) or importlib.util.find_spec(f"{node.module}.{a.name}"), \
                        f"{path.name}: from {node.module} import {a.name}"
