"""Execute one notebook with papermill in a process of its own, into a staging directory swapped into place whole.

:func:`execute` is importable (never defined in ``__main__``), so a dask worker receives it by reference."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ..dependencies import states_of_run
from ..errors import WorkbookError
from ..notebook_params import RUN_DIR_VAR, RUN_NOTEBOOK_VAR, scratch_dir
from ..params import load_params
from ..paths import figures_dir, notebooks_dir
from ..registry import Entry, load_registry
from .hashing import code_files, experiment_module, judging_digest, part_digests, run_hash_parts
from .staleness import _outputs_present, _seed_rules_of


# joblib's loky workers cap these to cpu_count // n_jobs; a notebook's kernel must see the caller's values instead
# (the work happens in the kernel, and e.g. liu_fig3 measures scaling over threads).
THREAD_LIMIT_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                     "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")


# The kernel draws with matplotlib's inline backend, whatever the caller's MPLBACKEND (CI exports Agg for its own
# processes): the inline backend needs no display, and it puts each cell's figure into the executed notebook as an
# image/png output, so the executed copies show their figures.
KERNEL_ENV = {"MPLBACKEND": "module://matplotlib_inline.backend_inline"}


def cache_entries(entry: Entry, since: float | None = None) -> int:
    """How many results the result cache (:func:`dpmf_lib.paths.cache_dir`) holds for the code ``entry`` runs — the
    cached functions of the modules in its experiment's closure — or, with ``since`` (a ``time.time()``), how many
    of them were written from then on. A notebook that reads another's runs (Fig 4.6 those of 4.1) counts them too,
    and with ``--jobs 2`` a neighbour's writes to shared functions count: a hint for the reader of a measured time,
    not an accounting. 0 for a notebook whose code caches nothing."""
    from ..dependencies import REPO_ROOT, module_closure
    from ..paths import cache_dir

    root = cache_dir() / "joblib"  # joblib.Memory: joblib/<module path>/<function>/<call hash>/output.pkl
    n = 0
    for path in module_closure(experiment_module(entry)):
        folder = root / path.relative_to(REPO_ROOT).with_suffix("")
        if folder.is_dir():
            n += sum(1 for f in folder.rglob("output.pkl") if since is None or f.stat().st_mtime >= since)
    return n


def swap_into_place(staging: Path, final: Path) -> None:
    """Replace directory ``final`` by ``staging`` whole (readers see the old or the new one, never a mix)."""
    old = final.parent / f".old-{final.name}-{os.getpid()}"
    if final.exists():
        os.replace(final, old)
    os.replace(staging, final)
    shutil.rmtree(old, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


#: a staging directory's owner (host and pid): on a cluster with a shared figures directory, a pid alone names a
#: process on whichever machine made the directory
OWNER_FILE = ".owner.json"
#: a staging directory made on another host is left alone for this long after its last change (its pid cannot be
#: checked from here; a notebook may run for hours without touching its staging directory itself)
FOREIGN_STAGING_MAX_AGE_S = 7 * 24 * 3600


def _owner_alive(path: Path) -> bool:
    """Staging/old directories end in the pid of the process that made them; a live one may still be using it. A
    staging directory made by a dask worker on another host says so in its owner file: it counts as alive (its
    process cannot be checked from here) until it is a week old."""
    try:
        owner = json.loads((path / OWNER_FILE).read_text())
    except (OSError, ValueError):
        owner = None
    if isinstance(owner, dict) and owner.get("host") not in (None, socket.gethostname()):
        try:
            return time.time() - path.stat().st_mtime < FOREIGN_STAGING_MAX_AGE_S
        except OSError:
            return False
    tail = path.name.rsplit("-", 1)[-1]
    return tail.isdigit() and _pid_alive(int(tail))


def recover_interrupted(fig_dir: Path | None = None) -> list[str]:
    """Clean up after a runner that was killed mid-swap: restore ``.old-<name>-<pid>`` when ``<name>`` is missing,
    and remove leftover staging and old directories — only those whose process is gone, so a second runner started
    beside a working one leaves the first one's directories alone. Returns what it did."""
    fig_dir = fig_dir or figures_dir()
    done = []
    if not fig_dir.is_dir():
        return done
    for old in sorted(fig_dir.glob(".old-*")):
        if _owner_alive(old):
            continue
        name = old.name[len(".old-"):].rsplit("-", 1)[0]
        if not (fig_dir / name).exists():
            os.replace(old, fig_dir / name)
            done.append(f"restored {name} from an interrupted run")
        else:
            shutil.rmtree(old, ignore_errors=True)
    for staging in sorted(fig_dir.glob(".staging-*")):
        if _owner_alive(staging):
            continue
        shutil.rmtree(staging, ignore_errors=True)
        done.append(f"removed the unfinished {staging.name}")
    return done


