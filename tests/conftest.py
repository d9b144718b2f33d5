import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# The mirror the tests read: the caller's DPMF_DATA_MIRROR, else ../shared/data beside the repository (CI's). The
# variable wins so that a clone elsewhere, given the mirror the documented way, runs its real-data tests, not skips them.
SHARED_DATA = Path(os.environ.get("DPMF_DATA_MIRROR") or REPO.parent / "shared" / "data").resolve()
ML100K_U_DATA = SHARED_DATA / "ml-100k" / "u.data"
os.environ.setdefault("DPMF_DATA_MIRROR", str(SHARED_DATA))
os.environ.setdefault("MPLBACKEND", "Agg")

needs_ml100k = pytest.mark.skipif(not ML100K_U_DATA.exists(),
                                  reason=f"ML-100K mirror not present at {SHARED_DATA} (set DPMF_DATA_MIRROR to a "
                                         "directory holding ml-100k/, as .ci/run does)")


@pytest.fixture
def figures_tmp(tmp_path, monkeypatch):
    """Route every figure/provenance write of a test into a temporary directory."""
    out = tmp_path / "figures"
    out.mkdir()
    monkeypatch.setenv("DPMF_FIGURES_DIR", str(out))
    return out


@pytest.fixture
def dest(tmp_path, monkeypatch):
    """An empty data directory and no mirror (where data_fetch installs)."""
    d = tmp_path / "data"
    d.mkdir()
    monkeypatch.setenv("DPMF_DATA_DIR", str(d))
    monkeypatch.delenv("DPMF_DATA_MIRROR", raising=False)
    return d


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A private copy of the ML-100K mirror (so tests may corrupt it)."""
    import shutil

    m = tmp_path / "mirror"
    shutil.copytree(SHARED_DATA / "ml-100k", m / "ml-100k")
    for p in (m / "ml-100k").iterdir():
        p.chmod(0o644)
    monkeypatch.setenv("DPMF_DATA_MIRROR", str(m))
    return m


# ------------------------------------------------------------------------------------------ .ci/run's two phases


def pytest_collection_modifyitems(config, items):
    """Checks of the `ci` runs' outputs (marked ``ci_figures``) skip, with the reason, unless DPMF_CI_FIGURES names a
    figures directory; the executions they replace (marked ``ci_replaced``) skip whenever it is set (tests/ci_phases.py).
    In an xdist worker, the files go longest first by their recorded durations (:func:`_longest_first`)."""
    from tests.ci_phases import CHECKING_CI_FIGURES, CI_FIGURES, SKIP_REASON, replaced_reason

    for item in items:
        if not CHECKING_CI_FIGURES and item.get_closest_marker("ci_figures"):
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))
        replaced = item.get_closest_marker("ci_replaced")
        if CI_FIGURES is not None and replaced:  # .ci/run: its ci runs are checked instead
            item.add_marker(pytest.mark.skip(reason=replaced_reason(replaced.args[0])))
    if hasattr(config, "workerinput"):
        items[:] = _longest_first(items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under `.ci/run` (CI=true) with the figures directory named, a ``ci_figures`` check may not skip: a skipped
    check there would be a check CI never made."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and os.environ.get("CI") == "true" and item.get_closest_marker("ci_figures"):
        from tests.ci_phases import CHECKING_CI_FIGURES

        if CHECKING_CI_FIGURES:
            reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
            rep.outcome = "failed"
            rep.longrepr = f"a ci_figures check skipped under .ci/run (DPMF_CI_FIGURES set): {reason}"


def pytest_configure(config):
    # --dist loadfile hands out whole files in the order the workers collected them (_longest_first); xdist would
    # otherwise re-sort them by their number of tests, which puts the files of a few long tests last
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope"):
        config.option.loadscopereorder = False


def _longest_first(items):
    """The items, their files ordered by the CPU seconds `make test` spends on them, longest first, each file's own
    order kept. Handing out the longest files first keeps two `--dist loadfile` workers busy to the end: the last
    files are the short ones. The seconds are those tests/durations.json records for this kind of run: ``in_ci``
    under .ci/run (DPMF_CI_FIGURES set: the replaced executions skip), else ``seconds`` plus ``slow``; a file without
    a record counts as tests/select_changed.py's UNRECORDED_SECONDS."""
    import json

    from tests.ci_phases import CI_FIGURES

    path = REPO / "tests" / "durations.json"
    rec = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}

    def cost(f):
        r = rec.get(f)
        if r is None:
            return 20.0
        if CI_FIGURES is not None:
            return r.get("in_ci", r["seconds"])
        return r["seconds"] + r.get("slow", 0.0)

    first = {}
    for i, item in enumerate(items):
        first.setdefault(item.nodeid.split("::")[0], i)
    costs = {f: cost(f) for f in first}
    return sorted(items, key=lambda it: (-costs[it.nodeid.split("::")[0]], first[it.nodeid.split("::")[0]]))
