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


# -- nested mappings, kinds, duplicate keys ---------------------------------------------------------------------------

def test_a_nested_override_merges_into_the_mapping_and_keeps_its_other_keys():
    """`--set 'sgd={eta0: 0.1}'` replaced the whole `sgd` mapping: KeyError: 'epochs' in cell 4 after 17 s."""
    base = load_params("liu_fig7", "smoke")["sgd"]
    p = load_params("liu_fig7", "smoke", {"sgd": {"eta0": 0.1}})
    assert p["sgd"] == {**base, "eta0": 0.1}
    assert load_params("liu_fig7", "smoke")["sgd"] == base  # the file's value is not changed in place


def test_a_nested_typo_is_named_with_did_you_mean():
    with pytest.raises(ParameterError, match=r"unknown key 'eta' in parameter 'sgd' \(did you mean 'eta0'\?\); "
                                             r"its keys are: epochs, eta0"):
        load_params("liu_fig7", "smoke", {"sgd": {"eta": 0.1}})
    with pytest.raises(ParameterError, match=r"unknown key 'sweep' in parameter 'gibbs' \(did you mean 'sweeps'"):
        load_params("liu_fig7", "smoke", {"gibbs": {"sweep": 3}})


def test_a_mapping_keyed_by_dataset_takes_dataset_ids_only():
    assert load_params("liu_fig7", "smoke", {"tau": {"ml-100k": 50}})["tau"]["ml-100k"] == 50
    with pytest.raises(ParameterError, match=r"'tau' is keyed by dataset id; 'ml-100kk' is not one \(did you mean "
                                             r"'ml-100k'"):
        load_params("liu_fig7", "smoke", {"tau": {"ml-100kk": 50}})


@pytest.mark.parametrize("name,over,says", [
    ("liu_fig7", {"tau": 100}, r"parameter 'tau' must be a mapping like the params file's \{'ml-100k'"),
    ("hua_fig2", {"d": True}, r"parameter 'd' must be a number .* got the boolean True \(a boolean is not a number\)"),
    ("liu_fig7", {"sgd": {"epochs": "1e9"}}, r"'sgd.epochs' must be a number .*YAML reads '1e9' as a string: "
                                             r"write a number with a decimal point, e.g. 1000000000.0"),
    ("liu_fig7", {"sgd": 5}, r"parameter 'sgd' must be a mapping"),
    ("hua_fig2", {"iterations": 40}, r"parameter 'iterations' must be a list like the params file's \[10, 40"),
    ("hua_fig2", {"cache": 1}, r"parameter 'cache' must be a boolean"),
])
def test_a_value_of_the_wrong_kind_is_named_before_anything_runs(name, over, says):
    """`tau: 100` and `d: true` ended in a TypeError inside the experiment."""
    with pytest.raises(ParameterError, match=says):
        load_params(name, "smoke", over)


def test_kinds_the_file_allows_are_accepted():
    # a number where the profiles give another number type, null where the file has null, per-dataset or scalar
    assert load_params("balu_table4_2", "smoke", {"refine": 0})["refine"] == 0
    assert load_params("balu_fig3_2", "smoke", {"n_attacked": None})["n_attacked"] is None
    assert load_params("liu_fig7", "smoke", {"private": {"burn_in": {"ml-100k": 3}}})["private"]["burn_in"] == \
        {"ml-100k": 3}


def test_a_repeated_key_in_a_params_file_is_an_error(tmp_path):
    """A key repeated in a params YAML silently took the last value."""
    p = tmp_path / "x.yaml"
    p.write_text("defaults:\n  seed: 0\n  d: 8\n  seed: 1\nprofiles: {smoke: {}, ci: {}, paper: {}}\n")
    with pytest.raises(ParameterError, match=r"x.yaml: key 'seed' appears twice in one mapping \(lines 2 and 4\)"):
        load_params("x", "smoke", path=p)
    p.write_text("defaults:\n  sgd: {eta0: 1, eta0: 2}\nprofiles: {smoke: {}, ci: {}, paper: {}}\n")
    with pytest.raises(ParameterError, match="key 'eta0' appears twice"):
        load_params("x", "smoke", path=p)


def test_no_committed_yaml_file_repeats_a_key():
    from dpmf_lib.params import read_yaml

    for f in sorted(params_dir().glob("*.yaml")):
        read_yaml(f)
