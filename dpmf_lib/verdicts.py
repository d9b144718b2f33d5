"""Verdicts: how a claim's saved measurements are judged (see :mod:`dpmf_lib.claims` for what is measured).

This module only reads measurements (``measurements.json``, a snapshot row, a notebook's own run) and is applied anew
whenever a report or a notebook's claims table is built. It is therefore not an input of a run: it is left out of
every notebook's code hash (:data:`dpmf_lib.dependencies.NOT_RUN_INPUTS`), so a change of a rule re-judges the
committed snapshot without making a row stale. Nothing here may decide what a run computes or saves (tested:
``tests/test_claims_verdicts.py``).

How a verdict is reached (a reviewer's rules, not a convenience):

* **Interval.** The mean over seeds ± a 95 % Student-t interval. ``deterministic`` claims (a count of a dataset, an
  analytic formula) need one value and have a zero-width interval. Other claims need at least ``min_seeds`` values
  (default: 3 at ``ci``, 5 at ``paper``); seeds that all give the same value mean the seed never reached the
  measurement, which makes the interval a fiction: that is ``inconclusive``.
* **Shares of cells.** A share of the cells of a grid (``Measurement.cells``: e.g. the fraction of ε values at
  which the joint decoder's mean cosine beats the single decoder's) estimates the share of cells whose *expected*
  paired difference is positive. Each cell gets a t-interval over the seeds at the Bonferroni level 1 − 0.05/m (m
  cells), so all m hold together with 95 %; the share's interval is [cells whose interval lies above 0, cells whose
  interval reaches above 0] / m. It needs no independence between the cells — they are not independent: the cells of
  a seed share its split, codebook and attacked users — only between seeds, which is what a seed is. Seeds that give
  the same share are then no sign of a seed that does not reach the measurement (the differences still vary); a cell
  whose non-zero difference is the same in every seed is (``inconclusive``); one that is exactly 0 in every seed is a
  tie and counts as not positive. The estimand of a cell is the expectation over seeds (split, codebook, noise,
  chains, attacked users) of the difference of two means over test users; seeds that attack a uniform subsample
  estimate the same expectation with more variance, which makes the t-interval conservative, not wrong. "Ours" for
  such a claim is the share of cells whose mean difference is positive (the stored per-seed ``values`` are each seed's
  own share); with 5 seeds (df = 4) and m = 9 a cell counts only when its mean is ≳ 5.6 standard errors from 0, so a
  small edge reads as inconclusive, never as a win.
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
from dataclasses import dataclass, field

from .claims import (DIFFERS, INCONCLUSIVE, INDICATIVE, NOT_MEASURED, PROFILE_RANK, REPRODUCED, SHOWN, STANDIN_ONLY,
                     Claim)

CONFIDENCE = 0.95


def rule(claim: Claim) -> str:
    """The judging rule in words, for the report."""
    if claim.tolerance is not None:
        return f"|ours − {claim.reference:g}| ≤ {claim.tolerance:g}"
    if claim.relative_tolerance is not None:
        return f"|ours − {claim.reference:g}| ≤ {claim.relative_tolerance:g}·{abs(claim.reference):g}"
    ref = claim.reference if claim.reference is not None else 0.0
    if claim.direction == "greater":
        return f"ours > {ref:g} + margin {claim.margin:g}"
    if claim.direction == "less":
        return f"ours < {ref:g} − margin {claim.margin:g}"
    return f"ours = {claim.reference:g} exactly"


def decide(claim: Claim, lo: float, hi: float) -> tuple[str, str]:
    """Verdict of an interval [lo, hi] of our value under the claim's rule, and why."""
    ref = claim.reference if claim.reference is not None else 0.0
    if claim.tolerance is not None or claim.relative_tolerance is not None:
        tol = claim.tolerance if claim.tolerance is not None else claim.relative_tolerance * abs(ref)
        a, b = ref - tol, ref + tol
        if a <= lo and hi <= b:
            return REPRODUCED, ""
        if hi < a or lo > b:
            return DIFFERS, ""
        return INCONCLUSIVE, f"interval [{lo:.4g}, {hi:.4g}] straddles the tolerance band [{a:.4g}, {b:.4g}]"
    if claim.direction == "greater":
        line = ref + claim.margin
        if lo > line:
            return REPRODUCED, ""
        if hi <= line:
            return DIFFERS, ("the whole interval is on the wrong side of the reference" if hi <= ref else
                             f"the interval reaches past the reference but not past reference + margin ({line:.4g}): "
                             "an effect smaller than the margin counts as none")
        return INCONCLUSIVE, f"interval [{lo:.4g}, {hi:.4g}] straddles {line:.4g} (reference + margin)"
    if claim.direction == "less":
        line = ref - claim.margin
        if hi < line:
            return REPRODUCED, ""
        if lo >= line:
            return DIFFERS, ("the whole interval is on the wrong side of the reference" if lo >= ref else
                             f"the interval reaches past the reference but not past reference − margin ({line:.4g}): "
                             "an effect smaller than the margin counts as none")
        return INCONCLUSIVE, f"interval [{lo:.4g}, {hi:.4g}] straddles {line:.4g} (reference − margin)"
    if lo == hi:
        return (REPRODUCED, "") if lo == ref else (DIFFERS, "")
    return INCONCLUSIVE, f"values vary over [{lo:.4g}, {hi:.4g}]; an exact claim needs one value"


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


