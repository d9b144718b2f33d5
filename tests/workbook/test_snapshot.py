"""The paper profile's machinery (#20): budgets, peak memory, the reference snapshot, sharding on dask."""

import json
import os
import time
from types import SimpleNamespace

import pytest

from dpmf_lib import snapshot
from dpmf_lib.runner import cli, distributed, execution, hashing, staleness
from dpmf_lib.registry import load_registry
from tests.workbook.test_runner import tiny_notebook


def _entry(name):
    return next(x for x in load_registry()[1] if x.name == name)


@pytest.mark.slow
def test_a_run_over_its_budget_is_stopped_with_its_kernel(figures_tmp, tmp_path, monkeypatch):
    import psutil

    tiny_notebook(tmp_path, monkeypatch, "slow", "import os, time\nopen(os.environ['DPMF_FIGURES_DIR'] + '/pid', 'w')"
                  ".write(str(os.getpid()))\ntime.sleep(600)")
    started = time.time()
    rec = execution.execute("slow", "smoke", "h", timeout_s=30)  # room for a kernel to start on a loaded machine
    assert rec["status"] == "over budget" and "budget" in rec["error"]
    assert time.time() - started < 120
    kernel_pid = int((figures_tmp / "pid").read_text())
    assert not psutil.pid_exists(kernel_pid) or psutil.Process(kernel_pid).status() == psutil.STATUS_ZOMBIE
    assert json.loads((figures_tmp / "slow" / "run.json").read_text())["status"] == "over budget"
    assert staleness.staleness(SimpleNamespace(name="slow"), "h").startswith("last run over budget")


def test_peak_memory_of_the_kernel_and_its_console_in_kernel_log(figures_tmp, tmp_path, monkeypatch):
    tiny_notebook(tmp_path, monkeypatch, "big", "import os, numpy as np\nx = np.ones(300 * 2**20 // 8)\n"
                  "os.write(2, b'a line the kernel printed to its stderr')")
    rec = execution.execute("big", "smoke", "h")
    assert rec["status"] == "failed"  # it never saves; the measurement of memory stands anyway
    assert rec["peak_rss_mib"] >= 300
    assert "a line the kernel printed" in (figures_tmp / "big" / "kernel.log").read_text()


def _fake_paper_run(fig_dir, name, digest, values=(1.0, 1.1, 0.9, 1.05, 0.95), claim_id=None):
    out = fig_dir / name
    out.mkdir(parents=True)
    (out / f"{name}.csv").write_text("a\n1\n")
    (out / "provenance.json").write_text(json.dumps({"datasets": []}))
    (out / "run.json").write_text(json.dumps({"status": "ok", "profile": "paper", "hash": digest, "data_state": {},
                                              "runtime_s": 61.0, "peak_rss_mib": 100.0}))
    (out / f"{name}.ipynb").write_text("{}")  # an executed notebook: never copied
    meas = [] if claim_id is None else [{"claim": claim_id, "dataset": "ml-100k", "profile": "paper", "real": True,
                                         "values": list(values), "value": values[0]}]
    (out / "measurements.json").write_text(json.dumps(meas))


def test_cache_entries_count_only_the_notebooks_own_cached_functions(tmp_path, monkeypatch):
    monkeypatch.setenv("DPMF_CACHE_DIR", str(tmp_path / "cache"))
    own = tmp_path / "cache" / "joblib" / "dpmf_lib" / "experiments" / "balu" / "_balu_ch4_runs" / "_fit"
    other = tmp_path / "cache" / "joblib" / "dpmf_lib" / "experiments" / "hua" / "hua_common" / "scenario_run"
    for folder, n in ((own, 3), (other, 5)):
        for k in range(n):
            (folder / f"h{k}").mkdir(parents=True)
            (folder / f"h{k}" / "output.pkl").write_bytes(b"x")
    assert execution.cache_entries(_entry("balu_fig4_3")) == 3
    assert execution.cache_entries(_entry("hua_fig1")) == 5
    assert execution.cache_entries(_entry("liu_fig1")) == 0
    assert execution.cache_entries(_entry("balu_fig4_3"), since=time.time() + 60) == 0

