"""Run the registered notebooks with papermill, skip what is current, and build the report.

    python -m dpmf_lib.reproduce [--profile smoke|ci|paper] [--only PATTERN] [--jobs N] [--set [NAME.]KEY=VALUE ...]
                                 [--backend loky|dask --scheduler ADDRESS] [--force] [--list] [--runs]

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

Before anything starts, the runner prints why it runs each notebook it runs (:func:`reason_to_run`): new, last run
failed, profile or params changed (which parameters), code changed (which files of its closure), a claim's seed rule
changed, notebook changed, data changed, forced, or an override run. ``--runs`` lists the runs outside the canonical
outputs (``figures/_runs/``: by hand, with ``--set``, on your own data) with their overrides, data and status."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from ..errors import ParameterError, WorkbookError
from ..notebook_params import parameter_names
from ..params import PROFILES, load_params, read_yaml
from ..paths import figures_dir
from ..registry import load_registry, select, unregistered_notebooks
from .distributed import _run_all, cache_readers_last, cache_reads, forwarded_env
from .execution import recover_interrupted
from .hashing import run_hash
from .preflight import full_data_estimate, preflight


def parse_sets(items: list[str], names: list[str], known: list[str] | None = None) -> dict[str, dict]:
    """``--set KEY=VALUE`` (every selected notebook) and ``--set NAME.KEY=VALUE`` (notebook NAME only) as overrides
    per notebook. Values are YAML (``seed=1``, ``datasets=[ml-100k]``, ``n_attacked=null``); a KEY must be a
    parameter of every notebook it applies to, NAME one of the selected notebooks (``known``: all registered names,
    for a better message). Raises :class:`~dpmf_lib.errors.ParameterError` naming the key and the fix."""
    import difflib

    import yaml

    from ..errors import ParameterError
    from ..params import merged, strict_load

    sets: dict[str, dict] = {n: {} for n in names}
    for item in items:
        key, eq, raw = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ParameterError(f"--set {item!r}: expected KEY=VALUE or NOTEBOOK.KEY=VALUE (VALUE in YAML)")
        try:
            value = strict_load(raw)  # a key repeated in a mapping is an error, as in a params file
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
                    + "; the parameters are in params/<name>.yaml (`defaults:`)"
                    + ("; use --set NAME.KEY=VALUE or --only to reach only the notebooks that have it"
                       if len(targets) > 1 else ""))
            old = sets[n].get(param)  # two --set of one mapping: merged key by key, as with the profile's value
            sets[n][param] = merged(old, value) if isinstance(old, dict) and isinstance(value, dict) else value
    return {n: o for n, o in sets.items() if o}


def reason_to_run(entry, profile: str, digest: str, *, force: bool = False, overrides: dict | None = None) -> str | None:
    """Why the runner runs ``entry`` at ``profile`` (None: it is current and skipped): an override run (``--set``),
    ``--force``, or why its canonical outputs are not current — new, last run failed, profile / params (which) /
    code (which files) / claims' seed rules / notebook / data changed (:func:`dpmf_lib.runner.staleness.staleness`)."""
    from .staleness import staleness

    if overrides:
        return "override run (--set " + ", ".join(f"{k}={v!r}" for k, v in overrides.items()) + \
            "): always executed, into figures/_runs/"
    stale = staleness(entry, digest, profile=profile)
    if force:
        return "forced (--force)" + (f"; it was not current anyway: {stale}" if stale else "")
    return stale


