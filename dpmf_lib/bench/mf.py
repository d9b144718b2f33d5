"""Benchmark suite ``mf``: C-SGD, naive SGD and fast SGLD throughput in the regime the paper is about (user factors
out of L3), C-SGD's setup cost, time to a common test RMSE including setup for every solver (ours and libmf /
scikit-surprise at equal threads), serving throughput, and the speed-up ratios with their targets.

Data: the Netflix-shaped set (``dpmf_lib.mf.data.load_for_mf("netflix")``: the real data if fetched, else the labelled
synthetic stand-in, whose users and items scale with ``standin_scale`` so ratings per user match Netflix).
``quick``: the stand-in at 21% (~100.8k users, ~21M ratings) for the setup measurement, and a 5M-rating random subset of
it (all ~100k users kept, ~50 ratings per user) for throughput and peers — at d = 128 U alone is ~52 MB, beyond this
machine's 32 MB L3 (every throughput record carries ``U_bytes``, ``V_bytes``, ``stream_bytes`` beside ``L2_bytes`` and
``L3_bytes``). ``paper``: 20M ratings (96k users) for d ∈ {16, 128, 512, 2048}, plus the full Netflix shape
(100M ratings, 480k users) at d ∈ {16, 128}. Throughput at large d uses a random subset so that n_ratings·d stays
within a budget (the record says how many ratings were used).

Configurations: ``csgd`` (tiered, users interleaved in batches of 8, software prefetch of the user and item rows 8
ratings ahead — the defaults), ``csgd_noprefetch``, ``csgd_prefetch2`` (prefetch stride 2, Section 6.5),
``csgd_usermajor`` (tiered, user-major inside a tier), ``naive_sgd`` (random order, default prefetch),
``naive_sgd_noprefetch``, ``sgld`` (fast: lookup table + lazy noise, fixed Λ, default prefetch), and at 2 threads
``csgd_private_hot`` (``train_sgd(hot_rows="private")``, :mod:`dpmf_lib.mf.hot_rows`) and the diagnostic
``csgd_private_item_rows`` (below). ``prefetch_speedup`` records give ``csgd_prefetch2`` and ``csgd`` over
``csgd_noprefetch``, and ``naive_sgd`` over ``naive_sgd_noprefetch``.

Tiering: the target "C-SGD ≥ 3× naive at d = 128" is on ``csgd_over_naive_updates_d128_1thread_without_prefetch``,
the two orders on the same kernel with neither prefetching, because that isolates the order's effect.
``csgd_over_naive_updates_d128_1thread`` (both at stride 8) is shown without a target: prefetch hides more latency
for the random order than for the tiered one, so it measures prefetch, not tiering.

Thread scaling: ``csgd_scaling_1_to_2_threads_d{max d}`` (target ≥ 1.6). A host probe
(:func:`dpmf_lib.bench.machine.host_probe`: FMA-loop 1 -> 2 thread scaling and core-to-core latency) is taken next to
the 2-thread C-SGD measurement in every repeat, because this VM's two vCPUs are at times on one physical core or on
cores without a shared cache. A repeat whose probe scaled below ``TWO_CORE_FMA_SCALING`` or measured more than
``SHARED_CACHE_C2C_NS`` timed the host's placement, not the code, and is left out of every ratio with a 2-thread side
(:func:`dpmf_lib.bench.paired.paired_ratio`'s ``exclude``, with a note; fewer than half the repeats left gives no
verdict). The 2-thread updates/s records keep every repeat; the probes are summarised as
``machine_*_beside_2thread_*`` rows. At d = 128 the diagnostic ``csgd_private_item_rows`` runs the same kernel with
the second thread's item ids moved into a private copy of V (numba's static ``prange`` schedule gives each thread one
contiguous chunk): not a valid training, it estimates what sharing hot item rows between threads costs.

Private hot rows: ``csgd_private_hot`` is read as ``csgd_private_hot_scaling_1_to_2_threads_d{max d}`` (same line,
same guard) and ``csgd_private_hot_over_hogwild_d{max d}_2threads``; Hogwild stays ``train_sgd``'s default and keeps
its own target. Since a faster scheme that trains worse is no speed-up, its test RMSE is read beside it
(:func:`_hot_rows_convergence`): ``csgd_private_hot_test_rmse_over_1thread_d128`` (line ≤ 1.002), Hogwild's ratio shown
beside it.

Repeats: the speed of the same code drifts by tens of per cent over minutes on this shared host, so every configuration
at one d (both thread counts) is one interleaved group measured ``repeats`` times, the order reversed every other
repeat and the two sides of each targeted ratio next to each other (:mod:`dpmf_lib.bench.paired`). Every ratio is
formed within a repeat; the value is the median over repeats, with the range and the number of repeats that meet the
target alone (``met`` is judged on the median).

Throughput: each measurement trains ``epochs`` rounds on a fresh model (each order's layout is built once per d and
reused); its median updates/s over rounds 2.. counts (round 1 touches fresh pages). Achieved GFLOP/s and GB/s use the
nominal per-update work of :func:`dpmf_lib.mf.sgd_flops_bytes` (8d+10 flops; 16d+28 bytes if nothing were cached — so
GB/s above the RAM ceiling means the caches are doing the work); SGLD adds 4(d+1) flops per update for its noise.
Ceilings come from ``dpmf_lib.bench.machine.measure`` in the same run.

Setup: on the large set at d = 16, "layout + first epoch costs ≤ 2 epochs of SGD" is
``csgd_layout_plus_first_round_over_two_rounds_d16_{1,2}thread`` = ``(layout + first round) / (2 × median later
round)``, target ≤ 1, in wall time and, at one thread, in process CPU time (``..._cpu_time``, :func:`csgd_steps_cpu`).
The model's initialisation is left out of the targeted ratio because "2 epochs of SGD" start from an initialised
model too; ``csgd_setup_plus_first_round_over_two_rounds_...`` includes it and is printed beside it without a target.
The fast layout is also timed against the plain reference (:func:`dpmf_lib.mf.layout.tiered_layout_reference`).

Peers: same train/test split, d = ``peer_d``, one thread for every solver (libmf's multi-threaded scheduler can hang,
see ``dpmf_lib.experiments.liu._liu_mf.run_peer``; surprise is single-threaded). libmf runs with LIBMF's own defaults
(``mf_get_default_param``: η = 0.1, λ_p2 = λ_q2 = 0.1, no L1, 20 bins — the Python wrapper's defaults differ: L1 0.04,
no L2). libmf's RMSE after its last fit is the common target; each solver's time to first reach it is read from its
RMSE-vs-time curve: ours = setup + cumulative kernel time (test evaluation excluded), peers = a fit per epoch count,
end to end. These curves, the layout-vs-reference timing and serving are measured once (their ratios are far
from any line). Measured values are in docs/performance.md.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from . import ratio, record
from .machine import SHARED_CACHE_C2C_NS, TWO_CORE_FMA_SCALING
from .paired import interleave, median_record, paired_ratio, spread

PROFILES = {
    "quick": dict(standin_scale=0.21, setup_ratings=None, n_ratings=5_000_000, dims=(16, 128), threads=(1, 2),
                  budget=1e9, epochs=2, repeats=5, peer_d=16, libmf_iters=(1, 2, 4, 8, 16), surprise_iters=(1, 4),
                  csgd_epochs=20, serve_users=256, serve_d=1024, reference_layout=True, full_shape=None,
                  convergence=dict(d=128, seeds=3, epochs=10)),
    "paper": dict(standin_scale=0.2, setup_ratings=None, n_ratings=20_000_000, dims=(16, 128, 512, 2048),
                  threads=(1, 2), budget=4e9, epochs=3, repeats=3, peer_d=16, libmf_iters=(1, 2, 4, 8, 16, 32),
                  surprise_iters=(1, 2, 4, 8, 16), csgd_epochs=40, serve_users=20_000, serve_d=1024,
                  reference_layout=True, full_shape=dict(standin_scale=1.0, dims=(16, 128), epochs=2),
                  convergence=dict(d=128, seeds=3, epochs=10)),
}
SGD = dict(eta0=0.02, gamma=1.0, lam=5e-3)  # the paper's Netflix settings (Section 6.3)
# train_sgd's layout and model defaults, spelled out where the setup block builds them itself (a test holds them to
# Schedule's and train_sgd's defaults)
LAYOUT = dict(block_users=1000, tiers=(500, 4000), seed=0)
PREFETCH_STRIDE = 8
SGLD = dict(gamma=0.6, zeta=0.07)  # paper's Netflix γ and ζ; η0 = 0.02/N (its 2e-10 × 1e8 ratings)
LIBMF_DEFAULTS = dict(eta=0.1, lam=0.1, nr_bins=20)  # LIBMF's mf_get_default_param (C++), not the wrapper's


def _ceilings(profile: str) -> dict:
    try:
        from .machine import measure
    except ImportError:  # the machine suite is written separately
        return {}
    return measure(profile)


def _flops_bytes(d: int, kind: str) -> tuple[float, float]:
    from ..mf import sgd_flops_bytes

    fl, by = sgd_flops_bytes(d)
    if kind == "sgld":
        fl += 4.0 * (d + 1)
    return fl, by


def _later_rounds_rate(res) -> float:
    """updates/s: the median over rounds 2.. (round 1 touches the freshly copied factor matrices)."""
    h = res.history["updates_per_s"].to_numpy()
    return float(np.median(h[1:])) if len(h) > 1 else float(h[0])


def _sgd_measurement(rd, lay, d, epochs, threads, stride):
    from ..mf import Schedule, train_sgd

    def measure():
        return _later_rounds_rate(train_sgd(rd, d=d, epochs=epochs, layout=lay,
                                            schedule=Schedule(n_threads=threads, prefetch_stride=stride), **SGD))
    return measure


def _sgld_measurement(rd, lay, d, epochs, threads):
    from ..mf import Schedule, sample_sgld

    def measure():
        return _later_rounds_rate(sample_sgld(rd, d=d, epochs=epochs, layout=lay,
                                              schedule=Schedule(n_threads=threads), fixed_lambda=(1.0, 1.0), **SGLD))
    return measure


def _working_set(r, d, caches) -> dict:
    """Bytes the kernel touches per round: factor matrices (float32 rows) and the rating stream (12 B per rating),
    beside this machine's L2/L3 sizes."""
    return dict(U_bytes=int(r.n_users) * d * 4, V_bytes=int(r.n_items) * d * 4, stream_bytes=int(r.n_ratings) * 12,
                L2_bytes=caches.get("L2"), L3_bytes=caches.get("L3"))


