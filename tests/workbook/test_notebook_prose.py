"""The notebooks' prose: a short opening, no work-log history, the kernel `make` installs, no committed outputs.

A notebook opens with at most 150 words before its first code cell (what the figure shows, the paper's claim, what
"here" means); the reconstruction details, choices and caveats go in a closing ``## Details`` cell after the result.
Markdown says what was done and why, not when or in which work session or tracker issue: "#15", "the seventeenth
session" and "measured on 2026-11-29" mean nothing to a reader of the notebook. Paper sections, figures and equations
are written without ``#`` and are not affected. (Code cells are not checked for history: their comments are part of
the run hash, see ``dpmf_lib.reproduce.notebook_code_for_hash``.)
"""

import json
import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO_ROOT / "notebooks").glob("*.ipynb"))

MAX_OPENING_WORDS = 150
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (dpmf workbook)", "language": "python"}
LANGUAGE_INFO = {"name": "python"}

_UNITS = ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth"]
_TEENS = ["tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth", "seventeenth",
          "eighteenth", "nineteenth"]
_ORDINALS = (_UNITS + _TEENS + ["twentieth", "thirtieth", "fortieth"]
             + [f"{tens}-{u}" for tens in ("twenty", "thirty") for u in _UNITS])
HISTORY = [
    ("a numbered work session", re.compile(rf"\b(?:{'|'.join(_ORDINALS)})[\s-]+session\b", re.I)),
    ("a numbered work session", re.compile(r"\bsession\s+\d+\b", re.I)),
    ("an issue or tracker number", re.compile(r"(?<![&\w])#\d{2}\b")),
    ("an issue or tracker number", re.compile(r"\b(?:issue|PR|pull request)\s+#?\d+\b", re.I)),
    ("a date", re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")),
]


def load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def opening_words(nb: dict) -> int:
    """Words (``len(text.split())``) of every markdown cell before the first code cell."""
    n = 0
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            break
        if cell["cell_type"] == "markdown":
            n += len(source(cell).split())
    return n


def history_references(text: str) -> list[str]:
    return [f"{what}: {m.group(0)!r}" for what, rx in HISTORY for m in rx.finditer(text)]


def test_notebooks_are_found():
    assert len(NOTEBOOKS) >= 40


@pytest.mark.parametrize(("text", "found"), [
    ("## Details\n\n### 3.2 The sketch", False),           # headings are not tracker numbers
    ("eq. (3.10), Section 5.4.1, Figure 4.7", False),
    ("the `#` comment marker, &#39; and C#12", False),
    ("(ours, #15)", True),
    ("since the seventeenth session", True),
    ("the Twenty-Ninth Session's rows", True),
    ("issue #13, part 4", True),
    ("measured on 2026-11-29", True),
])
def test_history_patterns(text, found):
    assert bool(history_references(text)) is found


def test_opening_words_stop_at_the_first_code_cell():
    nb = {"cells": [{"cell_type": "markdown", "source": ["one two\n", "three"]},
                    {"cell_type": "markdown", "source": "four"},
                    {"cell_type": "code", "source": "x = 1"},
                    {"cell_type": "markdown", "source": "five six seven"}]}
    assert opening_words(nb) == 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_opening_is_short(path):
    n = opening_words(load(path))
    assert n <= MAX_OPENING_WORDS, (
        f"{path.name}: {n} words before the first code cell (at most {MAX_OPENING_WORDS}); move the reconstruction "
        "details to the closing '## Details' cell")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_markdown_has_no_work_history(path):
    found = [f"cell {i}: {ref}" for i, cell in enumerate(load(path)["cells"]) if cell["cell_type"] == "markdown"
             for ref in history_references(source(cell))]
    assert not found, f"{path.name}: say what and why, not when or where it was tracked: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_details_cell_closes_the_notebook(path):
    cells = load(path)["cells"]
    details = [i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and source(c).startswith("## Details")]
    assert details in ([], [len(cells) - 1]), f"{path.name}: one '## Details' cell, the last one"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_kernelspec_is_the_installed_one(path):
    meta = load(path)["metadata"]
    assert meta.get("kernelspec") == KERNELSPEC, f"{path.name}: kernelspec {meta.get('kernelspec')}"
    assert meta.get("language_info") == LANGUAGE_INFO, f"{path.name}: language_info {meta.get('language_info')}"


def test_makefile_installs_that_kernel():
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert (f"ipykernel install --sys-prefix --name {KERNELSPEC['name']} "
            f"--display-name \"{KERNELSPEC['display_name']}\"") in makefile


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_outputs_committed(path):
    dirty = [i for i, c in enumerate(load(path)["cells"])
             if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count") is not None)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs or an execution count"
