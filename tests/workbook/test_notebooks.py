"""Every registered notebook is committed clean and executes at the `smoke` profile."""

import json
from pathlib import Path

import nbformat
import pytest

from tests.ci_phases import ci_dir, needs_ci_figures, replaced_in_ci_by
from dpmf_lib.claims import load_claims
from dpmf_lib.dependencies import notebook_code
from dpmf_lib.paths import notebooks_dir
from dpmf_lib.registry import load_registry, select
from dpmf_lib.runner.execution import execute

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
    assert "profile" in src and "overrides =" in src


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_declares_every_parameter_of_the_params_file(path):
    """`papermill --help-notebook` lists the real parameters: profile, one `name = None` per top-level parameter of
    params/<name>.yaml, and overrides. After adding or removing a parameter: python -m dpmf_lib.scaffold --regenerate NAME."""
    import papermill as pm

    from dpmf_lib.notebook_params import parameter_names

    declared = pm.inspect_notebook(str(path))
    assert list(declared) == ["profile", *parameter_names(path.stem), "overrides"], \
        f"{path.name}: regenerate it (python -m dpmf_lib.scaffold --regenerate {path.stem})"
    assert all(declared[k]["default"] == "None" for k in parameter_names(path.stem))


# Parameter cells whose comments (the per-profile values papermill --help-notebook shows) lag their params file
# (found by the test below); a notebook leaves this set when regenerated.
PARAMETER_COMMENTS_LAG: set[str] = set()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_cell_comments_show_each_profiles_values(path):
    """The parameters cell is the one the scaffold writes from params/<name>.yaml now (each parameter's value per
    profile: a stale comment tells a reader the wrong dataset). Fix: python -m dpmf_lib.scaffold --regenerate NAME."""
    from dpmf_lib.scaffold import parameters_cell

    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    current = cell.source.strip() == parameters_cell(path.stem).strip()
    if path.stem in PARAMETER_COMMENTS_LAG:
        assert not current, f"{path.stem} is current now: remove it from PARAMETER_COMMENTS_LAG"
    else:
        assert current, f"{path.name}: regenerate it (python -m dpmf_lib.scaffold --regenerate {path.stem})"


def test_parameters_cell_shows_the_value_every_profile_shares_not_an_overridden_default():
    from dpmf_lib.scaffold import parameters_cell

    cell = parameters_cell("balu_fig4_1")  # dataset: ml-1m by default, ml-100k in smoke, ci and paper
    line = next(x for x in cell.splitlines() if x.startswith("dataset"))
    assert "ml-100k in smoke, ci, paper (default ml-1m)" in line and "ml-1m in every profile" not in line


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_merges_named_parameters_and_ends_with_its_result(path):
    nb = nbformat.read(path, as_version=4)
    setup = next(c.source for c in nb.cells if "NotebookRun(" in c.source)
    assert "namespace=globals()" in setup, f"{path.name}: NotebookRun must see the parameters cell's names"
    cells = nb.cells
    if cells[-1].cell_type == "markdown" and cells[-1].source.startswith("## Details"):
        cells = cells[:-1]  # the closing notes on the reconstruction come after the result
    assert cells[-1].cell_type == "code" and cells[-1].source.startswith("nb.results()")
    assert cells[-2].cell_type == "markdown" and cells[-2].source.startswith("## What to look for")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert ".head(" not in code, f"{path.name}: show nb.summary(df), not a raw dump"