def _subset(full, n, seed):
    if n >= full.n_ratings:
        return full
    return full.subset(np.sort(np.random.default_rng(seed).choice(full.n_ratings, n, replace=False)))


def _throughput_subset(r, d, budget):
    """The ratings the throughput records at dimension ``d`` use: a seeded subset keeping n_ratings·d within budget."""
    return _subset(r, int(min(r.n_ratings, budget / d)), d)


def _throughput_block(r, dims, threads, budget, epochs, repeats, label, caches, records, ups, tag="",
                      extra_cfgs=True, main_group=False, host_probe=None):
    """Every configuration at dimension ``d`` (all thread counts) as one interleaved group of ``repeats`` repeats
    (:func:`dpmf_lib.bench.paired.interleave`); ``ups[(name + tag, d, threads)]`` gets the per-repeat updates/s, so
    that the ratios can be formed within each repeat. Each order's layout is built once per ``d`` and reused.
    ``host_probe`` (a measurement of where the host runs two threads now, :func:`dpmf_lib.bench.machine.host_probe`)
    is taken next to the 2-thread C-SGD measurement in every repeat; its ``(FMA scaling, core-to-core ns)`` pairs go to
    ``ups[("host_probe" + tag, d, 2)]``. ``main_group``: the suite's main throughput group, the only one that also
    measures the private hot rows and (at d = 128) the private item rows at 2 threads."""
    from ..mf.csgd import make_layout

    max_threads = numba.config.NUMBA_NUM_THREADS
    for d in dims:
        rd = _throughput_subset(r, d, budget)
        ws = _working_set(rd, d, caches)
        orders = ("tiered", "naive") + (("tiered-usermajor",) if extra_cfgs else ())
        lays = {order: make_layout(rd, order) for order in orders}
        tiered, naive = lays["tiered"], lays["naive"]
        two = 2 in threads and max_threads >= 2
        # The group's order puts the two sides of each ratio with a target next to each other (interleave keeps
        # neighbours together, reversing every other repeat): naive / C-SGD without prefetch (tiering), SGLD / C-SGD,
        # C-SGD at 1 / 2 threads; then the private hot rows and the private item rows at 2 threads, after the host
        # probe (so their 1-thread denominator is two and three places away; the reversal every other repeat
        # balances that).
        group = {}
        if extra_cfgs:
            group[("naive_sgd_noprefetch", 1)] = _sgd_measurement(rd, naive, d, epochs, 1, 0)
            group[("csgd_noprefetch", 1)] = _sgd_measurement(rd, tiered, d, epochs, 1, 0)
            group[("csgd_prefetch2", 1)] = _sgd_measurement(rd, tiered, d, epochs, 1, 2)
            group[("csgd_usermajor", 1)] = _sgd_measurement(rd, lays["tiered-usermajor"], d, epochs, 1, 8)
        group[("naive_sgd", 1)] = _sgd_measurement(rd, naive, d, epochs, 1, 8)
        group[("sgld", 1)] = _sgld_measurement(rd, tiered, d, epochs, 1)
        group[("csgd", 1)] = _sgd_measurement(rd, tiered, d, epochs, 1, 8)
        if two:
            group[("csgd", 2)] = _sgd_measurement(rd, tiered, d, epochs, 2, 8)
            if host_probe is not None:
                group[("host_probe", 2)] = host_probe
            if main_group:
                group[("csgd_private_hot", 2)] = _private_hot_measurement(rd, tiered, d, epochs)
            if main_group and d == 128:
                group[("csgd_private_item_rows", 2)] = _private_items_measurement(rd, tiered, d, epochs)
            group[("sgld", 2)] = _sgld_measurement(rd, tiered, d, epochs, 2)
            group[("naive_sgd", 2)] = _sgd_measurement(rd, naive, d, epochs, 2, 8)
        values = interleave(group, repeats)
        for (name, th), v in values.items():
            ups[(name + tag, d, th)] = v
            if name == "host_probe":  # the finite probes (a probe that gave up is NaN; the ratio rows count them)
                for col, rec, metric, unit in ((0, "machine_fma_scaling_probe", "ratio", ""),
                                               (1, "machine_core_to_core_probe", "latency", "ns")):
                    ok = v[np.isfinite(v[:, col]), col]
                    if ok.size:
                        records.append(median_record(rec, metric, ok, unit, d=d, threads=th, n_ratings=rd.n_ratings,
                                                     dataset=label))
                continue
            if name == "csgd_private_item_rows":  # its V is twice the shared one: no working-set fields
                records.append(median_record(name, "updates_per_s", v, "updates/s", d=d, threads=th,
                                             n_ratings=rd.n_ratings, dataset=label, diagnostic="not a valid training"))
                continue
            common = dict(d=d, threads=th, n_ratings=rd.n_ratings, n_users=rd.n_users, n_items=rd.n_items,
                          dataset=label, **ws)
            fl, by = _flops_bytes(d, "sgld" if name == "sgld" else "sgd")
            records.append(median_record(name + tag, "updates_per_s", v, "updates/s", **common))
            records.append(median_record(name + tag, "achieved_gflops", v * fl / 1e9, "GFLOP/s", **common))
            records.append(median_record(name + tag, "nominal_traffic_gbps", v * by / 1e9, "GB/s", **common))


