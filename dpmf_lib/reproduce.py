"""Run the registered notebooks with papermill, skip what is current, and build the report.

    python -m dpmf_lib.reproduce [--profile smoke|ci|paper] [--only PATTERN] [--jobs N] [--set [NAME.]KEY=VALUE ...]
                                 [--backend loky|dask --scheduler ADDRESS] [--force] [--list]

Only this runner writes the canonical ``figures/<name>/``. It executes a notebook into a staging directory
(``figures/.staging-<name>-<pid>``), passing its path to the kernel in ``$DPMF_RUN_DIR``; when the run ends the
staging directory is renamed into place, so ``figures/<name>/`` always holds one whole run — never a half-written one,
never a mix of two. A failed run replaces the old outputs too (with its executed notebook and ``run.json`` saying
``failed``): the report must not keep showing results the current code no longer produces.

A notebook is current (skipped) when its ``run.json`` says ``ok`` with the same run hash — profile, resolved params,
the notebook, its params file, and the code of its experiment module and of everything that imports from
``dpmf_lib``/``data_fetch`` (:mod:`dpmf_lib.dependencies`) — and every dataset it read is still in the state it read
(real with the same checksum, or still absent for a stand-in). Each executed copy is kept as
``figures/<name>/<name>.ipynb``; a failure names the notebook, the failing cell and the error, and the run exits
non-zero after building the report.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from .dependencies import code_digest, current_claims, data_states, states_of_run
from .errors import WorkbookError
from .outputs import RUN_DIR_VAR, RUN_NOTEBOOK_VAR, parameter_names, scratch_dir
from .params import PROFILES, load_params, read_yaml
from .paths import figures_dir, notebooks_dir
from .registry import Entry, load_registry, select, unregistered_notebooks

# joblib's loky workers cap these to cpu_count // n_jobs; a notebook's kernel must see the caller's values instead
# (the work happens in the kernel, and e.g. liu_fig3 measures scaling over threads).
THREAD_LIMIT_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                     "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")


def experiment_module(entry: Entry) -> str:
    """The module a notebook's ``import ... as experiment`` names (``dpmf_lib.experiments.<name>`` by convention)."""
    import re

    text = entry.notebook.read_text(encoding="utf-8")
    m = re.search(r"import (dpmf_lib\.[\w.]+) as experiment", text)
    return m.group(1) if m else f"dpmf_lib.experiments.{entry.name}"


def run_modules(entry: Entry) -> tuple[str, ...]:
    """The local modules a run of ``entry`` executes: its experiment module, :mod:`dpmf_lib.outputs` (the notebook
    frame) and whatever else the notebook's code cells import."""
    from .dependencies import notebook_imports

    return tuple(sorted({experiment_module(entry), "dpmf_lib.outputs", *notebook_imports(entry.notebook)}))


def run_hash_parts(entry: Entry, profile: str) -> dict[str, str]:
    """The parts :func:`run_hash` covers, in its order: ``params`` (the profile and the resolved parameters),
    ``code`` (:func:`dpmf_lib.dependencies.code_digest` of :func:`run_modules`), ``claims`` (the seed rules of the
    notebook's own claims) and ``notebook`` (its code cells without comments)."""
    from .dependencies import notebook_code

    params = load_params(entry.name, profile)
    return {"params": profile + json.dumps(params, sort_keys=True, default=str),
            "code": code_digest(*run_modules(entry)),
            "claims": repr([seed_rule(c) for c in current_claims() if c.notebook == entry.name]),
            "notebook": json.dumps(notebook_code(entry.notebook), sort_keys=True)}


def run_hash(entry: Entry, profile: str) -> str:
    """Hash of what a run of ``entry`` at ``profile`` does, data aside (see the module docstring): the profile, the
    resolved parameters, the notebook's code cells without comments, and the code of every module the run executes as
    :func:`dpmf_lib.dependencies.code_digest` sees it (ASTs without docstrings: editing prose stales nothing). The
    notebook's own rows of claims.yaml count with the fields that decide how many seeds
    :meth:`NotebookRun.replicate` runs (id, dataset, min_profile, deterministic, min_seeds, whether shown without a
    verdict); the fields that only judge (reference, tolerance, margin, guards' bounds, the quote) do not, as the
    report judges the saved measurements anew (:mod:`dpmf_lib.verdicts`). The params file counts only through the
    resolved parameters: its comments, ``# measured`` lines and other profiles' blocks change nothing here."""
    parts = run_hash_parts(entry, profile)
    h = hashlib.sha256(HASH_SCHEME.encode())
    for key in ("params", "code", "claims", "notebook"):
        h.update(parts[key].encode())
    return h.hexdigest()


