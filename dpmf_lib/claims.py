"""The papers' quantitative claims (``params/claims.yaml``), our measurements of them, and the verdicts.

Notebooks attach :class:`Measurement` objects to their DataFrame (:func:`dpmf_lib.outputs.attach`);
:meth:`dpmf_lib.outputs.NotebookRun.replicate` re-runs the experiment at further seeds and merges the values, so a
measurement carries one value per seed (``values``). The runner saves them as ``figures/<name>/measurements.json``
and the report judges every measurement of a claim with :func:`verdict`.

How a verdict is reached (a reviewer's rules, not a convenience):

* **Interval.** The mean over seeds ± a 95 % Student-t interval. ``deterministic`` claims (a count of a dataset, an
  analytic formula) need one value and have a zero-width interval. Other claims need at least ``min_seeds`` values
  (default: 3 at ``ci``, 5 at ``paper``); seeds that all give the same value mean the seed never reached the
  measurement, which makes the interval a fiction: that is ``inconclusive``.
* **Rule.** ``tolerance``/``relative_tolerance``: *reproduced* when the whole interval lies within the tolerance of
  the paper's value, *differs* when it lies wholly outside, else *inconclusive (interval straddles)*.
  ``direction: greater|less`` needs a ``margin``: reproduced when the whole interval is beyond ``reference ± margin``,
  differs when it lies wholly on the other side of that line (the reason says whether it is the wrong sign or an
  effect smaller than the margin, which counts as none: the margin is our reading of the smallest effect the quote
  describes). ``direction: equal`` is for exact counts only.
* **Guards.** ``guards: {name: {min|max: x, why: ...}}`` name preconditions that make the comparison meaningful (a
  baseline that beats item means, a chain that moved and converged, a choice off its grid's edge). The experiment
  measures them (``Measurement.guards``); a guard that fails in any seed, or was not measured, makes the verdict
  ``inconclusive`` with the reason.
* **Profile.** ``min_profile`` (``ci`` or ``paper``) is the smallest profile whose settings can support the claim.
  A measurement from a smaller profile is shown as ``indicative`` with what it would say, never as a verdict.
* **Data.** Only measurements on the real dataset the claim is about are judged; a stand-in's are ``stand-in only``.
* **Not judged.** ``shown_not_judged: reason`` for claims that cannot fail or are about another machine's hardware.
* **All settings.** A claim measured in several settings (datasets, dimensions) is reproduced only when every
  setting is; any setting that differs makes it differ; otherwise it is inconclusive.
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
    ``paper`` had to be cut to fit its budget, issue #20) counts as ``paper``; any other unknown profile as smoke."""

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
CONFIDENCE = 0.95
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

    def rule(self) -> str:
        """The judging rule in words, for the report."""
        if self.tolerance is not None:
            return f"|ours − {self.reference:g}| ≤ {self.tolerance:g}"
        if self.relative_tolerance is not None:
            return f"|ours − {self.reference:g}| ≤ {self.relative_tolerance:g}·{abs(self.reference):g}"
        ref = self.reference if self.reference is not None else 0.0
        if self.direction == "greater":
            return f"ours > {ref:g} + margin {self.margin:g}"
        if self.direction == "less":
            return f"ours < {ref:g} − margin {self.margin:g}"
        return f"ours = {self.reference:g} exactly"

    def seeds_needed(self, profile: str) -> int:
        if self.deterministic:
            return 1
        return max(self.min_seeds or 0, SEEDS_BY_PROFILE.get(profile, 1))

    def decide(self, lo: float, hi: float) -> tuple[str, str]:
        """Verdict of an interval [lo, hi] of our value under this claim's rule, and why."""
        ref = self.reference if self.reference is not None else 0.0
        if self.tolerance is not None or self.relative_tolerance is not None:
            tol = self.tolerance if self.tolerance is not None else self.relative_tolerance * abs(ref)
            a, b = ref - tol, ref + tol
            if a <= lo and hi <= b:
                return REPRODUCED, ""
            if hi < a or lo > b:
                return DIFFERS, ""
            return INCONCLUSIVE, f"interval [{lo:.4g}, {hi:.4g}] straddles the tolerance band [{a:.4g}, {b:.4g}]"
        if self.direction == "greater":
            line = ref + self.margin
            if lo > line:
                return REPRODUCED, ""
            if hi <= line:
                return DIFFERS, ("the whole interval is on the wrong side of the reference" if hi <= ref else
                                 "the right sign, but the whole interval is within the margin: an effect smaller "
                                 "than the margin counts as none")
            return INCONCLUSIVE, f"interval [{lo:.4g}, {hi:.4g}] straddles {line:.4g} (reference + margin)"
        if self.direction == "less":
            line = ref - self.margin
            if hi < line:
                return REPRODUCED, ""
            if lo >= line:
                return DIFFERS, ("the whole interval is on the wrong side of the reference" if lo >= ref else
                                 "the right sign, but the whole interval is within the margin: an effect smaller "
                                 "than the margin counts as none")
            return INCONCLUSIVE, f"interval [{lo:.4g}, {hi:.4g}] straddles {line:.4g} (reference − margin)"
        if lo == hi:
            return (REPRODUCED, "") if lo == ref else (DIFFERS, "")
        return INCONCLUSIVE, f"values vary over [{lo:.4g}, {hi:.4g}]; an exact claim needs one value"


