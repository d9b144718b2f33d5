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
  ``inconclusive`` with the reason, and the reason still says which way the data lean (the verdict the interval
  would give, and how many seeds lie on which side of the line).
* **Guards by kind.** A guard belongs to what a claim reads, not to the claim: :data:`KINDS` is the rule table. A
  claim that reads a chain's sample (MCMC, SGLD, DPPS) needs a chain that moved and converged; one that compares the
  accuracy of trained models needs every such model to beat the bias-only / item-means predictor; one that reads a
  private release's accuracy against its non-private reference (a cost of privacy) needs the reference to beat it —
  the release's own accuracy, however poor, is the effect measured, and a guard on it would hide a refutation; one
  that compares models whose hyper-parameters were selected on a grid needs no selection on the grid's edge. The kinds of a claim
  are listed in the ``judging:`` section of ``params/claims.yaml``; each requirement is met by any of the guards it
  accepts that the claim names, else its default guard applies, and a measurement that does not record it reads
  ``guard … not measured (needs a re-take)``.
* **Privacy audits.** A claim with an ``audit:`` rule compares a distinguishing audit's one-sided 95 % lower bound
  ε_lower with an ε (stated or provable), seed by seed, never through a mean: a lower bound averaged with a
  t-interval throws a refutation away. Each seed's bound exceeds a true ε with probability ≤ 0.05 and the seeds are
  independent, so k of n seeds above the ε has probability ≤ P[Binomial(n, 0.05) ≥ k]: at ≤ 0.05 the ε is refuted
  (*differs*). Where the ledger stored each seed's evaluation error counts (guards ``audit_fp``, ``audit_fn``,
  ``audit_n0``, ``audit_n1``), a Bonferroni bound per seed is formed too — each seed's Clopper–Pearson ε_lower at
  1 − 0.05/n — and any seed's above the ε refutes it as well (family-wise error ≤ 0.05). A
  mechanism with no proof for what was audited (provable ε = ∞, or a premise the audited runs break) is never
  *reproduced* by an audit that finds little: *inconclusive*, with how far the audit could reach. An audit that
  found ε_lower = 0 in every seed has no power: *inconclusive*.
* **Fair forms and values shown only.** A claim whose ``judging:`` entry names a ``fair_form`` is the paper's form of
  an unfair comparison (e.g. the prior credited to one side only): it is *shown* beside the fair claim, which carries
  the headline verdict, with what it alone would say. ``show_only: reason`` shows a value without a verdict (an
  arithmetic reading, not a measurement of the code) without changing how many seeds a run measures
  (``shown_not_judged`` does both and is a run input).
* **Profile.** ``min_profile`` (``ci`` or ``paper``) is the smallest profile whose settings can support the claim.
  A measurement from a smaller profile is shown as ``indicative`` with what it would say, never as a verdict.
* **Data.** Only measurements on the real dataset the claim is about are judged; a stand-in's are ``stand-in only``.
* **Not judged.** ``shown_not_judged: reason`` for claims that cannot fail or are about another machine's hardware.
* **All settings.** A claim measured in several settings (datasets, dimensions) is reproduced only when every
  setting is; any setting that differs makes it differ; otherwise it is inconclusive.
* **Causes.** Every claim that is not reproduced at ``paper`` carries, in ``judging:``, a ``cause`` (bug-here,
  our-choice, paper-property, data or unresolved) and one line of ``evidence`` (a column, a check, a figure panel);
  the report and ``results/paper/SCORECARD.md`` show them. They explain a verdict and never decide one.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path

from .claims import (DIFFERS, INCONCLUSIVE, INDICATIVE, NOT_MEASURED, PROFILE_RANK, REPRODUCED, SHOWN, STANDIN_ONLY,
                     Claim, Guard)
from .errors import ParameterError

CONFIDENCE = 0.95

# ---------------------------------------------------------------------------------------------------------------------
# the rule table: guards by what a claim reads


@dataclass(frozen=True)
class Requirement:
    """A precondition every claim of a kind needs. ``accepts``: guard names that measure it (any one the claim names
    meets it); ``defaults``: the guards that apply when the claim names none of them — what a re-take must record."""

    what: str
    accepts: tuple[str, ...]
    defaults: tuple[Guard, ...]