def runs_listing(fig_dir: Path | None = None) -> str:
    """``--runs``: every run in ``figures/_runs/`` — hand runs (papermill, JupyterLab) and the runner's ``--set``
    runs, own-data runs among them — one line each: its folder, how it was made, its status, its parameters that
    differ from the profile's (the overrides), the data it read (real, stand-in or a dataset of yours) and when."""
    import json

    from ..data.user import user_ids

    root = (fig_dir or figures_dir()) / "_runs"
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")) if root.is_dir() else []
    if not folders:
        return f"no runs in {root} (hand runs and --set runs land there)"
    try:
        mine = set(user_ids())
    except Exception:  # noqa: BLE001 — an unreadable registry of user datasets must not hide the listing
        mine = set()

    def read(path):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    lines = [f"{len(folders)} run(s) in {root}:"]
    for f in folders:
        prov, run = read(f / "provenance.json") or {}, read(f / "run.json")
        name = prov.get("notebook") or f.name.rsplit("-", 2)[0]
        if run is not None:
            how, status = "runner --set", run.get("status", "unknown")
            if run.get("error"):
                status += f" ({' '.join(str(run['error']).split())[:100]})"
        else:
            how = "by hand"
            status = "ok" if prov and any(f.glob(f"{name}.csv*")) else "no outputs (running, or stopped before save)"
        data = []
        for d in prov.get("datasets") or []:
            if not d.get("dataset"):
                continue
            kind = "yours" if d["dataset"] in mine else ("real" if d.get("real") else "stand-in")
            data.append(f"{d['dataset']} ({kind})")
        overrides = prov.get("overrides") if prov else (run or {}).get("overrides")
        sets = ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in (overrides or {}).items()) or "none"
        when = prov.get("finished_utc") or ""
        lines.append(f"  {f.name}\n    {name} at {prov.get('profile') or (run or {}).get('profile') or '?'}, {how}, "
                     f"{status}{', ' + when if when else ''}\n    overrides: {sets}\n"
                     f"    data: {', '.join(data) or ('—' if prov else 'unknown (no provenance.json)')}")
    return "\n".join(lines)


def _profile_name(text: str) -> str:
    if text in PROFILES or (text.startswith("paper-") and len(text) > len("paper-")):
        return text
    raise argparse.ArgumentTypeError(f"unknown profile {text!r}: choose {', '.join(PROFILES)} or paper-<name>")


def main(argv: list[str] | None = None) -> int:
    """The ``reproduce`` command; Ctrl-C ends it with one line (exit 130), never a traceback."""
    try:
        return _main(argv)
    except KeyboardInterrupt:
        print("interrupted (nothing was replaced)", file=sys.stderr)
        return 130


