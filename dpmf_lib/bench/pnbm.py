"""Benchmark of the DP-PNBM trainers: cost per iteration of DPSGD-PNBM and per step of the
DPPS-PNBM SGLD chain, the reference numpy path (``impl="numpy"``: numpy's Laplace / Gaussian on the M×M matrix, then
the update) against the fused kernels (``impl="fused"``: the noise drawn inside one update pass), in ONE run.

ML-100K fold u1 (real; M = 1682 items). ``quick``: DPSGD K = 4 iterations at γ = 0.2 (the paper profile's γ),
SGLD T = 20 steps at L = 1000 (and 8 chains in lockstep sharing the noise: common random numbers, as the DPPS grids
run); best of 3 timed runs per path, the two paths interleaved so that load on the shared
machine hits both alike. ``paper``: K = 10, T = 60, best of 5. Per-iteration = the trainer's own loop time
(``info["seconds"]``, set-up and the final prediction excluded) / iterations; per-run = the whole call, which is what
a grid point costs (params/pnbm_fig*.yaml quote these for their budget estimates). The records also give one noise
draw alone (numpy's ``rng.laplace`` on the float64 M×M matrix; the fused Laplace fill) to show where the time went.
Absolute seconds drift with the machine's load: compare the ratios of one run.
"""

from __future__ import annotations

import math
import time

import numpy as np

from . import ratio, record
from ..nbm import runs
from ..nbm.kernels import laplace_fill_kernel, normal_fill_kernel
from ..nbm.model import sample_pnbm, sample_pnbm_batch, train_pnbm

PROFILES = {"quick": {"K": 4, "T": 20, "repeats": 3}, "paper": {"K": 10, "T": 60, "repeats": 5}}
IMPLS = ("numpy", "fused")


def _best(fn, repeats: int) -> tuple[float, float]:
    """(best loop seconds, best whole-call seconds) over ``repeats`` calls of ``fn() -> result``."""
    loop, whole = math.inf, math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        res = fn()
        whole = min(whole, time.perf_counter() - t0)
        loop = min(loop, res.info["seconds"])
    return loop, whole


def run(profile: str = "quick") -> dict:
    cfg = PROFILES[profile]
    train, test = runs.fold_data("ml-100k", 1)
    label = runs._dataset("ml-100k").source.label
    M = train.n_items
    K, T, reps = cfg["K"], cfg["T"], cfg["repeats"]
    dkw = dict(epsilon=1.0, K=K, gamma=0.2, eta=0.1, lam=0.005, beta=10.0, C=10.0, Nk=500, seed=0, test=test)
    skw = dict(epsilon=20.0, T=T, L=1000, eta1=8e-6, rho=0.09, lam=0.02, Nk=500, seed=0, test=test)
    for impl in IMPLS:  # warm-up: compile / load the numba caches outside the timings
        train_pnbm(train, **{**dkw, "K": 1}, impl=impl)
        sample_pnbm(train, **{**skw, "T": 1}, impl=impl)
    dp = {impl: [math.inf, math.inf] for impl in IMPLS}
    sg = {impl: [math.inf, math.inf] for impl in IMPLS}
    for _ in range(reps):  # interleaved: one call of each path per round
        for impl in IMPLS:
            lo, wh = _best(lambda: train_pnbm(train, **dkw, impl=impl), 1)
            dp[impl] = [min(dp[impl][0], lo), min(dp[impl][1], wh)]
            lo, wh = _best(lambda: sample_pnbm(train, **skw, impl=impl), 1)
            sg[impl] = [min(sg[impl][0], lo), min(sg[impl][1], wh)]
    # 8 SGLD chains in lockstep with common random numbers (what runs.run_grid does for a fold's DPPS grid)
    chains = [{"epsilon": 20.0 * (k + 1), "eta1": 8e-6, "rho": 0.09, "lam": 0.02} for k in range(8)]
    bkw = {k: v for k, v in skw.items() if k not in ("epsilon", "eta1", "rho", "lam")}
    sample_pnbm_batch(train, chains, **{**bkw, "T": 1})
    batch = math.inf
    for _ in range(max(1, reps - 1)):
        res = sample_pnbm_batch(train, chains, **bkw)
        batch = min(batch, res[0].info["seconds"] * len(chains))  # info: the batch's loop time shared per chain
    records = []
    common = dict(dataset=label, fold=1, n_items=M, n_train=train.n_ratings)
    records.append(record("dpps-pnbm-chain-step-fused-batch8", "seconds_per_chain_step", batch / (T * len(chains)),
                          "s", impl="fused", chains=len(chains), T=T, L=1000, **common))
    for impl in IMPLS:
        records.append(record(f"dpsgd-pnbm-iteration-{impl}", "seconds_per_iteration", dp[impl][0] / K, "s",
                              impl=impl, K=K, gamma=0.2, Nk=500, **common))
        records.append(record(f"dpsgd-pnbm-run-{impl}", "seconds_per_run", dp[impl][1], "s", impl=impl, K=K,
                              gamma=0.2, **common))
        records.append(record(f"dpps-pnbm-step-{impl}", "seconds_per_step", sg[impl][0] / T, "s", impl=impl, T=T,
                              L=1000, **common))
        records.append(record(f"dpps-pnbm-run-{impl}", "seconds_per_run", sg[impl][1], "s", impl=impl, T=T, L=1000,
                              **common))
    # one noise draw alone: what the reference path pays for the M×M noise
    rng = np.random.default_rng(0)
    out = np.empty((M, M), np.float32)
    key = np.uint64(1)
    laplace_fill_kernel(key, 1.0, out)
    normal_fill_kernel(key, out)
    draws = {}
    for name, fn in (("laplace-numpy-float64", lambda: rng.laplace(0.0, 1.0, size=(M, M))),
                     ("laplace-fused-float32", lambda: laplace_fill_kernel(key, 1.0, out)),
                     ("normal-numpy-float32", lambda: rng.standard_normal(size=(M, M), dtype=np.float32)),
                     ("normal-fused-float32", lambda: normal_fill_kernel(key, out))):
        best = math.inf
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - t0)
        draws[name] = best
        records.append(record(f"noise-draw-{name}", "seconds_per_draw", best, "s", shape=[M, M], **common))
    ratios = [
        # the float64 Laplace draw is about half of a numpy DPSGD iteration; the fused step removes that and the
        # temporaries of the numpy update, so a clear gain is expected (the gradient, shared, stays)
        ratio("DPSGD-PNBM seconds per iteration, numpy / fused", dp["numpy"][0] / dp["fused"][0], ">= 1.3"),
        # one chain alone: numpy's float32 ziggurat is about as fast as the in-kernel polar draw, so no target; the
        # DPPS gain comes from sharing the draw across chains (next ratio)
        ratio("DPPS-PNBM seconds per SGLD step, numpy / fused", sg["numpy"][0] / sg["fused"][0], None),
        ratio("DPPS-PNBM seconds per chain-step, numpy single chain / fused 8 chains in lockstep",
              sg["numpy"][0] / (batch / len(chains)), ">= 1.5"),
        ratio("DPSGD-PNBM seconds per run (grid point), numpy / fused", dp["numpy"][1] / dp["fused"][1], None),
        ratio("DPPS-PNBM seconds per run (grid point), numpy / fused", sg["numpy"][1] / sg["fused"][1], None),
        ratio("Laplace M×M draw, numpy float64 / fused float32",
              draws["laplace-numpy-float64"] / draws["laplace-fused-float32"], None),
    ]
    return {"records": records, "ratios": ratios}