def test_snapshot_keeps_results_not_notebooks_and_knows_when_it_is_stale(figures_tmp, tmp_path, monkeypatch):
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path / "snap"))
    e = _entry("balu_fig3_1")
    digest = hashing.run_hash(e, "paper")
    _fake_paper_run(figures_tmp, e.name, digest)
    dest = snapshot.take(e.name)
    assert sorted(p.name for p in dest.iterdir()) == sorted(
        [f"{e.name}.csv", "measurements.json", "provenance.json", "run.json"])
    assert snapshot.row_state(e) == ("current", None)
    run = json.loads((dest / "run.json").read_text())
    (dest / "run.json").write_text(json.dumps({**run, "hash": "older code"}))
    state, why = snapshot.row_state(e)
    assert state == "stale" and "changed" in why
    assert snapshot.row_state(_entry("liu_fig1"))[0] == "missing"



def test_the_snapshot_keeps_a_compact_palette_figure_with_the_plot_intact(figures_tmp, tmp_path, monkeypatch):
    """The kept PNG is a 256-colour re-encoding (issue #20: the snapshot was 15 MB, half of it matplotlib's RGBA
    PNGs): smaller, the same size in pixels, every pixel within a few shades of the run's, and compacting again
    changes nothing."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from PIL import Image

    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path / "snap"))
    e = _entry("balu_fig3_1")
    _fake_paper_run(figures_tmp, e.name, hashing.run_hash(e, "paper"))
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    x = np.linspace(0, 10, 200)
    for k in range(6):
        ax.plot(x, np.sin(x + k), label=f"series {k}")
    ax.fill_between(x, -1, np.cos(x), alpha=0.3)
    ax.legend()
    ax.set_title("a figure with text, lines and a translucent fill")
    png = figures_tmp / e.name / f"{e.name}.png"
    fig.savefig(png)
    plt.close(fig)
    dest = snapshot.take(e.name)
    kept = dest / f"{e.name}.png"
    assert kept.stat().st_size < 0.7 * png.stat().st_size
    with Image.open(png) as a, Image.open(kept) as b:
        assert b.mode == "P" and a.size == b.size
        diff = np.abs(np.asarray(a.convert("RGB"), dtype=int) - np.asarray(b.convert("RGB"), dtype=int))
    assert np.percentile(diff, 99.9) <= 24 and diff.mean() < 1.0
    before = kept.read_bytes()
    assert not snapshot.compact_figure(kept) and kept.read_bytes() == before

def test_a_snapshot_run_skips_rows_current_in_the_snapshot(figures_tmp, tmp_path, monkeypatch, capsys):
    """A fresh clone has an empty figures/: `make paper-snapshot` must not re-run the hours the committed snapshot
    already holds for the same code, params and data; a stale row, a row read from other data, and --force are
    not skipped; without --snapshot, figures/ alone decides."""
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path / "snap"))
    current, stale = _entry("balu_fig3_1"), _entry("hua_fig1")
    _fake_paper_run(figures_tmp, current.name, hashing.run_hash(current, "paper"))
    _fake_paper_run(figures_tmp, stale.name, "older code")
    for e in (current, stale):
        snapshot.take(e.name)
    for e in (current, stale):
        (figures_tmp / e.name / "run.json").unlink()  # as in a fresh clone: nothing in figures/
    ran = []

    def fake_run_all(todo, profile, *args, **kwargs):
        ran.append((profile, sorted(n for n, _ in todo)))
        return iter(())

    monkeypatch.setattr(cli, "_run_all", fake_run_all)
    monkeypatch.setattr("dpmf_lib.report.write_report", lambda: ("r.md", "r.html"))
    only = f"{current.name},{stale.name}"
    assert cli.main(["--profile", "paper", "--snapshot", "--only", only]) == 0
    assert ran[-1] == ("paper", [stale.name])
    assert f"skipped: {current.name}" in capsys.readouterr().out
    assert cli.main(["--profile", "paper", "--snapshot", "--force", "--only", only]) == 0
    assert ran[-1] == ("paper", sorted([current.name, stale.name]))
    assert cli.main(["--profile", "paper", "--only", only]) == 0  # without --snapshot: figures/ decides
    assert ran[-1] == ("paper", sorted([current.name, stale.name]))
    row = tmp_path / "snap" / current.name / "run.json"  # same hash, but read from other data than there is now
    row.write_text(json.dumps({**json.loads(row.read_text()), "data_state": {"ml-100k": "real:another checksum"}}))
    assert cli.main(["--profile", "paper", "--snapshot", "--only", current.name]) == 0
    assert ran[-1] == ("paper", [current.name])


def test_a_snapshot_run_keeps_a_current_paper_run_of_figures_whose_snapshot_row_is_stale(figures_tmp, tmp_path,
                                                                                          monkeypatch):
    """A paper run made without --snapshot is current in figures/ and so skipped: `make paper-snapshot` must still
    copy it into a snapshot row that is missing or stale, instead of leaving that row as it was."""
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path / "snap"))
    e = _entry("balu_fig3_1")
    digest = hashing.run_hash(e, "paper")
    _fake_paper_run(figures_tmp, e.name, digest)
    monkeypatch.setattr(cli, "_run_all", lambda todo, *a, **k: iter(()))
    monkeypatch.setattr("dpmf_lib.report.write_report", lambda: ("r.md", "r.html"))
    assert snapshot.row_state(e, digest)[0] == "missing"
    assert cli.main(["--profile", "paper", "--snapshot", "--only", e.name]) == 0
    assert snapshot.row_state(e, digest) == ("current", None)
    row = tmp_path / "snap" / e.name / "run.json"
    row.write_text(json.dumps({**json.loads(row.read_text()), "hash": "older code"}))
    assert snapshot.row_state(e, digest)[0] == "stale"
    assert cli.main(["--profile", "paper", "--snapshot", "--only", e.name]) == 0
    assert snapshot.row_state(e, digest) == ("current", None)


def test_snapshot_refuses_a_run_that_is_not_a_successful_paper_run(figures_tmp, tmp_path, monkeypatch):
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path / "snap"))
    _fake_paper_run(figures_tmp, "liu_fig1", "h")
    run = json.loads((figures_tmp / "liu_fig1" / "run.json").read_text())
    (figures_tmp / "liu_fig1" / "run.json").write_text(json.dumps({**run, "profile": "ci"}))
    with pytest.raises(ValueError, match="paper-profile"):
        snapshot.take("liu_fig1")
    assert not (tmp_path / "snap" / "liu_fig1").exists()


def _snapshot_of_one_paper_claim(figures_tmp, tmp_path, monkeypatch):
    """A current snapshot row (five seeds) of a notebook with a paper-profile claim on ML-100K; returns both."""
    from dpmf_lib.claims import load_claims

    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path / "snap"))
    claim = next(c for c in load_claims() if c.min_profile == "paper" and not c.shown_not_judged
                 and c.dataset == "ml-100k" and not c.guards)
    e = _entry(claim.notebook)
    _fake_paper_run(figures_tmp, e.name, hashing.run_hash(e, "paper"), claim_id=claim.id)
    snapshot.take(e.name)
    return claim, e


def test_paper_verdicts_come_from_current_rows_only(figures_tmp, tmp_path, monkeypatch):
    claim, e = _snapshot_of_one_paper_claim(figures_tmp, tmp_path, monkeypatch)
    got = snapshot.paper_verdicts()[claim.id]
    assert got["state"] == "current" and got["n"] == 5 and got["verdict"] not in (None, "not yet measured")
    run = json.loads((tmp_path / "snap" / e.name / "run.json").read_text())
    (tmp_path / "snap" / e.name / "run.json").write_text(json.dumps({**run, "hash": "older code"}))
    got = snapshot.paper_verdicts()[claim.id]
    assert got["verdict"] is None and got["state"] == "stale"


def test_forwarded_env_carries_every_dpmf_setting(monkeypatch, tmp_path):
    monkeypatch.setenv("DPMF_FIGURES_DIR", str(tmp_path / "figs"))
    monkeypatch.setenv("DPMF_DATA_DIR", str(tmp_path / "data"))
    env = distributed.forwarded_env({"DPMF_SWEEP_BACKEND": "dask"})
    assert env["DPMF_FIGURES_DIR"] == str((tmp_path / "figs").resolve())
    assert env["DPMF_DATA_DIR"] == str(tmp_path / "data") and env["DPMF_SWEEP_BACKEND"] == "dask"


def _read_env_var(name, **_):
    return os.environ.get(name)


@pytest.mark.slow
def test_sweep_on_a_dask_cluster_sees_the_callers_settings(tmp_path, monkeypatch):
    """Workers started before the caller set DPMF_FIGURES_DIR still see it (a remote worker never inherits it)."""
    from dask.distributed import LocalCluster

    from dpmf_lib.sweep import grid_map

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        monkeypatch.setenv("DPMF_FIGURES_DIR", str(tmp_path / "elsewhere"))
        got = grid_map(_read_env_var, {"name": ["DPMF_FIGURES_DIR", "DPMF_FIGURES_DIR"]}, backend="dask",
                       scheduler=cluster.scheduler_address)
    assert got == [str(tmp_path / "elsewhere")] * 2


@pytest.mark.slow
def test_runner_on_a_dask_cluster_writes_where_the_caller_said(figures_tmp, tmp_path):
    """Two notebooks on a 2-worker LocalCluster started before DPMF_FIGURES_DIR was set: their outputs land in the
    caller's figures directory, and the report finds them."""
    from dask.distributed import LocalCluster

    from dpmf_lib.report import collect

    names = ["balu_fig3_1", "liu_fig1"]
    saved = os.environ.pop("DPMF_FIGURES_DIR")
    try:
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    finally:
        os.environ["DPMF_FIGURES_DIR"] = saved
    with cluster:
        todo = [(n, hashing.run_hash(_entry(n), "smoke")) for n in names]
        recs = list(distributed._run_all(todo, "smoke", 2, "dask", cluster.scheduler_address,
                                       distributed.forwarded_env({"DPMF_SWEEP_BACKEND": "dask"})))
    assert sorted(r["notebook"] for r in recs) == names and all(r["status"] == "ok" for r in recs), recs
    rows = {r["name"]: r for r in collect()[1]}
    assert all((figures_tmp / n / f"{n}.csv").exists() for n in names)
    assert all(rows[n]["status"] == "ok" for n in names)



