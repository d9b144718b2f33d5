"""Write a thin notebook in the workbook's standard shape (no outputs, a ``parameters`` cell, run → plot → save → result).

    python -m dpmf_lib.scaffold NAME --intro intro.md [--module dpmf_lib.experiments.PAPER.NAME] [--look-for FILE] [--force]
    python -m dpmf_lib.scaffold --regenerate NAME [NAME ...] | --regenerate --all
    python -m dpmf_lib.scaffold --refresh-look-for NAME [NAME ...] | --refresh-look-for --all

The notebook it writes: the intro markdown (a short opening: what the figure shows, the paper's claim, what "here"
means — the longer reconstruction notes go in a closing ``## Details`` cell, after the result); a code
cell tagged ``parameters`` with ``profile`` and one ``name = None`` line per top-level parameter of
``params/<NAME>.yaml`` (so ``papermill -p seed 1`` sets a real variable and ``papermill --help-notebook`` lists every
parameter), plus ``overrides = {}``; then the cells that load the parameters (``NotebookRun(..., namespace=globals())``
merges the names that are not None and refuses a name papermill injected that is not a parameter), call
``<module>.run`` and show a tidy summary of its table, plot in the shared style, measure the claims over seeds, save
(into ``figures/<NAME>/`` when the runner runs it, else ``figures/_runs/``), and end with a "what to look for" note and
the result against the paper (``nb.results()``: quote, paper value, ours ± interval, data, verdict), and then the
notebook's ``## Details`` cell where it has one.

``--regenerate`` rebuilds the standard cells of existing notebooks — after a parameter is added to or removed from
``params/<NAME>.yaml``, or when this template changes — keeping each notebook's intro, its "what to look for" note,
its closing details, its own display and save calls, and every cell of its own where it was; the claims list inside
the note is rewritten from ``params/claims.yaml``. ``--refresh-look-for`` rewrites that list only (markdown: no run
goes stale).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from .experiments import module_name
from .paths import notebooks_dir

PARAMETERS_HEAD = '''# Parameters (papermill injects new values after this cell: `papermill IN.ipynb OUT.ipynb -p profile smoke -p seed 1`).
# profile: which block of params/{name}.yaml to use: "smoke" (seconds), "ci" (minutes), "paper" ({whose} settings).
# Every other name is a parameter of that file: None keeps the profile's value, anything else overrides it (the run
# then writes to figures/_runs/, never to the canonical figures/{name}/). A name that is not a parameter is an error.
profile: str = "ci"  # smoke | ci | paper'''

PARAMETERS_TAIL = '''overrides = {}  # the same parameters by name, e.g. {"seed": 1}; also the way to set one to None'''

SETUP_CELL = '''from dpmf_lib.outputs import NotebookRun
import {module} as experiment

nb = NotebookRun("{name}", profile, overrides, namespace=globals())  # the parameters above that are not None override
nb.params'''

RUN_CELL = "df = experiment.run(nb.params)\n{display}"
DEFAULT_DISPLAY = "nb.summary(df)  # the whole table is written as CSV by nb.save below"
PLOT_CELL = "fig = experiment.plot(df, nb.params)"

CLAIMS_CELL = """# The claims this notebook measures, over seeds: it re-runs the experiment at seed+1 … seed+n−1 (n = 3 at ci,
# 5 at paper; 1 when every claim here is deterministic or needs a larger profile) and keeps only their claim
# values. The figure and CSV above stay those of `seed`. Rules of the verdicts: dpmf_lib/verdicts.py.
claims = nb.replicate(experiment.run, df)  # every column (rule, reason); the result at the end is its summary"""

SAVE_CELL = '''out = {call}
print(f"figure, CSV, provenance and measurements: {{out}}")'''
DEFAULT_SAVE = "nb.save(df, fig)"

RESULT_CELL = "nb.results()  # the paper's claims measured here: quote, paper value, ours ± 95 % interval, data, verdict"

