"""Benchmark suite ``paper``: a fixed subset of the workbook's notebooks run cold through the runner, each row's
seconds against a recorded baseline of the same profile.

    python -m dpmf_lib.bench paper --profile quick|paper [--only ROW[,ROW]] --out FILE
    python -m dpmf_lib.bench.paper --record-baseline FILE   # a quick run's JSON -> paper_baseline.json

What runs. ``paper``: :data:`PAPER_ROWS` at the notebooks' ``paper`` profile (about 25 min on 2 idle cores);
``quick``: :data:`QUICK_ROWS` at their ``canary`` profile (the paper's methods and branches on small inputs, about
2 min). Each row goes through :func:`dpmf_lib.runner.execution.execute`, the runner's own executor (papermill in a
process of its own, the kernel start included as in the recorded times), into a temporary figures directory with
an empty result cache of its own (``$DPMF_FIGURES_DIR``, ``$DPMF_CACHE_DIR``): nothing is read from an earlier run
or another row, nothing is written to ``figures/``. numba's compiled-kernel cache is left as it is (warm, as in the
recorded runs; a first run after a kernel change also pays its compilation).

Per row: wall seconds (the runner's ``runtime_s``), CPU seconds (this process and its reaped descendants: the
papermill process, the kernel and the workers it waited for — a lower bound), the kernel's peak RSS (the runner's
``peak_rss_mib``), the result-cache entries the row wrote (each is one cached computation: a chapter-4 training run,
a chapter-3 attack grid per (mechanism, ε), a Hua scenario run) with seconds per entry (the row's wall seconds over
its entries: everything the row does charged to its fits), and the host's load during the row.

Baselines. ``paper``: the snapshot row's ``results/paper/<row>/run.json`` (its ``runtime_s``, the numbers
``python -m dpmf_lib.snapshot --times`` shows). ``quick``: :data:`BASELINE_FILE`, recorded from a quick run of this
suite with ``--record-baseline`` (it keeps the host's load beside each row). The line is ``<row>_seconds_over_baseline
<= 1.25`` (:data:`LINE`), a held regression: a row that got a quarter slower than its baseline is a finding.

Guards, stated before any number is seen; each leaves the row without a verdict (``met`` None, the reason in the
table) rather than judging what it cannot: the row failed; no baseline; the baseline ran other parameters (the
run-hash part ``params`` differs: the line is for the same work on changed code, not for changed work); it read other
data (real vs stand-in, another checksum); it ran on another host (CPU model, SIMD level, cores, numba threads);
or the host was busy during the row: other processes (and the hypervisor's steal) used more than
:data:`HOST_BUSY_SHARE` of the machine's CPU time (``/proc/stat`` minus this process tree's own CPU time), the same
idea as the ``mf`` suite's host probe beside its 2-thread timings, measured over the whole row since a row takes
minutes. A baseline recorded on a busy host is judged but noted (its "met" is weak). The paper rows' recorded
loads are not known (the snapshot did not keep them).

Not here: the kernel lines (C-SGD ≥ 3× naive without prefetch at d = 128, C-SGD's time to libmf's RMSE, SGLD
≥ 0.5× C-SGD) stay in the ``mf`` suite, measured in interleaved repeats; a row of minutes cannot resolve them.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
from pathlib import Path

from . import ratio, record

#: rows of ``--profile paper``, one per paper or chapter: recorded time moderate (≤ 15 min), the recorded run cold
#: (no result-cache entries at its start) and on this host type, so a cold run here is the same work. Balu ch. 3 has
#: no such row (its recorded runs read a warm cache, or ran on the AVX2 host): it is in the quick rows only
PAPER_ROWS = {
    "liu_fig5": "Liu: C-SGD, SGLD and the peers (libmf, surprise) for fixed epochs on ML-100K and the Netflix "
                "stand-in (4.9 min)",
    "balu_table4_1": "Balu ch. 4: the five datasets' stand-ins at full shape, the data path every chapter-4 grid "
                     "starts from (0.4 min; the grids' recorded runs all read a warm cache)",
    "balu_fig5_1": "Balu ch. 5: LSH vs qoLSH on 1M pairs at d = 128, L = 256 (4.4 min)",
    "pnbm_fig3": "PNBM: DPSGD-PNBM and DPPS-PNBM grids on ML-100K (13.1 min)",
    "hua_fig1": "Hua: the S1 scenario runs through the result cache (1.3 min)",
}
#: rows of ``--profile quick`` (their ``canary`` profile): the paper rows plus chapters 3 and 4, whose paper runs
#: have no cold baseline but whose canaries are cheap and go through the result cache
QUICK_ROWS = {
    **PAPER_ROWS,
    "balu_fig3_2": "Balu ch. 3: BLIP attacks (MCMC, exact marginals) through the result cache",
    "balu_fig4_1": "Balu ch. 4: the two-stage (eta, lambda) search, batched training runs through the result cache",
}
ROWS = {"quick": QUICK_ROWS, "paper": PAPER_ROWS}
NOTEBOOK_PROFILE = {"quick": "canary", "paper": "paper"}
LINE = "<= 1.25"
#: above this share of the machine's CPU time used by others during a row, the row's time is the host's
HOST_BUSY_SHARE = 0.10
BASELINE_FILE = Path(__file__).with_name("paper_baseline.json")


# -- the host's load during a row -----------------------------------------------------------------------------------

def proc_stat() -> tuple[float, float] | None:
    """(busy, total) CPU seconds of the whole machine so far, from ``/proc/stat``'s first line; busy counts user,
    nice, system, irq, softirq and steal (a co-tenant VM's time is someone else's load too). None off Linux."""
    try:
        with open("/proc/stat") as fh:
            fields = fh.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    v = [float(x) for x in fields[1:9]] + [0.0] * max(0, 9 - len(fields))
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    hz = os.sysconf("SC_CLK_TCK")
    busy = user + nice + system + irq + softirq + steal
    return busy / hz, (busy + idle + iowait) / hz


def own_cpu() -> float:
    """CPU seconds of this process and of its descendants reaped so far."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def others_share(stat0, stat1, own0: float, own1: float) -> float | None:
    """Share of the machine's CPU time (0..1) that processes other than this tree used between two readings of
    :func:`proc_stat` and :func:`own_cpu`. Our CPU time is a lower bound (a worker nobody reaped is missed), so the
    error leans towards "busy": no verdict rather than a wrong one."""
    if stat0 is None or stat1 is None:
        return None
    total = stat1[1] - stat0[1]
    if total <= 0:
        return None
    others = (stat1[0] - stat0[0]) - (own1 - own0)
    return min(1.0, max(0.0, others / total))


