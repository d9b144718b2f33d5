"""``python -m dpmf_lib.bench lsh``: binary sketches (thesis chapter 5) against faiss, one thread, same data, same run.

Records:
- encoding rate (vectors/s) of qoLSH (d=8, L=16, M=5 — Table 5.1's setting — and d=128, L=256, M=10 — SIFT1M's),
  of our project-and-sign LSH, and of faiss ``IndexLSH`` (``sa_encode``; faiss' random rotation — needed for L > d, an
  orthonormal L × d projection, i.e. LSH+frame — and thresholds 0: project-and-sign) on the same unit vectors;
- Hamming k-NN scan (ms/query) of our popcount kernel (:func:`dpmf_lib.lsh.hamming_knn`: the SIMD block scan),
  of the previous default (the scalar threshold scan, kept as a record) and of faiss ``IndexBinaryFlat.search`` over
  the same packed 256-bit codes (uniform random bits: the scan's cost hardly depends on the bits), for k = 1,000 (the
  thesis' shortlist) and k = 10; records say whether the answers are identical and whether they are equivalent up to
  the order of ties (:func:`knn_equivalent`; a ratio is reported as inf if not). Working set: the codes' bytes beside
  the L2/L3 sizes.

Ratios: the thesis' 3.89 µs/vector over our qoLSH time at d=8, L=16, M=5 (≥ 10); like for like:
our project-and-sign LSH encode time over faiss ``IndexLSH``'s (the same operation), our qoLSH time over our LSH
time (what the M greedy flips cost on top of project-and-sign), and our scan time over faiss' at k = 10 and k = 1,000
on 1M codes with 100 queries (≤ 1.0). Times are the best of ``repeats`` runs, interleaved with the order reversed
every other repeat (:func:`dpmf_lib.bench.paired.best_times`: with a fixed order the call right after the heavy
qoLSH encode runs slower, which would be charged to the same side every time); the machine is shared, so absolute
values drift — the ratios are taken from records of the same run.
"""

from __future__ import annotations

import numpy as np

from . import ratio, record

PAPER_QOLSH_US = 3.89  # Table 5.1, qoLSH, µs per vector

# Short timed calls repeated many times, best kept: on a shared machine the best of many short runs is the one least
# disturbed by other processes (both sides of every ratio are measured the same way, interleaved, ABBA order).
PROFILES = {
    "quick": {"n_encode_small": 20_000, "n_encode_large": 2_000, "n_codes": 1_000_000, "n_queries": 100, "repeats": 30,
              "scan_repeats": 4},
    "paper": {"n_encode_small": 20_000, "n_encode_large": 2_000, "n_codes": 1_000_000, "n_queries": 1000,
              "repeats": 40, "scan_repeats": 5},
}


def knn_equivalent(queries, codes, oi, od, fi, fd) -> bool:
    """Two k-NN answers agree up to the order of ties: the same distance rows, every returned id really at its reported
    distance, and the same ids strictly below each row's k-th distance (ids at the k-th distance may differ: faiss
    does not promise which of the tied rows it keeps)."""
    oi, od, fi, fd = (np.asarray(a) for a in (oi, od, fi, fd))
    if oi.shape != fi.shape or not np.array_equal(od, fd):
        return False
    if (oi < 0).any() or (fi < 0).any():
        return bool(np.array_equal(oi, fi))
    if any(len(set(row.tolist())) != len(row) for ids in (oi, fi) for row in ids):
        return False  # a row listed twice
    for ids, dist in ((oi, od), (fi, fd)):
        x = queries[:, None, :] ^ codes[ids]
        true = np.unpackbits(x.view(np.uint8), axis=-1).sum(-1)
        if not np.array_equal(true, dist):
            return False
    kth = od[:, -1:]
    for a in range(len(oi)):
        below = od[a] < kth[a]
        if set(oi[a][below].tolist()) != set(fi[a][fd[a] < kth[a]].tolist()):
            return False
    return True


