"""The one result cache (dpmf_lib.cache): a joblib.Memory in one directory, one switch ($DPMF_CACHE on|refresh|off),
reached by `reproduce --force` (refresh) and `make clean-figures` / `make clean` (cleared); the Balu chapter-3 and Hua
caches go through it."""

import subprocess

import pytest

from dpmf_lib import cache
from dpmf_lib.runner import cli
from dpmf_lib.errors import ParameterError
from dpmf_lib.paths import REPO_ROOT, cache_dir

CALLS = []


def counted(x, note="ignored"):
    CALLS.append(x)
    return {"x": x, "sq": x * x}


@pytest.fixture
def fresh_cache(figures_tmp, monkeypatch):
    monkeypatch.delenv("DPMF_CACHE_DIR", raising=False)
    monkeypatch.delenv("DPMF_CACHE", raising=False)
    CALLS.clear()
    return figures_tmp / ".cache"


def test_one_directory_inside_figures_and_movable(fresh_cache, tmp_path, monkeypatch):
    assert cache_dir() == fresh_cache.resolve()
    monkeypatch.setenv("DPMF_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert cache_dir() == (tmp_path / "elsewhere").resolve()


def test_on_refresh_off(fresh_cache, monkeypatch):
    assert cache.cached_call(counted, 3) == {"x": 3, "sq": 9} and CALLS == [3]
    assert cache.cached_call(counted, 3) == {"x": 3, "sq": 9} and CALLS == [3]  # served from the cache
    assert cache.in_cache(counted, 3) and not cache.in_cache(counted, 4)
    assert list((fresh_cache / "joblib").rglob("output.pkl"))
    cache.cached_call(counted, 3, note="other", ignore=("note",))
    n = len(CALLS)
    cache.cached_call(counted, 3, note="again", ignore=("note",))  # an ignored argument is not part of the key
    assert len(CALLS) == n
    monkeypatch.setenv("DPMF_CACHE", "refresh")  # what `reproduce --force` sets for its kernels
    assert cache.cached_call(counted, 3) == {"x": 3, "sq": 9} and len(CALLS) == n + 1
    assert not cache.in_cache(counted, 3)  # refresh never reads
    monkeypatch.setenv("DPMF_CACHE", "off")
    cache.cached_call(counted, 5)
    monkeypatch.setenv("DPMF_CACHE", "on")
    assert not cache.in_cache(counted, 5)  # off neither reads nor writes
    assert cache.cached_call(counted, 3, enabled=False) and CALLS[-1] == 3  # a notebook's `cache: false`
    monkeypatch.setenv("DPMF_CACHE", "sometimes")
    with pytest.raises(ParameterError, match="DPMF_CACHE"):
        cache.cached_call(counted, 3)


def array_of(x):
    import numpy as np

    CALLS.append(x)
    return np.arange(1000, dtype=np.float64) * x


def test_an_entry_changed_after_it_was_written_is_computed_again_not_read(fresh_cache):
    """Nothing tied a cache entry to what was written: a flipped byte inside a pickled array unpickles fine and
    serves other numbers."""
    import numpy as np

    first = cache.cached_call(array_of, 2)
    (pkl,) = (fresh_cache / "joblib").rglob("output.pkl")
    assert (pkl.parent / cache.CHECKSUM_FILE).read_text().strip() == cache._sha256(pkl)
    data = bytearray(pkl.read_bytes())
    data[-200] ^= 0x40  # inside the array's raw data
    pkl.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="not the file that was written"):
        again = cache.cached_call(array_of, 2)
    assert np.array_equal(again, first) and CALLS == [2, 2]
    assert cache.cached_call(array_of, 2) is not None and CALLS == [2, 2]  # the fresh entry is read again


def test_clear_removes_entries_and_the_legacy_caches(fresh_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("DPMF_DATA_DIR", str(tmp_path / "data"))
    cache.cached_call(counted, 7)
    legacy = cache.legacy_dirs()
    for d in legacy:
        d.mkdir(parents=True)
        (d / "x.csv").write_text("1\n")
    assert cache.main(["--clear"]) == 0
    assert not (fresh_cache / "joblib").exists() and not any(d.exists() for d in legacy)
    cache.cached_call(counted, 7)
    assert CALLS == [7, 7]


def test_force_and_clean_reach_the_cache(figures_tmp, monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "_run_all", lambda todo, profile, jobs, backend, scheduler, env, *a, **k:
                        seen.update(env) or iter(()))
    monkeypatch.setattr("dpmf_lib.report.write_report", lambda *a, **k: ("r.md", "index.html"))
    assert cli.main(["--profile", "smoke", "--only", "liu_fig1", "--force"]) == 0
    assert seen.get("DPMF_CACHE") == "refresh"
    dry = subprocess.run(["make", "-n", "clean-figures"], cwd=REPO_ROOT, capture_output=True, text=True)
    assert "dpmf_lib.cache --clear" in dry.stdout


def test_experiment_caches_go_through_it():
    import inspect

    from dpmf_lib.experiments.balu import _balu_ch3
    from dpmf_lib.experiments.hua import hua_common

    for mod in (_balu_ch3, hua_common):
        src = inspect.getsource(mod)
        assert "cache.cached_call(" in src and "joblib.Memory(" not in src and ".csv\"" not in src