# -- one row --------------------------------------------------------------------------------------------------------

def _execute_row(name: str, profile: str, env: dict) -> dict:
    from ..runner.execution import execute

    return execute(name, profile, f"bench-paper-{profile}", env=env)


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def host_of(run: dict, provenance: dict | None) -> dict:
    """What a row's time depends on besides the code: CPU model, numpy's SIMD level, cores and numba threads."""
    cpu, machine = run.get("cpu") or {}, (provenance or {}).get("machine") or {}
    return {"model": cpu.get("model"), "numpy_simd": cpu.get("numpy_simd"), "cpus": machine.get("cpus"),
            "numba_threads": machine.get("numba_threads")}


def written_by_function(cache: Path) -> dict[str, int]:
    """Result-cache entries in ``cache`` per cached function (``module/function``): the private cache is empty at
    the row's start, so these are the row's."""
    root = cache / "joblib"
    out: dict[str, int] = {}
    for pkl in sorted(root.rglob("output.pkl")) if root.is_dir() else ():
        fn = pkl.parent.parent.relative_to(root).as_posix().removeprefix("dpmf_lib/")
        out[fn] = out.get(fn, 0) + 1
    return out


def run_row(name: str, profile: str, workdir: Path) -> dict:
    """Run notebook ``name`` at notebook profile ``profile`` cold in ``workdir``; the row's measurements."""
    figures, cache = workdir / "figures", workdir / "cache"
    cache.mkdir(parents=True)
    env = {"DPMF_FIGURES_DIR": str(figures), "DPMF_CACHE_DIR": str(cache), "DPMF_CACHE": "on"}
    from ..errors import WorkbookError

    stat0, own0 = proc_stat(), own_cpu()
    try:
        rec = _execute_row(name, profile, env)
    except WorkbookError as exc:  # a row that cannot start (its params, its registry row): the others still run
        rec = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"}
    stat1, own1 = proc_stat(), own_cpu()
    by_fn = written_by_function(cache)
    prov = _read_json(figures / name / "provenance.json")
    return {"row": name, "notebook_profile": profile, "status": rec.get("status"), "error": rec.get("error"),
            "runtime_s": rec.get("runtime_s"), "cpu_s": round(own1 - own0, 2), "peak_rss_mib": rec.get("peak_rss_mib"),
            "cache_entries_written": sum(by_fn.values()), "cache_written_by_function": by_fn,
            "params_digest": (rec.get("hash_parts") or {}).get("params"), "data_state": rec.get("data_state"),
            "host": host_of(rec, prov), "host_busy_share": others_share(stat0, stat1, own0, own1)}


