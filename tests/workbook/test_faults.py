"""Faults as users and operators meet them: signals to the runner, damaged outputs, a disk that refuses writes,
concurrent registrations of own datasets. Each case was a reproduced failure: the test fails on the old behaviour.

(Bad parameters, divergence and cost guards: test_params.py, test_bad_input_battery.py and the trainers' tests.)"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from dpmf_lib.runner import cli, execution, hashing, staleness
from dpmf_lib.registry import load_registry
from tests.conftest import REPO
from tests.workbook.test_runner import tiny_notebook


def _entry(name):
    return next(x for x in load_registry()[1] if x.name == name)


def _previous_outputs(figures: Path, name: str) -> dict[str, bytes]:
    """A good earlier run of ``name`` (its files only matter as bytes that must survive)."""
    out = figures / name
    out.mkdir(parents=True)
    files = {"run.json": json.dumps({"notebook": name, "status": "ok", "hash": "earlier"}).encode(),
             f"{name}.csv": b"dataset,value\nml-100k,1.0\n", "measurements.json": b"[]",
             "provenance.json": b"{}"}
    for f, data in files.items():
        (out / f).write_bytes(data)
    return files


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _processes_writing_into(figures: Path) -> list[psutil.Process]:
    found = []
    for p in psutil.process_iter():
        try:
            if str(figures) in (p.environ().get("DPMF_RUN_DIR") or ""):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def _start_runner(figures: Path, *args: str) -> subprocess.Popen:
    env = {**os.environ, "DPMF_FIGURES_DIR": str(figures), "PYTHONPATH": str(REPO)}
    # a session of its own: os.killpg reaches it as a terminal's Ctrl-C reaches a foreground job; SIGINT at its
    # default, as in a terminal's foreground job (a background job of a script, as CI may run pytest in, inherits
    # SIGINT ignored, and Python then never raises KeyboardInterrupt)
    return subprocess.Popen([sys.executable, "-m", "dpmf_lib.reproduce", "--profile", "smoke", *args], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for_kernel(figures: Path, timeout: float = 120) -> list[psutil.Process]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        procs = _processes_writing_into(figures)
        if any("ipykernel" in " ".join(p.cmdline()) for p in procs):
            return procs
        time.sleep(0.3)
    raise AssertionError("the notebook's kernel never started")


# -- signals ----------------------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_stops_with_one_line_and_keeps_the_previous_outputs(tmp_path, how):
    """Ctrl-C was recorded as "failed (exit code -2)", replaced the previous good outputs and printed a 20-line
    traceback; SIGTERM left the kernel running."""
    figures = tmp_path / "figures"
    before = _previous_outputs(figures, "liu_fig1")
    runner = _start_runner(figures, "--only", "liu_fig1", "--force")
    procs = _wait_for_kernel(figures)
    time.sleep(1)
    if how == "ctrl-c":
        os.killpg(runner.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole foreground process group
    else:
        runner.send_signal(signal.SIGTERM)
    out, err = runner.communicate(timeout=60)
    assert runner.returncode == 130, out + err
    lines = [ln for ln in err.replace("\r", "\n").splitlines()
             if ln.strip() and "notebooks (smoke)" not in ln and ": runs — " not in ln]  # the runner's reason line
    assert len(lines) == 1 and lines[0].startswith("interrupted") and "previous outputs are kept" in lines[0], err
    assert _contents(figures / "liu_fig1") == before
    assert not list(figures.glob(".staging-*")) and not list(figures.glob(".old-*"))
    _, alive = psutil.wait_procs(procs, timeout=10)
    assert not alive


@pytest.mark.slow
def test_kill_9_of_the_runner_takes_its_papermill_process_and_kernel_with_it(tmp_path):
    """After kill -9 of the runner its papermill child and kernel ran on to the end and re-created the staging folder
    that the next run had cleaned."""
    figures = tmp_path / "figures"
    before = _previous_outputs(figures, "liu_fig1")
    runner = _start_runner(figures, "--only", "liu_fig1", "--force")
    procs = _wait_for_kernel(figures)
    time.sleep(1)
    runner.kill()
    runner.wait()
    _, alive = psutil.wait_procs(procs, timeout=15)
    assert not alive, [p.cmdline()[:4] for p in alive]
    assert execution.recover_interrupted(figures)  # the dead runner's staging directory goes
    time.sleep(3)
    assert not list(figures.glob(".staging-*"))  # and nothing re-creates it
    assert _contents(figures / "liu_fig1") == before


def test_a_stop_request_kills_the_notebook_and_keeps_the_previous_outputs(figures_tmp, tmp_path, monkeypatch):
    import threading

    tiny_notebook(tmp_path, monkeypatch, "slow_nb", "import time\ntime.sleep(120)")
    before = _previous_outputs(figures_tmp, "slow_nb")
    result = {}
    t = threading.Thread(target=lambda: result.update(execution.execute("slow_nb", "smoke", "h")))
    t.start()
    try:
        _wait_for_kernel(figures_tmp)
        execution.request_stop()
        t.join(timeout=30)
    finally:
        execution.clear_stop()
    assert not t.is_alive() and result["status"] == "interrupted"
    assert _contents(figures_tmp / "slow_nb") == before
    assert not list(figures_tmp.glob(".staging-*"))
    assert not _processes_writing_into(figures_tmp)


# -- integrity ----------------------------------------------------------------------------------------------------------

def _current_run(figures: Path, name: str = "liu_fig1") -> tuple:
    e = _entry(name)
    digest = hashing.run_hash(e, "smoke")
    out = figures / name
    out.mkdir()
    (out / "provenance.json").write_text("{}")
    (out / f"{name}.csv").write_text("dataset\nml-100k\n")
    (out / "measurements.json").write_text("[]")
    run = {"hash": digest, "status": "ok", "profile": "smoke"}
    run["outputs"] = execution.output_checksums(out)
    (out / "run.json").write_text(json.dumps(run))
    return e, digest, out


def test_a_changed_or_corrupt_output_is_damaged_and_run_again(figures_tmp):
    """A corrupt measurements.json made the claims "not yet measured" while the runner said "up to date"."""
    e, digest, out = _current_run(figures_tmp)
    assert staleness.up_to_date(e, digest)
    (out / "measurements.json").write_text("[{\"claim\": ")  # truncated
    why = staleness.staleness(e, digest)
    assert why.startswith("damaged") and "measurements.json" in why
    assert not staleness.up_to_date(e, digest)  # the runner runs it again
    (out / "measurements.json").write_text("[]")
    assert staleness.up_to_date(e, digest)
    (out / "liu_fig1.csv").write_text("dataset\nml-1m\n")  # valid, but not what the run wrote
    assert "liu_fig1.csv differs" in staleness.staleness(e, digest)
    (out / "liu_fig1.csv").unlink()
    (out / "liu_fig1.csv.gz").write_bytes(b"")  # the table is "present", but the recorded one is gone
    assert "liu_fig1.csv is missing" in staleness.staleness(e, digest)


def test_an_old_record_without_checksums_still_catches_unreadable_json(figures_tmp):
    e, digest, out = _current_run(figures_tmp)
    run = json.loads((out / "run.json").read_text())
    del run["outputs"]
    (out / "run.json").write_text(json.dumps(run))
    (out / "provenance.json").write_text("{not json")
    assert "provenance.json is not valid JSON" in staleness.staleness(e, digest)


def test_the_report_shows_a_damaged_run_naming_the_file(figures_tmp):
    from dpmf_lib import report

    _, _, out = _current_run(figures_tmp)
    (out / "measurements.json").write_text("garbage")
    _, rows, _ = report.collect()
    row = next(r for r in rows if r["name"] == "liu_fig1")
    assert row["status"] == "damaged" and "measurements.json" in row["why"]


def test_the_snapshot_shows_a_damaged_row_and_refuses_to_take_a_damaged_run(figures_tmp, tmp_path, monkeypatch):
    from dpmf_lib import snapshot

    snap = tmp_path / "snap"
    monkeypatch.setenv("DPMF_SNAPSHOT_DIR", str(snap))
    e = _entry("liu_fig1")
    digest = hashing.run_hash(e, "paper")
    out = figures_tmp / "liu_fig1"
    out.mkdir()
    (out / "provenance.json").write_text("{}")
    (out / "liu_fig1.csv").write_text("dataset\nml-100k\n")
    (out / "measurements.json").write_text("[]")
    (out / "run.json").write_text(json.dumps({"hash": digest, "status": "ok", "profile": "paper",
                                              "outputs": execution.output_checksums(out)}))
    snapshot.take("liu_fig1")
    assert snapshot.row_state(e, digest) == ("current", None)
    kept = json.loads((snap / "liu_fig1" / "run.json").read_text())["outputs"]
    assert set(kept) == {"provenance.json", "liu_fig1.csv", "measurements.json"}
    (snap / "liu_fig1" / "measurements.json").write_text("[")
    state, why = snapshot.row_state(e, digest)
    assert state == "damaged" and "measurements.json" in why
    (out / "liu_fig1.csv").write_text("changed\n")
    with pytest.raises(ValueError, match="damaged: liu_fig1.csv differs"):
        snapshot.take("liu_fig1")


def test_run_json_records_the_sha256_of_every_output(figures_tmp, tmp_path, monkeypatch):
    cells = ("from dpmf_lib.outputs import NotebookRun\nimport pandas as pd\n"
             "nb = NotebookRun('balu_table5_1', profile)\n"
             "nb.save(pd.DataFrame({'dataset': ['x'], 'seed': [nb.params['seed']]}))",)
    tiny_notebook(tmp_path, monkeypatch, "balu_table5_1", *cells)
    rec = execution.execute("balu_table5_1", "smoke", "h")
    assert rec["status"] == "ok", rec["error"]
    out = figures_tmp / "balu_table5_1"
    recorded = json.loads((out / "run.json").read_text())["outputs"]
    assert {"balu_table5_1.csv", "provenance.json", "balu_table5_1.ipynb"} <= set(recorded)
    assert recorded == execution.output_checksums(out)


# -- disk -------------------------------------------------------------------------------------------------------------

def test_a_full_disk_while_writing_the_record_keeps_the_previous_outputs(figures_tmp, tmp_path, monkeypatch):
    cells = ("from dpmf_lib.outputs import NotebookRun\nimport pandas as pd\n"
             "nb = NotebookRun('balu_table5_1', profile)\nnb.save(pd.DataFrame({'dataset': ['x']}))",)
    tiny_notebook(tmp_path, monkeypatch, "balu_table5_1", *cells)
    before = _previous_outputs(figures_tmp, "balu_table5_1")

    def full(path, text):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(execution, "_write_whole", full)
    rec = execution.execute("balu_table5_1", "smoke", "h")
    assert rec["status"] == "failed" and rec["disk_error"] == "ENOSPC"
    assert "disk is full" in rec["error"] and "run.json" in rec["error"] and "previous outputs" in rec["error"]
    assert _contents(figures_tmp / "balu_table5_1") == before
    assert not list(figures_tmp.glob(".staging-*"))


_EFBIG_SCRIPT = """
import json, resource, sys
from pathlib import Path
import nbformat
from dpmf_lib.runner import execution
nbdir = Path(sys.argv[1])
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("profile = 'ci'"), nbformat.v4.new_code_cell(
    "import os\\nopen(os.path.join(os.environ['DPMF_RUN_DIR'], 'big.bin'), 'wb').write(b'0' * 4_000_000)")])