# the kernel's launcher: dies with the process that started it (PR_SET_PDEATHSIG survives the exec into the kernel),
# and gives up when that process is already gone
_KERNEL_GUARD = ("import ctypes, os, signal, sys\n"
                 "try:\n"
                 "    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
                 "except (OSError, AttributeError):\n"
                 "    pass\n"
                 "if os.getppid() != int(sys.argv[1]):\n"
                 "    sys.exit('the papermill process that started this kernel is gone')\n"
                 "os.execvp(sys.argv[2], sys.argv[2:])\n")


def _kernel_manager_class():
    """On POSIX, kernels talk over IPC sockets instead of TCP on localhost: nothing listens on a port, and the kernel no
    longer prints its "running over TCP without encryption" warning (once per notebook, 45 times a `make figures`).
    On Linux the kernel is started through a small guard that makes it die with the papermill process
    (``PR_SET_PDEATHSIG``): killing the runner, or the dask worker running the notebook, ends its kernel too."""
    if os.name != "posix":
        return None
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            import tempfile
            import uuid

            kwargs.setdefault("transport", "ipc")
            # the socket files are <ip>-<n>: a prefix of its own per kernel, or two notebooks run at once (--jobs 2)
            # would share sockets and read each other's messages ("Invalid Signature")
            kwargs.setdefault("ip", os.path.join(tempfile.gettempdir(), f"dpmf-kernel-{uuid.uuid4().hex}"))
            super().__init__(**kwargs)

        async def _async_launch_kernel(self, kernel_cmd, **kw):
            if sys.platform.startswith("linux"):
                kernel_cmd = [sys.executable, "-c", _KERNEL_GUARD, str(os.getpid()), *kernel_cmd]
            return await super()._async_launch_kernel(kernel_cmd, **kw)

    return IPCKernelManager


def _kill_tree(pid: int) -> None:
    """Kill a process and everything it started (the papermill child, its kernel, the kernel's workers). The kernel
    runs in a session of its own, so killing a process group would miss it; walk the tree instead."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = root.children(recursive=True) + [root]
    except psutil.NoSuchProcess:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=10)


def _kill_descendants() -> None:
    """Kill everything this process started (its kernel and the kernel's workers), not this process."""
    import psutil

    try:
        procs = psutil.Process().children(recursive=True)
    except psutil.Error:
        return
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)


def _die_with_parent(parent_pid: int) -> None:
    """The papermill process ends, with its kernel, when the runner (or the dask worker) that started it dies or
    stops it: ``PR_SET_PDEATHSIG`` on Linux sends SIGTERM at the parent's death, a watchdog thread polls the parent
    elsewhere (and catches a death before the signal was armed); SIGTERM, SIGINT and SIGHUP kill the kernel's tree
    first, so no kernel runs on to re-create a staging directory the next run has cleaned."""
    def end(signum=None, frame=None):
        _kill_descendants()
        os._exit(128 + (signum or signal.SIGTERM))

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, end)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass

    def watch():
        while True:
            if os.getppid() != parent_pid:
                end()
            time.sleep(1.0)

    if os.getppid() != parent_pid:
        end()
    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _child_main() -> None:
    """The papermill side of :func:`execute`, in a process of its own so that a budget can stop it (with its
    kernel) and its kernel's peak memory can be read from ``RUSAGE_CHILDREN`` once the kernel is reaped."""
    import resource

    job = json.loads(sys.argv[1])
    if job.get("parent"):
        _die_with_parent(job["parent"])

    import papermill as pm

    result = {"status": "ok", "error": None}
    try:
        parameters = {"profile": job["profile"], **({"overrides": job["overrides"]} if job.get("overrides") else {})}
        pm.execute_notebook(job["notebook"], job["output"], parameters=parameters,
                            cwd=job["cwd"], kernel_name="python3", progress_bar=False, log_output=False,
                            request_save_on_cell_execute=False,
                            **({"kernel_manager_class": km} if (km := _kernel_manager_class()) else {}))
    except pm.PapermillExecutionError as exc:
        result.update(status="failed", error=f"cell {exc.exec_count} (index {exc.cell_index}): {exc.ename}: "
                                             f"{str(exc.evalue)[:500]}")
    except Exception as exc:  # kernel died, notebook unreadable, ...: report, never hide
        result.update(status="failed", error=f"{type(exc).__name__}: {str(exc)[:500]}")
    # ru_maxrss of reaped descendants (KiB on Linux): the kernel, and whatever worker processes it waited for
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    Path(job["result"]).write_text(json.dumps(result))