# -- baselines ------------------------------------------------------------------------------------------------------

def snapshot_baseline(name: str) -> dict | None:
    """The paper baseline of row ``name``: its snapshot row's ``run.json`` (and ``provenance.json`` for the host)."""
    from ..snapshot import snapshot_dir

    run = _read_json(snapshot_dir() / name / "run.json")
    if not run or run.get("status") != "ok" or not run.get("runtime_s"):
        return None
    prov = _read_json(snapshot_dir() / name / "provenance.json")
    return {"runtime_s": run["runtime_s"], "cpu_s": None, "peak_rss_mib": run.get("peak_rss_mib"),
            "cache_entries_written": (run.get("result_cache") or {}).get("written"),
            "cache_entries_at_start": (run.get("result_cache") or {}).get("entries_at_start"),
            "params_digest": (run.get("hash_parts") or {}).get("params"), "data_state": run.get("data_state"),
            "host": host_of(run, prov), "host_busy_share": None,
            "source": f"results/paper/{name}/run.json ({(prov or {}).get('finished_utc') or 'undated'})"}


def file_baseline(name: str, path: Path | None = None) -> dict | None:
    doc = _read_json(path or BASELINE_FILE) or {}
    row = (doc.get("rows") or {}).get(name)
    if row is None:
        return None
    return {**row, "source": f"{(path or BASELINE_FILE).name} ({doc.get('recorded_utc', 'undated')})"}


def baseline(name: str, profile: str, path: Path | None = None) -> dict | None:
    return snapshot_baseline(name) if profile == "paper" else file_baseline(name, path)


