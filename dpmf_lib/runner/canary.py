"""Canary revalidation: keep a `paper` snapshot row current across a refactor without re-running it.

A row of ``results/paper`` is current while its run hash equals the tree's (:func:`dpmf_lib.runner.hashing.run_hash`).
A change of code stales every row whose closure holds it — rightly, as the code might now compute something else; but
a refactor computes the same, and re-taking the rows costs hours. Each row therefore keeps a **canary**:
``results/paper/<name>/canary.json`` with the sha256 of the table (``<name>.csv``) its notebook writes at the small
``canary`` profile of ``params/<name>.yaml`` — the paper's methods, dimensions, datasets and branches on fewer
ratings, iterations, grid points and one seed — recorded with the code that produced the row.

    python -m dpmf_lib.snapshot --canary-record [--only P]   # record the canary of current rows that lack one
    python -m dpmf_lib.snapshot --revalidate [--only P]      # re-run the canaries of stale rows

``--revalidate`` re-runs the canary of a row that is stale *only because code changed* (the notebook's code cells or
a module in its closure; never its paper parameters, its claims' seed rules or its data) and compares the table's
bytes with the recorded fingerprint. Identical: the row becomes ``current (revalidated at <commit>)`` for exactly the
current run hash — shown so in the snapshot listing and the report, never as plain ``current``; the next code change
stales it again and the canary is compared with the *original* fingerprint again. Different: the row stays stale.

What a canary cannot see (docs/staleness.md): a change on a path the canary does not take (a branch only reached at
the paper's sizes, a size-dependent kernel choice, a thread count), a change that cancels out in the table at the
canary's sizes, and anything that only moves the wall-clock columns (kept apart in ``<name>_timings.csv``). A row
whose canary is not deterministic never revalidates (safe, not useful).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..paths import REPO_ROOT

PROFILE = "canary"
FILE = "canary.json"
#: the parts of the run hash a canary may stand in for; a change of any other part (paper parameters, claims' seed
#: rules) is not a refactor and needs a re-take
MAY_DIFFER = ("code", "notebook")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True,
                             timeout=10)
        # the snapshot's own records (results/) are written by this very step: only code counts as a change
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!results"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
        return out.stdout.strip() + ("+changes" if dirty else "") if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def has_profile(entry) -> bool:
    from ..params import read_yaml

    doc = read_yaml(entry.params_file) or {}
    return PROFILE in (doc.get("profiles") or {})


def read(row_dir: Path) -> dict | None:
    try:
        return json.loads((row_dir / FILE).read_text())
    except (OSError, ValueError):
        return None


def _write(row_dir: Path, record: dict) -> None:
    tmp = row_dir / f".{FILE}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=2) + "\n")
    os.replace(tmp, row_dir / FILE)


def canary_params_digest(entry) -> str:
    from ..params import load_params

    return _digest(json.dumps(load_params(entry.name, PROFILE), sort_keys=True, default=str))


def run(entry, workdir: Path, env: dict | None = None) -> dict:
    """Run ``entry``'s notebook at the canary profile in ``workdir`` (its own figures directory, the result cache
    off) through the runner's executor; returns ``{"status", "fingerprint", "runtime_s", "error"}``."""
    from .execution import execute

    settings = {"DPMF_FIGURES_DIR": str(workdir), "DPMF_CACHE": "off", **(env or {})}
    rec = execute(entry.name, PROFILE, "canary", env=settings)
    table = workdir / entry.name / f"{entry.name}.csv"
    out = {"status": rec["status"], "runtime_s": rec["runtime_s"], "error": rec.get("error")}
    if rec["status"] == "ok" and table.exists():
        out["fingerprint"] = hashlib.sha256(table.read_bytes()).hexdigest()
    elif rec["status"] == "ok":
        out.update(status="failed", error=f"the canary run wrote no {table.name}")
    return out


