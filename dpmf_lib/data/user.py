"""Datasets from a user: a ratings file of your own, usable wherever a dataset id is (``load_ratings``, the
``datasets`` parameter of every experiment, papermill, ``python -m dpmf_lib.reproduce``).

Two ways to name one:

- **Registered** under an id, once: ``python -m data_fetch add my-ratings ratings.csv --format csv-header
  --scale 0.5,5`` stores the spec in ``<data_dir>/user-datasets.yaml`` (``data_dir`` is ``$DPMF_DATA_DIR`` or
  ``<repo>/data``, git-ignored: your paths never enter the repository). Then ``datasets: [my-ratings]``.
- **Inline** in the parameters: ``datasets: [{id: my-ratings, path: /abs/ratings.csv, format: csv-header,
  rating_scale: [0.5, 5]}]`` (optional ``rating_step: 0.5``). A relative ``path`` is relative to the repository
  root (the same for a notebook kernel, papermill and the runner). Loading the parameters registers the spec for the
  process; :func:`dpmf_lib.params.require_datasets` replaces it by its id in ``params`` so experiments see ids.

Formats: ``csv-header`` (a header naming the user, item and rating columns, see
:func:`dpmf_lib.data.loaders.load_csv_header`), ``tab`` (``user<TAB>item<TAB>rating[<TAB>timestamp]``) and
``double-colon`` (``user::item::rating::timestamp``). A user dataset is real data: it is never replaced by a stand-in,
its ``DataSource`` carries the SHA-256 of the file, and the runner records that checksum in ``run.json``'s
``data_state`` so a result goes stale when the file changes. User ids cannot shadow the built-in ids.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from ..errors import ParameterError
from ..paths import REPO_ROOT, data_dir

USER_FORMATS = ("csv-header", "tab", "double-colon")
ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SPEC_FIELDS = ("id", "path", "format", "rating_scale", "rating_step")
#: ``DataSource.note`` of a user dataset starts with this (the runner records its checksum by it)
NOTE_PREFIX = "user dataset"
REGISTRY_FILE = "user-datasets.yaml"
EXAMPLE = "{id: my-ratings, path: /path/to/ratings.csv, format: csv-header, rating_scale: [0.5, 5]}"


@dataclass(frozen=True)
class UserDataset:
    id: str
    path: str  # absolute
    format: str
    rating_scale: tuple[float, float]
    rating_step: float | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["rating_scale"] = list(self.rating_scale)
        if d["rating_step"] is None:
            del d["rating_step"]
        return d


def registry_path() -> Path:
    """Where registered user datasets are kept: ``<data_dir>/user-datasets.yaml`` (outside the tracked files)."""
    return data_dir() / REGISTRY_FILE


def _builtin_ids() -> list[str]:
    from data_fetch.registry import DATASETS

    return list(DATASETS)


def _number(v) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        try:
            v = float(v)
        except ValueError:
            return None
    if not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def parse_scale(raw, where: str = "dataset spec") -> tuple[float, float]:
    """``[lo, hi]`` / ``(lo, hi)`` / ``"lo,hi"`` → (lo, hi), two finite numbers with lo < hi."""
    parts = raw.split(",") if isinstance(raw, str) else raw
    fix = "give the lowest and highest possible rating, e.g. rating_scale: [0.5, 5] (or --scale 0.5,5)"
    if not isinstance(parts, (list, tuple)) or len(parts) != 2:
        raise ParameterError(f"{where}: field 'rating_scale' must be two numbers [lowest, highest], got {raw!r}; {fix}")
    lo, hi = (_number(p) for p in parts)
    if lo is None or hi is None:
        raise ParameterError(f"{where}: field 'rating_scale' holds a value that is not a finite number ({raw!r}); {fix}")
    if not lo < hi:
        raise ParameterError(f"{where}: field 'rating_scale' must have lowest < highest, got {raw!r}; {fix}")
    return lo, hi


def parse_spec(raw, where: str = "dataset spec", *, check_file: bool = True) -> UserDataset:
    """Validate a spec ``{id, path, format, rating_scale[, rating_step]}``; :class:`ParameterError` naming the field
    and the fix otherwise."""
    if not isinstance(raw, dict):
        raise ParameterError(f"{where}: a dataset spec must be a mapping like {EXAMPLE}, got {raw!r}")
    unknown = sorted(set(raw) - set(SPEC_FIELDS))
    if unknown:
        raise ParameterError(f"{where}: unknown field(s) {unknown}; a dataset spec has the fields "
                             f"{', '.join(SPEC_FIELDS)} (rating_step optional), e.g. {EXAMPLE}")
    missing = [f for f in ("id", "path", "format", "rating_scale") if raw.get(f) in (None, "")]
    if missing:
        raise ParameterError(f"{where}: missing field(s) {missing}; e.g. {EXAMPLE}")
    ds_id = raw["id"]
    if not isinstance(ds_id, str) or not ID_PATTERN.match(ds_id):
        raise ParameterError(f"{where}: field 'id' must be a short name of letters, digits, '.', '_' or '-' "
                             f"(starting with a letter or digit), got {ds_id!r}")
    if ds_id in _builtin_ids():
        raise ParameterError(f"{where}: field 'id': {ds_id!r} is a built-in dataset id; choose another id for your "
                             f"file (built-in: {', '.join(_builtin_ids())})")
    fmt = raw["format"]
    if fmt not in USER_FORMATS:
        raise ParameterError(f"{where}: field 'format' must be one of {', '.join(USER_FORMATS)}, got {fmt!r} "
                             "(csv-header: a header line naming the user, item and rating columns)")
    scale = parse_scale(raw["rating_scale"], where)
    step = raw.get("rating_step")
    if step is not None:
        step_v = _number(step)
        if step_v is None or step_v <= 0:
            raise ParameterError(f"{where}: field 'rating_step' must be a finite number > 0 (e.g. 0.5 for half "
                                 f"stars) or left out, got {step!r}")
        step = step_v
    path = raw["path"]
    if not isinstance(path, (str, os.PathLike)):
        raise ParameterError(f"{where}: field 'path' must be a file path, got {path!r}")
    p = Path(os.path.expanduser(str(path)))
    p = (p if p.is_absolute() else REPO_ROOT / p).resolve()
    if check_file and not p.is_file():
        raise ParameterError(f"{where}: field 'path': no file {p}" + ("" if Path(str(path)).is_absolute() else
                             " (a relative path is relative to the repository root)")
                             + "; give the path of your ratings file")
    return UserDataset(id=ds_id, path=str(p), format=fmt, rating_scale=scale, rating_step=step)


# ---------------------------------------------------------------------------------------------------------------------
# the two registries: inline specs (this process) and the user's file

_INLINE: dict[str, UserDataset] = {}


def register_inline(raw, where: str = "dataset spec") -> str:
    """Make an inline spec known to this process; returns its id. The same id with another spec is an error."""
    spec = raw if isinstance(raw, UserDataset) else parse_spec(raw, where)
    old = _INLINE.get(spec.id)
    if old is not None and old != spec:
        raise ParameterError(f"{where}: dataset id {spec.id!r} already names {old.path} ({old.format}, scale "
                             f"{old.rating_scale}) in this session; give this file another id")
    _INLINE[spec.id] = spec
    return spec.id


def registered() -> dict[str, UserDataset]:
    """The datasets of ``<data_dir>/user-datasets.yaml`` (id → spec)."""
    path = registry_path()
    if not path.is_file():
        return {}
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not valid YAML ({exc}); fix or delete the file and add the datasets again "
                             "with `python -m data_fetch add`") from None
    out = {}
    for ds_id, spec in (doc.get("datasets") or {}).items():
        out[ds_id] = parse_spec({**(spec or {}), "id": ds_id}, f"{path}, dataset {ds_id!r}", check_file=False)
    return out


def lookup(dataset_id) -> UserDataset | None:
    """The user dataset named ``dataset_id`` (inline specs of this process first, then the registry file)."""
    if not isinstance(dataset_id, str):
        return None
    if dataset_id in _INLINE:
        return _INLINE[dataset_id]
    return registered().get(dataset_id)


def user_ids() -> list[str]:
    return sorted(set(_INLINE) | set(registered()))


def register_specs_in(params: dict, names=("datasets", "dataset")) -> None:
    """Register every inline spec found in ``params[name]`` (a list, or a single value) for this process."""
    for name in names:
        v = params.get(name)
        for k, entry in enumerate(v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(entry, dict):
                register_inline(entry, f"parameter '{name}', entry {k + 1}")


def _write_registry(specs: dict[str, UserDataset]) -> Path:
    path = registry_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"datasets": {k: {f: v for f, v in s.as_dict().items() if f != "id"} for k, s in sorted(specs.items())}}
    tmp = path.with_name(path.name + f".tmp-{os.getpid()}")
    tmp.write_text("# Datasets registered with `python -m data_fetch add` (kept outside the repository's tracked "
                   "files).\n" + yaml.safe_dump(body, sort_keys=True, allow_unicode=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


def add(dataset_id: str, path, fmt: str, rating_scale, rating_step=None, *, replace: bool = False) -> UserDataset:
    """Register a user's ratings file under ``dataset_id`` after reading it once (a bad file fails here, with the
    line and the fix, not in the middle of an experiment)."""
    raw = {"id": dataset_id, "path": str(Path(os.path.expanduser(str(path))).resolve()), "format": fmt,
           "rating_scale": rating_scale}
    if rating_step is not None:
        raw["rating_step"] = rating_step
    spec = parse_spec(raw, f"data_fetch add {dataset_id}")
    _check_not_taken(registered(), spec, replace)
    load_user(spec)  # raises DataFormatError naming the file, the line and the fix
    with _registry_lock():  # read, change and write under the lock: concurrent adds are all kept
        specs = registered()
        _check_not_taken(specs, spec, replace)
        specs[dataset_id] = spec
        _write_registry(specs)
    return spec


def _check_not_taken(specs: dict, spec: UserDataset, replace: bool) -> None:
    if spec.id in specs and specs[spec.id] != spec and not replace:
        raise ParameterError(f"data_fetch add {spec.id}: already registered for {specs[spec.id].path}; "
                             "pass --replace to point it at the new file, or choose another id")


def _registry_lock():
    """The data directory's lock, the one :func:`data_fetch.fetch.dest_lock` takes for a fetch (``flock`` on the
    directory): two ``python -m data_fetch add`` at once would otherwise each write the file they read, and only
    the last registration would be kept."""
    from data_fetch.fetch import dest_lock

    registry_path().parent.mkdir(parents=True, exist_ok=True)
    return dest_lock(registry_path().parent)


def remove(dataset_id: str) -> None:
    with _registry_lock():
        specs = registered()
        if dataset_id not in specs:
            raise ParameterError(f"data_fetch remove: {dataset_id!r} is not a registered user dataset "
                                 f"(registered: {', '.join(specs) or 'none'})")
        del specs[dataset_id]
        _write_registry(specs)


# ---------------------------------------------------------------------------------------------------------------------
# loading


@lru_cache(maxsize=32)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    from data_fetch.manifest import sha256_file

    return sha256_file(path)


def checksum(spec: UserDataset) -> str | None:
    """SHA-256 of the user's file (None when the file is gone); re-hashed only when its size or mtime changes."""
    try:
        st = os.stat(spec.path)
    except OSError:
        return None
    return _sha256(spec.path, st.st_size, st.st_mtime_ns)