# -- stopping: Ctrl-C / SIGTERM of the runner ---------------------------------------------------------------------

#: set by :func:`request_stop`: every notebook running from this process stops, its staging directory is dropped
_STOP = threading.Event()
#: a file whose existence tells the notebooks of one runner on a dask cluster to stop (``$DPMF_RUNNER_STOP``: on the
#: shared figures filesystem, as the workers cannot see the runner's memory)
STOP_FILE_VAR = "DPMF_RUNNER_STOP"


def request_stop(stop_file: str | Path | None = None) -> None:
    """Stop every notebook this process runs (and, with ``stop_file``, those a dask cluster runs for it): each kills
    its papermill process and kernel within a second, drops its staging directory and keeps the previous outputs."""
    _STOP.set()
    if stop_file:
        try:
            Path(stop_file).touch()
        except OSError:
            pass


def clear_stop() -> None:
    """Forget a :func:`request_stop` (the runner's notebooks have all ended)."""
    _STOP.clear()


def _stop_requested(stop_file: str | None) -> bool:
    return _STOP.is_set() or bool(stop_file and os.path.exists(stop_file))


# -- disk errors ----------------------------------------------------------------------------------------------------

#: errno → what the disk said; such a failure says nothing about the notebook: the previous outputs stay
DISK_ERRORS = {errno.ENOSPC: "the disk is full (ENOSPC)",
               errno.EFBIG: "a file reached the size limit (EFBIG; see `ulimit -f`)",
               errno.EROFS: "the filesystem is read-only (EROFS)",
               errno.EDQUOT: "the disk quota is exceeded (EDQUOT)"}
_DISK_TEXT = {os.strerror(n): n for n in DISK_ERRORS}


class DiskError(WorkbookError, OSError):
    """The disk refused the run's outputs (full, read-only, over a size limit or quota): names the file and keeps the
    previous outputs."""


def disk_errno(text: str | None) -> int | None:
    """The disk errno an error message (a failed cell's, papermill's) names — ``[Errno 28]`` or its text — else None."""
    if not text:
        return None
    for m in re.finditer(r"\[Errno (\d+)\]", text):
        if int(m.group(1)) in DISK_ERRORS:
            return int(m.group(1))
    return next((n for t, n in _DISK_TEXT.items() if t in text), None)


def _disk_failure(name: str, final: Path, staging: Path, err: int, where: str, runtime_s: float) -> dict:
    shutil.rmtree(staging, ignore_errors=True)
    return {"notebook": name, "status": "failed", "runtime_s": runtime_s, "disk_error": errno.errorcode.get(err),
            "error": f"{DISK_ERRORS[err]} {where}; the previous outputs in {final} are kept — free space (or lift the "
                     "limit, or point $DPMF_FIGURES_DIR at a writable disk) and run again"}


# -- output checksums -----------------------------------------------------------------------------------------------

def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def output_checksums(folder: Path) -> dict[str, str]:
    """sha256 of every file of a run's folder (relative paths) but its ``run.json``, which records them."""
    return {p.relative_to(folder).as_posix(): sha256_of(p) for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name not in ("run.json", OWNER_FILE, ".result.json")}


