"""Benchmark suite ``mf``: C-SGD, naive SGD and fast SGLD throughput, peers (libmf, scikit-surprise) by time to a
common test RMSE, serving throughput, and the ratios of issue 3.

Data: the Netflix-shaped set (``dpmf_lib.mf.data.load_for_mf("netflix")``: the real data if fetched, else the labelled
synthetic stand-in at 1% / 20% of the published size, so ratings per user match Netflix; ``quick`` keeps 1M ratings,
``paper`` 20M). Throughput at large d uses a random subset so that
n_ratings·d stays within a budget (the record says how many ratings were used).

Configurations: ``csgd`` (tiered, users interleaved in batches of 8, no software prefetch — the defaults),
``csgd_prefetch2`` (prefetch stride 2, Section 6.5), ``csgd_usermajor`` (tiered, user-major inside a tier),
``naive_sgd`` (random order), ``sgld`` (fast: lookup table + lazy noise, fixed Λ).

Throughput: ``epochs`` rounds per configuration; the median updates/s over rounds 2.. counts (round 1 touches fresh
pages). Achieved GFLOP/s and GB/s use the nominal per-update work of :func:`dpmf_lib.mf.sgd_flops_bytes` (8d+10 flops;
16d+28 bytes if nothing were cached — so GB/s above the RAM ceiling means the caches are doing the work); SGLD adds
2(d+1) flops per noise vector (2 per update). Ceilings come from ``dpmf_lib.bench.machine.measure``.

Peers: same train/test split, d = ``peer_d``, one thread. libmf's RMSE after its last epoch is the common target;
each solver's time to first reach it is read from its RMSE-vs-time curve (C-SGD: kernel time + layout build; peers:
a fit per epoch count, end to end). Timings on a shared 2-core machine are noisy.
"""

from __future__ import annotations

import time

import numba
import numpy as np

from . import ratio, record

PROFILES = {
    "quick": dict(standin_scale=0.01, n_ratings=1_000_000, dims=(16, 128, 512, 2048), threads=(1, 2), budget=1.5e8, epochs=3,
                  peer_d=16, libmf_iters=(1, 2, 4, 8, 16), surprise_iters=(1, 3, 8), csgd_epochs=30,
                  serve_users=256, serve_d=1024),
    "paper": dict(standin_scale=0.2, n_ratings=20_000_000, dims=(16, 128, 512, 2048), threads=(1, 2), budget=4e9, epochs=4,
                  peer_d=16, libmf_iters=(1, 2, 4, 8, 16, 32), surprise_iters=(1, 2, 4, 8, 16), csgd_epochs=40,
                  serve_users=20_000, serve_d=1024),
}
SGD = dict(eta0=0.02, gamma=1.0, lam=5e-3)  # the paper's Netflix settings (Section 6.3)
SGLD = dict(gamma=0.6, zeta=0.07)  # paper's Netflix γ and ζ; η0 = 0.02/N (its 2e-10 × 1e8 ratings)


def _ceilings(profile: str) -> dict:
    try:
        from .machine import measure
    except ImportError:  # the machine suite is written separately
        return {}
    return measure(profile)


def _throughput(fn, n, d, kind, epochs):
    res = fn(epochs)
    ups = float(np.median(res.history["updates_per_s"].to_numpy()[1:])) if epochs > 1 else res.updates_per_s
    from ..mf import sgd_flops_bytes

    fl, by = sgd_flops_bytes(d)
    if kind == "sgld":
        fl += 4.0 * (d + 1)
    return ups, ups * fl / 1e9, ups * by / 1e9