LOOK_FOR_HEAD = "## What to look for"
DETAILS_HEAD = "## Details"

#: The kernel ``make`` installs (``ipykernel install --name python3 --display-name ...``): a notebook naming another
#: display name is marked modified as soon as JupyterLab opens it.
KERNELSPEC = {"display_name": "Python 3 (dpmf workbook)", "language": "python", "name": "python3"}

#: Displays of the run cell that dump raw rows; regeneration replaces them with the tidy summary.
RAW_DISPLAYS = (re.compile(r"^df(\.drop\([^)]*\))?\.head\(\d*\)$"), re.compile(r"^df$"))


def parameters_cell(name: str) -> str:
    """The ``parameters`` cell: ``profile``, one ``name = None`` per parameter of ``params/<name>.yaml`` (annotated
    with the type of its default and commented with its values per profile and the file's own comment, which
    ``papermill --help-notebook`` shows), and ``overrides``."""
    from .params import PROFILES, params_path, read_yaml

    path = params_path(name)
    doc = read_yaml(path)
    defaults = doc["defaults"]
    profiles = doc.get("profiles") or {}
    comments = _yaml_comments(path.read_text(encoding="utf-8"))
    lines = [PARAMETERS_HEAD.format(name=name, whose="the thesis's" if name.startswith("balu_") else "the paper's")]
    for key, default in defaults.items():
        values = {p: (profiles.get(p) or {}).get(key, default) for p in PROFILES}
        if len({repr(v) for v in values.values()}) == 1:
            shared = next(iter(values.values()))
            # the shared value, not the default: a default that every standard profile overrides (a thesis dataset
            # kept for a named profile such as paper-ml1m) was shown as the value of every profile
            shown = (f"{_short(shared)} in every profile" if repr(shared) == repr(default)
                     else f"{_short(shared)} in {', '.join(PROFILES)} (default {_short(default)})")
        else:
            shown = " · ".join(f"{p} {_short(v)}" for p, v in values.items())
        note = comments.get(key)
        help_text = _papermill_safe(shown + (f" — {note}" if note else ""))
        annotation = {bool: "bool", int: "int", float: "float", str: "str", list: "list", dict: "dict"}.get(
            type(default))
        lines.append(f"{key}{': ' + annotation if annotation else ''} = None  # {help_text}")
    lines.append(PARAMETERS_TAIL)
    return "\n".join(lines)


def _short(v, n: int = 40) -> str:
    text = repr(v) if not isinstance(v, str) else v
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _papermill_safe(text: str) -> str:
    """papermill's parser skips a parameter line holding a second ``=``; say it otherwise."""
    for a, b in (("!=", "≠"), ("<=", "≤"), (">=", "≥"), ("==", "=")):
        text = text.replace(a, b)
    return re.sub(r"\s*=\s*", ": ", text)


def _yaml_comments(text: str) -> dict[str, str]:
    """Trailing comments of the top-level entries of a params file's ``defaults:`` block."""
    out, inside = {}, False
    for line in text.splitlines():
        if re.match(r"^defaults:\s*(#.*)?$", line):
            inside = True
            continue
        if inside and line and not line[0].isspace() and not line.startswith("#"):
            break
        m = re.match(r"^  (\w+):.*?\s#\s*(.+)$", line) if inside else None
        if m and not line.strip().startswith("#"):
            out[m.group(1)] = m.group(2).strip()
    return out


