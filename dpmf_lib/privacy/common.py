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

from dataclasses import dataclass

import numpy as np

from .. import validate
from ..errors import ParameterError

_MASK63 = (1 << 63) - 1


def check_dp_epsilon(epsilon, name: str = "epsilon", *, what: str = "the DP mechanism") -> float | None:
    """The ε of a DP release that has a non-private variant: :func:`dpmf_lib.validate.epsilon` with None allowed."""
    return validate.epsilon(epsilon, name, allow_none=True, what=what)


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
    try:
        return validate.integer(seed, name, lo=0), True
    except ParameterError:
        raise ParameterError(f"parameter '{name}' must be None (fresh OS entropy, the default for a DP release), a "
                             f"non-negative int (reproducible, replayable noise) or a numpy Generator, "
                             f"got {seed!r}") from None


def seeded(seed, name: str = "seed") -> tuple[np.random.Generator, int | None, bool]:
    """``(generator, seed_used, seed_was_fixed)`` of a DP release: :func:`resolve_seed`, then the generator of the
    seed used (a Generator passed in is used as it is)."""
    seed_used, fixed = resolve_seed(seed, name)
    return validate.generator(seed if seed_used is None else seed_used, name), seed_used, fixed


@dataclass(frozen=True)
class PrivacyRecord:
    """The privacy record of one release, the one shape every DP path reports: the stated ε (None: non-private),
    the ε that holds for what ran (None: none established), the seed policy, and what the ε does not cover."""

    epsilon_stated: float | None
    epsilon_effective: float | None = None
    seed_used: int | None = None
    seed_was_fixed: bool = True
    caveats: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The record as the objective-perturbation runs cache it (``caveats`` a list)."""
        return {"epsilon_stated": self.epsilon_stated, "epsilon_effective": self.epsilon_effective,
                "seed_used": self.seed_used, "seed_was_fixed": self.seed_was_fixed, "caveats": list(self.caveats)}

    def columns(self) -> dict:
        """The record's result-table column: ``epsilon_effective``, NaN where no ε is established."""
        return {"epsilon_effective": np.nan if self.epsilon_effective is None else float(self.epsilon_effective)}


class WithPrivacyRecord:
    """The record's fields as attributes of a result dataclass that holds a :class:`PrivacyRecord` in ``privacy``
    (None at construction: a record of the stated ``epsilon`` alone)."""

    privacy: PrivacyRecord

    def __post_init__(self):
        if self.privacy is None:
            self.privacy = PrivacyRecord(self.epsilon)

    @property
    def epsilon_effective(self) -> float | None:
        return self.privacy.epsilon_effective

    @property
    def seed_used(self) -> int | None:
        return self.privacy.seed_used

    @property
    def seed_was_fixed(self) -> bool:
        return self.privacy.seed_was_fixed

    @property
    def privacy_caveats(self) -> tuple[str, ...]:
        return self.privacy.caveats