def record(entry, row_dir: Path, workdir: Path) -> str:
    """Record the canary of a row that is current plainly: the tree's code is the code that produced it."""
    from .hashing import run_hash, run_hash_parts
    from .staleness import staleness

    if not has_profile(entry):
        return f"no `{PROFILE}` profile in {entry.params_file.name}"
    digest = run_hash(entry, "paper")
    why = staleness(entry, digest, out_dir=row_dir)
    if why:
        return f"not recorded: the row is stale ({why}); a canary is recorded only with the code that produced " \
               "the row"
    earlier = read(row_dir) or {}
    if earlier.get("for_hash") == digest and earlier.get("fingerprint"):
        first = {"status": "ok", "fingerprint": earlier["fingerprint"]}  # recorded before with this code
    else:
        first = run(entry, workdir)
        if first["status"] != "ok":
            return f"canary failed: {first['error']}"
    # numba's first, freshly compiled run of a kernel can differ in the last bits from runs that load it from its
    # cache (seen with the SGLD kernels): the fingerprint is that of a later run, with every kernel cached
    got = run(entry, workdir)
    if got["status"] != "ok":
        return f"canary failed: {got['error']}"
    parts = run_hash_parts(entry, "paper")
    rec = {"profile": PROFILE, "fingerprint": got["fingerprint"], "for_hash": digest,
           "parts": {k: _digest(v) for k, v in parts.items()},
           "canary_params": canary_params_digest(entry),
           "commit": earlier.get("commit") if earlier.get("for_hash") == digest else _commit(),
           "recorded": datetime.date.today().isoformat(), "runtime_s": got["runtime_s"]}
    if first["fingerprint"] != got["fingerprint"]:
        rec["first_run_differed"] = first["fingerprint"]
    _write(row_dir, rec)
    return f"recorded ({got['runtime_s']:.0f} s)" + ("; the first run differed" if "first_run_differed" in rec else "")


def revalidated_at(entry, row_dir: Path, digest: str) -> str | None:
    """The commit at which the row's canary revalidated it for run hash ``digest``, or None."""
    rec = read(row_dir) or {}
    rv = rec.get("revalidated") or {}
    return rv.get("commit") if rv.get("hash") == digest else None


def why_not(entry, row_dir: Path) -> str | None:
    """Why the stale row cannot be revalidated by its canary (None when it can be tried)."""
    from .hashing import run_hash_parts

    rec = read(row_dir)
    if rec is None:
        return "no canary recorded for this row"
    if not has_profile(entry):
        return f"no `{PROFILE}` profile in {entry.params_file.name}"
    if rec.get("canary_params") != canary_params_digest(entry):
        return "the canary profile changed since the row's canary was recorded"
    now = {k: _digest(v) for k, v in run_hash_parts(entry, "paper").items()}
    changed = [k for k in now if now[k] != (rec.get("parts") or {}).get(k)]
    bad = [k for k in changed if k not in MAY_DIFFER]
    if bad:
        return f"its {' and '.join(bad)} changed (not a refactor: re-take the row)"
    return None


def revalidate(entry, row_dir: Path, workdir: Path) -> str:
    """Re-run the canary of a stale row and, when its table is byte-identical, mark the row revalidated."""
    from .hashing import run_hash
    from .staleness import staleness

    digest = run_hash(entry, "paper")
    own = (json.loads((row_dir / "run.json").read_text()) or {}).get("hash")
    why = staleness(entry, digest, out_dir=row_dir)
    if why is None:
        return "current: nothing to do"
    if revalidated_at(entry, row_dir, digest):
        return "already revalidated for this code"
    if staleness(entry, own, out_dir=row_dir) is not None:  # stale for another reason than code (data, seed rules)
        return f"stays stale: {staleness(entry, own, out_dir=row_dir)}"
    reason = why_not(entry, row_dir)
    if reason:
        return f"stays stale: {reason}"
    rec = read(row_dir)
    got = run(entry, workdir)
    if got["status"] == "ok" and got["fingerprint"] != rec["fingerprint"]:
        got = run(entry, workdir)  # once more, with every kernel now loaded from numba's cache (see record)
    if got["status"] != "ok":
        return f"stays stale: canary failed: {got['error']}"
    if got["fingerprint"] != rec["fingerprint"]:
        rec["last_mismatch"] = {"hash": digest, "commit": _commit(), "fingerprint": got["fingerprint"]}
        _write(row_dir, rec)
        return "stays stale: the canary's table differs from the one recorded with the row's code"
    rec["revalidated"] = {"hash": digest, "commit": _commit(), "date": datetime.date.today().isoformat(),
                          "runtime_s": got["runtime_s"]}
    rec.pop("last_mismatch", None)
    _write(row_dir, rec)
    return f"revalidated ({got['runtime_s']:.0f} s)"


def each(entries, action: str, snapshot: Path, force: bool = False) -> list[tuple[str, str]]:
    """``action`` (``"record"`` or ``"revalidate"``) for each entry with a snapshot row, one canary at a time (a
    canary is a timing-free run, but two at once would share the 2 cores the paper rows were measured on)."""
    out = []
    work = Path(tempfile.mkdtemp(prefix="dpmf-canary-"))
    try:
        for e in entries:
            row = snapshot / e.name
            if not (row / "run.json").exists():
                continue
            if action == "record" and not force:
                from .hashing import run_hash

                if (read(row) or {}).get("for_hash") == run_hash(e, "paper"):
                    out.append((e.name, "already recorded for this code"))
                    continue
            msg = (record if action == "record" else revalidate)(e, row, work / e.name)
            out.append((e.name, msg))
            print(f"{e.name:32s} {msg}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out