def look_for(name: str) -> str:
    """A first "what to look for" note, from the registry's caption and the notebook's claims in
    ``params/claims.yaml`` (edit it in the notebook: regeneration keeps it)."""
    from .claims import load_claims
    from .registry import load_registry
    from .verdicts import rule as rule_of

    entries = {e.name: e for e in load_registry()[1]}
    e = entries.get(name)
    what = f"{e.label}: {e.caption}" if e and e.paper != "extra" else (e.caption if e else name)
    claims = [c for c in load_claims() if c.notebook == name]
    lines = [LOOK_FOR_HEAD, "", f"**{what}.**"]
    if claims:
        lines += ["", CLAIMS_INTRO]
        for c in claims:
            rule = c.shown_not_judged and f"shown, not judged ({c.shown_not_judged})" or rule_of(c)
            lines.append(f"- *{c.where}*: \u201c{_clip(c.quote, 160)}\u201d — we measure {_clip(c.measures, 220)}"
                         f" ({c.unit}; on {c.dataset}; {rule}; needs profile ≥ {c.min_profile}).")
        lines += ["", CLAIMS_CLOSING]
    else:
        lines += ["", NO_CLAIMS]
    return "\n".join(lines)


CLAIMS_INTRO = "The paper's claims measured here, and what would count as reproducing them:"
NO_CLAIMS = ("No quantitative claim of `params/claims.yaml` is measured here: compare the figure's shape with the "
             "paper's (stand-in rows are labelled `[synthetic stand-in]`).")
CLAIMS_CLOSING = ("Rows computed on a `[synthetic stand-in]` are shown but never judged; a claim that needs the `paper` "
                  "profile is only *indicative* below it. The table below gives each verdict and its reason.")
# a bullet as look_for writes it: "- *<where>*: “<quote>” — we measure …"; a bullet of the note's own is never this
_GENERATED_BULLET = re.compile(r"^- \*[^*\n]+\*: \u201c")


def with_current_claims(note: str, name: str) -> str:
    """``note`` (a notebook's own "what to look for" cell) with its list of claims — the generated bullets under
    :data:`CLAIMS_INTRO` — rewritten from ``params/claims.yaml`` as it is now; every other line of the note, the
    notebook's own words (its own bullets and indented remarks included), is kept. The list quotes each claim's rule,
    which changes with the claims file: a list written once and kept told readers of Fig 5 that 'slower' meant 10 %
    more time long after the margin became 0. A notebook that gained its first claim gets the list in place of the
    "no quantitative claim" sentence; one that lost its last claim gets that sentence back. A note with neither (all
    its author's) is returned as it is; ``tests/workbook/test_notebooks.py`` asks every committed note for the list."""
    fresh = [x for x in look_for(name).splitlines() if _GENERATED_BULLET.match(x)]
    lines = note.splitlines()
    intro_at = next((i for i, x in enumerate(lines) if x.strip() == CLAIMS_INTRO), None)
    if intro_at is None:
        if not fresh:
            return note
        at = next((i for i, x in enumerate(lines) if x.strip() == NO_CLAIMS), None)
        if at is None:  # a note wholly of the notebook's own words: left to its author (a test asks for the list)
            return note
        return "\n".join(lines[:at] + [CLAIMS_INTRO, *fresh, "", CLAIMS_CLOSING] + lines[at + 1:])
    own = [x for x in lines[intro_at + 1:] if not _GENERATED_BULLET.match(x)]  # the note's lines, in their order
    if not fresh:
        return "\n".join(lines[:intro_at] + [NO_CLAIMS] + [x for x in own if x.strip() != CLAIMS_CLOSING])
    return "\n".join(lines[:intro_at + 1] + fresh + own)


def refresh_look_for(name: str) -> bool:
    """Rewrite the claims list of ``notebooks/<name>.ipynb``'s "what to look for" cell in place
    (:func:`with_current_claims`); nothing else of the notebook changes — markdown is not a run input, so no run goes
    stale. True when the cell changed."""
    path = notebooks_dir() / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if _slot(cell) == "look_for":
            fresh = with_current_claims(cell.source.strip(), name)
            if fresh != cell.source.strip():
                cell.source, changed = fresh, True
    if changed:
        nbformat.write(nb, path)
    return changed


