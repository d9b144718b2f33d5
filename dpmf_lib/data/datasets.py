"""Dataset access by id: the real data when it has been fetched, else a labelled synthetic stand-in.

``load_ratings(id)`` looks in ``<data_dir>/<id>/`` (``data_dir`` defaults to :func:`dpmf_lib.paths.data_dir`, i.e.
``$DPMF_DATA_DIR`` or ``<repo>/data``). The directory counts only if its ``.manifest.json`` is valid (written last by
``python -m data_fetch``). If it is absent but ``$DPMF_DATA_MIRROR/<id>/`` exists, the mirror is read in place (after
the same file checks as a fetch: required files, known sizes and SHA-256 from the registry) — nothing is copied, so
tests and notebooks never write into ``data/`` implicitly, and nothing is ever downloaded. Real data is returned with
``DataSource(real=True, checksum=<sha256 of the ratings file>)``; the file is re-hashed and must match the manifest
(or the registry, for a mirror). Absent, it raises :class:`DatasetUnavailable` naming ``python -m data_fetch ID``,
unless the caller opts in with ``allow_standin=True`` (the synthetic stand-in of :mod:`dpmf_lib.data.standin`,
``real=False``, labelled everywhere). A damaged copy always raises. The workbook's experiments opt in only for the
datasets in :data:`STANDIN_WHEN_ABSENT` (see :func:`standin_permitted`).

``standin_scale`` and ``seed`` only concern stand-ins: real data is always returned whole (scale it down explicitly,
e.g. with :func:`dpmf_lib.data.splits.sample_items` or ``trim_per_user``). Nothing is cached in the repository: the
only files written are the fetched dataset under ``data_dir`` and large stand-ins under ``data_dir/standins``.

SIFT1M holds vectors, not ratings: use :func:`load_vectors`.
"""

from __future__ import annotations

import glob
import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_fetch.fetch import mirror_dir, verify_tree
from data_fetch.manifest import manifest_problem, read_manifest, sha256_file
from data_fetch.registry import DATASETS, DatasetSpec, get_spec, unavailable_message

from ..errors import DataFormatError, DatasetUnavailable, ParameterError
from ..paths import data_dir as default_data_dir
from .loaders import expand_paths, load_format, read_vecs
from .ratings import DataSource, Ratings
from .standin import load_standin


def _root(data_dir) -> Path:
    return Path(data_dir) if data_dir is not None else default_data_dir()


def _user(dataset_id):
    """The user dataset (:mod:`.user`) that ``dataset_id`` names — an inline spec dict or a user id — else None."""
    from . import user

    if isinstance(dataset_id, dict):
        return user.lookup(user.register_inline(dataset_id))
    if isinstance(dataset_id, str) and dataset_id not in DATASETS:
        return user.lookup(dataset_id)
    return None


def dataset_available(dataset_id: str, *, data_dir=None, include_mirror: bool = True) -> bool:
    """True when the real dataset can be loaded: ``<data_dir>/<id>/`` has a valid manifest, or the mirror holds it."""
    if (u := _user(dataset_id)) is not None:
        return Path(u.path).is_file()
    get_spec(dataset_id)
    if manifest_problem(_root(data_dir) / dataset_id, dataset_id) is None:
        return True
    return include_mirror and mirror_dir(dataset_id) is not None


def _real_location(spec: DatasetSpec, data_dir) -> tuple[Path, str] | None:
    """(directory, "manifest" | "mirror") holding the real files, or None when the dataset is absent.

    A ``data/<id>/`` that exists but fails its manifest check is damaged, not absent: that raises, naming the fix,
    instead of quietly trying the mirror or a stand-in.
    """
    target = _root(data_dir) / spec.id
    problem = manifest_problem(target, spec.id)
    if problem is None:
        return target, "manifest"
    if target.exists():
        raise DatasetUnavailable(f"{spec.id}: the copy in {target} is damaged ({problem}) — run "
                                 f"`python -m data_fetch {spec.id} --force`")
    mirror = mirror_dir(spec.id)
    if mirror is not None:
        verify_tree(spec, mirror)
        return mirror, "mirror"
    return None


