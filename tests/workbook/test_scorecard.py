"""The judging rules that answer the reader: guards by measurement kind, privacy audits seed by seed, fair forms as the
headline, a cause for every claim not reproduced at `paper`, and results/paper/SCORECARD.md current.

Most tests read the committed `paper` snapshot (results/paper) as it is: they check what a reviewer of the snapshot
would see, and fail when a rule or an annotation in the `judging:` section of params/claims.yaml stops covering it.
"""

import math
import re

import pandas as pd
import pytest
import yaml

from dpmf_lib import snapshot
from dpmf_lib.claims import DIFFERS, INCONCLUSIVE, REPRODUCED, SHOWN, Claim, Guard, Measurement, load_claims
from dpmf_lib.errors import ParameterError
from dpmf_lib.verdicts import (CAUSES, KINDS, NO_NOTES, AuditRule, Notes, _parse_notes, audit_reach, judge,
                               load_notes, required_guards)

CLAIMS = {c.id: c for c in load_claims()}
NOTES = load_notes()


@pytest.fixture(scope="module")
def paper_rows():
    """The committed snapshot's rows and verdicts, computed once (every row must be current for them to mean
    anything)."""
    states = snapshot.rows()
    stale = [r["name"] for r in states if r["state"] != "current"]
    if stale:
        pytest.skip(f"snapshot rows not current here: {stale}")
    return states, snapshot.paper_verdicts()


@pytest.fixture(scope="module")
def paper(paper_rows):
    """The committed snapshot's verdicts."""
    return paper_rows[1]


@pytest.fixture(scope="module")
def card(paper_rows):
    """The scorecard of the committed snapshot, from the rows and verdicts above (what snapshot.scorecard() computes
    for itself)."""
    return snapshot.scorecard(*paper_rows)


@pytest.fixture(scope="module")
def snapshot_measurements():
    found = snapshot.measurements()
    if not found:
        pytest.skip("no current snapshot row here (stale rows are never judged)")
    return found


def _notes(cid: str) -> Notes:
    return NOTES.get(cid, NO_NOTES)


# ---------------------------------------------------------------------------------------------------------------------
# guards by kind


def test_the_judging_section_names_only_claims_and_fair_forms_that_exist():
    assert set(NOTES) <= set(CLAIMS)
    for cid, n in NOTES.items():
        if n.fair_form:
            assert n.fair_form in CLAIMS, cid
            assert not _notes(n.fair_form).fair_form, f"{cid}: its fair form is itself a paper's form"
            assert CLAIMS[n.fair_form].notebook == CLAIMS[cid].notebook, cid


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_claims_by_kind_carry_every_guard_of_their_kind(kind, paper, snapshot_measurements):
    """Lists the claims of each kind: each is judged by a guard for every requirement of the kind (its own, or the
    kind's default), and a paper verdict that settles (reproduced, differs) rests on a measurement that recorded one
    for every requirement in every setting; else the verdict says the guard was not measured (needs a re-take)."""
    of_kind = sorted(cid for cid, n in NOTES.items() if kind in n.kinds)
    assert of_kind, f"no claim of kind {kind}"
    for cid in of_kind:
        claim = CLAIMS[cid]
        names = {g.name for g, _ in required_guards(claim)}
        for req in KINDS[kind]:
            assert names & (set(req.accepts) | {g.name for g in req.defaults}), (cid, req.what)
        v = paper[cid]
        mine = [m for m in snapshot_measurements if m["claim"] == cid and m["real"] and m["dataset"] == claim.dataset]
        if not mine or v["verdict"] == SHOWN:
            continue
        for m in mine:
            recorded = set(m.get("guards") or {})
            met = all(recorded & (set(req.accepts) | {g.name for g in req.defaults}) for req in KINDS[kind])
            if not met:
                assert v["verdict"] == INCONCLUSIVE and "not measured (needs a re-take)" in v["reason"], cid


