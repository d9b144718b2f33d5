"""Checks the runner makes before any kernel starts: the ``--set`` values a notebook would refuse only after its
kernel has started (an ε ≤ 0, an unknown dataset), and work that cannot finish (:mod:`.costs`).

:func:`dpmf_lib.params.load_params` already checks the names, nested keys and kinds of the values; here the values
themselves are checked the way the experiments check them (:mod:`dpmf_lib.validate`, :func:`dpmf_lib.params.
require_datasets`), by what the parameter is — a privacy budget, a dataset, a model size — read from its name. The experiments keep
their own checks: this only moves the refusal before the kernel (it took 23-34 s to get there)."""

from __future__ import annotations

import difflib
import math
import re

from ..errors import ParameterError

#: a parameter (or nested key) holding privacy budgets: eps, epsilons, eps_values, claim_eps, hua_epsilons, …
EPS_NAME = re.compile(r"(^|_)(eps|epsilon|epsilons)(_|$)")
#: a parameter (or nested key) holding dataset ids: dataset, datasets, section5_datasets, …
DATASET_NAME = re.compile(r"(^|_)datasets?$")
#: a parameter (or nested key) holding model sizes: d, mf_d, dims, d_grid, L, K, rank — whole numbers ≥ 1
DIM_NAME = re.compile(r"(^|_)(d|dims|d_grid|L|K|rank)$")


def _leaves(value):
    if isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    else:
        yield value


def _walk(over: dict, seen: list, path: str = ""):
    """(dotted name, last key, value, the params file's values for it) of every key of an override, nested ones too."""
    for k, v in over.items():
        name = f"{path}{k}"
        seen_k = [s[k] for s in seen if isinstance(s, dict) and k in s]
        yield name, str(k), v, seen_k
        if isinstance(v, dict) and not DATASET_NAME.search(str(k)):
            yield from _walk(v, seen_k, name + ".")


def check_set_values(name: str, profile: str, overrides: dict) -> None:
    """Refuse an override the notebook would refuse: a privacy budget that is not a finite number > 0 (≥ 0 for a
    BLIP budget or where the params file itself lists 0: ε = 0 has a meaning there; ``null`` where the params file
    has ``null``, the non-private variant) and
    a dataset id that is neither a registered dataset (built-in or your own) nor a name the params file uses for that
    parameter (an experiment's own data, e.g. ``synthetic``). Raises :class:`ParameterError` naming the notebook's
    parameter, the value and the fix."""
    from ..params import params_path, read_yaml

    doc = read_yaml(params_path(name)) or {}
    files = [doc.get("defaults") or {}] + [b for b in (doc.get("profiles") or {}).values() if isinstance(b, dict)]
    for dotted, key, value, seen in _walk(overrides, files):
        if EPS_NAME.search(key) and not isinstance(value, dict):
            _check_eps(dotted, key, value, seen)
        elif DATASET_NAME.search(key):
            _check_datasets(dotted, value, seen)
        elif DIM_NAME.search(key) and not isinstance(value, dict):
            _check_dims(dotted, value)


def _check_dims(dotted: str, value) -> None:
    for x in _leaves(value):
        if x is None or isinstance(x, str):  # "same", null: the experiment's own tokens
            continue
        if isinstance(x, bool) or not isinstance(x, int) or x < 1:
            raise ParameterError(f"parameter '{dotted}': {x!r} is not a size; its entries are whole numbers ≥ 1 "
                                 "(a dimension, a sketch length, a count)")


def _check_eps(dotted: str, key: str, value, seen: list) -> None:
    leaves = [x for s in seen for x in _leaves(s)]
    allow_zero = key.startswith("blip") or any(x == 0 and not isinstance(x, bool) for x in leaves)  # BLIP's ε = 0
    allow_none = any(x is None for x in leaves)
    need = "finite numbers " + ("≥ 0" if allow_zero else "> 0") + (" or null (non-private)" if allow_none else "")
    for e in _leaves(value):
        if e is None and allow_none or isinstance(e, str):  # a symbolic budget ("4B"): the experiment reads it
            continue
        bad = isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e) or e < 0 or \
            (e == 0 and not allow_zero)
        if bad:
            raise ParameterError(f"parameter '{dotted}': {e!r} is not a privacy budget ε; its entries are {need} "
                                 f"(ε ≤ 0 gives no privacy guarantee)")


def _check_datasets(dotted: str, value, seen: list) -> None:
    from data_fetch.registry import DATASETS

    from ..data import user

    own = {x for s in seen for x in _leaves(s) if isinstance(x, str)}
    valid = list(DATASETS) + user.user_ids() + sorted(own - set(DATASETS))
    entries = value if isinstance(value, (list, tuple)) else [value]
    for ds in entries:
        if ds is None or isinstance(ds, dict):  # "none", or an inline spec (checked when the parameters load)
            continue
        if not isinstance(ds, str) or ds not in valid:
            close = difflib.get_close_matches(str(ds), valid, n=1)
            raise ParameterError(f"parameter '{dotted}': unknown dataset {ds!r}"
                                 + (f" (did you mean '{close[0]}'?)" if close else "")
                                 + f"; valid: {', '.join(valid)}; a file of your own: register it with "
                                 "`python -m data_fetch add ID PATH --format csv-header --scale LO,HI`")