def _main(argv: list[str] | None = None) -> int:
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
    ap.add_argument("--snapshot", action="store_true",
                    help="(profile paper) copy each successful run into results/paper/<name>/ as it finishes")
    ap.add_argument("--set", action="append", default=[], metavar="[NAME.]KEY=VALUE", dest="sets",
                    help="override a parameter (VALUE in YAML) of every selected notebook, or of NAME only; "
                         "repeatable. Such runs always execute, are not canonical and write to figures/_runs/")
    ap.add_argument("--runs", action="store_true",
                    help="list the runs outside figures/<name>/ (figures/_runs/: hand runs, --set and own-data runs) "
                         "with their parameters, data and status, and exit")
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
    if args.runs:
        print(runs_listing())
        return 0
    if args.list:
        print(f"{'notebook':16s} {'paper':5s} {'label':12s} {'state':12s} caption")
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
    if args.sets and args.snapshot:
        print("error: --set runs are not the profile's runs: no --snapshot with them",
              file=sys.stderr)
        return 2
    if args.snapshot and args.profile != "paper":
        print("error: --snapshot keeps paper-profile results only (use --profile paper)", file=sys.stderr)
        return 2
    todo, skipped, in_snapshot, why = [], [], [], {}
    for e in chosen:
        try:
            if sets.get(e.name):  # a bad value (a spec naming a missing file, ε <= 0 …) stops here, not in a worker
                load_params(e.name, args.profile, sets[e.name])  # names, nested keys, kinds
                for warning in preflight(e.name, args.profile, sets[e.name], args.timeout):  # values, costs
                    print(warning, file=sys.stderr)
            too_long = full_data_estimate(e.name, args.profile, sets.get(e.name))  # real data past the budget
            if too_long:
                raise ParameterError(too_long)
            digest = run_hash(e, args.profile)
            why[e.name] = reason_to_run(e, args.profile, digest, force=args.force, overrides=sets.get(e.name))
        except WorkbookError as exc:
            print(f"error: {e.name}: {exc}", file=sys.stderr)
            return 2
        current = why[e.name] is None
        if not current and args.snapshot and not args.force and not sets.get(e.name):
            # a fresh clone has an empty figures/: a committed snapshot row that is current for this hash (code,
            # params, notebook, seed rules, data) is that same run, so a snapshot run does not spend its hours again
            from ..snapshot import row_state

            if row_state(e, digest)[0] == "current":
                in_snapshot.append(e.name)
                continue
        (skipped if current else todo).append((e.name, digest))
    if skipped:
        print(f"up to date, skipped: {', '.join(n for n, _ in skipped)}")
    if args.snapshot and skipped:
        # a paper run current in figures/ (made without --snapshot) whose snapshot row is missing or stale: keep it
        from ..snapshot import row_state, take

        by = {e.name: e for e in chosen}
        for n, digest in skipped:
            if row_state(by[n], digest)[0] != "current":
                print(f"snapshot: {take(n)} (the current run in figures/)")
    reads = cache_reads(chosen)
    if in_snapshot:
        from ..snapshot import snapshot_dir_text

        print(f"current in the snapshot ({snapshot_dir_text()}), skipped: {', '.join(in_snapshot)} "
              f"(--force runs them again)")
        cold = sorted({n for n, _ in todo for p in reads.get(n, ()) if p in in_snapshot})
        if cold:  # correct either way (the readers compute what the cache lacks), but slower than reading
            print(f"note: {', '.join(cold)} read the result cache of a notebook skipped here; on a fresh clone that "
                  f"cache is empty and they compute its runs themselves")
    todo = cache_readers_last(todo, chosen)
    for n, _ in todo:  # why each one runs, before any starts (as Snakemake gives a reason per job)
        print(f"{n}: runs — {why[n]}")
    env = forwarded_env({"DPMF_SWEEP_BACKEND": args.backend,
                         **({"DPMF_DASK_SCHEDULER": args.scheduler} if args.scheduler else {}),
                         # --force reaches the result cache too (dpmf_lib.cache): recompute, overwrite the entries
                         **({"DPMF_CACHE": "refresh"} if args.force else {})})
    failures = []
    timeout_s = args.timeout * 60 if args.timeout else None
    from tqdm.auto import tqdm  # status lines through tqdm.write: printed above the progress bar, not glued to it

    runs = _run_all(todo, args.profile, max(1, args.jobs), args.backend, args.scheduler, env, timeout_s, sets, reads)
    done = []
    try:
        with _sigterm_as_interrupt():
            for rec in runs:
                done.append(rec["notebook"])
                if args.snapshot and rec["status"] == "ok":
                    from ..snapshot import take

                    tqdm.write(f"snapshot: {take(rec['notebook'])}")
                line = (f"{rec['notebook']}: {rec['status']} in {rec['runtime_s']} s"
                        + (f", peak {rec['peak_rss_mib']:.0f} MiB" if rec.get("peak_rss_mib") else ""))
                if rec.get("overrides"):
                    line += f" (with --set {rec['overrides']}: not canonical, in {rec['out_dir']})"
                if rec["status"] != "ok":
                    failures.append(rec)
                    out = Path(rec.get("out_dir") or figures_dir() / rec["notebook"])
                    line += (f" — {rec['error']}" if rec.get("disk_error") or rec["status"] == "interrupted" or
                             rec.get("executed") is False or not (out / (rec["notebook"] + ".ipynb")).exists()
                             else f" — FAILED at {rec['error']} (executed copy: {out / (rec['notebook'] + '.ipynb')})")
                tqdm.write(line)
    except KeyboardInterrupt:
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C while the notebooks stop changes nothing
        runs.close()  # stops the running notebooks: each drops its staging directory, the previous outputs stay
        left = [n for n, _ in todo if n not in done]
        print(f"interrupted: stopped {', '.join(left) or 'nothing'}; their previous outputs are kept "
              f"(run the same command again to resume)", file=sys.stderr)
        return 130
    from ..report import write_report

    try:
        md, html = write_report()
    except OSError as exc:
        from .execution import DISK_ERRORS

        what = DISK_ERRORS.get(exc.errno, exc.strerror or type(exc).__name__)
        print(f"error: cannot write the report: {what} ({exc.filename}); the runs' outputs are in place — build "
              "it again with `python -m dpmf_lib.report` once the disk takes it", file=sys.stderr)
        return 1
    print(f"report: {md} and {html}")
    if failures:
        print(f"{len(failures)} notebook(s) failed: {', '.join(r['notebook'] for r in failures)}", file=sys.stderr)
        return 1
    return 0


@contextmanager
def _sigterm_as_interrupt():
    """SIGTERM (a batch system's stop, `kill`) ends the run as Ctrl-C does: the notebooks stop, previous outputs
    stay."""
    import signal

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:  # not the main thread (a test calling main() from a thread): leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