@pytest.mark.slow
def test_notebooks_holding_every_worker_thread_leave_their_sweeps_a_thread(figures_tmp):
    """Two notebook tasks hold both threads of a 2-worker cluster while their kernels run; their sweeps (Hua's
    scenario runs, ``grid_map`` on the same scheduler: joblib sees 2 threads, so they are real tasks) must still get
    a thread. Before, each sweep waited for a notebook and each notebook for its sweep, until the budget stopped
    them ("over budget")."""
    from dask.distributed import Client, LocalCluster, get_task_stream

    names = ["hua_fig1", "hua_fig2"]
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client, get_task_stream(client) as stream:
        env = distributed.forwarded_env({"DPMF_SWEEP_BACKEND": "dask",
                                       "DPMF_DASK_SCHEDULER": cluster.scheduler_address})
        todo = [(n, hashing.run_hash(_entry(n), "smoke")) for n in names]
        recs = list(distributed._run_all(todo, "smoke", 2, "dask", cluster.scheduler_address, env, timeout_s=300))
    assert sorted((r["notebook"], r["status"]) for r in recs) == [(n, "ok") for n in names], recs
    keys = [str(t["key"]) for t in stream.data]
    assert sum("execute" in k for k in keys) == 2 and len(keys) > 2, keys  # the sweeps ran as tasks here too
    assert all((figures_tmp / n / f"{n}.csv").exists() for n in names)


