"""Notebooks in JupyterLab and in git: they carry the kernelspec the Makefile installs (so Lab does not rewrite it on
open), nbformat reads and writes them back byte for byte, and the pre-commit hook (nbstripout) leaves a committed
notebook as it is and strips one that was run and saved in Lab back to its committed bytes."""

import io
import json
import re
import shlex
import subprocess
import sys

import nbformat
import pytest
import yaml

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def _installed_kernelspec() -> dict:
    """What `make venv` installs: the name and display name of its `ipykernel install` line."""
    make = (REPO / "Makefile").read_text()
    line = next(x for x in make.splitlines() if "ipykernel install" in x)
    return {"name": re.search(r"--name (\S+)", line).group(1),
            "display_name": re.search(r'--display-name "([^"]+)"', line).group(1), "language": "python"}


def test_every_notebook_carries_the_kernelspec_the_makefile_installs():
    spec = _installed_kernelspec()
    assert spec == {"name": "python3", "display_name": "Python 3 (dpmf workbook)", "language": "python"}
    wrong = [p.name for p in NOTEBOOKS if json.loads(p.read_text(encoding="utf-8"))["metadata"].get("kernelspec") != spec]
    assert not wrong, f"kernelspec is not {spec} in {wrong}: Lab would rewrite it on open and mark the notebook modified"


def test_the_kernelspec_of_this_environment_is_the_one_the_notebooks_name():
    """Where `make venv` has run, the installed python3 kernel has the display name the notebooks carry."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        installed = KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        pytest.skip("no python3 kernel installed in this environment")
    if installed.display_name != _installed_kernelspec()["display_name"]:
        pytest.skip(f"this environment's python3 kernel is {installed.display_name!r}, not `make venv`'s")
    assert installed.language == "python"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_nbformat_reads_and_writes_a_notebook_back_byte_for_byte(path):
    """Jupyter's own round trip (what Lab's save does to an unchanged notebook) changes no byte."""
    nb = nbformat.read(path, as_version=4)
    out = io.StringIO()
    nbformat.write(nb, out)
    assert out.getvalue().encode("utf-8") == path.read_bytes()


def _hook_command() -> list[str]:
    config = yaml.safe_load((REPO / ".pre-commit-config.yaml").read_text())
    hook = next(h for r in config["repos"] for h in r["hooks"] if h["id"] == "nbstripout")
    assert hook["language"] == "system" and config["repos"][0]["repo"] == "local"  # nothing fetched at commit time
    assert re.search(hook["files"], "notebooks/liu_fig1.ipynb")
    return [sys.executable, "-m", *shlex.split(hook["entry"]), *hook.get("args", [])]


def test_the_pre_commit_hook_leaves_committed_notebooks_unchanged(tmp_path):
    pytest.importorskip("nbstripout")
    copies = []
    for p in NOTEBOOKS:
        copies.append(tmp_path / p.name)
        copies[-1].write_bytes(p.read_bytes())
    subprocess.run(_hook_command() + [str(c) for c in copies], check=True)
    changed = [c.name for c, p in zip(copies, NOTEBOOKS) if c.read_bytes() != p.read_bytes()]
    assert not changed, f"nbstripout would rewrite {changed}: commit them as it leaves them"


def test_the_pre_commit_hook_strips_a_notebook_run_in_lab_back_to_its_committed_bytes(tmp_path):
    """Outputs, execution counts, per-cell execution metadata and the running kernel's `language_info` (which Lab
    writes when a kernel starts) are stripped; the cell ids and the kernelspec stay."""
    pytest.importorskip("nbstripout")
    path = REPO / "notebooks" / "liu_fig1.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    nb["metadata"]["language_info"] = {"codemirror_mode": {"name": "ipython", "version": 3}, "file_extension": ".py",
                                       "mimetype": "text/x-python", "name": "python", "nbconvert_exporter": "python",
                                       "pygments_lexer": "ipython3", "version": "3.11.9"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            cell["execution_count"] = 4
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["ran\n"]}]
            cell["metadata"]["execution"] = {"iopub.status.idle": "2030-01-01T00:00:00Z"}
    dirty = tmp_path / path.name
    dirty.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    subprocess.run(_hook_command() + [str(dirty)], check=True)
    assert dirty.read_bytes() == path.read_bytes()
