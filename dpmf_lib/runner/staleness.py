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


def staleness(entry: Entry, digest: str, out_dir: Path | None = None, *, profile: str | None = None) -> str | None:
    """Why the canonical outputs of ``entry`` (or those in ``out_dir``, e.g. a snapshot row) are not current for run
    hash ``digest`` (None when they are). With ``profile`` (the profile ``digest`` was computed for), a changed run
    hash is explained part by part (:func:`hash_change`): which of params, code (which files), claims' seed rules or
    notebook changed."""
    out = out_dir or figures_dir() / entry.name
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        run = {}
    if not run:
        return "new: never run here (no run record)"
    if run.get("status") != "ok":
        return f"last run {run.get('status', 'unknown')}" + (f": {_clip(run['error'])}" if run.get("error") else "")
    if run.get("hash") != digest:
        return hash_change(entry, run, out, profile) if profile else \
            "code, params or notebook changed since the last run"
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


def _clip(text: str, n: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[:n - 1] + "…"


def _shortlist(names, n: int = 4) -> str:
    names = list(names)
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _params_change(out: Path, now: dict) -> str:
    """The parameters whose resolved value differs between the run's ``provenance.json`` and ``now``."""
    try:
        then = json.loads((out / "provenance.json").read_text()).get("params") or {}
    except (OSError, ValueError):
        return ""

    def norm(v):
        return json.dumps(v, sort_keys=True, default=str)

    keys = sorted(k for k in set(then) | set(now) if k != "profile" and norm(then.get(k)) != norm(now.get(k)))
    return _shortlist(f"{k} {_short(then.get(k), k in then)} → {_short(now.get(k), k in now)}" for k in keys)


def _short(v, present: bool) -> str:
    if not present:
        return "(none)"
    text = json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:37] + "…"


def hash_change(entry: Entry, run: dict, out: Path, profile: str) -> str:
    """Why a run's recorded hash differs from the tree's at ``profile``, part by part: the profile, the resolved
    parameters (which ones, from the run's ``provenance.json``), the code (which files of its closure, from the
    run's ``code_files``), the seed rules of its claims, the notebook's code cells. A record from before the runner
    kept its parts' digests says so."""
    from ..params import load_params
    from .hashing import code_files, part_digests, run_hash_parts

    then_profile = run.get("profile")
    if then_profile and then_profile != profile:
        return f"profile changed: {then_profile} → {profile}"
    try:
        params_now = load_params(entry.name, profile)
    except Exception:  # noqa: BLE001 — a broken params file is reported by the caller's own hash
        params_now = None
    recorded = run.get("hash_parts")
    if not recorded:
        diff = _params_change(out, params_now) if params_now is not None else ""
        return "code, params or notebook changed since the last run" + (f" (params: {diff})" if diff else "") + \
            " — its run.json predates per-part digests"
    now = part_digests(run_hash_parts(entry, profile))
    why = []
    if now["params"] != recorded.get("params"):
        diff = _params_change(out, params_now) if params_now is not None else ""
        why.append("params changed" + (f": {diff}" if diff else ""))
    if now["code"] != recorded.get("code"):
        then_files, now_files = run.get("code_files") or {}, code_files(entry)
        changed = [f for f in sorted(set(then_files) | set(now_files)) if then_files.get(f) != now_files.get(f)]
        detail = [f + (" (new in its closure)" if f not in then_files else " (no longer imported)"
                       if f not in now_files else "") for f in changed]
        why.append("code changed" + (f": {_shortlist(detail)}" if detail and then_files else ""))
    if now["claims"] != recorded.get("claims"):
        why.append("the seed rule of one of its claims changed")
    if now["notebook"] != recorded.get("notebook"):
        why.append("notebook changed (its code cells or tags)")
    return "; ".join(why) or "the run hash's scheme changed"
