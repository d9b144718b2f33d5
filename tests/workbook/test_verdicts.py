"""Verdicts: intervals over seeds, margins, guards, the profile a claim needs, every measurement judged."""

from dpmf_lib.experiments import module_name
import math

import pytest
import yaml

from dpmf_lib.claims import (DIFFERS, INCONCLUSIVE, INDICATIVE, NOT_MEASURED, REPRODUCED, SHOWN, STANDIN_ONLY, Claim,
                             Guard, Measurement, load_claims, merge_replicates)
from dpmf_lib.verdicts import interval, judge, share_of_cells_interval, verdict
from dpmf_lib.errors import ParameterError


def claim(**kw):
    base = dict(id="c", paper="liu", where="s", quote="q", dataset="netflix", reference=0.44, unit="u",
                measures="m", notebook="liu_fig1", tolerance=0.02, min_profile="ci")
    base.update(kw)
    return Claim(**base)


def meas(values, *, dataset="netflix", real=True, profile="ci", setting="", guards=None, cid="c", cells=None):
    m = Measurement(cid, sum(values) / len(values), dataset, real, setting=setting).as_dict()
    m.update(values=list(values), profile=profile, guards=guards or {})
    if cells is not None:
        m["cells"] = cells
    return m


def test_interval_is_the_student_t_interval():
    mean, lo, hi = interval([1.0, 2.0, 3.0])
    # sd = 1, n = 3, t(0.975, 2) = 4.302653
    assert mean == 2.0 and math.isclose(hi - mean, 4.302653 / math.sqrt(3), rel_tol=1e-6)
    assert interval([5.0]) == (5.0, 5.0, 5.0)


def test_tolerance_needs_the_whole_interval_inside_or_outside():
    c = claim()
    assert judge(c, [meas([0.44, 0.45, 0.445])]).verdict == REPRODUCED
    assert judge(c, [meas([0.30, 0.31, 0.305])]).verdict == DIFFERS
    straddle = judge(c, [meas([0.40, 0.46, 0.43])])
    assert straddle.verdict == INCONCLUSIVE and "straddles" in straddle.reason


def test_direction_needs_the_margin_not_just_the_sign():
    c = claim(tolerance=None, direction="greater", reference=0.0, margin=0.005)
    # liu-6.4-sgd-overfits passed on 0.00024: positive, but far inside the margin → differs, not reproduced
    assert judge(c, [meas([0.00024, 0.00025, 0.00023])]).verdict == DIFFERS
    assert judge(c, [meas([0.02, 0.021, 0.019])]).verdict == REPRODUCED
    assert judge(c, [meas([0.0, 0.01, 0.005])]).verdict == INCONCLUSIVE
    less = claim(tolerance=None, direction="less", reference=0.0, margin=0.01)
    assert judge(less, [meas([-0.05, -0.04, -0.045])]).verdict == REPRODUCED
    assert judge(less, [meas([-0.001, -0.002, -0.0015])]).verdict == DIFFERS


def test_too_few_or_identical_seeds_are_inconclusive_unless_deterministic():
    c = claim()
    one = judge(c, [meas([0.44])])
    assert one.verdict == INCONCLUSIVE and "needs 3" in one.reason
    same = judge(c, [meas([0.44, 0.44, 0.44])])
    assert same.verdict == INCONCLUSIVE and "seed does not reach" in same.reason
    assert judge(claim(deterministic=True), [meas([0.44])]).verdict == REPRODUCED
    assert "needs 5" in judge(c, [meas([0.44, 0.45, 0.445], profile="paper")]).reason
    assert "needs 4" in judge(claim(min_seeds=4), [meas([0.44, 0.45, 0.445])]).reason