def execute(name: str, profile: str, digest: str, env: dict | None = None, timeout_s: float | None = None,
            overrides: dict | None = None, *, check_code: bool = False) -> dict:
    """Execute one notebook with papermill into a staging directory and rename it to ``figures/<name>/``; returns
    the run record (also written there as ``run.json``: status, error, ``runtime_s``, ``peak_rss_mib`` of the
    kernel, the data state, the sha256 of every output file).

    ``env``: variables to set for the kernel; a value of ``None`` removes the variable. ``timeout_s``: the run's
    budget; a notebook still running then is stopped with its kernel and recorded as ``over budget``. The kernel's
    own console output (warnings, tracebacks it prints) goes to ``figures/<name>/kernel.log``, not the runner's.
    ``overrides`` (``--set``): parameters injected as the notebook's ``overrides``; such a run is not canonical and
    lands in ``figures/_runs/<name>-<profile>-<hash>/`` (the directory a hand run with these values would use).
    ``check_code`` (a dask worker): first check that this process computes the same run hash ``digest`` as the
    runner did — a worker started from another checkout or with other parameter files would write results under a
    hash they do not belong to.

    A stop (:func:`request_stop`, or the file ``$DPMF_RUNNER_STOP``) kills the notebook's process tree, drops the
    staging directory and returns a record with status ``interrupted``: the previous outputs stay. So does a disk
    that refuses the outputs (full, read-only, size limit: status ``failed``, ``disk_error`` set).
    """
    with _settings(env or {}):
        if check_code:
            mismatch = _code_mismatch(name, profile, digest)
            if mismatch:
                return {"notebook": name, "profile": profile, "hash": digest, "status": "failed", "runtime_s": 0.0,
                        "error": mismatch}
        return _execute(name, profile, digest, timeout_s, overrides)


def _code_mismatch(name: str, profile: str, digest: str) -> str | None:
    from .hashing import run_hash

    entry = next((e for e in load_registry()[1] if e.name == name), None)
    if entry is None:
        return (f"the dask worker {socket.gethostname()} (pid {os.getpid()}) does not know the notebook {name}: "
                f"its checkout ({Path(__file__).resolve().parents[2]}) is not the runner's")
    here = run_hash(entry, profile)
    if here == digest:
        return None
    return (f"the dask worker {socket.gethostname()} (pid {os.getpid()}) computes another run hash for {name} "
            f"({here[:12]} against the runner's {digest[:12]}): it imports dpmf_lib from "
            f"{Path(__file__).resolve().parents[2]}, whose code, notebooks or params differ from the runner's; start "
            "the workers from the same checkout (docs/distributed.md)")


def _execute(name: str, profile: str, digest: str, timeout_s: float | None, overrides: dict | None) -> dict:
    final = scratch_dir(name, load_params(name, profile, overrides)) if overrides else figures_dir() / name
    staging = final.parent / f".staging-{name}-{os.getpid()}"
    started = time.time()
    try:
        return _execute_in(name, profile, digest, timeout_s, overrides, final, staging, started)
    except OSError as exc:
        if exc.errno in DISK_ERRORS:
            return _disk_failure(name, final, staging, exc.errno, f"writing {exc.filename or staging}",
                                 round(time.time() - started, 2))
        raise


