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
    return resolved


def require_positive(params: dict, *names: str) -> None:
    """Raise a :class:`ParameterError` naming the parameter when a value is not a finite number > 0."""
    for n in names:
        v = params.get(n)
        vals = v if isinstance(v, (list, tuple)) else [v]
        for x in vals:
            if x is None or not isinstance(x, (int, float)) or not (x > 0) or x != x or x == float("inf"):
                raise ParameterError(f"parameter '{n}' must be a finite number > 0, got {v!r}")