def test_failed_or_missing_guard_makes_the_verdict_inconclusive():
    g = Guard("baseline_gain_over_item_means", "the baseline must train", min=0.005)
    c = claim(guards=(g,))
    ok = meas([0.44, 0.45, 0.445], guards={"baseline_gain_over_item_means": [0.02, 0.03, 0.025]})
    assert judge(c, [ok]).verdict == REPRODUCED
    # DPSGD-MF that never trained: 1.0326 vs item means 1.0334 → gain 0.0008 in one seed
    bad = meas([0.44, 0.45, 0.445], guards={"baseline_gain_over_item_means": [0.02, 0.0008, 0.025]})
    j = judge(c, [bad])
    assert j.verdict == INCONCLUSIVE and "baseline_gain_over_item_means failed in 1 of 3 seeds" in j.reason
    assert "baseline must train" in j.reason and j.category == "guard failed"
    # the reason still says which way the data lean
    assert j.lean == REPRODUCED and "lean to reproduced" in j.reason and "3 of 3 seeds inside" in j.reason
    missing = judge(c, [meas([0.44, 0.45, 0.445])])
    assert missing.verdict == INCONCLUSIVE and "not measured (needs a re-take)" in missing.reason
    assert missing.category == "guard not measured"


def test_below_min_profile_is_indicative_with_what_it_would_say():
    c = claim(min_profile="paper", deterministic=True)
    j = judge(c, [meas([0.44])])
    assert j.verdict == INDICATIVE and "would be: reproduced" in j.reason and "needs paper" in j.reason
    assert judge(c, [meas([0.44], profile="paper")]).verdict == REPRODUCED


def test_every_setting_is_judged_not_the_last():
    c = claim(deterministic=True)
    good, bad = meas([0.44], setting="d=16"), meas([0.2], setting="d=64")
    for order in ([good, bad], [bad, good]):
        j = judge(c, order)
        assert j.verdict == DIFFERS and "1 of 2 settings" in j.reason and "d=64" in j.reason
    assert judge(c, [good, meas([0.45], setting="d=64")]).verdict == REPRODUCED


def test_data_rules_standin_and_other_dataset():
    c = claim(deterministic=True)
    assert verdict(c, []) == (NOT_MEASURED, None)
    assert verdict(c, [meas([0.2], dataset="ml-100k")])[0] == NOT_MEASURED
    assert verdict(c, [meas([0.44], dataset="netflix [synthetic stand-in]", real=False)])[0] == STANDIN_ONLY
    assert judge(claim(shown_not_judged="hardware-dependent"), [meas([9.0])]).verdict == SHOWN


def test_merge_replicates_keeps_one_value_per_seed_and_marks_missing():
    runs = [[meas([1.0], setting="a", guards={"g": 1.0}), meas([5.0], setting="b")],
            [meas([2.0], setting="a", guards={"g": 2.0})],
            [meas([3.0], setting="a", guards={"g": 3.0}), meas([6.0], setting="b")]]
    for r in runs:
        for m in r:
            m.pop("values")
            m["guards"] = {k: v[0] if isinstance(v, list) else v for k, v in m["guards"].items()}
    merged = merge_replicates(runs, [0, 1, 2])
    a, b = merged
    assert a["values"] == [1.0, 2.0, 3.0] and a["value"] == 2.0 and a["guards"] == {"g": [1.0, 2.0, 3.0]}
    assert math.isnan(b["values"][1])  # missing in one seed: never silently fewer seeds
    assert judge(claim(reference=5.5, tolerance=10, deterministic=False), [{**b, "profile": "ci"}]).verdict \
        == INCONCLUSIVE


def _write_claims(tmp_path, **row):
    base = dict(id="x", paper="liu", where="s", quote="q", dataset="netflix", reference=0.0, unit="u", measures="m",
                notebook="liu_fig1", min_profile="ci", direction="greater", margin=0.01)
    base.update(row)
    p = tmp_path / "claims.yaml"
    p.write_text(yaml.safe_dump({"claims": [{k: v for k, v in base.items() if v is not None or k == "reference"}]}))
    return p


def test_loader_requires_margin_min_profile_and_well_formed_guards(tmp_path):
    assert load_claims(_write_claims(tmp_path))[0].margin == 0.01
    with pytest.raises(ParameterError, match="needs `margin:`"):
        load_claims(_write_claims(tmp_path, margin=None))
    with pytest.raises(ParameterError, match="min_profile"):
        load_claims(_write_claims(tmp_path, min_profile=None))
    with pytest.raises(ParameterError, match="min_profile must be ci or paper"):
        load_claims(_write_claims(tmp_path, min_profile="smoke"))
    with pytest.raises(ParameterError, match="guard 'g' needs `why`"):
        load_claims(_write_claims(tmp_path, guards={"g": {"min": 1}}))
    c = load_claims(_write_claims(tmp_path, guards={"g": {"min": 1, "why": "because"}}))[0]
    assert c.guards == (Guard("g", "because", min=1),)