#: kind → its requirements. A chain's split-R-hat (or share of chains over 1.05) is computed over chains from
#: different starts, so a chain that never moved fails it: it meets "moved" as well as "converged".
KINDS: dict[str, tuple[Requirement, ...]] = {
    "chain": (
        Requirement("the chain moved from its data-independent start",
                    ("chain_moved", "chain_split_rhat", "chain_rhat_over_share"),
                    (Guard("chain_moved", "the released sample's statistic (its test RMSE) must differ from the "
                                          "chain's data-independent start by 0.001, else the chain never moved",
                           min=0.001),)),
        Requirement("the chain converged",
                    ("chain_split_rhat", "chain_rhat_over_share"),
                    (Guard("chain_split_rhat", "split-R-hat over >= 2 chains from different starts at most 1.05",
                           max=1.05),
                     Guard("chain_ess", "effective sample size over the chains at least 200", min=200))),
    ),
    "trained-model": (
        Requirement("every trained model the comparison reads beats the bias-only / item-means predictor",
                    ("gain_over_bias_only", "baseline_gain_over_item_means", "cells_not_degenerate", "live_cells"),
                    (Guard("gain_over_bias_only", "the smallest test-RMSE gain of the trained models compared over "
                                                  "the bias-only / item-means predictor must be at least 0.005, "
                                                  "else a side compares a baseline, not a trained model",
                           min=0.005),)),
    ),
    "privacy-cost": (
        Requirement("the non-private reference the private release is measured against beats the bias-only / "
                    "item-means predictor",
                    ("reference_gain_over_bias_only",),
                    (Guard("reference_gain_over_bias_only", "the test-RMSE gain of the non-private reference over "
                                                            "the bias-only / item-means predictor must be at least "
                                                            "0.005, else the cost of privacy is measured against a "
                                                            "baseline, not a trained model",
                           min=0.005),)),
    ),
    "tuned": (
        Requirement("no selected hyper-parameter sits on the edge of its grid",
                    ("selection_off_grid_edge", "k_grid_interior", "lambda_grid_interior", "cells_off_grid_edge"),
                    (Guard("selection_off_grid_edge", "every hyper-parameter selected on a grid (validation or best "
                                                      "of grid) must lie inside it (1 = interior), else a larger "
                                                      "grid could change the comparison",
                           min=1),)),
    ),
}
KIND_TEXT = {
    "chain": "reads the sample or estimate of an MCMC / SGLD / DPPS chain",
    "trained-model": "compares (or trends) the accuracy of trained models",
    "privacy-cost": ("reads a private release's accuracy against its non-private reference (what the release "
                     "reaches is the effect measured, so only the reference must be a trained model)"),
    "tuned": "compares models whose hyper-parameters were selected on a grid",
}
CAUSES = ("bug-here", "our-choice", "paper-property", "data", "unresolved")
CAUSE_TEXT = {
    "bug-here": "a bug in this workbook (to be fixed, then re-taken)",
    "our-choice": "a reconstruction or protocol choice of ours",
    "paper-property": "a property of the paper's own method, statement or comparison",
    "data": "the dataset (a counterpart on ML-100K, a size or distribution the paper's data do not share)",
    "unresolved": "not explained yet",
}

# ---------------------------------------------------------------------------------------------------------------------
# the judging annotations of params/claims.yaml (its `judging:` section)


@dataclass(frozen=True)
class AuditRule:
    """How an audited-vs-ε claim is judged: the ε the audit's lower bound is compared with (``against``: stated or
    provable; ``epsilon``), the evaluation runs per neighbouring dataset behind each seed's bound and the audit's δ
    (which fix how far it can reach), the exact loss of the audited pair where known (``pair``), and either the
    ``proof`` that covers the audited release or why there is none (``no_proof``)."""

    against: str
    epsilon: float
    runs: int
    proof: str | None = None
    no_proof: str | None = None
    pair: float | None = None
    delta: float = 0.0
    control: str | None = None  # the positive control of the audit's pipeline (a test that must catch a broken variant)


@dataclass(frozen=True)
class Notes:
    """A claim's judging annotations: its kinds (the guards the rule table adds), why it is not reproduced (cause,
    evidence), the fair claim whose verdict is its headline, a reason to show it only, its audit rule."""

    kinds: tuple[str, ...] = ()
    cause: str | None = None
    evidence: str | None = None
    fair_form: str | None = None
    show_only: str | None = None
    audit: AuditRule | None = None