def why_no_verdict(now: dict, base: dict | None) -> str | None:
    """The guard (module docstring) that leaves a row without a verdict, or None."""
    if now["status"] != "ok":
        return f"not measured: the run ended {now['status']} ({' '.join(str(now.get('error')).split())[:200]})"
    if base is None:
        return "no baseline for this row"
    if base.get("cache_entries_at_start"):
        return f"the baseline read a warm result cache ({base['cache_entries_at_start']} entries at its start)"
    if base.get("params_digest") and now.get("params_digest") and base["params_digest"] != now["params_digest"]:
        return "the baseline ran other parameters (the profile's params changed since)"
    if base.get("data_state") is not None and now.get("data_state") is not None \
            and base["data_state"] != now["data_state"]:
        changed = sorted(k for k in set(base["data_state"]) | set(now["data_state"])
                         if base["data_state"].get(k) != now["data_state"].get(k))
        return f"the baseline read other data ({', '.join(changed)})"
    differs = [k for k, v in (base.get("host") or {}).items() if v is not None and (now.get("host") or {}).get(k)
               not in (None, v)]
    if differs:
        return "the baseline ran on another host (" + ", ".join(
            f"{k} {base['host'][k]} vs {now['host'][k]}" for k in differs) + ")"
    share = now.get("host_busy_share")
    if share is not None and share > HOST_BUSY_SHARE:
        return (f"the host was busy: others used {share:.0%} of the machine's CPU time during the row "
                f"(guard: > {HOST_BUSY_SHARE:.0%})")
    return None


# -- the suite ------------------------------------------------------------------------------------------------------

def rows_for(profile: str, only: str | None = None) -> list[str]:
    """The suite's rows at ``profile``, or those matching ``only`` (shell patterns, comma-separated)."""
    import fnmatch

    rows = list(ROWS[profile])
    if not only:
        return rows
    pats = [p.strip() for p in only.split(",") if p.strip()]
    chosen = [r for r in rows if any(fnmatch.fnmatchcase(r, p) for p in pats)]
    if not chosen:
        raise ValueError(f"--only {only!r} matches none of the {profile} rows: {', '.join(rows)}")
    return chosen


def summarise(profile: str, results: list[dict], baselines: dict[str, dict | None]) -> dict:
    """Records, ratios and the raw rows (kept in the JSON for ``--record-baseline``) of measured rows."""
    records, lines, shown, rows = [], [], [], []
    total_now = total_base = 0.0
    for now in results:
        name, base = now["row"], baselines.get(now["row"])
        common = {"profile": now["notebook_profile"], "status": now["status"]}
        note = why_no_verdict(now, base)
        ok = now["status"] == "ok"
        if ok:
            records += _row_records(name, now, base or {}, common)
        if now.get("host_busy_share") is not None:
            records.append(record(name, "host_busy_share", now["host_busy_share"], "", **common,
                                  baseline=(base or {}).get("host_busy_share")))
        if ok and base and base.get("runtime_s"):
            r = ratio(f"{name}_seconds_over_baseline", float(now["runtime_s"]) / float(base["runtime_s"]), LINE)
            if base.get("cpu_s") and now.get("cpu_s"):
                shown.append(ratio(f"{name}_cpu_seconds_over_baseline", now["cpu_s"] / base["cpu_s"], None))
            if note is None:
                total_now += float(now["runtime_s"])
                total_base += float(base["runtime_s"])
        else:
            r = {**ratio(f"{name}_seconds_over_baseline", float("nan"), None), "target": LINE}
        busy_base = (base or {}).get("host_busy_share")
        if note is None and busy_base is not None and busy_base > HOST_BUSY_SHARE:
            r["note"] = (f"the baseline was recorded on a busy host (others {busy_base:.0%}): a 'met' is weak; "
                         f"record it again on an idle host")
        if note is not None:
            r.update(met=None, note=note)
        lines.append(r)
        rows.append({**now, "baseline": base, "verdict_note": note})
    if total_base:
        shown.append(ratio("judged_rows_seconds_over_baseline", total_now / total_base, None))
    return {"records": records, "ratios": lines + shown, "rows": rows}