def load_user(spec: UserDataset):
    """The user's file as :class:`~dpmf_lib.data.ratings.Ratings` (``source.real`` True, checksum of the file)."""
    from ..errors import DataFormatError, DatasetUnavailable
    from .loaders import load_format
    from .ratings import DataSource

    digest = checksum(spec)
    if digest is None:
        raise DatasetUnavailable(f"user dataset {spec.id!r}: its file {spec.path} is gone — put it back, or register "
                                 f"the new location with `python -m data_fetch add {spec.id} PATH --format "
                                 f"{spec.format} --scale {spec.rating_scale[0]:g},{spec.rating_scale[1]:g} "
                                 "--replace`")
    source = DataSource(dataset=spec.id, real=True, checksum=digest,
                        note=f"{NOTE_PREFIX} {spec.id} from {spec.path} ({spec.format}, scale "
                             f"{spec.rating_scale[0]:g}–{spec.rating_scale[1]:g})")
    try:
        return load_format(spec.format, spec.path, rating_scale=spec.rating_scale, rating_step=spec.rating_step,
                           source=source)
    except DataFormatError as err:  # the scale and step are the user's (--scale / --step), not the registry's
        again = (f"`python -m data_fetch add {spec.id} {spec.path} --format {spec.format} --scale LO,HI"
                 + (" --step S" if spec.rating_step is not None else "") + " --replace`")
        if "outside the dataset's scale" in err.problem:
            fix = (f"check the file, or register it with the scale its ratings use ({again}; inline: rating_scale: "
                   "[LO, HI])")
        elif "not on the dataset's grid" in err.problem:
            fix = (f"check the file, or register it with the spacing its ratings use (--step S) or with no --step at all "
                   f"(any value within the scale): `python -m data_fetch add {spec.id} {spec.path} --format "
                   f"{spec.format} --scale {spec.rating_scale[0]:g},{spec.rating_scale[1]:g} --replace` (inline: "
                   "rating_step)")
        else:
            raise
        raise DataFormatError(err.path, err.line, err.problem, fix) from None