NO_NOTES = Notes()
_NOTE_FIELDS = {"kinds", "cause", "evidence", "fair_form", "show_only", "audit"}
_AUDIT_FIELDS = {"against", "epsilon", "runs", "proof", "no_proof", "pair", "delta", "control"}


def _parse_notes(doc, where: str) -> dict[str, Notes]:
    raw = (doc or {}).get("judging") or {}
    if not isinstance(raw, dict):
        raise ParameterError(f"{where}: `judging:` must map claim ids to their judging annotations")
    out = {}
    for cid, row in raw.items():
        at = f"{where}, judging of {cid}"
        if not isinstance(row, dict) or set(row) - _NOTE_FIELDS:
            raise ParameterError(f"{at}: expected a mapping with only {sorted(_NOTE_FIELDS)}")
        kinds = tuple(row.get("kinds") or ())
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ParameterError(f"{at}: unknown kind(s) {unknown}; known: {sorted(KINDS)}")
        cause = row.get("cause")
        if cause is not None and cause not in CAUSES:
            raise ParameterError(f"{at}: cause must be one of {', '.join(CAUSES)}, got {cause!r}")
        if (cause is None) != (row.get("evidence") is None):
            raise ParameterError(f"{at}: `cause` and `evidence` go together (one line of evidence per cause)")
        audit = row.get("audit")
        if audit is not None:
            if not isinstance(audit, dict) or set(audit) - _AUDIT_FIELDS or \
                    not {"against", "epsilon", "runs"} <= set(audit):
                raise ParameterError(f"{at}: `audit` needs against, epsilon, runs (and may give proof | no_proof, "
                                     f"pair, delta)")
            if audit["against"] not in ("stated", "provable"):
                raise ParameterError(f"{at}: audit.against must be stated or provable")
            if (audit.get("proof") is None) == (audit.get("no_proof") is None):
                raise ParameterError(f"{at}: an audit rule gives exactly one of `proof` (what proves the ε for the "
                                     "audited release) and `no_proof` (why nothing does)")
            audit = AuditRule(**audit)
        out[str(cid)] = Notes(kinds=kinds, cause=cause, evidence=row.get("evidence"), fair_form=row.get("fair_form"),
                              show_only=row.get("show_only"), audit=audit)
    return out


_notes_read: tuple | None = None


def load_notes(path: Path | None = None) -> dict[str, Notes]:
    """claim id → :class:`Notes` from the ``judging:`` section of ``params/claims.yaml`` (parsed once per version of
    the file). The claims loader (:func:`dpmf_lib.claims.load_claims`) reads only ``claims:``: this section is read
    by the judging code alone, so editing it re-judges and never makes a snapshot row stale."""
    global _notes_read
    from .claims import claims_path
    from .params import read_yaml

    path = Path(path) if path is not None else claims_path()
    data = path.read_bytes()
    digest = hashlib.sha256(data).digest()
    if _notes_read is not None and _notes_read[0] == path and _notes_read[1] == digest:
        return _notes_read[2]
    found = _parse_notes(read_yaml(path), str(path))
    _notes_read = (path, digest, found)
    return found


def notes_for(claim: Claim) -> Notes:
    """The judging annotations of ``claim`` (none for a claim the section does not name)."""
    try:
        return load_notes().get(claim.id, NO_NOTES)
    except OSError:
        return NO_NOTES


def required_guards(claim: Claim, notes: Notes | None = None) -> list[tuple[Guard, str]]:
    """(guard, kind) for every guard the claim is judged by: its own (kind ``""``), then each requirement of its
    kinds that none of its own guards meets, as the requirement's default guards."""
    notes = notes_for(claim) if notes is None else notes
    out = [(g, "") for g in claim.guards]
    names = {g.name for g in claim.guards}
    for kind in notes.kinds:
        for req in KINDS[kind]:
            if names & set(req.accepts):
                continue
            for g in req.defaults:
                if g.name not in names:
                    out.append((g, kind))
                    names.add(g.name)
    return out


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
    """The verdict of one measurement (or of a claim, over its measurements) with the numbers behind it.

    ``category`` names the kind of reason of an *inconclusive* (for the scorecard): ``guard not measured``, ``guard
    failed``, ``interval straddles``, ``seeds``, ``no proof``, ``no audit power``, ``not significant``, ``cells``,
    ``non-finite``. ``lean`` is the verdict the interval alone gives when a guard that failed or was not measured
    keeps it from counting (``""`` when nothing is withheld or the interval straddles the line)."""

    verdict: str
    reason: str = ""
    mean: float | None = None
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    measurement: dict | None = None
    parts: list = field(default_factory=list)  # per-measurement judgements of a claim
    asymmetric: bool = False  # [lo, hi] is not mean ± half (a share of cells): show it as an interval
    category: str = ""
    lean: str = ""

    def as_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "mean": self.mean, "lo": self.lo, "hi": self.hi,
                "n": self.n, "category": self.category, "lean": self.lean}