def _row_records(name: str, now: dict, base: dict, common: dict) -> list[dict]:
    """A successful row's records, each with its baseline value beside it (None where the baseline lacks it)."""
    wall, n = float(now["runtime_s"]), now["cache_entries_written"]
    out = [record(name, "wall_seconds", wall, "s", **common, baseline_s=base.get("runtime_s")),
           record(name, "cpu_seconds", now["cpu_s"], "s", **common, baseline_s=base.get("cpu_s"))]
    if now.get("peak_rss_mib"):
        out.append(record(name, "peak_rss", now["peak_rss_mib"], "MiB", **common,
                          baseline_mib=base.get("peak_rss_mib")))
    by_fn = "; ".join(f"{k}: {v}" for k, v in now["cache_written_by_function"].items())
    out.append(record(name, "cache_entries_written", n, "entries", **common,
                      baseline=base.get("cache_entries_written"), **({"by": by_fn} if n else {})))
    if n:
        base_n = base.get("cache_entries_written")
        out.append(record(name, "seconds_per_cache_entry", wall / n, "s", **common,
                          baseline_s=round(base["runtime_s"] / base_n, 3) if base_n else None))
    return out


def run(profile: str = "quick", only: str | None = None, *, baseline_path: Path | None = None) -> dict:
    names = rows_for(profile, only)
    nb_profile = NOTEBOOK_PROFILE[profile]
    results, baselines = [], {}
    work = Path(tempfile.mkdtemp(prefix="dpmf-bench-paper-"))
    try:
        for name in names:
            now = run_row(name, nb_profile, work / name)
            shutil.rmtree(work / name, ignore_errors=True)
            results.append(now)
            baselines[name] = baseline(name, profile, baseline_path)
            base_s = (baselines[name] or {}).get("runtime_s")
            took = f" in {now['runtime_s']} s" if now.get("runtime_s") is not None else f": {now.get('error')}"
            print(f"{name} ({nb_profile}): {now['status']}{took}"
                  + (f" (baseline {base_s} s)" if base_s else " (no baseline)"), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return summarise(profile, results, baselines)


# -- recording the quick baseline -----------------------------------------------------------------------------------

BASELINE_KEYS = ("runtime_s", "cpu_s", "peak_rss_mib", "cache_entries_written", "params_digest", "data_state",
                 "host", "host_busy_share")


def baseline_from_run(doc: dict) -> dict:
    """The baseline file's content from a ``--profile quick`` run of this suite (its JSON); failed rows are left
    out. Raises ValueError for another suite's or profile's file."""
    if doc.get("suite") != "paper" or doc.get("profile") != "quick":
        raise ValueError(f"a quick run of the paper suite is needed, got suite {doc.get('suite')!r} at "
                         f"{doc.get('profile')!r}")
    rows = {r["row"]: {k: r.get(k) for k in BASELINE_KEYS} for r in doc.get("rows") or [] if r.get("status") == "ok"}
    if not rows:
        raise ValueError("the run has no successful row")
    shares = [r["host_busy_share"] for r in rows.values() if r.get("host_busy_share") is not None]
    from ..runner.canary import _commit

    return {"what": "python -m dpmf_lib.bench paper --profile quick: each row's canary run, cold "
                    "(dpmf_lib.bench.paper)",
            "recorded_utc": doc.get("finished_utc"), "commit": _commit(), "machine": doc.get("machine"),
            "host_busy_share_max": max(shares) if shares else None, "rows": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.bench.paper",
                                 description="Record the quick baseline of the paper suite from a quick run's JSON.")
    ap.add_argument("--record-baseline", type=Path, required=True, metavar="RUN.json",
                    help="the --out file of `python -m dpmf_lib.bench paper --profile quick`")
    ap.add_argument("--to", type=Path, default=BASELINE_FILE, help=f"default: {BASELINE_FILE}")
    args = ap.parse_args(argv)
    try:
        doc = baseline_from_run(json.loads(args.record_baseline.read_text()))
    except (OSError, ValueError) as exc:
        print(f"error: {args.record_baseline}: {exc}", file=sys.stderr)
        return 2
    args.to.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    print(f"wrote {args.to} ({len(doc['rows'])} rows; others' share of the CPU up to "
          f"{doc['host_busy_share_max'] if doc['host_busy_share_max'] is not None else '?'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
