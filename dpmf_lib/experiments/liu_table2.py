"""Liu, Wang & Smola (2015), Table 2: cache miss rates of C-SGD (and GraphChi), measured with cachegrind.

Paper (C-SGD | GraphChi; L1 and L3 data miss rates): d=16: 2.84% 0.43% | 12.77% 2.21%; d=256: 2.85% 0.50% |
12.89% 2.34%; d=2048: 3.3% 1.7% | 15% 9.8%. GraphChi is not available; our comparison row is the naive SGD (random
order over all ratings, items not renumbered), i.e. the access pattern C-SGD's tiers are designed to avoid.

Method: the one-thread C-SGD kernel (``_sgd_epoch_serial``: the same inner loop as the parallel kernel, prefetch on)
runs ``epochs`` passes over a stored layout under ``valgrind --tool=cachegrind --cache-sim=yes`` with the simulated
caches stated in the table (default: this machine's L1d and L3 geometry from /sys; cachegrind simulates two levels,
the last one standing for L3). A baseline run (one per d and order, same data file) does the same (interpreter start, imports, loading the data, loading or
compiling the kernel on a 2-rating problem) without the passes; a priming run first puts the kernel compiled for
valgrind's virtual CPU into numba's cache so that every counted run loads it alike; the baseline's counts are subtracted so only the kernel's data
references count: miss rate = Δ(D1 misses) / Δ(data refs) and Δ(LL data misses) / Δ(data refs), as cachegrind
defines "D1 miss rate" and "LLd miss rate". Data: the Netflix-shaped set (labelled stand-in unless fetched), a random
subset of ``min(n_ratings, budget / d)`` ratings per d so that a valgrind run stays short; the row says how many.
Without valgrind (or with ``use_valgrind: false``, the smoke profile) the rows carry the paper's numbers only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from ..bench.machine import cache_sizes
from ..claims import Measurement
from ..errors import ParameterError
from ..mf.data import load_for_mf
from ..mf.layout import naive_layout, tiered_layout
from ..outputs import attach
from ..plotting import figure, standin_title

PAPER = {16: (2.84, 0.43, 12.77, 2.21), 256: (2.85, 0.50, 12.89, 2.34), 2048: (3.3, 1.7, 15.0, 9.8)}
CLAIMS = {(16, "L1"): "liu-6.5-csgd-l1-miss-d16", (16, "LL"): "liu-6.5-csgd-l3-miss-d16",
          (2048, "L1"): "liu-6.5-csgd-l1-miss-d2048", (2048, "LL"): "liu-6.5-csgd-l3-miss-d2048"}


def _geometry(level: str, default_ways: int) -> tuple[int, int, int]:
    sizes = cache_sizes()
    size = sizes.get(level)
    ways = default_ways
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in base.glob("index*"):
        try:
            lvl = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            if kind != "Instruction" and ("L1d" if lvl == "1" else f"L{lvl}") == level:
                ways = int((idx / "ways_of_associativity").read_text().strip())
        except (OSError, ValueError):
            pass
    return int(size), ways, 64


def _parse(path: Path) -> dict:
    text = path.read_text()
    events = re.search(r"^events:\s*(.+)$", text, re.M).group(1).split()
    summary = re.search(r"^summary:\s*(.+)$", text, re.M).group(1).split()
    return dict(zip(events, map(int, summary)))


def _valgrind(npz, d, epochs, mode, cg_args, workdir) -> dict:
    out = Path(workdir) / f"cg.{d}.{Path(npz).stem}.{mode}.out"
    env = {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONHASHSEED": "0"}
    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=yes", f"--cachegrind-out-file={out}", *cg_args,
           sys.executable, "-m", "dpmf_lib.experiments._liu_cachegrind_driver", str(npz), str(d), str(epochs), mode]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"cachegrind run failed ({' '.join(cmd)}):\n{p.stderr[-2000:]}")
    return _parse(out)


def run(params: dict) -> pd.DataFrame:
    r = load_for_mf(params["dataset"], seed=params["seed"], standin_scale=params["standin_scale"],
                    max_ratings=params["max_ratings"])
    label = r.source.label
    rows, meas = [], []
    use = params["use_valgrind"] and shutil.which("valgrind") is not None
    l1 = _geometry("L1d", 8) if params["l1_bytes"] is None else (params["l1_bytes"], params["l1_ways"], 64)
    ll = _geometry("L3", 16) if params["ll_bytes"] is None else (params["ll_bytes"], params["ll_ways"], 64)
    for cfg in (l1, ll):
        if (cfg[0] // (cfg[1] * cfg[2])) & (cfg[0] // (cfg[1] * cfg[2]) - 1):
            raise ParameterError(f"cache {cfg}: size/(ways·64) must be a power of two for cachegrind")
    cg_args = [f"--D1={l1[0]},{l1[1]},{l1[2]}", f"--LL={ll[0]},{ll[1]},{ll[2]}"]
    cache_note = f"D1 {l1[0] // 1024} KiB {l1[1]}-way, LL {ll[0] // 2**20} MiB {ll[1]}-way, 64 B lines"
    jobs = []
    with tempfile.TemporaryDirectory(prefix="liu_table2_") as tmp:
        for d in params["dims"]:
            n = int(min(r.n_ratings, params["budget"] // d))
            sub = r if n >= r.n_ratings else r.subset(np.sort(np.random.default_rng(d).choice(r.n_ratings, n,
                                                                                              replace=False)))
            for order in ("tiered", "naive"):
                lay = tiered_layout(sub) if order == "tiered" else naive_layout(sub, seed=params["seed"])
                f = Path(tmp) / f"{order}_{d}.npz"
                np.savez(f, users=lay.users, items=lay.items, values=lay.values, seg=lay.seg, n_users=sub.n_users,
                         n_items=sub.n_items, prefetch=2 if order == "tiered" else 0)
                jobs.append((d, order, n, f))
        results = {}
        if use:
            tasks = []
            for d, order, n, f in jobs:
                tasks.append(((d, order), (f, d, params["epochs"], "run")))
                tasks.append(((d, order, "baseline"), (f, d, params["epochs"], "baseline")))
            # priming run: compiles the kernel for valgrind's virtual CPU into numba's cache if needed, so every
            # counted run (baseline included) loads it from the cache and the subtraction compares like with like
            _valgrind(jobs[0][3], jobs[0][0], params["epochs"], "baseline", cg_args, tmp)
            with ThreadPoolExecutor(max_workers=int(params["parallel_runs"])) as ex:
                futs = {key: ex.submit(_valgrind, *a, cg_args, tmp) for key, a in tasks}
                results = {k: v.result() for k, v in futs.items()}
    for d, order, n, f in jobs:
        p = PAPER.get(d, (np.nan,) * 4)
        row = {"dataset": label, "real": r.source.real, "d": d, "order": order, "n_ratings": n,
               "epochs": params["epochs"], "caches": cache_note,
               "paper_l1_pct": p[0] if order == "tiered" else p[2], "paper_l3_pct": p[1] if order == "tiered" else p[3],
               "paper_row": "C-SGD" if order == "tiered" else "GraphChi", "l1_miss_pct": np.nan, "ll_miss_pct": np.nan,
               "data_refs": np.nan}
        if (d, order) in results:
            a, b = results[(d, order)], results[(d, order, "baseline")]
            dr = (a["Dr"] + a["Dw"]) - (b["Dr"] + b["Dw"])
            row["data_refs"] = dr
            row["refs_per_update"] = dr / (n * params["epochs"])
            row["l1_miss_pct"] = 100.0 * ((a["D1mr"] + a["D1mw"]) - (b["D1mr"] + b["D1mw"])) / dr
            row["ll_miss_pct"] = 100.0 * ((a["DLmr"] + a["DLmw"]) - (b["DLmr"] + b["DLmw"])) / dr
            row["baseline_data_refs"] = b["Dr"] + b["Dw"]
            if order == "tiered":
                for lvl, col in (("L1", "l1_miss_pct"), ("LL", "ll_miss_pct")):
                    if (d, lvl) in CLAIMS:
                        meas.append(Measurement(CLAIMS[(d, lvl)], row[col], label, r.source.real,
                                                note=f"{n:,} ratings, {cache_note}; LL stands for L3"))
        rows.append(row)
    return attach(pd.DataFrame(rows), sources=[r.source], measurements=meas)


def plot(df: pd.DataFrame, params: dict):
    fig, axes = figure(ncols=2, width=4.6, height=3.6)
    for ax, (col, pcol, name) in zip(axes[0], (("l1_miss_pct", "paper_l1_pct", "L1"),
                                               ("ll_miss_pct", "paper_l3_pct", "last level (L3)"))):
        for order, g in df.groupby("order", sort=False):
            ax.plot(g.d, g[col], "o-", label=f"ours: {'C-SGD' if order == 'tiered' else 'naive SGD'}")
            ax.plot(g.d, g[pcol], "x--", label=f"paper: {g.paper_row.iloc[0]}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("dimension d")
        ax.set_ylabel(f"{name} data miss rate (%)")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    fig.suptitle(standin_title(f"Liu et al. Table 2: cache miss rates (cachegrind; {df.caches.iloc[0]})", df.dataset.unique()), fontsize=9, y=1.05)
    return fig
