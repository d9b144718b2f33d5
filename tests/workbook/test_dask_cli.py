"""The dask path as a user runs it: a real ``dask scheduler`` and two ``dask worker`` processes (the command-line tools
that ship with ``distributed``) on 127.0.0.1, and ``python -m dpmf_lib.reproduce --backend dask --scheduler …`` as a
subprocess. Under ``-m`` the runner's module is ``__main__``: a task function defined there was shipped by value and
failed to serialize ("Could not serialize object of type LLGExpr"); the runner submits importable functions only.

The workers are started without the runner's ``DPMF_*`` settings (they only get the checkout on ``PYTHONPATH``, as a
worker with an editable install would): the figures directory and everything else reach them with each task."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow

NOTEBOOKS = ("hua_fig2", "balu_table4_2")
DASK = Path(sys.executable).with_name("dask")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPMF_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _start_cluster(logs: Path, scheduler_env: dict | None = None):
    """A scheduler and two one-thread workers (with nannies, as `dask worker` starts them) on free local ports:
    ``(address, processes)``."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
                              stdout=open(logs / "scheduler.log", "wb"), stderr=subprocess.STDOUT,
                              env={**_worker_env(), **(scheduler_env or {})}, cwd=logs)]
    for i in range(2):
        procs.append(subprocess.Popen([str(DASK), "worker", address, "--nthreads", "1", "--memory-limit", "0",
                                       "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{i}"],
                                      stdout=open(logs / f"worker{i}.log", "wb"), stderr=subprocess.STDOUT,
                                      env=_worker_env(), cwd=logs))
    return address, procs


def _stop(procs) -> None:
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()


def _cluster(tmp_path_factory, scheduler_env: dict | None = None):
    if not DASK.exists():
        pytest.skip(f"no `dask` command beside {sys.executable}")
    address, procs = _start_cluster(tmp_path_factory.mktemp("dask-logs"), scheduler_env)
    from distributed import Client

    try:
        with Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        yield address
    finally:
        _stop(procs)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from _cluster(tmp_path_factory)


#: how often the scheduler reruns a task whose worker died (dask's default is 3: four deaths would take minutes here)
ALLOWED_FAILURES = 1


@pytest.fixture
def fragile_cluster(tmp_path_factory):
    yield from _cluster(tmp_path_factory, {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(ALLOWED_FAILURES)})


def _reproduce(figures: Path, *args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "DPMF_FIGURES_DIR": str(figures), "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "dpmf_lib.reproduce", "--profile", "smoke", "--only",
                             ",".join(NOTEBOOKS), *args], cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **popen)


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    figures = tmp_path_factory.mktemp("local") / "figures"
    p = _reproduce(figures, "--jobs", "2")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, out + err
    return figures


def _tables(figures: Path) -> dict[str, bytes]:
    return {n: (figures / n / f"{n}.csv").read_bytes() for n in NOTEBOOKS}


def test_reproduce_on_a_dask_cluster_from_the_command_line(cluster, local_run, tmp_path):
    figures = tmp_path / "figures"
    p = _reproduce(figures, "--backend", "dask", "--scheduler", cluster, "--jobs", "2")
    out, err = p.communicate(timeout=900)
    assert p.returncode == 0, out + err
    assert "Could not serialize" not in err and "Traceback" not in err
    assert _tables(figures) == _tables(local_run)  # byte for byte what the local run wrote
    for n in NOTEBOOKS:
        run = json.loads((figures / n / "run.json").read_text())
        assert run["status"] == "ok" and run["outputs"][f"{n}.csv"]
    report = (figures / "REPORT.md").read_text()
    for n in NOTEBOOKS:  # the report read the runs the workers wrote (they got DPMF_FIGURES_DIR with the task)
        row = next(line for line in report.splitlines() if line.startswith(f"| [{n}]") or line.startswith(f"| {n} "))
        assert "| ok |" in row, row
    assert not list(figures.glob(".staging-*")) and not list(figures.glob(".stop-*"))


def _papermill_children(figures: Path) -> list[psutil.Process]:
    """The papermill processes (and kernels) running a notebook into ``figures``."""
    found = []
    for p in psutil.process_iter(["pid"]):
        try:
            if str(figures) in (p.environ().get("DPMF_RUN_DIR") or ""):
                found.append(p)
        except (psutil.Error, OSError):
            continue
    return found