def _ratings_files(spec: DatasetSpec, target: Path) -> list[str]:
    pattern = "|".join(f"{glob.escape(str(target))}/{alt}" for alt in spec.ratings_glob.split("|"))
    files = expand_paths(pattern)
    if not files:
        raise DataFormatError(target, None, f"no file matching {spec.ratings_glob!r}", "fetch the dataset again")
    return files


def _checked_checksum(spec: DatasetSpec, target: Path, files: list[str], how: str) -> str:
    """SHA-256 of the ratings file (several files: of their 'path sha256' lines), checked against the manifest (or,
    for a mirror, against the registry's expected value where it has one)."""
    if how == "manifest":
        expected = {rel: info.get("sha256") for rel, info in (read_manifest(target) or {}).get("files", {}).items()}
        fix = f"run `python -m data_fetch {spec.id} --force`"
    else:
        expected = {fs.path: fs.sha256 for fs in spec.files if fs.sha256}
        fix = "the mirror copy is corrupted or from another release"
    lines = []
    for f in files:
        rel = Path(f).relative_to(target).as_posix()
        digest = sha256_file(f)
        if expected.get(rel) not in (None, digest):
            raise DataFormatError(f, None, f"sha256 {digest} differs from the expected {expected[rel]} "
                                  f"({'manifest' if how == 'manifest' else 'registry'})", fix)
        lines.append(f"{rel} {digest}\n")
    if len(files) == 1:
        return lines[0].split()[1]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def _describe_origin(spec: DatasetSpec, target: Path, how: str) -> str:
    if how == "mirror":
        return f"{spec.title} read from the mirror {target}"
    m = read_manifest(target) or {}
    return f"{spec.title} from {target} (fetched {m.get('fetched_at')} from {m.get('source')})"


def load_real(dataset_id: str, *, data_dir=None) -> Ratings:
    """The real dataset from ``<data_dir>/<id>/`` (or the mirror); :class:`DatasetUnavailable` when it is not there."""
    spec = get_spec(dataset_id)
    if spec.kind == "vectors":
        raise ParameterError(f"{dataset_id} holds vectors, not ratings: use dpmf_lib.data.datasets.load_vectors")
    found = _real_location(spec, data_dir)
    if found is None:
        raise DatasetUnavailable(unavailable_message(spec, _absent_reason(spec, data_dir)))
    target, how = found
    files = _ratings_files(spec, target)
    checksum = _checked_checksum(spec, target, files, how)
    source = DataSource(dataset=spec.id, real=True, checksum=checksum, note=_describe_origin(spec, target, how))
    path = files[0] if len(files) == 1 else files
    return load_format(spec.format, path, rating_scale=spec.rating_scale, rating_step=spec.rating_step, source=source)


def netflix_probe(*, data_dir=None):
    """The (customer, movie) pairs of the installed Netflix copy's ``probe.txt`` (the released validation set), or
    None when Netflix is absent or its copy has no probe.txt."""
    from .loaders import load_netflix_probe

    found = _real_location(get_spec("netflix"), data_dir)
    if found is None or not (found[0] / "probe.txt").is_file():
        return None
    return load_netflix_probe(found[0] / "probe.txt")


def yahoo_validation(*, data_dir=None) -> Ratings | None:
    """The installed Yahoo! Music copy's ``validationIdx1.txt`` (the released validation set, in trainIdx1.txt's
    format) as its own :class:`Ratings` (raw ids kept), or None when Yahoo! Music is absent or has no such file."""
    spec = get_spec("yahoo-music")
    found = _real_location(spec, data_dir)
    if found is None or not (found[0] / "validationIdx1.txt").is_file():
        return None
    path = found[0] / "validationIdx1.txt"
    source = DataSource("yahoo-music", True, sha256_file(path), f"validationIdx1.txt of {found[0]}")
    return load_format(spec.format, str(path), rating_scale=spec.rating_scale, rating_step=spec.rating_step,
                       source=source)


def _absent_reason(spec: DatasetSpec, data_dir) -> str:
    where = _root(data_dir) / spec.id
    if spec.available_for_download:
        return f"it is not in {where} — run `python -m data_fetch {spec.id}`"
    return f"it is not in {where}, and {spec.reason.rstrip('.')}"


