"""Whether a run's outputs are current for the tree: same run hash, seed rules and data state."""

from __future__ import annotations

import hashlib
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
    broken = damaged(out, run)
    if broken:
        return DAMAGED + ": " + "; ".join(broken) + " (the runner runs it again)"
    then = run.get("data_state") or {}
    now = data_states([{"dataset": d} for d in then])
    changed = sorted(d for d in then if now.get(d) != then[d])
    if changed:
        return "data changed since the last run: " + ", ".join(f"{d} ({then[d]} → {now.get(d)})" for d in changed)
    return None


#: the start of :func:`staleness`'s answer for a run whose files are not the ones it wrote
DAMAGED = "damaged"


def damaged(out: Path, run: dict) -> list[str]:
    """The files of a run's folder that are not as the run wrote them: a file ``run.json`` lists (``outputs``: sha256
    of each) missing or with other bytes, or — for a record without checksums (older runs, snapshot rows taken before
    they were kept) — a ``measurements.json`` or ``provenance.json`` that is no longer valid JSON. Empty when all is
    well."""
    found = []
    for rel, digest in sorted((run.get("outputs") or {}).items()):
        f = out / rel
        try:
            h = hashlib.sha256()
            with open(f, "rb") as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
        except FileNotFoundError:
            found.append(f"{rel} is missing")
            continue
        except OSError as exc:
            found.append(f"{rel} cannot be read ({exc.strerror})")
            continue
        if h.hexdigest() != digest:
            found.append(f"{rel} differs from what the run wrote (sha256)")
    for rel in ("measurements.json", "provenance.json"):
        if rel in (run.get("outputs") or {}) or not (out / rel).exists():
            continue
        try:
            json.loads((out / rel).read_text())
        except (OSError, ValueError):
            found.append(f"{rel} is not valid JSON")
    return found


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
