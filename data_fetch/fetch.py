"""Fetch a dataset into ``data/<id>/`` atomically: download (or copy a mirror/directory), verify, install, manifest.

Order of sources: an explicit ``source_dir`` (``--from PATH``: a directory, or the release's archive, checked against
the published checksum where there is one; a dataset's release layout is converted where the loaders need it — the
Netflix Prize's ``training_set.tar``, EachMovie's ``Vote.txt``, see ``CONVERTERS``); else
``$DPMF_DATA_MIRROR/<id>/`` when that directory exists (CI sets ``DPMF_DATA_MIRROR=../shared/data``; a relative path
is taken from the current directory, then from the repository root); else the registry URL when the dataset may be downloaded; else :class:`DatasetUnavailable`.

Steps, each leaving no half-built dataset behind (the whole fetch holds an exclusive lock on ``<dest>``, so two
fetches never clean up each other's work):

0. Recover from an interrupted earlier fetch: remove its ``.<id>.staging-*`` directories and ``.<id>.*.part``
   downloads; a ``.<id>.old-*`` directory holds the previous copy set aside by ``--force`` — it is put back when
   ``<dest>/<id>`` is missing or incomplete (a kill between the two renames of step 4), else removed.

1. Download with a tqdm bar into ``<dest>/.<id>.*.part`` (same filesystem as the target), hashing (md5 and sha256) as
   it streams; it is compared with the registry's archive sha256 when known, else its md5 (GroupLens publishes only
   md5s); the manifest records both digests and which one was checked.
2. Extract into a staging directory ``<dest>/.<id>.staging-*`` (zip members are checked to stay inside; tar uses the
   ``data`` extraction filter; the members' total size is capped by ``max_extracted_bytes``), or copy the mirror
   files into it (symbolic links leading out of the source directory, and anything not a regular file, are refused).
3. Check that the required files exist, that every file with a known checksum/size/line count in the registry
   matches, and that the ratings file parses with the dataset's format, scale and step (vectors: their headers).
4. ``os.replace`` the staging directory to ``<dest>/<id>`` (an older copy is first renamed aside, then removed).
5. Write ``<dest>/<id>/.manifest.json`` LAST (see :mod:`data_fetch.manifest`): without it the directory is not a
   dataset (a later fetch replaces such a directory without ``--force``).

Any failure removes the staging directory and the partial download. Network errors and datasets that cannot be had
raise :class:`~dpmf_lib.errors.DatasetUnavailable` with the registry's explanation; a checksum mismatch raises
:class:`~dpmf_lib.errors.DataFormatError` naming the file where it came from (the source directory, or the URL and
archive member), never the staging copy that is deleted with the error.

A fetch without ``--force`` of a dataset already present re-hashes its files against the manifest: a file corrupted
in place (same size) is fetched again, not accepted.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from contextlib import contextmanager
from pathlib import Path

from dpmf_lib.errors import DataFormatError, DatasetUnavailable
from dpmf_lib.paths import REPO_ROOT, data_dir

from .manifest import MANIFEST_NAME, list_files, manifest_problem, sha256_file, write_manifest
from .registry import DatasetSpec, get_spec, test_override_path, unavailable_message

MIRROR_ENV = "DPMF_DATA_MIRROR"
_CHUNK = 1 << 20
#: cap on what an archive may expand to when its registry entry sets none (see DatasetSpec.max_extracted_bytes)
DEFAULT_MAX_EXTRACTED = 1 << 30
#: ratings files up to this size are parsed before the manifest is written (bigger ones at their first load: the
#: parse needs ~4x the file in memory)
PARSE_LIMIT = 1 << 30


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


def _note(msg: str) -> None:
    from tqdm import tqdm

    # through tqdm: a status line printed while a download bar is active lands above the bar, not glued to it
    tqdm.write(f"data_fetch: {msg}", file=sys.stderr)


@contextmanager
def dest_lock(dest: Path):
    """Exclusive lock on the destination directory for the whole fetch (``flock`` on the directory itself: no lock
    file is left behind). A second fetch into the same directory waits for the first."""
    fd = os.open(dest, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _note(f"waiting for another data_fetch working in {dest} …")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError as exc:  # a filesystem without flock (some NFS): go on, as before locks existed, but say so
            _note(f"cannot lock {dest} ({exc.strerror}); do not run two fetches into it at once")
        yield
    finally:
        os.close(fd)  # releases the lock


def recover_interrupted(spec: DatasetSpec, dest: Path) -> list[str]:
    """Clean up after a fetch of ``spec`` that was killed (call under :func:`dest_lock`); returns what was done.

    ``.<id>.old-*/previous`` is the copy ``--force`` set aside before installing the new one: if ``<dest>/<id>`` is
    now missing or incomplete while that copy is complete, it is put back; otherwise it is stale and removed, as are
    staging directories, partial downloads and a stray temporary manifest.
    """
    target = dest / spec.id
    done = []
    olds = sorted(dest.glob(f".{spec.id}.old-*"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in olds:
        prev = old / "previous"
        if (prev.is_dir() and manifest_problem(prev, spec.id) is None
                and manifest_problem(target, spec.id) is not None):
            if target.is_symlink() or target.is_file():
                target.unlink()
            elif target.exists():
                shutil.rmtree(target)  # the incomplete copy of the interrupted install
            os.replace(prev, target)
            done.append(f"restored {target} from {old.name} (the copy set aside by an interrupted --force fetch)")
        shutil.rmtree(old, ignore_errors=True)
        done.append(f"removed {old.name}")
    for leftover in sorted(dest.glob(f".{spec.id}.staging-*")):
        shutil.rmtree(leftover, ignore_errors=True)
        done.append(f"removed {leftover.name}")
    for part in sorted(dest.glob(f".{spec.id}.*.part")):
        part.unlink(missing_ok=True)
        done.append(f"removed {part.name}")
    if target.is_dir():
        for tmp in target.glob(f"{MANIFEST_NAME}*.tmp"):
            tmp.unlink(missing_ok=True)
    return done


def fetch(dataset_id: str, dest: Path | str | None = None, *, force: bool = False, source_dir: Path | str | None = None,
          use_mirror: bool = True, progress: bool = True) -> Path:
    """Make ``<dest>/<id>/`` a complete, verified copy of the dataset and return that path.

    Nothing is done when it is already present and its files still match the manifest's checksums (unless
    ``force``); a copy that no longer matches is fetched again.
    """
    spec = get_spec(dataset_id)
    dest = Path(dest) if dest is not None else data_dir()
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / spec.id
    with dest_lock(dest):
        for what in recover_interrupted(spec, dest):
            _note(f"{spec.id}: {what}")
        damaged = None
        if not force and source_dir is None:
            # deep: re-hash against the manifest, so a file corrupted in place with its size unchanged is caught
            damaged = manifest_problem(target, spec.id, deep=True)
            if damaged is None:
                return target
            if target.exists():
                _note(f"{spec.id}: {damaged}; installing it again")
            else:
                damaged = None
        try:
            if source_dir is not None:
                if Path(source_dir).is_file():
                    return install_from_archive(spec, Path(source_dir), dest)
                return install_from_directory(spec, Path(source_dir), dest)
            mirror = mirror_dir(spec.id) if use_mirror else None
            if mirror is not None:
                return install_from_directory(spec, mirror, dest)
            if not spec.available_for_download or not spec.url:
                raise DatasetUnavailable(unavailable_message(spec))
            return install_from_url(spec, dest, progress=progress)
        except DatasetUnavailable as err:
            if damaged:
                raise DatasetUnavailable(f"{target} is damaged ({damaged}) and cannot be replaced: {err}") from err
            raise


# ---------------------------------------------------------------------------------------------------------------------
# sources


def _copy_file(src: Path, dst: Path) -> None:
    """Copy one file (a seam for tests that simulate a failure mid-copy)."""
    shutil.copyfile(src, dst)


def _check_source_files(source: Path) -> list[str]:
    """The files of ``source`` to copy, refusing symbolic links that lead out of it and anything not a regular file.

    A link inside a hand-made directory could otherwise install any file of the system (``ratings.dat -> /etc/...``)
    as the dataset; a FIFO or device (``/dev/zero``) would hang or fill the disk during the copy.
    """
    rels = list_files(source)
    for rel in rels:
        src = source / rel
        if src.is_symlink():
            real = src.resolve()
            if not real.is_relative_to(source):
                raise DataFormatError(src, None, f"is a symbolic link to {real}, outside the source directory {source}",
                                      "copy the real file into the directory instead of linking to it")
        try:
            mode = os.stat(src).st_mode
        except OSError as exc:
            raise DataFormatError(src, None, f"cannot be read ({exc.strerror})", "fix or remove it") from None
        if not stat.S_ISREG(mode):
            raise DataFormatError(src, None, "is not a regular file (a device, FIFO or socket)", "remove it")
    return rels


def install_from_directory(spec: DatasetSpec, source: Path, dest: Path) -> Path:
    """Copy the files of ``source`` (a mirror or a hand-made directory) into ``<dest>/<id>/`` atomically."""
    source = Path(source).resolve()
    if not source.is_dir():
        raise DatasetUnavailable(unavailable_message(spec, f"{source} is not a directory"))
    rels = _check_source_files(source)
    staging = Path(tempfile.mkdtemp(dir=dest, prefix=f".{spec.id}.staging-"))
    try:
        for rel in rels:
            out = staging / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            _copy_file(source / rel, out)
        converted = CONVERTERS[spec.id](staging, source) if spec.id in CONVERTERS else None
        return _install(spec, staging, dest, source_desc=f"directory {source}", shown=lambda rel: str(source / rel),
                        converted=converted)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz")


def install_from_archive(spec: DatasetSpec, archive: Path, dest: Path) -> Path:
    """Install the user's own copy of the release archive (``--from ml-1m.zip``, the Netflix Prize's
    ``nf_prize_dataset.tar.gz``): checked against the registry's published checksum where there is one (a repacked
    archive is refused: extract it and install the folder), extracted under the dataset's size cap, then installed
    like a directory."""
    archive = Path(archive).resolve()
    if not archive.name.lower().endswith(ARCHIVE_SUFFIXES):
        raise DataFormatError(archive, None, "is a file but not an archive (.zip, .tar, .tar.gz, .tgz)",
                              "pass the archive as released, or the directory holding the extracted files")
    md5, sha = hashlib.md5(), hashlib.sha256()
    with open(archive, "rb") as fh:
        while block := fh.read(_CHUNK):
            md5.update(block)
            sha.update(block)
    digests = {"md5": md5.hexdigest(), "sha256": sha.hexdigest()}
    algo, expected = (("sha256", spec.archive_sha256) if spec.archive_sha256 else
                      ("md5", spec.archive_md5) if spec.archive_md5 else (None, None))
    if algo and digests[algo] != expected:
        raise DataFormatError(archive, None, f"archive {algo} {digests[algo]} differs from the published {expected} "
                              f"of the {spec.title} release", "if it is a repacked copy of the release, extract it and "
                              f"install the folder: `python -m data_fetch {spec.id} --from DIR` (its files are then "
                              "checked one by one)")
    staging = Path(tempfile.mkdtemp(dir=dest, prefix=f".{spec.id}.staging-"))
    try:
        _extract(archive, staging, archive.name, spec.max_extracted_bytes or DEFAULT_MAX_EXTRACTED)
        root = staging
        entries = list(staging.iterdir())
        if len(entries) == 1 and entries[0].is_dir():  # the usual single top folder (ml-1m/, download/, sift/)
            root = entries[0]
        top = "" if root == staging else f"{root.name}/"
        converted = CONVERTERS[spec.id](root, archive) if spec.id in CONVERTERS else None
        info = {"name": archive.name, **digests, "checked": algo}
        return _install(spec, root, dest, source_desc=f"archive {archive}", archive=info, converted=converted,
                        shown=lambda rel: f"{archive} (archive member {top}{rel})")
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def install_from_url(spec: DatasetSpec, dest: Path, *, progress: bool = True) -> Path:
    """Download the registry archive of ``spec``, verify it, extract and install it."""
    archive, digests = download(spec, dest, progress=progress)
    staging = Path(tempfile.mkdtemp(dir=dest, prefix=f".{spec.id}.staging-"))
    try:
        _extract(archive, staging, spec.url, spec.max_extracted_bytes or DEFAULT_MAX_EXTRACTED)
        root = staging
        entries = [p for p in staging.iterdir()]
        if len(entries) == 1 and entries[0].is_dir():  # the usual single top folder (ml-100k/, ml-10M100K/, sift/)
            root = entries[0]
        top = "" if root == staging else f"{root.name}/"
        info = {"name": spec.url.rsplit("/", 1)[-1], "md5": digests["md5"], "sha256": digests["sha256"],
                "checked": digests["checked"]}  # which digest was compared with the registry (None: observed only)
        if digests["checked"] is None:
            info["note"] = ("no checksum is published for this archive: md5/sha256 are the ones observed at this fetch "
                            "(trust on first use); the files' registry sizes and checksums, where known, were checked")
            _note(f"{spec.id}: {info['note']} (archive sha256 {digests['sha256']})")
        return _install(spec, root, dest, source_desc=spec.url, archive=info,
                        shown=lambda rel: f"{spec.url} (archive member {top}{rel})")
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


def _too_big(url, total, cap) -> DataFormatError:
    return DataFormatError(url, None, f"the archive expands to {total:,} bytes, more than the {cap:,} its dataset can "
                           "hold (max_extracted_bytes in data_fetch/registry.py)",
                           "the archive is corrupted or not the dataset's; do not use it (raise the cap only if the "
                           "upstream archive really grew)")


def _extract(archive: Path, staging: Path, url: str, max_bytes: int = DEFAULT_MAX_EXTRACTED) -> None:
    """Extract ``archive`` into ``staging``: members must stay inside it and expand to at most ``max_bytes``."""
    name = url.lower()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(archive) as zf:
                infos = zf.infolist()
                root = staging.resolve()
                for info in infos:
                    if not (staging / info.filename).resolve().is_relative_to(root):
                        raise DataFormatError(url, None, f"archive member {info.filename!r} escapes the extraction "
                                              "directory", "do not use this archive")
                total = sum(i.file_size for i in infos)
                if total > max_bytes:  # declared sizes: refuse before writing anything
                    raise _too_big(url, total, max_bytes)
                written = 0
                for info in infos:  # stream and count what is really written (declared sizes could lie)
                    out = staging / info.filename
                    if info.is_dir():
                        out.mkdir(parents=True, exist_ok=True)
                        continue
                    out.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(info) as src, open(out, "wb") as dst:
                        while block := src.read(_CHUNK):
                            written += len(block)
                            if written > max_bytes:
                                raise _too_big(url, written, max_bytes)
                            dst.write(block)
        elif name.endswith((".tar.gz", ".tgz", ".tar")):
            with tarfile.open(archive) as tf:
                members = tf.getmembers()  # tar sizes are the real data lengths
                total = sum(m.size for m in members if m.isfile())
                if total > max_bytes:
                    raise _too_big(url, total, max_bytes)
                tf.extractall(staging, members=members, filter="data")
        else:
            raise DataFormatError(url, None, "unknown archive type", "expected .zip, .tar or .tar.gz")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as err:
        raise DataFormatError(url, None, f"the archive is corrupt ({err})", "fetch it again") from None


# ---------------------------------------------------------------------------------------------------------------------
# verification and installation


def _matches(pattern: str, files: list[str]) -> list[str]:
    import fnmatch

    return [f for f in files if fnmatch.fnmatchcase(f, pattern)]


def _count_lines(path: Path) -> int:
    """Lines of a text file (a last line without its newline counts)."""
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        while block := fh.read(_CHUNK):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def verify_tree(spec: DatasetSpec, root: Path, *, shown=None) -> tuple[dict[str, str], set[str]]:
    """Check required files, known sizes, line counts and SHA-256 under ``root``. Returns (hashes computed, files
    checked). ``shown(rel)`` is how errors name a file: where it came from (default: ``root/rel``)."""
    shown = shown or (lambda rel: str(root / rel))
    files = list_files(root)
    root_r = Path(root).resolve()
    for rel in files:  # a mirror read in place must not lead elsewhere either (see _check_source_files)
        if (root / rel).is_symlink() and not (root / rel).resolve().is_relative_to(root_r):
            raise DataFormatError(shown(rel), None, f"is a symbolic link to {(root / rel).resolve()}, outside {root}",
                                  "copy the real file into the directory instead of linking to it")
    if spec.ratings_glob and not any(_matches(alt, files) for alt in spec.ratings_glob.split("|")):
        raise DataFormatError(shown(""), None, f"no file matching {spec.ratings_glob!r} (the {spec.id} ratings)",
                              spec.manual or f"the directory must hold the extracted {spec.title} files")
    hashes, checked = {}, set()
    for fs in spec.files:
        hits = _matches(fs.path, files)
        if not hits:
            if fs.required and "*" not in fs.path:
                raise DataFormatError(shown(fs.path), None, f"required file {fs.path} of {spec.id} is missing",
                                      spec.manual or "fetch the dataset again")
            continue
        for rel in hits:
            size = (root / rel).stat().st_size
            if fs.size is not None and size != fs.size:
                raise DataFormatError(shown(rel), None, f"size {size} bytes differs from the expected {fs.size}",
                                      "the file is truncated or from another release; fetch it again")
            if fs.sha256 is not None:
                digest = sha256_file(root / rel)
                hashes[rel] = digest
                if digest != fs.sha256:
                    raise DataFormatError(shown(rel), None, f"sha256 {digest} differs from the expected {fs.sha256}",
                                          "the file is corrupted or from another release; fetch it again")
                checked.add(rel)
            elif fs.lines is not None:  # no checksum known (ml-1m, ml-10m): the published line count at least
                n = _count_lines(root / rel)
                if n != fs.lines:
                    raise DataFormatError(shown(rel), None, f"has {n:,} lines, the {spec.title} release has "
                                          f"{fs.lines:,}", "the file is truncated or not this dataset's; fetch it again")
    return hashes, checked


def check_parses(spec: DatasetSpec, root: Path, *, shown=None) -> dict:
    """Parse the ratings file(s) under ``root`` with the dataset's format, scale and step (vectors: read the first
    record of each file and check its dimension), so that a file of the right name but the wrong content is refused
    before the manifest calls the copy complete. Returns what the manifest records under ``parsed``."""
    from dpmf_lib.data.loaders import load_format, read_vecs  # lazy: numba

    shown = shown or (lambda rel: str(root / rel))
    try:
        if spec.kind == "vectors":
            for rel in list_files(root):
                if rel.endswith((".fvecs", ".ivecs", ".bvecs")):
                    dim = read_vecs(root / rel, count=1).shape[1]  # also checks size = whole records
                    if rel.endswith(".fvecs") and dim != spec.shape.items:
                        raise DataFormatError(root / rel, None, f"vectors have dimension {dim}, {spec.title} has "
                                              f"{spec.shape.items}", "this is not the dataset's file")
            return {"checked": True, "what": "record size and first dimension header of every vector file"}
        files = sorted({f for alt in spec.ratings_glob.split("|") for f in _matches(alt, list_files(root))})
        total = sum((root / rel).stat().st_size for rel in files)
        if total > PARSE_LIMIT:
            return {"checked": False, "why": f"{total:,} bytes of ratings: parsed at first load, not at fetch"}
        paths = [str(root / rel) for rel in files]
        r = load_format(spec.format, paths if spec.format == "netflix-per-movie" else paths[0],
                        rating_scale=spec.rating_scale, rating_step=spec.rating_step)
    except DataFormatError as err:  # name the file where it came from, not the staging copy
        rel = Path(err.path).resolve().relative_to(Path(root).resolve()).as_posix() \
            if Path(err.path).resolve().is_relative_to(Path(root).resolve()) else None
        raise DataFormatError(shown(rel) if rel else err.path, err.line, err.problem, err.fix) from None
    return {"checked": True, "ratings": r.n_ratings, "users": r.n_users, "items": r.n_items}


def eachmovie_from_votes(staging: Path, source: Path) -> str | None:
    """EachMovie as released: write ``ratings.tsv`` (user<TAB>movie<TAB>rating, rating = 5·score + 1 on 1..6) from
    ``Vote.txt`` (Person_ID, Movie_ID, Score, Weight, Modified; tab- or space-separated) when the copy has no
    ``ratings.tsv``. Returns what was done (None: nothing to convert). A score off the 0, 0.2, …, 1 grid is an error."""
    votes, out = staging / "Vote.txt", staging / "ratings.tsv"
    if out.exists() or not votes.exists():
        return None
    rows = []
    with open(votes, "rb") as fh:
        for k, raw in enumerate(fh, 1):
            fields = raw.split(b"\t") if b"\t" in raw else raw.split()
            if not raw.strip():
                continue
            if len(fields) < 3:
                raise DataFormatError(source / "Vote.txt", k, f"has {len(fields)} field(s), EachMovie's Vote.txt has "
                                      "Person_ID, Movie_ID, Score, Weight, Modified", "this is not the release's file")
            try:
                user, movie, score = int(fields[0]), int(fields[1]), float(fields[2])
            except ValueError:
                raise DataFormatError(source / "Vote.txt", k, f"fields {fields[:3]!r} are not Person_ID, Movie_ID, "
                                      "Score numbers", "this is not the release's file") from None
            rating = 5.0 * score + 1.0
            if not (0.0 <= score <= 1.0) or abs(rating - round(rating)) > 1e-6:
                raise DataFormatError(source / "Vote.txt", k, f"score {score!r} is not one of 0, 0.2, …, 1",
                                      "this is not the release's file (or it was already rescaled: then convert it "
                                      "to ratings.tsv with ratings 1..6 yourself)")
            rows.append(f"{user}\t{movie}\t{int(round(rating))}\n")
    out.write_text("".join(rows), encoding="ascii")
    return f"ratings.tsv written from Vote.txt ({len(rows):,} votes, rating = 5·score + 1)"


def netflix_training_tar(staging: Path, source: Path) -> str | None:
    """The Netflix Prize as released packs its per-movie files in ``training_set.tar`` beside probe.txt and
    qualifying.txt: unpack it to ``training_set/`` (members checked to stay inside) when the copy has no such folder."""
    tar = staging / "training_set.tar"
    if (staging / "training_set").is_dir() or not tar.is_file():
        return None
    _extract(tar, staging, str(source / "training_set.tar"), 4 << 30)  # the release's folder: ~2.1 GB of text
    tar.unlink()
    return "training_set/ unpacked from training_set.tar (the Prize's own packing)"


#: dataset id → converter of the release's layout into the files the loaders read (run on the staging copy)
CONVERTERS = {"eachmovie": eachmovie_from_votes, "netflix": netflix_training_tar}


def shape_differences(spec: DatasetSpec, parsed: dict) -> list[str]:
    """Named warnings for an installed copy whose counts differ from the published release's or a paper's, with the
    registry's note on which filtering we apply and why (e.g. Netflix's 100.5 M ratings against the thesis' 96.6 M)."""
    if not parsed or not parsed.get("checked") or "ratings" not in parsed or spec.shape is None:
        return []
    got = (parsed["users"], parsed["items"], parsed["ratings"])
    out = []
    for where, shape in [("the published release", spec.shape), *spec.paper_shapes.items()]:
        want = (shape.users, shape.items, shape.ratings)
        if got != want:
            out.append(f"{where}: {shape}")
    if not out:
        return []
    text = (f"{spec.id}: your copy has {got[0]:,} users × {got[1]:,} items, {got[2]:,} ratings; differs from "
            + "; ".join(out) + "." + (f" {spec.paper_shape_note}" if spec.paper_shape_note else ""))
    return [text]


def _install(spec: DatasetSpec, root: Path, dest: Path, *, source_desc: str, archive: dict | None = None,
             shown=None, converted: str | None = None) -> Path:
    hashes, checked = verify_tree(spec, root, shown=shown)
    parsed = check_parses(spec, root, shown=shown)
    if converted:
        parsed = {**parsed, "converted": converted}
        _note(f"{spec.id}: {converted}")
    warnings = shape_differences(spec, parsed)
    if parsed and parsed.get("checked") is False and spec.paper_shape_note:  # too big to count here: say it anyway
        warnings = [f"{spec.id}: {parsed.get('why')}; the published release has {spec.shape}. "
                    f"{spec.paper_shape_note}"]
    for w in warnings:
        _note(f"warning: {w}")
    if warnings:
        parsed = {**parsed, "differs": warnings}
    override = test_override_path()
    if override is not None:
        source_desc += f" (file facts from the test registry override {override}, not the release's)"
        _note(f"{spec.id}: expected file facts from the test registry override {override} — not the release's")
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
    write_manifest(target, spec.id, source=source_desc, hashes=hashes, checked=checked, archive=archive, parsed=parsed)
    return target
