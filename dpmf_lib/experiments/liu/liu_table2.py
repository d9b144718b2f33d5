"""Liu, Wang & Smola (2015), Table 2: cache miss rates of C-SGD (and GraphChi), measured with a cache simulator.

Paper (C-SGD | GraphChi; L1 and L3 data miss rates): d=16: 2.84% 0.43% | 12.77% 2.21%; d=256: 2.85% 0.50% |
12.89% 2.34%; d=2048: 3.3% 1.7% | 15% 9.8%. Section 6.5: C-SGD ran with software prefetch of the item vector two
ratings ahead ("we set prefetching stride to 2").

**Rows** (one process per d; every row runs the same one-thread kernel ``_sgd_epoch_serial``, EPOCHS passes):

* ``tiered``: C-SGD's order (items renumbered by popularity, user blocks, tiers 500 / 4,000 / rest inside a block);
* ``user-blocked, single tier``: the same user blocks and item renumbering, one tier — the tiering ablation;
* ``random``: one random permutation of all ratings, original item ids (naive SGD).

These three **compared rows use the same prefetch stride** (``prefetch``, default 0 = off, the project's default):
software prefetch changes the instruction mix (extra loads of ``items[k + 2]``; valgrind executes the prefetch hint
itself as no memory access), so a miss *rate* (misses / data references) of a row with prefetch is not comparable
with one without. A separate row ``tiered + prefetch 2`` is C-SGD as the paper ran it; the paper's C-SGD numbers and
the claims are compared with that row. Misses **per rating update** are given beside the rates: they do not depend
on how many other references an instruction mix makes.

**Measurement.** ``valgrind --tool=callgrind --cache-sim=yes --dump-before=getppid``: callgrind's cache simulation is
Cachegrind's (same write-allocate LRU two-level model: D1 and LL, the last standing for L3). The driver
(:mod:`._liu_cachegrind_driver`) calls ``os.getppid()`` right before and after each row's passes, so each row is
counted in a dump of its own; a null segment (two markers back to back) measures the markers' own cost, which is
subtracted. Why markers rather than a separate baseline process (interpreter start, imports, compile): one process
per d instead of two per row, and no run-to-run noise of the interpreter's references.
miss rate = D1 misses / data refs and LL misses / data refs, as Cachegrind defines "D1 miss rate" and "LLd miss rate".

**Simulated caches: the paper's 32 KB L1d / 6 MB L3** (``l1``/``ll``; null: this machine's from /sys). Why: the
paper does not say which cache Cachegrind simulated (its default is the host's, and the paper names two hosts: Table
1's laptop with 32 KB / 6 MB, Section 6's AWS c3.8xlarge with a 25 MB L3); Table 1 is the only geometry it states, and
a fixed geometry makes the table independent of the machine it runs on. Associativity (8-way L1d, 12-way L3, 64 B
lines: the Sandy Bridge i7 of Table 1) is our assumption. **Data sized for these caches:** each run keeps a random
subset of *whole users* (all their ratings) until ``max(min_ratings, budget / d)`` ratings, and every item. The item
side — what the tiers are about — is therefore at the dataset's full scale (at d = 16 the top-500 tier is 32 KB = the
L1, at d = 2048 it is 4 MB < the 6 MB L3, the paper's Section 5.2), and every user keeps its own number of ratings
(a random subset of *ratings* would leave ~2 per user and destroy the user-block reuse). The user side is smaller
than Netflix's 480k users: each row states U's and V's size and whether the model fits in the simulated L3 (then LL
misses are compulsory only).

**GraphChi** is not available here and none of these rows is GraphChi's order: GraphChi partitions users and items
into shards and sweeps one sub-block at a time from disk-backed shards (Section 6.3/6.5), with its own framework
overheads in the counted references. The ``random`` row is the access pattern tiering is designed to avoid, not a
stand-in for GraphChi; the paper's GraphChi numbers are shown for reference only.

Cost: each process starts Python and numba under valgrind (~45 s of CPU). numba's on-disk cache is keyed by the
CPU name and features numba detects, and under valgrind it detects valgrind's virtual CPU (``haswell`` with AVX2 on
the Zen 3 and Zen 4 hosts here), so the kernel would be compiled *under valgrind* whenever that cache entry is
missing — on every fresh clone, i.e. every CI run, most of the ``ci`` run's time. :func:`valgrind_cpu` asks a valgrind
process once what numba sees there, the driver compiles the
kernel *outside* valgrind for exactly that CPU name and feature string (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``,
``compile-only``), and the valgrind processes run with the same two variables and load it. The machine code is the
one valgrind's numba would have compiled (same LLVM target and features), so the counts are unchanged; the driver
reports how many signatures it still compiled (``compiled N``), and a warning says so when that is not 0. The
processes are submitted largest simulated work (ratings × d) first (:func:`submission_order`): at ``paper``, d = 2048
has ≈ 2× the work of d = 16 or 256, and submitted last it ran alone after the other two (≈ 3T on 2 workers, not 2T).

Data: the Netflix-shaped set (labelled stand-in unless fetched). Without valgrind (or with ``use_valgrind: false``,
the smoke profile) the layouts are built and the rows carry the paper's numbers only.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ...bench.machine import cache_sizes
from ...claims import Measurement
from ...errors import ParameterError
from ...mf.data import load_for_mf
from ...mf.layout import naive_layout, tiered_layout
from ...outputs import attach
from ...plotting import figure, standin_title

PAPER = {16: (2.84, 0.43, 12.77, 2.21), 256: (2.85, 0.50, 12.89, 2.34), 2048: (3.3, 1.7, 15.0, 9.8)}
CLAIMS = {(16, "L1"): "liu-6.5-csgd-l1-miss-d16", (16, "LL"): "liu-6.5-csgd-l3-miss-d16",
          (2048, "L1"): "liu-6.5-csgd-l1-miss-d2048", (2048, "LL"): "liu-6.5-csgd-l3-miss-d2048"}
ORDERS = ("tiered", "user-blocked, single tier", "random")
GRAPHCHI_NOTE = ("GraphChi (paper) is not run here; none of our rows is its shard-by-shard order. The random row is "
                 "the pattern tiering avoids, not a GraphChi stand-in.")


def _geometry(level: str, default_ways: int) -> tuple[int, int, int]:
    size = cache_sizes().get(level)
    ways = default_ways
    for idx in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            lvl = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            if kind != "Instruction" and ("L1d" if lvl == "1" else f"L{lvl}") == level:
                ways = int((idx / "ways_of_associativity").read_text().strip())
        except (OSError, ValueError):
            pass
    return int(size), ways, 64


def caches(params: dict) -> tuple[tuple[int, int, int], tuple[int, int, int], str]:
    """``(l1, ll, note)``: simulated (bytes, ways, line) of D1 and LL; ``l1``/``ll`` null = this machine's."""
    l1 = _geometry("L1d", 8) if params["l1"] is None else (int(params["l1"][0]), int(params["l1"][1]), 64)
    ll = _geometry("L3", 16) if params["ll"] is None else (int(params["ll"][0]), int(params["ll"][1]), 64)
    for cfg in (l1, ll):
        sets = cfg[0] // (cfg[1] * cfg[2])
        if sets < 1 or cfg[0] != sets * cfg[1] * cfg[2] or sets & (sets - 1):
            raise ParameterError(f"cache {cfg}: size must be ways·64·(a power of two) for the cache simulator")
    whose = "the paper's Table 1" if params["l1"] is not None and params["ll"] is not None else "this machine's"
    note = (f"D1 {l1[0] // 1024} KiB {l1[1]}-way, LL {ll[0] / 2**20:g} MiB {ll[1]}-way, 64 B lines ({whose})")
    return l1, ll, note