def private_item_layout(lay, n_items: int, threads: int = 2):
    """(items, n_items_total): ``lay.items`` with the ids of thread t's segments shifted by t·n_items, so that each
    thread writes its own copy of V, under numba's static ``prange`` schedule: ``threads`` contiguous chunks of the
    segments, the first ``n_seg mod threads`` of them one segment longer (numba's ``do_scheduling_signed``; checked
    against ``numba.get_thread_id`` in the tests). Diagnostic only (see the module doc)."""
    n_seg = lay.seg.shape[0] - 1
    q, r = divmod(n_seg, threads)
    bounds = np.concatenate([[0], np.cumsum([q + 1 if t < r else q for t in range(threads)])]).astype(np.int64)
    items = lay.items.copy()
    for t in range(1, threads):
        lo, hi = lay.seg[bounds[t]], lay.seg[bounds[t + 1]]
        items[lo:hi] += t * n_items
    return items, threads * n_items


def _private_items_measurement(rd, lay, d, epochs):
    """The C-SGD kernel at 2 threads with private item rows per thread (``lay``: the tiered layout of ``rd``): a
    measurement returning the median updates/s over rounds 2.. of a fresh model."""
    from ..mf import init_model
    from ..mf.csgd import num_threads
    from ..mf.sgd_kernels import _sgd_epoch, aligned_copy
    from ..mf.model import learning_rate

    items, n_tot = private_item_layout(lay, rd.n_items, 2)

    def measure():
        m = init_model(rd.n_users, n_tot, d, seed=0, b0=float(rd.values.mean()))
        U, V, bu, bi = aligned_copy(m.U), aligned_copy(m.V), m.bu.copy(), m.bi.copy()
        rates = []
        with num_threads(2):
            for t in range(1, epochs + 1):
                eta = np.float32(learning_rate(SGD["eta0"], SGD["gamma"], t))  # as train_sgd
                t0 = time.perf_counter()
                _sgd_epoch(lay.users, items, lay.values, lay.seg, U, V, bu, bi, np.float32(m.b0), eta,
                           np.float32(SGD["lam"]), np.float32(SGD["lam"]), np.int64(8))
                rates.append(lay.n_ratings / (time.perf_counter() - t0))
        return float(np.median(rates[1:])) if epochs > 1 else rates[0]
    return measure