def test_local_runs_hold_at_most_jobs_notebooks_and_start_a_cache_reader_after_its_producer(monkeypatch):
    """``--jobs 2`` with a reader of another's cache: the reader starts only once its producer has ended, never
    beside it (it would compute the producer's runs again), and no more than 2 notebooks run at once."""
    import threading

    lock, running, log = threading.Lock(), [], []

    def fake_execute(name, profile, digest, env=None, timeout_s=None, overrides=None):
        with lock:
            running.append(name)
            log.append(("start", name, tuple(running)))
        time.sleep({"producer": 0.3, "other": 0.05, "reader": 0.01, "fourth": 0.05}[name])
        with lock:
            running.remove(name)
            log.append(("end", name, tuple(running)))
        return {"notebook": name, "status": "ok"}

    monkeypatch.setattr(distributed, "execute", fake_execute)
    todo = [(n, "h") for n in ("producer", "reader", "other", "fourth")]
    recs = list(distributed._run_all(todo, "smoke", 2, "loky", None, {}, reads={"reader": ("producer",)}))
    assert sorted(r["notebook"] for r in recs) == sorted(n for n, _ in todo)
    assert max(len(r) for _, _, r in log) <= 2
    order = [(kind, n) for kind, n, _ in log]
    assert order.index(("start", "reader")) > order.index(("end", "producer")), log
    assert not any(kind == "start" and n == "reader" and "producer" in r for kind, n, r in log)


