"""Per-notebook parameter files: ``params/<name>.yaml`` with ``defaults`` and the profiles ``smoke``, ``ci``, ``paper``.

A profile only overrides names that ``defaults`` declares; any other name — in a profile, or in the ``overrides`` a
notebook or a papermill call passes — is an error naming the file, the profile and the valid names. ``paper`` holds
the paper's settings, ``ci`` what fits the CI budget (minutes on 2 cores), ``smoke`` what runs in seconds for tests.

A mapping-valued parameter (``sgd: {epochs: 8, eta0: 0.05, ...}``) is merged key by key: ``overrides: {sgd: {eta0:
0.1}}`` changes ``eta0`` and keeps the other keys. Every key of an override, nested ones included, must be one the
params file uses for that parameter (a mapping keyed by dataset ids takes any dataset id), and its value of a kind the
file gives it (a number, a boolean, a string, a list, a mapping — or anything where the file has ``null``): ``tau:
100`` where ``tau`` is a mapping per dataset, or ``d: true``, is refused naming the parameter. A key repeated in one
YAML mapping is an error (YAML itself would keep the last value silently).
"""

from __future__ import annotations

import copy
import difflib
from pathlib import Path
from typing import Any

import yaml

from . import validate
from .errors import ParameterError
from .paths import params_dir

PROFILES = ("smoke", "ci", "paper")
DEFAULT_PROFILE = "ci"


def params_path(name: str) -> Path:
    return params_dir() / f"{name}.yaml"


class _DuplicateKey(yaml.YAMLError):
    pass


class StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a key repeated in one mapping (safe_load keeps the last value silently)."""


def _mapping_without_duplicates(loader: StrictLoader, node, deep: bool = False):
    seen: dict = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: construct_mapping names it
            continue
        if first is not None:
            raise _DuplicateKey(f"key {key!r} appears twice in one mapping (lines {first} and "
                                f"{key_node.start_mark.line + 1}): YAML would keep the last silently; keep one")
        seen[key] = key_node.start_mark.line + 1
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


def strict_load(text_or_stream) -> Any:
    """YAML like ``yaml.safe_load``, but a key repeated in one mapping raises :class:`yaml.YAMLError`: the loader of
    parameter files and of the runner's ``--set`` values."""
    return yaml.load(text_or_stream, Loader=StrictLoader)  # noqa: S506 (a SafeLoader)


def read_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return strict_load(fh)
    except FileNotFoundError:
        raise ParameterError(f"{path}: no such parameter file — create it with `defaults:` and `profiles:` "
                             f"({', '.join(PROFILES)})") from None
    except _DuplicateKey as exc:
        raise ParameterError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        raise ParameterError(f"{path}: not valid YAML ({exc})") from None


