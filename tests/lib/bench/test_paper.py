"""The ``paper`` bench suite (:mod:`dpmf_lib.bench.paper`): rows run cold through the runner's executor (faked here,
except in the one slow run of a real canary), records with their fields, ratios to the baseline, and the guards that
leave a row without a verdict."""

import json
import subprocess
import sys

import pytest

from dpmf_lib.bench import paper
from dpmf_lib.bench.__main__ import main as bench_main
from tests.conftest import REPO

HOST = {"model": "AMD EPYC", "numpy_simd": ["X86_V3", "X86_V4"], "cpus": 2, "numba_threads": 2}
DATA = {"ml-100k": "real:abc"}


def _now(row="r1", runtime=10.0, status="ok", **kw):
    base = {"row": row, "notebook_profile": "canary", "status": status, "error": None, "runtime_s": runtime,
            "cpu_s": 15.0, "peak_rss_mib": 300.0, "cache_entries_written": 0, "cache_written_by_function": {},
            "params_digest": "p", "data_state": dict(DATA), "host": dict(HOST), "host_busy_share": 0.02}
    return {**base, **kw}


def _base(runtime=10.0, **kw):
    return {"runtime_s": runtime, "cpu_s": 12.0, "peak_rss_mib": 290.0, "cache_entries_written": 0,
            "params_digest": "p", "data_state": dict(DATA), "host": dict(HOST), "host_busy_share": 0.01, **kw}


def _line(out, row="r1"):
    return next(r for r in out["ratios"] if r["name"] == f"{row}_seconds_over_baseline")


def test_others_share_is_the_machine_time_this_tree_did_not_use():
    # 10 s of two cores (20 CPU s): 9 busy, of which 4 ours -> others 5 of 20
    assert paper.others_share((100.0, 1000.0), (109.0, 1020.0), 50.0, 54.0) == pytest.approx(0.25)
    # our CPU seconds above the machine's busy time (clock granularity): no load, not a negative share
    assert paper.others_share((100.0, 1000.0), (101.0, 1020.0), 50.0, 54.0) == 0.0
    assert paper.others_share(None, (1.0, 2.0), 0.0, 0.0) is None
    assert paper.others_share((1.0, 2.0), (1.0, 2.0), 0.0, 0.0) is None


def test_proc_stat_reads_busy_within_total():
    s = paper.proc_stat()
    if s is None:
        pytest.skip("no /proc/stat")
    busy, total = s
    assert 0 < busy <= total


def test_a_row_within_the_line_is_met_and_one_beyond_it_is_not():
    out = paper.summarise("quick", [_now("r1", 12.0), _now("r2", 13.0)], {"r1": _base(10.0), "r2": _base(10.0)})
    assert _line(out, "r1")["value"] == pytest.approx(1.2) and _line(out, "r1")["met"] is True
    assert _line(out, "r2")["value"] == pytest.approx(1.3) and _line(out, "r2")["met"] is False
    assert _line(out, "r1")["target"] == paper.LINE
    for r in out["records"]:
        assert set(r) == {"name", "params", "metric", "value", "unit"}
    wall = next(r for r in out["records"] if r["name"] == "r1" and r["metric"] == "wall_seconds")
    assert wall["value"] == 12.0 and wall["params"]["baseline_s"] == 10.0
    cpu = next(r for r in out["ratios"] if r["name"] == "r1_cpu_seconds_over_baseline")
    assert cpu["value"] == pytest.approx(15.0 / 12.0) and cpu["met"] is None
    total = next(r for r in out["ratios"] if r["name"] == "judged_rows_seconds_over_baseline")
    assert total["value"] == pytest.approx(25.0 / 20.0)
    assert [r["row"] for r in out["rows"]] == ["r1", "r2"]


@pytest.mark.parametrize("now, base, reason", [
    (_now(host_busy_share=0.4), _base(), "the host was busy"),
    (_now(params_digest="q"), _base(), "other parameters"),
    (_now(data_state={"ml-100k": "absent"}), _base(), "other data (ml-100k)"),
    (_now(host={**HOST, "numpy_simd": ["X86_V3"]}), _base(), "another host (numpy_simd"),
    (_now(), _base(cache_entries_at_start=45), "warm result cache (45 entries"),
    (_now(), None, "no baseline"),
    (_now(status="failed", error="cell 3: ValueError: x"), _base(), "the run ended failed (cell 3"),
])
def test_each_guard_leaves_the_row_without_a_verdict(now, base, reason):
    out = paper.summarise("quick", [now], {"r1": base})
    line = _line(out)
    assert line["met"] is None and reason in line["note"] and line["target"] == paper.LINE
    assert not any(r["name"] == "judged_rows_seconds_over_baseline" for r in out["ratios"])