def seed_sides(claim: Claim, values: list[float]) -> tuple[int, int]:
    """(seeds on the reproducing side of the claim's line, seeds on the wrong side): beyond reference ± margin vs at
    or behind the reference for a direction; inside vs outside the band for a tolerance; equal vs not."""
    ref = claim.reference if claim.reference is not None else 0.0
    if claim.tolerance is not None or claim.relative_tolerance is not None:
        tol = claim.tolerance if claim.tolerance is not None else claim.relative_tolerance * abs(ref)
        inside = sum(abs(v - ref) <= tol for v in values)
        return inside, len(values) - inside
    if claim.direction == "greater":
        return sum(v > ref + claim.margin for v in values), sum(v <= ref for v in values)
    if claim.direction == "less":
        return sum(v < ref - claim.margin for v in values), sum(v >= ref for v in values)
    same = sum(v == ref for v in values)
    return same, len(values) - same


def lean_text(claim: Claim, values: list[float] | None, lo: float, hi: float) -> tuple[str, str]:
    """(the verdict the interval alone gives, a sentence saying which way the data lean and how many seeds lie on
    which side) — what a reason shows beside a guard that failed or was not measured. ``values`` None: a share of
    cells, whose seeds' own shares say less than the cells' interval (no seed count)."""
    decided, _ = decide(claim, lo, hi)
    where = f"interval [{lo:.4g}, {hi:.4g}]"
    if values is None:
        seeds = "the cells' simultaneous interval"
    elif claim.tolerance is not None or claim.relative_tolerance is not None:
        good, wrong = seed_sides(claim, values)
        seeds = f"{good} of {len(values)} seeds inside the tolerance, {wrong} outside"
    else:
        good, wrong = seed_sides(claim, values)
        seeds = f"{good} of {len(values)} seeds beyond the line, {wrong} on the wrong side of the reference"
    if decided == REPRODUCED:
        return decided, f"the data lean to reproduced ({where}; {seeds})"
    if decided == DIFFERS:
        return decided, f"the data lean to differs ({where}; {seeds})"
    return "", f"the data do not lean either way ({where} straddles the line; {seeds})"


def judge_measurement(claim: Claim, m: dict, notes: Notes | None = None) -> Judgement:
    """The verdict of one real measurement dict (as written to measurements.json), as a notebook's own claims table
    shows it: a value shown only, or the paper's form of an unfair comparison, is *shown* with the reason."""
    notes = notes_for(claim) if notes is None else notes
    j = _judge_one(claim, m, notes)
    if notes.show_only:
        j.verdict, j.reason, j.category, j.lean = SHOWN, notes.show_only, "", ""
    elif notes.fair_form:
        _as_paper_form(j, notes)
    return j


def _as_paper_form(j: Judgement, notes: Notes) -> None:
    would = j.verdict + (f" ({j.reason})" if j.reason else "")
    j.verdict = SHOWN
    j.reason = (f"the paper's form of an unfair comparison: its headline verdict is that of its fair form "
                f"{notes.fair_form}; this form alone would be: {would}")
    j.category = j.lean = ""