def _execute_in(name, profile, digest, timeout_s, overrides, final: Path, staging: Path, started: float) -> dict:
    import subprocess

    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / OWNER_FILE).write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    # the staging directory is this notebook's alone: the child's environment, never this process's (two notebooks
    # run side by side in one dask worker's threads, or in the runner's)
    child_env = {**os.environ, RUN_DIR_VAR: str(staging), RUN_NOTEBOOK_VAR: name, **KERNEL_ENV}
    stop_file = os.environ.get(STOP_FILE_VAR)
    entry = next((e for e in load_registry()[1] if e.name == name), None)
    cached_at_start = cache_entries(entry) if entry else 0
    record = {"notebook": name, "profile": profile, "hash": digest, "status": "ok", "error": None,
              **({"overrides": overrides, "out_dir": str(final)} if overrides else {})}
    if entry is not None:  # what the hash was made of, so that a later run can say which part changed
        try:
            record["hash_parts"] = part_digests(run_hash_parts(entry, profile))
            record["code_files"] = code_files(entry)
        except WorkbookError:  # a params file the runner's own hash already failed on: the run reports it
            pass
    result_file = staging / ".result.json"
    job = {"notebook": str(notebooks_dir() / f"{name}.ipynb"), "output": str(staging / f"{name}.ipynb"),
           "cwd": str(notebooks_dir()), "profile": profile, "result": str(result_file), "overrides": overrides or {},
           "parent": os.getpid()}
    stopped = False
    try:
        with open(staging / "kernel.log", "wb") as log:
            # a session of its own: the terminal's Ctrl-C reaches the runner, which stops the notebook itself (a
            # SIGINT reaching papermill was recorded as a failed run and replaced the previous outputs)
            child = subprocess.Popen([sys.executable, "-c", "from dpmf_lib.runner.execution import _child_main; "
                                      "_child_main()", json.dumps(job)], stdout=log, stderr=subprocess.STDOUT,
                                     env=child_env, start_new_session=True)
            with _off_worker_thread():
                deadline = started + timeout_s if timeout_s else None
                while True:
                    try:
                        child.wait(timeout=0.5)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if _stop_requested(stop_file):
                        _kill_tree(child.pid)
                        child.wait()
                        stopped = True
                        break
                    if deadline is not None and time.time() > deadline:
                        _kill_tree(child.pid)
                        child.wait()
                        record.update(status="over budget",
                                      error=f"stopped after its budget of {timeout_s / 60:.0f} min (--timeout)")
                        break
        if stopped:
            shutil.rmtree(staging, ignore_errors=True)
            return {"notebook": name, "profile": profile, "status": "interrupted",
                    "runtime_s": round(time.time() - started, 2),
                    "error": f"stopped (Ctrl-C or SIGTERM); the previous outputs in {final} are kept"}
        if record["status"] == "ok":
            try:
                record.update(json.loads(result_file.read_text()))
            except (OSError, ValueError):
                record.update(status="failed", error=f"the papermill process exited with code {child.returncode} "
                                                     f"without a result; see {final / 'kernel.log'}")
                err = disk_errno(_tail_of(staging / "kernel.log")) or _disk_full(staging)
                if err:
                    return _disk_failure(name, final, staging, err, "while the notebook ran (see its kernel.log)",
                                         round(time.time() - started, 2))
        if record["status"] != "ok" and (err := disk_errno(record.get("error"))):
            return _disk_failure(name, final, staging, err, f"while the notebook ran ({record['error'][:300]})",
                                 round(time.time() - started, 2))
        if record["status"] == "ok" and not _outputs_present(staging, name):
            record.update(status="failed", error="the notebook ran but did not call NotebookRun.save()")
        elif record["status"] == "ok" and not overrides and \
                not json.loads((staging / "provenance.json").read_text()).get("canonical"):
            record.update(status="failed", error="the notebook set overrides of its own: a canonical run uses "
                                                 "params/<name>.yaml as it is (change parameters with --set)")
    finally:
        result_file.unlink(missing_ok=True)
    record["runtime_s"] = round(time.time() - started, 2)
    # a run that found its results cached is fast for that reason: the record says so (record_budget writes it)
    record["result_cache"] = {"entries_at_start": cached_at_start,
                              "written": cache_entries(entry, since=started) if entry else 0}
    if record["status"] == "ok":
        prov = json.loads((staging / "provenance.json").read_text())
        record["data_state"] = states_of_run(prov.get("datasets", []))
        record["claim_seed_rules"] = _seed_rules_of(staging / "measurements.json")
        record["cpu"] = cpu_record()
        try:  # what the executed notebook's printed claims table was judged under (the report notes a change)
            ids = [m["claim"] for m in json.loads((staging / "measurements.json").read_text())]
            record["verdict_rules"] = judging_digest(ids)
        except (OSError, ValueError, KeyError, TypeError):
            record["verdict_rules"] = None
    else:  # a failed run's partial measurements must never reach the report
        (staging / "measurements.json").unlink(missing_ok=True)
    if (staging / "kernel.log").exists() and (staging / "kernel.log").stat().st_size == 0:
        (staging / "kernel.log").unlink()
    (staging / OWNER_FILE).unlink(missing_ok=True)
    # what the run wrote, byte for byte: the report, the snapshot and the runner check it (a file changed or
    # truncated afterwards shows as "damaged", and the runner runs the notebook again)
    record["outputs"] = output_checksums(staging)
    _write_whole(staging / "run.json", json.dumps(record, indent=2) + "\n")
    if _stop_requested(stop_file):  # stopped while the record was written: the previous outputs stay
        shutil.rmtree(staging, ignore_errors=True)
        return {**record, "status": "interrupted", "error": f"stopped; the previous outputs in {final} are kept"}
    swap_into_place(staging, final)
    return record