def _private_hot_measurement(rd, lay, d, epochs):
    """C-SGD at 2 threads with private copies of the top tier's item rows per thread (``train_sgd`` with
    ``hot_rows="private"`` on ``lay``, the tiered layout of ``rd``; :mod:`dpmf_lib.mf.hot_rows`), measured as
    :func:`_sgd_measurement` measures the shared rows."""
    from ..mf import Schedule, train_sgd

    def measure():
        schedule = Schedule(n_threads=2, hot_rows="private", prefetch_stride=PREFETCH_STRIDE)
        return _later_rounds_rate(train_sgd(rd, d=d, epochs=epochs, layout=lay, schedule=schedule, **SGD))
    return measure


HOT_ROWS_RMSE_LINE = "<= 1.002"


def _final_test_rmse(scheme, train, test, d, epochs, seed):
    """Test RMSE after ``epochs`` rounds of C-SGD trained by ``scheme``: "1thread" (the sequential algorithm),
    "hogwild" (2 threads, shared rows) or "private_hot" (2 threads, ``hot_rows="private"``)."""
    from ..mf import Schedule, train_sgd

    schedule = Schedule(prefetch_stride=PREFETCH_STRIDE, block_users=LAYOUT["block_users"], tiers=LAYOUT["tiers"],
                        n_threads=1 if scheme == "1thread" else 2,
                        hot_rows="private" if scheme == "private_hot" else "shared")
    res = train_sgd(train, d=d, epochs=epochs, seed=seed, test=test, schedule=schedule, **SGD)
    return float(res.history["test_rmse"].iloc[-1])


def _hot_rows_convergence(full, P, label, records, ratios):
    """Does C-SGD with private hot rows train as well as the sequential algorithm? Per seed (its own split,
    layout and initial model), the test RMSE after ``epochs`` rounds at d = ``d`` for the three schemes of
    :func:`_final_test_rmse`; the ratios to the 1-thread run are paired over seeds. The line on the private-hot one,
    ``HOT_ROWS_RMSE_LINE`` (not worse by more than 0.2 %), is the workbook's: well under the differences the
    figures read (RMSE against ε moves by whole per cents), well over the seed-to-seed wobble of Hogwild against one
    thread (±0.05 %). Hogwild's ratio is shown beside it. The
    2-thread trainings get no host probe: where the host puts the threads changes their relative timing, hence which
    of the other thread's merges a block starts from, not the algorithm; the seeds' range shows that variation with
    the rest."""
    from ..mf.data import train_test

    C = P["convergence"]
    rd = _throughput_subset(full, C["d"], P["budget"])
    finals = {s: [] for s in ("1thread", "hogwild", "private_hot")}
    for seed in range(C["seeds"]):
        train, test = train_test(rd, 0.1, seed=seed)
        for scheme in finals:
            finals[scheme].append(_final_test_rmse(scheme, train, test, C["d"], C["epochs"], seed))
    for scheme, v in finals.items():
        records.append(median_record(f"csgd_{scheme}_final_test_rmse", "test_rmse", np.asarray(v), "rmse", d=C["d"],
                                     epochs=C["epochs"], seeds=C["seeds"], n_ratings=rd.n_ratings, dataset=label))
    ratios.append(paired_ratio(f"csgd_private_hot_test_rmse_over_1thread_d{C['d']}", finals["private_hot"],
                               finals["1thread"], HOT_ROWS_RMSE_LINE))
    ratios.append(paired_ratio(f"csgd_hogwild_test_rmse_over_1thread_d{C['d']}", finals["hogwild"],
                               finals["1thread"], None))


