"""`make test-quick`'s selection (tests/select_changed.py): a changed file selects the test files whose static import
closure holds it, the closure is dpmf_lib.dependencies' one (plus the tests, minus its exception), read files map by
rule, and a change that maps to nothing runs the fast set."""

from pathlib import Path

import pytest

from dpmf_lib import dependencies
from tests import select_changed as sc


def test_a_library_module_selects_the_tests_that_import_it_directly_or_not():
    got = sc.select(["dpmf_lib/mf/csgd.py"])
    assert "tests/lib/mf/test_kernels.py" in got  # imports dpmf_lib.mf.csgd
    assert "tests/experiments/liu/test_fig4.py" in got  # through dpmf_lib.experiments.liu.liu_fig4 -> dpmf_lib.mf
    assert "tests/workbook/test_params.py" not in got and "tests/lib/lsh/test_scan.py" not in got


def test_the_judging_rules_select_the_report_tests_though_no_run_closure_holds_them():
    assert "dpmf_lib.verdicts" in dependencies.NOT_RUN_INPUTS
    got = sc.select(["dpmf_lib/verdicts.py"])
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
    got = sc.select(["tests/nbm_toys.py"])
    assert "tests/lib/nbm/test_kernels.py" in got  # imports nbm_toys
    assert "tests/lib/nbm/test_model.py" in got  # imports test_kernels' toy
    assert "tests/lib/mf/test_kernels.py" not in got
    assert sc.select(["tests/lib/mf/test_rowvec.py"]) == ["tests/lib/mf/test_rowvec.py"]


def test_a_changed_conftest_selects_the_tests_using_its_fixtures_or_importing_it():
    got = set(sc.select(["tests/conftest.py"]))
    assert "tests/workbook/test_runner.py" in got  # figures_tmp
    assert "tests/workbook/test_data_fetch.py" in got  # dest, mirror, and imports it
    assert "tests/lib/data/test_loaders.py" in got  # imports needs_ml100k
    assert "tests/lib/mf/test_kernels.py" not in got


def test_read_files_map_by_rule():
    got = sc.select(["params/liu_fig4.yaml"])
    assert "tests/workbook/test_params.py" in got and "tests/experiments/liu/test_fig4.py" in got
    assert "tests/lib/mf/test_kernels.py" not in got
    assert sc.select(["requirements.lock"]) == ["tests/workbook/test_environment.py"]
    assert "tests/workbook/test_notebooks.py" in sc.select(["notebooks/liu_fig4.ipynb"])


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