def test_non_finite_values_and_guards_are_never_evidence():
    c = claim(tolerance=None, direction="greater", reference=0.0, margin=0.1, deterministic=True)
    j = judge(c, [meas([float("inf")])])
    assert j.verdict == INCONCLUSIVE and "finite" in j.reason  # inf used to pass "greater" as reproduced
    assert judge(claim(), [meas([0.44, 0.45, float("inf")])]).verdict == INCONCLUSIVE
    g = Guard("chain_moved", "the chain must move", min=0.001)
    assert not g.holds(float("inf")) and not g.holds(float("nan")) and g.holds(0.01)


def test_a_direction_claim_says_why_it_differs():
    c = claim(tolerance=None, direction="greater", reference=0.0, margin=0.005)
    assert "not past reference + margin" in judge(c, [meas([0.0002, 0.0003, 0.00025])]).reason
    assert "wrong side" in judge(c, [meas([-0.02, -0.03, -0.025])]).reason


def test_loader_refuses_equal_without_reference_and_bad_tolerances(tmp_path):
    with pytest.raises(ParameterError, match="direction greater or less"):
        load_claims(_write_claims(tmp_path, direction="equal", margin=None, reference=None))
    with pytest.raises(ParameterError, match="tolerance must be a finite number"):
        load_claims(_write_claims(tmp_path, direction=None, margin=None, tolerance=-0.1))
    with pytest.raises(ParameterError, match="`min` must be a finite number"):
        load_claims(_write_claims(tmp_path, guards={"g": {"min": "big", "why": "w"}}))


def test_a_share_of_cells_is_judged_cell_by_cell_over_the_seeds_not_as_independent_draws():
    from scipy import stats

    share = claim(tolerance=None, direction="greater", reference=0.75, margin=0.05, unit="share of eps values")
    rng = __import__("numpy").random.default_rng(0)
    clear = [[0.05 + 0.002 * rng.standard_normal() for _ in range(9)] for _ in range(5)]
    won = judge(share, [meas([1.0] * 5, profile="paper", cells=clear)])
    # every seed wins every cell by far: 9 of 9 above 0 at the Bonferroni level — reproduced, though the seeds agree
    assert won.verdict == REPRODUCED and (won.lo, won.hi) == (1.0, 1.0) and "9 of 9" in won.reason
    # the same shares (1.0 in every seed) from differences that are small against their spread: not evidence
    noisy = [[0.01 + 0.02 * rng.standard_normal() for _ in range(9)] for _ in range(5)]
    noisy = [[abs(v) for v in r] for r in noisy]  # every seed still wins every cell
    j = judge(share, [meas([1.0] * 5, profile="paper", cells=noisy)])
    assert j.verdict in (INCONCLUSIVE, DIFFERS) and j.lo < 0.8
    # the Bonferroni level by hand: a cell whose plain 95 % t-interval lies above 0 but whose 1 − 0.05/2 one does not
    dev = [-2.0, -1.0, 0.0, 1.0, 2.0]  # sd = sqrt(2.5), se = sd / sqrt(5)
    se = stats.tstd(dev) / 5 ** 0.5
    mid = 0.5 * (stats.t.ppf(0.975, 4) + stats.t.ppf(1 - 0.025 / 2, 4)) * se
    col = [mid + d for d in dev]
    assert share_of_cells_interval([[c] for c in col])[1] == 1.0  # m = 1: the plain 95 % interval is above 0
    assert share_of_cells_interval([[c, 10 + 0.1 * d] for c, d in zip(col, dev)])[1:3] == (0.5, 1.0)  # m = 2: not
    # 3 of 9 cells clearly positive, 6 clearly negative: [1/3, 1/3] → differs
    third = [[0.05] * 3 + [-0.05] * 6 for _ in range(5)]
    third = [[v + 0.001 * rng.standard_normal() for v in r] for r in third]
    t = judge(share, [meas([1 / 3] * 5, profile="paper", cells=third)])
    assert t.verdict == DIFFERS and math.isclose(t.lo, 1 / 3) and math.isclose(t.hi, 1 / 3)
    # a cell that never varies over seeds, a seed without cells, a cell with one finite seed: inconclusive
    frozen = [r[:] for r in clear]
    for r in frozen:
        r[4] = 0.05
    assert "same difference" in judge(share, [meas([1.0] * 5, profile="paper", cells=frozen)]).reason
    assert "lacks" in judge(share, [meas([1.0] * 5, profile="paper", cells=clear[:4] + [None])]).reason
    nan = [r[:] for r in clear]
    for r in nan[1:]:
        r[2] = float("nan")
    assert "finite in 1 of 5 seeds" in judge(share, [meas([1.0] * 5, profile="paper", cells=nan)]).reason
    one_missing = [r[:] for r in clear]
    one_missing[3][2] = float("nan")  # 4 of 5 seeds would be enough for a t-interval: still never fewer than were run
    assert "finite in 4 of 5 seeds" in judge(share, [meas([1.0] * 5, profile="paper", cells=one_missing)]).reason
    # an exact tie in every seed (both decoders agree: JLT at small ε) is no win, not "the seed does not reach it"
    tied = [r[:] for r in clear]
    for r in tied:
        r[0] = 0.0
    t = judge(share, [meas([8 / 9] * 5, profile="paper", cells=tied)])
    assert t.verdict == REPRODUCED and math.isclose(t.mean, 8 / 9) and math.isclose(t.lo, 8 / 9) and t.asymmetric
    # without cells (or for a claim that is not a share) the no-spread rule still holds
    assert "seed does not reach" in judge(share, [meas([1.0] * 5, profile="paper")]).reason
    assert "seed does not reach" in judge(claim(), [meas([0.44] * 3, cells=clear[:3])]).reason