def test_settings_are_undone_when_the_last_notebook_using_them_ends(monkeypatch):
    """A long-lived worker must not keep a previous run's DPMF_CACHE=refresh (or figures directory) for the next."""
    monkeypatch.delenv("DPMF_CACHE", raising=False)
    monkeypatch.setenv("DPMF_DATA_DIR", "/before")
    with execution._settings({"DPMF_CACHE": "refresh", "DPMF_DATA_DIR": None}):
        assert os.environ["DPMF_CACHE"] == "refresh" and "DPMF_DATA_DIR" not in os.environ
        with execution._settings({"DPMF_CACHE": "refresh", "DPMF_DATA_DIR": None}):  # a second notebook of the run
            pass
        assert os.environ["DPMF_CACHE"] == "refresh"  # the first one still runs
    assert "DPMF_CACHE" not in os.environ and os.environ["DPMF_DATA_DIR"] == "/before"

def test_report_shows_the_paper_snapshot_beside_this_run(figures_tmp, tmp_path, monkeypatch):
    from dpmf_lib.report import write_report

    claim, e = _snapshot_of_one_paper_claim(figures_tmp, tmp_path, monkeypatch)
    import shutil

    shutil.rmtree(figures_tmp / e.name)  # this run (ci) has nothing: the paper column still shows the snapshot
    md, html = write_report()
    page = html.read_text()
    assert "paper profile (snapshot)" in page and "current, 1.0 min, 100 MiB" in page
    assert "Paper profile (committed snapshot, results/paper): 1 of" in page
    row = next(line for line in md.read_text().splitlines() if line.startswith(f"| [{claim.id}]"))
    assert "(n = 5)" in row and "not yet measured" in row  # this run: nothing; the snapshot: five seeds
    run = json.loads((tmp_path / "snap" / e.name / "run.json").read_text())
    (tmp_path / "snap" / e.name / "run.json").write_text(json.dumps({**run, "hash": "older code"}))
    md, html = write_report()
    row = next(line for line in md.read_text().splitlines() if line.startswith(f"| [{claim.id}]"))
    assert "stale snapshot" in row and "(n = 5)" not in row


def test_a_large_table_is_kept_gzipped_with_the_same_bytes_inside(figures_tmp, tmp_path, monkeypatch):
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(tmp_path / "snap"))
    _fake_paper_run(figures_tmp, "liu_fig1", "h")
    big = ("x,y\n" + "".join(f"{i},{i * 0.5}\n" for i in range(40000))).encode()
    (figures_tmp / "liu_fig1" / "liu_fig1.csv").write_bytes(big)
    first = snapshot.take("liu_fig1")
    assert snapshot.table_path("liu_fig1").name == "liu_fig1.csv.gz" and snapshot.table_bytes("liu_fig1") == big
    packed = snapshot.table_path("liu_fig1").read_bytes()
    run = json.loads((first / "run.json").read_text())
    (first / "run.json").write_text(json.dumps({**run, "hash": hashing.run_hash(_entry("liu_fig1"), "paper")}))
    assert snapshot.row_state(_entry("liu_fig1")) == ("current", None)  # a gzipped table is a table
    snapshot.take("liu_fig1")
    assert snapshot.table_path("liu_fig1").read_bytes() == packed  # no timestamp inside: same table, same bytes
    assert first.exists()


SNAPSHOT_REPLAY = "hua_fig2"  # the smallest paper run with randomness in it (a DP release at a fixed, recorded seed)


@pytest.mark.slow
def test_the_committed_snapshot_replays_byte_identically(figures_tmp, monkeypatch):
    """Re-run one snapshot notebook at the paper profile with the snapshot's thread count: the same table, byte for
    byte. Skipped (with the reason) when the committed row is stale — `make paper-snapshot ONLY=hua_fig2` refreshes it."""
    monkeypatch.delenv("DPMF_SNAPSHOT_DIR", raising=False)
    e = _entry(SNAPSHOT_REPLAY)
    state, why = snapshot.row_state(e)
    if state != "current":
        pytest.skip(f"results/paper/{e.name} is {state}: {why}")
    prov = json.loads((snapshot.snapshot_dir() / e.name / "provenance.json").read_text())
    threads = str(prov["machine"]["numba_threads"])
    rec = execution.execute(e.name, "paper", hashing.run_hash(e, "paper"), {"NUMBA_NUM_THREADS": threads})
    assert rec["status"] == "ok", rec["error"]
    assert (figures_tmp / e.name / f"{e.name}.csv").read_bytes() == snapshot.table_bytes(e.name)


