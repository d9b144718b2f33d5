"""Every registered notebook is committed clean and executes at the `smoke` profile."""

import json

import nbformat
import pytest

from dpmf_lib.paths import notebooks_dir
from dpmf_lib.registry import load_registry, select
from dpmf_lib.reproduce import execute

NOTEBOOKS = sorted(notebooks_dir().glob("*.ipynb"))
IMPLEMENTED = [e.name for e in select(load_registry()[1], None)]


def dirty_cells(nb: dict) -> list[int]:
    """Indices of code cells that carry outputs or an execution count (notebooks are committed without them)."""
    return [i for i, c in enumerate(nb.get("cells", []))
            if c.get("cell_type") == "code" and (c.get("outputs") or c.get("execution_count"))]


def test_dirty_cell_check_catches_a_notebook_with_outputs():
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")])
    assert dirty_cells(json.loads(nbformat.writes(nb))) == []
    nb.cells[0].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=1)]
    nb.cells[0].execution_count = 1
    assert dirty_cells(json.loads(nbformat.writes(nb))) == [0]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_committed_without_outputs_and_with_parameters_cell(path):
    nb = json.loads(path.read_text())
    assert dirty_cells(nb) == [], f"{path.name}: strip outputs before committing (jupyter nbconvert --clear-output)"
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: needs exactly one cell tagged `parameters`"
    src = "".join(tagged[0]["source"])
    assert "profile =" in src and "overrides =" in src


@pytest.mark.slow
@pytest.mark.parametrize("name", IMPLEMENTED)
def test_notebook_executes_at_smoke_profile(name, figures_tmp):
    record = execute(name, "smoke", digest="test")
    assert record["status"] == "ok", f"{name} failed: {record['error']}"
    out = figures_tmp / name
    for suffix in (".png", ".svg", ".csv"):
        assert (out / f"{name}{suffix}").exists(), f"{name}: missing {name}{suffix}"
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["profile"] == "smoke" and prov["notebook"] == name
    for key in ("git", "params", "datasets", "seeds", "packages", "wall_time_s"):
        assert key in prov
    import pandas as pd

    csv = pd.read_csv(out / f"{name}.csv")
    if prov["uses_standin"]:
        assert csv["dataset"].astype(str).str.contains("synthetic stand-in").any()