def test_cells_merge_as_one_list_per_seed_and_stay_out_of_other_measurements():
    a = Measurement("c", 1.0, "ml-100k", True, cells=(0.1, 0.2)).as_dict()
    b = Measurement("c", 0.5, "ml-100k", True, cells=(0.1, -0.2)).as_dict()
    merged = merge_replicates([[a], [b], []], [0, 1, 2])[0]
    assert merged["cells"] == [[0.1, 0.2], [0.1, -0.2], None]
    assert "cells" not in Measurement("c", 1.0, "ml-100k", True).as_dict()  # saved JSON unchanged for the rest


def test_the_judging_code_is_not_a_run_input_and_nothing_a_run_saves_comes_from_it():
    """verdicts.py is left out of every code hash (dependencies.NOT_RUN_INPUTS). That is only sound while no
    experiment imports it and NotebookRun.save writes nothing it computes: a judging-rule change must re-judge the
    snapshot, and must not be able to change a saved result."""
    import ast
    import inspect

    from dpmf_lib import outputs, verdicts
    from dpmf_lib.dependencies import NOT_RUN_INPUTS, module_closure
    from dpmf_lib.paths import REPO_ROOT

    assert NOT_RUN_INPUTS == {"dpmf_lib.verdicts"}
    modules = sorted((REPO_ROOT / "dpmf_lib" / "experiments").glob("*/*.py"))
    assert len(modules) > 40
    for f in modules:
        if f.name == "__init__.py":
            continue
        tree = ast.parse(f.read_text(encoding="utf-8"))
        names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not any(x.endswith("verdicts") for x in names), f"{f.name} imports the judging code"
        closure = {p.name for p in module_closure(module_name(f.stem))}
        assert "verdicts.py" not in closure
    assert "dpmf_lib/outputs.py" in {p.relative_to(REPO_ROOT).as_posix() for p in module_closure("dpmf_lib.outputs")}
    save_src = inspect.getsource(outputs.NotebookRun.save)
    assert "judge" not in save_src and "claims_table" not in save_src and "verdict" not in save_src
    assert verdicts.__name__ in NOT_RUN_INPUTS