def _setup_measurement(big, order, threads):
    """A measurement: ``(layout, initialisation, first round, median later round)`` seconds of a 3-round
    ``train_sgd`` at d = 16, given the layout built just before with the same threads and arguments (what
    ``train_sgd`` does itself when given none). Its ``setup_seconds`` is then "initialisation": the argument checks,
    the model's N(0, 0.1²) draws and the copies into the layout's item order (``_internal_model``: an aligned copy of
    U, V and the item biases gathered by the layout's permutation; ~2 ms of the ~22 at the quick set's size)."""
    from ..mf import Schedule, train_sgd
    from ..mf.csgd import make_layout

    def measure():
        with num_threads_ctx(threads):
            t0 = time.perf_counter()
            lay = make_layout(big, order, **LAYOUT)
            layout = time.perf_counter() - t0
        res = train_sgd(big, d=16, epochs=3, layout=lay, schedule=Schedule(n_threads=threads,
                                                                          prefetch_stride=PREFETCH_STRIDE), **SGD)
        sec = res.history["seconds"].to_numpy()
        return layout, float(res.extra["setup_seconds"]), float(sec[0]), float(np.median(sec[1:]))
    return measure


def csgd_steps_cpu(r, d: int = 16, epochs: int = 3):
    """``(layout, initialisation, [round 1, round 2, ...], model)``: ``train_sgd``'s own steps at one thread — the
    tiered layout, the model's initialisation and its copy into the layout's item order, then one ``_sgd_epoch`` per
    round with ``train_sgd``'s arguments — each timed in process CPU time; ``model`` is the trained model in the
    ratings' id space, equal to ``train_sgd(r, d=d, epochs=epochs, schedule=Schedule(n_threads=1), **SGD)``'s (a
    test holds it so).

    Why not time ``train_sgd`` itself: its rounds are timed only by the wall clock, and the difference of a 3-round
    and a 1-round training's CPU time gives the later rounds but leaves every training's fixed costs (the model's
    copies in and out, the history) on the first round."""
    from ..mf import init_model, tiered_layout
    from ..mf.csgd import _external_model, _internal_model
    from ..mf.sgd_kernels import _sgd_epoch
    from ..mf.model import learning_rate

    with num_threads_ctx(1):
        c0 = _cpu()
        lay = tiered_layout(r, **LAYOUT)
        c1 = _cpu()
        m = _internal_model(init_model(r.n_users, r.n_items, d, seed=LAYOUT["seed"], b0=float(r.values.mean())), lay)
        c2 = _cpu()
        rounds = []
        for t in range(1, epochs + 1):
            eta = np.float32(learning_rate(SGD["eta0"], SGD["gamma"], t))
            a = _cpu()
            _sgd_epoch(lay.users, lay.items, lay.values, lay.seg, m.U, m.V, m.bu, m.bi, np.float32(m.b0), eta,
                       np.float32(SGD["lam"]), np.float32(SGD["lam"]), np.int64(PREFETCH_STRIDE))
            rounds.append(_cpu() - a)
    return c1 - c0, c2 - c1, rounds, _external_model(m, lay)


def _setup_cpu_measurement(big):
    """A measurement at one thread in process CPU time (user + system: page faults of fresh arrays count), which a
    co-tenant's load disturbs less than wall time: ``(layout, initialisation, first round, median later round)`` of
    :func:`csgd_steps_cpu`."""
    def measure():
        layout, init, rounds, _ = csgd_steps_cpu(big, 16, 3)
        return layout, init, rounds[0], float(np.median(rounds[1:]))
    return measure


def _setup_block(big, label, caches, P, records, ratios, host_probe=None):
    """C-SGD's setup against its rounds on the large set (d = 16), ``P["repeats"]`` interleaved repeats (the ratio
    is formed inside each training, then its median and range over repeats reported). One untimed layout build
    first: the first large allocations of a process can stall on the kernel's huge-page compaction (THP
    ``defrag=madvise`` here; measured 2.2 s vs 0.2 s for the same first touch of 400 MB), which would land on
    whichever configuration runs first. Later builds can stall too on a VM whose host backs memory lazily; the median
    over repeats absorbs them, and the range shows them.
    ``host_probe`` is taken next to the 2-thread C-SGD measurement, as in :func:`_throughput_block`."""
    from ..mf import tiered_layout

    tiered_layout(big, **LAYOUT)
    ws = _working_set(big, 16, caches)
    group = {}
    for th in (1, 2):
        if th > numba.config.NUMBA_NUM_THREADS:
            continue
        for name, order in (("csgd", "tiered"), ("naive_sgd", "naive")):
            group[(name, th)] = _setup_measurement(big, order, th)
            if name == "csgd" and th == 2 and host_probe is not None:
                group[("host_probe", 2)] = host_probe
    group[("csgd_cpu", 1)] = _setup_cpu_measurement(big)
    values = interleave(group, P["repeats"])
    unfit = _unfit_host_repeats(values.get(("host_probe", 2)))
    if ("host_probe", 2) in values:
        ratios += _probe_summaries("beside_2thread_setup_d16", values[("host_probe", 2)])
    for (name, th), v in values.items():
        if name in ("csgd_cpu", "host_probe"):
            continue
        layout, init, first, later = v[:, 0], v[:, 1], v[:, 2], v[:, 3]
        common = dict(d=16, threads=th, n_ratings=big.n_ratings, n_users=big.n_users, dataset=label, **ws)
        records.append(median_record(f"{name}_layout", "seconds", layout, "s", **common))
        records.append(median_record(f"{name}_init", "seconds", init, "s", **common))
        records.append(median_record(f"{name}_setup", "seconds", layout + init, "s", **common))
        records.append(median_record(f"{name}_first_round", "seconds", first, "s", **common))
        records.append(median_record(f"{name}_later_round", "seconds", later, "s", **common))
        if name == "csgd":
            guard = dict(exclude=unfit, exclude_reason=UNFIT_HOST) if th == 2 else {}
            ratios.append(paired_ratio(f"csgd_layout_plus_first_round_over_two_rounds_d16_{th}thread", layout + first,
                                       2 * later, "<= 1", **guard))
            ratios.append(paired_ratio(f"csgd_setup_plus_first_round_over_two_rounds_d16_{th}thread",
                                       layout + init + first, 2 * later, None, **guard))
    v = values[("csgd_cpu", 1)]
    layout_cpu, init_cpu, first_cpu, later_cpu = v[:, 0], v[:, 1], v[:, 2], v[:, 3]
    common = dict(d=16, threads=1, n_ratings=big.n_ratings, n_users=big.n_users, dataset=label, clock="process_cpu")
    records.append(median_record("csgd_layout_cpu", "seconds", layout_cpu, "s", **common))
    records.append(median_record("csgd_init_cpu", "seconds", init_cpu, "s", **common))
    records.append(median_record("csgd_first_round_cpu", "seconds", first_cpu, "s", **common))
    records.append(median_record("csgd_later_round_cpu", "seconds", later_cpu, "s", **common))
    ratios.append(paired_ratio("csgd_layout_plus_first_round_over_two_rounds_d16_1thread_cpu_time",
                               layout_cpu + first_cpu, 2 * later_cpu, "<= 1"))
    ratios.append(paired_ratio("csgd_setup_plus_first_round_over_two_rounds_d16_1thread_cpu_time",
                               layout_cpu + init_cpu + first_cpu, 2 * later_cpu, None))


