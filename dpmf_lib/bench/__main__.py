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
    return info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.bench", description="Run one benchmark suite.")
    ap.add_argument("suite", help=f"one of {', '.join(SUITES)}")
    ap.add_argument("--profile", choices=BENCH_PROFILES, default="quick")
    ap.add_argument("--out", type=Path, default=None, help="JSON file to write (default: print)")
    args = ap.parse_args(argv)
    if args.suite not in SUITES:
        print(f"error: unknown suite '{args.suite}'; choose one of {', '.join(SUITES)}", file=sys.stderr)
        return 2
    try:
        mod = importlib.import_module(f"dpmf_lib.bench.{args.suite}")
    except ModuleNotFoundError as exc:
        print(f"error: suite '{args.suite}' is not implemented yet ({exc})", file=sys.stderr)
        return 2
    started = time.time()
    result = mod.run(args.profile)
    doc = {"suite": args.suite, "profile": args.profile, "machine": machine_info(),
           "records": result.get("records", []), "ratios": result.get("ratios", []),
           "wall_time_s": round(time.time() - started, 2),
           "finished_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    text = json.dumps(doc, indent=2, default=str)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.out.with_suffix(args.out.suffix + ".tmp")
        tmp.write_text(text + "\n")
        os.replace(tmp, args.out)
        print(f"wrote {args.out}")
    else:
        print(text)
    for r in doc["ratios"]:
        verdict = "no target" if r.get("target") is None else ("met" if r.get("met") else "NOT met")
        print(f"ratio {r['name']}: {r['value']:.3g} (target {r.get('target')}: {verdict})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
