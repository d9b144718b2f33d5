"""``python -m data_fetch ID [--dest DIR] [--force] [--from DIR]`` and ``python -m data_fetch --list``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpmf_lib.errors import WorkbookError
from dpmf_lib.paths import data_dir

from .fetch import fetch, is_present, mirror_dir
from .manifest import manifest_problem
from .registry import DATASETS, get_spec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m data_fetch", description="Fetch the datasets of the workbook into "
                                 "data/<id>/ (atomically, with a checksum manifest).")
    ap.add_argument("dataset", nargs="*", help="dataset id(s); see --list")
    ap.add_argument("--list", action="store_true", help="list the datasets, their shape and whether they are present")
    ap.add_argument("--dest", default=None, help="destination root (default: $DPMF_DATA_DIR or <repo>/data)")
    ap.add_argument("--force", action="store_true", help="fetch again even if present")
    ap.add_argument("--from", dest="source_dir", default=None,
                    help="install from a local directory holding the extracted files (for datasets you hold a copy of)")
    ap.add_argument("--check", action="store_true", help="re-hash the files of present datasets against the manifest")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    dest = args.dest or data_dir()

    if args.list or not args.dataset:
        for spec in DATASETS.values():
            state = "present" if is_present(spec.id, dest) else ("mirror" if mirror_dir(spec.id) else "absent")
            print(f"[{state:7s}] {spec.describe()}")
        return 0
    status = 0
    for ds in args.dataset:
        try:
            if args.check:
                get_spec(ds)
                problem = manifest_problem(Path(dest) / ds, ds, deep=True)
                print(f"{ds}: " + ("ok" if problem is None else problem))
                status |= problem is not None
                continue
            path = fetch(ds, dest, force=args.force, source_dir=args.source_dir, progress=not args.quiet)
            print(f"{ds}: {path}")
        except WorkbookError as err:
            print(f"{ds}: {err}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
