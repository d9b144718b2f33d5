"""The registry of every figure and table of the papers (``params/registry.yaml``), mapped to notebooks.

A row is *implemented* when ``notebooks/<name>.ipynb`` exists; its parameters live in ``params/<name>.yaml``.
Nothing else records status, so the registry cannot drift from what is on disk.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import ParameterError
from .params import params_path, read_yaml
from .paths import notebooks_dir, params_dir

NAME_PATTERN = re.compile(r"^(liu|balu|pnbm|hua)_(fig|table)\d+(_\d+)*$|^extra_[a-z0-9_]+$")


@dataclass(frozen=True)
class Entry:
    name: str
    paper: str
    kind: str  # figure | table
    number: str | None
    caption: str
    issue: int | None
    quantitative: bool = True
    conference: str | None = None
    # notebooks whose cached runs this one reads (result cache): the runner starts it after them when both run
    reads_cache_of: tuple[str, ...] = ()

    @property
    def notebook(self) -> Path:
        return notebooks_dir() / f"{self.name}.ipynb"

    @property
    def params_file(self) -> Path:
        return params_path(self.name)

    @property
    def implemented(self) -> bool:
        return self.notebook.exists()

    @property
    def label(self) -> str:
        return f"{self.kind.capitalize()} {self.number}" if self.number else self.name


def registry_path() -> Path:
    return params_dir() / "registry.yaml"


def load_registry(path: Path | None = None) -> tuple[dict, list[Entry]]:
    """``(papers, entries)``; raises on unknown fields, bad names or duplicates, naming the row."""
    path = path or registry_path()
    doc = read_yaml(path)
    papers = doc.get("papers") or {}
    fields = set(Entry.__dataclass_fields__)
    entries, seen = [], set()
    for k, row in enumerate(doc.get("items") or [], start=1):
        where = f"{path}, item {k} ({row.get('name', '?')})"
        unknown = set(row) - fields
        if unknown:
            raise ParameterError(f"{where}: unknown field(s) {sorted(unknown)}; valid: {sorted(fields)}")
        if "name" not in row or not NAME_PATTERN.match(row["name"]):
            raise ParameterError(f"{where}: name must be <paper>_<fig|table><number> (paper in liu, balu, pnbm, hua; "
                                 "dots as underscores) or extra_<descriptive_name>")
        if row["name"] in seen:
            raise ParameterError(f"{where}: duplicate name")
        if row.get("paper") not in papers:
            raise ParameterError(f"{where}: paper '{row.get('paper')}' is not listed under `papers:`")
        seen.add(row["name"])
        entries.append(Entry(**{**row, "number": None if row.get("number") is None else str(row["number"]),
                                "reads_cache_of": tuple(row.get("reads_cache_of") or ())}))
    names = {e.name for e in entries}
    for e in entries:
        unknown = [n for n in e.reads_cache_of if n not in names]
        if unknown:
            raise ParameterError(f"{path}, item {e.name}: reads_cache_of names unknown notebook(s) {unknown}")
    return papers, entries


def select(entries: list[Entry], patterns: str | list[str] | None, *, implemented_only: bool = True) -> list[Entry]:
    """Entries whose name matches any shell pattern (``'balu_fig3_*'``; comma-separated allowed)."""
    if isinstance(patterns, str):
        patterns = [p.strip() for p in patterns.split(",") if p.strip()]
    chosen = [e for e in entries if not patterns or any(fnmatch.fnmatchcase(e.name, p) for p in patterns)]
    if implemented_only:
        chosen = [e for e in chosen if e.implemented]
    return chosen


def unregistered_notebooks(entries: list[Entry]) -> list[Path]:
    """Notebooks on disk without a registry row (a defect: they would never run in CI)."""
    names = {e.name for e in entries}
    return sorted(p for p in notebooks_dir().glob("*.ipynb") if p.stem not in names)