nb.cells[0].metadata["tags"] = ["parameters"]
nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
nbformat.write(nb, nbdir / "bigwrite.ipynb")
execution.notebooks_dir = lambda: nbdir
resource.setrlimit(resource.RLIMIT_FSIZE, (1_000_000, 1_000_000))  # `ulimit -f`: the kernel inherits it
print(json.dumps(execution.execute("bigwrite", "smoke", "h")))
"""


@pytest.mark.slow
def test_a_file_size_limit_keeps_the_previous_outputs_and_names_efbig(tmp_path):
    """Under `ulimit -f` a failed run replaced good outputs with a truncated notebook (and the runner crashed)."""
    figures = tmp_path / "figures"
    before = _previous_outputs(figures, "bigwrite")
    nbdir = tmp_path / "nbs"
    nbdir.mkdir()
    env = {**os.environ, "DPMF_FIGURES_DIR": str(figures), "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-c", _EFBIG_SCRIPT, str(nbdir)], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout.strip().splitlines()[-1])
    assert rec["status"] == "failed" and rec["disk_error"] == "EFBIG" and "ulimit -f" in rec["error"], rec
    assert _contents(figures / "bigwrite") == before
    assert not list(figures.glob(".staging-*"))


def _mount_tmpfs(where: Path, options: str):
    where.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root): " + r.stderr.decode(errors="replace").strip())


@pytest.fixture
def small_disk(tmp_path):
    disk = tmp_path / "disk"
    _mount_tmpfs(disk, "size=2m")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def test_a_real_full_disk_keeps_the_previous_outputs(small_disk, tmp_path, monkeypatch):
    figures = small_disk / "figures"
    monkeypatch.setenv("DPMF_FIGURES_DIR", str(figures))
    tiny_notebook(tmp_path, monkeypatch, "fill", "import os\nopen(os.path.join(os.environ['DPMF_RUN_DIR'], "
                                                 "'big.bin'), 'wb').write(b'0' * 8_000_000)")
    before = _previous_outputs(figures, "fill")
    rec = execution.execute("fill", "smoke", "h")
    assert rec["status"] == "failed" and rec.get("disk_error") == "ENOSPC", rec["error"]
    assert _contents(figures / "fill") == before
    assert not list(figures.glob(".staging-*"))


def test_a_read_only_figures_directory_is_named_by_the_runner(small_disk, capsys, monkeypatch):
    figures = small_disk / "figures"
    before = _previous_outputs(figures, "liu_fig1")
    monkeypatch.setenv("DPMF_FIGURES_DIR", str(figures))
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    rec = execution.execute("liu_fig1", "smoke", "h")
    assert rec["status"] == "failed" and rec["disk_error"] == "EROFS" and "read-only" in rec["error"]
    assert _contents(figures / "liu_fig1") == before
    # the runner itself: every notebook refused by the disk, then the report cannot be written: named, no traceback
    code = cli.main(["--profile", "smoke", "--only", "liu_fig1", "--force"])
    err = capsys.readouterr().err
    assert code == 1 and "read-only" in err and "Traceback" not in err and "cannot write the report" in err


def test_a_report_that_cannot_be_written_is_a_named_error(figures_tmp, capsys, monkeypatch):
    def full():
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(figures_tmp / "REPORT.md"))

    monkeypatch.setattr(cli, "_run_all", lambda *a, **k: iter([]))
    monkeypatch.setattr("dpmf_lib.report.write_report", full)
    assert cli.main(["--profile", "smoke", "--only", "liu_fig1", "--force"]) == 1
    err = capsys.readouterr().err
    assert "cannot write the report: the disk is full (ENOSPC)" in err and "REPORT.md" in err


# -- own datasets -----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_concurrent_registrations_are_all_kept(dest, tmp_path):
    """Four `python -m data_fetch add` at once all printed "registered"; user-datasets.yaml held one."""
    from dpmf_lib.data import user

    procs = []
    for k in range(4):
        csv = tmp_path / f"r{k}.csv"
        csv.write_text("userId,movieId,rating\n" + "".join(f"{u},{i},{1 + (u + i) % 5}\n"
                                                          for u in range(40) for i in range(30)))
        procs.append(subprocess.Popen([sys.executable, "-m", "data_fetch", "add", f"mine{k}", str(csv), "--format",
                                       "csv-header", "--scale", "1,5"], cwd=REPO, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True,
                                      env={**os.environ, "PYTHONPATH": str(REPO)}))
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    assert sorted(user.registered()) == [f"mine{k}" for k in range(4)]


# -- divergence (the trainers' own tests: tests/lib/objpert, tests/lib/sketch, tests/lib/nbm) --------------------------

@pytest.mark.parametrize("name,over,says", [
    ("hua_fig2", {"gamma": 50, "cache": False}, r"diverged by iteration \d+ .* lower gamma \(now 50"),
    ("balu_table4_2", {"eta": 50, "search": False}, r"diverged on split 0: .* lower eta \(now 50\)"),
    ("balu_table4_2", {"eta_grid": [50, 80]}, r"every step size of the grid — lower eta_grid \(now \[50, 80\]\)"),
])
def test_a_diverging_step_size_stops_the_experiment_instead_of_writing_a_figure(name, over, says, figures_tmp):
    """hua_fig2 with gamma: 50 wrote CSV, PNG and measurements with a baseline of 1.3e8; balu_table4_2 with eta: 50
    wrote test_rmse = inf."""
    import importlib

    from dpmf_lib.errors import ParameterError
    from dpmf_lib.experiments import module_name
    from dpmf_lib.params import load_params

    mod = importlib.import_module(module_name(name))
    with pytest.raises(ParameterError, match=says):
        mod.run(load_params(name, "smoke", over))


# -- own data too small to split ----------------------------------------------------------------------------------------

def test_a_one_rating_own_dataset_is_refused_up_front_with_the_numbers(tmp_path, figures_tmp):
    """A one-rating own dataset got an empty test split silently, then "SGD diverged … lower eta0" (the wrong fix)
    after 128 s."""
    import time

    from dpmf_lib.errors import ParameterError
    from dpmf_lib.experiments.liu import liu_fig7
    from dpmf_lib.params import load_params

    csv = tmp_path / "one.csv"
    csv.write_text("userId,movieId,rating\n1,2,4\n")
    spec = {"id": "one-rating", "path": str(csv), "format": "csv-header", "rating_scale": [1, 5]}
    p = load_params("liu_fig7", "smoke", {"datasets": [spec], "tau": {"one-rating": 20}})
    t = time.time()
    with pytest.raises(ParameterError, match=r"one-rating: 1 rating\(s\) cannot be split 0.\d+/0.\d+: part 2 .* would "
                                             r"hold 0 ratings — give a dataset of at least \d+ ratings"):
        liu_fig7.run(p)
    assert time.time() - t < 30


def test_a_sketch_split_left_empty_by_the_frequency_threshold_is_refused():
    from dpmf_lib.data.ratings import DataSource, Ratings
    from dpmf_lib.errors import ParameterError
    from dpmf_lib.sketch import prepare_split
    import numpy as np

    rng = np.random.default_rng(0)
    n = 40
    r = Ratings(users=rng.integers(0, 30, n).astype(np.int32), items=rng.integers(0, 30, n).astype(np.int32),
                values=rng.integers(1, 6, n).astype(np.float32), n_users=30, n_items=30, rating_scale=(1.0, 5.0),
                source=DataSource("mine", True, None, "user dataset"))
    with pytest.raises(ParameterError, match=r"mine: split 0 of 40 ratings leaves \d+ training, 0 validation .* "
                                             r"min_freq = 10 .* lower min_freq"):
        prepare_split(r, 0, min_freq=10)


# -- cost guards ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("item,says", [
    ("balu_fig3_2.L=10000000000", "balu_fig3_2: L = 10000000000 needs at least 15,664.8 GiB of memory (the codebook"),
    ("hua_fig2.d=1000000", "hua_fig2: d = 1000000 needs at least"),
    ("balu_fig3_2.L=1e10", "YAML reads '1e10' as a string"),
])
def test_work_that_cannot_fit_in_memory_is_refused_naming_the_parameter(item, says, capsys, figures_tmp):
    """`L: 1e10` (balu_fig3_2) and hua `d: 1e6` ended in a raw MemoryError (74.5 / 12.5 GiB)."""
    import psutil

    if psutil.virtual_memory().total > 2 ** 40:
        pytest.skip("a machine with more than 1 TiB of memory")
    code = cli.main(["--profile", "smoke", "--only", "balu_fig3_2,hua_fig2", "--set", item])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err, err
    assert not list(figures_tmp.iterdir())


def test_absurd_passes_or_sizes_are_named_with_the_profiles_value():
    """`sgd: {epochs: 1e9}` (liu_fig7), `d: 65535` (balu_table4_2) and `iterations: [1e8]` (hua_fig2) started
    computing for hours without a word."""
    from dpmf_lib.runner.preflight import check_costs

    (w,) = check_costs("liu_fig7", "paper", {"sgd": {"epochs": 1_000_000_000}})
    assert "sgd.epochs = 1000000000 (the paper profile's: 30)" in w and "would take about" in w and "years" in w
    (w,) = check_costs("balu_table4_2", "smoke", {"d": 65535})
    assert "d = 65535 (the smoke profile's: 32) is about 2.05e+03 times the smoke profile's work" in w
    (w,) = check_costs("hua_fig2", "smoke", {"iterations": [100_000_000]})
    assert "iterations = [100000000] (the smoke profile's: [2, 5])" in w
    assert check_costs("hua_fig2", "smoke", {"iterations": [10, 20]}) == []  # a few times the work: no warning


def test_under_timeout_work_past_the_budget_is_refused(capsys, figures_tmp):
    code = cli.main(["--profile", "paper", "--only", "liu_fig7", "--timeout", "60", "--set",
                     "sgd={epochs: 1000000000}"])
    err = capsys.readouterr().err
    assert code == 2 and "past --timeout 60 min" in err and "sgd.epochs" in err


@pytest.mark.slow
@pytest.mark.parametrize("name, args, says", [
    ("balu_table4_2", ["-p", "d", "65535"], "d = 65535 (the smoke profile's: 32) is about 2.05e+03 times"),
    ("liu_fig7", ["-y", "overrides: {sgd: {epochs: 1000000000}}"], "sgd.epochs = 1000000000 (the smoke profile's: 3)"),
])
def test_a_run_by_hand_gets_the_runners_guards_before_the_experiment_starts(name, args, says, tmp_path):
    """`papermill notebooks/X.ipynb out.ipynb -p d 65535` got only the kind checks and computed for hours; the
    notebook now refuses it with the runner's message, in its first cell that does work."""
    figures = tmp_path / "figures"
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "papermill", str(REPO / "notebooks" / f"{name}.ipynb"),
                        str(tmp_path / "out.ipynb"), "-p", "profile", "smoke", *args, "--cwd", str(REPO / "notebooks")],
                       cwd=REPO, capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(REPO), "DPMF_FIGURES_DIR": str(figures)})
    assert p.returncode != 0 and "ParameterError" in p.stderr and says in p.stderr, p.stderr[-3000:]
    assert "a run by hand (papermill, JupyterLab) refuses this much" in p.stderr
    assert time.time() - t0 < 120  # a kernel's start and the imports, no training
    assert not figures.exists() or not any(figures.rglob("*.csv"))


@pytest.mark.slow
def test_a_fetch_onto_a_full_disk_is_a_named_error_and_leaves_nothing_half_written(small_disk, mirror):
    """data_fetch into a disk that fills up gave a raw OSError traceback."""
    dest = small_disk / "data"
    p = subprocess.run([sys.executable, "-m", "data_fetch", "ml-100k", "--dest", str(dest), "--quiet"], cwd=REPO,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO),
                                                            "DPMF_DATA_MIRROR": str(mirror)}, timeout=300)
    assert p.returncode == 1 and "the disk is full (ENOSPC)" in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert not (dest / "ml-100k").exists() and not list(dest.glob(".ml-100k*"))
