"""The mechanism interface of the privacy–utility frontier: bring your own mechanism.

A mechanism is a class whose instances are one configuration (constructor keyword arguments = one point of its
hyper-parameter grid) and which implements

- ``fit(train, epsilon, delta, seed) -> Release``: train on a :class:`~dpmf_lib.data.ratings.Ratings` at the target
  (ε, δ) — ε in the mechanism's own unit (``unit``), δ the target δ (0 for a pure-ε mechanism) — with ``seed`` the
  reproducibility choice of :func:`dpmf_lib.privacy.common.resolve_seed`;
- the class attributes ``key`` (a short id, the frontier's ``key`` column) and ``label`` (the legend text).

The :class:`Release` it returns carries

- ``predict(users, items)``: predicted ratings for (user, item) pairs of the training id space (the frontier clips
  them to the rating scale, a post-processing);
- ``privacy()``: the privacy ledger's :class:`~dpmf_lib.privacy.ledger.LedgerEntry` of what ran — the neighbouring
  relation (``unit``: its first word ``user`` or ``rating`` is the frontier's unit), the stated and the provable
  (ε, δ), the accounting (``accounting_note``, ``pld_epsilon`` / ``rdp_epsilon``), the premises (``conditions``,
  ``premise_broken``) — the one record of those fields in the workbook, so a user-defined mechanism lands on the
  frontier exactly like the workbook's own;
- ``record``: the seed policy as the workbook's :class:`~dpmf_lib.privacy.common.PrivacyRecord`
  (:func:`privacy_record` builds it from the entry);
- ``published``: what the release makes public, as one array (item factors, noisy statistics, ...): the black-box
  audit (:func:`audit_mechanism`, :mod:`dpmf_lib.privacy.audit`) tells neighbouring datasets apart from it.

A user-defined mechanism is listed in ``params/extra_privacy_frontier.yaml`` under ``custom_mechanisms`` by import
path (``package.module:Class``) with its grid and ε list; :func:`load_mechanism` resolves it and
:func:`check_mechanism` checks the class before anything runs. ``docs/mechanisms.md`` has a worked example.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from ..errors import ParameterError
from . import audit as au
from .common import PrivacyRecord


@dataclass
class Release:
    """What a mechanism's ``fit`` returns (module docstring). ``predictor(users, items)`` → float array."""

    predictor: Callable[[np.ndarray, np.ndarray], np.ndarray]
    entry: Any  # dpmf_lib.privacy.ledger.LedgerEntry; None for the non-private variant (fit at ε = None)
    record: PrivacyRecord
    published: np.ndarray | None = None
    extra: dict = field(default_factory=dict)  # columns a mechanism adds to its frontier row (numbers or short text)

    def predict(self, users, items) -> np.ndarray:
        out = np.asarray(self.predictor(np.asarray(users), np.asarray(items)), np.float64)
        if out.shape != (len(users),):
            raise ParameterError(f"predict returned shape {out.shape}, expected ({len(users)},)")
        return out

    def privacy(self):
        """The ledger entry of what ran (neighbouring relation, ε, δ, accounting, premises)."""
        return self.entry


@runtime_checkable
class Mechanism(Protocol):
    """One configuration of a private rating predictor (module docstring)."""

    key: str
    label: str

    def fit(self, train, epsilon: float, delta: float, seed) -> Release: ...


def privacy_record(entry, seed_used, seed_was_fixed: bool) -> PrivacyRecord:
    """The :class:`PrivacyRecord` of a release from its ledger entry: stated ε, the provable ε (None when no finite ε
    holds for what ran), the seed policy, and the entry's caveats and broken premise. ``entry`` None: the
    non-private variant (``fit`` at ε = None)."""
    if entry is None:
        return PrivacyRecord(None, None, seed_used, bool(seed_was_fixed))
    prov = float(entry.epsilon_provable)
    cav = tuple(c for c in (entry.premise_broken and f"premise broken: {entry.premise_broken}", entry.caveats) if c)
    return PrivacyRecord(float(entry.epsilon_stated), prov if math.isfinite(prov) else None, seed_used,
                         bool(seed_was_fixed), cav)


