import pytest
import yaml

from dpmf_lib.errors import ParameterError
from dpmf_lib.params import PROFILES, load_params, require_positive
from dpmf_lib.paths import params_dir

PARAM_FILES = sorted(p for p in params_dir().glob("*.yaml") if p.stem not in ("registry", "claims", "expected_verdicts"))


def write(tmp_path, doc):
    p = tmp_path / "x.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_profiles_override_defaults_and_overrides_win(tmp_path):
    p = write(tmp_path, {"defaults": {"a": 1, "b": [1, 2]}, "profiles": {"smoke": {"a": 2}, "ci": {}, "paper": None}})
    assert load_params("x", "smoke", path=p) == {"a": 2, "b": [1, 2], "profile": "smoke"}
    assert load_params("x", "paper", path=p)["a"] == 1
    assert load_params("x", "smoke", {"b": [3]}, path=p)["b"] == [3]


def test_unknown_name_in_profile_names_file_profile_and_suggestion(tmp_path):
    p = write(tmp_path, {"defaults": {"epsilon": 1}, "profiles": {"smoke": {"epsilom": 2}, "ci": {}, "paper": {}}})
    with pytest.raises(ParameterError) as e:
        load_params("x", "ci", path=p)
    msg = str(e.value)
    assert str(p) in msg and "smoke" in msg and "epsilom" in msg and "did you mean 'epsilon'" in msg


def test_unknown_override_and_profile_are_errors(tmp_path):
    p = write(tmp_path, {"defaults": {"a": 1}, "profiles": {"smoke": {}, "ci": {}, "paper": {}}})
    with pytest.raises(ParameterError, match="unknown parameter 'zz'"):
        load_params("x", "ci", {"zz": 1}, path=p)
    with pytest.raises(ParameterError, match="unknown profile 'fast'"):
        load_params("x", "fast", path=p)


def test_missing_profile_block_is_an_error(tmp_path):
    p = write(tmp_path, {"defaults": {"a": 1}, "profiles": {"smoke": {}, "ci": {}}})
    with pytest.raises(ParameterError, match="paper"):
        load_params("x", "ci", path=p)


def test_missing_file_says_how_to_create_it(tmp_path):
    with pytest.raises(ParameterError, match="no such parameter file"):
        load_params("x", "ci", path=tmp_path / "nope.yaml")


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), None, "1"])
def test_require_positive_rejects(value):
    with pytest.raises(ParameterError, match="epsilon"):
        require_positive({"epsilon": value}, "epsilon")


@pytest.mark.parametrize("path", PARAM_FILES, ids=lambda p: p.stem)
def test_every_params_file_resolves_at_every_profile(path):
    for prof in PROFILES:
        assert load_params(path.stem, prof)["profile"] == prof