def user_subset(r, n_target: int, seed: int):
    """Whole users (all their ratings) in a seeded random order until ``n_target`` ratings; user ids compacted
    (keeping their relative order), every item kept. ``r`` itself when it has no more than ``n_target`` ratings."""
    if n_target >= r.n_ratings:
        return r
    counts = r.user_counts()
    perm = np.random.default_rng(seed).permutation(r.n_users)
    k = int(np.searchsorted(np.cumsum(counts[perm]), n_target)) + 1
    chosen = np.sort(perm[:k])
    keep = np.zeros(r.n_users, dtype=bool)
    keep[chosen] = True
    idx = np.flatnonzero(keep[r.users])
    new_id = np.full(r.n_users, -1, dtype=np.int64)
    new_id[chosen] = np.arange(k)
    sub = r.subset(idx, note=f"{k:,} whole users ({len(idx):,} ratings, seed {seed}) for the cache simulation")
    return replace(sub, users=new_id[sub.users].astype(np.int32), n_users=k, user_ids=None)


def submission_order(n_ratings: dict) -> list:
    """The dims ``{d: simulated ratings}`` largest simulated work (ratings × d) first, ties in the given order.

    The processes run ``parallel_runs`` at a time in submission order: with d = 2048 (≈ 2× the work of the others at
    the ``paper`` budget) submitted last, 2 workers took ≈ 3T (T = one d = 16 run) instead of ≈ 2T. The table's rows
    keep the order of ``dims``."""
    return sorted(n_ratings, key=lambda d: -int(n_ratings[d]) * int(d))