def test_regeneration_keeps_intro_own_cells_and_look_for_note_and_is_idempotent(tmp_path, monkeypatch):
    from dpmf_lib import scaffold

    monkeypatch.setattr(scaffold, "notebooks_dir", lambda: tmp_path)
    nb = scaffold.build("pnbm_fig2", "# Intro", extra={"run": [nbformat.v4.new_code_cell("mine = 1")]},
                        display="experiment.summary(df)", save_call="nb.save(df, fig, extra_tables={})")
    nb.cells[0].source = "# An edited intro"
    nb.cells[-2].source = "## What to look for\n\nMy own note."
    nb.cells.append(nbformat.v4.new_markdown_cell("## Details\n\nHow it was reconstructed."))
    nb.cells[1].source = "profile = 'ci'\noverrides = {}"  # an old-style parameters cell
    nb.cells.insert(3, nbformat.v4.new_code_cell("df = experiment.run(nb.params)\ndf.head(20)"))  # an old raw dump
    del nb.cells[4]
    nbformat.write(nb, tmp_path / "pnbm_fig2.ipynb")
    first = scaffold.regenerate("pnbm_fig2").read_text()
    again = scaffold.regenerate("pnbm_fig2").read_text()
    assert first == again
    new = nbformat.reads(first, as_version=4)
    src = [c.source for c in new.cells]
    assert src[0] == "# An edited intro" and "mine = 1" in src and src[-3] == "## What to look for\n\nMy own note."
    assert src[-1] == "## Details\n\nHow it was reconstructed." and src[-2].startswith("nb.results()")
    assert src.index("mine = 1") == src.index("df = experiment.run(nb.params)\nnb.summary(df)  # the whole table is "
                                                "written as CSV by nb.save below") + 1
    assert "out = nb.save(df, fig, extra_tables={})" in src[-4] and "xi: float = None" in src[1]



@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_look_for_note_lists_the_claims_as_they_are_now(path):
    """The note's list of claims quotes each rule; written once and kept, it told Fig 5's readers that 'slower' meant
    10 % more time after the margin had become 0. Refresh with `python -m dpmf_lib.scaffold --refresh-look-for --all`
    (markdown only: no run goes stale)."""
    from dpmf_lib import scaffold

    note = next(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"
                and c.source.startswith(scaffold.LOOK_FOR_HEAD))
    assert scaffold.with_current_claims(note.strip(), path.stem) == note.strip(), (
        f"{path.name}: its claims list is not params/claims.yaml's; run "
        f"`python -m dpmf_lib.scaffold --refresh-look-for {path.stem}`")
    has_claims = any(c.notebook == path.stem for c in load_claims())
    assert (scaffold.CLAIMS_INTRO in note.splitlines()) == has_claims
    assert (scaffold.NO_CLAIMS in note) == (not has_claims)


def test_the_claims_list_follows_a_first_claim_and_a_last_one_removed_and_keeps_the_notes_own_lines():
    from dpmf_lib import scaffold

    name = "liu_fig5"
    lines = scaffold.look_for(name).splitlines()
    at = lines.index(scaffold.CLAIMS_INTRO) + 1
    own = ["  an indented remark of the note's own", "- *Our reading*: a bullet of the note's own"]
    note = "\n".join(lines[:at + 1] + own + lines[at + 1:])
    out = scaffold.with_current_claims(note, name)
    assert all(x in out.splitlines() for x in own) and scaffold.with_current_claims(out, name) == out
    gained = "\n".join(["## What to look for", "", scaffold.NO_CLAIMS, "", "Our closing words."])
    out = scaffold.with_current_claims(gained, name)
    assert scaffold.NO_CLAIMS not in out and lines[at] in out.splitlines() and out.endswith("Our closing words.")
    lost = scaffold.with_current_claims(scaffold.look_for(name) + "\n\nOur closing words.", "liu_fig1x_no_claims")
    assert scaffold.CLAIMS_INTRO not in lost and scaffold.NO_CLAIMS in lost and lines[at] not in lost
    assert lost.endswith("Our closing words.") and scaffold.CLAIMS_CLOSING not in lost


