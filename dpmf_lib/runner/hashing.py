"""What a run depends on, as one hash: the profile, the resolved parameters, the code of every module the run
executes (ASTs without docstrings) and the notebook's code cells (without comments). See docs/staleness.md."""

from __future__ import annotations

import hashlib
import json

from ..dependencies import code_digest, current_claims
from ..params import load_params
from ..experiments import module_name
from ..registry import Entry


def experiment_module(entry: Entry) -> str:
    """The module a notebook's ``import ... as experiment`` names (``dpmf_lib.experiments.<paper>.<name>`` by convention)."""
    import re

    text = entry.notebook.read_text(encoding="utf-8")
    m = re.search(r"import (dpmf_lib\.[\w.]+) as experiment", text)
    return m.group(1) if m else module_name(entry.name)


def run_modules(entry: Entry) -> tuple[str, ...]:
    """The local modules a run of ``entry`` executes: its experiment module, :mod:`dpmf_lib.outputs` (the notebook
    frame) and whatever else the notebook's code cells import."""
    from ..dependencies import notebook_imports

    return tuple(sorted({experiment_module(entry), "dpmf_lib.outputs", *notebook_imports(entry.notebook)}))


def run_hash_parts(entry: Entry, profile: str) -> dict[str, str]:
    """The parts :func:`run_hash` covers, in its order: ``params`` (the profile and the resolved parameters),
    ``code`` (:func:`dpmf_lib.dependencies.code_digest` of :func:`run_modules`), ``claims`` (the seed rules of the
    notebook's own claims) and ``notebook`` (its code cells without comments)."""
    from ..dependencies import notebook_code

    params = load_params(entry.name, profile)
    return {"params": profile + json.dumps(params, sort_keys=True, default=str),
            "code": code_digest(*run_modules(entry)),
            "claims": repr([seed_rule(c) for c in current_claims() if c.notebook == entry.name]),
            "notebook": json.dumps(notebook_code(entry.notebook), sort_keys=True)}


def part_digests(parts: dict[str, str]) -> dict[str, str]:
    """Each part of :func:`run_hash_parts` as a sha256: what ``run.json`` keeps (``hash_parts``), so that a later run
    can say which part changed (:func:`dpmf_lib.runner.staleness.staleness`)."""
    return {k: hashlib.sha256(v.encode()).hexdigest() for k, v in parts.items()}


def code_files(entry: Entry) -> dict[str, str]:
    """The files of the run's code closure (:func:`run_modules`), each by its repository path and a short
    :func:`dpmf_lib.dependencies.file_digest`: what ``run.json`` keeps (``code_files``), so that a later run can name
    the files whose change made its ``code`` part differ."""
    from ..dependencies import REPO_ROOT, file_digest, modules_closure

    return {p.relative_to(REPO_ROOT).as_posix(): file_digest(p)[:16] for p in modules_closure(run_modules(entry))}


def hash_of_parts(parts: dict[str, str]) -> str:
    """:func:`run_hash` from parts already computed by :func:`run_hash_parts`."""
    h = hashlib.sha256(HASH_SCHEME.encode())
    for key in ("params", "code", "claims", "notebook"):
        h.update(parts[key].encode())
    return h.hexdigest()


def run_hash(entry: Entry, profile: str) -> str:
    """Hash of what a run of ``entry`` at ``profile`` does, data aside (see the module docstring): the profile, the
    resolved parameters, the notebook's code cells without comments, and the code of every module the run executes as
    :func:`dpmf_lib.dependencies.code_digest` sees it (ASTs without docstrings: editing prose stales nothing). The
    notebook's own rows of claims.yaml count with the fields that decide how many seeds
    :meth:`NotebookRun.replicate` runs (id, dataset, min_profile, deterministic, min_seeds, whether shown without a
    verdict); the fields that only judge (reference, tolerance, margin, guards' bounds, the quote) do not, as the
    report judges the saved measurements anew (:mod:`dpmf_lib.verdicts`). The params file counts only through the
    resolved parameters: its comments, ``# measured`` lines and other profiles' blocks change nothing here."""
    return hash_of_parts(run_hash_parts(entry, profile))


#: names the way :func:`run_hash` is formed (a record hashed by another scheme is stale)
HASH_SCHEME = "behaviour-v1"


def seed_rule(claim) -> tuple:
    """The fields of a claim that decide how many seeds a run measures it at (:meth:`NotebookRun.seeds_needed`)."""
    return (claim.id, claim.dataset, claim.min_profile, claim.deterministic, claim.min_seeds,
            bool(claim.shown_not_judged))


_judging_read: tuple | None = None


def _judging_section() -> dict:
    """The ``judging:`` section of ``params/claims.yaml`` as data (parsed once per version of the file): the judging
    annotations the verdict code reads beside the claims."""
    global _judging_read
    import yaml

    from ..claims import claims_path

    try:
        data = claims_path().read_bytes()
    except OSError:
        return {}
    digest = hashlib.sha256(data).digest()
    if _judging_read is not None and _judging_read[0] == digest:
        return _judging_read[1]
    try:
        doc = yaml.safe_load(data) or {}
        section = doc.get("judging") or {} if isinstance(doc, dict) else {}
    except yaml.YAMLError:
        section = {}
    _judging_read = (digest, section if isinstance(section, dict) else {})
    return _judging_read[1]


def judging_digest(claim_ids) -> str:
    """A digest of how the claims ``claim_ids`` are judged now: the bytes of :mod:`dpmf_lib.verdicts` (read as a file,
    never imported: a broken rule must not fail the runner), the judging fields of those claims and their entries in
    the ``judging:`` section of ``params/claims.yaml``. Recorded in ``run.json`` — the run record, not a result — so
    the report can say when an executed notebook's printed claims table was judged under other rules than the
    report's."""
    from ..paths import REPO_ROOT

    h = hashlib.sha256((REPO_ROOT / "dpmf_lib" / "verdicts.py").read_bytes())
    wanted = set(claim_ids)
    h.update(repr(sorted((repr(c) for c in current_claims() if c.id in wanted))).encode())
    notes = _judging_section()
    h.update(repr(sorted((str(cid), repr(v)) for cid, v in notes.items() if cid in wanted)).encode())
    return h.hexdigest()[:16]