def test_a_baseline_taken_on_a_busy_host_is_judged_with_a_note():
    line = _line(paper.summarise("quick", [_now(runtime=11.0)], {"r1": _base(host_busy_share=0.5)}))
    assert line["met"] is True and "busy host" in line["note"]


def _fake_execute(calls):
    """The runner's executor as a stand-in: checks that the row starts cold, writes two result-cache entries of
    one function and one of another (joblib's layout) and the provenance the suite reads the host from."""
    from pathlib import Path

    def execute(name, profile, env):
        cache = Path(env["DPMF_CACHE_DIR"])
        assert env["DPMF_CACHE"] == "on" and cache.is_dir() and not any(cache.iterdir())  # cold: empty, its own
        calls.append((name, profile, env))
        for fn, key in (("_fit", "a"), ("_fit", "b"), ("_compute", "c")):
            entry = cache / "joblib" / "dpmf_lib" / "experiments" / "toy" / fn / key
            entry.mkdir(parents=True)
            (entry / "output.pkl").write_bytes(b"x")
        out = Path(env["DPMF_FIGURES_DIR"]) / name
        out.mkdir(parents=True)
        (out / "provenance.json").write_text(json.dumps({"machine": {"cpus": 2, "numba_threads": 2}}))
        return {"status": "ok", "error": None, "runtime_s": 30.0, "peak_rss_mib": 400.0,
                "hash_parts": {"params": "p"}, "data_state": dict(DATA),
                "cpu": {"model": "AMD EPYC", "numpy_simd": ["X86_V3", "X86_V4"]}}
    return execute


def test_run_executes_each_row_cold_and_counts_its_cache_entries(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(paper, "_execute_row", _fake_execute(calls))
    bl = tmp_path / "baseline.json"
    bl.write_text(json.dumps({"recorded_utc": "t0", "rows": {"hua_fig1": _base(20.0, cache_entries_written=3)}}))
    out = paper.run("quick", "hua_fig1,liu_fig5", baseline_path=bl)
    assert [c[0] for c in calls] == ["liu_fig5", "hua_fig1"]  # the suite's order, not the pattern's
    assert {c[1] for c in calls} == {"canary"}
    assert len({c[2]["DPMF_CACHE_DIR"] for c in calls}) == 2  # a cache of its own per row
    assert not any(__import__("pathlib").Path(c[2]["DPMF_CACHE_DIR"]).exists() for c in calls)  # removed after
    recs = {(r["name"], r["metric"]): r for r in out["records"]}
    n = recs[("hua_fig1", "cache_entries_written")]
    assert n["value"] == 3 and n["params"]["by"] == "experiments/toy/_compute: 1; experiments/toy/_fit: 2"
    per = recs[("hua_fig1", "seconds_per_cache_entry")]
    assert per["value"] == pytest.approx(10.0) and per["params"]["baseline_s"] == pytest.approx(20.0 / 3, abs=1e-3)
    assert recs[("hua_fig1", "peak_rss")]["value"] == 400.0
    line = _line(out, "hua_fig1")
    assert line["value"] == pytest.approx(1.5)
    # judged only on a quiet host; on a busy one (as a loaded test machine is) the guard says so
    assert line["met"] is False or "busy" in line["note"]
    assert _line(out, "liu_fig5")["note"] == "no baseline for this row"


def test_paper_profile_reads_the_snapshot_rows_run_json(monkeypatch, tmp_path):
    row = tmp_path / "liu_fig5"
    row.mkdir()
    (row / "run.json").write_text(json.dumps({"status": "ok", "runtime_s": 300.0, "peak_rss_mib": 4500.0,
                                              "result_cache": {"entries_at_start": 0, "written": 0},
                                              "hash_parts": {"params": "p"}, "data_state": DATA,
                                              "cpu": {"model": "AMD EPYC", "numpy_simd": ["X86_V3", "X86_V4"]}}))
    (row / "provenance.json").write_text(json.dumps({"machine": {"cpus": 2, "numba_threads": 2},
                                                     "finished_utc": "2026-12-06T00:00:00Z"}))
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path))
    base = paper.baseline("liu_fig5", "paper")
    assert base["runtime_s"] == 300.0 and base["host"] == HOST and "2026-12-06" in base["source"]
    assert paper.baseline("balu_fig5_1", "paper") is None
    line = _line(paper.summarise("paper", [_now("liu_fig5", 330.0, host_busy_share=0.0)],
                                 {"liu_fig5": base}), "liu_fig5")
    assert line["value"] == pytest.approx(1.1) and line["met"] is True


