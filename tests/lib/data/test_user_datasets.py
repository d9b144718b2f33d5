"""Bring your own dataset: a ratings CSV of the user's, registered (`python -m data_fetch add`) or given inline as a
spec in the parameters, read by load_ratings, accepted by require_datasets, recorded with its checksum in the data
state, and run end to end through Liu Fig. 7's experiment."""

import json

import numpy as np
import pytest

from data_fetch.__main__ import main as data_fetch_main
from dpmf_lib.data import load_ratings, user
from dpmf_lib.dependencies import dataset_state, states_of_run
from dpmf_lib.errors import ParameterError
from dpmf_lib.params import load_params, require_datasets


def write_csv(path, n_users=60, n_items=40, density=0.5, seed=0):
    """A small half-star ratings CSV (MovieLens ratings.csv layout) from a rank-2 model."""
    rng = np.random.default_rng(seed)
    u, v = rng.normal(size=(n_users, 2)), rng.normal(size=(n_items, 2))
    lines = ["userId,movieId,rating,timestamp"]
    for i in range(n_users):
        for j in range(n_items):
            if rng.random() < density:
                r = np.clip(np.round((2.75 + u[i] @ v[j]) * 2) / 2, 0.5, 5.0)
                lines.append(f"{i + 1},{100 + j},{r:g},{1_000_000 + i * n_items + j}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def user_data(dest, monkeypatch):
    """conftest's empty data dir (the user registry lives there) and a clean set of inline specs."""
    monkeypatch.setattr(user, "_INLINE", {})
    return dest


def test_add_registers_outside_the_repo_and_load_ratings_reads_it(user_data, tmp_path, capsys):
    csv = write_csv(tmp_path / "mine.csv")
    assert data_fetch_main(["add", "mine", str(csv), "--format", "csv-header", "--scale", "0.5,5"]) == 0
    assert "mine:" in capsys.readouterr().out
    assert user.registry_path() == user_data / "user-datasets.yaml" and user.registry_path().exists()
    r = load_ratings("mine")
    assert r.source.real and r.source.dataset == "mine" and r.rating_scale == (0.5, 5.0)
    assert r.source.checksum == user.checksum(user.lookup("mine"))
    assert r.n_ratings == len(csv.read_text().splitlines()) - 1
    assert require_datasets({"datasets": ["ml-100k", "mine"]}) == ["ml-100k", "mine"]
    assert data_fetch_main(["--list"]) == 0 and "mine" in capsys.readouterr().out
    # the data state is the file's checksum, and it changes with the file
    state = dataset_state("mine")
    assert state == f"real:{r.source.checksum}"
    assert states_of_run([r.source.as_dict()]) == {"mine": state}
    csv.write_text(csv.read_text().replace("userId,movieId,rating,timestamp\n1,", "userId,movieId,rating,timestamp\n2,", 1))
    assert dataset_state("mine") != state
    assert data_fetch_main(["remove", "mine"]) == 0
    with pytest.raises(ParameterError, match="unknown dataset 'mine'"):
        require_datasets({"datasets": ["mine"]})


def test_inline_spec_in_params_is_checked_registered_and_replaced_by_its_id(user_data, tmp_path):
    csv = write_csv(tmp_path / "inline.csv")
    spec = {"id": "inl", "path": str(csv), "format": "csv-header", "rating_scale": [0.5, 5]}
    params = {"datasets": [spec]}
    assert require_datasets(params) == ["inl"] and params["datasets"] == ["inl"]
    assert load_ratings("inl").n_ratings > 0 and load_ratings(spec).source.dataset == "inl"
    # load_params registers specs given as overrides (so the runner's process knows them too)
    user._INLINE.clear()
    p = load_params("liu_fig7", "smoke", {"datasets": [spec]})
    assert p["datasets"] == [spec] and user.lookup("inl") is not None


@pytest.mark.parametrize("bad, field", [
    ({"id": "x", "path": "/nonexistent.csv", "format": "csv-header", "rating_scale": [1, 5]}, "'path'"),
    ({"id": "x", "format": "csv-header", "rating_scale": [1, 5]}, "missing field"),
    ({"id": "x", "path": "P", "format": "xlsx", "rating_scale": [1, 5]}, "'format'"),
    ({"id": "x", "path": "P", "format": "csv-header", "rating_scale": [5, 1]}, "'rating_scale'"),
    ({"id": "x", "path": "P", "format": "csv-header", "rating_scale": "one to five"}, "'rating_scale'"),
    ({"id": "x", "path": "P", "format": "csv-header", "rating_scale": [1, 5], "rating_step": -1}, "'rating_step'"),
    ({"id": "ml-100k", "path": "P", "format": "csv-header", "rating_scale": [1, 5]}, "built-in"),
    ({"id": "a b", "path": "P", "format": "csv-header", "rating_scale": [1, 5]}, "'id'"),
    ({"id": "x", "path": "P", "format": "csv-header", "rating_scale": [1, 5], "scale": 1}, "unknown field"),
])
def test_bad_specs_name_the_field_and_the_fix(user_data, tmp_path, bad, field):
    csv = write_csv(tmp_path / "ok.csv", n_users=5, n_items=5)
    bad = {k: (str(csv) if v == "P" else v) for k, v in bad.items()}
    with pytest.raises(ParameterError, match=field) as exc:
        require_datasets({"datasets": [bad]})
    assert "parameter 'datasets', entry 1" in str(exc.value)


def test_add_refuses_a_bad_file_with_its_line(user_data, tmp_path, capsys):
    csv = tmp_path / "bad.csv"
    csv.write_text("userId,movieId,rating\n1,2,4\n1,3,9\n")
    assert data_fetch_main(["add", "bad", str(csv), "--format", "csv-header", "--scale", "1,5"]) == 1
    err = capsys.readouterr().err
    assert "bad.csv" in err and not user.registry_path().exists()


def test_liu_fig7_runs_end_to_end_on_a_users_csv(user_data, tmp_path):
    from dpmf_lib.experiments.liu import liu_fig7

    csv = write_csv(tmp_path / "mine.csv")
    assert data_fetch_main(["add", "mine", str(csv), "--format", "csv-header", "--scale", "0.5,5"]) == 0
    # tau is per dataset in Liu Fig. 7: a user's dataset needs its own
    params = load_params("liu_fig7", "smoke", {"datasets": ["mine"], "tau": {"mine": 20}})
    df = liu_fig7.run(params)
    assert set(df.dataset) == {"mine"} and df.real.all()
    assert np.isfinite(df.test_rmse).all()
    assert df.attrs["sources"][0]["checksum"] == user.checksum(user.lookup("mine"))
    fig = liu_fig7.plot(df, params)
    assert fig is not None
    json.dumps(df.attrs["sources"])  # provenance-ready
