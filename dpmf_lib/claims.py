"""The papers' quantitative claims (``params/claims.yaml``) and our measurements of them.

Notebooks attach :class:`Measurement` objects to their DataFrame (:func:`dpmf_lib.outputs.attach`); the runner saves
them as ``figures/<name>/measurements.json`` and the report joins them with the claims. A claim is judged only on a
measurement of the real dataset it is about: a value measured on a synthetic stand-in is shown, but its verdict is
"stand-in only", because a stand-in's statistics follow from how it was generated, not from the world.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import ParameterError
from .params import read_yaml
from .paths import params_dir

REPRODUCED = "reproduced"
DIFFERS = "differs"
STANDIN_ONLY = "stand-in only"
NOT_MEASURED = "not yet measured"


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
    tolerance: float | None = None
    relative_tolerance: float | None = None
    direction: str | None = None  # ours compared with reference: greater | less | equal

    def judge(self, value: float) -> str:
        """``reproduced`` or ``differs`` for a real measurement ``value``."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return NOT_MEASURED
        ref = self.reference
        if self.tolerance is not None:
            return REPRODUCED if abs(value - ref) <= self.tolerance else DIFFERS
        if self.relative_tolerance is not None:
            return REPRODUCED if abs(value - ref) <= self.relative_tolerance * abs(ref) else DIFFERS
        if self.direction == "greater":
            return REPRODUCED if value > (ref if ref is not None else 0.0) else DIFFERS
        if self.direction == "less":
            return REPRODUCED if value < (ref if ref is not None else 0.0) else DIFFERS
        # "equal" with no tolerance: exact match only (for counts)
        return REPRODUCED if value == ref else DIFFERS


@dataclass(frozen=True)
class Measurement:
    claim: str
    value: float
    dataset: str  # Ratings.source.label (stand-ins carry "[synthetic stand-in]")
    real: bool
    note: str = ""

    def as_dict(self) -> dict:
        d = asdict(self)
        d["value"] = float(self.value)
        return d


def claims_path() -> Path:
    return params_dir() / "claims.yaml"


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
        missing = {"id", "paper", "where", "quote", "dataset", "reference", "unit", "measures", "notebook"} - set(row)
        if missing:
            raise ParameterError(f"{where}: missing field(s) {sorted(missing)}")
        rules = [r for r in ("tolerance", "relative_tolerance", "direction") if row.get(r) is not None]
        if len(rules) != 1:
            raise ParameterError(f"{where}: give exactly one of tolerance, relative_tolerance, direction (got {rules})")
        if row.get("direction") not in (None, "greater", "less", "equal"):
            raise ParameterError(f"{where}: direction must be greater, less or equal")
        if row["reference"] is None and row.get("direction") is None:
            raise ParameterError(f"{where}: a claim without a reference value needs a direction")
        if row["id"] in seen:
            raise ParameterError(f"{where}: duplicate id")
        seen.add(row["id"])
        claims.append(Claim(**row))
    return claims


def verdict(claim: Claim, measurements: list[dict]) -> tuple[str, dict | None]:
    """The verdict of ``claim`` and the measurement it rests on, from measurement dicts of any notebook."""
    mine = [m for m in measurements if m["claim"] == claim.id]
    real = [m for m in mine if m["real"] and m["dataset"] == claim.dataset]
    if real:
        return claim.judge(real[-1]["value"]), real[-1]
    standin = [m for m in mine if not m["real"] and m["dataset"].split(" [")[0] == claim.dataset]
    if standin:
        return STANDIN_ONLY, standin[-1]
    return NOT_MEASURED, None