#: Datasets the workbook's own runs may replace by a labelled stand-in when absent: those that cannot be had on the
#: machines it is built on (not downloadable, or not reachable without a network). ml-100k is the one dataset CI
#: mirrors and ``make data`` fetches, so a notebook never substitutes it: without it, it stops and names the fix.
STANDIN_WHEN_ABSENT = frozenset({"ml-1m", "ml-10m", "netflix", "yahoo-music", "eachmovie", "digg", "sift1m"})


def standin_permitted(dataset_id: str) -> bool:
    """Whether a notebook may run ``dataset_id`` on its labelled stand-in when the real data is absent."""
    return dataset_id in STANDIN_WHEN_ABSENT


def load_ratings(dataset_id: str, *, allow_standin: bool = False, seed: int = 0, standin_scale: float = 1.0,
                 data_dir=None) -> Ratings:
    """The real dataset from ``data/<id>/`` (or ``$DPMF_DATA_MIRROR``).

    Absent, it raises :class:`DatasetUnavailable` naming ``python -m data_fetch ID`` — unless the caller opts in with
    ``allow_standin=True``, which returns the labelled synthetic stand-in (``source.real`` False, label
    "<id> [synthetic stand-in]"). A copy that is present but damaged (manifest, size or checksum wrong) always
    raises: it is never replaced by a stand-in. Unknown ids raise :class:`ParameterError` listing the valid ids.

    ``dataset_id`` may also name a user's dataset (:mod:`dpmf_lib.data.user`): a registered user id, or an inline
    spec ``{id, path, format, rating_scale}``; its file is read as real data (never a stand-in).
    """
    if (u := _user(dataset_id)) is not None:
        from .user import load_user

        return load_user(u)
    spec = get_spec(dataset_id)
    if spec.kind == "vectors":
        raise ParameterError(f"{dataset_id} holds vectors, not ratings: use dpmf_lib.data.datasets.load_vectors")
    if _real_location(spec, data_dir) is not None:
        return load_real(dataset_id, data_dir=data_dir)
    if not allow_standin:
        raise DatasetUnavailable(unavailable_message(spec, _absent_reason(spec, data_dir))
                                 + " (or pass allow_standin=True for its labelled synthetic stand-in)")
    return load_standin(dataset_id, seed=seed, scale=standin_scale, data_root=_root(data_dir))


