"""Fetch a dataset into ``data/<id>/`` atomically: download (or copy a mirror/directory), verify, install, manifest.

Order of sources: an explicit ``source_dir`` (``--from DIR``); else ``$DPMF_DATA_MIRROR/<id>/`` when that directory
exists (CI sets ``DPMF_DATA_MIRROR=../shared/data``; a relative path is taken from the current directory, then from the
repository root); else the registry URL when the dataset may be downloaded; else :class:`DatasetUnavailable`.

Steps, each leaving no half-built dataset behind:

1. Download with a tqdm bar into ``<dest>/.<id>.*.part`` (same filesystem as the target), hashing (md5 and sha256) as
   it streams; it is compared with the registry's archive sha256 when known, else its md5 (GroupLens publishes only
   md5s); the manifest records both digests and which one was checked.
2. Extract into a staging directory ``<dest>/.<id>.staging-*`` (zip members are checked to stay inside; tar uses the
   ``data`` extraction filter), or copy the mirror files into it.
3. Check that the required files exist and that every file with a known checksum/size in the registry matches.
4. ``os.replace`` the staging directory to ``<dest>/<id>`` (an older copy is first renamed aside, then removed).
5. Write ``<dest>/<id>/.manifest.json`` LAST (see :mod:`data_fetch.manifest`): without it the directory is not a
   dataset (a later fetch replaces such a directory without ``--force``).

Any failure removes the staging directory and the partial download. Network errors and datasets that cannot be had
raise :class:`~dpmf_lib.errors.DatasetUnavailable` with the registry's explanation; a checksum mismatch raises
:class:`~dpmf_lib.errors.DataFormatError` naming the file.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from dpmf_lib.errors import DataFormatError, DatasetUnavailable
from dpmf_lib.paths import REPO_ROOT, data_dir

from .manifest import list_files, manifest_problem, sha256_file, write_manifest
from .registry import DatasetSpec, get_spec, unavailable_message

MIRROR_ENV = "DPMF_DATA_MIRROR"
_CHUNK = 1 << 20


def mirror_root() -> Path | None:
    """``$DPMF_DATA_MIRROR`` resolved (cwd first, then the repository root), or None when unset/missing."""
    value = os.environ.get(MIRROR_ENV)
    if not value:
        return None
    p = Path(value).expanduser()
    for cand in ([p] if p.is_absolute() else [Path.cwd() / p, REPO_ROOT / p]):
        if cand.is_dir():
            return cand.resolve()
    return None


def mirror_dir(dataset_id: str) -> Path | None:
    root = mirror_root()
    if root is not None and (root / dataset_id).is_dir():
        return root / dataset_id
    return None


def dataset_dir(dataset_id: str, dest: Path | None = None) -> Path:
    return Path(dest or data_dir()) / dataset_id


def is_present(dataset_id: str, dest: Path | None = None, *, deep: bool = False) -> bool:
    """True when ``<dest>/<id>/`` holds a complete fetch (valid manifest; ``deep`` re-hashes the files)."""
    get_spec(dataset_id)
    return manifest_problem(dataset_dir(dataset_id, dest), dataset_id, deep=deep) is None


def fetch(dataset_id: str, dest: Path | str | None = None, *, force: bool = False, source_dir: Path | str | None = None,
          use_mirror: bool = True, progress: bool = True) -> Path:
    """Make ``<dest>/<id>/`` a complete, verified copy of the dataset and return that path.

    Nothing is done when it is already present (unless ``force``).
    """
    spec = get_spec(dataset_id)
    dest = Path(dest) if dest is not None else data_dir()
    target = dest / spec.id
    if not force and source_dir is None and manifest_problem(target, spec.id) is None:
        return target
    dest.mkdir(parents=True, exist_ok=True)
    if source_dir is not None:
        return install_from_directory(spec, Path(source_dir), dest)
    mirror = mirror_dir(spec.id) if use_mirror else None
    if mirror is not None:
        return install_from_directory(spec, mirror, dest)
    if not spec.available_for_download or not spec.url:
        raise DatasetUnavailable(unavailable_message(spec))
    return install_from_url(spec, dest, progress=progress)


# ---------------------------------------------------------------------------------------------------------------------
# sources


def _copy_file(src: Path, dst: Path) -> None:
    """Copy one file (a seam for tests that simulate a failure mid-copy)."""
    shutil.copyfile(src, dst)


def install_from_directory(spec: DatasetSpec, source: Path, dest: Path) -> Path:
    """Copy the files of ``source`` (a mirror or a hand-made directory) into ``<dest>/<id>/`` atomically."""
    source = Path(source).resolve()
    if not source.is_dir():
        raise DatasetUnavailable(unavailable_message(spec, f"{source} is not a directory"))
    staging = Path(tempfile.mkdtemp(dir=dest, prefix=f".{spec.id}.staging-"))
    try:
        for rel in list_files(source):
            out = staging / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            _copy_file(source / rel, out)
        return _install(spec, staging, dest, source_desc=f"directory {source}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install_from_url(spec: DatasetSpec, dest: Path, *, progress: bool = True) -> Path:
    """Download the registry archive of ``spec``, verify it, extract and install it."""
    archive, digests = download(spec, dest, progress=progress)
    staging = Path(tempfile.mkdtemp(dir=dest, prefix=f".{spec.id}.staging-"))
    try:
        _extract(archive, staging, spec.url)
        root = staging
        entries = [p for p in staging.iterdir()]
        if len(entries) == 1 and entries[0].is_dir():  # the usual single top folder (ml-100k/, ml-10M100K/, sift/)
            root = entries[0]
        info = {"name": spec.url.rsplit("/", 1)[-1], "md5": digests["md5"], "sha256": digests["sha256"],
                "checked": digests["checked"]}  # which digest was compared with the registry (None: observed only)
        return _install(spec, root, dest, source_desc=spec.url, archive=info)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        Path(archive).unlink(missing_ok=True)


def download(spec: DatasetSpec, dest: Path, *, progress: bool = True) -> tuple[Path, dict]:
    """Stream ``spec.url`` into a temporary file in ``dest``; verify the published md5. Returns (path, digests)."""
    fd, tmp = tempfile.mkstemp(dir=dest, prefix=f".{spec.id}.", suffix=".part")
    tmp = Path(tmp)
    md5, sha = hashlib.md5(), hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(spec.url, timeout=60) as resp:
                    total = resp.headers.get("Content-Length") if hasattr(resp, "headers") else None
                    total = int(total) if total else spec.archive_size
                    bar = _progress_bar(total, spec.id, progress)
                    try:
                        while block := resp.read(_CHUNK):
                            out.write(block)
                            md5.update(block)
                            sha.update(block)
                            bar.update(len(block))
                    finally:
                        bar.close()
            except (urllib.error.URLError, OSError, TimeoutError, ValueError) as err:
                raise DatasetUnavailable(unavailable_message(spec, f"downloading {spec.url} failed ({err})")) from err
        digests = {"md5": md5.hexdigest(), "sha256": sha.hexdigest()}
        algo, expected = (("sha256", spec.archive_sha256) if spec.archive_sha256 else
                          ("md5", spec.archive_md5) if spec.archive_md5 else (None, None))
        if algo and digests[algo] != expected:
            raise DataFormatError(spec.url, None, f"archive {algo} {digests[algo]} differs from the published "
                                  f"{expected}", "retry the download; if the upstream archive changed, check "
                                  "it and update data_fetch/registry.py")
        digests["checked"] = algo
        return tmp, digests
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _progress_bar(total, name, enabled):
    from tqdm import tqdm

    return tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=f"fetch {name}", disable=not enabled)


def _extract(archive: Path, staging: Path, url: str) -> None:
    name = url.lower()
    if name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                target = (staging / member).resolve()
                if not str(target).startswith(str(staging.resolve())):
                    raise DataFormatError(url, None, f"archive member {member!r} escapes the extraction directory",
                                          "do not use this archive")
            zf.extractall(staging)
    elif name.endswith((".tar.gz", ".tgz", ".tar")):
        with tarfile.open(archive) as tf:
            tf.extractall(staging, filter="data")
    else:
        raise DataFormatError(url, None, "unknown archive type", "expected .zip, .tar or .tar.gz")


# ---------------------------------------------------------------------------------------------------------------------
# verification and installation


def _matches(pattern: str, files: list[str]) -> list[str]:
    import fnmatch

    return [f for f in files if fnmatch.fnmatchcase(f, pattern)]


def verify_tree(spec: DatasetSpec, root: Path) -> tuple[dict[str, str], set[str]]:
    """Check required files, known sizes and known SHA-256 under ``root``. Returns (hashes computed, files checked)."""
    files = list_files(root)
    if spec.ratings_glob and not any(_matches(alt, files) for alt in spec.ratings_glob.split("|")):
        raise DataFormatError(root, None, f"no file matching {spec.ratings_glob!r} (the {spec.id} ratings)",
                              spec.manual or f"the directory must hold the extracted {spec.title} files")
    hashes, checked = {}, set()
    for fs in spec.files:
        hits = _matches(fs.path, files)
        if not hits:
            if fs.required and "*" not in fs.path:
                raise DataFormatError(root / fs.path, None, f"required file {fs.path} of {spec.id} is missing",
                                      spec.manual or "fetch the dataset again")
            continue
        for rel in hits:
            size = (root / rel).stat().st_size
            if fs.size is not None and size != fs.size:
                raise DataFormatError(root / rel, None, f"size {size} bytes differs from the expected {fs.size}",
                                      "the file is truncated or from another release; fetch it again")
            if fs.sha256 is not None:
                digest = sha256_file(root / rel)
                hashes[rel] = digest
                if digest != fs.sha256:
                    raise DataFormatError(root / rel, None, f"sha256 {digest} differs from the expected {fs.sha256}",
                                          "the file is corrupted or from another release; fetch it again")
                checked.add(rel)
    return hashes, checked


def _install(spec: DatasetSpec, root: Path, dest: Path, *, source_desc: str, archive: dict | None = None) -> Path:
    hashes, checked = verify_tree(spec, root)
    target = dest / spec.id
    old = None
    if target.exists() or target.is_symlink():
        old = Path(tempfile.mkdtemp(dir=dest, prefix=f".{spec.id}.old-"))
        os.replace(target, old / "previous")
    os.chmod(root, 0o755)  # mkdtemp makes 0700 directories
    try:
        os.replace(root, target)
    except BaseException:
        if old is not None:  # put the previous copy back
            os.replace(old / "previous", target)
            shutil.rmtree(old, ignore_errors=True)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    write_manifest(target, spec.id, source=source_desc, hashes=hashes, checked=checked, archive=archive)
    return target
