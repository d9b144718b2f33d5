"""Per-notebook parameter files: ``params/<name>.yaml`` with ``defaults`` and the profiles ``smoke``, ``ci``, ``paper``.

A profile only overrides names that ``defaults`` declares; any other name — in a profile, or in the ``overrides`` a
notebook or a papermill call passes — is an error naming the file, the profile and the valid names. ``paper`` holds
the paper's settings, ``ci`` what fits the CI budget (minutes on 2 cores), ``smoke`` what runs in seconds for tests.
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


def read_yaml(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except FileNotFoundError:
        raise ParameterError(f"{path}: no such parameter file — create it with `defaults:` and `profiles:` "
                             f"({', '.join(PROFILES)})") from None
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
    resolved = copy.deepcopy(defaults)
    resolved.update(copy.deepcopy(profiles[profile] or {}))
    overrides = overrides or {}
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise _unknown(unknown, defaults, f"overrides for {path.name}")
    resolved.update(copy.deepcopy(overrides))
    resolved["profile"] = profile
    from .data.user import register_specs_in  # inline dataset specs: checked now, known to this process

    register_specs_in(resolved)
    return resolved


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
