"""This machine's ceilings: sequential read bandwidth from L1-, L2-, L3- and RAM-sized buffers, and single-core fp32
FMA throughput — the yardsticks the kernel benchmarks report their achieved GB/s and GFLOP/s against.

Method. Bandwidth: a numba kernel sums a float32 buffer of the given size (a plain loop that LLVM vectorises and interleaves under
fastmath), repeated until ~``min_time`` seconds; the best of ``repeats`` timings counts
(the ceiling is what the machine can do, not its average under other load). Buffer sizes are half of each cache level
as the OS reports it (``/sys/devices/system/cpu/cpu0/cache``), and 8x the L3 for RAM. FMA: ``acc = acc * a + b`` on 256
independent float32 lanes held in registers, 2 flops per FMA; the same loop on 1 and 2 threads (one copy per
thread, ``prange``) gives the machine's own 1 -> 2 thread scaling, the yardstick for a kernel's. First touch (``run``
only): GB/s of the first write to freshly allocated memory (page faults + zeroing), the floor under any kernel
that allocates its output.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import numba
from numba import njit, prange

from ..atomics import load_acquire, store_release
from . import record

DEFAULT_CACHES = {"L1d": 32 * 1024, "L2": 1024 * 1024, "L3": 32 * 1024 * 1024}


def cache_sizes() -> dict:
    """Data/unified cache sizes per level in bytes, as the OS reports them (falls back to typical sizes)."""
    out = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")):
        try:
            level = (idx / "level").read_text().strip()
            kind = (idx / "type").read_text().strip()
            size = (idx / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        mult = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(size[-1], 1)
        out["L1d" if level == "1" else f"L{level}"] = int(size.rstrip("KMG")) * mult
    return out or dict(DEFAULT_CACHES)


@njit(cache=True, fastmath=True)
def _sum_repeated(buf, reps):
    # A plain loop: with fastmath LLVM vectorises and interleaves the partial sums itself, which measured faster
    # here than hand-written 8- or 64-way accumulators.
    total = np.float32(0.0)
    for _ in range(reps):
        s = np.float32(0.0)
        for i in range(buf.shape[0]):
            s += buf[i]
        total += s
    return total


FMA_LANES = 256  # enough independent chains to cover FMA latency x units on current x86 cores (measured: 64 -> 125,
# 128 -> 222, 256 -> 251 GFLOP/s on the Zen core this was written on)


@njit(cache=True, fastmath=True)
def _fma_loop(n, a, b):
    acc = np.empty(FMA_LANES, dtype=np.float32)
    for j in range(FMA_LANES):
        acc[j] = np.float32(j) * np.float32(1e-3)
    for _ in range(n):
        for j in range(FMA_LANES):
            acc[j] = acc[j] * a + b
    return acc.sum()


@njit(cache=True, fastmath=True, parallel=True)
def _fma_loop_threads(n, a, b, copies):
    out = np.empty(copies, dtype=np.float32)
    for c in prange(copies):
        out[c] = _fma_loop(n, a, b)
    return out.sum()


def _best_time(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def read_bandwidth(nbytes: int, *, min_time: float = 0.05, repeats: int = 5) -> float:
    """Best sequential read bandwidth in GB/s (1e9 bytes/s) over a float32 buffer of ``nbytes``."""
    buf = np.ones(max(64, nbytes // 4), dtype=np.float32)
    _sum_repeated(buf[:64], 1)  # compile outside the clock
    reps = 1
    while True:
        t = _best_time(lambda: _sum_repeated(buf, reps), 1)
        if t >= min_time or reps > 1 << 24:
            break
        reps *= 2
    t = _best_time(lambda: _sum_repeated(buf, reps), repeats)
    return buf.nbytes * reps / t / 1e9


def fma_gflops(*, n: int = 2_000_000, repeats: int = 5) -> float:
    """Best single-core fp32 FMA throughput in GFLOP/s (2 flops per fused multiply-add)."""
    a, b = np.float32(0.999999), np.float32(1e-7)
    _fma_loop(10, a, b)
    t = _best_time(lambda: _fma_loop(n, a, b), repeats)
    return 2.0 * FMA_LANES * n / t / 1e9


def fma_gflops_threads(threads: int, *, n: int = 2_000_000, repeats: int = 5) -> float:
    """Best fp32 FMA throughput of ``threads`` numba threads together, each running :func:`_fma_loop` on its own
    lanes (GFLOP/s summed over threads). On an idle 2-core machine 2 threads give ~2x one; a kernel's 1 -> 2 thread
    scaling is read against this, not against 2."""
    a, b = np.float32(0.999999), np.float32(1e-7)
    old = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        _fma_loop_threads(10, a, b, threads)
        t = _best_time(lambda: _fma_loop_threads(n, a, b, threads), repeats)
    finally:
        numba.set_num_threads(old)
    return 2.0 * FMA_LANES * n * threads / t / 1e9


# Below this 1 -> 2 thread scaling of the FMA loop the host ran both threads on one physical core: the middle of
# the gap between the two placements seen here (0.95-1.01 on one core, 1.93-2.02 on two; the one sample of 1.78 had a
# shared-line cost of 9.8 ns, a two-core value: see fma_scaling_probe)
TWO_CORE_FMA_SCALING = 1.5


def fma_scaling_probe(*, n: int = 1_000_000, repeats: int = 3) -> float:
    """The FMA loop's 1 -> 2 thread scaling through the parallel backend, both sides timed now (~25 ms): where the
    host runs this process's two threads at this moment.

    Why: this VM's two vCPUs are not always on two physical cores (SMT siblings, or both on one hardware thread),
    and the placement changes within seconds, so one reading at the start of a run cannot vouch for a 2-thread
    timing taken minutes later: the ``mf`` suite probes beside each 2-thread measurement. The probe sees whether the
    two threads share a core, not whether their cores share a cache (:func:`core_to_core_ns`). Samples in
    docs/performance.md."""
    return fma_gflops_threads(2, n=n, repeats=repeats) / fma_gflops_threads(1, n=n, repeats=repeats)


# Above this one-way core-to-core latency the host ran our two threads on cores that share no cache: about the
# middle of the gap seen here (41-49 ns on two cores of one L3, 162-170 ns otherwise; see core_to_core_ns)
SHARED_CACHE_C2C_NS = 100.0
# spins in all of one ping-pong's waits before it gives up: ~0.1-0.3 s. A per-wait limit was not enough: with both
# threads time-sliced on one CPU every hand-over waits a scheduler slice (ms), under any per-wait limit, for minutes
_SPIN_BUDGET = 200_000_000


@njit(parallel=True)
def _ping_pong(flag, n, spin_budget):
    """Two threads hand a counter back and forth ``n`` times through ``flag[0]`` (int64; start at 0). Returns 0, or
    -1 if one side's waits took more than ``spin_budget`` spins in all (the other side never ran, or ran only in
    turns with it on one CPU); the aborting side sets ``flag[1]`` so that the other stops too."""
    for t in prange(2):
        spins = 0
        for k in range(n):
            want = 2 * k + t
            while load_acquire(flag, 0) != want:
                spins += 1
                if spins > spin_budget or load_acquire(flag, 1) != 0:
                    store_release(flag, 1, 1)
                    break
            if load_acquire(flag, 1) != 0:
                break
            store_release(flag, 0, want + 1)
    return -1 if flag[1] != 0 else 0


def core_to_core_ns(*, n: int = 100_000, repeats: int = 3, spin_budget: int = _SPIN_BUDGET) -> float:
    """One-way latency (ns) of handing a cache line from one of this process's two threads to the other: half a
    round trip of :func:`_ping_pong`, best of ``repeats``. NaN with fewer than two threads or if the hand-over
    stalled (both threads on one CPU in turns: "one core" for the ``mf`` suite's guard too).

    Why: the FMA probe sees whether the two threads share one core, not whether their cores share a cache. The host
    sometimes places the two vCPUs on cores without a shared L3 (another CCD of the EPYC), where every item row the
    two threads share crosses the package and 2-thread C-SGD runs below its 1-thread speed. Takes ~30 ms at 45 ns,
    ~100 ms at 165 ns."""
    if numba.get_num_threads() < 2:
        return float("nan")
    if _ping_pong(np.zeros(2, dtype=np.int64), 10, spin_budget) != 0:  # compiles; a stalled host gives up once
        return float("nan")
    best = float("inf")
    for _ in range(repeats):
        flag = np.zeros(2, dtype=np.int64)
        t0 = time.perf_counter()
        status = _ping_pong(flag, n, spin_budget)
        dt = time.perf_counter() - t0
        if status != 0:
            return float("nan")
        best = min(best, dt)
    return best / n / 2 * 1e9


def host_probe() -> tuple[float, float]:
    """``(fma_scaling_probe(), core_to_core_ns())`` at two threads (needs ``NUMBA_NUM_THREADS`` ≥ 2): where the
    host runs this process's two threads now (one core or two; a shared cache or not), ~50-130 ms. The ``mf``
    suite takes it beside each 2-thread timing."""
    old = numba.get_num_threads()
    numba.set_num_threads(2)
    try:
        return fma_scaling_probe(), core_to_core_ns()
    finally:
        numba.set_num_threads(old)


def fma_scaling(m: dict) -> float | None:
    """The machine's own 1 -> 2 thread FMA scaling from :func:`measure`'s result (None with one thread)."""
    by = m.get("fma_GFLOPs_by_threads")
    return by[2] / by[1] if by else None


def first_touch_gbps(nbytes: int = 256 << 20, *, repeats: int = 3) -> list:
    """GB/s of the first write to freshly allocated memory (one byte per 4 KiB page: the page faults and the kernel's
    zeroing, nothing else), for ``repeats`` allocations in a row, each freed before the next.

    Why: a kernel that fills a new output array pays this before any of its own work. On an ordinary Linux box it
    is a few GB/s; on this VM it ranges over 20x (presumably the hypervisor backing pages the guest had returned; see
    docs/performance.md). The first value is the coldest."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        a = np.empty(nbytes, dtype=np.uint8)
        a[::4096] = 1
        out.append(nbytes / (time.perf_counter() - t0) / 1e9)
        del a
    return out


def measure(profile: str = "quick") -> dict:
    """Ceilings as a dict: ``{"bandwidth_GBps": {"L1d": ..., "L2": ..., "L3": ..., "RAM": ...}, "fma_GFLOPs": ...}``,
    and, where numba has 2 threads, ``"fma_GFLOPs_by_threads"``: {1: ..., 2: ...} through the same parallel loop."""
    caches = cache_sizes()
    quick = profile == "quick"
    sizes = {lvl: caches[lvl] // 2 for lvl in ("L1d", "L2", "L3") if lvl in caches}
    sizes["RAM"] = 8 * caches.get("L3", DEFAULT_CACHES["L3"])
    bw = {lvl: read_bandwidth(n, min_time=0.03 if quick else 0.2, repeats=3 if quick else 7) for lvl, n in sizes.items()}
    n_fma, rep_fma = (1_000_000, 3) if quick else (10_000_000, 7)
    out = {"caches_bytes": caches, "buffer_bytes": sizes, "bandwidth_GBps": bw,
           "fma_GFLOPs": fma_gflops(n=n_fma, repeats=rep_fma)}
    if numba.config.NUMBA_NUM_THREADS >= 2:  # both through the same parallel loop, so the ratio is like for like
        out["fma_GFLOPs_by_threads"] = {t: fma_gflops_threads(t, n=n_fma, repeats=rep_fma) for t in (1, 2)}
    return out


def run(profile: str = "quick") -> dict:
    # first touch before anything else allocates (later allocations would reuse freed pages) and outside measure(),
    # which the mf suite calls before timing its layout, whose fresh arrays would then reuse these pages
    touch = first_touch_gbps(256 << 20, repeats=3)
    m = measure(profile)
    records = [record("read_bandwidth", "bandwidth", v, "GB/s", level=lvl, buffer_bytes=m["buffer_bytes"][lvl],
                      threads=1) for lvl, v in m["bandwidth_GBps"].items()]
    records.append(record("fma_throughput", "throughput", m["fma_GFLOPs"], "GFLOP/s", dtype="float32", threads=1))
    for t, v in m.get("fma_GFLOPs_by_threads", {}).items():
        records.append(record("fma_throughput_parallel_loop", "throughput", v, "GFLOP/s", dtype="float32", threads=t))
    for lvl, size in m["caches_bytes"].items():
        records.append(record("cache_size", "size", size, "bytes", level=lvl))
    for k, v in enumerate(touch):
        records.append(record("first_touch", "bandwidth", v, "GB/s", buffer_bytes=256 << 20, allocation=k + 1,
                              threads=1))
    bw = m["bandwidth_GBps"]
    ratios = []
    if "L1d" in bw and "RAM" in bw:
        from . import ratio

        ratios.append(ratio("L1_over_RAM_bandwidth", bw["L1d"] / bw["RAM"], "> 1"))
    if "fma_GFLOPs_by_threads" in m:
        from . import ratio

        ratios.append(ratio("fma_scaling_1_to_2_threads", fma_scaling(m), None))
    return {"records": records, "ratios": ratios}