def test_every_chain_claim_is_of_kind_chain():
    """Every claim that reads a DPPS / SGLD / MCMC / Gibbs chain carries the chain kind (its guards by rule), except
    those that read no sample of it."""
    exempt = {
        "liu-6.3-sgld-slower-than-sgd": "a timing of SGLD against C-SGD: reads no sample",
        "liu-6.3-sgld-slower-than-sgd-ml-100k": "a timing of SGLD against C-SGD: reads no sample",
        "liu-6.3-sgld-slower-than-sgd-yahoo-music": "a timing of SGLD against C-SGD: reads no sample",
        "ledger-audited-le-provable-dpps-pnbm": "a privacy audit, judged by its audit rule (no proof for a finite chain)",
    }
    for c in CLAIMS.values():
        text = " ".join((c.id, c.measures, c.where))
        if re.search(r"DPPS|SGLD|MCMC|Gibbs|chain", text, re.IGNORECASE) and c.id not in exempt:
            assert "chain" in _notes(c.id).kinds, f"{c.id} reads a chain but has no chain kind"


def test_the_reviewers_examples_are_judged_by_rule(paper):
    # DPPS-MF had no chain guard while its DPPS-PNBM twin was inconclusive for a chain that did not move
    v = paper["pnbm-5.2-dpps-mf-beats-knn-x0.1"]
    assert v["verdict"] == INCONCLUSIVE and "chain_moved" in v["reason"] and "failed" in v["reason"]
    assert v["lean"] == DIFFERS and "0 of 5 seeds beyond the line, 5 on the wrong side" in v["reason"]
    # count sketch best at lambda = 0: all three methods are worse than bias-only, two on the grid's lowest eta
    v = paper["balu-4.1.5.5-cs-best-at-lambda0-ml-100k"]
    assert v["verdict"] == INCONCLUSIVE and "gain_over_bias_only" in v["reason"]
    assert "selection_off_grid_edge" in v["reason"] and v["lean"] == DIFFERS
    # one-pass ranking: a failed guard still says which way the data lean
    v = paper["balu-4.1.5.4-cs-best-one-pass-ml-100k"]
    assert v["verdict"] == INCONCLUSIVE and "cells_not_degenerate failed in 5 of 5 seeds" in v["reason"]
    assert "the data lean to differs" in v["reason"] and "5 on the wrong side" in v["reason"]


def test_a_kind_adds_its_default_guards_only_where_the_claim_names_none_it_accepts():
    bare = Claim("c", "pnbm", "s", "q", "ml-100k", 0.0, "RMSE difference", "m", "pnbm_fig2", direction="greater",
                 margin=0.005, min_profile="ci")
    names = [g.name for g, k in required_guards(bare, Notes(kinds=("chain", "tuned")))]
    assert names == ["chain_moved", "chain_split_rhat", "chain_ess", "selection_off_grid_edge"]
    own = Claim(**{**bare.__dict__, "guards": (Guard("chain_rhat_over_share", "mixed", max=0.1),
                                               Guard("k_grid_interior", "interior", min=1))})
    assert [g.name for g, _ in required_guards(own, Notes(kinds=("chain", "tuned")))] == \
        ["chain_rhat_over_share", "k_grid_interior"]
    m = Measurement("c", 0.02, "ml-100k", True).as_dict()
    m.update(values=[0.02, 0.021, 0.019], profile="ci", guards={})
    j = judge(bare, [m], Notes(kinds=("chain",)))
    assert j.verdict == INCONCLUSIVE and j.category == "guard not measured" and j.lean == REPRODUCED
    m["guards"] = {"chain_moved": [0.01] * 3, "chain_split_rhat": [1.01] * 3, "chain_ess": [400.0] * 3}
    assert judge(bare, [m], Notes(kinds=("chain",))).verdict == REPRODUCED


# ---------------------------------------------------------------------------------------------------------------------
# privacy audits


def _audit_claim(**kw):
    base = dict(id="a", paper="extra", where="s", quote="q", dataset="ml-100k", reference=0.0,
                unit="ε (audited − stated)", measures="m", notebook="extra_privacy_ledger", direction="less",
                margin=0.0, min_profile="ci")
    base.update(kw)
    return Claim(**base)


def _audit_meas(values):
    m = Measurement("a", sum(values) / len(values), "ml-100k", True).as_dict()
    m.update(values=list(values), profile="paper")
    return m