def _unknown(names, valid, where: str) -> ParameterError:
    lines = []
    for n in sorted(names):
        close = difflib.get_close_matches(n, valid, n=1)
        lines.append(f"'{n}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
    return ParameterError(f"{where}: unknown parameter {', '.join(lines)}; valid names are: {', '.join(sorted(valid))}")


def load_params(name: str, profile: str = DEFAULT_PROFILE, overrides: dict | None = None, *,
                path: Path | None = None) -> dict:
    """Resolved parameters of notebook ``name``: defaults, then the profile, then ``overrides``.

    The result also carries ``profile`` (the profile used) so experiments can label their outputs.
    """
    path = Path(path) if path is not None else params_path(name)
    doc = read_yaml(path)
    if not isinstance(doc, dict) or not isinstance(doc.get("defaults"), dict):
        raise ParameterError(f"{path}: expected a mapping with `defaults:` (every parameter) and `profiles:`")
    extra_top = set(doc) - {"defaults", "profiles"}
    if extra_top:
        raise ParameterError(f"{path}: unknown top-level key(s) {sorted(extra_top)}; only `defaults` and `profiles`")
    defaults = doc["defaults"]
    if "profile" in defaults:
        raise ParameterError(f"{path}: `profile` is reserved (it names the block of `profiles:` in use)")
    profiles = doc.get("profiles") or {}
    missing = [p for p in PROFILES if p not in profiles]
    if missing:
        raise ParameterError(f"{path}: profiles {missing} are missing — every parameter file has {list(PROFILES)} "
                             f"(an empty mapping `{{}}` means the defaults)")
    if profile not in profiles:
        raise ParameterError(f"{path}: unknown profile '{profile}'; choose one of {sorted(profiles)}")
    for pname, block in profiles.items():
        block = block or {}
        if not isinstance(block, dict):
            raise ParameterError(f"{path}: profile '{pname}' must be a mapping of parameter: value")
        unknown = set(block) - set(defaults)
        if unknown:
            raise _unknown(unknown, defaults, f"{path}, profile '{pname}'")
    resolved = merged(defaults, profiles[profile] or {})
    overrides = overrides or {}
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise _unknown(unknown, defaults, f"overrides for {path.name}")
    inline_ids = [d.get("id") for n in ("datasets", "dataset")
                  for d in (overrides.get(n) if isinstance(overrides.get(n), list) else [overrides.get(n)])
                  if isinstance(d, dict)]
    for k, v in overrides.items():
        seen = [defaults[k]] + [b[k] for b in profiles.values() if isinstance(b, dict) and k in b]
        check_like(v, seen, k, f"overrides for {path.name}", inline_ids)
    resolved = merged(resolved, overrides)
    resolved["profile"] = profile
    from .data.user import register_specs_in  # inline dataset specs: checked now, known to this process

    register_specs_in(resolved)
    return resolved


def merged(base: dict, over: dict) -> dict:
    """``base`` with ``over`` laid on top, key by key into nested mappings (a copy; neither argument changes)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merged(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def kind_of(v) -> str:
    """The YAML kind of a value: null, boolean, number, string, list, mapping (else its type's name)."""
    import numbers

    import numpy as np

    if v is None:
        return "null"
    if isinstance(v, (bool, np.bool_)):
        return "boolean"
    if isinstance(v, numbers.Real):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, dict):
        return "mapping"
    return type(v).__name__


_KINDS = ("null", "boolean", "number", "string", "list", "mapping")


def _looks_like_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def check_like(value, seen: list, name: str, where: str, more_ids: list | None = None) -> None:
    """Refuse ``value`` for parameter ``name`` (a dotted path for a nested key) when its kind is none of the kinds
    the params file gives it in ``seen`` (its values in ``defaults`` and the profiles; where one of them is ``null``
    any kind goes, and ``null`` itself always does: it means "off" or "the default" to many experiments), and, for a
    mapping, every key that none of them has — with "did you mean" — unless the mapping is keyed by dataset ids,
    where any dataset id goes (built-in, registered, or an inline spec's in ``more_ids``). Recurses into nested
    mappings. Raises :class:`ParameterError`."""
    kinds = {kind_of(s) for s in seen}
    kind = kind_of(value)
    if not seen or "null" in kinds or kind not in _KINDS or kind == "null":
        pass
    elif kind not in kinds:
        example = next(s for s in seen if kind_of(s) in kinds)
        expected = " or ".join(k for k in _KINDS if k in kinds)
        hint = ""
        if kind == "string" and "number" in kinds and _looks_like_number(value):
            hint = (f" (YAML reads {value!r} as a string: write a number with a decimal point, e.g. "
                    f"{float(value):.1f} or {int(float(value)) if float(value).is_integer() else float(value)})")
        elif kind == "boolean" and "number" in kinds:
            hint = " (a boolean is not a number)"
        raise ParameterError(f"{where}: parameter '{name}' must be a {expected} like the params file's "
                             f"{example!r}, got the {kind} {value!r}{hint}")
    if kind != "mapping":
        return
    maps = [s for s in seen if isinstance(s, dict)]
    if not maps:
        return
    known = list(dict.fromkeys(k for m in maps for k in m))
    by_dataset = _keyed_by_dataset(known)
    for key, v in value.items():
        if key in known:
            check_like(v, [m[key] for m in maps if key in m], f"{name}.{key}", where, more_ids)
        elif by_dataset:
            ids = _dataset_ids() + [i for i in more_ids or () if isinstance(i, str)]
            if key not in ids:
                close = difflib.get_close_matches(str(key), ids, n=1)
                raise ParameterError(f"{where}: parameter '{name}' is keyed by dataset id; {key!r} is not one"
                                     + (f" (did you mean '{close[0]}'?)" if close else "")
                                     + f"; its keys now: {', '.join(map(str, known))}")
            check_like(v, [x for m in maps for x in m.values()], f"{name}.{key}", where, more_ids)
        else:
            close = difflib.get_close_matches(str(key), [str(k) for k in known], n=1)
            raise ParameterError(f"{where}: unknown key '{key}' in parameter '{name}'"
                                 + (f" (did you mean '{close[0]}'?)" if close else "")
                                 + f"; its keys are: {', '.join(map(str, known))}")


def _dataset_ids() -> list[str]:
    from data_fetch.registry import DATASETS  # lazy: data_fetch imports dpmf_lib

    from .data import user

    return list(DATASETS) + user.user_ids()


def _keyed_by_dataset(keys: list) -> bool:
    """A mapping keyed by dataset id (``tau: {ml-100k: 100, ...}``, ``dataset_repeats: {}``): every key it has in
    the params file is a dataset id."""
    from data_fetch.registry import DATASETS

    return all(isinstance(k, str) and k in DATASETS for k in keys)


def require_positive(params: dict, *names: str) -> None:
    """Raise a :class:`ParameterError` naming the parameter when a value is not a finite number > 0."""
    for n in names:
        v = params.get(n)
        vals = v if isinstance(v, (list, tuple)) else [v]
        for x in vals:
            validate.positive(x, n)


# Shared validators for the list parameters many experiments take. Called FIRST in ``run()``, so a bad entry stops the
# run before any data is loaded or any baseline is trained (not half-way, after minutes of work).


def _as_list(params: dict, name: str, what: str) -> list:
    """``params[name]`` as a non-empty list; a string (which would iterate over its characters) is refused."""
    if name not in params:
        raise ParameterError(f"parameter '{name}' is missing: give a list of {what}")
    v = params[name]
    if isinstance(v, (str, bytes)) or not isinstance(v, (list, tuple)):
        raise ParameterError(f"parameter '{name}' must be a list of {what} (YAML `{name}: [a, b]`), got {v!r}")
    if len(v) == 0:
        raise ParameterError(f"parameter '{name}' is empty: list at least one of the {what}")
    return list(v)


def require_datasets(params: dict, name: str = "datasets", *, kinds: tuple[str, ...] | None = ("ratings",),
                     extra: tuple[str, ...] = ()) -> list[str]:
    """The dataset ids of ``params[name]``, validated: a non-empty list of distinct registry ids (of one of ``kinds``,
    None: any kind) or of the experiment's own names in ``extra`` (e.g. "synthetic"). Raises :class:`ParameterError`
    naming the parameter, the bad entry and the valid ids.

    Where ratings are wanted, an entry may also be a user's dataset (:mod:`dpmf_lib.data.user`): the id of one
    registered with ``python -m data_fetch add``, or an inline spec ``{id, path, format, rating_scale}``, which is
    checked (each bad field named with its fix), registered for this process and replaced by its id in
    ``params[name]`` — so the experiment that goes on to read ``params[name]`` sees ids only."""
    from data_fetch.registry import DATASETS  # lazy: data_fetch imports dpmf_lib

    from .data import user

    ids = _as_list(params, name, "dataset ids")
    takes_user = kinds is None or "ratings" in kinds
    if takes_user and any(isinstance(ds, dict) for ds in ids):
        ids = [user.register_inline(ds, f"parameter '{name}', entry {k + 1}") if isinstance(ds, dict) else ds
               for k, ds in enumerate(ids)]
        params[name] = list(ids)
    user_valid = user.user_ids() if takes_user else []
    valid = [k for k, spec in DATASETS.items() if kinds is None or spec.kind in kinds] + list(extra)
    for ds in ids:
        if not isinstance(ds, str) or ds not in valid + user_valid:
            close = difflib.get_close_matches(str(ds), valid + user_valid, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            kind_note = "" if kinds is None or ds not in DATASETS else \
                f" ({ds} holds {DATASETS[ds].kind}, this experiment needs {' or '.join(kinds)})"
            own = (f"; your datasets: {', '.join(user_valid)}" if user_valid else "") + \
                ("; a file of your own: register it with `python -m data_fetch add ID PATH --format csv-header "
                 f"--scale LO,HI` or give a spec {user.EXAMPLE}" if takes_user else "")
            raise ParameterError(f"parameter '{name}': unknown dataset {ds!r}{hint}{kind_note}; "
                                 f"valid: {', '.join(valid)}{own}")
    dup = sorted({ds for ds in ids if ids.count(ds) > 1})
    if dup:
        raise ParameterError(f"parameter '{name}' lists {dup} more than once: list each dataset once")
    return ids


def require_epsilons(params: dict, name: str = "epsilons", *, tokens: tuple[str, ...] = ()) -> list:
    """The privacy budgets of ``params[name]``, validated: a non-empty list whose entries are finite numbers > 0 or
    one of the experiment's symbolic ``tokens`` (e.g. "4B"). Raises :class:`ParameterError` naming the parameter and
    the bad entry."""
    values = _as_list(params, name, "privacy budgets ε")
    allowed = "finite numbers > 0" + (f" or {', '.join(repr(t) for t in tokens)}" if tokens else "")
    for e in values:
        if isinstance(e, str) and e.strip() in tokens:
            continue
        try:
            validate.epsilon(e, name)
        except ParameterError:
            raise ParameterError(f"parameter '{name}': entry {e!r} is not a valid ε; entries are {allowed}") from None
    return values