def _judge_one(claim: Claim, m: dict, notes: Notes) -> Judgement:
    """The verdict of one measurement under the claim's rule, guards and audit rule (before show_only / fair_form)."""
    values = [float(v) for v in (m.get("values") or [m["value"]])]
    if not all(math.isfinite(v) for v in values):
        return Judgement(INCONCLUSIVE, "a seed gave no finite value (NaN or ±inf)", n=len(values), measurement=m,
                         category="non-finite")
    if notes.audit is not None:
        return _profiled(claim, m, judge_audit(claim, m, notes.audit, values))
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
    reasons, categories = [], []
    guard_values = m.get("guards") or {}
    missing: dict[str, list[str]] = {}
    for g, kind in required_guards(claim, notes):
        got = guard_values.get(g.name)
        got = got if isinstance(got, list) else ([] if got is None else [got])
        if not got:  # a kind's default guard by its bound (its why is in KINDS); the claim's own with its why
            missing.setdefault(kind, []).append(g.describe().split(" (")[0] if kind else g.describe())
        elif not all(g.holds(v) for v in got):
            shown = ", ".join(f"{v:.4g}" for v in got)
            bad = sum(not g.holds(v) for v in got)
            rule_of = f" (rule of kind {kind})" if kind else ""
            reasons.append(f"guard {g.name} failed in {bad} of {len(got)} seeds{rule_of}: {g.describe()}; "
                           f"measured {shown}")
            categories.append("guard failed")
    if missing:
        reasons.append("guard not measured (needs a re-take): " + "; ".join(
            ", ".join(names) + (f" (rule of kind {kind}: {KIND_TEXT[kind]})" if kind else "")
            for kind, names in missing.items()))
        categories.append("guard not measured")
    if cell_problem:
        reasons.append(cell_problem)
        categories.append("cells")
    need = claim.seeds_needed(profile)
    if len(values) < need:
        reasons.append(f"{len(values)} seed(s), the claim needs {need} at {profile}")
        categories.append("seeds")
    elif not claim.deterministic and not share and len(values) > 1 and len(set(values)) == 1:
        reasons.append(f"all {len(values)} seeds gave the same value ({values[0]:.4g}): no spread to judge — the seed "
                       "does not reach this measurement, or the quantity sits at a floor (e.g. an audit that found "
                       "ε_lower = 0 every time: no power)")
        categories.append("seeds")
    decided, why = decide(claim, lo, hi)
    if reasons:
        j.verdict, j.category = INCONCLUSIVE, categories[0]
        if "failed" in categories[0] or "not measured" in categories[0]:
            if not cell_problem and math.isfinite(lo) and math.isfinite(hi):
                j.lean, lean = lean_text(claim, None if share else values, lo, hi)
                reasons.append(lean)
        j.reason = "; ".join(reasons)
    else:
        j.verdict, j.reason = decided, "; ".join(x for x in (why, cells) if x)
        if decided == INCONCLUSIVE:
            j.category = "interval straddles" if claim.direction != "equal" else "seeds"
    return _profiled(claim, m, j)


def _profiled(claim: Claim, m: dict, j: Judgement) -> Judgement:
    """Below the claim's ``min_profile`` a verdict is only *indicative*, with what it would say."""
    profile = m.get("profile") or "ci"
    if PROFILE_RANK.get(profile, 0) < PROFILE_RANK[claim.min_profile]:
        would = j.verdict + (f" ({j.reason})" if j.reason else "")
        j.verdict, j.reason = INDICATIVE, f"measured at {profile}; the claim needs {claim.min_profile} (would be: {would})"
        j.category = ""
    return j


def audit_reach(runs: int, confidence: float = CONFIDENCE, delta: float = 0.0) -> float:
    """The largest ε_lower an audit can certify with ``runs`` evaluation runs per dataset: no error either way, each
    rate's one-sided Clopper–Pearson upper bound at (1 − confidence)/2, as :mod:`dpmf_lib.privacy.audit` computes."""
    u = 1.0 - ((1.0 - confidence) / 2.0) ** (1.0 / runs)
    return math.log(max(1.0 - u - delta, 1e-300) / u)