def test_an_audit_is_judged_seed_by_seed_with_a_correction_for_the_seeds():
    c = _audit_claim()
    proven = Notes(audit=AuditRule("stated", 1.0, 5000, proof="a proof"))
    # the mean of the bounds is below the ε, but 4 of 5 seeds' 95 % bounds exceed it: P <= 3e-5 — refuted
    four = judge(c, [_audit_meas([-0.53, 0.32, 0.47, 0.11, 0.38])], proven)
    assert four.verdict == DIFFERS and "4 of 5 seeds" in four.reason and "P ≤ 3e-05" in four.reason
    # one seed of five above: probability 0.23 under the ε — not a refutation
    one = judge(c, [_audit_meas([-0.5, 0.1, -0.4, -0.3, -0.2])], proven)
    assert one.verdict == INCONCLUSIVE and one.category == "not significant"
    assert judge(c, [_audit_meas([-0.5, -0.1, -0.4, -0.3, -0.2])], proven).verdict == REPRODUCED
    # no proof: never reproduced by an audit that finds little; the reason says how far it could reach
    unproven = Notes(audit=AuditRule("stated", 1.0, 5000, no_proof="the premise is broken"))
    j = judge(c, [_audit_meas([-0.5, -0.1, -0.4, -0.3, -0.2])], unproven)
    assert j.verdict == INCONCLUSIVE and j.category == "no proof" and "could certify at most ε ≈ 7.2" in j.reason
    # an audit that found 0 in every seed has no power
    zero = judge(c, [_audit_meas([-1.0] * 5)], proven)
    assert zero.verdict == INCONCLUSIVE and zero.category == "no audit power"


def test_a_bonferroni_bound_per_seed_refutes_from_the_stored_counts():
    """With each seed's evaluation counts stored (guards), one seed whose Clopper–Pearson bound at 1 − 0.05/n exceeds
    the ε refutes it (family-wise error ≤ 0.05), where the binomial count of seeds (1 of 5) could not."""
    from dpmf_lib.privacy.audit import epsilon_from_counts

    c = _audit_claim()
    proven = Notes(audit=AuditRule("stated", 1.0, 5000, proof="a proof"))
    m = _audit_meas([-0.5, 2.0, -0.4, -0.3, -0.2])
    counts = [(1500, 5000, 1500, 5000)] * 5  # ≈ 0.8 each: below ε = 1
    counts[1] = (20, 5000, 20, 5000)  # seed 1: far above ε = 1 even at 1 − 0.01
    m["guards"] = {k: [float(c[i]) for c in counts] for i, k in enumerate(("audit_fp", "audit_n0", "audit_fn",
                                                                          "audit_n1"))}
    assert epsilon_from_counts(20, 5000, 20, 5000, confidence=0.99) > 1.0
    j = judge(c, [m], proven)
    assert j.verdict == DIFFERS and "Bonferroni" in j.reason and "1 of 5" in j.reason
    # without the counts, the same values are one seed of five: not significant
    m.pop("guards")
    assert judge(c, [m], proven).category == "not significant"


def test_every_ledger_audit_rule_names_a_positive_control_that_exists():
    from pathlib import Path

    src = (Path(__file__).parents[1] / "properties" / "test_audit_controls.py").read_text(encoding="utf-8")
    tests = set(re.findall(r"^def (test_\w+)", src, re.M))
    for cid, n in NOTES.items():
        if n.audit is not None:
            assert n.audit.control, f"{cid}: an audit rule without a positive control"
            assert n.audit.control.split("[")[0] in tests, f"{cid}: control {n.audit.control} is not a test"


def test_audit_reach_is_the_clopper_pearson_ceiling():
    from dpmf_lib.privacy.audit import epsilon_from_counts

    for n in (500, 5000):
        assert math.isclose(audit_reach(n), epsilon_from_counts(0, n, 0, n), rel_tol=1e-9)
    assert math.isclose(audit_reach(5000, delta=0.1), epsilon_from_counts(0, 5000, 0, 5000, delta=0.1), rel_tol=1e-9)


def test_the_ledger_verdicts_follow_the_right_test(paper):
    v = paper["ledger-dpsgd-pnbm-audited-le-stated"]
    assert v["verdict"] == DIFFERS and "4 of 5 seeds" in v["reason"] and "ε_pair = 2.92" in v["reason"]
    v = paper["ledger-hua-s1-gd-audited-le-stated"]
    assert v["verdict"] == INCONCLUSIVE and v["reason"].startswith("no proof")
    for cid, n in NOTES.items():
        if n.audit is not None and n.audit.no_proof:
            assert paper[cid]["verdict"] != REPRODUCED, f"{cid}: reproduced from an audit of an unproven mechanism"


