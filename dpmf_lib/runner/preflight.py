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


# -- cost guards ------------------------------------------------------------------------------------------------------

#: parameters (or nested keys) the work of a run grows with: passes, rounds, chain lengths, sizes
COST_NAME = re.compile(r"(^|_)(epochs|iterations|iters|rounds|sweeps|samples|burn_in|d|dims|d_grid|L|T|repeats|"
                       r"n_seeds|n_splits|n_pairs|n_vectors)$")
#: a --set run estimated at this many times its profile's work gets a warning naming the parameters
WARN_FACTOR = 100.0


def _numbers(value) -> list[float]:
    return [float(x) for x in _leaves(value) if isinstance(x, (int, float)) and not isinstance(x, bool)
            and math.isfinite(x)]


def _at(doc, dotted: str):
    for k in dotted.split("."):
        if not isinstance(doc, dict) or k not in doc:
            return None
        doc = doc[k]
    return doc


def _shapes(params: dict) -> list:
    """The published shapes of the datasets a run reads (its ``dataset``/``datasets`` of the registry)."""
    from data_fetch.registry import DATASETS

    ids = [x for k, v in params.items() if DATASET_NAME.search(str(k)) for x in _leaves(v) if isinstance(x, str)]
    return [DATASETS[i].shape for i in ids if i in DATASETS and DATASETS[i].shape is not None]


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:,.1f} GiB"


def memory_floor(name: str, params: dict, overrides: dict) -> tuple[float, str, str] | None:
    """A lower bound of the memory a run needs for the sizes ``overrides`` sets, from the largest dataset's published
    shape: ``(bytes, parameter, how)``, or None when no size was set. The bound counts the arrays the size allocates
    and nothing else: the factors (users + items) × d in float32, twice (U and V); for Hua's S1, the exact solve's d×d
    system per item in float64; for the Balu chapter-3 mechanisms, an items × L codebook of bytes."""
    shapes = _shapes(params)
    if not shapes:
        return None
    scale = params.get("standin_scale")  # a stand-in at a fraction of the published size: a floor stays a floor
    scale = float(scale) if isinstance(scale, (int, float)) and 0 < scale < 1 else 1.0
    users = int(max(s.users for s in shapes) * scale)
    items = int(max(s.items for s in shapes) * scale)
    worst = None
    for dotted, key, value, _ in _walk(overrides, [{}]):
        nums = _numbers(value)
        if not nums:
            continue
        x = max(nums)
        if DIM_NAME.search(key) and key not in ("L", "K"):
            need = (users + items) * x * 4 * 2
            how = f"U and V: ({users:,} users + {items:,} items) × {dotted} × 4 bytes × 2"
            if name.startswith("hua_") or name.startswith("extra_hua"):
                need += items * x * x * 8
                how += f", plus S1's exact solve: {items:,} items × {dotted}² × 8 bytes"
        elif key == "L" and "K" in params and name.startswith(("balu_fig3", "balu_table1", "balu_table3")):
            need, how = items * x, f"the codebook: {items:,} items × L bytes"
        else:
            continue
        if worst is None or need > worst[0]:
            worst = (need, f"{dotted} = {value!r}", how)
    return worst


def recorded_minutes(name: str, profile: str) -> float | None:
    """How long the last successful run of ``name`` at ``profile`` took: its ``figures/<name>/run.json``, else the
    params file's ``# measured <profile>:`` line, else (paper) the snapshot's ``run.json``."""
    import json

    from ..params import params_path
    from ..paths import figures_dir

    try:
        run = json.loads((figures_dir() / name / "run.json").read_text())
        if run.get("status") == "ok" and run.get("profile") == profile and run.get("runtime_s"):
            return float(run["runtime_s"]) / 60
    except (OSError, ValueError):
        pass
    try:
        for line in params_path(name).read_text(encoding="utf-8").splitlines():
            m = re.match(rf"#\s*measured {re.escape(profile)}:\s*([\d.]+)\s*min", line)
            if m:
                return float(m.group(1))
    except OSError:
        pass
    return None


def check_costs(name: str, profile: str, overrides: dict, timeout_min: float | None = None, *,
                hand: bool = False) -> list[str]:
    """Refuse (:class:`ParameterError`) a ``--set`` run whose sizes need more memory than this machine has
    (:func:`memory_floor`), naming the parameter; return warnings for one whose passes, rounds or sizes are
    :data:`WARN_FACTOR` times the profile's or more (each parameter with the profile's value, and the time this
    would take from the profile's recorded time) — refused instead under ``--timeout`` when that time is past it,
    and always in a ``hand`` run (papermill or JupyterLab: nobody reads a warning in a cell's output before the
    hours start, and nothing stops the run; the runner is the way to run it anyway)."""
    import psutil

    from ..params import load_params

    base = load_params(name, profile)
    resolved = load_params(name, profile, overrides)
    floor = memory_floor(name, resolved, overrides)
    total = psutil.virtual_memory().total
    if floor and floor[0] > total:
        need, what, how = floor
        raise ParameterError(f"{name}: {what} needs at least {_gib(need)} of memory ({how}); this machine has "
                             f"{_gib(total)} — lower it (the {profile} profile has "
                             f"{_at(base, what.split(' = ')[0])!r})")
    factor, parts = 1.0, []
    for dotted, key, value, _ in _walk(overrides, [{}]):
        if not COST_NAME.search(key):
            continue
        new, old = _numbers(value), _numbers(_at(base, dotted))
        if new and old and max(old) > 0 and max(new) > max(old):
            factor *= max(new) / max(old)
            parts.append(f"{dotted} = {value!r} (the {profile} profile's: {_at(base, dotted)!r})")
    if factor < WARN_FACTOR:
        return []
    minutes = recorded_minutes(name, profile)
    took = "" if minutes is None else f"; its {profile} run took {minutes:.1f} min, so this one would take about " \
                                      f"{_duration(minutes * factor)}"
    text = f"{name}: {', '.join(parts)} is about {factor:.3g} times the {profile} profile's work{took}"
    if timeout_min is not None and minutes is not None and minutes * factor > timeout_min:
        raise ParameterError(f"{text}, past --timeout {timeout_min:g} min — lower it")
    if hand:
        raise ParameterError(f"{text}; a run by hand (papermill, JupyterLab) refuses this much — lower it, or run it "
                             f"with `python -m dpmf_lib.reproduce --only {name} --set ...`, which warns and goes on")
    return [f"warning: {text}"]


