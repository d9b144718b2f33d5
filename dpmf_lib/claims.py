"""The papers' quantitative claims (``params/claims.yaml``) and our measurements of them: the data model.

Notebooks attach :class:`Measurement` objects to their DataFrame (:func:`dpmf_lib.outputs.attach`);
:meth:`dpmf_lib.outputs.NotebookRun.replicate` re-runs the experiment at further seeds (as many as
:meth:`Claim.seeds_needed` says) and merges the values (:func:`merge_replicates`), so a measurement carries one value per
seed (``values``). The runner saves them as ``figures/<name>/measurements.json``.

How a verdict is reached from them is :mod:`dpmf_lib.verdicts`. The split is deliberate: this module decides what a
run computes and saves (which claims, how many seeds) and is an input of every run
(:func:`dpmf_lib.runner.hashing.run_hash`); the judging rules only read saved measurements, are applied again whenever a
report is built, and so are not (:data:`dpmf_lib.dependencies.NOT_RUN_INPUTS`). A change of a rule re-judges every
snapshot row without making one stale.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import ParameterError
from .params import read_yaml
from .paths import params_dir

REPRODUCED = "reproduced"
DIFFERS = "differs"
INCONCLUSIVE = "inconclusive"
INDICATIVE = "indicative"
SHOWN = "shown, not judged"
STANDIN_ONLY = "stand-in only"
NOT_MEASURED = "not yet measured"
VERDICTS = (REPRODUCED, DIFFERS, INCONCLUSIVE, INDICATIVE, SHOWN, STANDIN_ONLY, NOT_MEASURED)



class _ByProfile(dict):
    """A table by profile in which a named paper-grade profile (``paper-<name>``: the paper's exact grid where
    ``paper`` had to be cut to fit its budget) counts as ``paper``; any other unknown profile as smoke."""

    def _key(self, profile):
        return "paper" if str(profile).startswith("paper-") else profile

    def __missing__(self, profile):
        key = self._key(profile)
        if key in self:
            return self[key]
        raise KeyError(profile)

    def get(self, profile, default=None):
        key = self._key(profile)
        return dict.get(self, key, default)


PROFILE_RANK = _ByProfile({"smoke": 0, "ci": 1, "paper": 2})
#: seeds a non-deterministic claim needs, by the profile its measurement ran at
SEEDS_BY_PROFILE = _ByProfile({"smoke": 1, "ci": 3, "paper": 5})
REQUIRED_FIELDS = ("id", "paper", "where", "quote", "dataset", "reference", "unit", "measures", "notebook",
                   "min_profile")


@dataclass(frozen=True)
class Guard:
    """A precondition measured beside the claim: the value must be ``>= min`` and/or ``<= max``."""

    name: str
    why: str
    min: float | None = None
    max: float | None = None

    def holds(self, value) -> bool:
        if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False  # NaN or ±inf: the guard's quantity was not measured meaningfully
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def describe(self) -> str:
        bounds = " and ".join(s for s in (f"≥ {self.min:g}" if self.min is not None else "",
                                          f"≤ {self.max:g}" if self.max is not None else "") if s)
        return f"{self.name} {bounds} ({self.why})"


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    where: str
    quote: str
    dataset: str
    reference: float | None
    unit: str
    measures: str
    notebook: str
    min_profile: str = "ci"
    tolerance: float | None = None
    relative_tolerance: float | None = None
    direction: str | None = None  # ours compared with reference: greater | less | equal
    margin: float | None = None  # with direction greater|less: how far beyond the reference counts
    deterministic: bool = False  # no seed reaches the value (a dataset count, a formula)
    min_seeds: int | None = None
    shown_not_judged: str | None = None  # the reason the value is shown without a verdict
    guards: tuple[Guard, ...] = field(default_factory=tuple)

    def seeds_needed(self, profile: str) -> int:
        if self.deterministic:
            return 1
        return max(self.min_seeds or 0, SEEDS_BY_PROFILE.get(profile, 1))



@dataclass(frozen=True)
class Measurement:
    """One measured value of a claim; :meth:`NotebookRun.replicate` fills ``values`` with one value per seed.

    ``setting`` tells apart several measurements of one claim in one run (``"d=16"``); ``guards`` holds the values of
    the claim's guards measured in the same run (name → value). ``cells``: for a share of cells (``unit: share …``,
    e.g. the ε values of a grid at which the joint decoder beats the single one), this seed's paired difference in
    every cell, in a fixed order; the value is the share of positive ones. :mod:`dpmf_lib.verdicts` then judges the
    share of cells whose expected difference is positive, from the differences over seeds (cells of one seed share
    its split, codebook and users, so they are not independent draws).
    """

    claim: str
    value: float
    dataset: str  # Ratings.source.label (stand-ins carry "[synthetic stand-in]")
    real: bool
    note: str = ""
    setting: str = ""
    guards: dict | None = None
    cells: tuple[float, ...] | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["value"] = float(self.value)
        d["guards"] = {k: float(v) for k, v in (self.guards or {}).items()}
        if self.cells is None:
            del d["cells"]
        else:
            d["cells"] = [float(v) for v in self.cells]
        return d


def claims_path() -> Path:
    return params_dir() / "claims.yaml"


def _parse_guards(raw, where: str) -> tuple[Guard, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise ParameterError(f"{where}: `guards` must map a guard name to {{min|max: value, why: text}}")
    out = []
    for name, spec in raw.items():
        if not isinstance(spec, dict) or not spec.get("why") or set(spec) - {"min", "max", "why"} \
                or (spec.get("min") is None and spec.get("max") is None):
            raise ParameterError(f"{where}: guard '{name}' needs `why` and at least one of `min`, `max` "
                                 "(and nothing else)")
        for bound in ("min", "max"):
            v = spec.get(bound)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)):
                raise ParameterError(f"{where}: guard '{name}': `{bound}` must be a finite number, got {v!r}")
        out.append(Guard(name=str(name), why=str(spec["why"]), min=spec.get("min"), max=spec.get("max")))
    return tuple(out)


def load_claims(path: Path | None = None) -> list[Claim]:
    path = path or claims_path()
    doc = read_yaml(path) or {}
    rows = doc.get("claims") or []
    fields = set(Claim.__dataclass_fields__)
    claims, seen = [], set()
    for k, row in enumerate(rows, start=1):
        where = f"{path}, claim {k} ({row.get('id', '?')})"
        unknown = set(row) - fields
        if unknown:
            raise ParameterError(f"{where}: unknown field(s) {sorted(unknown)}; valid: {sorted(fields)}")
        missing = set(REQUIRED_FIELDS) - set(row)
        if missing:
            raise ParameterError(f"{where}: missing field(s) {sorted(missing)}")
        rules = [r for r in ("tolerance", "relative_tolerance", "direction") if row.get(r) is not None]
        if len(rules) != 1:
            raise ParameterError(f"{where}: give exactly one of tolerance, relative_tolerance, direction (got {rules})")
        if row.get("direction") not in (None, "greater", "less", "equal"):
            raise ParameterError(f"{where}: direction must be greater, less or equal")
        if row.get("direction") in ("greater", "less"):
            m = row.get("margin")
            if not isinstance(m, (int, float)) or isinstance(m, bool) or m < 0:
                raise ParameterError(f"{where}: a direction claim needs `margin:` (≥ 0, in the claim's unit): how "
                                     "far beyond the reference our value must be to count")
        elif row.get("margin") is not None:
            raise ParameterError(f"{where}: `margin` goes only with direction greater|less")
        if row["reference"] is None and row.get("direction") in (None, "equal"):
            raise ParameterError(f"{where}: a claim without a reference value needs direction greater or less")
        for t in ("tolerance", "relative_tolerance"):
            v = row.get(t)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0
                                  or not math.isfinite(v)):
                raise ParameterError(f"{where}: {t} must be a finite number >= 0, got {v!r}")
        if row["min_profile"] not in ("ci", "paper"):
            raise ParameterError(f"{where}: min_profile must be ci or paper")
        if row["id"] in seen:
            raise ParameterError(f"{where}: duplicate id")
        seen.add(row["id"])
        claims.append(Claim(**{**row, "guards": _parse_guards(row.get("guards"), where)}))
    return claims


# ---------------------------------------------------------------------------------------------------------------------
# replicates


def merge_replicates(runs: list[list[dict]], seeds: list[int]) -> list[dict]:
    """Merge the measurement dicts of runs at ``seeds`` (the first is the canonical run) into one dict per measurement,
    keyed by (claim, dataset, setting, occurrence), with ``values`` and per-guard lists over the seeds.

    A measurement missing from some replicate gets NaN there (so its verdict is inconclusive, never silently based on
    fewer seeds). A share's ``cells`` become one list per seed (None for a seed that lacks the measurement).
    """
    def keyed(run):
        seen, out = {}, {}
        for m in run:
            base = (m["claim"], m["dataset"], m.get("setting", ""))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out[(*base, k)] = m
        return out

    keyed_runs = [keyed(r) for r in runs]
    merged = []
    for key, m0 in keyed_runs[0].items():
        ms = [kr.get(key) for kr in keyed_runs]
        values = [float(m["value"]) if m is not None else float("nan") for m in ms]
        guards = {}
        for g in (m0.get("guards") or {}):
            guards[g] = [float((m.get("guards") or {}).get(g, float("nan"))) if m is not None else float("nan")
                         for m in ms]
        finite = [v for v in values if not math.isnan(v)]
        row = {**m0, "value": float(sum(finite) / len(finite)) if finite else float("nan"),
               "values": values, "seeds": list(seeds), "guards": guards}
        if "cells" in m0:
            row["cells"] = [None if m is None or m.get("cells") is None else [float(v) for v in m["cells"]]
                            for m in ms]
        merged.append(row)
    return merged