def run(profile: str = "quick") -> dict:
    import faiss

    from .. import lsh
    from ..lsh import _kernels as K
    from ..lsh.experiment_util import single_thread
    from .paired import best_times
    from .machine import cache_sizes

    caches = cache_sizes()

    cfg = PROFILES[profile]
    reps = cfg["repeats"]
    records, ratios = [], []
    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(0)
    with single_thread():
        # ------------------------------------------------------------------ encoding
        us = {}
        for d, L, M, n in ((8, 16, 5, cfg["n_encode_small"]), (128, 256, 10, cfg["n_encode_large"])):
            X = lsh.random_unit_vectors(n, d, rng)
            W = lsh.tight_frame(d, L, rng)
            idx = faiss.IndexLSH(d, L, True, False)  # L > d needs faiss' random rotation (an L x d tight frame)
            idx.train(X[:1000])
            # the like-for-like pair next to each other, the heavy qoLSH call last (see paired.best_times)
            fns = [lambda: lsh.encode_lsh_packed(X, W), lambda: idx.sa_encode(X), lambda: lsh.encode_qolsh(X, W, M)]
            for f in fns:
                f()  # warm-up (numba compilation, faiss allocation)
            t_lsh, t_fa, t_qo = best_times(fns, reps)
            common = dict(d=d, L=L, n=n, threads=1, X_bytes=int(X.nbytes), W_bytes=int(W.nbytes),
                          codes_bytes=int(n * ((L + 63) // 64) * 8), L2_bytes=caches.get("L2"), L3_bytes=caches.get("L3"))
            records += [record("encode_qolsh", "rate", n / t_qo, "vectors/s", M=M, **common),
                        record("encode_qolsh", "time", t_qo / n * 1e6, "us/vector", M=M, **common),
                        record("encode_lsh_ours", "rate", n / t_lsh, "vectors/s", **common),
                        record("encode_faiss_IndexLSH", "rate", n / t_fa, "vectors/s", **common)]
            us[(d, L)] = t_qo / n * 1e6
            ratios.append(ratio(f"lsh_encode_ours_time_over_faiss_IndexLSH_d{d}_L{L}", t_lsh / t_fa, "<= 1"))
            ratios.append(ratio(f"qolsh_encode_time_over_our_lsh_d{d}_L{L}_M{M}", t_qo / t_lsh, None))
        ratios.append(ratio("paper_qolsh_us_over_ours_d8_L16_M5", PAPER_QOLSH_US / us[(8, 16)], ">= 10"))

        # ------------------------------------------------------------------ Hamming scan
        n, nq = cfg["n_codes"], cfg["n_queries"]
        codes = rng.integers(0, np.iinfo(np.uint64).max, size=(n, 4), dtype=np.uint64, endpoint=True)
        queries = rng.integers(0, np.iinfo(np.uint64).max, size=(nq, 4), dtype=np.uint64, endpoint=True)
        index = faiss.IndexBinaryFlat(256)
        index.add(codes.view(np.uint8))
        ws = dict(codes_bytes=int(codes.nbytes), queries_bytes=int(queries.nbytes), L2_bytes=caches.get("L2"),
                  L3_bytes=caches.get("L3"))
        for k in (10, 1000):
            lsh.hamming_knn(queries[:1], codes, k, n_bits=256)  # compile / load the cached kernels
            K.hamming_knn_kernel(queries[:4], codes, k, 256, "threshold")
        for k in (1000, 10):
            ours, theirs, prev = {}, {}, {}
            t_ours, t_fa, t_prev = best_times(
                [lambda: ours.update(r=lsh.hamming_knn(queries, codes, k, n_bits=256)),
                 lambda: theirs.update(r=index.search(queries.view(np.uint8), k)),
                 lambda: prev.update(r=K.hamming_knn_kernel(queries, codes, k, 256, "threshold"))],
                cfg["scan_repeats"])
            (oi, od), (fd, fi) = ours["r"], theirs["r"]
            same = bool(np.array_equal(oi, fi) and np.array_equal(od, fd))
            equiv = knn_equivalent(queries, codes, oi, od, fi, fd)
            same_prev = bool(np.array_equal(prev["r"][0], oi) and np.array_equal(prev["r"][1], od))
            common = dict(n_codes=n, bits=256, k=k, n_queries=nq, threads=1, identical_results=same,
                          equivalent_results=equiv, **ws)
            records += [record("hamming_knn_ours", "time", t_ours / nq * 1e3, "ms/query", kernel="simd", **common),
                        record("hamming_knn_ours_threshold_scan", "time", t_prev / nq * 1e3, "ms/query",
                               kernel="threshold (previous default)", same_as_simd=same_prev, **common),
                        record("hamming_knn_faiss_IndexBinaryFlat", "time", t_fa / nq * 1e3, "ms/query", **common),
                        record("hamming_knn_ours", "rate", n * nq / t_ours / 1e9, "Gdistances/s", **common)]
            ratios.append(ratio(f"hamming_scan_ours_over_faiss_k{k}_n{n}_q{nq}", t_ours / t_fa if equiv else np.inf,
                                "<= 1.0"))
    return {"records": records, "ratios": ratios}
