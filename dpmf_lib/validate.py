"""One rule per kind of parameter: finite and positive numbers, privacy budgets ε, bounded integers, seeds, unique
(user, item) pairs.

Every check raises :class:`~dpmf_lib.errors.ParameterError` naming the parameter and the fix, and returns the value
as the plain Python number the caller already computed with (``float(x)`` / ``int(x)``), so checking never changes a
result. Booleans are refused wherever a number is wanted: ``True`` is not 1, least of all as ε.

ε (:func:`epsilon`): a finite number > 0 (≥ 0 only where a mechanism gives ε = 0 a meaning, e.g. BLIP's fair
coins). ``None`` has one meaning, "non-private", and is accepted only by callers that have a non-private variant
(``allow_none=True``); NaN and ±inf always raise — a NaN reaching a mechanism is almost always a missing value that
pandas made from ``None``, and reading it as "non-private" would label a non-private run with a privacy level.

Seeds (:func:`generator`): a ``numpy.random.Generator`` is used as it is; an int ≥ 0, a ``SeedSequence`` or a list
of ints ≥ 0 seeds ``numpy.random.default_rng``; ``None`` draws fresh OS entropy (``numpy.random.default_rng()``).
Fresh entropy is what a DP release must default to (noise that anyone can replay protects nothing); a step whose
output must be reproducible (data splits, trimming) passes ``allow_none=False`` and ``None`` raises there.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import ParameterError


def _label(name: str, what: str | None) -> str:
    return f"parameter '{name}'" + (f" of {what}" if what else "")


def _tail(fix: str | None) -> str:
    return f" ({fix})" if fix else ""


def _real(value, name: str, what: str | None, need: str, fix: str | None) -> float:
    """``value`` as a float when it is a real number (not a bool), else a ParameterError saying what is needed."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise ParameterError(f"{_label(name, what)} must be {need}, got {value!r}{_tail(fix)}")
    return float(value)


def finite(value, name: str, *, what: str | None = None, fix: str | None = None) -> float:
    """A finite real number → float."""
    v = _real(value, name, what, "a finite number", fix)
    if not math.isfinite(v):
        raise ParameterError(f"{_label(name, what)} must be a finite number, got {value!r}{_tail(fix)}")
    return v


def positive(value, name: str, *, strict: bool = True, what: str | None = None, fix: str | None = None) -> float:
    """A finite number > 0 (``strict=False``: ≥ 0) → float."""
    need = "a finite number " + ("> 0" if strict else "≥ 0")
    v = _real(value, name, what, need, fix)
    if not math.isfinite(v) or v < 0 or (strict and v == 0):
        raise ParameterError(f"{_label(name, what)} must be {need}, got {value!r}{_tail(fix)}")
    return v


def epsilon(value, name: str = "epsilon", *, allow_none: bool = False, allow_zero: bool = False,
            what: str | None = None, fix: str | None = None) -> float | None:
    """A privacy budget: a finite number > 0 (``allow_zero``: ≥ 0) → float; ``None`` → ``None`` (non-private) where
    ``allow_none``. NaN, ±inf, negative numbers, booleans and non-numbers raise."""
    need = "a finite number " + ("≥ 0" if allow_zero else "> 0") + (" or None (non-private)" if allow_none else "")
    if value is None:
        if allow_none:
            return None
        raise ParameterError(f"{_label(name, what)} must be {need}, got None"
                             f"{_tail(fix or 'this mechanism has no non-private variant')}")
    if isinstance(value, (bool, np.bool_)):
        raise ParameterError(f"{_label(name, what)} must be {need}, got {value!r} (a boolean is not a privacy level)")
    v = _real(value, name, what, need, fix)
    if math.isnan(v) or math.isinf(v):
        only = "only None (YAML null) means non-private; give " if allow_none else "give "
        raise ParameterError(f"{_label(name, what)} is {value!r}: {only}{need}" + _tail(fix))
    if v < 0 or (v == 0 and not allow_zero):
        default = "ε ≤ 0 gives no privacy guarantee" + ("; use None for the non-private variant" if allow_none else "")
        raise ParameterError(f"{_label(name, what)} must be {need}, got {value!r} ({fix or default})")
    return v


def integer(value, name: str, *, lo: int = 1, hi: int | None = None, what: str | None = None,
            fix: str | None = None) -> int:
    """An integer (Python or numpy, not a bool or a float) in ``[lo, hi]`` → int: dimensions, counts, iterations."""
    need = f"an integer in [{lo}, {hi}]" if hi is not None else f"an integer ≥ {lo}"
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < lo
            or (hi is not None and value > hi)):
        raise ParameterError(f"{_label(name, what)} must be {need}, got {value!r}{_tail(fix)}")
    return int(value)


def generator(seed, name: str = "seed", *, allow_none: bool = True) -> np.random.Generator:
    """A ``numpy.random.Generator`` from a seed (module docstring): Generator → itself; int ≥ 0, SeedSequence or list
    of ints ≥ 0 → ``default_rng(seed)``; None → fresh OS entropy, or a ParameterError where ``not allow_none``."""
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is None:
        if allow_none:
            return np.random.default_rng()
        raise ParameterError(f"parameter '{name}' must be a non-negative int or a numpy Generator, got None "
                             "(this step must be reproducible: pass an int seed)")
    if isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if _seed_int(seed):
        return np.random.default_rng(int(seed))
    if isinstance(seed, (list, tuple)) and seed and all(_seed_int(s) for s in seed):
        return np.random.default_rng([int(s) for s in seed])
    none = ", None (fresh OS entropy)" if allow_none else ""
    raise ParameterError(f"parameter '{name}' must be a non-negative int, a list of them, a SeedSequence{none} or a "
                         f"numpy Generator, got {seed!r}")


def _seed_int(s) -> bool:
    return not isinstance(s, (bool, np.bool_)) and isinstance(s, (int, np.integer)) and s >= 0


def unique_pairs(users, items, n_items: int, name: str = "ratings", *, what: str | None = None,
                 fix: str | None = None) -> None:
    """At most one rating per (user, item) pair — the premise of every per-user sensitivity bound computed rating by
    rating (the loaders refuse duplicates; a directly built ``Ratings`` is not checked)."""
    key = np.asarray(users, np.int64) * int(n_items) + np.asarray(items, np.int64)
    u, c = np.unique(key, return_counts=True)
    if (c > 1).any():
        j = int(np.argmax(c > 1))
        k = int(u[j])
        raise ParameterError(f"{_label(name, what)} holds the (user, item) pair ({k // int(n_items)}, "
                             f"{k % int(n_items)}) {int(c[j])} times: the privacy bound counts each pair once"
                             + _tail(fix or "aggregate or drop the duplicates before fitting"))