def load_mechanism(path: str) -> type:
    """The class at ``package.module:Class`` (or ``package.module.Class``), checked by :func:`check_mechanism`."""
    if not isinstance(path, str) or not path.strip():
        raise ParameterError(f"a mechanism is named by its import path 'package.module:Class', got {path!r}")
    mod, _, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not mod or not name:
        raise ParameterError(f"mechanism path {path!r}: expected 'package.module:Class'")
    try:
        cls = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError) as exc:
        raise ParameterError(f"mechanism {path!r} cannot be imported: {exc}") from exc
    return check_mechanism(cls)


def check_mechanism(cls) -> type:
    """``cls`` has the interface: ``key`` and ``label`` strings, a ``fit`` method."""
    for a in ("key", "label"):
        if not isinstance(getattr(cls, a, None), str) or not getattr(cls, a):
            raise ParameterError(f"mechanism {cls!r}: class attribute '{a}' must be a non-empty string")
    if not callable(getattr(cls, "fit", None)):
        raise ParameterError(f"mechanism {cls!r}: needs a method fit(train, epsilon, delta, seed) -> Release")
    return cls


def check_release(rel, where: str = "fit") -> Release:
    if not isinstance(rel, Release):
        raise ParameterError(f"{where} must return a dpmf_lib.privacy.mechanism.Release, got {type(rel).__name__}")
    from . import ledger as lg

    lg.check_entry(rel.entry)
    return rel


# ----------------------------------------------------------------------------------------------- audit


def audit_mechanism(mech, d0, d1, epsilon: float, delta: float, n: int, seed: int, *,
                    confidence: float = au.DEFAULT_CONFIDENCE) -> tuple[dict, Any]:
    """Black-box distinguishing audit of ``mech`` (an instance) on neighbouring datasets ``d0`` / ``d1``: ``n`` fits
    on each with fresh seeds, the ``published`` arrays through :func:`dpmf_lib.privacy.audit.audit_releases` (a linear
    test chosen on the calibration half, Clopper–Pearson on the evaluation half) at the entry's δ. Returns (the
    ledger's audit columns — ``epsilon_audited``, the evaluation counts and the audit's power against the entry's
    bound —, the ledger entry of the first run on ``d0``)."""
    rs = np.random.SeedSequence(int(seed)).generate_state(2 * int(n), np.uint64) & np.uint64((1 << 62) - 1)
    R, entry = [], None
    for k, data in enumerate((d0, d1)):
        rows = []
        for t in range(int(n)):
            rel = check_release(mech.fit(data, epsilon, delta, int(rs[k * n + t])))
            if rel.published is None:
                raise ParameterError(f"{type(mech).__name__}: a release without 'published' cannot be audited")
            entry = entry or rel.entry
            rows.append(np.ravel(np.asarray(rel.published, np.float64)))
        R.append(np.stack(rows))
    d = float(entry.delta_provable) if math.isfinite(entry.epsilon_provable) else float(entry.delta_stated)
    res = au.audit_releases(R[0], R[1], delta=d, confidence=confidence)
    bound = (entry.epsilon_provable if math.isfinite(entry.epsilon_provable) else
             entry.epsilon_idealised if math.isfinite(entry.epsilon_idealised) else entry.epsilon_stated)
    ne = res.n_evaluation
    row = {"epsilon_audited": res.epsilon_lower, "epsilon_audited_point": res.epsilon_point, "n_evaluation": ne,
           "n_calibration": res.n_calibration, "confidence": res.confidence, "audit_delta": res.delta,
           "audit_fp": res.fp, "audit_fn": res.fn, "audit_n0": res.n0, "audit_n1": res.n1,
           "audit_bound": float(bound), "audit_reach": au.reach(ne, delta=d, confidence=confidence),
           "epsilon_detectable": au.detectable_epsilon(ne, 0.0, delta=d, confidence=confidence),
           "epsilon_detectable_over_bound": au.detectable_epsilon(ne, float(bound), delta=d, confidence=confidence)}
    return row, entry