def run(profile: str = "quick") -> dict:
    from ..mf import sample_sgld, serving_throughput, train_sgd, warmup
    from ..mf.data import load_for_mf, train_test
    from ..mf.peers import PeerUnavailable, libmf_curve, surprise_curve, time_to_rmse

    P = PROFILES[profile]
    warmup()
    records, ratios = [], []
    ceil = _ceilings(profile)
    for lvl, v in ceil.get("bandwidth_GBps", {}).items():
        records.append(record("machine_ceiling", "read_bandwidth", v, "GB/s", level=lvl, threads=1))
    if "fma_GFLOPs" in ceil:
        records.append(record("machine_ceiling", "fma_throughput", ceil["fma_GFLOPs"], "GFLOP/s", threads=1))
    full = load_for_mf("netflix", seed=0, standin_scale=P["standin_scale"], max_ratings=P["n_ratings"])
    label = full.source.label
    max_threads = numba.config.NUMBA_NUM_THREADS
    ups = {}
    for d in P["dims"]:
        n = int(min(full.n_ratings, P["budget"] / d))
        r = full if n >= full.n_ratings else full.subset(np.sort(np.random.default_rng(d).choice(full.n_ratings, n,
                                                                                                  replace=False)))
        for th in P["threads"]:
            if th > max_threads:
                continue
            cfgs = {
                "csgd": ("sgd", lambda e: train_sgd(r, d=d, epochs=e, order="tiered", n_threads=th, **SGD)),
                "naive_sgd": ("sgd", lambda e: train_sgd(r, d=d, epochs=e, order="naive", n_threads=th, **SGD)),
                "sgld": ("sgld", lambda e: sample_sgld(r, d=d, epochs=e, n_threads=th, fixed_lambda=(1.0, 1.0),
                                                       **SGLD)),
            }
            if th == 1:
                cfgs["csgd_prefetch2"] = ("sgd", lambda e: train_sgd(r, d=d, epochs=e, order="tiered", n_threads=1,
                                                                     prefetch_stride=2, **SGD))
                cfgs["csgd_usermajor"] = ("sgd", lambda e: train_sgd(r, d=d, epochs=e, order="tiered-usermajor",
                                                                     n_threads=1, **SGD))
            for name, (kind, fn) in cfgs.items():
                u, gf, gb = _throughput(fn, r.n_ratings, d, kind, P["epochs"])
                ups[(name, d, th)] = u
                common = dict(d=d, threads=th, n_ratings=r.n_ratings, dataset=label)
                records.append(record(name, "updates_per_s", u, "updates/s", **common))
                records.append(record(name, "achieved_gflops", gf, "GFLOP/s", **common))
                records.append(record(name, "nominal_traffic_gbps", gb, "GB/s", **common))
    # peers: time to a common test RMSE
    train, test = train_test(full, 0.1, seed=0)
    d = P["peer_d"]
    t0 = time.perf_counter()
    res = train_sgd(train, d=d, epochs=P["csgd_epochs"], n_threads=1, test=test, **SGD)
    setup = time.perf_counter() - t0 - float(res.history["seconds"].sum())
    cs_sec = (res.history["wall"] + setup).to_numpy()
    cs_rmse = res.history["test_rmse"].to_numpy()
    for s, e in zip(cs_sec, cs_rmse):
        records.append(record("csgd_curve", "test_rmse", e, "rmse", seconds=float(s), d=d, threads=1, dataset=label))
    peers = {}
    for name, curve, iters in (("libmf", libmf_curve, P["libmf_iters"]), ("surprise_svd", surprise_curve,
                                                                          P["surprise_iters"])):
        try:
            kw = {"n_threads": 1} if name == "libmf" else {}
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
        t_lib = time_to_rmse([x["seconds"] for x in lm], [x["test_rmse"] for x in lm], target)
        t_cs = time_to_rmse(cs_sec, cs_rmse, target)
        records.append(record("time_to_libmf_rmse", "seconds", t_cs, "s", solver="csgd", target=target, d=d))
        records.append(record("time_to_libmf_rmse", "seconds", t_lib, "s", solver="libmf", target=target, d=d))
        if "surprise_svd" in peers:
            sp = peers["surprise_svd"]
            t_sp = time_to_rmse([x["seconds"] for x in sp], [x["test_rmse"] for x in sp], target)
            records.append(record("time_to_libmf_rmse", "seconds", t_sp, "s", solver="surprise_svd", target=target,
                                  d=d))
        ratios.append(ratio("csgd_time_to_libmf_final_rmse_over_libmf_time", t_cs / t_lib, "<= 0.5"))
    # serving
    from ..mf import init_model

    m = init_model(min(P["serve_users"], full.n_users), full.n_items, P["serve_d"], seed=0)
    s = serving_throughput(m, k=10, repeats=2)
    for key in ("users_per_s", "scores_per_s", "recommendations_per_s", "gflops"):
        records.append(record("serving_topk", key, s[key], {"gflops": "GFLOP/s"}.get(key, key.replace("_per_s", "/s")),
                              d=P["serve_d"], k=10, n_items=full.n_items, n_users=m.U.shape[0]))
    if ("csgd", 128, 1) in ups and ("naive_sgd", 128, 1) in ups:
        ratios.append(ratio("csgd_over_naive_updates_d128_1thread", ups[("csgd", 128, 1)] / ups[("naive_sgd", 128, 1)],
                            ">= 3"))
    if ("sgld", 128, 1) in ups:
        ratios.append(ratio("sgld_over_csgd_updates_d128_1thread", ups[("sgld", 128, 1)] / ups[("csgd", 128, 1)],
                            ">= 0.5"))
    if ("csgd", 2048, 2) in ups:
        ratios.append(ratio("csgd_scaling_1_to_2_threads_d2048", ups[("csgd", 2048, 2)] / ups[("csgd", 2048, 1)],
                            ">= 1.6"))
    for dd in P["dims"]:
        if ("csgd_prefetch2", dd, 1) in ups:
            records.append(record("prefetch_speedup", "ratio", ups[("csgd_prefetch2", dd, 1)] / ups[("csgd", dd, 1)],
                                  "x", d=dd, threads=1, stride=2))
        if ("csgd_usermajor", dd, 1) in ups:
            records.append(record("interleave_speedup", "ratio", ups[("csgd", dd, 1)] / ups[("csgd_usermajor", dd, 1)],
                                  "x", d=dd, threads=1, batch_users=8))
    return {"records": records, "ratios": ratios}
