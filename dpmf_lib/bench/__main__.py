"""Command line of the benchmark suites (see :mod:`dpmf_lib.bench`)."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from pathlib import Path

from . import BENCH_PROFILES, SUITES


def machine_info() -> dict:
    from .machine import cache_sizes

    info = {"platform": platform.platform(), "processor": platform.processor() or None, "cpus": os.cpu_count(),
            "python": platform.python_version(), "caches_bytes": cache_sizes()}
    try:
        with open("/proc/cpuinfo") as fh:
            info["model"] = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), None)
    except OSError:
        pass
    for var in ("OPENBLAS_CORETYPE", "NUMBA_NUM_THREADS", "OMP_NUM_THREADS"):
        if os.environ.get(var):
            info[var] = os.environ[var]
    try:  # at the end of the run: how busy the shared host was (1, 5 and 15 min averages)
        info["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        pass
    return info


def _params_text(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _range_text(r: dict, digits: int = 3) -> str:
    """``[low, high] ×n`` over a value's repeats (:mod:`dpmf_lib.bench.paired`); "—" for a single measurement."""
    if "repeats" not in r or "low" not in r:  # a single measurement, or a ratio no repeat measured
        return "—"
    return f"[{r['low']:.{digits}g}, {r['high']:.{digits}g}] ×{r['repeats']}"


def _aligned(rows: list[tuple]) -> list[str]:
    """Rows as lines with left-aligned columns, each as wide as its longest cell."""
    widths = [max(len(str(row[i])) for row in rows if len(row) > i) for i in range(max(map(len, rows)))]
    return ["  ".join(str(c).ljust(widths[i]) for i, c in enumerate(row)).rstrip() for row in rows]


def _key(r: dict) -> tuple:
    return r["name"], r["metric"], json.dumps(r.get("params", {}), sort_keys=True, default=str)


def table(doc: dict, old: dict | None = None) -> str:
    """The run as readable text: its ratios (value, range over repeats, target, met), then its records; with ``old``
    (an earlier run's JSON) each ratio and record gets the earlier value and new/old beside it. Absolute times drift
    between runs on a shared machine: read the ratios first."""
    old_ratios = {r["name"]: r for r in (old or {}).get("ratios", [])}
    old_records = {_key(r): r for r in (old or {}).get("records", [])}
    lines = [f"{doc['suite']} ({doc['profile']}), {doc['wall_time_s']:.0f} s, {doc['finished_utc']}"
             + (f"; compared with {old.get('finished_utc', 'an earlier run')}" if old else "")]
    ratio_rows = [("ratio", "value", "range over repeats", "target", "met")
                  + (("earlier", "now/earlier") if old else ())]
    for r in doc["ratios"]:
        met = "—" if r.get("met") is None else ("met" if r["met"] else "NOT met")
        if "repeats_meeting" in r:
            met += f" (alone in {r['repeats_meeting']} of {r['repeats']} repeats)"
        if r.get("note") and (r.get("repeats_left_out") or r.get("met") is None):  # why some or all went unjudged
            met += f" ({r['note']})"
        row = (r["name"], f"{r['value']:.3g}", _range_text(r), r.get("target") or "—", met)
        if old:
            o = old_ratios.get(r["name"])
            row += ("—", "—") if o is None else (f"{o['value']:.3g}", f"{r['value'] / o['value']:.2f}×"
                                                  if o["value"] else "—")
        ratio_rows.append(row)
    # the long parameter list goes last, so the values and the comparison stay in readable columns
    record_rows = [("record", "value", "unit") + (("earlier", "now/earlier") if old else ()) + ("params",)]
    for r in doc["records"]:
        value = f"{r['value']:.4g}" + (f" {_range_text(r, 4)}" if "repeats" in r else "")
        row = (f"{r['name']} · {r['metric']}", value, r["unit"])
        if old:
            o = old_records.get(_key(r))
            row += ("—", "—") if o is None else (f"{o['value']:.4g}", f"{r['value'] / o['value']:.2f}×"
                                                  if o["value"] else "—")
        record_rows.append(row + (_params_text(r.get("params", {})),))
    lines += _aligned(ratio_rows) + [""] + _aligned(record_rows)
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.bench", description="Run one benchmark suite.")
    ap.add_argument("suite", help=f"one of {', '.join(SUITES)}")
    ap.add_argument("--profile", choices=BENCH_PROFILES, default="quick")
    ap.add_argument("--out", type=Path, default=None, help="JSON file to write (default: print the JSON)")
    ap.add_argument("--only", default=None, metavar="ROWS",
                    help="(suite paper) shell pattern(s) of the suite's rows to run, comma-separated")
    ap.add_argument("--compare", type=Path, default=None, metavar="OLD.json",
                    help="an earlier run of the same suite: show its values and new/old beside this run's")
    args = ap.parse_args(argv)
    old = None
    if args.compare:
        try:
            old = json.loads(args.compare.read_text())
        except (OSError, ValueError) as exc:
            print(f"error: --compare {args.compare}: cannot read it as a benchmark JSON ({exc})", file=sys.stderr)
            return 2
        if old.get("suite") != args.suite:
            print(f"error: --compare {args.compare} is a run of suite {old.get('suite')!r}, not {args.suite!r}",
                  file=sys.stderr)
            return 2
    if args.suite not in SUITES:
        print(f"error: unknown suite '{args.suite}'; choose one of {', '.join(SUITES)}", file=sys.stderr)
        return 2
    try:
        mod = importlib.import_module(f"dpmf_lib.bench.{args.suite}")
    except ModuleNotFoundError as exc:
        print(f"error: suite '{args.suite}' is not implemented yet ({exc})", file=sys.stderr)
        return 2
    kwargs = {}
    if args.only:  # a suite with named rows says which it has (rows_for) and refuses a pattern matching none
        if not hasattr(mod, "rows_for"):
            print(f"error: suite '{args.suite}' has no rows to choose from (--only is for the paper suite)",
                  file=sys.stderr)
            return 2
        try:
            mod.rows_for(args.profile, args.only)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        kwargs["only"] = args.only
    started = time.time()
    result = mod.run(args.profile, **kwargs)
    # a suite's own keys (the paper suite's raw rows) go into the JSON after the common ones
    doc = {"suite": args.suite, "profile": args.profile, "machine": machine_info(),
           "records": result.get("records", []), "ratios": result.get("ratios", []),
           "wall_time_s": round(time.time() - started, 2),
           "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           **{k: v for k, v in result.items() if k not in ("records", "ratios")}}
    text = json.dumps(doc, indent=2, default=str)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(args.out.suffix + ".tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, args.out)
        print(table(doc, old))
        print(f"wrote {args.out}")
    else:
        print(text)
        print(table(doc, old), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