def test_the_recorded_baseline_round_trips_and_refuses_other_runs(tmp_path):
    doc = {"suite": "paper", "profile": "quick", "finished_utc": "t1", "machine": {"cpus": 2},
           "rows": [{**_now("r1", 12.0), "baseline": None}, _now("r2", status="failed")]}
    rec = paper.baseline_from_run(doc)
    assert set(rec["rows"]) == {"r1"} and rec["rows"]["r1"]["runtime_s"] == 12.0
    assert rec["host_busy_share_max"] == 0.02
    path = tmp_path / "b.json"
    src = tmp_path / "run.json"
    src.write_text(json.dumps(doc))
    assert paper.main(["--record-baseline", str(src), "--to", str(path)]) == 0
    assert paper.file_baseline("r1", path)["runtime_s"] == 12.0 and paper.file_baseline("r2", path) is None
    with pytest.raises(ValueError, match="quick run of the paper suite"):
        paper.baseline_from_run({**doc, "profile": "paper"})
    src.write_text(json.dumps({**doc, "suite": "mf"}))
    assert paper.main(["--record-baseline", str(src), "--to", str(path)]) == 2


def test_the_rows_lists_hold_what_their_comment_says():
    """Each paper row's recorded run is ok, cold and on an AVX-512 host (as the suite's docstring says); every
    quick row has a canary profile; the committed quick baseline, when there is one, covers the quick rows."""
    from dpmf_lib.params import read_yaml, params_path
    from dpmf_lib.snapshot import snapshot_dir

    assert set(paper.PAPER_ROWS) <= set(paper.QUICK_ROWS)
    for name in paper.PAPER_ROWS:
        run = json.loads((snapshot_dir() / name / "run.json").read_text())
        assert run["status"] == "ok" and run["result_cache"]["entries_at_start"] == 0, name
        assert "X86_V4" in run["cpu"]["numpy_simd"], name
    for name in paper.QUICK_ROWS:
        assert "canary" in read_yaml(params_path(name))["profiles"], name
    if paper.BASELINE_FILE.exists():
        assert set(json.loads(paper.BASELINE_FILE.read_text())["rows"]) == set(paper.QUICK_ROWS)


def test_cli_only_refuses_a_pattern_matching_no_row_and_other_suites(capsys):
    assert bench_main(["paper", "--only", "nosuch_*"]) == 2
    assert "matches none of the quick rows" in capsys.readouterr().err
    assert bench_main(["machine", "--only", "x"]) == 2
    assert "no rows to choose from" in capsys.readouterr().err


def test_cli_writes_the_rows_and_prints_the_guard(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(paper, "_execute_row", _fake_execute([]))
    monkeypatch.setattr(paper, "BASELINE_FILE", tmp_path / "none.json")
    out = tmp_path / "p.json"
    assert bench_main(["paper", "--profile", "quick", "--only", "balu_fig5_1", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["suite"] == "paper" and doc["rows"][0]["row"] == "balu_fig5_1" and "loadavg" in doc["machine"]
    assert "(no baseline for this row)" in capsys.readouterr().out


def test_cli_help_in_a_process_of_its_own():
    res = subprocess.run([sys.executable, "-m", "dpmf_lib.bench", "paper", "--help"], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and "--only" in res.stdout and "paper" in res.stdout


@pytest.mark.slow
def test_one_real_canary_row_through_the_cli(tmp_path):
    """The cheapest quick row, really executed (≈ 6 s idle, ≈ 25 s at load 5 on two cores)."""
    out = tmp_path / "p.json"
    res = subprocess.run([sys.executable, "-m", "dpmf_lib.bench", "paper", "--profile", "quick", "--only",
                          "balu_fig5_1", "--out", str(out)], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(out.read_text())
    row = doc["rows"][0]
    assert row["status"] == "ok" and row["notebook_profile"] == "canary" and row["runtime_s"] > 0
    assert row["cpu_s"] > 0 and row["peak_rss_mib"] > 0 and row["host"]["cpus"]
    assert 0.0 <= row["host_busy_share"] <= 1.0
    assert {r["metric"] for r in doc["records"]} >= {"wall_seconds", "cpu_seconds", "cache_entries_written"}
    assert any(r["name"] == "balu_fig5_1_seconds_over_baseline" for r in doc["ratios"])


def test_a_row_that_cannot_start_is_a_failed_row_and_the_others_run(monkeypatch):
    from dpmf_lib.errors import ParameterError

    calls = []
    fake = _fake_execute(calls)

    def execute(name, profile, env):
        if name == "liu_fig5":
            raise ParameterError("liu_fig5: unknown profile 'canary'")
        return fake(name, profile, env)

    monkeypatch.setattr(paper, "_execute_row", execute)
    out = paper.run("quick", "liu_fig5,hua_fig1")
    assert [c[0] for c in calls] == ["hua_fig1"]
    line = _line(out, "liu_fig5")
    assert line["met"] is None and "ParameterError" in line["note"]
    assert not any(r["name"] == "liu_fig5" and r["metric"] == "wall_seconds" for r in out["records"])