def test_a_named_paper_grade_profile_is_judged_as_paper():
    """`paper-full` (the exact grid kept beside a `paper` cut to fit its budget) supports paper claims; a made-up
    profile does not."""
    from dpmf_lib.claims import INDICATIVE, load_claims
    from dpmf_lib.verdicts import judge_measurement

    claim = next(c for c in load_claims() if c.min_profile == "paper" and not c.shown_not_judged and not c.guards
                 and not c.deterministic)
    m = {"claim": claim.id, "dataset": claim.dataset, "real": True, "values": [1.0, 1.2, 0.9, 1.1, 1.05]}
    assert judge_measurement(claim, {**m, "profile": "paper-full"}).verdict != INDICATIVE
    assert judge_measurement(claim, {**m, "profile": "paper"}).verdict != INDICATIVE
    assert judge_measurement(claim, {**m, "profile": "ci"}).verdict == INDICATIVE
    assert judge_measurement(claim, {**m, "profile": "bigger"}).verdict == INDICATIVE


def test_runner_accepts_named_paper_profiles_only_where_defined(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--profile", "bogus"])
    assert "unknown profile 'bogus'" in capsys.readouterr().err
    assert cli.main(["--profile", "paper-nosuch", "--only", "balu_fig3_1"]) == 2
    out = capsys.readouterr()
    assert "no paper-nosuch profile" in out.out and "defines the profile" in out.err


def test_notebooks_that_read_anothers_cache_start_after_it():
    """With --jobs 2 a notebook that reads another's cached runs (registry reads_cache_of) must not start beside it:
    the runner moves it to the end when both run, and keeps the order otherwise."""
    from dpmf_lib.registry import load_registry
    from dpmf_lib.runner.distributed import cache_readers_last

    _, entries = load_registry()
    by = {e.name: e for e in entries}
    assert by["balu_fig4_8"].reads_cache_of == ("balu_fig4_7",)
    todo = [(n, "h") for n in ("balu_fig4_7", "balu_fig4_8", "balu_fig4_1", "balu_fig4_6", "hua_fig1")]
    got = [n for n, _ in cache_readers_last(todo, entries)]
    assert got == ["balu_fig4_7", "balu_fig4_1", "hua_fig1", "balu_fig4_8", "balu_fig4_6"]
    alone = [("balu_fig4_8", "h"), ("hua_fig1", "h")]  # its producer is not running: nothing to wait for
    assert cache_readers_last(alone, entries) == alone


def test_replot_redraws_a_current_rows_figure_from_its_table_and_refuses_a_stale_row(tmp_path, monkeypatch):
    """``--replot``: a restyled plot reaches a revalidated row's figure; the redraw is idempotent, recorded in
    run.json (the row stays current, not damaged), and a stale row is refused (its table may not be this code's)."""
    import importlib
    import shutil

    from dpmf_lib.runner.execution import sha256_of

    real = snapshot.snapshot_dir()
    cheap = ("hua_fig6", "liu_fig7", "balu_table5_1", "hua_fig1", "pnbm_fig1")
    name = next((n for n in cheap if (real / n / "run.json").exists() and snapshot.row_state(_entry(n))[0] == "current"),
                None)
    if name is None:
        pytest.skip(f"none of {cheap} is current in the snapshot here")
    snap = tmp_path / "snap"
    shutil.copytree(real / name, snap / name)
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(snap))
    row = snap / name
    snapshot.replot(name)  # this machine's fonts may differ from the taker's: the first redraw may update
    first = (row / f"{name}.png").read_bytes()
    assert snapshot.replot(name) == "unchanged" and (row / f"{name}.png").read_bytes() == first

    experiment = importlib.import_module(hashing.experiment_module(_entry(name)))
    plot = experiment.plot

    def restyled(df, params):
        fig = plot(df, params)
        fig.suptitle("restyled")
        return fig

    monkeypatch.setattr(experiment, "plot", restyled)
    assert snapshot.replot(name) == "updated"
    run = json.loads((row / "run.json").read_text())
    assert run["outputs"][f"{name}.png"] == sha256_of(row / f"{name}.png") and run["figure_redrawn_at"]
    assert snapshot.row_state(_entry(name)) == ("current", None)

    (row / "run.json").write_text(json.dumps({**run, "hash": "older code"}))
    (row / "canary.json").unlink(missing_ok=True)  # no canary revalidation either: the row is stale
    with pytest.raises(ValueError, match="re-take"):
        snapshot.replot(name)
