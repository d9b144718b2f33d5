"""Process run under valgrind/cachegrind by :mod:`dpmf_lib.experiments.liu_table2` (not a notebook module).

``python -m dpmf_lib.experiments._liu_cachegrind_driver FILE.npz D EPOCHS {run|baseline}``: loads a stored layout
(users, items, values, seg), allocates U, V, biases (constant 0.01: values do not change the access pattern), loads
(or compiles) the one-thread C-SGD kernel on a tiny problem, and — unless ``baseline`` — runs EPOCHS passes over the
stored ratings. The baseline does everything but the passes, so run − baseline counts only the kernel's references.
Imports are kept minimal (numpy, numba, the kernel module) to keep the valgrind run short.
"""

import sys

import numpy as np


def main(argv):
    path, d, epochs, mode = argv[0], int(argv[1]), int(argv[2]), argv[3]
    from dpmf_lib.mf.csgd import _sgd_epoch_serial

    z = np.load(path)
    users, items, values, seg = z["users"], z["items"], z["values"], z["seg"]
    n_users, n_items = int(z["n_users"]), int(z["n_items"])
    U = np.full((n_users, d), 0.01, dtype=np.float32)
    V = np.full((n_items, d), 0.01, dtype=np.float32)
    bu = np.zeros(n_users, np.float32)
    bi = np.zeros(n_items, np.float32)
    f = np.float32
    s2 = np.array([0, 2], dtype=np.int64)
    _sgd_epoch_serial(users[:2].copy(), items[:2].copy(), values[:2].copy(), s2, U, V, bu, bi, f(3), f(1e-3), f(0),
                      f(0), 2)  # load/compile outside the measured part (the baseline does this too)
    if mode == "run":
        for t in range(epochs):
            _sgd_epoch_serial(users, items, values, seg, U, V, bu, bi, f(3), f(1e-3), f(5e-3), f(5e-3),
                              int(z["prefetch"]))
    print("ok", float(U.sum()))


if __name__ == "__main__":
    main(sys.argv[1:])