#: names the way :func:`run_hash` is formed; ``python -m dpmf_lib.snapshot --rehash`` moves rows hashed the old way
HASH_SCHEME = "behaviour-v1"


def seed_rule(claim) -> tuple:
    """The fields of a claim that decide how many seeds a run measures it at (:meth:`NotebookRun.seeds_needed`)."""
    return (claim.id, claim.dataset, claim.min_profile, claim.deterministic, claim.min_seeds,
            bool(claim.shown_not_judged))


MEASURED_PREFIX = "# measured "


def cache_entries(entry: Entry, since: float | None = None) -> int:
    """How many results the result cache (:func:`dpmf_lib.paths.cache_dir`) holds for the code ``entry`` runs — the
    cached functions of the modules in its experiment's closure — or, with ``since`` (a ``time.time()``), how many
    of them were written from then on. A notebook that reads another's runs (Fig 4.6 those of 4.1) counts them too,
    and with ``--jobs 2`` a neighbour's writes to shared functions count: a hint for the reader of a measured time,
    not an accounting. 0 for a notebook whose code caches nothing."""
    from .dependencies import REPO_ROOT, module_closure
    from .paths import cache_dir

    root = cache_dir() / "joblib"  # joblib.Memory: joblib/<module path>/<function>/<call hash>/output.pkl
    n = 0
    for path in module_closure(experiment_module(entry)):
        folder = root / path.relative_to(REPO_ROOT).with_suffix("")
        if folder.is_dir():
            n += sum(1 for f in folder.rglob("output.pkl") if since is None or f.stat().st_mtime >= since)
    return n


def record_budget(entry: Entry, record: dict, cores: int | None = None) -> None:
    """Write (or replace) ``# measured <profile>: <time>, peak <memory> …`` at the top of the notebook's params file,
    after its leading comment block. When the result cache already held entries at the start, the line says how
    many (and how many the run wrote): such a time can be far below a cold run's. A cold time noted by hand on the
    line it replaces (``cold ≈ … min …``), and any note written after the line's closing parenthesis, are carried
    over then (once, beside a note carried before), so they are not lost to a warm re-run."""
    import datetime
    import re

    cores = cores or os.cpu_count()
    minutes = record["runtime_s"] / 60
    took = f"> {minutes:.0f} min (stopped at its budget)" if record["status"] == "over budget" else f"{minutes:.1f} min"
    peak = f", peak {record['peak_rss_mib']:.0f} MiB" if record.get("peak_rss_mib") else ""
    lines = entry.params_file.read_text(encoding="utf-8").splitlines(keepends=True)
    tag = f"{MEASURED_PREFIX}{record['profile']}:"
    cache = record.get("result_cache") or {}
    warm = ""
    if cache.get("entries_at_start"):
        warm = (f", result cache held {cache['entries_at_start']} entries at the start and {cache.get('written', 0)} "
                "were written by the run")
        old = next((x for x in lines if x.startswith(tag)), "")
        # what a person added about the cold time: inside the line ("cold ≈ …") or after it ("…); result cache warm…")
        kept = re.search(r"earlier note: (.*?), python -m dpmf_lib\.reproduce", old)  # carried before: keep it
        head, _, tail = old.rstrip("\n").partition(f"--only {entry.name})")
        cold = re.search(r"cold ≈ [^;)]*", head)  # a "cold ≈" in the tail is carried with the tail, once
        tail = tail.strip(" ;")
        # a note carried before stays, and what a person added to that line since is kept beside it (not dropped)
        carried = kept.group(1) if kept else ""
        found = [x for x in ((cold.group(0).strip() if cold else ""), tail) if x and x not in carried]
        notes = [x for x in (carried, *found) if x]
        if notes:
            warm += "; earlier note: " + "; ".join(notes)
    # the 1-minute load average says whether the machine was shared while this ran (then the time is an upper bound)
    line = (f"{MEASURED_PREFIX}{record['profile']}: {took}{peak} ({record['status']}; {cores} cores, load "
            f"{os.getloadavg()[0]:.1f} at the end, {datetime.date.today().isoformat()}{warm}, "
            f"python -m dpmf_lib.reproduce --profile {record['profile']} --only {entry.name})\n")
    lines = [x for x in lines if not x.startswith(tag)]
    at = 0
    while at < len(lines) and lines[at].startswith("#"):
        at += 1
    lines.insert(at, line)
    entry.params_file.write_text("".join(lines), encoding="utf-8")


