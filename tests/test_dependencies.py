"""The closure parser's cache (:func:`dpmf_lib.dependencies._imported_names`) follows a file's edits."""

from dpmf_lib import dependencies


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