def bonferroni_lower(m: dict, rule: AuditRule) -> list[float] | None:
    """Each seed's ε_lower at confidence 1 − (1 − CONFIDENCE)/n (Bonferroni over the n seeds), from the evaluation
    counts the ledger stores as guards of its measurement (``audit_fp`` of ``audit_n0``, ``audit_fn`` of
    ``audit_n1``; one value per seed); None when a seed's counts were not stored."""
    from .privacy.audit import epsilon_from_counts

    g = m.get("guards") or {}
    names = ("audit_fp", "audit_n0", "audit_fn", "audit_n1")
    cols = [g.get(k) for k in names]
    if any(c is None for c in cols):
        return None
    cols = [c if isinstance(c, list) else [c] for c in cols]
    n = len(cols[0])
    if any(len(c) != n for c in cols) or any(not math.isfinite(float(v)) for c in cols for v in c):
        return None
    conf = 1.0 - (1.0 - CONFIDENCE) / n
    return [epsilon_from_counts(int(fp), int(n0), int(fn), int(n1), delta=rule.delta, confidence=conf)
            for fp, n0, fn, n1 in zip(*cols)]


def judge_audit(claim: Claim, m: dict, rule: AuditRule, values: list[float]) -> Judgement:
    """Audited-vs-ε, seed by seed (see the module docstring): ``values`` are ε_lower − ε per seed."""
    from scipy import stats

    n, eps = len(values), rule.epsilon
    audited = [v + eps for v in values]
    mean, lo, hi = interval(values)
    j = Judgement(INCONCLUSIVE, "", mean, lo, hi, n, m)
    profile = m.get("profile") or "ci"
    need = claim.seeds_needed(profile)
    if n < need:
        j.reason, j.category = f"{n} seed(s), the claim needs {need} at {profile}", "seeds"
        return j
    alpha = 1.0 - CONFIDENCE
    exceed = sorted(a for v, a in zip(values, audited) if v > 0)
    k = len(exceed)
    p = float(stats.binom.sf(k - 1, n, alpha)) if k else 1.0
    name = "ε_stated" if rule.against == "stated" else "ε_provable"
    reach = audit_reach(rule.runs, CONFIDENCE, rule.delta)
    pair = "" if rule.pair is None else f"; the audited pair's exact loss ε_pair = {rule.pair:.3g} (first seed)"
    over = (f"{k} of {n} seeds' 95 % lower bounds exceed {name} = {eps:g}"
            + (f" (ε_lower {exceed[0]:.3g}–{exceed[-1]:.3g})" if k else ""))
    chance = f"under {name}-DP each seed does so with probability ≤ {alpha:g}, independently: P ≤ {p:.2g}"
    power = (f"the audit's bounds reach {max(audited):.3g} at most (over seeds) and could certify at most "
             f"ε ≈ {reach:.2g} with {rule.runs} runs per dataset")
    bonf = bonferroni_lower(m, rule)
    bonf_over = [b for b in (bonf or []) if b > eps]
    bonf_text = ("" if bonf is None else f"; per seed at Bonferroni-corrected {1 - alpha / n:.4g}: ε_lower up to "
                 f"{max(bonf):.3g}" + (f", {len(bonf_over)} of {n} above {name} = {eps:g}" if bonf_over else ""))
    if k and p <= alpha:
        j.verdict, j.reason = DIFFERS, f"{over}; {chance}{bonf_text}{pair}"
    elif bonf_over:
        j.verdict, j.reason = DIFFERS, (f"{len(bonf_over)} of {n} seeds' Clopper–Pearson bounds at the "
                                        f"Bonferroni-corrected confidence {1 - alpha / n:.4g} exceed {name} = {eps:g} "
                                        f"(ε_lower up to {max(bonf_over):.3g}; family-wise error ≤ {alpha:g}){pair}")
    elif rule.no_proof:
        j.reason, j.category = (f"no proof: {rule.no_proof}; an audit that finds little is no evidence of privacy — "
                                f"{power}" + (f"; {over}, {chance}" if k else "") + pair), "no proof"
    elif all(a <= 1e-12 for a in audited):
        j.reason, j.category = (f"the audit found ε_lower = 0 in every seed: no power to check {name} = {eps:g} "
                                f"(proof: {rule.proof}){pair}"), "no audit power"
    elif k:
        j.reason, j.category = f"{over}; {chance}: not a refutation{pair}", "not significant"
    else:
        j.verdict = REPRODUCED
        j.reason = (f"no seed's 95 % lower bound exceeds {name} = {eps:g} (proof: {rule.proof}); {power}"
                    f"{bonf_text}{pair}")
    return j


def _mine(claim: Claim, measurements: list[dict]) -> tuple[list[dict], list[dict]]:
    mine = [m for m in measurements if m["claim"] == claim.id]
    real = [m for m in mine if m["real"] and m["dataset"] == claim.dataset]
    standin = [m for m in mine if not m["real"] and m["dataset"].split(" [")[0] == claim.dataset]
    return real, standin