def test_refreshing_the_look_for_note_keeps_its_own_words_and_every_code_cell(tmp_path, monkeypatch):
    import shutil

    from dpmf_lib import scaffold

    monkeypatch.setattr(scaffold, "notebooks_dir", lambda: tmp_path)
    shutil.copy(notebooks_dir() / "liu_fig5.ipynb", tmp_path / "liu_fig5.ipynb")
    nb = nbformat.read(tmp_path / "liu_fig5.ipynb", as_version=4)
    cell = next(c for c in nb.cells if c.cell_type == "markdown" and c.source.startswith(scaffold.LOOK_FOR_HEAD))
    lines = cell.source.splitlines()
    at = lines.index(scaffold.CLAIMS_INTRO) + 1
    current = lines[at]
    lines[at] = current.replace("we measure", "we measured, under an old rule,")
    cell.source = "\n".join(lines + ["", "A closing word of the notebook's own."])
    nbformat.write(nb, tmp_path / "liu_fig5.ipynb")
    code_before = json.dumps(notebook_code(tmp_path / "liu_fig5.ipynb"))
    assert scaffold.refresh_look_for("liu_fig5") is True
    after = next(c.source for c in nbformat.read(tmp_path / "liu_fig5.ipynb", as_version=4).cells
                 if c.cell_type == "markdown" and c.source.startswith(scaffold.LOOK_FOR_HEAD))
    assert current in after.splitlines() and "under an old rule" not in after
    assert after.endswith("A closing word of the notebook's own.")
    assert json.dumps(notebook_code(tmp_path / "liu_fig5.ipynb")) == code_before
    assert scaffold.refresh_look_for("liu_fig5") is False  # idempotent


def test_regeneration_keeps_a_claims_cell_of_the_notebooks_own(tmp_path, monkeypatch):
    """A notebook that replicates its claims its own way (pnbm: the selected configurations at fresh seeds) keeps
    that cell, once, where the standard one goes: regenerating must not add the standard ``nb.replicate`` beside it."""
    from dpmf_lib import scaffold

    monkeypatch.setattr(scaffold, "notebooks_dir", lambda: tmp_path)
    own = "# my way\nclaims = experiment.rerun_selected(df).replicate(nb)"
    nbformat.write(scaffold.build("pnbm_fig2", "# Intro", claims_cell=own), tmp_path / "pnbm_fig2.ipynb")
    new = nbformat.reads(scaffold.regenerate("pnbm_fig2").read_text(), as_version=4)
    claims = [c.source for c in new.cells if c.cell_type == "code" and "replicate(" in c.source]
    assert claims == [own]
    src = [c.source for c in new.cells]
    assert src.index(own) == src.index(scaffold.PLOT_CELL) + 1

@pytest.mark.slow
def test_papermill_parameters_by_name_reach_the_run_and_unknown_ones_fail(figures_tmp, tmp_path):
    """`papermill -p seed 1` sets the run's seed (an override run: figures/_runs/, never figures/<name>/); a name that
    is not a parameter stops the notebook with an error naming it and the fix (papermill alone only warns)."""
    import papermill as pm

    nb = str(notebooks_dir() / "balu_table5_1.ipynb")
    pm.execute_notebook(nb, str(tmp_path / "ok.ipynb"), parameters={"profile": "smoke", "seed": 1},
                        cwd=str(notebooks_dir()), kernel_name="python3", progress_bar=False)
    (run,) = (figures_tmp / "_runs").iterdir()
    prov = json.loads((run / "provenance.json").read_text())
    assert prov["params"]["seed"] == 1 and prov["overrides"] == {"seed": 1} and not prov["canonical"]
    assert not (figures_tmp / "balu_table5_1").exists()
    last = [c for c in nbformat.read(tmp_path / "ok.ipynb", as_version=4).cells if c.cell_type == "code"][-1]
    shown = last.outputs[0]["data"]
    assert "text/html" in shown and "PosixPath" not in shown["text/plain"] and "profile smoke" in shown["text/plain"]
    with pytest.raises(pm.PapermillExecutionError, match=r"unknown parameter 'sed' \(did you mean 'seed'\?\)"):
        pm.execute_notebook(nb, str(tmp_path / "bad.ipynb"), parameters={"profile": "smoke", "sed": 1},
                            cwd=str(notebooks_dir()), kernel_name="python3", progress_bar=False)


