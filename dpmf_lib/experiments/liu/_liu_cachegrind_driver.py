"""Process run under valgrind by :mod:`dpmf_lib.experiments.liu.liu_table2` (not a notebook module).

``python -m dpmf_lib.experiments.liu._liu_cachegrind_driver FILE.npz D EPOCHS``: FILE holds several stored layouts (row
``k``: ``users_k``, ``items_k``, ``values_k``, ``seg_k``, ``prefetch_k``; ``n_rows``, ``n_users``, ``n_items``). The
driver loads (or compiles) the one-thread C-SGD kernel on a tiny problem, loads every layout, then measures:

* a **null segment**: ``marker(); marker()`` with nothing between (the cost of the marker calls themselves);
* per row: fresh U, V, biases (constant 0.01: values do not change the access pattern), ``marker()``, EPOCHS passes
  over the row's ratings with its prefetch stride, ``marker()``.

``marker()`` is ``os.getppid()``: run under ``valgrind --tool=callgrind --dump-before=getppid`` every call dumps the
counters gathered since the previous one and zeroes them, so each row's passes are counted in a dump of their own
(dump ``4 + 2k`` for row ``k``; dump 2 is the null segment). Every row thus starts from the same cache state as the
others would in a process of their own, up to the lines the previous row left behind (fresh U and V arrays: the
item and user vectors are not among them). Prints one line ``markers N`` with the number of marker calls so the
caller can check that nothing else in the process called ``getppid``, then one line ``compiled N``: how many kernel
signatures this process compiled instead of loading them from numba's on-disk cache.

``... FILE.npz D EPOCHS compile-only`` (run *outside* valgrind, with the environment the valgrind run will have)
stops after the tiny call: it fills numba's cache for the CPU name and features the valgrind run's numba will use
(:func:`dpmf_lib.experiments.liu.liu_table2.valgrind_cpu`), so the simulated process loads the kernel instead of
compiling it under valgrind (on a fresh clone that compile would take most of ``liu_table2``'s ``ci`` run).
"""

import os
import sys

import numpy as np


def marker():
    os.getppid()


def main(argv):
    path, d, epochs = argv[0], int(argv[1]), int(argv[2])
    from dpmf_lib.mf.sgd_kernels import _sgd_epoch_serial

    z = np.load(path)
    n_rows, n_users, n_items = int(z["n_rows"]), int(z["n_users"]), int(z["n_items"])
    rows = [tuple(np.ascontiguousarray(z[f"{k}_{i}"]) for k in ("users", "items", "values", "seg")) + (int(z[f"prefetch_{i}"]),)
            for i in range(n_rows)]
    f = np.float32
    s2 = np.array([0, 2], dtype=np.int64)
    U = np.full((n_users, d), 0.01, dtype=np.float32)
    V = np.full((n_items, d), 0.01, dtype=np.float32)
    bu = np.zeros(n_users, np.float32)
    bi = np.zeros(n_items, np.float32)
    users, items, values = rows[0][0], rows[0][1], rows[0][2]
    _sgd_epoch_serial(users[:2].copy(), items[:2].copy(), values[:2].copy(), s2, U, V, bu, bi, f(3), f(1e-3), f(0),
                      f(0), 2)  # load/compile outside every measured segment
    stats = getattr(_sgd_epoch_serial, "stats", None)  # a plain function when a test stands in for the kernel
    compiled = sum(stats.cache_misses.values()) if stats is not None else 0
    if len(argv) > 3 and argv[3] == "compile-only":
        print("compiled", compiled)
        return
    n_markers = 0
    marker(); marker()  # noqa: E702  (null segment: the markers' own cost)
    n_markers += 2
    total = 0.0
    for users, items, values, seg, pf in rows:
        U = np.full((n_users, d), 0.01, dtype=np.float32)
        V = np.full((n_items, d), 0.01, dtype=np.float32)
        bu = np.zeros(n_users, np.float32)
        bi = np.zeros(n_items, np.float32)
        marker()
        for _ in range(epochs):
            _sgd_epoch_serial(users, items, values, seg, U, V, bu, bi, f(3), f(1e-3), f(5e-3), f(5e-3), pf)
        marker()
        n_markers += 2
        total += float(U.sum())
    print("markers", n_markers, total)
    print("compiled", compiled)


if __name__ == "__main__":
    main(sys.argv[1:])
