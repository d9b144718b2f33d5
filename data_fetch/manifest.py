"""The ``.manifest.json`` that marks an extracted dataset directory as complete.

A dataset directory ``data/<id>/`` counts as present only if its manifest exists, parses, names the dataset, and every
file it lists exists with the listed size (``deep=True`` also re-hashes every file). The manifest is written LAST by
:mod:`data_fetch.fetch`, atomically (temporary file + ``os.replace``), so a directory left by an interrupted fetch is
never mistaken for a dataset.

Manifest fields: ``dataset``, ``manifest_version``, ``source`` (URL, mirror or directory it came from), ``fetched_at``
(UTC ISO time), ``archive`` (name, md5 and sha256 observed, ``checked``: which was compared with the registry), ``files``
(``{relative path: {"sha256", "size", "checked"}}``; ``checked`` says whether the SHA-256 was compared with a value in
the registry or only observed), ``parsed`` (whether the ratings file was parsed before install, and its shape) and
``note``.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path

MANIFEST_NAME = ".manifest.json"
MANIFEST_VERSION = 1


def sha256_file(path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    return h.hexdigest()


def list_files(root: Path) -> list[str]:
    """Relative POSIX paths of the regular files below ``root``, sorted, excluding the manifest."""
    out = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if rel != MANIFEST_NAME and not name.endswith(".manifest.json.tmp"):
                out.append(rel)
    return sorted(out)


def write_manifest(root: Path, dataset_id: str, *, source: str, hashes: dict[str, str] | None = None,
                   checked: set[str] | frozenset = frozenset(), archive: dict | None = None, note: str = "",
                   parsed: dict | None = None) -> dict:
    """Hash every file under ``root`` (reusing ``hashes`` already computed) and write the manifest atomically."""
    root = Path(root)
    hashes = dict(hashes or {})
    files = {}
    for rel in list_files(root):
        digest = hashes.get(rel) or sha256_file(root / rel)
        files[rel] = {"sha256": digest, "size": (root / rel).stat().st_size, "checked": rel in checked}
    manifest = {
        "dataset": dataset_id,
        "manifest_version": MANIFEST_VERSION,
        "source": source,
        "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "archive": archive,
        "files": files,
        "parsed": parsed,
        "note": note or ("files marked checked=false had no expected checksum in data_fetch/registry.py: "
                         "their sha256 is the one observed at fetch time"),
    }
    fd, tmp = tempfile.mkstemp(dir=root, prefix=MANIFEST_NAME, suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)  # mkstemp creates 0600: the manifest must be readable like the data files beside it
        with os.fdopen(fd, "w") as fh:
            json.dump(manifest, fh, indent=1, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, root / MANIFEST_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return manifest


def read_manifest(root: Path) -> dict | None:
    try:
        with open(Path(root) / MANIFEST_NAME) as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def manifest_problem(root: Path, dataset_id: str, *, deep: bool = False) -> str | None:
    """Why ``root`` is not a complete copy of ``dataset_id`` (None when it is)."""
    root = Path(root)
    if not root.is_dir():
        return f"{root} does not exist"
    m = read_manifest(root)
    if m is None:
        return f"{root / MANIFEST_NAME} is missing or unreadable (an interrupted fetch?)"
    if m.get("dataset") != dataset_id:
        return f"{root / MANIFEST_NAME} is for dataset {m.get('dataset')!r}, not {dataset_id!r}"
    files = m.get("files")
    if not isinstance(files, dict) or not files:
        return f"{root / MANIFEST_NAME} lists no files"
    for rel, info in files.items():
        p = root / rel
        try:
            size = p.stat().st_size
        except OSError:
            return f"{p} is listed in the manifest but missing"
        if size != info.get("size"):
            return f"{p} has {size} bytes, the manifest says {info.get('size')}"
        if deep and sha256_file(p) != info.get("sha256"):
            return f"{p} has changed since it was fetched (sha256 differs from the manifest)"
    return None