def test_a_worker_killed_mid_run_is_retried_and_nothing_is_half_written(cluster, local_run, tmp_path):
    """kill -9 of the worker process running a notebook: its papermill process and kernel die with it (they were
    running on, and re-created the staging folder), the scheduler runs the task again on a worker, and the outputs
    are whole and the same as the local run's — or, when the retries run out, the notebook is reported failed."""
    figures = tmp_path / "figures"
    p = _reproduce(figures, "--backend", "dask", "--scheduler", cluster, "--jobs", "2")
    victims = []
    deadline = time.time() + 120
    while time.time() < deadline and not victims:
        victims = [c for c in _papermill_children(figures) if "_child_main" in " ".join(c.cmdline())]
        time.sleep(0.5)
    assert victims, "no notebook started on the cluster"
    child = victims[0]
    orphans = [child, *child.children(recursive=True)]
    worker = child.parent()
    staging = Path(child.environ()["DPMF_RUN_DIR"])
    time.sleep(2)  # mid-run: the kernel is up
    os.kill(worker.pid, signal.SIGKILL)
    gone, alive = psutil.wait_procs(orphans, timeout=20)
    assert not alive, f"still running after the worker's death: {[a.cmdline()[:3] for a in alive]}"
    out, err = p.communicate(timeout=900)
    assert "Traceback" not in err, err
    for n in NOTEBOOKS:
        run = json.loads((figures / n / "run.json").read_text())
        if run["status"] == "ok":
            assert (figures / n / f"{n}.csv").read_bytes() == _tables(local_run)[n]
        else:
            assert "worker" in run["error"] or "worker" in err
    assert p.returncode == 0, out + err  # one kill is within the scheduler's retries
    time.sleep(2)
    assert not staging.exists() or not (staging / f"{staging.name.split('-')[1]}.csv").exists()
    # the next run cleans what the dead worker left and keeps the whole outputs
    from dpmf_lib.runner.execution import recover_interrupted

    recover_interrupted(figures)
    assert not list(figures.glob(".staging-*"))
    assert _tables(figures) == _tables(local_run)


def test_a_worker_with_another_checkout_refuses_the_notebook(tmp_path, monkeypatch):
    """A worker whose code computes another run hash (another checkout, other params files) must not file its
    results under the runner's hash: the task refuses, naming the worker and the fix."""
    from dpmf_lib.runner import execution

    monkeypatch.setenv("DPMF_FIGURES_DIR", str(tmp_path / "figures"))
    rec = execution.execute("hua_fig2", "smoke", "0" * 64, check_code=True)
    assert rec["status"] == "failed" and "another run hash" in rec["error"] and "same checkout" in rec["error"]
    assert not (tmp_path / "figures" / "hua_fig2").exists()


def test_a_notebook_whose_every_attempt_dies_is_reported_failed_and_keeps_its_previous_outputs(fragile_cluster,
                                                                                                local_run, tmp_path):
    """Every worker that starts the notebook is killed, so the task runs out of the scheduler's retries
    (KilledWorker): the runner names the notebook as failed, exits non-zero, and the previous outputs stay as they
    were (nothing half-written, no staging folder left)."""
    import shutil

    name = NOTEBOOKS[0]
    figures = tmp_path / "figures"
    shutil.copytree(local_run / name, figures / name)
    before = {f.name: f.read_bytes() for f in (figures / name).iterdir()}
    env = {**os.environ, "DPMF_FIGURES_DIR": str(figures), "PYTHONPATH": str(REPO)}
    p = subprocess.Popen([sys.executable, "-m", "dpmf_lib.reproduce", "--profile", "smoke", "--only", name, "--force",
                          "--backend", "dask", "--scheduler", fragile_cluster, "--jobs", "1"], cwd=REPO, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = set()
    deadline = time.time() + 600
    while p.poll() is None and time.time() < deadline:
        for child in _papermill_children(figures):
            try:
                if "_child_main" not in " ".join(child.cmdline()) or child.parent().pid in killed:
                    continue
                worker = child.parent()
                orphans = [child, *child.children(recursive=True)]
            except psutil.Error:
                continue
            os.kill(worker.pid, signal.SIGKILL)
            killed.add(worker.pid)
            psutil.wait_procs(orphans, timeout=20)
        time.sleep(0.3)
    out, err = p.communicate(timeout=120)
    assert len(killed) == ALLOWED_FAILURES + 1, (killed, out, err)
    assert p.returncode == 1, out + err
    assert "Traceback" not in err, err
    line = next(x for x in out.splitlines() if x.startswith(f"{name}: failed"))
    assert "the dask worker running it died (and so did the workers it was retried on)" in line, line
    assert "its previous outputs, if any, are kept" in line and "executed copy" not in line, line
    assert f"1 notebook(s) failed: {name}" in err, err
    assert {f.name: f.read_bytes() for f in (figures / name).iterdir()} == before
    time.sleep(2)  # the killed kernels' last writes, if any
    from dpmf_lib.runner.execution import recover_interrupted

    recover_interrupted(figures)
    assert not list(figures.glob(".staging-*")) and not list(figures.glob(".stop-*"))
    assert {f.name: f.read_bytes() for f in (figures / name).iterdir()} == before