def check_outputs(out: Path, name: str, profile: str) -> None:
    """What every run of a notebook leaves: figure, table, provenance with its keys, stand-in rows labelled, and the
    executed notebook with its figure inline."""
    import pandas as pd

    for suffix in (".png", ".svg", ".csv"):
        assert (out / f"{name}{suffix}").exists(), f"{name}: missing {name}{suffix}"
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["profile"] == profile and prov["notebook"] == name
    for key in ("git", "params", "datasets", "seeds", "packages", "wall_time_s"):
        assert key in prov
    csv = pd.read_csv(out / f"{name}.csv")
    if prov["uses_standin"]:
        assert csv["dataset"].astype(str).str.contains("synthetic stand-in").any()
    # the executed copy shows its figure: the runner's kernels draw inline even where MPLBACKEND=Agg (CI)
    executed = nbformat.read(out / f"{name}.ipynb", as_version=4)
    assert any("image/png" in o.get("data", {}) for c in executed.cells if c.cell_type == "code" for o in c.outputs), \
        f"{name}: the executed notebook carries no figure (image/png output)"


@pytest.mark.slow
@replaced_in_ci_by("test_every_ci_figure_has_its_outputs")
@pytest.mark.parametrize("name", IMPLEMENTED)
def test_notebook_executes_at_smoke_profile(name, figures_tmp):
    record = execute(name, "smoke", digest="test")
    assert record["status"] == "ok", f"{name} failed: {record['error']}"
    check_outputs(figures_tmp / name, name, "smoke")


@needs_ci_figures
@pytest.mark.parametrize("name", IMPLEMENTED)
def test_every_ci_figure_has_its_outputs(name):
    check_outputs(ci_dir(name), name, "ci")  # ci_dir: its run.json says ok at ci


def test_the_docs_document_every_environment_variable_activation_and_a_cheap_scratch_run():
    """Every `DPMF_*` variable the code reads has a row in the table of docs/running.md; the page activates the venv
    before calling papermill, and its papermill example runs at `smoke` into a scratch path (not the repository)."""
    import re

    from dpmf_lib.paths import REPO_ROOT

    page = (REPO_ROOT / "docs" / "running.md").read_text()
    used = set()
    for d in ("dpmf_lib", "data_fetch"):
        for f in (REPO_ROOT / d).rglob("*.py"):
            used |= set(re.findall(r"\bDPMF_[A-Z_]*[A-Z]\b", f.read_text()))
    rows = set(re.findall(r"^\| `(DPMF_[A-Z_]+)`(?:, `(DPMF_[A-Z_]+)`)? \|", page, re.M))
    documented = {v for row in rows for v in row if v}
    assert used - documented == set(), \
        f"add a row to the table of environment variables in docs/running.md for {used - documented}"
    assert page.index("source .venv/bin/activate") < page.index("papermill notebooks/")
    for call in re.findall(r"^papermill notebooks/\S+ (\S+) (.*)$", page, re.M):
        assert call[0].startswith("/tmp/") and "-p profile smoke" in call[1], call
    assert "--set" in page and "make lab" in page


def test_make_lab_roots_jupyter_at_the_repository():
    import subprocess

    from dpmf_lib.paths import REPO_ROOT

    out = subprocess.run(["make", "-n", "lab"], cwd=REPO_ROOT, capture_output=True, text=True).stdout
    line = next(x for x in out.splitlines() if "jupyter lab" in x)
    assert f"--ServerApp.root_dir='{REPO_ROOT}'" in line and "notebooks/" not in line.split("default_url")[0]
    # as root, jupyter refuses to start without --allow-root: LAB_ARGS passes it (and any other option) through
    out = subprocess.run(["make", "-n", "lab", "LAB_ARGS=--allow-root --no-browser"], cwd=REPO_ROOT,
                         capture_output=True, text=True).stdout
    assert next(x for x in out.splitlines() if "jupyter lab" in x).endswith(" --allow-root --no-browser")
