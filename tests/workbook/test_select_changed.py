"""`make test-quick`'s selection (tests/select_changed.py): a changed file makes candidates of the test files whose
static import closure holds it (dpmf_lib.dependencies' closure, plus the tests, minus its exception), read files map
by rule; the selection takes the candidates nearest the change, most specific first, within the budget of recorded
durations, plus the sentinels; a change that maps to nothing runs the fast set."""

from pathlib import Path

import pytest

from dpmf_lib import dependencies
from tests import select_changed as sc


def cands(changed: list[str]) -> list[str]:
    return sorted({t for tests in sc.candidates(changed).values() for t in tests})


def test_a_library_module_selects_the_tests_that_import_it_directly_or_not():
    got = cands(["dpmf_lib/mf/csgd.py"])
    assert "tests/lib/mf/test_kernels.py" in got  # imports dpmf_lib.mf.csgd
    assert "tests/experiments/liu/test_fig4.py" in got  # through dpmf_lib.experiments.liu.liu_fig4 -> dpmf_lib.mf
    assert "tests/workbook/test_params.py" not in got and "tests/lib/lsh/test_scan.py" not in got


def test_the_judging_rules_select_the_report_tests_though_no_run_closure_holds_them():
    assert "dpmf_lib.verdicts" in dependencies.NOT_RUN_INPUTS
    got = cands(["dpmf_lib/verdicts.py"])
    assert {"tests/workbook/test_verdicts.py", "tests/workbook/test_report.py"} <= set(got)


def test_the_closure_is_the_run_closure_of_dpmf_lib_dependencies_apart_from_its_exception():
    hidden = set(dependencies.NOT_RUN_INPUTS)
    modules = sorted({sc.module_name(p) for root in ("dpmf_lib", "data_fetch")
                      for p in (sc.REPO / root).rglob("*.py") if "__pycache__" not in p.parts})
    assert len(modules) > 100
    for m in modules:
        if m in hidden:
            continue
        ours = {sc.module_path(n) for n in sc.closure(sc.module_path(m))} - {None}
        theirs = set(dependencies.module_closure(m))
        if sc.closure(sc.module_path(m)) & hidden:
            assert ours >= theirs, m
        else:
            assert ours == theirs, m


def test_test_helpers_and_test_modules_imported_by_others_are_followed():
    got = cands(["tests/nbm_toys.py"])
    assert "tests/lib/nbm/test_kernels.py" in got  # imports nbm_toys
    assert "tests/lib/nbm/test_model.py" in got  # imports test_kernels' toy
    assert "tests/lib/mf/test_kernels.py" not in got
    assert cands(["tests/lib/mf/test_rowvec.py"]) == ["tests/lib/mf/test_rowvec.py"]


def test_a_changed_conftest_selects_the_tests_using_its_fixtures_or_importing_it():
    got = set(cands(["tests/conftest.py"]))
    assert "tests/workbook/test_runner.py" in got  # figures_tmp
    assert "tests/workbook/test_data_fetch.py" in got  # dest, mirror, and imports it
    assert "tests/lib/data/test_loaders.py" in got  # imports needs_ml100k
    assert "tests/lib/mf/test_kernels.py" not in got


def test_read_files_map_by_rule():
    got = cands(["params/liu_fig4.yaml"])
    assert "tests/workbook/test_params.py" in got and "tests/experiments/liu/test_fig4.py" in got
    assert "tests/lib/mf/test_kernels.py" not in got
    assert cands(["requirements.lock"]) == ["tests/workbook/test_environment.py"]
    assert sc.select(["requirements.lock"]) == sorted({"tests/workbook/test_environment.py", *sc.SENTINELS})
    assert "tests/workbook/test_notebooks.py" in cands(["notebooks/liu_fig4.ipynb"])


def test_a_change_that_maps_to_nothing_runs_the_fast_set(capsys):
    assert sc.select(["notes/STATUS.md"]) == []
    assert sc.main(["notes/STATUS.md"]) == 0
    out, err = capsys.readouterr()
    assert out.split() == list(sc.FAST_SET) and "fast set" in err
    assert all((sc.REPO / f).is_file() for f in sc.FAST_SET)


@pytest.mark.parametrize("path", sorted(sc.READ_FILES))
def test_every_read_file_rule_names_existing_files(path):
    assert (sc.REPO / path).is_file()
    assert all((sc.REPO / t).is_file() for t in sc.READ_FILES[path])


def test_every_test_file_is_found_and_has_a_closure():
    found = sc.test_files()
    assert Path(__file__).resolve() in found and len(found) > 80
    assert all(sc.module_name(t) in sc.closure(t) for t in found)


# -- the budget ---------------------------------------------------------------------------------------------------------