def _write_whole(path: Path, text: str) -> None:
    """Write ``text`` and flush it to the disk, so a full disk fails here (named) rather than in a later reader."""
    with open(path, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())


def _disk_full(folder: Path) -> int | None:
    """ENOSPC when the filesystem of ``folder`` has (almost) no space left: a papermill process that ended without a
    result on a full disk could not even write its log."""
    try:
        st = os.statvfs(folder)
    except OSError:
        return None
    return errno.ENOSPC if st.f_bavail * st.f_frsize < (1 << 20) else None


def _tail_of(path: Path, n: int = 4096) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - n))
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


_SETTINGS = threading.Condition()


_SETTINGS_IN_USE = {"count": 0, "env": None, "saved": None}


@contextmanager
def _settings(env: dict):
    """The runner's settings (``env``: ``DPMF_*``, thread limits; ``None`` removes a variable) in this process's
    environment while a notebook runs here, as they were before once the last notebook using them ends.

    :func:`execute` reads them itself (``DPMF_FIGURES_DIR`` decides where the run lands) and its child inherits them.
    A dask worker is long-lived and runs a task per thread: notebooks of one run share the same settings and run side
    by side; a notebook of another run with other settings (another figures directory, ``DPMF_CACHE=refresh``) waits
    until they are done, and no setting outlives the runs that made it (the previous caller's
    ``DPMF_CACHE=refresh`` stays with that caller)."""
    key = sorted(env.items(), key=lambda kv: kv[0])
    with _SETTINGS:
        _SETTINGS.wait_for(lambda: _SETTINGS_IN_USE["count"] == 0 or _SETTINGS_IN_USE["env"] == key)
        if _SETTINGS_IN_USE["count"] == 0:
            _SETTINGS_IN_USE.update(env=key, saved={k: os.environ.get(k) for k in env})
            for k, v in env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        _SETTINGS_IN_USE["count"] += 1
    try:
        yield
    finally:
        with _SETTINGS:
            _SETTINGS_IN_USE["count"] -= 1
            if _SETTINGS_IN_USE["count"] == 0:
                for k, v in _SETTINGS_IN_USE["saved"].items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                _SETTINGS_IN_USE.update(env=None, saved=None)
            _SETTINGS.notify_all()


@contextmanager
def _off_worker_thread():
    """On a dask worker, give the task's thread back while the notebook runs in its own process: the notebook's
    sweeps are tasks on the same cluster, and with every thread held by a waiting notebook they would never start
    (the runner keeps at most ``--jobs`` notebooks in flight, so this does not start more notebooks). Elsewhere a
    no-op."""
    try:
        from distributed import get_worker, rejoin, secede

        get_worker()
    except (ImportError, ValueError):
        yield
        return
    secede()
    try:
        yield
    finally:
        rejoin()


def cpu_record() -> dict:
    """The CPU a run's numbers came from: its model and the SIMD levels numpy dispatches to. The Netflix stand-in
    at scale 0.01, seed 0 had another checksum (a digest of its fitted parameters) on the AMD EPYC, AVX2-only host of
    2026-11-27 than in the snapshot rows of 2026-11-23, with the same code and packages; on this host it is the same
    on 1, 2 or 3 numba threads, under other OpenBLAS core types and with numpy held to X86_V2. The likely cause is
    numpy's float64 exp/log in the fit, whose AVX-512 loops differ by an ulp from the scalar ones; not proven without
    the other host. So a table replays byte for byte only where this record matches."""
    model = None
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

        simd = [x for x in __cpu_dispatch__ if __cpu_features__.get(x)]
    except ImportError:  # a numpy without these internals: the model alone
        simd = None
    import numpy

    return {"model": model, "numpy": numpy.__version__, "numpy_simd": simd}
