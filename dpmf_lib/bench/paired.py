"""Paired, interleaved repeats: ratios that hold up on a shared machine.

On a shared 2-core host the speed of the same code drifts by 20-40 % over minutes (a co-tenant's load comes and
goes). A ratio of two timings taken minutes apart then carries that drift; one run per configuration cannot tell it
from an effect. Here every measurement of a group is taken once per *repeat*, the configurations back to back, and a
ratio is formed within each repeat. The group's order is reversed every other repeat (A B C, C B A, A B C, ...: the
ABBA design of drifting measurements): two measurements placed next to each other stay next to each other in every
repeat, each goes first in about half of them (a linear drift inside a pair cancels), and no configuration is always
first after a large allocation. So a caller puts the two sides of its important ratios next to each other; sides
further apart are still taken in the same repeat, only with more time between them. The reported value is the
median of the per-repeat ratios; the range over repeats and how many repeats meet the target go beside it, so a
reader sees whether a "met" rests on every repeat or on the middle one. This is the usual remedy of benchmark
harnesses for drifting machines (several values per benchmark, interleaved A/B runs) applied to this workbook's
same-run ratios.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping

import numpy as np

from . import ratio, record


def interleave(measurements: Mapping[Hashable, Callable[[], float]], repeats: int) -> dict[Hashable, np.ndarray]:
    """Call every measurement once per repeat, in the given order in even repeats and reversed in odd ones; its
    values, in repeat order (shape ``(repeats,)``, or ``(repeats, k)`` for a measurement that returns a tuple of k
    numbers).

    A measurement returns a number (a rate or a time) or a tuple of numbers and prepares whatever it needs itself;
    what it prepares outside its timed part does not count."""
    if not isinstance(repeats, (int, np.integer)) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, got {repeats!r}")
    keys = list(measurements)
    values = {k: [] for k in keys}
    for rep in range(repeats):
        for k in (keys if rep % 2 == 0 else keys[::-1]):
            values[k].append(measurements[k]())
    return {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}


def best_times(fns, repeats: int) -> list[float]:
    """Best wall time (s) of each of ``fns`` over ``repeats`` calls, the calls interleaved in the order of
    :func:`interleave` (reversed every other repeat). Unlike a fixed order, no function always runs straight after
    the same neighbour: in the lsh suite the call right after the 50x heavier qoLSH encode runs markedly slower,
    which a fixed order [qoLSH, ours, faiss] would charge to ours every time."""
    import time

    def timed(fn):
        def measure():
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
        return measure

    values = interleave({i: timed(fn) for i, fn in enumerate(fns)}, repeats)
    return [float(values[i].min()) for i in range(len(fns))]


def spread(values) -> dict:
    """``repeats``, ``low``, ``high`` of a measurement's values over repeats (kept beside a record's median)."""
    v = np.asarray(values, dtype=np.float64)
    return {"repeats": int(v.size), "low": float(v.min()), "high": float(v.max())}


def median_record(name: str, metric: str, values, unit: str, **params) -> dict:
    """A record whose value is the median over repeats, with :func:`spread` beside it (not in ``params``, so that
    ``--compare`` still matches it with an earlier run's record of the same name and parameters)."""
    rec = record(name, metric, float(np.median(values)), unit, **params)
    rec.update(spread(values))
    return rec


def paired_ratio(name: str, numerator, denominator, target: str | None, *, exclude=None,
                 exclude_reason: str = "") -> dict:
    """The ratio of two measurements taken in the same repeats: the median of the per-repeat ratios (``met`` judged
    on it), their range (``low``, ``high``), ``repeats``, and with a target ``repeats_meeting``: in how many
    repeats the ratio alone meets it.

    The two sides are times or rates, never negative. A repeat whose denominator is not positive or whose
    numerator is negative or not finite measured nothing (a difference of two clock readings below the clock's
    resolution is 0 or negative, and divided by it the ratio was inf or *negative*, which meets any "<=" line): it
    is left out of the median and the counts, and ``repeats_left_out`` with a ``note`` says how many. If every
    repeat is left out the value is NaN (written ``NaN`` in the JSON, which Python reads back) and ``met`` None:
    not measured, rather than not met.

    ``exclude`` (booleans, one per repeat) leaves out repeats that a guard measured *in the same repeat* found
    meaningless for this ratio, e.g. a thread-scaling repeat in which the host ran both threads on one core
    (:mod:`dpmf_lib.bench.mf`); they are counted with the others in ``repeats_left_out`` and ``exclude_reason``
    goes into the ``note``. A guard is stated before the numbers are seen and applies to every ratio it concerns.
    With fewer than half of the repeats left, ``met`` is None (no verdict; the note says so): a verdict resting on
    one or two repeats of five is what the repeats are there to avoid."""
    num, den = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    if num.shape != den.shape or num.size == 0:
        raise ValueError(f"{name}: numerator and denominator need the same, non-zero number of repeats "
                         f"({num.shape} vs {den.shape})")
    measured = np.isfinite(num) & np.isfinite(den) & (den > 0) & (num >= 0)
    guarded = np.zeros(num.shape, dtype=bool) if exclude is None else np.asarray(exclude, dtype=bool)
    if guarded.shape != num.shape:
        raise ValueError(f"{name}: exclude needs one flag per repeat ({guarded.shape} vs {num.shape})")
    valid = measured & ~guarded
    left_out = int(num.size - valid.sum())
    excluded = int((measured & guarded).sum())
    reasons = []
    if left_out - excluded:
        reasons.append(f"{left_out - excluded} with a denominator <= 0, or a numerator negative or not finite "
                       f"(below the clock's resolution?)")
    if excluded:
        reasons.append(f"{excluded} {exclude_reason or 'excluded by a guard measured in the same repeat'}")
    if not valid.any():
        out = ratio(name, float("nan"), None)
        out.update(target=target, repeats=0, repeats_left_out=left_out,
                   note=f"not measured: no usable repeat of {num.size} (" + "; ".join(reasons) + ")")
        if target is not None:
            out["repeats_meeting"] = 0
        return out
    per_repeat = num[valid] / den[valid]
    out = ratio(name, float(np.median(per_repeat)), target)
    out.update(spread(per_repeat))
    if target is not None:
        out["repeats_meeting"] = int(sum(bool(ratio(name, x, target)["met"]) for x in per_repeat))
    if left_out:
        out["repeats_left_out"] = left_out
        out["note"] = f"{left_out} of {num.size} repeats left out: " + "; ".join(reasons)
        if 2 * per_repeat.size < num.size:
            out["met"] = None
            out["note"] += "; too few repeats left for a verdict"
    return out