def test_audit_rules_agree_with_the_ledger_table():
    """ε, runs, δ and ε_pair of every audit rule are the ledger's (seed 0's table); a row whose provable ε is ∞, or
    that is compared with a stated ε the ledger cannot prove, has no proof."""
    table = pd.read_csv(snapshot.table_path("extra_privacy_ledger"))
    keys = {m["claim"]: m["setting"] for m in snapshot._read_json(
        snapshot.snapshot_dir() / "extra_privacy_ledger" / "measurements.json")}
    audited = {cid: n.audit for cid, n in NOTES.items() if n.audit is not None}
    assert set(audited) == {c.id for c in CLAIMS.values() if c.notebook == "extra_privacy_ledger"}
    for cid, rule in audited.items():
        row = table[table.key == keys[cid]].iloc[0]
        # the bound a provable-rule compares with: the ledger's audit_bound (provable, or idealised where a premise
        # is broken) when the table has it; the older tables' epsilon_provable otherwise
        bound = row.audit_bound if "audit_bound" in row else row.epsilon_provable
        eps = bound if rule.against == "provable" else row.epsilon_stated
        assert math.isclose(rule.epsilon, eps, rel_tol=1e-9, abs_tol=1e-12), cid
        assert rule.runs == row.n_evaluation and math.isclose(rule.delta, row.audit_delta), cid
        if rule.pair is not None:
            assert math.isclose(rule.pair, row.epsilon_pair, rel_tol=1e-9, abs_tol=1e-12), cid
        unproven = not math.isfinite(bound) or (rule.against == "stated" and bound > row.epsilon_stated)
        if unproven:
            assert rule.no_proof, f"{cid}: no finite proof of the ε it is compared with, yet an audit rule with proof"
        if isinstance(row.premise_broken, str) and row.premise_broken and rule.proof:
            assert "as audited" in rule.proof or "audit" in rule.proof, \
                f"{cid}: the ledger says a premise is broken; a proof must say why it covers the audited release"


# ---------------------------------------------------------------------------------------------------------------------
# fair forms, shown values, causes


def test_no_paper_verdict_rests_on_an_unfair_form_or_on_arithmetic(paper):
    for cid, n in NOTES.items():
        if n.fair_form or n.show_only:  # shown beside its headline, or not measured here (its dataset is absent)
            assert paper[cid]["verdict"] in (SHOWN, None) or paper[cid]["verdict"].startswith("not yet"), cid
    assert paper["balu-3.5-blip-joint-beats-single"]["verdict"] == SHOWN
    assert "would be: reproduced" in paper["balu-3.5-blip-joint-beats-single"]["reason"]
    for cid in ("hua-5-msg-download-12kb", "hua-5-msg-upload-5kb", "hua-5-msg-third-party-3mb"):
        assert paper[cid]["verdict"] == SHOWN and paper[cid]["reason"].startswith("arithmetic")


def test_every_claim_not_reproduced_at_paper_has_a_cause_and_evidence(paper):
    missing = [cid for cid, v in paper.items() if v["verdict"] in (DIFFERS, INCONCLUSIVE)
               and not (_notes(cid).cause and _notes(cid).evidence)]
    assert not missing, f"differs/inconclusive at paper without a cause and evidence: {missing}"
    for cid, n in NOTES.items():
        assert n.cause is None or n.cause in CAUSES, cid


def test_the_loader_refuses_malformed_annotations():
    with pytest.raises(ParameterError, match="unknown kind"):
        _parse_notes({"judging": {"x": {"kinds": ["chains"]}}}, "t")
    with pytest.raises(ParameterError, match="cause must be one of"):
        _parse_notes({"judging": {"x": {"cause": "noise", "evidence": "e"}}}, "t")
    with pytest.raises(ParameterError, match="go together"):
        _parse_notes({"judging": {"x": {"cause": "data"}}}, "t")
    with pytest.raises(ParameterError, match="exactly one of `proof`"):
        _parse_notes({"judging": {"x": {"audit": {"against": "stated", "epsilon": 1, "runs": 10}}}}, "t")
    with pytest.raises(ParameterError, match="only"):
        _parse_notes({"judging": {"x": {"kind": ["chain"]}}}, "t")