def judge(claim: Claim, measurements: list[dict], notes: Notes | None = None) -> Judgement:
    """The claim's verdict over every measurement of it on its real dataset (see the module docstring)."""
    notes = notes_for(claim) if notes is None else notes
    real, standin = _mine(claim, measurements)
    if not real:
        if standin:
            parts = [_judge_one(claim, m, notes) for m in standin]
            p = parts[0]
            ready = readiness(claim)
            return Judgement(STANDIN_ONLY, "measured on a synthetic stand-in only: shown, not evidence"
                             + (f" ({ready})" if ready else ""), p.mean, p.lo, p.hi, p.n, standin[0], parts,
                             p.asymmetric)
        ready = readiness(claim)
        return Judgement(NOT_MEASURED, f"no run has measured it on real {claim.dataset} yet"
                         + (f" ({ready})" if ready else ""))
    parts = [_judge_one(claim, m, notes) for m in real]
    first = parts[0]
    shown = claim.shown_not_judged or notes.show_only
    if shown:
        return Judgement(SHOWN, shown, first.mean, first.lo, first.hi, first.n, first.measurement, parts,
                         first.asymmetric)
    labels = [(p.measurement.get("setting") or p.measurement.get("dataset")) for p in parts]
    whole = None
    for state in (INDICATIVE, DIFFERS, INCONCLUSIVE):
        hit = [(lab, p) for lab, p in zip(labels, parts) if p.verdict == state]
        if hit:
            if len(parts) == 1:
                reason = hit[0][1].reason
            else:
                reason = f"{len(hit)} of {len(parts)} settings: " + "; ".join(
                    f"{lab}: {p.reason}" if p.reason else str(lab) for lab, p in hit)
            lab, p = hit[0]
            leans = {q.lean for _, q in hit}
            whole = Judgement(state, reason, p.mean, p.lo, p.hi, p.n, p.measurement, parts, p.asymmetric,
                              category=p.category, lean=leans.pop() if len(leans) == 1 else "")
            break
    if whole is None:
        whole = Judgement(REPRODUCED, first.reason if len(parts) == 1 else f"all {len(parts)} settings", first.mean,
                          first.lo, first.hi, first.n, first.measurement, parts, first.asymmetric)
    if notes.fair_form:
        _as_paper_form(whole, notes)
    return whole


def readiness(claim: Claim) -> str:
    """``needs <dataset>: ready`` when the claim's notebook runs on its dataset in some profile (so installing the
    dataset is all a measurement needs: how, from the registry), else what is missing; "" for a dataset that is
    never absent here (ml-100k, an analytic or synthetic one)."""
    from data_fetch.registry import DATASETS

    from .data.datasets import STANDIN_WHEN_ABSENT
    from .params import params_path, read_yaml

    if claim.dataset not in STANDIN_WHEN_ABSENT:
        return ""
    try:
        doc = read_yaml(params_path(claim.notebook)) or {}
    except Exception:  # a claim of a notebook without params: nothing more to say
        return f"needs {claim.dataset}"
    blocks = [doc.get("defaults") or {}] + [b for b in (doc.get("profiles") or {}).values() if isinstance(b, dict)]

    def names(v):
        return [v] if isinstance(v, str) else [x for x in v if isinstance(x, str)] if isinstance(v, list) else []

    runs = any(claim.dataset in names(v) for b in blocks for k, v in b.items()
               if str(k).split("_")[-1] in ("dataset", "datasets"))
    if not runs:
        return f"needs {claim.dataset}: not ready, {claim.notebook} does not run on it yet"
    how = (f"`python -m data_fetch {claim.dataset}`" if DATASETS[claim.dataset].available_for_download else
           f"`python -m data_fetch {claim.dataset} --from DIR`")
    return f"needs {claim.dataset}: ready — install it with {how}, then run {claim.notebook} at {claim.min_profile}"


def verdict(claim: Claim, measurements: list[dict]) -> tuple[str, dict | None]:
    """The verdict of ``claim`` and the measurement it rests on (see :func:`judge` for the details)."""
    j = judge(claim, measurements)
    return j.verdict, j.measurement