UNFIT_HOST = (f"in which the host ran the two threads on one core or on cores without a shared cache (probed beside "
              f"them: FMA loop scaling < {TWO_CORE_FMA_SCALING} or core-to-core latency > {SHARED_CACHE_C2C_NS:g} ns)")


def _unfit_host_repeats(probes):
    """Per repeat, True where the host probe taken beside the 2-thread measurement (rows of ``(FMA scaling,
    core-to-core ns)``, :func:`dpmf_lib.bench.machine.host_probe`) found the two threads on one core or on cores
    without a shared cache, or failed (not finite); None without a probe (nothing is left out)."""
    if probes is None:
        return None
    p = np.asarray(probes, dtype=np.float64).reshape(-1, 2)
    return ~(p[:, 0] >= TWO_CORE_FMA_SCALING) | ~(p[:, 1] <= SHARED_CACHE_C2C_NS)


def _probe_summaries(where: str, probes) -> list[dict]:
    """The host probes of one group as two rows of the ratio table (median and range of the finite values, no
    target): the FMA loop's 1 -> 2 thread scaling and the core-to-core latency (ns). A probe that gave up (NaN) is
    counted in a note rather than turning the row into NaN."""
    p = np.asarray(probes, dtype=np.float64).reshape(-1, 2)
    out = []
    for name, col in ((f"machine_fma_scaling_{where}", p[:, 0]), (f"machine_core_to_core_ns_{where}", p[:, 1])):
        ok = col[np.isfinite(col)]
        row = ratio(name, float(np.median(ok)) if ok.size else float("nan"), None)
        if ok.size:
            row.update(spread(ok))
        if ok.size < col.size:
            row["note"] = f"{col.size - ok.size} of {col.size} probes gave up (NaN: the threads could not hand over)"
        out.append(row)
    return out


def _cpu() -> float:
    """Process CPU time, user + system, all threads (``CLOCK_PROCESS_CPUTIME_ID``, nanosecond resolution: clock
    ticks of ``os.times()`` are too coarse for a round of the quick profile)."""
    import time

    return time.process_time()


def num_threads_ctx(n):
    from ..mf import num_threads

    return num_threads(n)


def _layout_block(r, P, records, ratios):
    """The fast layout against the plain reference on the same ratings (same thread count as the run)."""
    from ..mf import tiered_layout
    from ..mf.layout import tiered_layout_reference

    t0 = time.perf_counter()
    tiered_layout(r)
    t_fast = time.perf_counter() - t0
    records.append(record("tiered_layout_fast", "seconds", t_fast, "s", n_ratings=r.n_ratings, n_users=r.n_users,
                          threads=numba.get_num_threads()))
    if P["reference_layout"]:
        t0 = time.perf_counter()
        tiered_layout_reference(r)
        t_ref = time.perf_counter() - t0
        records.append(record("tiered_layout_reference", "seconds", t_ref, "s", n_ratings=r.n_ratings,
                              n_users=r.n_users))
        ratios.append(ratio("tiered_layout_reference_time_over_fast", t_ref / t_fast, None))


def _paired_record(name, numerator, denominator, **params) -> dict:
    """A speed-up record (metric ``ratio``): the median of per-repeat ratios, their spread beside it."""
    per_repeat = np.asarray(numerator) / np.asarray(denominator)
    return median_record(name, "ratio", per_repeat, "x", **params)


def _curve_records(name, seconds, rmse, d, label, records, **extra):
    for s_, e in zip(seconds, rmse):
        records.append(record(f"{name}_curve", "test_rmse", e, "rmse", seconds=float(s_), d=d, threads=1,
                              dataset=label, **extra))