def row_specs(params: dict) -> list[dict]:
    """The rows of one d: ``name``, ``order``, ``prefetch`` and whether the row is ``compared`` (the three orders,
    all at ``params['prefetch']``) or the separate prefetch row (C-SGD as the paper ran it)."""
    pf = int(params["prefetch"])
    if pf < 0:
        raise ParameterError(f"prefetch must be a stride ≥ 0 (0 = off), got {params['prefetch']!r}")
    rows = [{"name": o if pf == 0 else f"{o} + prefetch {pf}", "order": o, "prefetch": pf, "compared": True}
            for o in ORDERS]
    extra = params["prefetch_row"]
    if extra is not None and int(extra) != pf:
        if int(extra) < 1:
            raise ParameterError(f"prefetch_row must be a stride ≥ 1 or null, got {extra!r}")
        rows.append({"name": f"tiered + prefetch {int(extra)}", "order": "tiered", "prefetch": int(extra),
                     "compared": False})
    return rows


def build_layouts(sub, specs: list[dict], params: dict, path: Path) -> None:
    """Write every row's layout of ``sub`` into one ``.npz`` for the driver."""
    arrays = {"n_rows": len(specs), "n_users": sub.n_users, "n_items": sub.n_items}
    for i, s in enumerate(specs):
        if s["order"] == "tiered":
            lay = tiered_layout(sub, block_users=params["block_users"], seed=params["seed"])
        elif s["order"] == "user-blocked, single tier":
            lay = tiered_layout(sub, block_users=params["block_users"], tiers=(max(1, sub.n_items),),
                                seed=params["seed"])
        else:
            lay = naive_layout(sub, seed=params["seed"])
        arrays.update({f"users_{i}": lay.users, f"items_{i}": lay.items, f"values_{i}": lay.values,
                       f"seg_{i}": lay.seg, f"prefetch_{i}": s["prefetch"]})
    np.savez(path, **arrays)


def _parse(path: Path) -> dict:
    text = path.read_text()
    events = re.search(r"^events:\s*(.+)$", text, re.M).group(1).split()
    summary = re.search(r"^(?:summary|totals):\s*(.+)$", text, re.M).group(1).split()
    counts = dict(zip(events, map(int, summary)))
    return {k: counts.get(k, 0) for k in ("Dr", "Dw", "D1mr", "D1mw", "DLmr", "DLmw")}


_CPU_QUERY = ("import llvmlite.binding as ll; from numba.core.codegen import get_host_cpu_features; "
              "print('cpu', ll.get_host_cpu_name(), get_host_cpu_features())")


