"""The caches of :mod:`dpmf_lib.dependencies`: the closure parser's (:func:`~dpmf_lib.dependencies._imported_names`)
follows a file's edits; the claims' (:func:`~dpmf_lib.dependencies.current_claims`) never hides a broken file."""

import pytest

from dpmf_lib import claims as claims_mod
from dpmf_lib import dependencies
from dpmf_lib.errors import ParameterError


def test_an_edited_file_has_its_imports_read_again(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text("from dpmf_lib import params\n", encoding="utf-8")
    first = dependencies._imports(src, "dpmf_lib.mod")
    src.write_text("from dpmf_lib import claims\nimport numpy\n", encoding="utf-8")
    second = dependencies._imports(src, "dpmf_lib.mod")
    assert "dpmf_lib.params" in first and "dpmf_lib.claims" not in first
    assert "dpmf_lib.claims" in second and "dpmf_lib.params" not in second
    assert dependencies._imports(src, "dpmf_lib.mod") == second  # and the same text answers the same


def test_relative_imports_resolve_against_the_package_not_the_cache_key(tmp_path):
    src = tmp_path / "mod.py"
    src.write_text("from .params import load_params\n", encoding="utf-8")
    assert "dpmf_lib.params" in dependencies._imports(src, "dpmf_lib.mod")
    # the same text as a module one package down names another (absent) module: nothing local is found
    assert dependencies._imports(src, "dpmf_lib.mf.mod") == {"dpmf_lib", "dpmf_lib.mf"}


def test_current_claims_says_what_is_wrong_with_the_file_and_a_caller_cannot_change_it(tmp_path, monkeypatch):
    good = claims_mod.claims_path().read_text(encoding="utf-8")
    path = tmp_path / "claims.yaml"
    monkeypatch.setattr(claims_mod, "claims_path", lambda: path)
    with pytest.raises(ParameterError, match="no such parameter file"):
        dependencies.current_claims()
    path.write_text(good, encoding="utf-8")
    first = dependencies.current_claims()
    n = len(first)
    first.clear()  # the caller's list, not the kept one
    assert len(dependencies.current_claims()) == n
    path.write_text(good + "\n  - [not: valid\n", encoding="utf-8")
    with pytest.raises(ParameterError, match="not valid YAML"):
        dependencies.current_claims()
    with pytest.raises(ParameterError, match="not valid YAML"):  # an error is never kept as the answer
        dependencies.current_claims()