def test_the_judging_section_is_not_a_run_input(tmp_path, monkeypatch):
    """Removing every judging annotation changes no notebook's run hash: it re-judges, it never stales a row."""
    from dpmf_lib import claims as claims_mod
    from dpmf_lib.registry import load_registry
    from dpmf_lib.runner.hashing import run_hash

    entries = [e for e in load_registry()[1] if e.implemented and e.name in
               {"pnbm_fig2", "extra_privacy_ledger", "balu_fig4_5", "hua_fig2"}]
    before = {e.name: run_hash(e, "paper") for e in entries}
    doc = yaml.safe_load(claims_mod.claims_path().read_text(encoding="utf-8"))
    assert doc.get("judging")
    bare = tmp_path / "claims.yaml"
    bare.write_text(yaml.safe_dump({"claims": doc["claims"]}, allow_unicode=True), encoding="utf-8")
    monkeypatch.setattr(claims_mod, "claims_path", lambda: bare)
    assert {e.name: run_hash(e, "paper") for e in entries} == before


# ---------------------------------------------------------------------------------------------------------------------
# the scorecard


def test_the_committed_scorecard_is_current(card):
    committed = snapshot.snapshot_dir() / snapshot.SCORECARD
    assert committed.exists(), "results/paper/SCORECARD.md is missing: run `python -m dpmf_lib.snapshot`"
    assert committed.read_text(encoding="utf-8") == snapshot.scorecard_markdown(card), \
        "results/paper/SCORECARD.md is not current: run `python -m dpmf_lib.snapshot` and commit it"


def test_the_scorecard_counts_add_up_and_name_the_headline_of_each_unfair_form(card):
    assert sum(g["claims"] for g in card["groups"]) == len(CLAIMS)
    for g in card["groups"]:
        assert g["judged"] == g["reproduced"] + sum(g["differs"].values()) + sum(g["inconclusive"].values())
    names = [g["name"] for g in card["groups"]]
    assert {"Balu 2016, ch. 3", "Balu 2016, ch. 4", "Balu 2016, ch. 5"} <= set(names)
    rows = {r["id"]: r for key in ("reproduced", "differs", "inconclusive") for r in card[key]}
    assert "balu-3.5-blip-joint-beats-single (the paper's form; alone: reproduced)" in rows[
        "balu-3.5-blip-joint-beats-single-prior"]["headline_for"]
    text = snapshot.scorecard_markdown(card)
    assert "| claim | ours | why inconclusive | the data lean to | cause | evidence |" in text
    assert "no cause given" not in text


def test_a_row_current_only_by_canary_revalidation_is_named_on_the_scorecard(monkeypatch):
    states = [{"name": "liu_fig1", "paper": "liu", "state": "current", "why": None, "revalidated": "abc1234"},
              {"name": "liu_fig2", "paper": "liu", "state": "current", "why": None, "revalidated": None},
              {"name": "liu_fig4", "paper": "liu", "state": "stale", "why": "code changed", "revalidated": None}]
    card = snapshot.scorecard(states, {})
    assert "2 of 3 notebooks current, 1 of them only by canary revalidation (1 at abc1234;" in card["rows_text"]
    assert "stale or missing (their claims are not judged): liu_fig4" in card["rows_text"]


def test_a_notebooks_own_claims_table_shows_what_the_report_shows(snapshot_measurements):
    """judge_measurement (what a notebook prints) agrees with judge for values shown only and for paper forms."""
    from dpmf_lib.verdicts import judge_measurement

    checked = 0
    for cid in ("hua-5-msg-download-12kb", "balu-3.5-blip-joint-beats-single"):
        m = next((x for x in snapshot_measurements if x["claim"] == cid and x["real"]), None)
        if m is None:  # its row is stale here: stale rows are never judged
            continue
        checked += 1
        j = judge_measurement(CLAIMS[cid], m)
        assert j.verdict == SHOWN and j.reason == judge(CLAIMS[cid], [m]).reason
    if not checked:
        pytest.skip("neither claim's row is current here")
