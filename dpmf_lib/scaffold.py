"""Write a thin notebook in the workbook's standard shape (no outputs, a ``parameters`` cell, run → plot → save).

    python -m dpmf_lib.scaffold NAME --intro intro.md [--module dpmf_lib.experiments.NAME] [--force]

The notebook it writes: the intro markdown (what the paper shows, the choices made, which data are stand-ins), a code
cell tagged ``parameters`` (``profile``, ``overrides``), then the cells that load the parameters, call
``<module>.run``, show the table, plot in the shared style, measure the claims over seeds and save (into
``figures/<NAME>/`` when the runner runs it, else ``figures/_runs/``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from .paths import notebooks_dir

PARAMETERS_CELL = '''# Parameters (papermill injects new values after this cell).
# profile: which block of params/{name}.yaml to use: "smoke" (seconds), "ci" (minutes), "paper" (the paper's settings).
# overrides: any parameter of that file, e.g. {{"seed": 1}}; an unknown name is an error.
profile = "ci"
overrides = {{}}'''

SETUP_CELL = '''from dpmf_lib.outputs import NotebookRun
import {module} as experiment

nb = NotebookRun("{name}", profile, overrides)
nb.params'''


CLAIMS_CELL = """# The claims this notebook measures, over seeds: it re-runs the experiment at seed+1 … seed+n−1 (n = 3 at ci,
# 5 at paper; 1 when every claim here is deterministic or needs a larger profile) and keeps only their claim
# values. The figure and CSV above stay those of `seed`. Rules of the verdicts: dpmf_lib/claims.py.
nb.replicate(experiment.run, df)"""


def build(name: str, intro: str, module: str | None = None) -> nbformat.NotebookNode:
    module = module or f"dpmf_lib.experiments.{name}"
    params_cell = new_code_cell(PARAMETERS_CELL.format(name=name))
    params_cell.metadata["tags"] = ["parameters"]
    cells = [
        new_markdown_cell(intro.strip()),
        params_cell,
        new_code_cell(SETUP_CELL.format(module=module, name=name)),
        new_code_cell("df = experiment.run(nb.params)\ndf.head(20)"),
        new_code_cell("fig = experiment.plot(df, nb.params)"),
        new_code_cell(CLAIMS_CELL),
        new_code_cell("nb.save(df, fig)"),
    ]
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    for c in nb.cells:  # stable ids keep diffs quiet when a notebook is regenerated
        c["id"] = f"{name}-{nb.cells.index(c)}"
    return nb


def write_notebook(name: str, intro: str, module: str | None = None, *, force: bool = False) -> Path:
    path = notebooks_dir() / f"{name}.ipynb"
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists; pass force=True (--force) to overwrite")
    nbformat.write(build(name, intro, module), path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.scaffold", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name")
    ap.add_argument("--intro", type=Path, required=True, help="markdown file with the notebook's introduction")
    ap.add_argument("--module", default=None)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args(argv)
    print(write_notebook(a.name, a.intro.read_text(), a.module, force=a.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
