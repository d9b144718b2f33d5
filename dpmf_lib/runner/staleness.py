"""Whether a run's outputs are current for the tree: same run hash, seed rules and data state."""

from __future__ import annotations

import json
from pathlib import Path

from ..dependencies import current_claims, data_states
from ..paths import figures_dir
from ..registry import Entry
from .hashing import seed_rule


def _outputs_present(out: Path, name: str) -> bool:
    """A run's table and provenance are there (a snapshot row may keep its table gzipped: ``<name>.csv.gz``)."""
    table = (out / f"{name}.csv").exists() or (out / f"{name}.csv.gz").exists()
    return (out / "provenance.json").exists() and table


def run_record(name: str) -> dict:
    try:
        return json.loads((figures_dir() / name / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def staleness(entry: Entry, digest: str, out_dir: Path | None = None) -> str | None:
    """Why the canonical outputs of ``entry`` (or those in ``out_dir``, e.g. a snapshot row) are not current for run
    hash ``digest`` (None when they are)."""
    out = out_dir or figures_dir() / entry.name
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        run = {}
    if not run:
        return "not run"
    if run.get("status") != "ok":
        return f"last run {run.get('status', 'unknown')}"
    if run.get("hash") != digest:
        return "code, params or notebook changed since the last run"
    changed_rules = _changed_seed_rules(run.get("claim_seed_rules"))
    if changed_rules:
        return "the seed rule of a claim it measures changed: " + ", ".join(changed_rules)
    if not _outputs_present(out, entry.name):
        return "outputs missing"
    then = run.get("data_state") or {}
    now = data_states([{"dataset": d} for d in then])
    changed = sorted(d for d in then if now.get(d) != then[d])
    if changed:
        return "data changed since the last run: " + ", ".join(f"{d} ({then[d]} → {now.get(d)})" for d in changed)
    return None


def _seed_rules_of(measurements_file: Path) -> dict:
    """The seed rule of every claim a run measured, its own or another notebook's (``balu_table1`` measures claims of
    ``balu_table3_1``): the run hash covers only the notebook's own claims, :func:`staleness` checks these."""
    try:
        ids = {m["claim"] for m in json.loads(measurements_file.read_text())}
    except (OSError, ValueError):
        return {}
    return {c.id: list(seed_rule(c)) for c in current_claims() if c.id in ids}


def _changed_seed_rules(recorded: dict | None) -> list[str]:
    if not recorded:
        return []
    now = {c.id: list(seed_rule(c)) for c in current_claims()}
    return sorted(cid + ("" if cid in now else " (no longer in claims.yaml)") for cid, rule in recorded.items()
                  if now.get(cid) != rule)


def up_to_date(entry: Entry, digest: str) -> bool:
    return staleness(entry, digest) is None