@dataclass(frozen=True)
class Measurement:
    """One measured value of a claim; :meth:`NotebookRun.replicate` fills ``values`` with one value per seed.

    ``setting`` tells apart several measurements of one claim in one run (``"d=16"``); ``guards`` holds the values of
    the claim's guards measured in the same run (name → value).
    """

    claim: str
    value: float
    dataset: str  # Ratings.source.label (stand-ins carry "[synthetic stand-in]")
    real: bool
    note: str = ""
    setting: str = ""
    guards: dict | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["value"] = float(self.value)
        d["guards"] = {k: float(v) for k, v in (self.guards or {}).items()}
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
# judging


def interval(values: list[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, lo, hi): the mean and a Student-t interval; zero width for one value."""
    from scipy import stats

    n = len(values)
    mean = float(sum(values) / n)
    if n < 2:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = float(stats.t.ppf(0.5 + confidence / 2, n - 1)) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


@dataclass
class Judgement:
    """The verdict of one measurement (or of a claim, over its measurements) with the numbers behind it."""

    verdict: str
    reason: str = ""
    mean: float | None = None
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    measurement: dict | None = None
    parts: list = field(default_factory=list)  # per-measurement judgements of a claim

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "mean": self.mean, "lo": self.lo, "hi": self.hi,
                "n": self.n}


def judge_measurement(claim: Claim, m: dict) -> Judgement:
    """The verdict of one real measurement dict (as written to measurements.json)."""
    values = [float(v) for v in (m.get("values") or [m["value"]])]
    if not all(math.isfinite(v) for v in values):
        return Judgement(INCONCLUSIVE, "a seed gave no finite value (NaN or ±inf)", n=len(values), measurement=m)
    mean, lo, hi = interval(values)
    j = Judgement(INCONCLUSIVE, "", mean, lo, hi, len(values), m)
    profile = m.get("profile") or "ci"
    reasons = []
    guard_values = m.get("guards") or {}
    for g in claim.guards:
        got = guard_values.get(g.name)
        got = got if isinstance(got, list) else ([] if got is None else [got])
        if not got:
            reasons.append(f"guard not measured: {g.describe()}")
        elif not all(g.holds(v) for v in got):
            shown = ", ".join(f"{v:.4g}" for v in got)
            reasons.append(f"guard failed: {g.describe()}; measured {shown}")
    need = claim.seeds_needed(profile)
    if len(values) < need:
        reasons.append(f"{len(values)} seed(s), the claim needs {need} at {profile}")
    elif not claim.deterministic and len(values) > 1 and len(set(values)) == 1:
        reasons.append(f"all {len(values)} seeds gave the same value ({values[0]:.4g}): no spread to judge — the seed "
                       "does not reach this measurement, or the quantity sits at a floor (e.g. an audit that found "
                       "ε_lower = 0 every time: no power)")
    decided, why = claim.decide(lo, hi)
    if reasons:
        j.verdict, j.reason = INCONCLUSIVE, "; ".join(reasons)
    else:
        j.verdict, j.reason = decided, why
    if PROFILE_RANK.get(profile, 0) < PROFILE_RANK[claim.min_profile]:
        would = j.verdict + (f" ({j.reason})" if j.reason else "")
        j.verdict, j.reason = INDICATIVE, f"measured at {profile}; the claim needs {claim.min_profile} (would be: {would})"
    return j


def _mine(claim: Claim, measurements: list[dict]) -> tuple[list[dict], list[dict]]:
    mine = [m for m in measurements if m["claim"] == claim.id]
    real = [m for m in mine if m["real"] and m["dataset"] == claim.dataset]
    standin = [m for m in mine if not m["real"] and m["dataset"].split(" [")[0] == claim.dataset]
    return real, standin


def judge(claim: Claim, measurements: list[dict]) -> Judgement:
    """The claim's verdict over every measurement of it on its real dataset (see the module docstring)."""
    real, standin = _mine(claim, measurements)
    if not real:
        if standin:
            parts = [judge_measurement(claim, m) for m in standin]
            p = parts[0]
            return Judgement(STANDIN_ONLY, "measured on a synthetic stand-in only: shown, not evidence", p.mean, p.lo,
                             p.hi, p.n, standin[0], parts)
        return Judgement(NOT_MEASURED, f"no run has measured it on real {claim.dataset} yet")
    parts = [judge_measurement(claim, m) for m in real]
    first = parts[0]
    if claim.shown_not_judged:
        return Judgement(SHOWN, claim.shown_not_judged, first.mean, first.lo, first.hi, first.n, first.measurement,
                         parts)
    labels = [(p.measurement.get("setting") or p.measurement.get("dataset")) for p in parts]
    for state in (INDICATIVE, DIFFERS, INCONCLUSIVE):
        hit = [(lab, p) for lab, p in zip(labels, parts) if p.verdict == state]
        if hit:
            if len(parts) == 1:
                reason = hit[0][1].reason
            else:
                reason = f"{len(hit)} of {len(parts)} settings: " + "; ".join(
                    f"{lab}: {p.reason}" if p.reason else str(lab) for lab, p in hit)
            lab, p = hit[0]
            return Judgement(state, reason, p.mean, p.lo, p.hi, p.n, p.measurement, parts)
    return Judgement(REPRODUCED, "" if len(parts) == 1 else f"all {len(parts)} settings", first.mean, first.lo,
                     first.hi, first.n, first.measurement, parts)


def verdict(claim: Claim, measurements: list[dict]) -> tuple[str, dict | None]:
    """The verdict of ``claim`` and the measurement it rests on (see :func:`judge` for the details)."""
    j = judge(claim, measurements)
    return j.verdict, j.measurement


# ---------------------------------------------------------------------------------------------------------------------
# replicates


def merge_replicates(runs: list[list[dict]], seeds: list[int]) -> list[dict]:
    """Merge the measurement dicts of runs at ``seeds`` (the first is the canonical run) into one dict per measurement,
    keyed by (claim, dataset, setting, occurrence), with ``values`` and per-guard lists over the seeds.

    A measurement missing from some replicate gets NaN there (so its verdict is inconclusive, never silently based on
    fewer seeds).
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
        merged.append({**m0, "value": float(sum(finite) / len(finite)) if finite else float("nan"),
                       "values": values, "seeds": list(seeds), "guards": guards})
    return merged