def preflight(name: str, profile: str, overrides: dict, timeout_min: float | None = None, *,
              hand: bool = False) -> list[str]:
    """Every check of a run with ``overrides`` before any work starts, wherever it was started: the values
    (:func:`check_set_values`) and the costs (:func:`check_costs`); returns the warnings. The runner calls it before
    starting a kernel, :class:`dpmf_lib.outputs.NotebookRun` in a run by hand (``hand=True``) before the experiment.
    :func:`dpmf_lib.params.load_params` (names, nested keys, kinds) must have accepted ``overrides`` first."""
    if not overrides:
        return []
    check_set_values(name, profile, overrides)  # ε, dataset ids, sizes
    return check_costs(name, profile, overrides, timeout_min, hand=hand)  # memory, work


def _duration(minutes: float) -> str:
    for unit, size in (("years", 525_960.0), ("days", 1440.0), ("h", 60.0)):
        if minutes >= size:
            return f"{minutes / size:,.3g} {unit}"
    return f"{minutes:.3g} min"


# -- a real dataset much larger than the run its profile was measured on ----------------------------------------------

#: a `paper` run estimated past this many minutes on the real data present (and at least twice its recorded time) is
#: refused before it starts, naming paper-full: the real copy replaces a stand-in cut to fit `paper`'s budget
FULL_DATA_MINUTES = 120.0


def _real_ratings(dataset_id: str) -> int | None:
    """Ratings of the installed real copy of ``dataset_id`` (its manifest's parse, else the published count), or None
    when it is absent."""
    from data_fetch.manifest import read_manifest
    from data_fetch.registry import DATASETS

    from ..data.datasets import _real_location

    spec = DATASETS.get(dataset_id)
    if spec is None or spec.kind != "ratings" or spec.shape is None:
        return None
    try:
        found = _real_location(spec, None)
    except Exception:  # a damaged copy: the run itself says so
        return None
    if found is None:
        return None
    parsed = (read_manifest(found[0]) or {}).get("parsed") or {}
    return int(parsed["ratings"]) if parsed.get("ratings") else spec.shape.ratings


def _run_ratings(params: dict, dataset_id: str, real: int | None) -> float:
    """Ratings a run reads of ``dataset_id``: the real copy when present (``real``), else its stand-in at
    ``standin_scale`` of the published shape; either way capped by ``max_ratings``."""
    from data_fetch.registry import DATASETS

    spec = DATASETS[dataset_id]
    n = float(real) if real is not None else spec.shape.ratings * float(params.get("standin_scale") or 1.0)
    cap = params.get("max_ratings")
    return min(n, float(cap)) if isinstance(cap, (int, float)) and not isinstance(cap, bool) and cap > 0 else n


def full_data_estimate(name: str, profile: str, overrides: dict | None = None) -> str | None:
    """At ``paper``: when a real dataset the run reads is installed where the recorded `paper` run read a stand-in
    cut to its budget, the time the run would take, from the recorded per-rating cost (recorded minutes over the
    ratings that run read); a message naming ``paper-full`` when that is past :data:`FULL_DATA_MINUTES` and at least
    twice the recorded time, else None."""
    from data_fetch.registry import DATASETS

    from ..data.datasets import standin_permitted
    from ..params import load_params, params_path, read_yaml

    if profile != "paper":
        return None
    params = load_params(name, profile, overrides or {})
    ids = [x for k, v in params.items() if DATASET_NAME.search(str(k)) for x in _leaves(v)
           if isinstance(x, str) and x in DATASETS and DATASETS[x].kind == "ratings"]
    real = {ds: _real_ratings(ds) for ds in dict.fromkeys(ids)}
    present = {ds: n for ds, n in real.items() if n is not None}
    minutes = recorded_minutes(name, profile)
    if not present or minutes is None:
        return None
    # what the recorded run read: stand-ins, except datasets that never have one (ml-100k: always real)
    before = sum(_run_ratings(params, ds, None if standin_permitted(ds) else real[ds]) for ds in real)
    after = sum(_run_ratings(params, ds, real[ds]) for ds in real)
    if before <= 0 or after <= 2 * before:
        return None
    estimate = minutes * after / before
    if estimate <= FULL_DATA_MINUTES:
        return None
    which = ", ".join(f"{ds} ({n:,} ratings)" for ds, n in present.items() if standin_permitted(ds))
    full = ("run it with `--profile paper-full` to spend that" if "paper-full" in
            (read_yaml(params_path(name)).get("profiles") or {}) else
            "this notebook has no paper-full profile: run it with `--profile paper --set` values of your own to spend "
            "that")
    return (f"{name}: the real {which} is installed: at `paper` this run would read {after:,.0f} ratings where its "
            f"recorded run read {before:,.0f} (a stand-in cut to the profile's budget) and took {minutes:.1f} min, "
            f"so about {_duration(estimate)} at the same cost per rating — {full}, or cap it with "
            f"`--set {name}.max_ratings=N`")