def share_of_cells_interval(cells: list, confidence: float = CONFIDENCE) -> tuple[float, float, float, str]:
    """(point, lo, hi, problem) for a share of cells from ``cells`` (one list of per-cell paired differences per seed;
    None for a seed without the measurement): the share of cells whose mean difference over seeds is positive, and
    the simultaneous (Bonferroni) interval of :mod:`the rules <dpmf_lib.verdicts>`. ``problem`` is non-empty when the
    cells cannot be judged (a seed without cells, a cell not finite in every seed, or one whose non-zero difference
    never varies). A cell that is exactly 0 in every seed (a tie: both sides give the same answer) counts as not
    positive, in the point and both bounds."""
    rows = [r for r in cells if r is not None]
    m = len(rows[0]) if rows else 0
    if len(rows) < len(cells) or not m or any(len(r) != m for r in rows):
        return float("nan"), float("nan"), float("nan"), "a seed lacks the per-cell differences"
    level = 1 - (1 - confidence) / m
    above = reaches = positive = 0
    for k in range(m):
        col = [r[k] for r in rows if math.isfinite(r[k])]
        if len(col) < len(rows) or len(col) < 2:  # never judged on fewer seeds than were run
            return float("nan"), float("nan"), float("nan"), (f"cell {k + 1} of {m} is finite in {len(col)} of "
                                                              f"{len(rows)} seeds")
        if all(v == 0 for v in col):  # an exact tie in every seed (both sides give the same answer): not a win
            continue
        mean, lo, hi = interval(col, level)
        if lo == hi:
            return float("nan"), float("nan"), float("nan"), (f"cell {k + 1} of {m} gave the same difference "
                                                              f"({mean:.4g}) in every seed: the seed does not reach it")
        positive += mean > 0
        above += lo > 0
        reaches += hi > 0
    return positive / m, above / m, reaches / m, ""


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
    asymmetric: bool = False  # [lo, hi] is not mean ± half (a share of cells): show it as an interval

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "mean": self.mean, "lo": self.lo, "hi": self.hi,
                "n": self.n}


def judge_measurement(claim: Claim, m: dict) -> Judgement:
    """The verdict of one real measurement dict (as written to measurements.json)."""
    values = [float(v) for v in (m.get("values") or [m["value"]])]
    if not all(math.isfinite(v) for v in values):
        return Judgement(INCONCLUSIVE, "a seed gave no finite value (NaN or ±inf)", n=len(values), measurement=m)
    mean, lo, hi = interval(values)
    cells, cell_problem, asymmetric = "", "", False
    share = m.get("cells") is not None and claim.unit.startswith("share")
    if share:  # the share of cells whose expected difference is positive, judged cell by cell over the seeds
        point, c_lo, c_hi, cell_problem = share_of_cells_interval(m["cells"])
        if not cell_problem:
            n_cells = len(next(r for r in m["cells"] if r is not None))
            mean, lo, hi, asymmetric = point, c_lo, c_hi, True
            cells = (f"{round(point * n_cells)} of {n_cells} cells have a positive mean difference over the seeds; "
                     f"{round(c_lo * n_cells)} lie above 0 and {round(c_hi * n_cells)} reach above it at 95 % "
                     "simultaneous")
    j = Judgement(INCONCLUSIVE, "", mean, lo, hi, len(values), m, asymmetric=asymmetric)
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
    if cell_problem:
        reasons.append(cell_problem)
    need = claim.seeds_needed(profile)
    if len(values) < need:
        reasons.append(f"{len(values)} seed(s), the claim needs {need} at {profile}")
    elif not claim.deterministic and not share and len(values) > 1 and len(set(values)) == 1:
        reasons.append(f"all {len(values)} seeds gave the same value ({values[0]:.4g}): no spread to judge — the seed "
                       "does not reach this measurement, or the quantity sits at a floor (e.g. an audit that found "
                       "ε_lower = 0 every time: no power)")
    decided, why = decide(claim, lo, hi)
    if reasons:
        j.verdict, j.reason = INCONCLUSIVE, "; ".join(reasons)
    else:
        j.verdict, j.reason = decided, "; ".join(x for x in (why, cells) if x)
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
                             p.hi, p.n, standin[0], parts, p.asymmetric)
        return Judgement(NOT_MEASURED, f"no run has measured it on real {claim.dataset} yet")
    parts = [judge_measurement(claim, m) for m in real]
    first = parts[0]
    if claim.shown_not_judged:
        return Judgement(SHOWN, claim.shown_not_judged, first.mean, first.lo, first.hi, first.n, first.measurement,
                         parts, first.asymmetric)
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
            return Judgement(state, reason, p.mean, p.lo, p.hi, p.n, p.measurement, parts, p.asymmetric)
    return Judgement(REPRODUCED, first.reason if len(parts) == 1 else f"all {len(parts)} settings", first.mean, first.lo,
                     first.hi, first.n, first.measurement, parts, first.asymmetric)


def verdict(claim: Claim, measurements: list[dict]) -> tuple[str, dict | None]:
    """The verdict of ``claim`` and the measurement it rests on (see :func:`judge` for the details)."""
    j = judge(claim, measurements)
    return j.verdict, j.measurement


