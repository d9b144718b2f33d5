"""``python -m data_fetch ID [--dest DIR] [--force] [--from DIR]``, ``python -m data_fetch --list``, and a user's own
file: ``python -m data_fetch add ID PATH --format csv-header --scale 0.5,5`` / ``python -m data_fetch remove ID``."""

from __future__ import annotations

import argparse
import errno
import sys
from pathlib import Path

from dpmf_lib.errors import WorkbookError
from dpmf_lib.paths import data_dir

from .fetch import fetch, is_present, mirror_dir
from .manifest import manifest_problem
from .registry import DATASETS, get_spec


#: what the disk said, for the errors that are the disk's and not the dataset's
DISK_ERRORS = {errno.ENOSPC: "the disk is full (ENOSPC)", errno.EFBIG: "a file reached the size limit (EFBIG; see "
               "`ulimit -f`)", errno.EROFS: "the filesystem is read-only (EROFS)",
               errno.EDQUOT: "the disk quota is exceeded (EDQUOT)"}


def disk_message(exc: OSError) -> str | None:
    """A named message for an OSError of the disk (full, read-only, size limit, quota), else None."""
    if exc.errno not in DISK_ERRORS:
        return None
    return (f"{DISK_ERRORS[exc.errno]} writing {exc.filename or 'the data directory'}; nothing half-written is left "
            "and an installed copy is kept — free space or choose another --dest / $DPMF_DATA_DIR")


def user_main(argv: list[str]) -> int:
    """``add ID PATH --format F --scale LO,HI [--step S] [--replace]``, ``remove ID``: a user's own ratings file."""
    from dpmf_lib.data import user

    ap = argparse.ArgumentParser(prog="python -m data_fetch", description="Register a ratings file of your own "
                                 f"under an id (kept in {user.registry_path()}, outside the repository's tracked "
                                 "files); use the id wherever a dataset id goes (`datasets: [ID]`).")
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add", help="register PATH as dataset ID (the file is read once to check it)")
    a.add_argument("id")
    a.add_argument("path")
    a.add_argument("--format", required=True, choices=user.USER_FORMATS,
                   help="csv-header: a header line naming the user, item and rating (and timestamp) columns")
    a.add_argument("--scale", required=True, help="lowest and highest possible rating, e.g. 0.5,5")
    a.add_argument("--step", type=float, default=None, help="spacing of the rating values, e.g. 0.5 (optional)")
    a.add_argument("--replace", action="store_true", help="point an id already registered at this file")
    r = sub.add_parser("remove", help="forget a registered dataset (the file itself is left alone)")
    r.add_argument("id")
    args = ap.parse_args(argv)
    try:
        if args.cmd == "add":
            spec = user.add(args.id, args.path, args.format, args.scale, args.step, replace=args.replace)
            r = user.load_user(spec)
            print(f"{spec.id}: {spec.path} ({spec.format}, ratings {spec.rating_scale[0]:g}–{spec.rating_scale[1]:g})"
                  f": {r.n_users:,} users × {r.n_items:,} items, {r.n_ratings:,} ratings; sha256 "
                  f"{r.source.checksum[:16]}…; registered in {user.registry_path()}")
        else:
            user.remove(args.id)
            print(f"{args.id}: removed from {user.registry_path()}")
    except WorkbookError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except OSError as err:
        if disk_message(err) is None:
            raise
        print(f"error: {disk_message(err)}", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("add", "remove"):
        return user_main(argv)
    ap = argparse.ArgumentParser(prog="python -m data_fetch", description="Fetch the datasets of the workbook into "
                                 "data/<id>/ (atomically, with a checksum manifest).")
    ap.add_argument("dataset", nargs="*", help="dataset id(s); see --list")
    ap.add_argument("--list", action="store_true", help="list the datasets, their shape and whether they are present")
    ap.add_argument("--dest", default=None, help="destination root (default: $DPMF_DATA_DIR or <repo>/data)")
    ap.add_argument("--force", action="store_true", help="fetch again even if present")
    ap.add_argument("--from", dest="source_dir", default=None,
                    help="install your own copy: a directory holding the files as released, or the release's archive "
                         "(.zip/.tar/.tar.gz; checked against the published checksum where there is one)")
    ap.add_argument("--check", action="store_true", help="re-hash the files of present datasets against the manifest")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    dest = args.dest or data_dir()

    if args.list or not args.dataset:
        for spec in DATASETS.values():
            state = "present" if is_present(spec.id, dest) else ("mirror" if mirror_dir(spec.id) else "absent")
            print(f"[{state:7s}] {spec.describe()}")
            print(f"          source: {spec.url or spec.homepage or 'none public'}; licence: {spec.licence}")
            print(f"          install: {spec.install_text()}")
        from dpmf_lib.data import user

        for spec in user.registered().values():
            state = "present" if Path(spec.path).is_file() else "missing"
            print(f"[{state:7s}] {spec.id:12s} your dataset: {spec.path} ({spec.format}, ratings "
                  f"{spec.rating_scale[0]:g}–{spec.rating_scale[1]:g}); `python -m data_fetch remove {spec.id}`")
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
        except OSError as err:
            if disk_message(err) is None:
                raise
            print(f"{ds}: {disk_message(err)}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
