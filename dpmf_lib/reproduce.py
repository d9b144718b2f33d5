"""Run the registered notebooks with papermill, skip what is up to date, and build the report.

    python -m dpmf_lib.reproduce [--profile smoke|ci|paper] [--only PATTERN] [--jobs N]
                                 [--backend loky|dask --scheduler ADDRESS] [--force] [--list]

A notebook is skipped when the hash of (profile, resolved params, the notebook, its params file, the library's code,
the fetched datasets' manifests) equals the one its last successful run recorded in ``figures/<name>/run.json``.
Each executed copy is kept as ``figures/<name>/<name>.ipynb``; a failure names the notebook, the failing cell and the
error, and the run exits non-zero after building the report.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from .errors import WorkbookError
from .params import PROFILES, load_params
from .paths import REPO_ROOT, data_dir, figures_dir, notebooks_dir
from .registry import Entry, load_registry, select, unregistered_notebooks

CODE_DIRS = ("dpmf_lib", "data_fetch")
# joblib's loky workers cap these to cpu_count // n_jobs; a notebook's kernel must see the caller's values instead
# (the work happens in the kernel, and e.g. liu_fig3 measures scaling over threads).
THREAD_LIMIT_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
                     "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")


def code_digest() -> str:
    h = hashlib.sha256()
    for d in CODE_DIRS:
        for p in sorted((REPO_ROOT / d).rglob("*.py")):
            h.update(str(p.relative_to(REPO_ROOT)).encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def data_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(data_dir().glob("*/.manifest.json")):
        h.update(p.read_bytes())
    return h.hexdigest()


def run_hash(entry: Entry, profile: str, code: str, data: str) -> str:
    params = load_params(entry.name, profile)
    h = hashlib.sha256()
    for part in (profile, json.dumps(params, sort_keys=True, default=str), code, data):
        h.update(part.encode())
    h.update(entry.notebook.read_bytes())
    h.update(entry.params_file.read_bytes())
    return h.hexdigest()


def _outputs_present(out: Path, name: str) -> bool:
    return (out / "provenance.json").exists() and (out / f"{name}.csv").exists()


def up_to_date(entry: Entry, digest: str) -> bool:
    out = figures_dir() / entry.name
    try:
        run = json.loads((out / "run.json").read_text())
    except (OSError, ValueError):
        return False
    return run.get("hash") == digest and run.get("status") == "ok" and _outputs_present(out, entry.name)


def execute(name: str, profile: str, digest: str, env: dict | None = None) -> dict:
    """Execute one notebook with papermill; returns the run record (also written to ``figures/<name>/run.json``).

    ``env``: variables to set for the kernel; a value of ``None`` removes the variable.
    """
    import papermill as pm

    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    out = figures_dir() / name
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    record = {"notebook": name, "profile": profile, "hash": digest, "status": "ok", "error": None}
    try:
        pm.execute_notebook(str(notebooks_dir() / f"{name}.ipynb"), str(out / f"{name}.ipynb"),
                            parameters={"profile": profile}, cwd=str(notebooks_dir()), kernel_name="python3",
                            progress_bar=False, log_output=False, request_save_on_cell_execute=False)
        if not _outputs_present(out, name):
            record.update(status="failed", error="the notebook ran but did not call NotebookRun.save()")
    except pm.PapermillExecutionError as exc:
        record.update(status="failed", error=f"cell {exc.exec_count} (index {exc.cell_index}): {exc.ename}: "
                                             f"{str(exc.evalue)[:500]}")
    except Exception as exc:  # kernel died, notebook unreadable, ...: report, never hide
        record.update(status="failed", error=f"{type(exc).__name__}: {str(exc)[:500]}")
    record["runtime_s"] = round(time.time() - started, 2)
    (out / "run.json").write_text(json.dumps(record, indent=2) + "\n")
    return record


def _run_all(todo: list[tuple[str, str]], profile: str, jobs: int, backend: str, scheduler: str | None, env: dict):
    from tqdm.auto import tqdm

    bar = tqdm(total=len(todo), desc=f"notebooks ({profile})", unit="nb", disable=not todo)
    if backend == "dask":
        from dask.distributed import Client, LocalCluster, as_completed

        cluster = None if scheduler else LocalCluster(n_workers=jobs, threads_per_worker=1, dashboard_address=None)
        client = Client(scheduler or cluster)
        try:
            futures = [client.submit(execute, n, profile, h, env, pure=False) for n, h in todo]
            for fut in as_completed(futures):
                bar.update()
                yield fut.result()
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
    else:
        from joblib import Parallel, delayed

        results = Parallel(n_jobs=jobs, backend="loky", return_as="generator_unordered")(
            delayed(execute)(n, profile, h, env) for n, h in todo)
        for rec in results:
            bar.update()
            yield rec
    bar.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.reproduce", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=PROFILES, default=os.environ.get("DPMF_PROFILE", "ci"))
    ap.add_argument("--only", default=None, help="shell pattern(s) of notebook names, comma-separated: 'balu_fig3_*'")
    ap.add_argument("--jobs", type=int, default=1, help="notebooks executed at once")
    ap.add_argument("--backend", choices=("loky", "dask"), default="loky")
    ap.add_argument("--scheduler", default=None, help="dask.distributed scheduler address (with --backend dask)")
    ap.add_argument("--force", action="store_true", help="run even when outputs are up to date")
    ap.add_argument("--list", action="store_true", help="list the registry and exit")
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
        print(f"error: no implemented notebook matches --only {args.only!r} (see --list)", file=sys.stderr)
        return 2
    code, data = code_digest(), data_digest()
    todo, skipped = [], []
    for e in chosen:
        try:
            digest = run_hash(e, args.profile, code, data)
        except WorkbookError as exc:
            print(f"error: {e.name}: {exc}", file=sys.stderr)
            return 2
        (skipped if (not args.force and up_to_date(e, digest)) else todo).append((e.name, digest))
    if skipped:
        print(f"up to date, skipped: {', '.join(n for n, _ in skipped)}")
    env = {"DPMF_SWEEP_BACKEND": args.backend, **{v: os.environ.get(v) for v in THREAD_LIMIT_VARS}}
    if args.scheduler:
        env["DPMF_DASK_SCHEDULER"] = args.scheduler
    failures = []
    for rec in _run_all(todo, args.profile, max(1, args.jobs), args.backend, args.scheduler, env):
        line = f"{rec['notebook']}: {rec['status']} in {rec['runtime_s']} s"
        if rec["status"] != "ok":
            failures.append(rec)
            line += (f" — FAILED at {rec['error']} (executed copy: "
                     f"{figures_dir() / rec['notebook'] / (rec['notebook'] + '.ipynb')})")
        print(line, flush=True)
    from .report import write_report

    md, html = write_report()
    print(f"report: {md} and {html}")
    if failures:
        print(f"{len(failures)} notebook(s) failed: {', '.join(r['notebook'] for r in failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