def valgrind_cpu(env: dict | None = None) -> tuple[str, str]:
    """``(name, features)``: the CPU name and LLVM feature string numba detects inside a valgrind process (valgrind
    presents a virtual CPU of its own: ``haswell`` with AVX2 here, whatever the host). Kernels compiled outside
    valgrind for exactly these (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``) are the ones valgrind's numba would
    compile, and numba's on-disk cache serves them to the valgrind process."""
    p = subprocess.run(["valgrind", "--tool=none", "-q", sys.executable, "-c", _CPU_QUERY], capture_output=True,
                       text=True, env=env)
    m = re.search(r"^cpu (\S+) (\S+)$", p.stdout, re.M)
    if p.returncode != 0 or m is None:
        raise RuntimeError(f"could not read numba's CPU under valgrind:\n{p.stderr[-2000:]}")
    return m.group(1), m.group(2)


def _driver_env() -> dict:
    return {**os.environ, "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
            "PYTHONHASHSEED": "0"}


def valgrind_env() -> dict:
    """The driver's environment with numba pinned to valgrind's CPU (:func:`valgrind_cpu`)."""
    env = _driver_env()
    name, features = valgrind_cpu(env)
    return {**env, "NUMBA_CPU_NAME": name, "NUMBA_CPU_FEATURES": features}


def _driver_cmd(npz: Path, d: int, epochs: int, *extra: str) -> list[str]:
    return [sys.executable, "-m", "dpmf_lib.experiments.liu._liu_cachegrind_driver", str(npz), str(d), str(epochs), *extra]


def compile_outside_valgrind(npz: Path, env: dict) -> None:
    """Compile (or load) the driver's kernel in a plain process with ``env`` (see :func:`valgrind_env`), so that
    the valgrind processes find it in numba's cache."""
    p = subprocess.run(_driver_cmd(npz, 16, 1, "compile-only"), capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"compiling the cachegrind driver's kernel failed:\n{p.stderr[-2000:]}")


def _simulate(npz: Path, d: int, n_rows: int, epochs: int, cg_args: list, workdir: Path,
              env: dict | None = None) -> list[dict]:
    """Counts of every row's passes (null segment subtracted), from one callgrind process."""
    out = Path(workdir) / f"cg.{d}.out"
    env = _driver_env() if env is None else env
    cmd = ["valgrind", "--tool=callgrind", "--cache-sim=yes", "--dump-before=getppid", f"--callgrind-out-file={out}",
           *cg_args, *_driver_cmd(npz, d, epochs)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"callgrind run failed ({' '.join(cmd)}):\n{p.stderr[-2000:]}")
    compiled = int(re.search(r"^compiled (\d+)", p.stdout, re.M).group(1))
    if compiled:
        warnings.warn(f"liu_table2: the valgrind process for d = {d} compiled {compiled} kernel signature(s) "
                      "instead of loading them from numba's cache (slow, same counts)", stacklevel=2)
    markers = int(re.search(r"^markers (\d+)", p.stdout, re.M).group(1))
    dumps = sorted(Path(workdir).glob(f"cg.{d}.out.*"), key=lambda f: int(f.suffix[1:]))
    if markers != 2 + 2 * n_rows or len(dumps) != markers:
        raise RuntimeError(f"callgrind: {len(dumps)} dumps for {markers} markers (expected {2 + 2 * n_rows}): "
                           "something else in the driver called getppid, the segments cannot be told apart")
    null = _parse(dumps[1])
    return [{k: v - null[k] for k, v in _parse(dumps[3 + 2 * i]).items()} for i in range(n_rows)]