def _clip(text: str, n: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def build(name: str, intro: str, module: str | None = None, *, display: str | None = None,
          save_call: str | None = None, look_for_md: str | None = None, claims_cell: str | None = None,
          extra: dict[str, list] | None = None, details_md: str | None = None) -> nbformat.NotebookNode:
    """The notebook ``name``. ``display``: the run cell's last line (default: the tidy summary); ``save_call``: the
    save expression (default ``nb.save(df, fig)``); ``claims_cell``: the claims cell's source where the notebook
    replicates its claims its own way (default: ``nb.replicate(experiment.run, df)``, the standard cell; e.g. the
    pnbm figures' ``experiment.rerun_selected(df).replicate(nb)``); ``look_for_md``: the note before the result (default
    :func:`look_for`); ``details_md``: the closing ``## Details`` cell, after the result (none by default);
    ``extra``: cells of the notebook's own, placed after the standard cell they followed (keys ``intro``,
    ``parameters``, ``setup``, ``run``, ``plot``, ``claims``, ``save``)."""
    module = module or module_name(name)
    extra = extra or {}
    params_cell = new_code_cell(parameters_cell(name))
    params_cell.metadata["tags"] = ["parameters"]
    standard = [
        ("intro", new_markdown_cell(intro.strip())),
        ("parameters", params_cell),
        ("setup", new_code_cell(SETUP_CELL.format(module=module, name=name))),
        ("run", new_code_cell(RUN_CELL.format(display=display or DEFAULT_DISPLAY))),
        ("plot", new_code_cell(PLOT_CELL)),
        ("claims", new_code_cell(claims_cell or CLAIMS_CELL)),
        ("save", new_code_cell(SAVE_CELL.format(call=save_call or DEFAULT_SAVE))),
    ]
    cells = []
    for slot, cell in standard:
        cells.append(cell)
        cells.extend(extra.get(slot, []))
    cells.append(new_markdown_cell((look_for_md or look_for(name)).strip()))
    cells.append(new_code_cell(RESULT_CELL))
    if details_md:
        cells.append(new_markdown_cell(details_md.strip()))
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = {"name": "python"}
    for i, c in enumerate(nb.cells):  # stable ids keep diffs quiet when a notebook is regenerated
        c["id"] = f"{name}-{i}"
        if c.cell_type == "code":
            c.outputs, c.execution_count = [], None
    return nb


def _slot(cell) -> str | None:
    src = cell.source.strip()
    if cell.cell_type == "markdown":
        return "look_for" if src.startswith(LOOK_FOR_HEAD) else "details" if src.startswith(DETAILS_HEAD) else None
    if "parameters" in cell.metadata.get("tags", []):
        return "parameters"
    if "NotebookRun(" in src and "import" in src:
        return "setup"
    if src.startswith("df = experiment.run(nb.params)"):
        return "run"
    if src == PLOT_CELL:
        return "plot"
    if re.search(r"^claims = .*replicate\(", src, re.M):  # the standard call or the notebook's own way
        return "claims"
    if re.search(r"^(out = )?nb\.save\(", src, re.M):
        return "save"
    if src.startswith("nb.results()"):
        return "result"
    return None


def parts_of(nb: nbformat.NotebookNode) -> dict:
    """What :func:`build` needs to rebuild an existing notebook: its intro, module, display and save calls, its
    "what to look for" note, its closing details and the cells of its own (by the standard cell they follow)."""
    intro = nb.cells[0].source
    module = None
    display = save_call = look_for_md = claims_cell = details_md = None
    extra: dict[str, list] = {}
    last = "intro"
    for cell in nb.cells[1:]:
        slot = _slot(cell)
        src = cell.source.strip()
        if slot == "setup":
            m = re.search(r"import ([\w.]+) as experiment", src)
            module = m.group(1) if m else None
        elif slot == "run":
            rest = src.split("\n", 1)[1].strip() if "\n" in src else ""
            if rest and not any(p.match(rest) for p in RAW_DISPLAYS):
                display = rest
        elif slot == "save":
            m = re.search(r"^(?:out = )?(nb\.save\(.*\))\s*;?\s*$", src, re.M)
            save_call = m.group(1) if m else None
        elif slot == "claims":
            claims_cell = None if src == CLAIMS_CELL.strip() else cell.source
        elif slot == "look_for":
            look_for_md = src
            continue
        elif slot == "details":
            details_md = src
            continue
        elif slot is None:
            c = nbformat.from_dict(dict(cell))
            if c.cell_type == "code":
                c.outputs, c.execution_count = [], None
            extra.setdefault(last, []).append(c)
            continue
        if slot != "result":
            last = slot
    return {"intro": intro, "module": module, "display": display, "save_call": save_call,
            "look_for_md": look_for_md, "claims_cell": claims_cell, "extra": extra, "details_md": details_md}


def regenerate(name: str) -> Path:
    """Rebuild ``notebooks/<name>.ipynb`` from the template, keeping what is its own (see :func:`parts_of`)."""
    path = notebooks_dir() / f"{name}.ipynb"
    old = nbformat.read(path, as_version=4)
    p = parts_of(old)
    look = p["look_for_md"] and with_current_claims(p["look_for_md"], name)
    nb = build(name, p["intro"], p["module"], display=p["display"], save_call=p["save_call"],
               look_for_md=look, claims_cell=p["claims_cell"], extra=p["extra"], details_md=p["details_md"])
    nbformat.write(nb, path)
    return path


def write_notebook(name: str, intro: str, module: str | None = None, *, force: bool = False,
                   look_for_md: str | None = None) -> Path:
    path = notebooks_dir() / f"{name}.ipynb"
    if path.exists() and not force:
        raise FileExistsError(f"{path} exists; pass force=True (--force) to overwrite, or --regenerate to keep its "
                              "own cells")
    nbformat.write(build(name, intro, module, look_for_md=look_for_md), path)
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.scaffold", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name", nargs="*")
    ap.add_argument("--intro", type=Path, help="markdown file with the notebook's introduction")
    ap.add_argument("--look-for", type=Path, default=None, help="markdown file: the note before the result table")
    ap.add_argument("--module", default=None)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--regenerate", action="store_true", help="rebuild existing notebooks, keeping their own cells")
    ap.add_argument("--all", action="store_true", help="with --regenerate or --refresh-look-for: every notebook")
    ap.add_argument("--refresh-look-for", action="store_true",
                    help="rewrite only the claims list of the 'what to look for' cell from params/claims.yaml "
                         "(markdown: no run goes stale)")
    a = ap.parse_args(argv)
    if a.refresh_look_for and a.regenerate:
        ap.error("--refresh-look-for and --regenerate: choose one (--regenerate refreshes the list too)")
    if a.refresh_look_for:
        names = sorted(p.stem for p in notebooks_dir().glob("*.ipynb")) if a.all else a.name
        if not names:
            ap.error("--refresh-look-for needs notebook names or --all")
        missing = [n for n in names if not (notebooks_dir() / f"{n}.ipynb").exists()]
        if missing:
            ap.error(f"no notebook {', '.join(missing)} in {notebooks_dir()} (python -m dpmf_lib.reproduce --list)")
        for n in names:
            if refresh_look_for(n):
                print(notebooks_dir() / f"{n}.ipynb")
        return 0
    if a.regenerate:
        names = sorted(p.stem for p in notebooks_dir().glob("*.ipynb")) if a.all else a.name
        if not names:
            ap.error("--regenerate needs notebook names or --all")
        for n in names:
            print(regenerate(n))
        return 0
    if len(a.name) != 1 or a.intro is None:
        ap.error("give one NAME and --intro FILE (or --regenerate)")
    look = a.look_for.read_text() if a.look_for else None
    print(write_notebook(a.name[0], a.intro.read_text(), a.module, force=a.force, look_for_md=look))
    return 0


if __name__ == "__main__":
    sys.exit(main())