CENTRAL = ("dpmf_lib/mf/csgd.py", "dpmf_lib/validate.py", "dpmf_lib/metrics.py", "dpmf_lib/privacy/common.py",
           "dpmf_lib/data/loaders.py", "dpmf_lib/data/ratings.py", "dpmf_lib/errors.py", "dpmf_lib/__init__.py")


@pytest.mark.parametrize("changed, own", [
    ("dpmf_lib/mf/csgd.py", {"tests/lib/mf/test_kernels.py", "tests/lib/mf/test_hot_rows.py"}),
    ("dpmf_lib/validate.py", {"tests/lib/test_validate.py"}),
    ("dpmf_lib/metrics.py", {"tests/lib/test_metrics.py"}),
    ("dpmf_lib/privacy/common.py", {"tests/lib/privacy/test_ledger.py"}),
    ("dpmf_lib/data/loaders.py", {"tests/lib/data/test_loaders.py"}),
])
def test_a_central_module_selects_its_own_tests_and_stays_within_the_budget(changed, own):
    why = {}
    got = sc.select([changed], why)
    assert own <= set(got) and set(sc.SENTINELS) <= set(got)
    assert sum(sc.cost(t) for t in got) <= sc.BUDGET_SECONDS
    assert len(got) < len(cands([changed]))  # the rest is farther, or past the budget


@pytest.mark.parametrize("changed", CENTRAL)
def test_every_central_module_stays_within_the_budget_by_the_recorded_durations(changed):
    assert sum(sc.cost(t) for t in sc.select([changed])) <= sc.BUDGET_SECONDS


def test_a_leaf_selects_all_its_near_tests():
    changed = "dpmf_lib/attacks/metrics.py"
    got = set(sc.select([changed]))
    near = {t for t, (d, _) in sc.candidates([changed])[changed].items() if d <= sc.MAX_DISTANCE}
    assert {"tests/lib/attacks/test_theory.py", "tests/lib/attacks/test_point_mass.py"} <= near <= got


def test_a_name_a_package_re_exports_is_an_import_of_the_module_defining_it():
    """`from dpmf_lib.mf import train_sgd` uses mf/csgd.py (distance 1); `from dpmf_lib.mf import init_model` only runs
    mf/__init__, which imports csgd (distance 2); a test helper is part of the test (distance 0)."""
    assert sc.reexports("dpmf_lib.mf")["train_sgd"] == "dpmf_lib.mf.csgd"
    assert sc.distances(sc.REPO / "tests/lib/mf/test_kernels.py")["dpmf_lib.mf.csgd"] == 1
    metrics = sc.distances(sc.REPO / "tests/lib/test_metrics.py")
    assert metrics["dpmf_lib.metrics"] == 1 and metrics["dpmf_lib.mf.model"] == 1 and metrics["dpmf_lib.mf.csgd"] == 2
    assert sc.distances(sc.REPO / "tests/lib/nbm/test_model.py")["tests.lib.nbm.test_kernels"] == 0


def test_most_specific_first_and_each_changed_file_gets_its_turn(monkeypatch):
    """With made-up durations: the test named after the module before the others, the cheap before the dear at the
    same distance, the farther only when the budget allows; with two changes each one's best is taken."""
    files = [t.relative_to(sc.REPO).as_posix() for t in sc.test_files()]
    fake = {f: {"seconds": 10.0} for f in files}
    fake.update({s: {"seconds": 0.0} for s in sc.SENTINELS})
    monkeypatch.setattr(sc, "recorded", lambda: fake)
    cand = sc.candidates(["dpmf_lib/metrics.py"])["dpmf_lib/metrics.py"]
    assert cand["tests/lib/test_metrics.py"][0] == 1
    assert sc.select(["dpmf_lib/metrics.py"], budget=10) == sorted({"tests/lib/test_metrics.py", *sc.SENTINELS})
    assert len(sc.select(["dpmf_lib/metrics.py"], budget=30)) == len(sc.SENTINELS) + 3
    both = sc.select(["dpmf_lib/metrics.py", "dpmf_lib/data/loaders.py"], budget=20)
    assert {"tests/lib/test_metrics.py", "tests/lib/data/test_loaders.py"} <= set(both)
    assert len(both) == len(sc.SENTINELS) + 2
    edited = sc.select(["tests/lib/mf/test_kernels.py"], budget=0)  # an edited test file runs whatever it costs
    assert "tests/lib/mf/test_kernels.py" in edited


def test_every_test_file_has_a_recorded_duration():
    """A new or moved test file: `python tests/select_changed.py --record tests/…/test_new.py` (on a quiet machine)."""
    files = {t.relative_to(sc.REPO).as_posix() for t in sc.test_files()}
    rec = sc.recorded()
    assert sorted(files - set(rec)) == [] and sorted(set(rec) - files) == []
    assert all(r["seconds"] >= 0 and r["tests"] >= 0 for r in rec.values())