def real_checksum(dataset_id: str, *, data_dir=None) -> str | None:
    """The checksum :func:`load_ratings` would record for the real dataset now (None when absent; raises when
    damaged). A fetched copy answers from its manifest (sizes checked, no re-hash); a mirror is hashed; a user's
    dataset is the SHA-256 of its file."""
    if (u := _user(dataset_id)) is not None:
        from .user import checksum

        return checksum(u)
    spec = get_spec(dataset_id)
    found = _real_location(spec, data_dir)
    if found is None:
        return None
    target, how = found
    files = [str(target / "sift_base.fvecs")] if spec.kind == "vectors" else _ratings_files(spec, target)
    if how == "mirror":
        return _checked_checksum(spec, target, files, how)
    listed = (read_manifest(target) or {}).get("files", {})
    rels = [Path(f).relative_to(target).as_posix() for f in files]
    if any(not listed.get(rel, {}).get("sha256") for rel in rels):  # an older manifest without hashes: hash now
        return _checked_checksum(spec, target, files, how)
    if len(rels) == 1:
        return listed.get(rels[0], {}).get("sha256")
    lines = "".join(f"{rel} {listed.get(rel, {}).get('sha256')}\n" for rel in rels)
    return hashlib.sha256(lines.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------------------------------
# MovieLens 100K item information

ML100K_GENRES = ("unknown", "Action", "Adventure", "Animation", "Children's", "Comedy", "Crime", "Documentary", "Drama",
                 "Fantasy", "Film-Noir", "Horror", "Musical", "Mystery", "Romance", "Sci-Fi", "Thriller", "War",
                 "Western")


def load_ml100k_item_info(*, data_dir=None):
    """``u.item`` as a DataFrame: item_id, title, release_date, video_release_date, imdb_url and 19 genre flags."""
    import pandas as pd

    spec = get_spec("ml-100k")
    found = _real_location(spec, data_dir)
    if found is None:
        raise DatasetUnavailable(unavailable_message(spec, _absent_reason(spec, data_dir)))
    target = found[0]
    names = ["item_id", "title", "release_date", "video_release_date", "imdb_url", *ML100K_GENRES]
    path = target / "u.item"
    df = pd.read_csv(path, sep="|", header=None, names=names, encoding="latin-1")
    if len(df) != 1682 or df["item_id"].tolist() != list(range(1, 1683)):
        raise DataFormatError(path, None, "expected 1,682 items numbered 1..1682", "fetch ml-100k again")
    return df


# ---------------------------------------------------------------------------------------------------------------------
# vectors (SIFT1M)


@dataclass(frozen=True)
class VectorSet:
    """An ANN benchmark: ``base`` (n, d) and ``query`` (m, d) float32, ``groundtruth`` (m, k) int32 or None."""

    base: np.ndarray
    query: np.ndarray
    groundtruth: np.ndarray | None
    source: DataSource


SIFT_STANDIN_CLUSTERS = 64
SIFT_STANDIN_RANK = 16


def sift_standin(*, seed: int = 0, scale: float = 1.0) -> VectorSet:
    """Synthetic stand-in of SIFT1M: round(scale·1,000,000) base and round(scale·10,000) (≥ 100) query vectors, d=128.

    SIFT descriptors are non-negative gradient histograms with clustered, correlated components, quantised to 0..255.
    The stand-in draws each vector from one of 64 clusters (centres |N(0, 40²)| per component), adds a rank-16
    correlated Gaussian perturbation (std 12 per component) and isotropic noise (std 8), then clips to [0, 255] and
    rounds. Base and queries come from the same law; no ground truth is stored (compute it exactly when needed).
    """
    if isinstance(scale, bool) or not (0 < float(scale) <= 1):
        raise ParameterError(f"standin_scale must be in (0, 1], got {scale!r}")
    d = 128
    n_base = max(1000, int(round(scale * 1_000_000)))
    n_query = max(100, int(round(scale * 10_000)))
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x51F7]))
    centres = np.abs(rng.normal(0.0, 40.0, (SIFT_STANDIN_CLUSTERS, d)))
    basis = rng.normal(0.0, 12.0 / np.sqrt(SIFT_STANDIN_RANK), (SIFT_STANDIN_RANK, d))

    def draw(n):
        out = np.empty((n, d), dtype=np.float32)
        for a in range(0, n, 100_000):
            m = min(100_000, n - a)
            c = rng.integers(0, SIFT_STANDIN_CLUSTERS, m)
            x = centres[c] + rng.standard_normal((m, SIFT_STANDIN_RANK)) @ basis + rng.normal(0.0, 8.0, (m, d))
            out[a:a + m] = np.rint(np.clip(x, 0, 255))
        return out

    base, query = draw(n_base), draw(n_query)
    note = (f"synthetic stand-in for ANN_SIFT1M (1,000,000 base × 128, 10,000 queries), seed {seed}, scale {scale:g}"
            + ("" if scale == 1 else f" → {n_base:,} base, {n_query:,} queries"))
    checksum = hashlib.sha256(f"sift1m-standin-v1-{seed}-{float(scale)!r}".encode()).hexdigest()
    return VectorSet(base, query, None, DataSource("sift1m", False, checksum, note))


def load_vectors(dataset_id: str = "sift1m", *, allow_standin: bool = False, seed: int = 0,
                 standin_scale: float = 1.0, data_dir=None) -> VectorSet:
    """SIFT1M base/query/groundtruth when fetched (or in the mirror); absent, the labelled stand-in if
    ``allow_standin``, else :class:`DatasetUnavailable`."""
    spec = get_spec(dataset_id)
    if spec.kind != "vectors":
        raise ParameterError(f"{dataset_id} holds ratings: use load_ratings")
    found = _real_location(spec, data_dir)
    if found is None:
        if not allow_standin:
            raise DatasetUnavailable(unavailable_message(spec, _absent_reason(spec, data_dir)))
        return sift_standin(seed=seed, scale=standin_scale)
    target, how = found
    base_file = target / "sift_base.fvecs"
    checksum = _checked_checksum(spec, target, [str(base_file)], how)
    gt = target / "sift_groundtruth.ivecs"
    return VectorSet(base=read_vecs(base_file), query=read_vecs(target / "sift_query.fvecs"),
                     groundtruth=read_vecs(gt) if gt.exists() else None,
                     source=DataSource("sift1m", True, checksum, _describe_origin(spec, target, how)))