def run(params: dict) -> pd.DataFrame:
    r = load_for_mf(params["dataset"], seed=params["seed"], standin_scale=params["standin_scale"])
    label = r.source.label
    specs = row_specs(params)
    l1, ll, cache_note = caches(params)
    cg_args = [f"--D1={l1[0]},{l1[1]},{l1[2]}", f"--LL={ll[0]},{ll[1]},{ll[2]}"]
    use = params["use_valgrind"] and shutil.which("valgrind") is not None
    epochs = int(params["epochs"])
    rows, meas, results = [], [], {}
    with tempfile.TemporaryDirectory(prefix="liu_table2_") as tmp:
        subs = {}
        for d in params["dims"]:
            n = int(max(params["min_ratings"], params["budget"] // d))
            subs[d] = user_subset(r, n, seed=params["seed"] + d)
            build_layouts(subs[d], specs, params, Path(tmp) / f"rows_{d}.npz")
        if use:
            env = valgrind_env()
            compile_outside_valgrind(Path(tmp) / f"rows_{params['dims'][0]}.npz", env)
            with ThreadPoolExecutor(max_workers=int(params["parallel_runs"])) as ex:
                futs = {d: ex.submit(_simulate, Path(tmp) / f"rows_{d}.npz", d, len(specs), epochs, cg_args, tmp,
                                     env)
                        for d in submission_order({d: subs[d].n_ratings for d in params["dims"]})}
                results = {d: futs[d].result() for d in params["dims"]}  # rows below keep the order of `dims`
    for d in params["dims"]:
        sub = subs[d]
        p = PAPER.get(d, (np.nan,) * 4)
        model_bytes = 4 * d * (sub.n_users + sub.n_items)
        for i, s in enumerate(specs):
            row = {"dataset": label, "real": r.source.real, "d": d, "row": s["name"], "order": s["order"],
                   "prefetch": s["prefetch"], "compared": s["compared"], "n_users": sub.n_users,
                   "n_items": sub.n_items, "n_ratings": sub.n_ratings, "epochs": epochs, "caches": cache_note,
                   "u_mib": 4 * d * sub.n_users / 2**20, "v_mib": 4 * d * sub.n_items / 2**20,
                   "model_fits_ll": bool(model_bytes <= ll[0]),
                   "data_refs": np.nan, "refs_per_update": np.nan, "l1_miss_pct": np.nan, "ll_miss_pct": np.nan,
                   "l1_misses_per_update": np.nan, "ll_misses_per_update": np.nan,
                   "paper_csgd_l1_pct": p[0], "paper_csgd_l3_pct": p[1],
                   "paper_graphchi_l1_pct": p[2], "paper_graphchi_l3_pct": p[3]}
            if d in results:
                c = results[d][i]
                updates = sub.n_ratings * epochs
                refs = c["Dr"] + c["Dw"]
                l1m, llm = c["D1mr"] + c["D1mw"], c["DLmr"] + c["DLmw"]
                row.update(data_refs=refs, refs_per_update=refs / updates, l1_miss_pct=100.0 * l1m / refs,
                           ll_miss_pct=100.0 * llm / refs, l1_misses_per_update=l1m / updates,
                           ll_misses_per_update=llm / updates)
            rows.append(row)
    df = pd.DataFrame(rows)
    if results:
        paper_cfg = df[(df.order == "tiered") & (df.prefetch == 2)]
        if paper_cfg.empty:
            paper_cfg = df[df.order == "tiered"]
        for _, row in paper_cfg.iterrows():
            for lvl, col in (("L1", "l1_miss_pct"), ("LL", "ll_miss_pct")):
                if (row.d, lvl) in CLAIMS:
                    meas.append(Measurement(
                        CLAIMS[(row.d, lvl)], row[col], label, r.source.real, setting=f"d={row.d}",
                        note=(f"row '{row['row']}' (the paper's configuration); {row.n_ratings:,} ratings of "
                              f"{row.n_users:,} whole users, {cache_note}; LL stands for L3; model "
                              f"{'fits' if row.model_fits_ll else 'does not fit'} in the simulated LL")))
    return attach(df, sources=[r.source], measurements=meas)


#: each row's shared figure role (dpmf_lib.plotting.ROLES): the paper's configuration (tiered, prefetch 2), tiered
#: without prefetch, and the orders tiering is compared with
ROW_ROLES = {"tiered + prefetch 2": "paper", "tiered": "paper-alt", "random": "compared",
             "user-blocked, single tier": "compared-alt"}


def plot(df: pd.DataFrame, params: dict):
    from ...plotting import ROLES, legend_below

    fig, axes = figure(ncols=2, nrows=2, width=4.6, height=3.0)
    names = list(dict.fromkeys(df["row"]))
    dims = list(dict.fromkeys(df.d))
    w = 0.8 / max(1, len(names))
    x = np.arange(len(dims))
    panels = (("l1_miss_pct", "L1 data miss rate (%)", "paper_csgd_l1_pct", "paper_graphchi_l1_pct"),
              ("ll_miss_pct", "LL (L3) data miss rate (%)", "paper_csgd_l3_pct", "paper_graphchi_l3_pct"),
              ("l1_misses_per_update", "L1 misses per rating update (log)", None, None),
              ("ll_misses_per_update", "LL misses per rating update (log)", None, None))
    for ax, (col, ylabel, pc, pg) in zip(axes.ravel(), panels):
        for k, name in enumerate(names):
            g = df[df["row"] == name].set_index("d").reindex(dims)
            role = ROW_ROLES.get(name, "ours-2")
            ax.bar(x + (k - (len(names) - 1) / 2) * w, g[col], w, color=ROLES[role]["color"], edgecolor="white",
                   lw=0.5, hatch=None if g.compared.iloc[0] else "//",
                   label=name + ("" if g.compared.iloc[0] else " (the paper's C-SGD setting)"))
        if pc:  # the paper's C-SGD over our row in its configuration, GraphChi over the group's centre
            pd_ = df.drop_duplicates("d").set_index("d").reindex(dims)
            cfg = df[(df.order == "tiered") & (df.prefetch == 2)]
            k = names.index((cfg if len(cfg) else df[df.order == "tiered"])["row"].iloc[0])
            ax.plot(x + (k - (len(names) - 1) / 2) * w, pd_[pc], "*", color="#000000", mec="white", mew=0.5, ms=10,
                    ls="none", label="paper: C-SGD (prefetch 2)")
            ax.plot(x, pd_[pg], "x", color="#000000", ms=7, mew=1.5, ls="none", label="paper: GraphChi (not run here)")
            top = 1.15 * max(df[col].max(), pd_[pc].max())  # zoomed to C-SGD, ours and the paper's
            ax.set_ylim(0, top)
            for xi, v in zip(x, pd_[pg]):
                if v > top:  # GraphChi above the axis: its value at the top edge
                    ax.annotate(f"↑ GraphChi {v:g}", (xi, top), xytext=(0, -2), textcoords="offset points", ha="center",
                                va="top", fontsize="x-small")
        else:
            ax.set_yscale("log")
        ax.set_xticks(x, [f"d = {d}" for d in dims])
        ax.set_ylabel(ylabel, fontsize=8)
    fig.tight_layout()
    fig.suptitle(standin_title(f"Liu et al. Table 2: cache misses (callgrind cache simulation;\n{df.caches.iloc[0]})",
                               df.dataset.unique()), fontsize=9, y=1.07)
    legend = legend_below(fig, axes, ncol=3)
    fits = ", ".join(f"d={d}: U {g.u_mib.iloc[0]:.2g} + V {g.v_mib.iloc[0]:.2g} MiB"
                     f"{' (fits in LL: compulsory LL misses only)' if g.model_fits_ll.iloc[0] else ''}"
                     for d, g in df.groupby("d", sort=False))
    fig.canvas.draw()
    y = fig.transFigure.inverted().transform(legend.get_window_extent())[0][1]
    fig.text(0.5, y - 0.01, f"Compared rows (solid) share prefetch stride {params['prefetch']}; hatched: separate "
             f"prefetch row (the paper's C-SGD setting).\n{fits}\n{GRAPHCHI_NOTE}", ha="center", va="top", fontsize=7)
    return fig
