"""Move run records hashed by the byte scheme to the behaviour scheme, without re-running anything.

Until the run hash followed behaviour (:func:`dpmf_lib.runner.hashing.run_hash`: ASTs without docstrings, notebooks'
code cells without comments, resolved parameters only), it covered the raw bytes of every file a notebook imports,
its code cells verbatim and its params file's bytes. A record whose hash equals the *byte* hash of the tree as it is
now was produced by exactly this tree's code, so it is current under the new scheme too: ``rehash`` rewrites its
``hash`` to the new one and keeps the old under ``rehashed_from``. A record that does not match (taken at other code)
is left as it is — stale, as before.

    python -m dpmf_lib.snapshot --rehash     # the snapshot's rows and figures/'s canonical runs
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from ..dependencies import module_closure
from ..paths import REPO_ROOT

MEASURED_PREFIX = b"# measured "


def _byte_code_digest(module: str) -> str:
    h = hashlib.sha256()
    for p in module_closure(module):
        h.update(p.relative_to(REPO_ROOT).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def _byte_notebook(path: Path) -> bytes:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = [{"source": "".join(c.get("source", "")), "tags": c.get("metadata", {}).get("tags", [])}
             for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    return json.dumps(cells, sort_keys=True).encode()


def _byte_params(path: Path) -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    return b"".join(line for line in lines if not line.startswith(MEASURED_PREFIX))


def byte_run_hash(entry, profile: str) -> str:
    """The run hash of ``entry`` at ``profile`` under the byte scheme, computed on today's tree."""
    from ..dependencies import current_claims
    from ..params import load_params
    from .hashing import experiment_module, seed_rule

    params = load_params(entry.name, profile)
    own_claims = repr([seed_rule(c) for c in current_claims() if c.notebook == entry.name])
    h = hashlib.sha256()
    for part in (profile, json.dumps(params, sort_keys=True, default=str),
                 _byte_code_digest(experiment_module(entry)), _byte_code_digest("dpmf_lib.outputs"), own_claims):
        h.update(part.encode())
    h.update(_byte_notebook(entry.notebook))
    h.update(_byte_params(entry.params_file))
    return h.hexdigest()


def rehash_record(entry, run_file: Path) -> str:
    """Rehash one ``run.json``: ``"moved"``, ``"already"`` (hashed by the behaviour scheme), ``"stale"`` (taken at
    other code: left alone) or ``"skipped"`` (not a successful run)."""
    from .hashing import run_hash

    try:
        run = json.loads(run_file.read_text())
    except (OSError, ValueError):
        return "skipped"
    if run.get("status") != "ok" or not run.get("profile"):
        return "skipped"
    new = run_hash(entry, run["profile"])
    if run.get("hash") == new:
        return "already"
    if run.get("hash") != byte_run_hash(entry, run["profile"]):
        return "stale"
    run["rehashed_from"] = run["hash"]
    run["hash"] = new
    tmp = run_file.with_name(f".{run_file.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(run, indent=2) + "\n")
    os.replace(tmp, run_file)
    return "moved"


def rehash(folders: list[Path]) -> dict[str, list[str]]:
    """Rehash the runs in each of ``folders`` (``<folder>/<name>/run.json``); returns names by outcome."""
    from ..registry import load_registry

    out: dict[str, list[str]] = {}
    for e in load_registry()[1]:
        if not e.implemented:
            continue
        for folder in folders:
            f = folder / e.name / "run.json"
            if f.exists():
                out.setdefault(rehash_record(e, f), []).append(f"{folder.name}/{e.name}")
    return out