def run(profile: str = "quick") -> dict:
    from ..mf import Schedule, sample_sgld, serving_throughput, train_sgd, warmup
    from ..mf.data import load_for_mf, train_test
    from ..mf.peers import PeerUnavailable, libmf_curve, surprise_curve, time_to_rmse
    from .machine import cache_sizes, fma_scaling, host_probe

    P = PROFILES[profile]
    warmup()
    records, ratios = [], []
    caches = cache_sizes()
    ceil = _ceilings(profile)
    for lvl, v in ceil.get("bandwidth_GBps", {}).items():
        records.append(record("machine_ceiling", "read_bandwidth", v, "GB/s", level=lvl, threads=1))
    if "fma_GFLOPs" in ceil:
        records.append(record("machine_ceiling", "fma_throughput", ceil["fma_GFLOPs"], "GFLOP/s", threads=1))
    for th, v in ceil.get("fma_GFLOPs_by_threads", {}).items():
        records.append(record("machine_ceiling", "fma_throughput_parallel_loop", v, "GFLOP/s", threads=th))
    for lvl, size in caches.items():
        records.append(record("machine_ceiling", "cache_size", size, "bytes", level=lvl))
    probe = host_probe if numba.config.NUMBA_NUM_THREADS >= 2 else None  # beside each 2-thread timing
    big = load_for_mf("netflix", seed=0, standin_scale=P["standin_scale"], max_ratings=P["setup_ratings"])
    label = big.source.label
    _setup_block(big, label, caches, P, records, ratios, host_probe=probe)
    full = _subset(big, P["n_ratings"], 0)
    del big
    _layout_block(full, P, records, ratios)
    ups = {}
    _throughput_block(full, P["dims"], P["threads"], P["budget"], P["epochs"], P["repeats"], label, caches, records,
                      ups, main_group=True, host_probe=probe)
    if numba.config.NUMBA_NUM_THREADS >= 2:
        _hot_rows_convergence(full, P, label, records, ratios)
    # peers and our solvers: time to a common test RMSE, setup included, one thread each
    train, test = train_test(full, 0.1, seed=0)
    d = P["peer_d"]
    ours = {}
    one = Schedule(n_threads=1)
    for name, fn in (("csgd", lambda: train_sgd(train, d=d, epochs=P["csgd_epochs"], schedule=one, test=test, **SGD)),
                     ("naive_sgd", lambda: train_sgd(train, d=d, epochs=P["csgd_epochs"],
                                                     schedule=Schedule(order="naive", n_threads=1), test=test, **SGD)),
                     ("sgld", lambda: sample_sgld(train, d=d, epochs=P["csgd_epochs"], schedule=one, test=test,
                                                  fixed_lambda=(1.0, 1.0), **SGLD))):
        res = fn()
        setup = float(res.extra["setup_seconds"])
        sec = (res.history["wall"] + setup).to_numpy()
        rm = res.history["test_rmse"].to_numpy()
        ours[name] = (sec, rm)
        _curve_records(name, sec, rm, d, label, records, setup_seconds=setup)
    peers = {}
    for name, curve, iters in (("libmf", libmf_curve, P["libmf_iters"]), ("surprise_svd", surprise_curve,
                                                                          P["surprise_iters"])):
        try:
            kw = {"n_threads": 1, **LIBMF_DEFAULTS} if name == "libmf" else {}
            rows = curve(train, test, d=d, iters=iters, **kw)
        except PeerUnavailable as exc:
            records.append(record(name, "unavailable", float("nan"), "", reason=str(exc)))
            continue
        peers[name] = rows
        for row in rows:
            records.append(record(f"{name}_curve", "test_rmse", row["test_rmse"], "rmse", seconds=row["seconds"],
                                  epochs=row["epochs"], d=d, threads=1, dataset=label))
    if "libmf" in peers:
        lm = peers["libmf"]
        target = lm[-1]["test_rmse"]
        times = {"libmf": time_to_rmse([x["seconds"] for x in lm], [x["test_rmse"] for x in lm], target)}
        for name, (sec, rm) in ours.items():
            times[name] = time_to_rmse(sec, rm, target)
        if "surprise_svd" in peers:
            sp = peers["surprise_svd"]
            times["surprise_svd"] = time_to_rmse([x["seconds"] for x in sp], [x["test_rmse"] for x in sp], target)
        for name, t in times.items():
            records.append(record("time_to_libmf_rmse", "seconds", t, "s", solver=name, target=target, d=d,
                                  threads=1, setup_included=True))
        ratios.append(ratio("csgd_time_to_libmf_final_rmse_over_libmf_time", times["csgd"] / times["libmf"], "<= 0.5"))
        if np.isfinite(times["naive_sgd"]):
            ratios.append(ratio("naive_sgd_time_to_libmf_final_rmse_over_csgd_time", times["naive_sgd"] / times["csgd"],
                                None))
    # serving
    from ..mf import init_model

    m = init_model(min(P["serve_users"], full.n_users), full.n_items, P["serve_d"], seed=0)
    s = serving_throughput(m, k=10, repeats=2)
    for key in ("users_per_s", "scores_per_s", "recommendations_per_s", "gflops"):
        records.append(record("serving_topk", key, s[key], {"gflops": "GFLOP/s"}.get(key, key.replace("_per_s", "/s")),
                              d=P["serve_d"], k=10, n_items=full.n_items, n_users=m.U.shape[0]))
    # the full Netflix shape (paper only)
    fs = P["full_shape"]
    if fs is not None:
        del full, train, test
        netflix = load_for_mf("netflix", seed=0, standin_scale=fs["standin_scale"])
        _throughput_block(netflix, fs["dims"], P["threads"], float("inf"), fs["epochs"], P["repeats"],
                          netflix.source.label, caches, records, ups, tag="_netflix_full", extra_cfgs=False,
                          host_probe=probe)
    fma = ceil.get("fma_GFLOPs")
    # every ratio below is formed within each repeat of one interleaved group (same d), then summarised; the FMA
    # share's denominator is the one ceiling measured at the start (its range is the kernel's alone)
    if ("csgd", 128, 1) in ups and ("naive_sgd", 128, 1) in ups:
        # both at the default stride 8: shown, no target (prefetch narrows the gap; see the module docstring)
        ratios.append(paired_ratio("csgd_over_naive_updates_d128_1thread", ups[("csgd", 128, 1)],
                                   ups[("naive_sgd", 128, 1)], None))
    if ("csgd_noprefetch", 128, 1) in ups and ("naive_sgd_noprefetch", 128, 1) in ups:
        # the tiering effect: both orders on the same kernel, neither prefetching
        ratios.append(paired_ratio("csgd_over_naive_updates_d128_1thread_without_prefetch",
                                   ups[("csgd_noprefetch", 128, 1)], ups[("naive_sgd_noprefetch", 128, 1)], ">= 3"))
    if ("sgld", 128, 1) in ups:
        ratios.append(paired_ratio("sgld_over_csgd_updates_d128_1thread", ups[("sgld", 128, 1)], ups[("csgd", 128, 1)],
                                   ">= 0.5"))
    if fma:
        for dd in P["dims"]:
            if dd >= 128 and ("csgd", dd, 1) in ups:
                gflops = ups[("csgd", dd, 1)] * _flops_bytes(dd, "sgd")[0] / 1e9
                ratios.append(paired_ratio(f"csgd_fraction_of_fma_ceiling_d{dd}_1thread", gflops,
                                           np.full_like(gflops, fma), ">= 0.3"))
    dmax = max(P["dims"])

    def unfit(dd):
        return _unfit_host_repeats(ups.get(("host_probe", dd, 2)))

    if ("csgd", dmax, 2) in ups:
        ratios.append(paired_ratio(f"csgd_scaling_1_to_2_threads_d{dmax}", ups[("csgd", dmax, 2)],
                                   ups[("csgd", dmax, 1)], ">= 1.6", exclude=unfit(dmax),
                                   exclude_reason=UNFIT_HOST))
    if ("csgd_private_hot", dmax, 2) in ups:
        ratios.append(paired_ratio(f"csgd_private_hot_scaling_1_to_2_threads_d{dmax}", ups[("csgd_private_hot", dmax, 2)],
                                   ups[("csgd", dmax, 1)], ">= 1.6", exclude=unfit(dmax),
                                   exclude_reason=UNFIT_HOST))
        ratios.append(paired_ratio(f"csgd_private_hot_over_hogwild_d{dmax}_2threads", ups[("csgd_private_hot", dmax, 2)],
                                   ups[("csgd", dmax, 2)], None, exclude=unfit(dmax), exclude_reason=UNFIT_HOST))
    if fma_scaling(ceil) is not None:  # one reading at the start of the run
        ratios.append(ratio("machine_fma_scaling_1_to_2_threads", fma_scaling(ceil), None))
    for dd in P["dims"]:  # every repeat's probe: the host as the 2-thread timings saw it
        if ("host_probe", dd, 2) in ups:
            ratios += _probe_summaries(f"beside_2thread_runs_d{dd}", ups[("host_probe", dd, 2)])
    if ("csgd_private_item_rows", 128, 2) in ups and ("csgd", 128, 2) in ups:
        ratios.append(paired_ratio("csgd_private_over_shared_item_rows_d128_2threads",
                                   ups[("csgd_private_item_rows", 128, 2)], ups[("csgd", 128, 2)], None,
                                   exclude=unfit(128), exclude_reason=UNFIT_HOST))
    if ("csgd_private_item_rows", 128, 2) in ups and ("csgd", 128, 1) in ups:
        ratios.append(paired_ratio("csgd_scaling_1_to_2_threads_d128_private_item_rows",
                                   ups[("csgd_private_item_rows", 128, 2)], ups[("csgd", 128, 1)], None,
                                   exclude=unfit(128), exclude_reason=UNFIT_HOST))
    for dd in P["dims"]:
        for cfg, stride in (("csgd_prefetch2", 2), ("csgd", 8)):
            if (cfg, dd, 1) in ups and ("csgd_noprefetch", dd, 1) in ups:
                records.append(_paired_record("prefetch_speedup", ups[(cfg, dd, 1)], ups[("csgd_noprefetch", dd, 1)],
                                              d=dd, threads=1, stride=stride))
        if ("naive_sgd", dd, 1) in ups and ("naive_sgd_noprefetch", dd, 1) in ups:
            records.append(_paired_record("prefetch_speedup_naive", ups[("naive_sgd", dd, 1)],
                                          ups[("naive_sgd_noprefetch", dd, 1)], d=dd, threads=1, stride=8))
        if ("csgd_usermajor", dd, 1) in ups:
            records.append(_paired_record("interleave_speedup", ups[("csgd", dd, 1)], ups[("csgd_usermajor", dd, 1)],
                                          d=dd, threads=1, batch_users=8))
    if fs is not None:
        for dd in fs["dims"]:
            key_c, key_n = ("csgd_netflix_full", dd, 1), ("naive_sgd_netflix_full", dd, 1)
            if key_c in ups and key_n in ups:  # both prefetching: shown, as above
                ratios.append(paired_ratio(f"csgd_over_naive_updates_d{dd}_1thread_netflix_full", ups[key_c],
                                           ups[key_n], None))
    return {"records": records, "ratios": ratios}
