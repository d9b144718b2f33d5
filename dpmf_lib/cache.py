"""The one result cache of the experiments: a :class:`joblib.Memory` in :func:`dpmf_lib.paths.cache_dir`
(``$DPMF_CACHE_DIR``, default ``figures/.cache``).

Experiments whose runs are shared between notebooks cache them here — Balu chapter 3's attack grid per
(mechanism, ε) (:mod:`dpmf_lib.experiments.balu._balu_ch3`, Figures 3.2–3.6) and Hua et al.'s scenario runs
(:mod:`dpmf_lib.experiments.hua.hua_common`, Figures 1–10). A key holds every argument that changes the numbers, the data
source (checksum; real or stand-in) and a hash of the code the result depends on, so a stale entry is never read; a
cached result is the pickled object the computation returned, so a result served from the cache is bit-identical to
a fresh one. Each entry keeps the sha256 of its ``output.pkl`` beside it (``output.pkl.sha256``): an entry whose
bytes changed after it was written (a flipped byte in a pickled array still unpickles) is computed again, not read.

One switch, ``$DPMF_CACHE``:

- ``on`` (default): read and write;
- ``refresh``: compute again and overwrite the entry — ``python -m dpmf_lib.reproduce --force`` sets it for the
  notebooks it runs, so a forced run recomputes everything and leaves a fresh cache behind;
- ``off``: neither read nor write.

``make clean-figures`` / ``make clean`` delete it (it lives in figures/ unless moved), as does
``python -m dpmf_lib.cache --clear`` (which also removes the caches of earlier versions: ``figures/.cache/balu_ch3``
and ``<data>/cache/hua``).
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
from pathlib import Path

from .errors import ParameterError
from .paths import cache_dir, data_dir, figures_dir

MODE_VAR = "DPMF_CACHE"
MODES = ("on", "refresh", "off")


def mode() -> str:
    m = os.environ.get(MODE_VAR, "on").strip().lower() or "on"
    if m not in MODES:
        raise ParameterError(f"${MODE_VAR}={m!r}: choose one of {', '.join(MODES)}")
    return m


@functools.lru_cache(maxsize=4)
def _memory(location: str):
    import joblib

    return joblib.Memory(location, verbose=0)


def memory():
    """The :class:`joblib.Memory` of :func:`dpmf_lib.paths.cache_dir` (its entries live in ``<cache_dir>/joblib``)."""
    return _memory(str(cache_dir()))


def cached_call(func, *args, ignore: tuple[str, ...] = (), enabled: bool = True, **kwargs):
    """``func(*args, **kwargs)`` through the cache (see the module docstring for ``$DPMF_CACHE``). ``ignore``: names
    of arguments left out of the key (they must not change the result beyond what the other arguments say)."""
    m = mode() if enabled else "off"
    if m == "off":
        return func(*args, **kwargs)
    mf = memory().cache(func, ignore=list(ignore))
    entry = _entry_dir(mf, args, kwargs)
    if m == "refresh":
        out = mf.call(*args, **kwargs)
        # joblib >= 1.3 returns (output, metadata)
        if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict) and "duration" in out[1]:
            out = out[0]
        _seal(entry, again=True)
        return out
    if entry is not None and not _intact(entry):  # a changed or truncated entry is computed again, never read
        import warnings

        warnings.warn(f"result cache: {entry / 'output.pkl'} is not the file that was written (sha256): computed "
                      "again", stacklevel=2)
        shutil.rmtree(entry, ignore_errors=True)
    out = mf(*args, **kwargs)
    _seal(entry)
    return out


#: beside each entry's ``output.pkl``: its sha256, written when the entry is made (or first read)
CHECKSUM_FILE = "output.pkl.sha256"


def _entry_dir(mf, args, kwargs) -> Path | None:
    """The folder of the entry ``mf(*args, **kwargs)`` reads or writes (None when this joblib hides it)."""
    try:
        return Path(mf.store_backend.location, mf.func_id, mf._get_args_id(*args, **kwargs))
    except Exception:  # another joblib: entries go unchecked, as before
        return None


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _intact(entry: Path) -> bool:
    """False when the entry's ``output.pkl`` differs from the checksum recorded with it (an entry without a checksum,
    made before they were kept, counts as intact and gets one when read)."""
    try:
        want = (entry / CHECKSUM_FILE).read_text().strip()
        return _sha256(entry / "output.pkl") == want
    except OSError:
        return True


def _seal(entry: Path | None, again: bool = False) -> None:
    if entry is None or not (entry / "output.pkl").exists() or ((entry / CHECKSUM_FILE).exists() and not again):
        return
    try:
        tmp = entry / f".{CHECKSUM_FILE}.{os.getpid()}"
        tmp.write_text(_sha256(entry / "output.pkl") + "\n")
        os.replace(tmp, entry / CHECKSUM_FILE)
    except OSError:  # a read-only cache is still read
        pass


def code_version(*modules: str) -> str:
    """The code part of a cache key: :func:`dpmf_lib.dependencies.code_digest` of ``modules`` and everything local
    they import — the same digest the runner's staleness uses, so a prose edit keeps the entries and any code change
    in the closure retires them. Callers pass the module whose closure holds every line that changes the result."""
    from .dependencies import code_digest

    return code_digest(*modules)[:16]


def in_cache(func, *args, ignore: tuple[str, ...] = (), **kwargs) -> bool:
    """Whether ``func(*args, **kwargs)`` would be served from the cache now (False unless ``$DPMF_CACHE`` is on)."""
    if mode() != "on":
        return False
    return memory().cache(func, ignore=list(ignore)).check_call_in_cache(*args, **kwargs)


def legacy_dirs() -> list[Path]:
    """Where earlier versions kept their own caches (hand-hashed CSVs; a joblib store under the data directory)."""
    return [figures_dir() / ".cache" / "balu_ch3", data_dir() / "cache" / "hua"]


def clear() -> list[Path]:
    """Delete the cache's entries (``<cache_dir>/joblib``) and the legacy caches; returns what was removed."""
    gone = []
    for d in [cache_dir() / "joblib", *legacy_dirs()]:
        if d.exists():
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    _memory.cache_clear()
    return gone


def size_bytes() -> int:
    root = cache_dir() / "joblib"
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m dpmf_lib.cache", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clear", action="store_true", help="delete every cached result")
    args = ap.parse_args(argv)
    if args.clear:
        gone = clear()
        print("cache cleared: " + (", ".join(map(str, gone)) if gone else f"{cache_dir()} held nothing"))
    else:
        print(f"cache: {cache_dir()} ({size_bytes() / 2**20:.1f} MiB; ${MODE_VAR}={mode()})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