def _outputs_present(out: Path, name: str) -> bool:
    """A run's table and provenance are there (a snapshot row may keep its table gzipped: ``<name>.csv.gz``)."""
    table = (out / f"{name}.csv").exists() or (out / f"{name}.csv.gz").exists()
    return (out / "provenance.json").exists() and table


def run_record(name: str) -> dict:
    try:
        return json.loads((figures_dir() / name / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def staleness(entry: Entry, digest: str, out_dir: Path | None = None) -> str | None:
    """Why the canonical outputs of ``entry`` (or those in ``out_dir``, e.g. a snapshot row) are not current for run
    hash ``digest`` (None when they are)."""
    out = out_dir or figures_dir() / entry.name
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        run = {}
    if not run:
        return "not run"
    if run.get("status") != "ok":
        return f"last run {run.get('status', 'unknown')}"
    if run.get("hash") != digest:
        return "code, params or notebook changed since the last run"
    changed_rules = _changed_seed_rules(run.get("claim_seed_rules"))
    if changed_rules:
        return "the seed rule of a claim it measures changed: " + ", ".join(changed_rules)
    if not _outputs_present(out, entry.name):
        return "outputs missing"
    then = run.get("data_state") or {}
    now = data_states([{"dataset": d} for d in then])
    changed = sorted(d for d in then if now.get(d) != then[d])
    if changed:
        return "data changed since the last run: " + ", ".join(f"{d} ({then[d]} → {now.get(d)})" for d in changed)
    return None


def _seed_rules_of(measurements_file: Path) -> dict:
    """The seed rule of every claim a run measured, its own or another notebook's (``balu_table1`` measures claims of
    ``balu_table3_1``): the run hash covers only the notebook's own claims, :func:`staleness` checks these."""
    try:
        ids = {m["claim"] for m in json.loads(measurements_file.read_text())}
    except (OSError, ValueError):
        return {}
    return {c.id: list(seed_rule(c)) for c in current_claims() if c.id in ids}


def _changed_seed_rules(recorded: dict | None) -> list[str]:
    if not recorded:
        return []
    now = {c.id: list(seed_rule(c)) for c in current_claims()}
    return sorted(cid + ("" if cid in now else " (no longer in claims.yaml)") for cid, rule in recorded.items()
                  if now.get(cid) != rule)


def judging_digest(claim_ids) -> str:
    """A digest of how the claims ``claim_ids`` are judged now: the bytes of :mod:`dpmf_lib.verdicts` (read as a file,
    never imported: a broken rule must not fail the runner) and the judging fields of those claims. Recorded in
    ``run.json`` — the run record, not a result — so the report can say when an executed notebook's printed claims
    table was judged under other rules than the report's."""
    from .paths import REPO_ROOT

    h = hashlib.sha256((REPO_ROOT / "dpmf_lib" / "verdicts.py").read_bytes())
    wanted = set(claim_ids)
    h.update(repr(sorted((repr(c) for c in current_claims() if c.id in wanted))).encode())
    return h.hexdigest()[:16]


def snapshot_dir_text() -> str:
    from .paths import REPO_ROOT
    from .snapshot import snapshot_dir

    d = snapshot_dir()
    return str(d.relative_to(REPO_ROOT)) if d.is_relative_to(REPO_ROOT) else str(d)


def up_to_date(entry: Entry, digest: str) -> bool:
    return staleness(entry, digest) is None


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


def _owner_alive(path: Path) -> bool:
    """Staging/old directories end in the pid of the process that made them; a live one may still be using it."""
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


def _kernel_manager_class():
    """On POSIX, kernels talk over IPC sockets instead of TCP on localhost: nothing listens on a port, and the kernel no
    longer prints its "running over TCP without encryption" warning (once per notebook, 45 times a `make figures`)."""
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


def _child_main() -> None:
    """The papermill side of :func:`execute`, in a process of its own so that a budget can stop it (with its
    kernel) and its kernel's peak memory can be read from ``RUSAGE_CHILDREN`` once the kernel is reaped."""
    import resource

    import papermill as pm

    job = json.loads(sys.argv[1])
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


def execute(name: str, profile: str, digest: str, env: dict | None = None, timeout_s: float | None = None,
            overrides: dict | None = None) -> dict:
    """Execute one notebook with papermill into a staging directory and rename it to ``figures/<name>/``; returns
    the run record (also written there as ``run.json``: status, error, ``runtime_s``, ``peak_rss_mib`` of the
    kernel, the data state).

    ``env``: variables to set for the kernel; a value of ``None`` removes the variable. ``timeout_s``: the run's
    budget; a notebook still running then is stopped with its kernel and recorded as ``over budget``. The kernel's
    own console output (warnings, tracebacks it prints) goes to ``figures/<name>/kernel.log``, not the runner's.
    ``overrides`` (``--set``): parameters injected as the notebook's ``overrides``; such a run is not canonical and
    lands in ``figures/_runs/<name>-<profile>-<hash>/`` (the directory a hand run with these values would use).
    """
    with _settings(env or {}):
        return _execute(name, profile, digest, timeout_s, overrides)


def _execute(name: str, profile: str, digest: str, timeout_s: float | None, overrides: dict | None) -> dict:
    import subprocess

    final = scratch_dir(name, load_params(name, profile, overrides)) if overrides else figures_dir() / name
    staging = final.parent / f".staging-{name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    # the staging directory is this notebook's alone: the child's environment, never this process's (two notebooks
    # run side by side in one dask worker's threads, or in the runner's)
    child_env = {**os.environ, RUN_DIR_VAR: str(staging), RUN_NOTEBOOK_VAR: name}
    entry = next((e for e in load_registry()[1] if e.name == name), None)
    cached_at_start = cache_entries(entry) if entry else 0
    started = time.time()
    record = {"notebook": name, "profile": profile, "hash": digest, "status": "ok", "error": None,
              **({"overrides": overrides, "out_dir": str(final)} if overrides else {})}
    result_file = staging / ".result.json"
    job = {"notebook": str(notebooks_dir() / f"{name}.ipynb"), "output": str(staging / f"{name}.ipynb"),
           "cwd": str(notebooks_dir()), "profile": profile, "result": str(result_file), "overrides": overrides or {}}
    try:
        with open(staging / "kernel.log", "wb") as log:
            child = subprocess.Popen([sys.executable, "-c", "from dpmf_lib.reproduce import _child_main; "
                                      "_child_main()", json.dumps(job)], stdout=log, stderr=subprocess.STDOUT,
                                     env=child_env)
            with _off_worker_thread():
                try:
                    child.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    _kill_tree(child.pid)
                    child.wait()
                    record.update(status="over budget",
                                  error=f"stopped after its budget of {timeout_s / 60:.0f} min (--timeout)")
        if record["status"] == "ok":
            try:
                record.update(json.loads(result_file.read_text()))
            except (OSError, ValueError):
                record.update(status="failed", error=f"the papermill process exited with code {child.returncode} "
                                                     f"without a result; see {final / 'kernel.log'}")
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
    (staging / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    swap_into_place(staging, final)
    return record


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


def parse_sets(items: list[str], names: list[str], known: list[str] | None = None) -> dict[str, dict]:
    """``--set KEY=VALUE`` (every selected notebook) and ``--set NAME.KEY=VALUE`` (notebook NAME only) as overrides
    per notebook. Values are YAML (``seed=1``, ``datasets=[ml-100k]``, ``n_attacked=null``); a KEY must be a
    parameter of every notebook it applies to, NAME one of the selected notebooks (``known``: all registered names,
    for a better message). Raises :class:`~dpmf_lib.errors.ParameterError` naming the key and the fix."""
    import difflib

    import yaml

    from .errors import ParameterError

    sets: dict[str, dict] = {n: {} for n in names}
    for item in items:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ParameterError(f"--set {item!r}: expected KEY=VALUE or NOTEBOOK.KEY=VALUE (VALUE in YAML)")
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError as exc:
            raise ParameterError(f"--set {key}: {raw!r} is not valid YAML ({exc})") from None
        target, dot, param = key.rpartition(".")
        if dot:
            if target not in names:
                where = "is not among the notebooks selected (see --only)" if target in (known or []) \
                    else "is not a notebook (see --list)"
                raise ParameterError(f"--set {key}: '{target}' {where}")
            targets = [target]
        else:
            targets, param = names, key
        for n in targets:
            valid = parameter_names(n)
            if param not in valid:
                lacking = [t for t in targets if param not in parameter_names(t)]
                close = difflib.get_close_matches(param, valid, n=1)
                raise ParameterError(
                    f"--set {key}: unknown parameter '{param}' for {', '.join(lacking[:6])}"
                    + (" …" if len(lacking) > 6 else "") + (f" (did you mean '{close[0]}'?)" if close else "")
                    + f"; the parameters are in params/<name>.yaml (`defaults:`)"
                    + ("; use --set NAME.KEY=VALUE or --only to reach only the notebooks that have it"
                       if len(targets) > 1 else ""))
            sets[n][param] = value
    return {n: o for n, o in sets.items() if o}


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
    client = cluster = pool = None
    if backend == "dask":
        from dask.distributed import Client, LocalCluster
        from dask.distributed import wait as wait_dask

        if not scheduler:
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, dashboard_address=None)
            env = {**env, "DPMF_DASK_SCHEDULER": cluster.scheduler_address}
        client = Client(scheduler or cluster)

        def submit(n, h):
            return client.submit(execute, n, profile, h, env, timeout_s, sets.get(n), pure=False)

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
                ended.add(running.pop(fut))
                bar.update()
                yield fut.result()
    finally:
        for fut in running:
            fut.cancel()
        if pool is not None:
            pool.shutdown(wait=True)
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        bar.close()


def _profile_name(text: str) -> str:
    if text in PROFILES or (text.startswith("paper-") and len(text) > len("paper-")):
        return text
    raise argparse.ArgumentTypeError(f"unknown profile {text!r}: choose {', '.join(PROFILES)} or paper-<name>")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.reproduce", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", type=_profile_name, default=os.environ.get("DPMF_PROFILE", "ci"),
                    help=f"{' | '.join(PROFILES)}, or a named paper-grade profile paper-<name> (e.g. paper-full: the "
                         f"paper's exact grid where `paper` had to be cut to its budget; only notebooks that define it)")
    ap.add_argument("--only", default=None, help="shell pattern(s) of notebook names, comma-separated: 'balu_fig3_*'")
    ap.add_argument("--jobs", type=int, default=1, help="notebooks executed at once")
    ap.add_argument("--backend", choices=("loky", "dask"), default="loky")
    ap.add_argument("--scheduler", default=None, help="dask.distributed scheduler address (with --backend dask)")
    ap.add_argument("--force", action="store_true", help="run even when outputs are up to date, and recompute what "
                    "the result cache (dpmf_lib.cache) holds for them ($DPMF_CACHE=refresh)")
    ap.add_argument("--list", action="store_true", help="list the registry and exit")
    ap.add_argument("--timeout", type=float, default=None, metavar="MINUTES",
                    help="budget per notebook: a run still going after it is stopped and recorded as 'over budget'")
    ap.add_argument("--record-budget", action="store_true",
                    help="write each run's measured time and peak memory into its params file header")
    ap.add_argument("--snapshot", action="store_true",
                    help="(profile paper) copy each successful run into results/paper/<name>/ as it finishes")
    ap.add_argument("--set", action="append", default=[], metavar="[NAME.]KEY=VALUE", dest="sets",
                    help="override a parameter (VALUE in YAML) of every selected notebook, or of NAME only; "
                         "repeatable. Such runs always execute, are not canonical and write to figures/_runs/")
    args = ap.parse_args(argv)

    try:
        _, entries = load_registry()
    except WorkbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    stray = unregistered_notebooks(entries)
    if stray:
        print("error: notebooks without a row in params/registry.yaml: " + ", ".join(p.name for p in stray),
              file=sys.stderr)
        return 2
    if args.list:
        for e in entries:
            print(f"{e.name:16s} {e.paper:5s} {e.label:12s} {'implemented' if e.implemented else 'not yet':12s} "
                  f"{e.caption}")
        return 0
    chosen = select(entries, args.only)
    if args.only and not chosen:
        hint = ("; separate several names or patterns with commas, not spaces: --only "
                f"{','.join(args.only.split())!r}" if len(args.only.split()) > 1 else "")
        print(f"error: no implemented notebook matches --only {args.only!r} (see --list){hint}", file=sys.stderr)
        return 2
    if args.profile not in PROFILES:
        without = [e.name for e in chosen if args.profile not in (read_yaml(e.params_file).get("profiles") or {})]
        chosen = [e for e in chosen if e.name not in without]
        if without:
            print(f"no {args.profile} profile (their `paper` is the paper's setting), skipped: {', '.join(without)}")
        if not chosen:
            print(f"error: no selected notebook defines the profile {args.profile!r}", file=sys.stderr)
            return 2
    for line in recover_interrupted():
        print(line)
    try:
        sets = parse_sets(args.sets, [e.name for e in chosen], [e.name for e in entries])
    except WorkbookError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.sets and (args.snapshot or args.record_budget):
        print("error: --set runs are not the profile's runs: no --snapshot or --record-budget with them",
              file=sys.stderr)
        return 2
    if args.snapshot and args.profile != "paper":
        print("error: --snapshot keeps paper-profile results only (use --profile paper)", file=sys.stderr)
        return 2
    todo, skipped, in_snapshot = [], [], []
    for e in chosen:
        try:
            if sets.get(e.name):  # a bad value (a spec naming a missing file, ε <= 0 …) stops here, not in a worker
                load_params(e.name, args.profile, sets[e.name])
            digest = run_hash(e, args.profile)
        except WorkbookError as exc:
            print(f"error: {e.name}: {exc}", file=sys.stderr)
            return 2
        current = not args.force and not sets.get(e.name) and up_to_date(e, digest)
        if not current and args.snapshot and not args.force and not sets.get(e.name):
            # a fresh clone has an empty figures/: a committed snapshot row that is current for this hash (code,
            # params, notebook, seed rules, data) is that same run, so a snapshot run does not spend its hours again
            from .snapshot import row_state

            if row_state(e, digest)[0] == "current":
                in_snapshot.append(e.name)
                continue
        (skipped if current else todo).append((e.name, digest))
    if skipped:
        print(f"up to date, skipped: {', '.join(n for n, _ in skipped)}")
    if args.snapshot and skipped:
        # a paper run current in figures/ (made without --snapshot) whose snapshot row is missing or stale: keep it
        from .snapshot import row_state, take

        by = {e.name: e for e in chosen}
        for n, digest in skipped:
            if row_state(by[n], digest)[0] != "current":
                print(f"snapshot: {take(n)} (the current run in figures/)")
    reads = cache_reads(chosen)
    if in_snapshot:
        print(f"current in the snapshot ({snapshot_dir_text()}), skipped: {', '.join(in_snapshot)} "
              f"(--force runs them again)")
        cold = sorted({n for n, _ in todo for p in reads.get(n, ()) if p in in_snapshot})
        if cold:  # correct either way (the readers compute what the cache lacks), but slower than reading
            print(f"note: {', '.join(cold)} read the result cache of a notebook skipped here; on a fresh clone that "
                  f"cache is empty and they compute its runs themselves")
    todo = cache_readers_last(todo, chosen)
    env = forwarded_env({"DPMF_SWEEP_BACKEND": args.backend,
                         **({"DPMF_DASK_SCHEDULER": args.scheduler} if args.scheduler else {}),
                         # --force reaches the result cache too (dpmf_lib.cache): recompute, overwrite the entries
                         **({"DPMF_CACHE": "refresh"} if args.force else {})})
    by_name = {e.name: e for e in chosen}
    failures = []
    timeout_s = args.timeout * 60 if args.timeout else None
    from tqdm.auto import tqdm  # status lines through tqdm.write: printed above the progress bar, not glued to it

    for rec in _run_all(todo, args.profile, max(1, args.jobs), args.backend, args.scheduler, env, timeout_s, sets,
                        reads):
        if args.record_budget:
            record_budget(by_name[rec["notebook"]], rec)
        if args.snapshot and rec["status"] == "ok":
            from .snapshot import take

            tqdm.write(f"snapshot: {take(rec['notebook'])}")
        line = (f"{rec['notebook']}: {rec['status']} in {rec['runtime_s']} s"
                + (f", peak {rec['peak_rss_mib']:.0f} MiB" if rec.get("peak_rss_mib") else ""))
        if rec.get("overrides"):
            line += f" (with --set {rec['overrides']}: not canonical, in {rec['out_dir']})"
        if rec["status"] != "ok":
            failures.append(rec)
            out = Path(rec.get("out_dir") or figures_dir() / rec["notebook"])
            line += f" — FAILED at {rec['error']} (executed copy: {out / (rec['notebook'] + '.ipynb')})"
        tqdm.write(line)
    from .report import write_report

    md, html = write_report()
    print(f"report: {md} and {html}")
    if failures:
        print(f"{len(failures)} notebook(s) failed: {', '.join(r['notebook'] for r in failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
