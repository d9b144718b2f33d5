"""Benchmark of count-sketch matrix factorization (Balu 2016, chapter 4): SGD updates per second of the count sketch
(k = 1, i.e. feature hashing, and k = 4) against dense MF at d = 32 on the same training ratings, and the model bytes.

``quick``: ML-100K (real), 80 % training split, γ = 1 and γ = 8, best of 3 timed epochs after a warm-up epoch.
``paper``: the same on the ML-1M stand-in (or real ML-1M when fetched), best of 5.
One update = one rating processed (read p̃_u, q̃_i, write 2·k·d cells for a sketch; 2·d for dense). Hashes are computed
on the fly (splitmix64 finalizer), so the sketch's bytes are its cells only. Times are wall-clock on a shared machine:
compare the ratios from one run, not absolute numbers across runs.
"""

from __future__ import annotations

import math
import time

import numpy as np

from . import ratio, record
from ..sketch.model import make_model
from ..sketch.protocol import load_dataset, prepare_split

PROFILES = {"quick": {"dataset": "ml-100k", "repeats": 3}, "paper": {"dataset": "ml-1m", "repeats": 5}}
D = 32


def _updates_per_s(model, tr, repeats: int, seed: int = 0) -> float:
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(tr)).astype(np.int64)
    model.sgd_epoch(tr.users, tr.items, tr.values, order, 0.005, 0.05, math.inf)  # warm-up / compile
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        model.sgd_epoch(tr.users, tr.items, tr.values, order, 0.005, 0.05, math.inf)
        best = min(best, time.perf_counter() - t0)
    return len(tr) / best


def run(profile: str = "quick") -> dict:
    cfg = PROFILES[profile]
    r = load_dataset(cfg["dataset"])
    data = prepare_split(r, 0)
    tr = data.train
    records, speed, nbytes = [], {}, {}
    variants = [("regular", None, 1.0), ("feature_hashing", 1, 1.0), ("count_sketch", 4, 1.0),
                ("feature_hashing", 1, 8.0), ("count_sketch", 4, 8.0)]
    for method, k, gamma in variants:
        m = make_model(method, data.n_users, data.n_items, D, gamma=gamma, k=k, seed=0)
        key = (method, m.k, gamma)
        speed[key] = _updates_per_s(m, tr, cfg["repeats"])
        nbytes[key] = m.nbytes
        common = dict(method=method, k=m.k, w=m.w, gamma=gamma, d=D, dataset=r.source.label, n_train=len(tr))
        records.append(record(f"sgd-{method}-k{m.k}-g{gamma:g}", "updates_per_s", speed[key], "ratings/s", **common))
        records.append(record(f"bytes-{method}-k{m.k}-g{gamma:g}", "model_bytes", nbytes[key], "bytes", **common))
    dense = speed[("regular", 1, 1.0)]
    ratios = [
        # thesis 4.1.1: retrieval cost grows from O(d) to O(kd); dense should be the fastest per update
        ratio("dense / count sketch k=4 updates/s (gamma=1)", dense / speed[("count_sketch", 4, 1.0)], None),
        ratio("dense / feature hashing updates/s (gamma=1)", dense / speed[("feature_hashing", 1, 1.0)], None),
        ratio("feature hashing / count sketch k=4 updates/s (gamma=1)",
              speed[("feature_hashing", 1, 1.0)] / speed[("count_sketch", 4, 1.0)], ">= 1"),
        # eq. 4.9: the space gain is what it says
        ratio("dense bytes / count sketch k=4 bytes (gamma=1)", nbytes[("regular", 1, 1.0)] / nbytes[("count_sketch", 4, 1.0)], ">= 0.999"),
        ratio("dense bytes / count sketch k=4 bytes (gamma=8)", nbytes[("regular", 1, 1.0)] / nbytes[("count_sketch", 4, 8.0)], ">= 7.99"),
    ]
    return {"records": records, "ratios": ratios}
