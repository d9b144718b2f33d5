"""Liu, Wang & Smola (2015), Table 1: capacity and single-threaded read/write bandwidth of the memory hierarchy.

The paper's Table 1 (MacBook Pro 2011, Core i7 2.0 GHz): HDD 3 TB 150/100 MB/s; SSD 256 GB 500/350 MB/s; RAM 16 GB
14/9 GB/s; L3 6 MB 16–44/7–30 GB/s; L1 32 KB 74–135/44–80 GB/s. We measure this machine:

- caches: sizes from /sys; read bandwidth from the ``machine`` bench suite (``dpmf_lib.bench.machine.measure``:
  summing a buffer of half the level's size), write bandwidth by filling a buffer of the same size (numba loop),
  best of ``repeats``; RAM: a buffer of 8× L3;
- disk (the filesystem holding ``disk_dir``): writing ``disk_mb`` MB with fsync, then reading it back after
  ``posix_fadvise(DONTNEED)`` drops it from the page cache (on a VM the "disk" is whatever backs the virtual disk).
Single thread throughout; the machine is shared (2 cores, other jobs), so the numbers are lower bounds of its ceilings.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

import numpy as np
import pandas as pd
from numba import njit

from ...bench.machine import cache_sizes, measure
from ...outputs import attach
from ...plotting import figure

PAPER = {"L1d": ("32KB", "74-135", "44-80"), "L2": (None, None, None), "L3": ("6MB", "16-44", "7-30"),
         "RAM": ("16GB", "14", "9"), "disk": ("256GB SSD / 3TB HDD", "0.5 / 0.15", "0.35 / 0.10")}


@njit(cache=True)
def _fill_repeated(buf, reps):
    for r in range(reps):
        v = np.float32(r)
        for i in range(buf.shape[0]):
            buf[i] = v


def write_bandwidth(nbytes: int, *, min_time: float = 0.05, repeats: int = 3) -> float:
    buf = np.zeros(max(64, nbytes // 4), dtype=np.float32)
    _fill_repeated(buf[:64], 1)
    reps = 1
    while True:
        t0 = time.perf_counter()
        _fill_repeated(buf, reps)
        if time.perf_counter() - t0 >= min_time or reps > 1 << 24:
            break
        reps *= 2
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        _fill_repeated(buf, reps)
        best = min(best, time.perf_counter() - t0)
    return buf.nbytes * reps / best / 1e9


def disk_bandwidth(directory: str, mb: int) -> tuple[float, float]:
    """(write GB/s with fsync, read GB/s after dropping the file from the page cache)."""
    data = np.random.default_rng(0).integers(0, 255, mb * 2**20, dtype=np.uint8).tobytes()
    fd, path = tempfile.mkstemp(dir=directory, prefix="liu_table1_")
    try:
        t0 = time.perf_counter()
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        w = len(data) / (time.perf_counter() - t0) / 1e9
        rfd = os.open(path, os.O_RDONLY)
        try:
            if hasattr(os, "posix_fadvise"):
                os.posix_fadvise(rfd, 0, 0, os.POSIX_FADV_DONTNEED)
            t0 = time.perf_counter()
            n = 0
            while True:
                chunk = os.read(rfd, 8 << 20)
                if not chunk:
                    break
                n += len(chunk)
            r = n / (time.perf_counter() - t0) / 1e9
        finally:
            os.close(rfd)
    finally:
        os.unlink(path)
    return w, r


def run(params: dict) -> pd.DataFrame:
    m = measure(params["machine_profile"])
    caches = cache_sizes()
    rows = []
    quick = params["machine_profile"] == "quick"
    for lvl, nbytes in m["buffer_bytes"].items():
        cap = caches.get(lvl) if lvl != "RAM" else os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        rows.append({"level": lvl, "capacity_bytes": cap, "buffer_bytes": nbytes,
                     "read_GBps": m["bandwidth_GBps"][lvl],
                     "write_GBps": write_bandwidth(nbytes, min_time=0.03 if quick else 0.2,
                                                   repeats=3 if quick else params["repeats"])})
    if params["disk_mb"] > 0:
        d = params["disk_dir"] or tempfile.gettempdir()
        w, r = disk_bandwidth(d, int(params["disk_mb"]))
        rows.append({"level": "disk", "capacity_bytes": shutil.disk_usage(d).total, "buffer_bytes": params["disk_mb"]
                     * 2**20, "read_GBps": r, "write_GBps": w})
    df = pd.DataFrame(rows)
    for i, col in enumerate(("paper_capacity", "paper_read_GBps", "paper_write_GBps")):
        df[col] = [PAPER.get(lvl, (None,) * 3)[i] for lvl in df.level]
    df["fma_GFLOPs_1core"] = m["fma_GFLOPs"]
    df["dataset"] = "machine"  # no ratings data: a measurement of this machine
    return attach(df)


def plot(df: pd.DataFrame, params: dict):
    fig, axes = figure(ncols=1, width=6.0, height=3.8)
    ax = axes[0][0]
    x = np.arange(len(df))
    ax.bar(x - 0.2, df.read_GBps, 0.4, label="read")
    ax.bar(x + 0.2, df.write_GBps, 0.4, label="write")
    ax.set_xticks(x, [f"{lv}\n{_fmt(c)}" for lv, c in zip(df.level, df.capacity_bytes)])
    ax.set_yscale("log")
    ax.set_ylabel("GB/s (single thread)")
    ax.legend(fontsize=8)
    ax.set_title("Liu et al. Table 1 on this machine: memory hierarchy bandwidth", fontsize=10)
    return fig


def _fmt(b) -> str:
    for unit, k in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if b >= k:
            return f"{b / k:.0f} {unit}"
    return f"{b} B"
