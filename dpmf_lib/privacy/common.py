"""What every DP release path of the workbook shares: the ε check and the seed policy.

ε (:func:`check_dp_epsilon`): a DP mechanism takes a finite number > 0, or ``None`` for its non-private variant. NaN
and ±inf raise :class:`~dpmf_lib.errors.ParameterError` — a NaN that reaches a mechanism is almost always a missing
value that pandas produced from ``None`` (or a typo in a YAML grid), and reading it as "non-private" silently labels a
non-private run with a privacy level.

Seeds (:func:`resolve_seed`): a DP release is only private if the adversary cannot replay its noise, so every DP
release API defaults to ``seed=None``, which draws fresh OS entropy (``numpy.random.SeedSequence()``). A fixed seed is
an explicit reproducibility choice (experiments and notebooks pass their params' seed so figures are reproducible);
the release records which one was used (``seed_used``) and whether it was fixed by the caller (``seed_was_fixed``), so
a ledger can tell a replayable release from a fresh one. The fresh entropy is cut to 63 bits so the recorded seed is
an ordinary non-negative int that every seeded function of the workbook accepts (and fits an int64 CSV column).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError

_MASK63 = (1 << 63) - 1


def check_dp_epsilon(epsilon, name: str = "epsilon", *, what: str = "the DP mechanism") -> float | None:
    """``None`` → ``None`` (non-private); a finite number > 0 → float; anything else raises ``ParameterError``."""
    if epsilon is None:
        return None
    if isinstance(epsilon, (bool, np.bool_)):
        raise ParameterError(f"parameter '{name}' of {what} must be a finite number > 0 or None, got {epsilon!r}")
    try:
        v = float(epsilon)
    except (TypeError, ValueError):
        raise ParameterError(f"parameter '{name}' of {what} must be a finite number > 0 or None, "
                             f"got {epsilon!r}") from None
    if math.isnan(v) or math.isinf(v):
        raise ParameterError(f"parameter '{name}' of {what} is {epsilon!r}: only None (YAML null) means "
                             "non-private; give a finite ε > 0 or None")
    if v <= 0:
        raise ParameterError(f"parameter '{name}' of {what} must be > 0, got {epsilon!r} (ε ≤ 0 gives no privacy "
                             "guarantee; use None for the non-private variant)")
    return v


def fresh_seed() -> int:
    """A 63-bit seed from fresh OS entropy (``numpy.random.SeedSequence()``)."""
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0]) & _MASK63


def resolve_seed(seed, name: str = "seed") -> tuple[int | None, bool]:
    """``(seed_used, seed_was_fixed)``: ``None`` → a fresh 63-bit seed and False; a non-negative int → itself and True;
    a ``numpy.random.Generator`` → ``(None, True)`` (the caller owns the stream; nothing to record)."""
    if seed is None:
        return fresh_seed(), False
    if isinstance(seed, np.random.Generator):
        return None, True
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"parameter '{name}' must be None (fresh OS entropy, the default for a DP release), a "
                             f"non-negative int (reproducible, replayable noise) or a numpy Generator, got {seed!r}")
    return int(seed), True
