"""Run many notebooks: at most ``--jobs`` at a time, from threads of this process or as tasks on a dask cluster."""

from __future__ import annotations

import os
import socket
import time

from ..errors import WorkbookError
from ..paths import figures_dir
from .execution import STOP_FILE_VAR, THREAD_LIMIT_VARS, clear_stop, execute, request_stop


def forwarded_env(extra: dict | None = None) -> dict:
    """What a notebook's kernel needs from the runner's environment, wherever it runs: every ``DPMF_*`` setting
    (figures and data directories, mirror, cache, sweep backend …) and the caller's thread limits. A dask worker
    on another machine starts with its own environment; without these it would write to its default
    ``figures/`` and the report would say "not run"."""
    env = {k: v for k, v in os.environ.items() if k.startswith("DPMF_")}
    env.update({v: os.environ.get(v) for v in THREAD_LIMIT_VARS})
    env["DPMF_FIGURES_DIR"] = str(figures_dir())
    env.update(extra or {})
    return env


def cache_readers_last(todo: list[tuple[str, str]], entries) -> list[tuple[str, str]]:
    """``todo`` with the notebooks that read another's cached runs (registry ``reads_cache_of``), when that one runs
    too, moved to the end (order otherwise kept), so the others fill the slots first; :func:`_run_all` also holds a
    reader back until its producer has ended (with ``--jobs 2`` Figure 4.8 would otherwise start beside 4.7 and train
    all of 4.7's runs again instead of reading them)."""
    names = {n for n, _ in todo}
    reads = cache_reads(entries)
    return sorted(todo, key=lambda t: any(p in names for p in reads.get(t[0], ())))


def cache_reads(entries) -> dict[str, tuple[str, ...]]:
    """Notebook name -> the notebooks whose cached runs it reads (registry ``reads_cache_of``)."""
    return {e.name: e.reads_cache_of for e in entries}


def _run_all(todo: list[tuple[str, str]], profile: str, jobs: int, backend: str, scheduler: str | None, env: dict,
             timeout_s: float | None = None, sets: dict[str, dict] | None = None,
             reads: dict[str, tuple] | None = None):
    """Run ``todo`` (``(name, hash)``, in order) and yield each run record as it ends: at most ``jobs`` notebooks at a
    time, each in its own process (:func:`execute`), from threads of this process or as tasks on a dask cluster
    (``backend="dask"``: ``scheduler``, else a local cluster of ``jobs`` one-thread workers whose address the
    notebooks' sweeps get as ``DPMF_DASK_SCHEDULER``, so they share it). ``reads`` (registry ``reads_cache_of``): a
    notebook that reads another's cached runs starts only when that one, if it is in ``todo``, has ended — else
    both would compute the same runs (Fig 4.8 beside 4.7, Fig 3.4 beside 3.2). Notebooks are submitted as slots
    free up, not all at once: on a cluster every waiting notebook would otherwise hold a worker thread."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor
    from concurrent.futures import wait as wait_local

    from tqdm.auto import tqdm

    bar = tqdm(total=len(todo), desc=f"notebooks ({profile})", unit="nb", disable=not todo)
    names = {n for n, _ in todo}
    after = {n: {p for p in (reads or {}).get(n, ()) if p in names and p != n} for n, _ in todo}
    sets = sets or {}
    client = cluster = pool = stop_file = None
    if backend == "dask":
        from dask.distributed import Client, LocalCluster
        from dask.distributed import wait as wait_dask

        if not scheduler:
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, dashboard_address=None)
            env = {**env, "DPMF_DASK_SCHEDULER": cluster.scheduler_address}
        client = Client(scheduler or cluster)
        # Ctrl-C reaches the notebooks on the workers through a file on the shared figures filesystem
        stop_file = str(figures_dir() / f".stop-{socket.gethostname()}-{os.getpid()}-{time.time_ns()}")
        env = {**env, STOP_FILE_VAR: stop_file}

        def submit(n, h):
            # check_code: a worker importing another checkout refuses rather than file results under this run hash
            return client.submit(execute, n, profile, h, env, timeout_s, sets.get(n), check_code=True, pure=False)

        def first_done(futures):
            return wait_dask(futures, return_when="FIRST_COMPLETED").done
    else:
        pool = ThreadPoolExecutor(max_workers=jobs)

        def submit(n, h):
            return pool.submit(execute, n, profile, h, env, timeout_s, sets.get(n))

        def first_done(futures):
            return wait_local(futures, return_when=FIRST_COMPLETED).done
    pending, ended, running = list(todo), set(), {}
    try:
        while pending or running:
            while len(running) < jobs:
                ready = next((t for t in pending if after[t[0]] <= ended), None)
                if ready is None:
                    break
                pending.remove(ready)
                running[submit(*ready)] = ready[0]
            if not running:
                raise WorkbookError("registry: reads_cache_of forms a cycle among " + ", ".join(n for n, _ in pending))
            for fut in first_done(list(running)):
                name = running.pop(fut)
                ended.add(name)
                bar.update()
                yield _record_of(fut, name, profile, backend)
    finally:
        if running:  # stopped (Ctrl-C, SIGTERM, an error here): the notebooks stop and keep their previous outputs
            bar.leave = False
            request_stop(stop_file)
            for fut in running:
                fut.cancel()
            if client is not None:  # the tasks see the stop file within a second; give them the time to drop staging
                try:
                    wait_dask(list(running), timeout=15)
                except Exception:  # a timeout, or the cluster went away: nothing more to do from here
                    pass
        if pool is not None:
            pool.shutdown(wait=True)
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        if stop_file:  # no task of this runner is left to read it
            try:
                os.unlink(stop_file)
            except OSError:
                pass
        clear_stop()
        bar.close()


def _record_of(fut, name: str, profile: str, backend: str) -> dict:
    """The run record a finished future holds; an exception (the dask worker running the notebook died more often
    than the scheduler retries, the cluster went away, the runner's own code raised) becomes a failed record naming
    it, so one notebook's loss is reported and the others' runs go on; ``executed: False``: no executed copy of this
    run exists (the one in its folder is the previous run's)."""
    try:
        return fut.result()
    except Exception as exc:
        kind = type(exc).__name__
        where = ("the dask worker running it died (and so did the workers it was retried on)" if kind == "KilledWorker"
                 else f"its {'dask task' if backend == 'dask' else 'run'} raised")
        return {"notebook": name, "profile": profile, "status": "failed", "runtime_s": 0.0, "executed": False,
                "error": f"{where}: {kind}: {str(exc)[:400]}; its previous outputs, if any, are kept"}
